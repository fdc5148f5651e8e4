"""One token format for training and serving (docs/SPEC.md section 6).

The independent renderer is transformers' `apply_chat_template` with the tokenizer `save_hf`
exports (Qwen3's official chat template), run over the same conversations: expert SFT traces of
both benchmarks (single agent and the scripted HiMAP roles) and rollout records the engine writes
when it replays them. Each must equal our layout (`encode_trace`, the record) in text and token
ids, both as the trace's own messages and as an OpenAI-style served conversation
(`reasoning_content`, `tool_calls`, `tool` messages). Every expert assistant turn is in Qwen3's
native `<think>\\n...\\n</think>\\n\\n` form. A conversation without memory replies also renders so
through the official template with jinja2 alone.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from b2tjax.sft.traces import encode_trace, tools_offered
from models.tokenizer import load_tokenizer, qwen3_reference_config
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)

N_TRACES = 25  # per benchmark, as many as the independent check used
# Qwen3's native turn: one reasoning block, no blank line inside its edges, then the actions.
NATIVE = re.compile(r"<think>\n(?!\n)((?:(?!</?think>).)*?)(?<!\n)\n</think>\n\n(?!\n)(?!.*<think>)", re.S)
TOOL_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Our Qwen3 tokenizer and transformers' AutoTokenizer loaded from what `save_hf` exports."""
    from transformers import AutoTokenizer

    tok = load_tokenizer("qwen3")
    out = tmp_path_factory.mktemp("hf_tokenizer")
    tok.save_hf(out)
    hf = AutoTokenizer.from_pretrained(out)
    assert hf.chat_template == qwen3_reference_config()["chat_template"]  # Qwen3's, unchanged
    return tok, hf


@pytest.fixture(scope="module")
def benches(small_benchmark, tmp_path_factory):  # noqa: F811
    """Both benchmarks with their expert SFT traces: the small B2T data and TravelPlanner's 45
    official training queries (make_data, no generated queries)."""
    from sandbox.benchmarks import get_benchmark
    from sandbox.benchmarks.travelplanner.prepare import make_data
    from tests.tp_harness import DATA_DIR

    tp_dir = tmp_path_factory.mktemp("tp_data")
    make_data(
        tp_dir,
        argparse.Namespace(tp_data=DATA_DIR, generated=0, scale="small", seed=3, no_expert=False),
        print,
    )
    return {
        "b2t": get_benchmark("b2t", small_benchmark),
        "travelplanner": get_benchmark("travelplanner", tp_dir),
    }


def _short_himap_pair(bench, name):
    """A train instance of the benchmark made a 2-day trip where the query allows (short records)."""
    visible, truth = (copy.deepcopy(x) for x in bench.load_split("train")[0])
    if name == "b2t":
        from sandbox.benchmarks.b2t.instances.instructions import make_instruction

        truth["query"]["days"] = 2
        visible["instruction"] = make_instruction(random.Random(0), truth["query"], {}, "en")
    return visible, truth


@pytest.fixture(scope="module")
def himap_runs(benches):
    """The scripted HiMAP team (coordinator and day executors) on one instance of each benchmark."""
    from sandbox.himap.options import HimapOptions
    from sandbox.himap.scripted import solve

    out = {}
    for name, bench in benches.items():
        visible, truth = _short_himap_pair(bench, name)
        run = solve(bench, visible, truth, HimapOptions())
        assert run.answer is not None and bench.evaluate(run.answer, visible, truth).all_passed
        out[name] = (visible, run)
    return out


