"""The evaluation report's data: each benchmark's episode view (timelines, coordinates from the
world, failing checks linked to the items they name), the page's embedded data, and the CLIs that
write it (launch/eval.py --report). The page in a real browser: tests/b2tjax/test_report_browser.py."""

from __future__ import annotations

import csv
import importlib.util
import json
import pickle
import re
import sqlite3
from pathlib import Path

import pytest

from b2tjax.report import ReportError, build_episode, render_report
from b2tjax.report.conversation import turn
from tests.report_fixtures import b2t, page_data, repeat_first_restaurant, travelplanner  # noqa: F401 - fixtures
from tests.tp_harness import DATABASE_DIR

REPO = Path(__file__).resolve().parents[2]
TABLES = {
    "meal": "restaurants",
    "attraction": "attractions",
    "entertainment": "entertainment",
    "hotel": "hotels",
}


def minutes(hhmm: str) -> int:
    hours, mins = hhmm.split(":")
    return int(hours) * 60 + int(mins)


@pytest.mark.slow
def test_b2t_view_draws_the_expert_plan_with_the_worlds_coordinates(b2t):  # noqa: F811
    bench, data, pairs, plans = b2t
    visible, truth = pairs[0]
    plan = plans[visible["id"]]
    verdict = bench.evaluate(plan, visible, truth)
    assert verdict.all_passed
    view = bench.episode_view(visible, plan, verdict)
    assert view["request"]["text"] == visible["instruction"]
    events = dict(view["request"]["facts"])["behaviour log"]
    assert events.startswith(f"{len(visible['trajectory'])} events")
    assert [d["day"] for d in view["days"]] == [d["day"] for d in plan]
    store = sqlite3.connect(data / "world.sqlite")
    located = 0
    for day, planned in zip(view["days"], plan):
        assert [it["start"] for it in day["items"]] == [
            minutes(a["start_time"]) for a in planned["activities"]
        ]
        for it, act in zip(day["items"], planned["activities"]):
            if act["type"] == "intercity_transport":
                assert it["kind"] == "intercity" and act["number"] in it["label"]
                continue
            row = store.execute(
                f"SELECT latitude, longitude FROM {TABLES[act['type']]} WHERE name = ? AND city = ?",
                (act["name"], planned["city"]),
            ).fetchone()
            assert (it["lat"], it["lon"]) == row, act["name"]
            located += 1
    assert located >= 3 * (len(plan) - 2)  # every visit of a full day is on the map
    assert len(view["checks"]) == 32 and all(c["passed"] and not c["items"] for c in view["checks"])


def test_b2t_view_links_a_failing_check_to_the_activities_its_reason_names(b2t):  # noqa: F811
    bench, _, pairs, plans = b2t
    visible, truth = pairs[0]
    broken, keys = repeat_first_restaurant(plans[visible["id"]])
    verdict = bench.evaluate(broken, visible, truth)
    view = bench.episode_view(visible, broken, verdict)
    failing = {c["name"]: c for c in view["checks"] if not c["passed"]}
    assert "no_repeated_restaurants" in failing
    assert sorted(failing["no_repeated_restaurants"]["items"]) == sorted(keys)
    known = {it["key"] for d in view["days"] for it in d["items"]} | {d["key"] for d in view["days"]}
    assert all(set(c["items"]) <= known for c in failing.values())
    episode = build_episode(bench, visible, broken, verdict, agent="broken")
    assert episode["failed"] == list(failing) and not episode["passed"] and episode["delivered"]


def test_b2t_view_of_an_undelivered_answer_has_no_days_and_keeps_the_text(b2t):  # noqa: F811
    bench, _, pairs, _ = b2t
    visible, truth = pairs[1]
    verdict = bench.evaluate("not a plan", visible, truth)
    episode = build_episode(bench, visible, "not a plan", verdict)
    assert episode["days"] == [] and episode["answer"] == "not a plan" and not episode["delivered"]
    assert episode["why"] and len(episode["failed"]) == 32


def _attraction_rows() -> dict[tuple[str, str], tuple[float, float]]:
    """(name, city) -> (lat, lon), read from the official CSV with the csv module."""
    with (DATABASE_DIR / "attractions.csv").open(encoding="utf-8") as handle:
        rows = {}
        for row in csv.DictReader(handle):
            rows.setdefault((row["Name"], row["City"]), (float(row["Latitude"]), float(row["Longitude"])))
        return rows


