"""Shared pieces of the rollout tests: a tiny random Qwen3 model, a SentencePiece tokenizer trained
on the spot, the real small sandbox world, and episode builders that drive the real environment."""

from __future__ import annotations

import dataclasses
import json

import pytest

# Every engine in these tests uses these static shapes, so each jitted function compiles once:
# batch 3, decode segment 8 (bucket of max_turn_tokens <= 8), prefill width 64, cache 1024.
BATCH = 3
TOTAL = 1024


def engine_config(**overrides):
    from rollout import RolloutConfig

    base = dict(
        batch_rows=BATCH,
        max_turns=6,
        max_turn_tokens=6,
        max_seq_len=TOTAL,
        cache_len=TOTAL,  # also for shorter max_seq_len: one cache shape, one compile
        temperature=0.0,
        prefill_chunk=64,
        prefill_min_bucket=64,
        turn_cap="close",
        tool_workers=4,
        # every shared prefix is copied, however short: the record-identity tests exercise reuse
        prefix_min_tokens=1,
    )
    base.update(overrides)
    return RolloutConfig(**base)


@dataclasses.dataclass
class Setup:
    world: object
    tokenizer: object
    model: object


@pytest.fixture(scope="session")
def rollout_setup(tmp_path_factory):
    from flax import nnx

    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM
    from models.spm import SentencePieceTokenizer, train_sentencepiece
    from sandbox.benchmarks import b2t
    from tests.sandbox_fixtures import small_world_file

    root = tmp_path_factory.mktemp("rollout")
    world = b2t.B2TTools(b2t.open_world(small_world_file(tmp_path_factory)))
    corpus = (
        [json.dumps(b2t.tool_schemas(python=True))] * 3
        + [
            world.call_tool("AttractionSearch", {"city": c, "n": 5}).text
            for c in ("Chengdu", "Beijing", "Shanghai")
        ]
        + ["Plan a 3-day trip from Shanghai to Chengdu for two people, budget 6000 CNY. " * 20]
    )
    tok = SentencePieceTokenizer(train_sentencepiece(corpus, root / "spm", vocab_size=1000))
    # A wider init than Qwen's 0.02 gives logits with real spread (no near-ties in greedy tests).
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=tok.vocab_size, initializer_range=0.1)
    model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))
    return Setup(world, tok, model)


def user_prompt(tokenizer, text: str) -> tuple[list[dict], list[int]]:
    """A one-message conversation and its token ids (with the assistant generation header)."""
    from models.chat import render

    messages = [{"role": "user", "content": text}]
    return messages, tokenizer.encode(render(messages, add_generation_prompt=True))


def forced_episode(
    setup: Setup,
    name: str,
    prompt_text: str,
    forced_turns: dict[int, str],
    *,
    env_max_turns: int = 20,
    python_tool=None,
    memory: bool = True,
):
    from rollout import ForcedTokens
    from sandbox.env import EpisodeEnv

    messages, ids = user_prompt(setup.tokenizer, prompt_text)
    env = EpisodeEnv(
        setup.world,
        memory_enabled=memory,
        python_tool=python_tool,
        max_turns=env_max_turns,
        max_response_chars=300,
    )
    episode = ForcedTokens(name, ids, env, setup.tokenizer, forced_turns=forced_turns)
    episode.messages = messages
    return episode


SEARCH = (
    '<think>\nfind sights\n</think>\n\n<tool_call>\n{"name": "AttractionSearch", "arguments": '
    '{"city": "Chengdu", "n": 1}}\n</tool_call>'
)
MEMORY = (
    '<think>\nremember\n</think>\n\n<memory>{"action": "write", "key": "city", "value": "Chengdu"}</memory>'
)
ANSWER = "<think>\ndone\n</think>\n\n<answer>[]</answer><|im_end|>"


def folded_conversations(prompt: list[dict], steps, segments, tokenizer, keep_turns: int):
    """(record, its messages) per segment of a single agent whose context was folded
    (rollout/context.py): the prompt messages, the episode's turns so far as sampled, each reply
    block whole or as its stub (whichever the segment's text holds), so that a test holds the
    segment to a chat template. Asserts what may fold: tool blocks older than the turns kept."""
    turns = [tokenizer.decode(r.ids[a : b - 1]) for r in segments for a, b in r.turns]
    done, out = 0, []  # turns of the episode before this segment
    for record in segments:
        text = tokenizer.decode(record.ids)
        messages = list(prompt)
        last = done + len(record.turns)
        for k in range(last):
            messages.append({"role": "assistant", "content": turns[k]})
            if k == last - 1:
                break
            for response in steps[k].responses:
                stub = response.folded(len(tokenizer.encode_text(response.content)))
                kept = response.render() in text
                assert kept or stub.render() in text
                if not kept:  # folded at a fold this segment's context went through
                    assert response.kind == "tool" and k < done - keep_turns
                messages.append({"role": "tool", "content": (response if kept else stub).content})
        out.append((record, messages))
        done = last
    return out
