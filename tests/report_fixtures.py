"""Shared data of the report tests: a small B2T data directory, a small TravelPlanner one (skipped
without ../shared), each benchmark's expert plans, and a plan broken on purpose."""

from __future__ import annotations

import argparse
import base64
import copy
import gzip
import json
import re
from typing import Any

import pytest

from tests.tp_harness import DATA_DIR, require_shared


def page_data(page: str) -> dict[str, Any]:
    """The JSON a report page embeds (gzip'd, base64), read back as the page's script reads it."""
    blob = re.search(r'id="report-data">([^<]*)</script>', page).group(1)
    return json.loads(gzip.decompress(base64.b64decode(blob)))


@pytest.fixture(scope="module")
def b2t(tmp_path_factory):
    """(benchmark, data dir, test pairs, the expert's plans by id) on the small world."""
    from b2tjax.cli import make_data
    from sandbox.benchmarks import get_benchmark

    data = tmp_path_factory.mktemp("b2t") / "data"
    argv = ["--benchmark", "b2t", "--out", str(data), "--scale", "small", "--seed", "0", "--instances", "2"]
    assert make_data.main(argv) == 0
    bench = get_benchmark("b2t", data)
    pairs = bench.load_split("test")[:3]
    plans = {i: json.loads(a) for i, a in bench.expert_answers(pairs)}
    return bench, data, pairs, plans


@pytest.fixture(scope="module")
def travelplanner(tmp_path_factory):
    """(benchmark, dev pairs, the expert's plans by id) on a small TravelPlanner data directory."""
    require_shared()
    from sandbox.benchmarks import get_benchmark
    from sandbox.benchmarks.travelplanner.prepare import make_data

    data = tmp_path_factory.mktemp("tp") / "data"
    args = argparse.Namespace(tp_data=DATA_DIR, generated=2, scale="small", seed=0, no_expert=True)
    make_data(data, args, lambda message: None)
    bench = get_benchmark("travelplanner", data)
    pairs = bench.load_split("dev")[:2]
    return bench, pairs, dict(bench.expert_answers(pairs))


def repeat_first_restaurant(plan: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The B2T plan with its second meal at the first meal's restaurant, and the two meals' item keys
    ("d<day>.<index>"): the plan now fails `no_repeated_restaurants`, naming both meals."""
    broken = copy.deepcopy(plan)
    meals = [
        (day["day"], k, act)
        for day in broken
        for k, act in enumerate(day["activities"])
        if act["type"] == "meal"
    ]
    (day0, k0, first), (day1, k1, second) = meals[0], meals[1]
    second["name"] = first["name"]
    return broken, [f"d{day0}.{k0}", f"d{day1}.{k1}"]
