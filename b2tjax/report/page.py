"""Write the report: one self-contained HTML file (inline CSS, JS and SVG; it loads nothing) from
report episodes (b2tjax.report.episode), the split's metrics table and optional training curves.

The episodes travel as one compressed JSON block that the page's script renders; only the summary lines are
built when the page opens, each episode's body when its section is first opened.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import html
import json
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from b2tjax.report.curves import curves_svg

# Readable names of the constraint groups the benchmarks' views use.
GROUPS = {
    "C": "Commonsense (C)",
    "UPC": "Personalization (UPC)",
    "commonsense": "Commonsense (official)",
    "hard": "Hard constraints (official)",
}


_MARKER = re.compile(r"@@([A-Z]+)@@")


class ReportError(ValueError):
    """A user-facing problem writing a report; the message is one line."""


def _asset(name: str) -> str:
    return resources.files("b2tjax.report").joinpath("assets", name).read_text(encoding="utf-8")


def render_report(
    episodes: Sequence[dict[str, Any]],
    *,
    title: str,
    metrics_text: str = "",
    run_dirs: Sequence[str | Path] = (),
    subtitle: str = "",
) -> str:
    """The whole HTML page as a string."""
    if not episodes:
        raise ReportError("no episodes to report")
    agents = sorted({e["agent"] for e in episodes if e["agent"]})
    passed = sum(e["passed"] for e in episodes)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = subtitle or (
        f"{len(episodes)} episodes · {passed} pass every check"
        + (f" · agent {', '.join(agents)}" if agents else "")
        + f" · written {stamp}"
    )
    data = {"subtitle": subtitle, "groups": GROUPS, "episodes": list(episodes)}
    # gzip'd JSON as base64: tool responses repeat a lot, so the page is ~10x smaller (the browser
    # decompresses it with DecompressionStream, no library); mtime=0 keeps the bytes reproducible.
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    blob = base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")
    curves = ""
    if run_dirs:
        curves = f'<h3>Training curves</h3><div class="curves">{curves_svg(run_dirs)}</div>'
    parts = {
        "TITLE": html.escape(title),
        "METRICS": html.escape(metrics_text or "(no metrics table)"),
        "CURVES": curves,
        "CSS": _asset("report.css"),
        "JS": _asset("report.js"),
        "DATA": blob,
    }
    # One pass over the template: a marker inside a substituted value (a rollouts file named
    # @@JS@@.jsonl in the title) stays text; a replace() per marker would expand it too.
    return _MARKER.sub(lambda m: parts[m.group(1)], _asset("page.html"))


def write_report(path: str | Path, episodes: Sequence[dict[str, Any]], **options: Any) -> Path:
    """Write the page to `path` (parents created); options as for render_report."""
    path = Path(path)
    page = render_report(episodes, **options)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as err:
        raise ReportError(f"cannot write the report {path}: {err.strerror or err}") from None
    return path