# -- the served view: what an OpenAI-style client sends for the same conversation ---------------
def _served_assistant(text: str) -> dict:
    match = NATIVE.match(text)
    assert match, f"not Qwen3's native turn: {text[:120]!r}"
    rest = text[match.end() :]
    first_call = rest.find("<tool_call>\n")
    content, calls = (rest, "") if first_call < 0 else (rest[:first_call], rest[first_call:])
    tool_calls = []
    for body in TOOL_CALL.findall(calls):
        call = json.loads(body)
        assert list(call) == ["name", "arguments"]
        tool_calls.append({"type": "function", "function": call})
    assert "\n".join(f"<tool_call>\n{b}\n</tool_call>" for b in TOOL_CALL.findall(calls)) == calls
    message = {
        "role": "assistant",
        "reasoning_content": match.group(1),
        "content": content.removesuffix("\n"),
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _served_replies(body: str) -> list[dict]:
    """One environment turn as `tool` messages: the `<tool_response>` blocks' bodies, in order."""
    head, tail = "<tool_response>\n", "\n</tool_response>"
    assert body.startswith(head) and body.endswith(tail)
    parts = body[len(head) : -len(tail)].split(tail + "\n" + head)
    assert len(parts) == body.count(head)
    return [{"role": "tool", "content": part} for part in parts]


def served(messages: list[dict]) -> list[dict]:
    """The trace's conversation as OpenAI-style messages (prompt first, then structured turns)."""
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    out = list(messages[:first])
    for m in messages[first:]:
        out += (
            [_served_assistant(m["content"])] if m["role"] == "assistant" else _served_replies(m["content"])
        )
    return out


def _hf_ids(hf, messages, tools) -> list[int]:
    ids = hf.apply_chat_template(messages, tools=tools, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def assert_renders_as_our_layout(trace: dict, ids: list[int], exported) -> None:
    """`ids` (a trace's encoding or a record) + "\\n" == the exported template on the trace's
    messages and on their served form, in text and in token ids; every turn native."""
    tok, hf = exported
    messages, tools = trace["messages"], trace.get("tools")
    if messages[-1]["role"] != "assistant":  # an environment reply after the last turn trains nothing
        messages = messages[:-1]
    ours = tok.decode(ids) + "\n"
    want_ids = ids + tok.encode("\n")
    for conversation in (messages, served(messages)):
        assert hf.apply_chat_template(conversation, tools=tools, tokenize=False) == ours
        assert _hf_ids(hf, conversation, tools) == want_ids


def _official_jinja(messages, tools) -> str:
    """Qwen3's official template through jinja2 alone (transformers' tojson filter), no transformers."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    template = env.from_string(qwen3_reference_config()["chat_template"])
    return template.render(messages=messages, tools=tools, add_generation_prompt=False)


@pytest.mark.slow  # every expert trace through transformers' chat template
@pytest.mark.parametrize("name", ["b2t", "travelplanner"])
def test_expert_sft_traces_render_as_the_exported_template(name, benches, exported):
    tok, _ = exported
    traces = benches[name].sft_traces()[:N_TRACES]
    assert len(traces) == N_TRACES
    replies = [m["content"] for t in traces for m in t["messages"][2:] if m["role"] == "user"]
    assert any("<memory_response>" in r for r in replies)  # the single agent's memory replies...
    assert any("<memory_response>" in r and "</tool_response>\n<tool_response>\nW" in r for r in replies) or (
        name == "travelplanner"
    )  # ...and B2T's mixed replies (memory and tool results in one turn) are covered
    for trace in traces:
        assert_renders_as_our_layout(
            trace, encode_trace(trace["messages"], trace["tools"], tok)["ids"], exported
        )


@pytest.mark.parametrize("name", ["b2t", "travelplanner"])
def test_himap_role_traces_render_as_the_official_template(name, himap_runs, exported):
    """The scripted coordinator and day executors: no memory replies (memory is off in roles), so
    the official template through jinja2 alone renders them too."""
    tok, _ = exported
    _, run = himap_runs[name]
    roles = {t["role"] for t in run.traces}
    assert roles == {"coordinator", "executor"}
    for trace in run.traces:
        ids = encode_trace(trace["messages"], trace["tools"], tok)["ids"]
        assert_renders_as_our_layout(trace, ids, exported)
        messages = (
            trace["messages"] if trace["messages"][-1]["role"] == "assistant" else trace["messages"][:-1]
        )
        assert _official_jinja(messages, trace["tools"]) == tok.decode(ids) + "\n"


def test_tool_reply_keeps_earlier_reasoning_where_a_bare_memory_reply_would_not(exported):
    """Why memory replies are `<tool_response>`-wrapped: the official template drops the reasoning of
    turns before a user turn it counts as a query, and a bare `<memory_response>` turn is one."""
    turn = "<think>\nwrite it down\n</think>\n\n<memory>{}</memory>"
    memory = "<memory_response>\nStored 'k'\n</memory_response>"
    final = "<think>\ndone\n</think>\n\n<answer>[]</answer>"
    base = [{"role": "user", "content": "plan"}, {"role": "assistant", "content": turn}]
    wrapped = base + [{"role": "user", "content": f"<tool_response>\n{memory}\n</tool_response>"}]
    bare = base + [{"role": "user", "content": memory}]
    end = [{"role": "assistant", "content": final}]
    assert "write it down" in _official_jinja(wrapped + end, None)
    assert "write it down" not in _official_jinja(bare + end, None)


@pytest.fixture(scope="module")
def replayed(benches, himap_runs, exported):
    """The engine replays every expert turn as forced tokens (a tiny random model with the Qwen3
    vocabulary): one single-agent episode per benchmark (its shortest SFT trace) and each
    benchmark's HiMAP team. Returns [(trace, record)] for every stream."""
    episodes, traces, records = _replay(benches, himap_runs, exported)
    return [(traces[r.episode][r.stream], r) for r in records]


@pytest.fixture(scope="module")
def folded_replay(benches, himap_runs, exported):
    """The same replay of each benchmark under a context budget that folds its streams:
    [(budget, episodes, traces, records)]."""
    return [
        (budget, *_replay({name: benches[name]}, himap_runs, exported, **folding))
        for name, (budget, prompt) in FOLD_BUDGETS.items()
        for folding in [dict(context_budget=budget, context_keep_turns=1, max_prompt_tokens=prompt)]
    ]


# (budget, largest prompt): B2T's prompt alone is ~4.7k tokens, its expert's replies up to ~2k; at
# 14k its single agent folds twice and a HiMAP executor once (TravelPlanner's episodes are short)
FOLD_BUDGETS = {"b2t": (14000, 5000)}


def _replay(benches, himap_runs, exported, **overrides):
    import dataclasses

    from flax import nnx

    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM
    from rollout import RolloutEngine
    from rollout.agents.himap import himap_episode
    from rollout.agents.single import ForcedTokens, agent_episode
    from sandbox.himap.options import HimapOptions
    from tests.rollout_fixtures import engine_config

    tok, _ = exported
    episodes, traces = [], []
    for name, bench in benches.items():
        by_id = {v["id"]: v for v, _ in bench.load_split("train")}
        sizes = {t["id"]: sum(len(m["content"]) for m in t["messages"]) for t in bench.sft_traces()}
        trace = next(t for t in bench.sft_traces() if sizes[t["id"]] == min(sizes.values()))
        plain = agent_episode(by_id[trace["id"]], bench, tok, max_turns=30)
        texts = [m["content"] + "<|im_end|>" for m in trace["messages"] if m["role"] == "assistant"]
        forced = dict(enumerate(texts))
        episodes.append(
            ForcedTokens(plain.instance_id, plain.prompt_ids, plain.env, tok, forced_turns=forced)
        )
        traces.append({"main": trace})
        visible, run = himap_runs[name]
        episodes.append(himap_episode(visible, bench, tok, HimapOptions(), forced=run.texts))
        traces.append({t["stream"]: t for t in run.traces})
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=tok.vocab_size)
    model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))
    longest = 65536
    config = engine_config(max_turns=32, max_seq_len=longest, cache_len=longest, prefill_chunk=1024)
    engine = RolloutEngine(model, tok, dataclasses.replace(config, **overrides))
    return episodes, traces, engine.run(episodes, rng=0)


