"""The Colab evaluation notebook runs end to end: its code cells, in order, in one fresh process.

A tiny runner (what papermill does, without the dependency) executes every code cell's source in
one namespace, skipping IPython `!`/`%` lines, and injects small parameters right after the cell
tagged "parameters": a small world built by the notebook itself in a temp dir, the random "tiny"
model, 2 episodes, short token limits, no server (step 11's flow is tests/launch/test_serve.py's).
The runner saves what the notebook produced; the tests check it against expectations computed here
from the spec (reward formula, constraint list, record invariants), not against the notebook's own
arithmetic.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from b2tjax.report.plotting import PANELS
from tests.rollout_fixtures import rollout_setup  # noqa: F401  (session fixture)
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)
from tests.subprocess_env import fake_devices_env

pytestmark = pytest.mark.slow  # executes the evaluation notebook

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "evaluate.ipynb"
SUMMARY_KEYS = ("delivery_rate", "c_micro", "c_macro", "upc_micro", "upc_macro", "final_pass_rate")

RUNNER = r"""
import json, sys
notebook, overrides, out = sys.argv[1], sys.argv[2], sys.argv[3]
ns = {"__name__": "__main__"}
for cell in json.load(open(notebook))["cells"]:
    if cell["cell_type"] != "code":
        continue
    lines = [l for l in cell["source"] if not l.lstrip().startswith(("!", "%"))]
    exec(compile("".join(lines), f"<notebook cell {cell.get('id')}>", "exec"), ns)
    if "parameters" in cell["metadata"].get("tags", []):
        exec(overrides, ns)