def test_travelplanner_view_places_attractions_and_marks_repeated_restaurants(travelplanner):  # noqa: F811
    bench, pairs, answers = travelplanner
    visible, truth = pairs[0]
    plan = (
        json.loads(answers[visible["id"]])
        if isinstance(answers[visible["id"]], str)
        else answers[visible["id"]]
    )
    verdict = bench.evaluate(plan, visible, truth)
    assert verdict.all_passed
    view = bench.episode_view(visible, plan, verdict)
    assert view["request"]["text"] == visible["query"] and len(view["checks"]) == 13
    rows = _attraction_rows()
    attractions = [it for d in view["days"] for it in d["items"] if it["kind"] == "attraction"]
    assert attractions
    for it in attractions:  # (the plan's cities hold one attraction of each name)
        city = next(x for x in rows if x[0] == it["label"])[1]
        assert (it["lat"], it["lon"]) == rows[(it["label"], city)]
    # Dinner of day 1 at the first restaurant of the plan: the restaurant check fails on those two.
    meals = [
        (k, d, m)
        for k, d in enumerate(plan)
        for m in ("breakfast", "lunch", "dinner")
        if plan[k].get(m, "-") != "-"
    ]
    (k0, _, m0), (k1, _, m1) = meals[0], meals[1]
    broken = json.loads(json.dumps(plan))
    broken[k1][m1] = broken[k0][m0]
    view = bench.episode_view(visible, broken, bench.evaluate(broken, visible, truth))
    failing = {c["name"]: c["items"] for c in view["checks"] if not c["passed"]}
    repeated = [it["key"] for d in view["days"] for it in d["items"] if it["kind"] == "meal"][:2]
    assert failing["is_valid_restaurants"] == repeated


def test_page_embeds_every_episode_and_loads_nothing(b2t):  # noqa: F811
    bench, _, pairs, plans = b2t
    episodes = [
        build_episode(bench, v, plans[v["id"]], bench.evaluate(plans[v["id"]], v, t), agent="expert")
        for v, t in pairs
    ]
    episodes[0]["turns"] = [
        turn(
            '<think>x</script></html></think>\n<tool_call>\n{"name": "A", "arguments": {}}\n</tool_call>', ""
        )
    ]
    page = render_report(episodes, title="t <b>", metrics_text="table & more")
    assert page_data(page)["episodes"] == json.loads(json.dumps(episodes))
    assert "t &lt;b&gt;" in page and "table &amp; more" in page
    # self-contained: no element pulls a resource (src/href) and the script holds no URL to fetch
    assert not re.search(r"""\b(src|href)\s*=|@import|url\(|fetch\(|XMLHttpRequest""", page)
    with pytest.raises(ReportError, match="no episodes"):
        render_report([], title="empty")


def test_markers_in_user_text_stay_text(b2t):  # noqa: F811
    from b2tjax.report.page import _asset

    bench, _, pairs, plans = b2t
    v, t = pairs[0]
    episodes = [build_episode(bench, v, plans[v["id"]], bench.evaluate(plans[v["id"]], v, t), agent="x")]
    page = render_report(episodes, title="@@JS@@.jsonl @@DATA@@", metrics_text="@@CSS@@ @@TITLE@@")
    assert "<title>@@JS@@.jsonl @@DATA@@</title>" in page and "<h1>@@JS@@.jsonl @@DATA@@</h1>" in page
    assert ">@@CSS@@ @@TITLE@@<" in page
    assert page.count(_asset("report.js")) == 1 and page.count(_asset("report.css")) == 1
    assert page.count("@@") == 2 * 4 + 2 * 2  # the user's markers, twice in the title, once in metrics
    assert page_data(page)["episodes"] == json.loads(json.dumps(episodes))