def test_rollout_records_equal_the_sft_layout_and_the_exported_template(replayed, exported):
    assert {r.role for _, r in replayed} == {"agent", "coordinator", "executor"}
    assert len({r.episode for _, r in replayed}) == 4  # both benchmarks, single agent and HiMAP
    for trace, record in replayed:
        assert record.stop_reason in ("answer", "done"), (record.stream, record.stop_reason)
        # the episodes run no Python, so their prompt (and the SFT example of such a run) lists none
        offered = tools_offered(trace["tools"], python=False)
        assert record.ids == encode_trace(trace["messages"], offered, exported[0])["ids"]
        assert_renders_as_our_layout({**trace, "tools": offered}, record.ids, exported)


@pytest.mark.slow  # a B2T replay under the budget
def test_folded_records_render_as_the_exported_template(folded_replay, exported, benches):
    """Under a budget that folds, every segment of the single agent is the
    official template, in text and token ids, on the messages it holds: the turns so far as
    sampled, each tool reply either whole or its stub. HiMAP streams fold too, each segment within
    the budget, every stream's turns kept whole across its segments and its team answering."""
    from sandbox.types import StopReason

    tok, hf = exported
    every = [r for *_, records in folded_replay for r in records]
    assert any(r.stop_reason == StopReason.FOLDED for r in every if r.role == "agent")
    assert any(r.stop_reason == StopReason.FOLDED for r in every if r.role != "agent")
    for budget, episodes, traces, records in folded_replay:
        for r in records:
            assert len(r.ids) <= budget and r.stop_reason in ("answer", "done", "folded"), r.stop_reason
        _assert_report_shows_every_turn(benches["b2t"], records, tok)
        for index, episode in enumerate(episodes):
            if hasattr(episode, "steps"):  # a single agent (a HiMAP team keeps no steps)
                _assert_segments_render(
                    episode, traces[index]["main"], [r for r in records if r.episode == index], exported
                )


def _assert_report_shows_every_turn(bench, records, tok) -> None:
    """The report (b2tjax/report/build.py) shows a folded single agent's segments one after
    another: every turn once."""
    from b2tjax.report.build import record_episodes

    agent = [r for r in records if r.role == "agent"]
    shown, _ = record_episodes(bench, bench.load_split("train"), agent, tok)
    assert len(shown) == 1 and shown[0]["segments"] == len(agent) > 1
    assert len(shown[0]["turns"]) == sum(len(r.turns) for r in agent)


def _assert_segments_render(episode, trace, segments, exported) -> None:
    from tests.rollout_fixtures import folded_conversations

    tok, hf = exported
    first = next(i for i, m in enumerate(trace["messages"]) if m["role"] == "assistant")
    prompt, tools = trace["messages"][:first], tools_offered(trace["tools"], python=False)
    for record, messages in folded_conversations(prompt, episode.steps, segments, tok, keep_turns=1):
        assert hf.apply_chat_template(messages, tools=tools, tokenize=False) == tok.decode(record.ids) + "\n"
        assert _hf_ids(hf, messages, tools) == record.ids + tok.encode("\n")
