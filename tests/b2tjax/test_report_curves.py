"""The report draws a run's curves itself: inline SVG read from metrics.jsonl, no
matplotlib (the README install has none), the SFT loss included, integer step ticks and round value
ticks; and in headless Chromium the panels render, the metrics box shows its long header whole and a
clipped text opens in full on a click."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import Browser, find_chromium

ROOT = Path(__file__).resolve().parents[2]


def _run(run_dir: Path) -> None:
    """metrics.jsonl as the trainer writes it: 4 SFT steps, then 3 GRPO steps."""
    from b2tjax.run.metrics import MetricsWriter

    writer = MetricsWriter(run_dir, total_steps=7, enabled=True, progress=False)
    for step in range(1, 5):
        writer.log(step, {"loss": 9.0 - step, "grad_norm": 1.0}, phase="sft")
    for step in range(5, 8):
        writer.log(
            step,
            {"loss": 0.01, "reward": 0.1 * step, "final_pass": 0.0, "action_error_rate": 0.5},
            phase="grpo",
        )
    writer.close()


def test_step_ticks_are_integers_within_the_steps():
    from b2tjax.report.curves import step_ticks

    assert step_ticks(1, 2) == [1, 2] and step_ticks(3, 7) == [3, 4, 5, 6, 7] and step_ticks(1, 1) == [1]
    for lo, hi in ((1, 14), (0, 1000), (5, 37)):
        ticks = step_ticks(lo, hi)
        assert 2 <= len(ticks) <= 7 and all(lo <= t <= hi and isinstance(t, int) for t in ticks)


@pytest.mark.parametrize(
    "lo, hi", [(-0.25, 0.04), (0.5, 0.7), (0.0, 1.0), (1e-5, 3e-5), (-1.0, -0.9), (3.0, 997.0)]
)
def test_value_ticks_are_round_steps_that_cover_the_values(lo, hi):
    """Evenly spaced multiples of 1, 2 or 5 times a power of ten, the first at or below the lowest
    value and the last at or above the highest, 3 to 7 of them."""
    from b2tjax.report.curves import value_ticks

    ticks = value_ticks(lo, hi)
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m) for m in (1, 2, 5)), (ticks, step)
    assert all(math.isclose(b - a, step) for a, b in zip(ticks, ticks[1:]))
    assert all(math.isclose(t / step, round(t / step), abs_tol=1e-6) for t in ticks)  # multiples
    assert ticks[0] <= lo < ticks[1] and ticks[-2] < hi <= ticks[-1] and 3 <= len(ticks) <= 7


def test_curves_are_drawn_without_matplotlib(tmp_path):
    """In a process where matplotlib cannot be imported (the README install), the curves are SVG
    panels of the run's own values: the SFT loss (SFT steps only), reward, pass rates, action errors."""
    _run(tmp_path / "run")
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"  # import matplotlib now raises ImportError
        "from b2tjax.report.curves import curves_svg\n"
        f"print(curves_svg([{str(tmp_path / 'run')!r}]))\n"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    svg = out.stdout
    titles = [t.split("</text>")[0] for t in svg.split('class="ct">')[1:]]
    assert titles == ["SFT loss", "Reward", "Pass rates", "Action error rate"]
    sft = svg.split("</svg>")[0]  # the first panel
    assert sft.count("<polyline") == 1 and sft.count(",") == 4  # steps 1-4 only: GRPO's loss is not SFT's
    ticks = [t.split("</text>")[0] for t in svg.split('class="xt">')[1:]]
    assert ticks and all(t.isdigit() for t in ticks)
    reward = svg.split("</svg>")[1]  # values 0.5, 0.6, 0.7: the axis reads 0.5 to 0.7 in 0.05s
    labels = [t.split("</text>")[0] for t in reward.split('class="yt">')[1:]]
    assert labels == ["0.5", "0.55", "0.6", "0.65", "0.7"]


@pytest.mark.slow
@pytest.mark.skipif(find_chromium() is None, reason="no chromium (apt-get install -y chromium)")
def test_curves_and_a_clipped_text_in_chromium(tmp_path):
    from PIL import Image

    from b2tjax.report import write_report

    _run(tmp_path / "run")
    long_name = "N" * 700 + "TAIL"
    episode = {
        "id": "e1", "agent": "a", "difficulty": "easy", "delivered": False, "passed": False,
        "why": "no answer",
        "failed": [], "request": {"text": "r", "facts": []}, "days": [], "checks": [], "answer": None,
        "turns": [], "stop_reason": "", "tokens": None, "himap": None, "reward": 0.0,
        "clipped": [{"where": "days[0].items[0].label", "text": long_name[:300], "cut": 404,
                     "full": long_name, "lost": 0}],
    }  # fmt: skip
    header = "b2t evaluation on 4 test instances (temperature 0); " + "figure 0.000, " * 30 + "LAST"
    table = header + "\n" + "metric        value\n" + "final pass    0.000"
    page = write_report(
        tmp_path / "report.html", [episode], title="curves", metrics_text=table, run_dirs=[tmp_path / "run"]
    )
    with Browser() as browser:
        browser.open(page)
        assert browser.wait_for("document.body.dataset.ready") == "1"
        assert browser.eval("document.querySelectorAll('svg.curve').length") == 4
        assert browser.eval("document.querySelectorAll('svg.curve polyline').length") >= 4
        box = browser.eval("(() => { const r = document.querySelector('svg.curve').getBoundingClientRect(); "
                           "return [r.width, r.height]; })()")  # fmt: skip
        assert box[0] > 300 and box[1] > 200
        # the metrics box shows its whole header: no line runs out of the box behind a scroll bar
        metrics = "document.querySelector('pre.metrics')"
        assert browser.eval(f"{metrics}.scrollWidth <= {metrics}.clientWidth")
        assert browser.eval(f"{metrics}.innerText").startswith(header[:60])
        browser.screenshot(tmp_path / "curves.png")
        browser.eval("document.querySelector('details.ep').open = true; 1")
        browser.wait_for("document.querySelector('details.ep .body') !== null")
        browser.eval("document.querySelector('details.ep .body details.resp').open = true; 1")
        assert "TAIL" not in browser.eval("document.querySelector('details.ep .body').innerText")
        browser.eval("document.querySelector('details.ep .body .cut.more').click(); 1")
        assert "TAIL" in browser.eval("document.querySelector('details.ep .body').innerText")
        assert browser.errors == [] and browser.requests == [page.resolve().as_uri()]
    colors = Image.open(tmp_path / "curves.png").convert("RGB").getcolors(maxcolors=1 << 20)
    assert len(colors) > 20
