"""The HTML evaluation report: one self-contained page per evaluation (docs/ARCHITECTURE.md).

    episode = build_episode(bench, visible, answer, verdict, agent="expert", turns=..., himap=...)
    write_report("report.html", episodes, title=..., metrics_text=bench.format_metrics(m), run_dirs=[RUN])

Benchmark-specific content (timelines, coordinates, which item a check concerns) comes from
`Benchmark.episode_view`; this package only lays it out.
"""

from b2tjax.report.build import write_run_report
from b2tjax.report.episode import build_episode
from b2tjax.report.page import ReportError, render_report, write_report

__all__ = ["ReportError", "build_episode", "render_report", "write_report", "write_run_report"]
