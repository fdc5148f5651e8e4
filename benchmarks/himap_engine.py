"""bench_himap --engine: replay trips' texts through the real RolloutEngine with a tiny random model,
so prefill and prefix reuse are the engine's own counts (EngineStats), not the benchmark's estimate.

The decode-step clock of bench_himap counts a HiMAP episode's shared prefix as the longest common
token prefix of an executor prompt with an earlier executor prompt of the trip. The engine
(rollout/prefix.py) copies the longest common prefix with whatever any resident row holds, a
coordinator's record included, and only when it is at least `prefix_min_tokens` long. Here the
engine decides. Each turn's text is teacher-forced without its <|im_end|>; with one sampled token
per turn the model must sample, so the stream is prefilled first (a fully forced turn never
reaches the model), and the turn cap closes the turn. The episode hands the session the script's
text, whatever token the random model appended, so the episode is the scripted one (same answer).
Forced turn tokens are prefilled instead of decoded, so the context the engine computed is its
prefilled tokens minus the turns' tokens (the benchmark's "generated").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rollout.agents.himap import HimapEpisode
from rollout.agents.single import ForcedTokens
from rollout.episodes import TurnOutcome

ROWS = 12  # more rows than a 7-day team's streams: nothing is parked, every prefix stays resident


class HimapReplay(HimapEpisode):
    """A HiMAP episode whose every turn is the script's text (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.current: dict[str, str] = {}

    def _forced(self, stream: str) -> list[int]:
        texts = self.forced.get(stream)
        if not texts:
            return []
        self.current[stream] = texts.pop(0)
        return self.tokenizer.encode(self.current[stream])  # no <|im_end|>: one token is sampled

    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        return super().on_turn_end(stream, self.current.pop(stream), False)


class SingleReplay(ForcedTokens):
    """The single agent's episode, every turn the script's text."""

    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        return super().on_turn_end(stream, self.forced_turns[self._turn], False)


def engine_counts(s: Any, visible: dict, texts: Any, options: Any | None, reply_chars: int) -> dict[str, Any]:
    """Replay one episode (options None: the single agent's `texts`, a list; else a HiMAP team's
    `texts`, stream -> turns) and return the engine's counts and the episode's answer."""
    from flax import nnx

    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM
    from rollout import RolloutConfig, RolloutEngine
    from rollout.prompt import prompt_ids
    from sandbox.env import EpisodeEnv
    from sandbox.himap.protocol import HimapSession

    if options is None:
        prompt = s.bench.prompt(visible, variant="tool_agent", memory=True)
        world = s.bench.world_for(visible)
        env = EpisodeEnv(world, memory_enabled=True, max_turns=len(texts) + 1, max_response_chars=reply_chars)
        episode: Any = SingleReplay(
            str(visible["id"]), prompt_ids(prompt, s.tok), env, s.tok, forced_turns=dict(enumerate(texts))
        )
    else:
        options = dataclasses.replace(options, max_response_chars=reply_chars)
        session = HimapSession(s.bench.himap_domain(visible), options)
        episode = HimapReplay(str(visible["id"]), session, s.tok, forced=texts)
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=s.tok.vocab_size)
    config = RolloutConfig(
        batch_rows=ROWS,
        max_turns=32,
        max_turn_tokens=1,
        turn_cap="close",
        max_seq_len=32768,
        temperature=0.0,
        prefill_chunk=1024,
    )
    engine = RolloutEngine(Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0)), s.tok, config)
    records = engine.run([episode], rng=0)
    st = engine.stats
    answer = episode.answer if options is not None else next((r.answer for r in records), None)
    return {
        "computed": st.prefill_tokens,
        "copied": st.reused_tokens,
        "reprefilled": st.reprefill_tokens,
        "record_tokens": sum(len(r.ids) for r in records),
        "answer": answer,
    }
