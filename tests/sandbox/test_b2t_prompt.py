"""The B2T agent prompt (sandbox) rendered by rollout.prompt: sections, ablation switches, and
trajectory compaction to a token budget."""

from __future__ import annotations

import pytest


def _instance(num_events: int = 30) -> dict:
    actions = ["click", "click", "add_to_favorites", "click", "book"]
    events = [
        {
            "timestamp": f"2026-03-{1 + i // 10:02d} {10 + i % 10}:00",
            "session": 1 + i // 10,
            "action": actions[i % 5],
            "poi_type": "hotel",
            "poi_id": f"H-Chengdu-{i}",
            "poi_name": f"Hotel number {i}",
            "details": {"city": "Chengdu", "price": 500 + i},
        }
        for i in range(num_events)
    ]
    return {
        "id": "test-hard-00001",
        "instruction": "I'm planning a 3-day trip from Shanghai to Chengdu for two.",
        "trajectory": events,
    }


@pytest.fixture(scope="module")
def schemas():
    from sandbox.benchmarks.b2t.tools.registry import tool_schemas

    return tool_schemas()


@pytest.fixture(scope="module")
def tok(tmp_path_factory, schemas):
    import json

    from models.spm import SentencePieceTokenizer, train_sentencepiece
    from rollout.prompt import prompt_text
    from sandbox.benchmarks.b2t.prompt import build_prompt

    corpus = [prompt_text(build_prompt(_instance(), schemas)), json.dumps(schemas)]
    return SentencePieceTokenizer(
        train_sentencepiece(corpus, tmp_path_factory.mktemp("spm") / "p", vocab_size=800)
    )


def test_sections_and_switches(schemas):
    from models.chat import render
    from rollout.prompt import prompt_text
    from sandbox.benchmarks.b2t.prompt import MEMORY_MODULE, build_prompt

    full = build_prompt(_instance(), schemas)
    text = prompt_text(full)
    assert text == render(full.messages, tools=schemas, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    system, user = full.messages[0]["content"], full.messages[1]["content"]
    assert MEMORY_MODULE in system and "<answer>" in system and "intercity_transport" in system
    for schema in schemas:  # every tool schema, in Qwen3's # Tools block
        assert f'"name": "{schema["function"]["name"]}"' in text
    assert "Hotel number 29" in user and user.index("Behavior trajectory") < user.index("Instruction:")
    assert full.memory
    no_memory = build_prompt(_instance(), schemas, memory=False)
    assert MEMORY_MODULE not in no_memory.messages[0]["content"] and not no_memory.memory
    react = build_prompt(_instance(), schemas, variant="react")
    system = react.messages[0]["content"]
    assert MEMORY_MODULE not in system and "<memory>" not in system and "<answer>" in system
    assert not react.memory  # the episode's env then disables memory
    with pytest.raises(ValueError, match="variant"):  # BenchmarkError is a ValueError
        build_prompt(_instance(), schemas, variant="cot")


def test_compaction_drops_clicks_first_and_fits_minimally(schemas, tok):
    from rollout.prompt import prompt_ids, token_counter
    from sandbox.benchmarks.b2t.prompt import build_prompt

    inst = _instance()
    full_len = len(prompt_ids(build_prompt(inst, schemas), tok))
    budget = full_len - 150
    compact = build_prompt(inst, schemas, count_tokens=token_counter(tok), max_tokens=budget)
    assert len(prompt_ids(compact, tok)) <= budget < full_len
    n = compact.dropped
    assert 0 < n < 18  # 18 clicks in 30 events: only clicks went
    user = compact.messages[1]["content"]
    assert f"[{n} less informative events omitted to fit the context: {n} click]" in user
    kept = [e for e in inst["trajectory"] if e["poi_name"] + " (" in user]
    assert (
        sum(e["action"] == "book" for e in kept) == 6
        and sum(e["action"] == "add_to_favorites" for e in kept) == 6
    )
    dropped = [e for e in inst["trajectory"] if e not in kept]
    assert len(dropped) == n and all(e["action"] == "click" for e in dropped)
    latest_dropped = max(inst["trajectory"].index(e) for e in dropped)
    assert all(
        e["action"] != "click" for e in inst["trajectory"][:latest_dropped] if e in kept
    )  # oldest first
    # minimal: keeping one more event would not fit
    from sandbox.benchmarks.b2t.prompt import _drop_order, _messages
    from sandbox.benchmarks.base import Prompt

    one_more = Prompt(_messages(inst, "b2t", True, set(_drop_order(inst["trajectory"])[: n - 1])), schemas)
    assert len(prompt_ids(one_more, tok)) > budget


def test_budget_errors(schemas, tok):
    from rollout.prompt import token_counter
    from sandbox.benchmarks import BenchmarkError
    from sandbox.benchmarks.b2t.prompt import build_prompt

    with pytest.raises(BenchmarkError, match="count_tokens"):
        build_prompt(_instance(), schemas, max_tokens=100)
    with pytest.raises(BenchmarkError, match="even without"):
        build_prompt(_instance(), schemas, count_tokens=token_counter(tok), max_tokens=100)
    with pytest.raises(BenchmarkError, match="instruction"):
        build_prompt({"id": "x", "trajectory": []}, schemas)