summary = {
    "model_metrics": ns["model_metrics"], "expert_metrics": ns["expert_metrics"],
    "episode_view": ns["episode_view"], "episode_index": ns["EPISODE_INDEX"],
    "rewards": [r.to_dict() for r in ns["rewards"]],
    "records": [r.to_json() for r in ns["records"]],
    "steps": [[[r.kind, r.name, r.is_error] for s in e.steps for r in s.responses] for e in ns["episodes"]],
    "pair_ids": [v["id"] for v, _ in ns["pairs"]],
    "expert_plans": ns["expert_plans"],
    "curves": ns["curves"],
    "himap_view": ns["himap_view"], "himap_answer": ns["himap_expert"].answer,
    "figure_titles": [ax.get_title() for ax in ns["fig"].axes] if ns["fig"] is not None else None,
    "report": str(ns["report_path"]),
    "served_metrics": ns["served_metrics"],
}
json.dump(summary, open(out, "w"))
"""


def _write_run_metrics(run_dir: Path) -> None:
    """A training run's metrics.jsonl as b2tjax's writer writes it (3 GRPO steps)."""
    from b2tjax.run.metrics import MetricsWriter

    writer = MetricsWriter(run_dir, total_steps=3, enabled=True, progress=False)
    for step in (1, 2, 3):
        writer.log(step, {"reward": 0.25 * step, "final_pass": 0.1 * step, "loss": 1.0 / step}, phase="grpo")
    writer.close()


@pytest.fixture(scope="module")
def notebook_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("notebook")
    _write_run_metrics(tmp / "run")
    overrides = "\n".join(
        [
            f"DATA_DIR = {str(tmp / 'data')!r}",
            f"OUT_DIR = {str(tmp / 'out')!r}",
            f"RUN_DIRS = [{str(tmp / 'run')!r}]",
            "DATA_EXPERT_CHECK = False",
            "CHECKPOINT = 'tiny'",
            "NUM_EPISODES = 2",
            # a capped turn is closed ("close"), so it still reaches the sandbox and responses are shown
            "ROLLOUT = ['rollout.batch_rows=2', 'rollout.max_turns=2', 'rollout.max_turn_tokens=8',"
            " 'rollout.turn_cap=close', 'rollout.max_seq_len=5632', 'rollout.max_prompt_tokens=5120']",
            "EPISODE_INDEX = 1",
            "SERVE_EPISODES = 0",  # step 11's flow: tests/launch/test_serve.py, on its server
        ]
    )
    env = dict(fake_devices_env(1), PYTHONPATH=str(REPO))  # one device, as a Colab CPU
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(NOTEBOOK), overrides, str(tmp / "summary.json")],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    summary = json.loads((tmp / "summary.json").read_text())
    return summary, proc.stdout, tmp


def test_notebook_is_valid_nbformat_v4_with_a_parameters_cell():
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4
    kinds = [c["cell_type"] for c in nb["cells"]]
    assert set(kinds) == {"markdown", "code"}
    tagged = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1 and tagged[0]["cell_type"] == "code"
    for name in ("DATA_DIR", "CHECKPOINT", "SPLIT", "NUM_EPISODES", "DIFFICULTY", "ROLLOUT"):
        assert any(line.startswith(f"{name} =") for line in tagged[0]["source"]), name
    assert all(c["outputs"] == [] for c in nb["cells"] if c["cell_type"] == "code"), (
        "commit it without outputs"
    )


def test_data_was_built_and_metrics_tables_have_every_key(notebook_run):
    from sandbox.benchmarks.b2t.evaluator import CONSTRAINT_NAMES

    summary, stdout, tmp = notebook_run
    for name in ("world.sqlite", "instances/test.jsonl", "ground_truth/test.jsonl"):
        assert (tmp / "data" / name).is_file(), name
    # NUM_EPISODES are taken in turn from each difficulty level, in file order.
    assert summary["pair_ids"] == ["test-easy-00000", "test-medium-00000"]
    for metrics in (summary["model_metrics"], summary["expert_metrics"]):
        assert metrics["n"] == 2
        for key in SUMMARY_KEYS:
            assert 0.0 <= metrics[key] <= 1.0, key
        assert list(metrics["per_constraint"]) == list(CONSTRAINT_NAMES)
        assert {level: m["n"] for level, m in metrics["per_difficulty"].items()} == {"easy": 1, "medium": 1}
    # The reference row scores the expert's plans against the right instances: re-judge them here.
    from b2tjax.data.pipeline import read_jsonl
    from sandbox.benchmarks import b2t

    visible = {row["id"]: row for row in read_jsonl(tmp / "data" / "instances" / "test.jsonl")}
    truth = {row["id"]: row for row in read_jsonl(tmp / "data" / "ground_truth" / "test.jsonl")}
    verdicts = [
        b2t.evaluate_plan(summary["expert_plans"][i], visible[i], truth[i], tmp / "data")
        for i in summary["pair_ids"]
    ]
    assert any(v.delivered for v in verdicts), "the expert wrote no readable plan"
    assert summary["expert_metrics"]["delivery_rate"] == sum(v.delivered for v in verdicts) / 2
    assert summary["expert_metrics"]["final_pass_rate"] == sum(v.all_passed for v in verdicts) / 2
    assert "expert" in stdout and "model" in stdout and "Final" in stdout
    assert "budget" in stdout  # the per-constraint table was printed
    assert summary["served_metrics"] is None and "SERVE_EPISODES is 0; skipping" in stdout
    saved = json.loads((tmp / "out" / "metrics.json").read_text())
    assert saved["model"]["n"] == 2 and saved["expert"]["n"] == 2


def test_rewards_follow_the_spec_formula_and_records_are_consistent(notebook_run):
    summary, _, tmp = notebook_run
    lines = (tmp / "out" / "rollouts.jsonl").read_text().splitlines()
    assert [json.loads(line)["instance_id"] for line in lines] == summary["pair_ids"]
    delivered = 0
    for record, reward, calls in zip(summary["records"], summary["rewards"], summary["steps"]):
        assert len(record["ids"]) == len(record["loss_mask"]) == len(record["logprobs"])
        assert record["ids"][: record["prompt_len"]] and not any(record["loss_mask"][: record["prompt_len"]])
        assert [bool(e) for e in record["errors"]] == [c[2] for c in calls]
        any_error = any(record["errors"]) or record["stop_reason"] == "error"
        assert reward["p_action"] == (-1.0 if any_error else 0.0)
        if record["answer"] is None:  # no plan: R_plan = 0 (SPEC section 7)
            assert reward["r_format"] == 0.0 and reward["total"] == reward["p_action"]
        else:
            delivered += reward["r_format"] == 1.0
            expected = reward["p_action"] + reward["r_format"] * (reward["r_c"] + reward["r_upc"])
            assert reward["total"] == pytest.approx(expected)
        assert record["reward"] == pytest.approx(reward["total"])
    assert summary["model_metrics"]["delivery_rate"] == delivered / 2


def test_episode_view_shows_turns_responses_and_every_constraint(notebook_run):
    from sandbox.benchmarks.b2t.evaluator import CONSTRAINT_NAMES

    summary, _, _ = notebook_run
    view = summary["episode_view"]
    index = summary["episode_index"]
    record = summary["records"][index]
    assert view.startswith(f"episode {summary['pair_ids'][index]}")
    assert view.count(": assistant ---") == len(record["turns"]) >= 1
    assert view.count("  <- ") == len(summary["steps"][index]) >= 1  # TURN_CAP "close": the sandbox answered
    verdicts = [line for line in view.splitlines() if line.startswith(("PASS  ", "FAIL  "))]
    assert [line.split()[1].rstrip(":") for line in verdicts] == list(CONSTRAINT_NAMES)
    for line in verdicts:  # a failure carries its reason
        assert line.startswith("PASS") or len(line.split(": ", 1)) == 2 and line.split(": ", 1)[1].strip()
    if record["answer"] is None:
        assert "(no <answer>)" in view and all(line.startswith("FAIL") for line in verdicts)


def test_training_curves_are_read_from_metrics_jsonl(notebook_run):
    """Step 8 reads RUN_DIRS with b2tjax.report.plotting (values metrics.jsonl holds) and draws its figure."""
    summary, stdout, _ = notebook_run
    curves = summary["curves"]["run"]
    assert curves["reward"] == [[1, 0.25], [2, 0.5], [3, 0.75]]
    assert [p[1] for p in curves["final_pass"]] == pytest.approx([0.1, 0.2, 0.3])
    assert "loss" not in curves
    assert "run: reward: 3 points, last 0.75 at step 3" in stdout
    if importlib.util.find_spec("matplotlib") is not None:
        assert summary["figure_titles"] == [panel.title for panel in PANELS]


def test_himap_section_shows_the_scripted_team_episode(notebook_run):
    """Step 7: the coordinator, one executor per day of the trip, Σ's events and the rounds; the
    merged plan, re-judged here, passes every constraint (the scripted team is an upper bound)."""
    from b2tjax.data.pipeline import read_jsonl
    from sandbox.benchmarks import b2t

    summary, stdout, tmp = notebook_run
    index = summary["episode_index"]
    instance_id = summary["pair_ids"][index]
    truth = {row["id"]: row for row in read_jsonl(tmp / "data" / "ground_truth" / "test.jsonl")}[instance_id]
    visible = {row["id"]: row for row in read_jsonl(tmp / "data" / "instances" / "test.jsonl")}[instance_id]
    view = summary["himap_view"]
    days = truth["query"]["days"]
    assert view.startswith(f"HiMAP episode: {days} days")
    assert "=== coordinator: coordinator" in view and "--- Σ events" in view and "  round 1: day 1 " in view
    for day in range(1, days + 1):
        assert f"=== day{day}.r1: executor (day {day}, round 1)" in view
    assert " commit " in view  # Σ committed the days
    verdict = b2t.evaluate_plan(summary["himap_answer"], visible, truth, tmp / "data")
    assert verdict.all_passed
    assert f"scripted HiMAP expert (full) on {instance_id}" in stdout


def test_report_cell_writes_every_episode_it_ran(notebook_run):
    """Step 9: the HTML report holds the model's episodes (with their turns), the expert's and the
    scripted HiMAP team's (with one lane per day), and the run's curves."""
    from tests.report_fixtures import page_data

    summary, stdout, _ = notebook_run
    page = Path(summary["report"]).read_text(encoding="utf-8")
    episodes = page_data(page)["episodes"]
    ids = summary["pair_ids"]
    assert [(e["agent"], e["id"]) for e in episodes] == [("model tiny", i) for i in ids] + [
        ("expert", i) for i in ids
    ] + [("HiMAP expert", ids[summary["episode_index"]])]
    for episode, record in zip(episodes, summary["records"]):
        assert len(episode["turns"]) == len(record["turns"]) and episode["tokens"] == sum(record["loss_mask"])
    assert len(episodes[-1]["himap"]["lanes"]) == len(episodes[-1]["days"]) > 1
    assert '<svg class="curve"' in page  # the run's curves, drawn by the report itself (no matplotlib)
    assert f"wrote {summary['report']} (5 episodes" in stdout


@pytest.mark.parametrize("run_dirs", [[], ["runs/none-such"]])
def test_curves_cell_says_what_to_do_without_runs(run_dirs, tmp_path, capsys):
    """Without run directories step 8 draws nothing and names the command that makes them."""
    nb = json.loads(NOTEBOOK.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and "plot_runs(" in "".join(c["source"]))
    ns = {"REPO": tmp_path, "RUN_DIRS": run_dirs}
    exec(compile("".join(cell["source"]), "<curves cell>", "exec"), ns)
    out = capsys.readouterr().out
    assert ns["fig"] is None and ns["curves"] == {}
    assert "skipping the training curves" in out and "configs/tiny_cpu_curve.yaml" in out
    assert ("RUN_DIRS is empty" if not run_dirs else str(tmp_path / "runs/none-such")) in out


def _cell(marker: str) -> str:
    nb = json.loads(NOTEBOOK.read_text())
    return next(
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and marker in "".join(c["source"])
    )


def test_himap_cell_runs_a_real_checkpoint_as_a_team_with_the_default_rollout(
    rollout_setup,
    small_benchmark,
    capsys,  # noqa: F811
):
    """Step 7's checkpoint branch (any CHECKPOINT but "tiny", which the run above takes) under the
    parameters cell's own ROLLOUT (max_turns=10, below the roles' limit of 16): the team's streams
    start and run (no engine error), and the cell ends with the verdict and, when undelivered, why."""
    from b2tjax.config import load_rollout_config
    from b2tjax.run.policy import ROLLOUT_DEFAULTS
    from rollout import RolloutEngine
    from sandbox.benchmarks import get_benchmark

    params: dict = {}
    exec(_cell("CHECKPOINT = "), params)  # the parameters cell: its defaults
    assert "rollout.max_turns=10" in params["ROLLOUT"]
    bench = get_benchmark("b2t", small_benchmark)
    pairs = [p for p in bench.load_split("test") if p[0]["difficulty"] == "easy"][:1]
    # one change for time: short turns (a random model writes its 1,024 tokens otherwise)
    config = load_rollout_config(
        None, params["ROLLOUT"] + ["rollout.max_turn_tokens=8"], base=ROLLOUT_DEFAULTS
    )
    ns = {
        "bench": bench, "pairs": pairs, "EPISODE_INDEX": 0, "HIMAP_ABLATION": "full", "SEED": 0,
        "CHECKPOINT": "runs/trained/checkpoints", "model": rollout_setup.model,
        "tokenizer": rollout_setup.tokenizer, "config": config, "RolloutEngine": RolloutEngine,
    }  # fmt: skip
    exec(_cell('if CHECKPOINT != "tiny"'), ns)
    out = capsys.readouterr().out
    records = ns["team_records"]
    assert records and all(str(r.stop_reason) != "error" and r.error_message is None for r in records), [
        (r.stream, str(r.stop_reason), r.error_message) for r in records
    ]
    assert "exceeds the engine" not in out and "episode error:" not in out
    assert f"runs/trained/checkpoints as a HiMAP team on {pairs[0][0]['id']}:" in out
    verdict = ns["team_verdict"]
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"delivered: {verdict.delivered}") and (verdict.delivered or "(" in last)