def test_turn_parses_calls_memory_and_names_each_response():
    text = (
        "<think>look</think>\n"
        '<tool_call>\n{"name": "HotelSearch", "arguments": {"city": "Chengdu"}}\n</tool_call>\n'
        '<memory>\n{"op": "add", "text": "hotel A"}\n</memory>'
    )
    reply = (
        "<tool_response>\nHotels: A, B\n</tool_response>\n"
        "<tool_response>\n<memory_response>\nadded 1\n</memory_response>\n</tool_response>"
    )
    t = turn(text, reply, tokens=12, max_chars=5)
    assert t["think"]["text"] == "look" and t["tokens"] == 12
    # arguments and memory values are clipped like responses, the whole text a click away
    (call,) = t["calls"]
    assert call["name"] == "HotelSearch" and call["args"]["text"] == '{"cit'
    assert (
        call["args"]["full"] == '{"city": "Chengdu"}' and call["args"]["cut"] == len(call["args"]["full"]) - 5
    )
    assert len(t["memory"]) == 1 and '"add"' in t["memory"][0]["full"]
    assert [(r["kind"], r["name"], r["text"], r["cut"]) for r in t["responses"]] == [
        ("tool", "HotelSearch", "Hotel", len("Hotels: A, B") - 5),
        ("memory", "memory", "added", 2),
    ]
    # records written before memory replies were <tool_response>-wrapped still read as memory
    legacy = "<tool_response>\nHotels: A, B\n</tool_response>\n<memory_response>\nadded 1\n</memory_response>"
    assert [(r["kind"], r["text"]) for r in turn(text, legacy)["responses"]] == [
        ("tool", "Hotels: A, B"),
        ("memory", "added 1"),
    ]


