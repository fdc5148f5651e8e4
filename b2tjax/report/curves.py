"""A run's training curves as inline SVG, drawn here from metrics.jsonl: the report needs no
matplotlib (the README install has none), and the page stays one self-contained file.

Panels: the SFT loss (SFT steps only: GRPO's loss is another quantity), then the panels of
`launch/plot.py` (b2tjax.report.plotting.PANELS: reward, pass rates, action error rate, the sampler vs
trainer log-prob gap). One colour per run, one dash per metric; a panel no run has data for is
left out. Steps are integers, so the x ticks are too; value ticks are round (1-2-5 steps).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from b2tjax.report.plotting import PANELS, PlotError, load_run

W, H = 380, 230  # one panel
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 26, 34
COLORS = ("#3b6fd8", "#e0823d", "#2f9e8f", "#c4499b", "#7c5cd6", "#d64545", "#6a8f2a", "#8a6d3b")
DASHES = ("", "6 3", "2 3", "8 3 2 3")

Series = tuple[str, list[tuple[int, float]]]  # (legend name, [(step, value)])


def nice_step(raw: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `raw` (> 0)."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))


def step_ticks(lo: int, hi: int, most: int = 7) -> list[int]:
    """At most `most` integer ticks from lo to hi, spaced 1, 2 or 5 times a power of ten."""
    step = max(int(nice_step(max(hi - lo, 1) / max(most - 1, 1))), 1)
    first = math.ceil(lo / step) * step
    return list(range(first, hi + 1, step))


def value_ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """Round ticks covering [lo, hi] (lo < hi): multiples of a 1, 2 or 5 times a power of ten step,
    from the last at or below lo to the first at or above hi (at most `most` + 1 of them), so a
    reader sees 0.1, 0.2, 0.3 rather than the range's own ends."""
    step = nice_step((hi - lo) / max(most - 1, 1))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 12) + 0.0 for k in range(first, last + 1)]  # + 0.0: no "-0"


def _panels(runs: Sequence[tuple[str, list[dict[str, Any]]]]) -> list[tuple[str, list[Series]]]:
    """(title, series) per panel that has data; a series is named by its run (and key)."""
    out: list[tuple[str, list[Series]]] = []
    sft = [(name, _points([r for r in rows if r.get("phase") == "sft"], "loss")) for name, rows in runs]
    out.append(("SFT loss", [s for s in sft if s[1]]))
    for panel in PANELS:
        series = []
        for name, rows in runs:
            for key in panel.keys:
                points = _points(rows, key)
                if points:
                    series.append((name if len(panel.keys) == 1 else f"{name}: {key}", points))
        out.append((panel.title, series))
    return [(title, series) for title, series in out if series]


def _points(rows: Sequence[dict[str, Any]], key: str) -> list[tuple[int, float]]:
    return [(int(r["step"]), float(r[key])) for r in rows if _num(r.get(key)) and _num(r.get("step"))]


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Frame:
    """Data -> pixel coordinates of one panel."""

    def __init__(self, series: list[Series]):
        steps = [s for _, points in series for s, _ in points]
        values = [v for _, points in series for _, v in points]
        self.x0, self.x1 = min(steps), max(steps)
        lo, hi = min(values), max(values)
        pad = 0.0 if hi > lo else max(abs(lo) * 0.1, 0.1)
        self.ticks = value_ticks(lo - pad, hi + pad)  # the value axis spans its round ticks
        self.y0, self.y1 = self.ticks[0], self.ticks[-1]

    def x(self, step: float) -> float:
        return LEFT + (step - self.x0) / max(self.x1 - self.x0, 1) * (W - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return TOP + (self.y1 - value) / (self.y1 - self.y0) * (H - TOP - BOTTOM)


def _axes(title: str, f: _Frame) -> list[str]:
    """Title, frame, integer step ticks and round value ticks, with their grid lines."""
    inner_w, inner_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    parts = [
        f'<text x="{W / 2}" y="16" text-anchor="middle" class="ct">{html.escape(title)}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{inner_w}" height="{inner_h}" class="cf"/>',
        f'<text x="{W / 2}" y="{H - 4}" text-anchor="middle">step</text>',
    ]
    for tick in step_ticks(f.x0, f.x1):
        px = f"{f.x(tick):.1f}"
        parts.append(f'<line x1="{px}" x2="{px}" y1="{TOP}" y2="{H - BOTTOM}" class="cg"/>')
        parts.append(f'<text x="{px}" y="{H - BOTTOM + 14}" text-anchor="middle" class="xt">{tick}</text>')
    for value in f.ticks:
        py = f"{f.y(value):.1f}"
        parts.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py}" y2="{py}" class="cg"/>')
        label = f'<text x="{LEFT - 4}" y="{f.y(value) + 4:.1f}" text-anchor="end" class="yt">{value:g}</text>'
        parts.append(label)
    return parts


def _panel_svg(title: str, series: list[Series], runs: list[str]) -> str:
    f = _Frame(series)
    parts = [f'<svg class="curve" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">']
    parts += _axes(title, f)
    dashes: dict[str, int] = {}  # a metric's dash, the same for every run
    for k, (name, points) in enumerate(series):
        run = next((r for r in runs if name == r or name.startswith(f"{r}: ")), runs[0])
        color = COLORS[runs.index(run) % len(COLORS)]
        dash = DASHES[dashes.setdefault(name[len(run) :], len(dashes)) % len(DASHES)]
        stroke = f'stroke="{color}"' + (f' stroke-dasharray="{dash}"' if dash else "")
        coords = " ".join(f"{f.x(s):.1f},{f.y(v):.1f}" for s, v in points)
        label = html.escape(name)
        parts.append(f'<polyline points="{coords}" {stroke} class="cl"><title>{label}</title></polyline>')
        if len(points) == 1:  # one step: a dot, since a polyline of one point draws nothing
            ((s, v),) = points
            parts.append(f'<circle cx="{f.x(s):.1f}" cy="{f.y(v):.1f}" r="3" fill="{color}"/>')
        if k < 6:  # the legend, top left inside the frame
            ly = TOP + 12 + 12 * k
            key = f'x1="{LEFT + 6}" x2="{LEFT + 20}" y1="{ly - 4}" y2="{ly - 4}"'
            parts.append(f'<line {key} {stroke} class="cl"/>')
            parts.append(f'<text x="{LEFT + 24}" y="{ly}">{html.escape(name[:40])}</text>')
    parts.append("</svg>")
    return "".join(parts)


STYLE = (
    "<style>svg.curve{font:10px sans-serif;margin:4px}svg.curve .ct{font-size:12px;font-weight:600}"
    "svg.curve .cf{fill:none;stroke:#bbb}svg.curve .cg{stroke:#eee}"
    "svg.curve .cl{fill:none;stroke-width:1.6}</style>"
)


def curves_svg(run_dirs: Sequence[str | Path]) -> str:
    """Every panel with data, for these runs, as inline SVG; a short note when there is none."""
    try:
        runs = [(Path(d).name or str(d), load_run(d)) for d in run_dirs]
    except PlotError as err:
        return f'<p class="muted">training curves: {html.escape(str(err))}</p>'
    names = [name for name, _ in runs]
    panels = _panels(runs)
    if not panels:
        return '<p class="muted">training curves: no numeric metrics in these runs</p>'
    return STYLE + "".join(_panel_svg(title, series, names) for title, series in panels)
