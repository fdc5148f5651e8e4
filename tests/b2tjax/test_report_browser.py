"""The HTML report in headless Chromium (Debian's `chromium`; .ci/run installs it): a real evaluation
(expert plans of both benchmarks, a plan broken on purpose, the scripted HiMAP team, the tiny
model's rollouts) is rendered, then read back from the browser's DOM: one section per episode, the
broken plan's failing constraint highlighted on its timeline, the filters, no network request, a
screenshot that is not blank, and a 200-episode page that opens in under 3 s and weighs < 10 MB."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from b2tjax.report import build_episode, write_report
from b2tjax.report.build import record_episodes
from b2tjax.report.himap import himap_view, streams_from_traces
from tests.browser import Browser, find_chromium
from tests.report_fixtures import b2t, repeat_first_restaurant, travelplanner  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_chromium() is None, reason="no chromium (apt-get install -y chromium)"),
]
REPO = Path(__file__).resolve().parents[2]


def _rollouts_main():
    spec = importlib.util.spec_from_file_location("launch_rollouts", REPO / "launch" / "rollouts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.fixture(scope="module")
def b2t_episodes(b2t, tmp_path_factory):  # noqa: F811
    """Expert episodes, the broken plan (with the keys its failing check must mark), the scripted
    HiMAP team on the first instance, and two episodes of the random tiny model."""
    from models.tokenizer import load_tokenizer
    from rollout.record import EpisodeRecord
    from sandbox.himap.scripted import solve

    bench, data, pairs, plans = b2t
    episodes = []
    for visible, truth in pairs:
        plan = plans[visible["id"]]
        episodes.append(
            build_episode(bench, visible, plan, bench.evaluate(plan, visible, truth), agent="expert")
        )
    visible, truth = pairs[0]
    broken, keys = repeat_first_restaurant(plans[visible["id"]])
    episodes.append(
        build_episode(bench, visible, broken, bench.evaluate(broken, visible, truth), agent="broken")
    )
    team = solve(bench, visible, truth)
    view = himap_view(team.session, streams_from_traces(team.traces))
    verdict = bench.evaluate(team.answer, visible, truth)
    episodes.append(build_episode(bench, visible, team.answer, verdict, agent="himap-expert", himap=view))
    out = tmp_path_factory.mktemp("rollouts") / "tiny.jsonl"
    argv = ["--model", "tiny", "--data", str(data), "--num", "2", "--out", str(out), "--max-turns", "2"]
    argv += ["--max-turn-tokens", "8", "--turn-cap", "close", "--max-total-tokens", "5632"]
    assert _rollouts_main()(argv + ["--max-prompt-tokens", "5120", "--batch-size", "2"]) == 0
    records = [EpisodeRecord.from_json(json.loads(line)) for line in out.read_text().splitlines()]
    tokenizer = load_tokenizer(records[0].tokenizer)
    tiny, _ = record_episodes(bench, pairs, records, tokenizer, agent="tiny", shading=True)
    return episodes + tiny, keys


def _open(browser: Browser, page: Path) -> float:
    """Load the page and wait until its script has listed the episodes; the seconds it took."""
    started = time.perf_counter()
    browser.open(page)
    assert browser.wait_for("document.body.dataset.ready") == "1"
    return time.perf_counter() - started


def _visible_ids(browser: Browser) -> list[str]:
    return browser.eval(
        "[...document.querySelectorAll('details.ep')].filter(d => !d.hidden)"
        ".map(d => d.querySelector('.id').textContent)"
    )


def _set(browser: Browser, select: str, value: str) -> None:
    browser.eval(
        f"{{ const s = document.getElementById('{select}'); s.value = {json.dumps(value)}; "
        "s.dispatchEvent(new Event('input')); } 1"
    )


def test_b2t_report_in_chromium(b2t_episodes, tmp_path):
    from PIL import Image

    episodes, keys = b2t_episodes
    page = write_report(tmp_path / "report.html", episodes, title="b2t test", metrics_text="metrics")
    with Browser() as browser:
        _open(browser, page)
        assert browser.eval("document.querySelectorAll('details.ep').length") == len(episodes)
        assert browser.eval("document.querySelectorAll('details.ep .body').length") == 0  # lazy
        broken = next(i for i, e in enumerate(episodes) if e["agent"] == "broken")
        browser.eval(f"document.querySelectorAll('details.ep')[{broken}].querySelector('summary').click(); 1")
        section = f"document.querySelectorAll('details.ep')[{broken}]"
        marked = browser.wait_for(f"[...{section}.querySelectorAll('.item.bad')].map(n => n.dataset.key)")
        assert sorted(marked) == sorted(keys)
        assert "no_repeated_restaurants" in browser.eval(f"{section}.querySelector('.item.bad').title")
        assert browser.eval(
            f"{section}.querySelector('.cell.no[data-check=no_repeated_restaurants]') !== null"
        )
        browser.eval(f"{section}.querySelector('.cell.no[data-check=no_repeated_restaurants]').click(); 1")
        assert sorted(
            browser.eval(f"[...{section}.querySelectorAll('.item.focus')].map(n => n.dataset.key)")
        ) == sorted(keys)
        assert browser.eval(f"{section}.querySelectorAll('svg.map circle').length") > 10
        # every other section renders without a script error
        browser.eval("document.querySelectorAll('details.ep').forEach(d => d.open = true); 1")
        browser.wait_for(f"document.querySelectorAll('details.ep .body').length === {len(episodes)}")
        himap = next(i for i, e in enumerate(episodes) if e["himap"])
        lanes = browser.eval(
            f"document.querySelectorAll('details.ep')[{himap}].querySelectorAll('.lane .ltrack').length"
        )
        assert lanes == len(episodes[himap]["himap"]["lanes"]) > 1
        assert browser.eval("document.querySelectorAll('.shade span').length") > 0  # the tiny model's tokens
        browser.screenshot(tmp_path / "open.png")
        # filters: failed hides every passing episode; a constraint keeps only the episodes failing it
        _set(browser, "f-status", "failed")
        assert _visible_ids(browser) == [e["id"] for e in episodes if not e["passed"]]
        _set(browser, "f-status", "all")
        _set(browser, "f-check", "no_repeated_restaurants")
        assert _visible_ids(browser) == [
            e["id"] for e in episodes if "no_repeated_restaurants" in e["failed"]
        ]
        assert browser.requests == [page.resolve().as_uri()] and browser.errors == []
    image = Image.open(tmp_path / "open.png").convert("RGB")
    assert image.size == (1400, 1000)
    colors = image.getcolors(maxcolors=1 << 20)
    assert len(colors) > 50 and max(n for n, _ in colors) < 0.9 * 1400 * 1000  # not one flat colour


def test_travelplanner_report_in_chromium(travelplanner, tmp_path):  # noqa: F811
    bench, pairs, answers = travelplanner
    episodes = [
        build_episode(bench, v, answers[v["id"]], bench.evaluate(answers[v["id"]], v, t), agent="expert")
        for v, t in pairs
    ]
    page = write_report(tmp_path / "tp.html", episodes, title="tp")
    with Browser() as browser:
        _open(browser, page)
        browser.eval("document.querySelectorAll('details.ep').forEach(d => d.open = true); 1")
        browser.wait_for(f"document.querySelectorAll('details.ep .body').length === {len(episodes)}")
        items = sum(len(d["items"]) for e in episodes for d in e["days"])
        assert browser.eval("document.querySelectorAll('.slots .item').length") == items > 0
        assert browser.eval("document.querySelectorAll('.cell').length") == 13 * len(episodes)
        assert browser.requests == [page.resolve().as_uri()] and browser.errors == []


def test_a_200_episode_report_opens_in_under_3_seconds(b2t_episodes, tmp_path):
    episodes, _ = b2t_episodes
    many = [{**episodes[k % len(episodes)], "id": f"episode-{k:03d}"} for k in range(200)]
    page = write_report(tmp_path / "many.html", many, title="200 episodes")
    assert page.stat().st_size < 10 * 2**20
    with Browser() as browser:
        seconds = _open(browser, page)
        assert browser.eval("document.querySelectorAll('details.ep').length") == 200
        assert seconds < 3.0, f"the page took {seconds:.2f}s to open"
        started = time.perf_counter()
        browser.eval("document.querySelectorAll('details.ep')[5].open = true; 1")
        browser.wait_for("document.querySelectorAll('details.ep .body').length === 1")
        assert time.perf_counter() - started < 1.0  # one section renders at once
        assert browser.errors == []