def _launch(name: str):
    spec = importlib.util.spec_from_file_location(f"launch_{name}", REPO / "launch" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_eval_report_of_the_expert_and_of_a_plans_file(b2t, tmp_path):  # noqa: F811
    bench, data, pairs, plans = b2t
    out = tmp_path / "expert.html"
    assert _launch("eval")(["--data", str(data), "--policy", "expert", "--report", str(out)]) == 0
    episodes = page_data(out.read_text())["episodes"]
    assert len(episodes) == len(bench.load_split("test")) and all(e["passed"] for e in episodes)
    visible = pairs[0][0]
    broken, keys = repeat_first_restaurant(plans[visible["id"]])
    plans_file = tmp_path / "broken.jsonl"
    plans_file.write_text(json.dumps({"id": visible["id"], "plan": broken}) + "\n")
    out = tmp_path / "broken.html"
    main = _launch("eval")
    assert main(["--data", str(data), "--plans", str(plans_file), "--report", str(out)]) == 0
    episodes = {e["id"]: e for e in page_data(out.read_text())["episodes"]}
    assert episodes[visible["id"]]["agent"] == "broken.jsonl"
    check = next(c for c in episodes[visible["id"]]["checks"] if c["name"] == "no_repeated_restaurants")
    assert sorted(check["items"]) == sorted(keys)
    assert sum(e["delivered"] for e in episodes.values()) == 1  # the other instances had no plan
    out = tmp_path / "team.html"
    argv = ["--data", str(data), "--policy", "expert", "--agent", "himap", "--difficulty", "easy"]
    argv += ["--report", str(out)]
    assert main(argv) == 0
    teams = page_data(out.read_text())["episodes"]
    assert teams and all(len(e["himap"]["lanes"]) == len(e["days"]) > 1 for e in teams)


class _EvaluatedTask:
    """A task whose final evaluation keeps its episodes, as BenchmarkTask's does after evaluate:
    one answered record per instance (no turns to decode), judged when the report is built."""

    def __init__(self, bench, pairs, plans):
        from b2tjax.tasks.base import EvalEpisodes
        from rollout.record import EpisodeRecord
        from sandbox.types import StopReason

        records = []
        for index, (visible, _) in enumerate(pairs):
            records.append(EpisodeRecord(visible["id"], episode=index, stop_reason=StopReason.ANSWER))
            records[-1].answer, records[-1].reward = json.dumps(plans[visible["id"]]), float(index)
        self.data = EvalEpisodes(bench, pairs, records, tokenizer=None, sessions=None, results=None)

    def sft_examples(self):
        return [{"ids": list(range(1, 33)), "mask": [0] * 8 + [1] * 24}] * 4

    def train_examples(self):
        return []

    def evaluate(self, model):
        from b2tjax.tasks.base import ProcessPart

        return ProcessPart.alone(({"final_pass_rate": 1.0}, "the metrics table"))

    def eval_episodes(self):
        return self.data


@pytest.mark.slow
def test_training_writes_report_html_beside_eval_json(b2t, tmp_path):  # noqa: F811
    from b2tjax.config import load_config
    from b2tjax.report import write_run_report
    from b2tjax.run.trainer import Trainer, build_model

    bench, _, pairs, plans = b2t
    overrides = [f"out={tmp_path}", "mode=sft_only", "task=travel", "sft.steps=2", "sft.batch_size=2"]
    cfg = load_config(None, overrides + ["sft.max_seq_len=32", "checkpoint.every_steps=2"])
    task = _EvaluatedTask(bench, pairs, plans)
    table = Trainer(cfg, task, build_model(cfg, vocab_size=64), progress=False).run().eval_table
    assert write_run_report(task.eval_episodes(), table, tmp_path, resume=False).startswith("wrote ")
    assert json.loads((tmp_path / "eval.json").read_text()) == {"final_pass_rate": 1.0}
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    episodes = page_data(page)["episodes"]
    # each instance's plan, judged here by the benchmark; its record's reward
    judged = [bench.evaluate(json.dumps(plans[v["id"]]), v, t) for v, t in pairs]
    assert [e["passed"] for e in episodes] == [v.all_passed for v in judged] and any(
        e["passed"] for e in episodes
    )
    assert [e["reward"] for e in episodes] == [float(i) for i in range(len(pairs))]
    assert "the metrics table" in page and "Training curves" in page


def _records_of_traces(traces, tokenizer, instance_id, answer):
    """EpisodeRecords as an engine run of these streams writes them: each assistant message is a
    sampled turn, the message after it the environment's reply (the prompt is left out)."""
    from rollout.agents.himap import HimapTag
    from rollout.record import EpisodeRecord
    from sandbox.himap.kinds import Role

    records = []
    for trace in traces:
        tag = HimapTag(Role(trace["role"]), trace["day"], trace["round"]).stream_tag()
        record = EpisodeRecord(instance_id, stream=trace["stream"], tag=tag)
        for message in trace["messages"][2:]:
            ids = tokenizer.encode(message["content"])
            if message["role"] == "assistant":
                record.turns.append((len(record.ids), len(record.ids) + len(ids)))
                record.append(ids, sampled=True, logprobs=[-0.5] * len(ids))
            else:
                record.append(ids, sampled=False)
        record.answer = answer if trace["role"] == "coordinator" else None
        records.append(record)
    return records


def test_records_of_a_himap_team_make_one_episode_with_a_lane_per_day(b2t):  # noqa: F811
    from b2tjax.report.build import record_episodes
    from models.tokenizer import load_tokenizer
    from sandbox.himap.scripted import solve

    bench, _, pairs, _ = b2t
    visible, truth = pairs[0]
    team = solve(bench, visible, truth)
    tokenizer = load_tokenizer("qwen3")
    records = _records_of_traces(team.traces, tokenizer, visible["id"], team.answer)
    (plain,), (verdict,) = record_episodes(bench, pairs, records, tokenizer, agent="team")
    assert verdict.all_passed and plain["passed"] and plain["himap"]["figures"]["days"] == len(plain["days"])
    executors = [t for t in team.traces if t["role"] == "executor"]
    lanes = plain["himap"]["lanes"]
    assert [lane["day"] for lane in lanes] == sorted({t["day"] for t in executors})
    for lane in lanes:
        (stream,) = lane["streams"]  # one round: every day accepted at once
        trace = next(t for t in executors if t["stream"] == stream["name"])
        calls = [m for m in trace["messages"] if m["role"] == "assistant"]
        assert len(stream["turns"]) == len(calls) and stream["outcome"] is None  # no session here
    assert plain["tokens"] == sum(r.num_sampled for r in records)
    (full,), _ = record_episodes(bench, pairs, records, tokenizer, sessions={0: team.session})
    assert full["himap"]["figures"]["accepted_days"] == len(full["days"])
    events = [e for lane in full["himap"]["lanes"] for e in lane["events"]]
    assert len(events) == len(team.session.sigma.events) and full["himap"]["last_seq"] == max(
        e["seq"] for e in events
    )
    assert all(
        s["outcome"]["status"] == "accepted" for lane in full["himap"]["lanes"] for s in lane["streams"]
    )
    # A team another process drove arrives pickled as a TeamSummary (rollout.hosts.gather_objects):
    # its report episode is the one the live session gives, Σ's lanes, rounds and task included.
    from b2tjax.tasks.himap import TeamSummary

    sent = pickle.loads(pickle.dumps(TeamSummary.of(team)))
    (remote,), _ = record_episodes(bench, pairs, records, tokenizer, sessions={0: sent.session})
    assert remote == full and remote["himap"]["task"] and remote["himap"]["goals"]
