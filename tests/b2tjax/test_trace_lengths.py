"""The expert traces' token lengths are data (DATA/trace_lengths.json, written by
make_data), and launch/plan.py and launch/train.py refuse a recipe that holds fewer than 90% of
them whole, in one line naming the key and the length it needs (data.allow_truncated_traces: true
overrides). Item 3: every B2T recipe holds >= 99% of a small world's expert traces, rollout and SFT;
a recipe with a context budget holds its expert episodes under the budget instead.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from b2tjax.cli.trace_fit import check_trace_fit
from b2tjax.config import load_config
from b2tjax.errors import UserError
from b2tjax.sft.lengths import LENGTHS, percentile, read_lengths, summary, trace_parts

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


def _b2t_recipes(budget: bool = False) -> list[str]:
    """Recipes that train a single agent on B2T with the Qwen3 tokenizer (those the check applies to),
    with or without a context budget."""
    names = []
    for path in sorted(CONFIGS.glob("*.yaml")):
        if path.name == "base.yaml":
            continue
        cfg = load_config(path)
        if (cfg.task, cfg.benchmark, cfg.agent, cfg.model.tokenizer) == ("travel", "b2t", "single", "qwen3"):
            names += [path.name] if bool(cfg.rollout.context_budget) == budget else []
    return names


def test_percentiles_are_nearest_rank_and_parts_come_from_the_mask():
    values = list(range(1, 101))  # 1..100: p90 is the 90th value
    assert (percentile(values, 50), percentile(values, 90), percentile(values, 99)) == (50, 90, 99)
    assert percentile([7], 99) == 7
    assert summary([1, 2, 3, 10]) == {"mean": 4.0, "p50": 2, "p90": 10, "p99": 10, "max": 10}
    # prompt 3 tokens, a turn of 2, a reply of 4, a turn of 3
    mask = [0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1]
    want = {"prompt": 3, "generated": 5, "environment": 4, "total": 12, "longest_turn": 3}
    assert trace_parts(mask) == want


def _stats_dir(tmp_path: Path, totals: list[int], turns: list[int], python_tokens: int = 0) -> Path:
    """A data directory holding only a hand-written trace_lengths.json (the check reads no more);
    every prompt is 5,000 tokens."""
    group = {"traces": len(totals), "totals": totals, "longest_turns": turns, "prompts": [5000] * len(totals)}
    stats = {
        "tokenizer": "qwen3",
        "python_tool_tokens": python_tokens,
        "splits": {"train": {"all": group, "easy": group}},
    }
    (tmp_path / LENGTHS).write_text(json.dumps(stats))
    return tmp_path


PINNED = (  # the lengths the checks below are written against (qwen3_8b.yaml at its former 32k context)
    "rollout.max_seq_len=32768",
    "rollout.max_prompt_tokens=8192",
    "rollout.max_turn_tokens=2048",
    "sft.max_seq_len=32768",
)


def _cfg(data_dir: Path, *overrides: str):
    return load_config(
        CONFIGS / "qwen3_8b.yaml",
        [f"data.data_dir={data_dir}", "data.difficulties=[easy]", *PINNED, *overrides],
    )


def test_a_recipe_holding_under_90_percent_is_refused_in_one_line_naming_the_key(tmp_path):
    totals = [1000 * k for k in range(1, 101)]  # 1k .. 100k: p90 90,000, p99 99,000
    data = _stats_dir(tmp_path, totals, [100] * 100)
    lines: list[str] = []
    with pytest.raises(UserError) as err:
        check_trace_fit(_cfg(data, "rollout.max_seq_len=65536", "sft.max_seq_len=100000"), lines.append)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("rollout.max_seq_len=65536 holds 65% of the expert traces whole")
    assert "at least 90000 (p90; 99000 holds 99%)" in message
    assert message.endswith("or data.allow_truncated_traces=true")
    assert lines == [
        "expert traces that fit whole (100, qwen3 tokens): rollout.max_seq_len 65,536: 65%, "
        "rollout.max_prompt_tokens 8,192: 100%, rollout.max_turn_tokens 2,048: 100%, "
        "sft.max_seq_len 100,000: 100%"
    ]


def test_the_sft_key_and_the_turn_cap_are_checked_too(tmp_path):
    data = _stats_dir(tmp_path, [30_000] * 10, [3_000] * 10)
    with pytest.raises(UserError, match=r"^rollout\.max_turn_tokens=2048 holds 0% "):
        check_trace_fit(_cfg(data, "rollout.max_seq_len=40000"), print)
    with pytest.raises(UserError, match=r"^rollout\.max_prompt_tokens=4096 holds 0% .*at least 5000 "):
        check_trace_fit(_cfg(data, "rollout.max_seq_len=40000", "rollout.max_prompt_tokens=4096"), print)
    with pytest.raises(UserError, match=r"^sft\.max_seq_len=16384 holds 0% .*at least 30000 "):
        check_trace_fit(_cfg(data, "rollout.max_turn_tokens=4096", "sft.max_seq_len=16384"), print)


def test_the_override_runs_and_says_so(tmp_path):
    data = _stats_dir(tmp_path, [50_000] * 4, [100] * 4)
    lines: list[str] = []
    fits = check_trace_fit(_cfg(data, "data.allow_truncated_traces=true"), lines.append)
    assert [f.share for f in fits] == [0.0, 1.0, 1.0, 0.0]
    assert lines[-1] == (
        "data.allow_truncated_traces is true: running with rollout.max_seq_len, sft.max_seq_len "
        "under 90% of the traces"
    )


def test_a_run_without_the_python_tool_counts_its_prompt_without_the_schema(tmp_path):
    data = _stats_dir(tmp_path, [32_800] * 10, [100] * 10, python_tokens=77)
    cfg = _cfg(data, "rollout.python_tool=false")  # 32,800 - 77 <= 32,768
    assert [f.share for f in check_trace_fit(cfg, print)] == [1.0, 1.0, 1.0, 1.0]
    with pytest.raises(UserError):
        check_trace_fit(_cfg(data, "rollout.python_tool=true"), print)


def test_an_older_data_dir_or_another_tokenizer_is_one_line_and_no_check(tmp_path):
    (tmp_path / "old").mkdir()
    lines: list[str] = []
    assert check_trace_fit(_cfg(tmp_path / "old", "rollout.max_seq_len=9000"), lines.append) == []
    assert lines == [
        f"trace lengths: data.data_dir {tmp_path / 'old'} has no {LENGTHS} (built before it existed): "
        "the expert traces' lengths are not checked"
    ]
    data = _stats_dir(tmp_path, [50_000], [100])
    lines.clear()
    cfg = load_config(CONFIGS / "tiny_cpu.yaml", [f"data.data_dir={data}"])
    assert check_trace_fit(cfg, lines.append) == [] and "model.tokenizer is sentencepiece" in lines[0]


GOOD_GROUP = {"traces": 1, "totals": [9], "prompts": [5], "longest_turns": [3]}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"tokenizer": "qwen3", "splits": {"train": {"all": GOOD_GROUP}}})[:-9],  # truncated
        "[]",
        json.dumps({"tokenizer": "qwen3", "splits": []}),
        json.dumps({"tokenizer": 3, "splits": {}}),
        json.dumps({"tokenizer": "qwen3", "splits": {"train": []}}),
        json.dumps({"tokenizer": "qwen3", "splits": {"train": {"easy": GOOD_GROUP}}}),
        json.dumps({"tokenizer": "qwen3", "splits": {"train": {"all": {**GOOD_GROUP, "totals": []}}}}),
        json.dumps({"tokenizer": "qwen3", "splits": {"train": {"all": {**GOOD_GROUP, "prompts": ["5"]}}}}),
        json.dumps({"tokenizer": "qwen3", "splits": {"train": {"all": {**GOOD_GROUP, "totals": [9, 9]}}}}),
        json.dumps({"tokenizer": "qwen3", "python_tool_tokens": "77", "splits": {}}),
    ],
)
def test_a_lengths_file_of_the_wrong_shape_is_one_line_naming_it(tmp_path, text):
    (tmp_path / LENGTHS).write_text(text)
    with pytest.raises(UserError) as err:
        check_trace_fit(_cfg(tmp_path), print)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / LENGTHS} ") and "rebuild it" in message


def _plan_main():
    spec = importlib.util.spec_from_file_location("plan_script", ROOT / "launch" / "plan.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_plan_refuses_before_compiling(tmp_path, capsys):
    data = _stats_dir(tmp_path, [50_000] * 10, [100] * 10)
    overrides = [f"data.data_dir={data}", "rollout.max_seq_len=16384", "rollout.max_prompt_tokens=8192"]
    code = _plan_main()(["--config", str(CONFIGS / "qwen3_0.6b.yaml"), *overrides])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [
        "error: rollout.max_seq_len=16384 holds 0% of the expert traces whole (< 90%): set it to at least "
        "50000 (p90; 50000 holds 99%), or data.allow_truncated_traces=true"
    ]


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> Path:
    """`make_data --scale small --seed 11` (the world the issue measured), built in this process."""
    from b2tjax.cli.make_data import main

    out = tmp_path_factory.mktemp("lengths") / "small11"
    assert main(["--out", str(out), "--scale", "small", "--seed", "11", "--workers", "1"]) == 0
    return out


@pytest.mark.slow  # builds a small world and encodes its 60 expert traces (~15 s)
def test_make_data_records_the_lengths_sft_encodes(small_data):
    from b2tjax.sft.traces import encode_trace
    from models.tokenizer import load_tokenizer

    stats = read_lengths(small_data)
    assert stats["tokenizer"] == "qwen3"
    assert sorted(stats["splits"]["train"]) == ["all", "easy", "hard", "medium"]
    tokenizer = load_tokenizer("qwen3")
    traces = [json.loads(line) for line in (small_data / "sft" / "train.jsonl").read_text().splitlines()]
    totals = sorted(len(encode_trace(t["messages"], t["tools"], tokenizer)["ids"]) for t in traces)
    group = stats["splits"]["train"]["all"]
    assert group["totals"] == totals and group["traces"] == len(traces) == 60
    assert group["total"]["max"] == totals[-1] and group["total"]["p50"] == totals[29]
    parts = group["prompt"]["mean"] + group["generated"]["mean"] + group["environment"]["mean"]
    assert parts == pytest.approx(group["total"]["mean"], abs=0.2)
    per_level = sum(stats["splits"]["train"][d]["traces"] for d in ("easy", "medium", "hard"))
    assert per_level == 60
    assert json.loads((small_data / "build_info.json").read_text())["trace_lengths_seconds"] >= 0


@pytest.fixture(scope="module")
def expert_parts(small_data):
    """python_tool -> each expert trace's parts, encoded here as SFT encodes them (not read back from
    the stats file), with or without the Python tool's schema in the prompt."""
    from b2tjax.sft.traces import encode_trace, tools_offered
    from models.tokenizer import load_tokenizer

    tokenizer = load_tokenizer("qwen3")
    traces = [json.loads(line) for line in (small_data / "sft" / "train.jsonl").read_text().splitlines()]
    return {
        python: [
            trace_parts(encode_trace(t["messages"], tools_offered(t["tools"], python), tokenizer)["mask"])
            for t in traces
        ]
        for python in (False, True)
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", _b2t_recipes())
def test_every_b2t_recipe_holds_99_percent_of_the_expert_traces_whole(small_data, expert_parts, name):
    """The recipes' lengths against the traces' own encoding, and the check's figures agree."""
    cfg = load_config(CONFIGS / name, [f"data.data_dir={small_data}"])
    whole = expert_parts[cfg.rollout.python_tool]
    shares = []
    for key, limit, part in (
        ("rollout.max_seq_len", cfg.rollout.max_seq_len, "total"),
        ("rollout.max_prompt_tokens", cfg.rollout.prompt_budget, "prompt"),
        ("rollout.max_turn_tokens", cfg.rollout.max_turn_tokens, "longest_turn"),
        ("sft.max_seq_len", cfg.sft.max_seq_len, "total"),
    ):
        shares.append(sum(w[part] <= limit for w in whole) / len(whole))
        assert shares[-1] >= 0.99, f"{name}: {key}={limit} holds {shares[-1]:.0%}"
    assert [f.share for f in check_trace_fit(cfg, print)] == shares


@pytest.mark.slow  # ~30 expert traces stepped through the environment and folded (~15 s)
@pytest.mark.parametrize("name", _b2t_recipes(budget=True))
def test_every_b2t_budget_recipe_holds_the_expert_episodes_under_its_budget(small_data, name):
    """A budget recipe's rows hold segments, not whole traces: the check's budget share counts the
    traces whose episode under the budget never ends for room; a trace stepped again through the
    environment is the SFT encoding of it token for token before it folds."""
    from b2tjax.cli.expert_budget import trace_under_budget
    from b2tjax.sft.traces import encode_trace, tools_offered
    from models.tokenizer import load_tokenizer
    from sandbox.benchmarks import get_benchmark

    cfg = load_config(CONFIGS / name, [f"data.data_dir={small_data}"])
    fits = {f.key: f for f in check_trace_fit(cfg, print)}
    assert "rollout.max_seq_len" not in fits
    budget = fits["rollout.context_budget"]
    assert budget.share == 1.0 and budget.p99 <= cfg.rollout.context_budget
    bench, tokenizer = get_benchmark("b2t", small_data), load_tokenizer("qwen3")
    visible = {v["id"]: v for v in bench.load_visible("train")}
    traces = sorted(bench.sft_traces(), key=lambda t: -len(json.dumps(t)))[:3]  # the longest
    for trace in traces:
        run = trace_under_budget(bench, visible[trace["id"]], trace, cfg.rollout, tokenizer)
        tools = tools_offered(trace["tools"], cfg.rollout.python_tool)
        assert run.unfolded == len(encode_trace(trace["messages"], tools, tokenizer)["ids"])
        assert len(run.segments) > 1 and run.peak <= cfg.rollout.context_budget and not run.stopped


@pytest.mark.slow  # the scripted HiMAP expert on 3 instances of the small world, encoded (~5 s)
def test_the_himap_streams_are_the_scripted_experts_and_their_rows_are_printed(small_data):
    """benchmarks/trace_lengths.py --kv-rows on a data dir: each HiMAP team's streams (a coordinator,
    its executors) and the common prefix of its executors' records, which carries all but the day's
    own sub-goal; one table row per HiMAP recipe."""
    from b2tjax.cli.himap_streams import himap_lengths

    cfg = load_config(CONFIGS / "himap_qwen3_8b.yaml", [f"data.data_dir={small_data}"])
    lengths = himap_lengths(cfg, small_data, 3)
    assert lengths["instances"] == 3 and 1 <= len(lengths["teams"]) <= 3
    for team in lengths["teams"]:
        assert team["coordinator"][0] < team["coordinator"][1]
        assert len(team["executors"]) >= 2 and all(p < total for p, total in team["executors"])
        least = min(p for p, _ in team["executors"])
        assert 0.9 * least < team["executor_prefix"] < least

    spec = importlib.util.spec_from_file_location(
        "trace_lengths_script", ROOT / "benchmarks" / "trace_lengths.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.himap_rows_table(CONFIGS, {"b2t": small_data}, 3)
    names = [line.split(" | ")[0] for line in rows[2:]]
    assert names == ["| `himap_qwen3_4b.yaml`", "| `himap_qwen3_8b.yaml`", "| `himap_qwen3_8b_tpu.yaml`"]
