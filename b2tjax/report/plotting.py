"""Learning curves from run directories: reward, pass rates, action error rate, sampler/trainer gap.

One figure of four panels, one line per run (and per metric where a panel holds several), read from
each run's OUT/metrics.jsonl. `launch/plot.py` and the evaluation notebook both call `plot_runs`.
matplotlib is an optional extra (`pip install -e ".[plot]"`): importing this module does not need it,
drawing does, and its absence is a `PlotError` with the install command.

`plot_runs(run_dirs, out=None, labels=None) -> Figure`: four panels (reward; pass rates:
final_pass, delivery, micro_pass_c/upc, success, accuracy; action_error_rate; logprob_gap_mean);
`PlotError` (one line) for a run without metrics or a missing matplotlib.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from b2tjax.run.metrics import read_metrics

INSTALL_HINT = 'pip install -e ".[plot]"'


class PlotError(Exception):
    """A user-facing problem (missing matplotlib, a run without metrics); the message is one line."""


@dataclasses.dataclass(frozen=True)
class Panel:
    title: str
    keys: tuple[str, ...]  # metrics.jsonl keys drawn here, whichever a run has


PANELS: tuple[Panel, ...] = (
    Panel("Reward", ("reward",)),
    # travel task: final_pass, delivery, C / UPC micro pass; toy tasks: success (lookup), accuracy (digit)
    Panel("Pass rates", ("final_pass", "delivery", "micro_pass_c", "micro_pass_upc", "success", "accuracy")),
    Panel("Action error rate", ("action_error_rate",)),
    Panel("Sampler vs trainer log-prob gap", ("logprob_gap_mean",)),
)


def load_run(run_dir: str | Path) -> list[dict[str, Any]]:
    """Training records (SFT and GRPO) of one run, in step order; PlotError if it has none."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise PlotError(f"{run_dir}: no metrics.jsonl (is this a training run directory?)")
    try:
        rows = [row for _, row in sorted(read_metrics(path).items())]
    except (ValueError, KeyError) as err:
        raise PlotError(f"{path}: unreadable metrics ({err})") from None
    if not rows:
        raise PlotError(f"{path}: no training steps logged yet")
    return rows


def _series(rows: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(row["step"], row[key]) for row in rows if isinstance(row.get(key), (int, float))]
    return [s for s, _ in points], [float(v) for _, v in points]


def _labels(run_dirs: Sequence[Path]) -> list[str]:
    """Directory names, or whole paths where two runs share a name."""
    names = [p.name or str(p) for p in run_dirs]
    return [str(p) if names.count(n) > 1 else n for p, n in zip(run_dirs, names)]


def plot_runs(
    run_dirs: Sequence[str | Path], out: str | Path | None = None, labels: Sequence[str] | None = None
) -> Any:
    """Draw every run's curves into one matplotlib Figure (returned); also save it to `out` if given."""
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise PlotError("no run directory given")
    if labels is not None and len(labels) != len(dirs):
        raise PlotError(f"{len(labels)} labels for {len(dirs)} run directories")
    runs = [load_run(d) for d in dirs]  # input errors first, before needing matplotlib
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError(f"plotting needs matplotlib: {INSTALL_HINT}") from None

    labels = list(labels) if labels is not None else _labels(dirs)
    fig = Figure(figsize=(12, 8), layout="constrained")
    styles = ("-", "--", ":", "-.")
    for ax, panel in zip(fig.subplots(2, 2).flat, PANELS):
        ax.set_title(panel.title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        for i, (rows, label) in enumerate(zip(runs, labels)):
            present = [k for k in panel.keys if _series(rows, k)[0]]
            for j, key in enumerate(present):
                steps, values = _series(rows, key)
                name = label if len(panel.keys) == 1 else f"{label}: {key}"
                ax.plot(steps, values, color=f"C{i % 10}", linestyle=styles[j % len(styles)], label=name)
        if ax.lines:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no data in these runs", ha="center", va="center", transform=ax.transAxes)
    if out is not None:
        fig.savefig(out, dpi=100)
    return fig
