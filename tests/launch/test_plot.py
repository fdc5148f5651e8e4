"""launch/plot.py and b2tjax.report.plotting: curves of two real (tiny) lookup-task runs, checked on the
figure object (panels, one line per run, the plotted values equal metrics.jsonl), and one-line errors."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from b2tjax.report.plotting import PANELS, PlotError, plot_runs
from b2tjax.tasks.toy_tools import LookupConfig, LookupTask
from tests.lookup_fixtures import (
    NUM_VALUES,
    SHORT_RUN,
    shared_compilations,  # noqa: F401  (fixture)
    train_lookup,
    xla_cache_dir,  # noqa: F401  (fixture of shared_compilations)
)

pytestmark = pytest.mark.slow  # trains two runs to plot

SCRIPT = Path(__file__).resolve().parents[2] / "launch" / "plot.py"
TITLES = ["Reward", "Pass rates", "Action error rate", "Sampler vs trainer log-prob gap"]
PANEL_KEY = {
    "Reward": "reward",
    "Pass rates": "success",
    "Action error rate": "action_error_rate",
    "Sampler vs trainer log-prob gap": "logprob_gap_mean",
}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, shared_compilations) -> list[Path]:  # noqa: F811 (the fixture)
    """Two short real runs (20 SFT + 2 GRPO steps) of the lookup task, seeds 0 and 1."""
    runs = []
    for seed in (0, 1):
        out = tmp_path_factory.mktemp(f"seed{seed}")
        train_lookup(out, LookupTask(LookupConfig(num_values=NUM_VALUES)), seed, SHORT_RUN)
        runs.append(out)
    return runs


def _launch_main():
    """launch/plot.py's main, loaded by path like the other launch tests."""
    spec = importlib.util.spec_from_file_location("launch_plot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def _grpo_rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if row["phase"] == "grpo"]


def test_cli_draws_every_panel_with_one_line_per_run(two_runs, tmp_path, capsys):
    out = tmp_path / "curves.png"
    assert _launch_main()([str(r) for r in two_runs] + ["--labels", "s0", "s1", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in capsys.readouterr().out

    fig = plot_runs(two_runs, labels=["s0", "s1"])
    assert [ax.get_title() for ax in fig.axes] == TITLES == [p.title for p in PANELS]
    for ax in fig.axes:
        key = PANEL_KEY[ax.get_title()]
        lines = {line.get_label(): line for line in ax.get_lines()}
        wanted = ["s0", "s1"] if ax.get_title() != "Pass rates" else [f"s0: {key}", f"s1: {key}"]
        assert sorted(lines) == wanted
        for run, label in zip(two_runs, wanted):
            rows = _grpo_rows(run)
            x, y = lines[label].get_data()
            assert list(x) == [row["step"] for row in rows] == [21, 22]  # GRPO steps follow the SFT steps
            np.testing.assert_allclose(y, [row[key] for row in rows])


def test_run_without_metrics_is_a_one_line_error(two_runs, tmp_path, capsys):
    empty = tmp_path / "not_a_run"
    empty.mkdir()
    assert _launch_main()([str(two_runs[0]), str(empty), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {empty}: no metrics.jsonl (is this a training run directory?)"
    assert not (tmp_path / "c.png").exists()


def test_missing_matplotlib_is_a_one_line_error(two_runs, tmp_path, monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without it imports
    with pytest.raises(PlotError, match=r'matplotlib: pip install -e "\.\[plot\]"'):
        plot_runs(two_runs)
    assert _launch_main()([str(two_runs[0]), "--out", str(tmp_path / "c.png")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
