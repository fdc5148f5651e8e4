"""The scripted experts under a context budget (rollout/replay.py, b2tjax/cli/expert_budget.py):
without a budget an episode is the SFT trace token for token; with one that folds, the experts still
solve every instance (the benchmark's own judge), no segment outgrows the budget, and the answer's
names are still shown in its last context -- by the memory the expert wrote, not by luck."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from b2tjax.cli.expert_budget import BudgetFigures, episode_under_budget, expert_under_budget
from b2tjax.sft.traces import encode_trace
from rollout.config import RolloutConfig
from sandbox.benchmarks import get_benchmark
from sandbox.expert_session import unseen
from sandbox.types import ResponseKind
from tests.launch_scripts import load_script
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)
from tests.tp_fixtures import tp_data  # noqa: F401  (session fixture)

ROOT = Path(__file__).resolve().parents[2]
# TravelPlanner queries whose expert episodes are the longest of the 45 (two of them fold at 12,288)
TP_IDS = ("train-11", "train-12", "train-13", "train-14")
TP_ROLLOUT = RolloutConfig(
    max_seq_len=16384,
    max_turn_tokens=2048,
    max_prompt_tokens=3072,
    context_budget=12288,
    context_keep_turns=1,
)
# B2T at the Qwen3 recipes' turn and prompt lengths, in Qwen3's own 32k positions
B2T_ROLLOUT = RolloutConfig(
    max_seq_len=32768,
    max_turn_tokens=6144,
    max_prompt_tokens=16384,
    python_tool=True,
    context_budget=32768,
    context_keep_turns=1,
)


@pytest.fixture(scope="module")
def qwen3():
    from models.tokenizer import load_tokenizer

    return load_tokenizer("qwen3")


def _solved(bench, pairs, rollout, tokenizer):
    """The expert's answers under `rollout`, their verdicts and the episodes' figures."""
    figures = BudgetFigures()
    answers = dict(expert_under_budget(bench, pairs, rollout, tokenizer, figures))
    verdicts = [bench.evaluate(answers[p.id], p.visible, p.truth) for p in pairs]
    return bench.metrics(verdicts), figures.episodes


def test_tp_expert_under_a_folding_budget_solves_every_query_with_its_names_in_memory(tp_data, qwen3):  # noqa: F811
    bench = get_benchmark("travelplanner", tp_data)
    pairs = [p for p in bench.load_split("train") if p.id in TP_IDS]
    metrics, episodes = _solved(bench, pairs, TP_ROLLOUT, qwen3)
    assert metrics["final_pass_rate"] == 1.0 and metrics["n"] == len(TP_IDS)
    assert all(e["peak"] <= TP_ROLLOUT.context_budget and not e["stopped"] for e in episodes)
    assert any(e["segments"] > 1 for e in episodes)
    assert [e["unseen"] for e in episodes] == [[]] * len(TP_IDS)
    # without the memory the expert wrote, a folded episode's answer names what its context lost
    lost = []
    for key, result in bench.expert_results(pairs):
        visible = next(p.visible for p in pairs if p.id == key)
        run = episode_under_budget(bench, visible, result, TP_ROLLOUT, qwen3)
        tools = "\n".join(
            b.content
            for r in run.replies
            for b, folded in zip(r.blocks, r.folded)
            if not folded and b.kind is ResponseKind.TOOL
        )
        lost += unseen(bench.plan_names(result.plan), tools) if len(run.segments) > 1 else []
    assert lost


def test_tp_budget_that_cannot_hold_a_reply_ends_the_episode_unanswered(tp_data, qwen3):  # noqa: F811
    bench = get_benchmark("travelplanner", tp_data)
    pairs = [p for p in bench.load_split("train") if p.id in TP_IDS]
    tight = dataclasses.replace(TP_ROLLOUT, context_budget=6144)
    metrics, episodes = _solved(bench, pairs, tight, qwen3)
    stopped = [e["id"] for e in episodes if e["stopped"]]
    assert stopped and metrics["delivery_rate"] == 1 - len(stopped) / len(pairs)


@pytest.mark.slow  # six B2T expert solves
def test_b2t_expert_under_a_folding_budget_solves_every_instance(small_benchmark, qwen3):  # noqa: F811
    bench = get_benchmark("b2t", small_benchmark)
    pairs = bench.load_split("test")[:6]
    metrics, episodes = _solved(bench, pairs, B2T_ROLLOUT, qwen3)
    assert metrics["final_pass_rate"] == 1.0 and metrics["n"] == len(pairs)
    assert all(e["peak"] <= B2T_ROLLOUT.context_budget and not e["stopped"] for e in episodes)
    assert max(e["segments"] for e in episodes) > 1
    assert all(e["unseen"] == [] for e in episodes)
    # without a budget an episode is one segment, the SFT trace's tokens (encode_trace) exactly
    unbounded = dataclasses.replace(B2T_ROLLOUT, context_budget=0)
    for key, result in bench.expert_results(pairs[:2]):
        visible = next(p.visible for p in pairs if p.id == key)
        run = episode_under_budget(bench, visible, result, unbounded, qwen3)
        prompt = bench.prompt(visible, python=True)  # the whole prompt: it fits max_prompt_tokens
        trace = encode_trace([*prompt.messages, *result.turns], prompt.tools, qwen3)
        assert run.segments == [len(trace["ids"])] == [run.unfolded] and not run.stopped


def _tp_subset(data: Path, out: Path, ids: tuple[str, ...]) -> Path:
    """`data` with a train split of only `ids` (the database linked, not copied)."""
    out.mkdir()
    for name in ("benchmark.json", "build_info.json", "stats.json"):
        shutil.copy(data / name, out / name)
    (out / "database").symlink_to(data / "database")
    for sub in ("instances", "ground_truth", "reference"):
        (out / sub).mkdir()
        lines = (data / sub / "train.jsonl").read_text().splitlines(keepends=True)
        (out / sub / "train.jsonl").write_text("".join(lines[int(i.split("-")[1])] for i in ids))
    return out


@pytest.mark.slow  # the eval script's start (JAX for the recipe's tokenizer)
def test_eval_cli_reports_the_expert_under_a_recipe_budget(tp_data, tmp_path, capsys):  # noqa: F811
    data = _tp_subset(tp_data, tmp_path / "tp", TP_IDS)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"base: {ROOT / 'configs' / 'qwen3_1.7b_lora_tp.yaml'}\n"
        "rollout: {max_seq_len: 16384, max_turn_tokens: 2048, max_prompt_tokens: 3072}\n"
    )
    out = tmp_path / "m.json"
    argv = ["--benchmark", "travelplanner", "--data", str(data), "--split", "train", "--policy", "expert"]
    budget = ["--config", str(recipe), "rollout.context_budget=12288", "rollout.context_keep_turns=1"]
    evaluate = load_script("launch/eval.py").main
    assert evaluate([*argv, *budget, "--json", str(out)]) == 0
    metrics = json.loads(out.read_text())
    assert metrics["final_pass_rate"] == 1.0 and metrics["n"] == len(TP_IDS)
    episodes = metrics["episodes"]
    assert metrics["peak_context_tokens"] == max(e["peak"] for e in episodes) <= 12288
    assert metrics["segments_per_episode"] == sum(e["segments"] for e in episodes) / len(TP_IDS) > 1
    assert "expert under the budget: 4 episodes" in capsys.readouterr().out
    for wrong, line in (
        (["--agent", "himap", *budget], "--config is only for --policy model and the single-agent"),
        (["rollout.context_budget=12288"], "key=value overrides need --config RECIPE"),
    ):
        with pytest.raises(SystemExit):
            evaluate([*argv, *wrong])
        assert line in capsys.readouterr().err
