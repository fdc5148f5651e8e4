"""Benchmark generation: instances per split and difficulty, written as visible and hidden files.

Every instance draws from its own random stream, seeded by (seed, split, difficulty, index), so
the output is byte-identical for a seed, independent of order or process count, and one instance
can be regenerated alone (with a retry salt) when a validator such as the expert rejects it.
"""

import datetime as dt
import json
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.benchmarks.b2t.instances import feasibility
from sandbox.benchmarks.b2t.instances.catalog import Catalog
from sandbox.benchmarks.b2t.instances.instructions import make_instruction
from sandbox.benchmarks.b2t.instances.profiles import (
    DIFFICULTIES,
    category_count,
    consistency_problems,
    sample_profile,
)
from sandbox.benchmarks.b2t.instances.trajectories import TrajectoryError, build_trajectory

SPLIT_SIZES = {
    "small": {"train": 20, "test": 10},
    "full": {"train": 3000, "test": 800},
}
TRIP_DAYS = (3, 4, 5, 6, 7)
TRIP_DAY_WEIGHTS = (0.12, 0.2, 0.36, 0.2, 0.12)  # mean 5.0 days (Table 2: 4.9-5.0)
PARTY_SIZES = (1, 2, 3, 4)
PARTY_WEIGHTS = (0.24, 0.42, 0.2, 0.14)  # mean 2.24 travellers (Table 2: 2.1-2.3)
MAX_ATTEMPTS = 600
SHORTEN_EVERY = 100  # failed attempts after which the trip loses a day (enough redraws to reach 3)


@dataclass
class Instance:
    visible: dict[str, Any]  # id, split, difficulty, instruction, trajectory
    hidden: dict[str, Any]  # id, query, profile


class GenerationError(RuntimeError):
    """No attempt produced a valid instance (the message names the commonest reasons)."""


def instance_id(split: str, difficulty: str, index: int) -> str:
    return f"{split}-{difficulty}-{index:05d}"


def _budget(rng: random.Random, cheapest: float) -> int:
    """Budget above the cheapest valid plan, with room for a comfortable plan."""
    return int(math.ceil(cheapest * rng.uniform(1.35, 1.8) / 100.0) * 100)


def _sample_query(
    rng: random.Random, catalog: Catalog, profile: dict[str, Any], days: int, people: int
) -> dict[str, Any] | None:
    """Dates and cities of a trip; the destination is one the preferred transport reaches."""
    first = dt.date.fromisoformat(catalog.date_start)
    last = dt.date.fromisoformat(catalog.date_end) - dt.timedelta(days=days - 1)
    start = first + dt.timedelta(days=rng.randrange((last - first).days + 1))
    end = (start + dt.timedelta(days=days - 1)).isoformat()
    origin = rng.choice(catalog.city_names())
    candidates = [c for c in catalog.city_names() if c != origin]
    rng.shuffle(candidates)
    for city in candidates:  # the first reachable one of a random order: uniform over them
        if feasibility.usable_legs(
            catalog, profile, origin, city, start.isoformat(), True
        ) and feasibility.usable_legs(catalog, profile, city, origin, end, False):
            return {
                "origin": origin,
                "destination": city,
                "start_date": start.isoformat(),
                "days": days,
                "people": people,
            }
    return None


def _draw_trip(
    rng: random.Random, catalog: Catalog, difficulty: str, n_categories: int, days: int, people: int
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]] | str:
    """One attempt: (profile, query with its budget, trajectory events) when the drawn trip is
    consistent and feasible with its history, else the reason it is not."""
    profile = sample_profile(rng, difficulty, n_categories)
    problems = consistency_problems(profile)
    if problems:
        return "inconsistent profile: " + problems[0]
    query = _sample_query(rng, catalog, profile, days, people)
    if query is None:
        return "no city reachable in the preferred transport mode and class"
    start = dt.date.fromisoformat(query["start_date"])
    return_date = (start + dt.timedelta(days=query["days"] - 1)).isoformat()
    request_date = start - dt.timedelta(days=rng.randint(3, 30))
    verdict = feasibility.check(catalog, profile, query, return_date)  # before any history
    if not verdict.ok:
        return verdict.reason
    try:
        events, history = build_trajectory(rng, catalog, profile, query, difficulty, request_date)
    except TrajectoryError as err:
        return str(err)
    profile["history"] = history
    verdict = feasibility.check(catalog, profile, query, return_date)
    if not verdict.ok:
        return verdict.reason
    query["budget"] = _budget(rng, verdict.cheapest_cost)
    return profile, query, events


def make_instance(
    catalog: Catalog,
    split: str,
    difficulty: str,
    index: int,
    seed: int,
    language: str = "en",
    salt: int = 0,
    reasons: Counter | None = None,
) -> Instance:
    """One solvable instance; `reasons` counts why rejected attempts were rejected."""
    rng = random.Random(f"b2t:{seed}:{split}:{difficulty}:{index}:{salt}")
    reasons = reasons if reasons is not None else Counter()
    # Trip length, party size and how many categories are constrained are drawn once, so that
    # rejecting hard-to-serve attempts does not shift their distribution (Table 2).
    days = rng.choices(TRIP_DAYS, weights=TRIP_DAY_WEIGHTS)[0]
    people = rng.choices(PARTY_SIZES, weights=PARTY_WEIGHTS)[0]
    n_categories = category_count(difficulty, rng)
    for attempt in range(MAX_ATTEMPTS):
        if attempt and attempt % SHORTEN_EVERY == 0:
            # A sparse store (small scale) may hold too few matching places for a long trip of a hard
            # profile: shorter trips need fewer distinct restaurants and sights, so every seed builds.
            days = max(TRIP_DAYS[0], days - 1)
        drawn = _draw_trip(rng, catalog, difficulty, n_categories, days, people)
        if isinstance(drawn, str):
            reasons[drawn] += 1
            continue
        profile, query, events = drawn
        iid = instance_id(split, difficulty, index)
        zh_names = {name: c["name_zh"] for name, c in catalog.cities.items()}
        visible = {
            "id": iid,
            "split": split,
            "difficulty": difficulty,
            "instruction": make_instruction(rng, query, zh_names, language),
            "trajectory": events,
        }
        hidden = {"id": iid, "query": query, "profile": profile}
        return Instance(visible, hidden)
    top = ", ".join(f"{r} ({n})" for r, n in reasons.most_common(3))
    raise GenerationError(f"no valid {difficulty} instance after {MAX_ATTEMPTS} attempts: {top}")


def generate_split(
    catalog: Catalog,
    split: str,
    per_difficulty: int,
    seed: int,
    language: str = "en",
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Instance], Counter]:
    """All instances of a split (difficulty-major order) and why rejected attempts failed.

    Instances are not checked by the expert here; `sandbox.benchmarks.b2t.instances.build` does that.
    """
    out: list[Instance] = []
    reasons: Counter = Counter()
    total = per_difficulty * len(DIFFICULTIES)
    for difficulty in DIFFICULTIES:
        for index in range(per_difficulty):
            out.append(make_instance(catalog, split, difficulty, index, seed, language, 0, reasons))
            if progress:
                progress(len(out), total)
    return out, reasons


def split_lines(inst: Instance) -> dict[str, str]:
    """The instance's lines in instances/ ("visible") and ground_truth/ ("hidden")."""
    parts = ("visible", "hidden")
    return {part: json.dumps(getattr(inst, part), ensure_ascii=False, sort_keys=True) for part in parts}


def write_split(out_dir: str | Path, split: str, instances: list[Instance]) -> None:
    """instances/{split}.jsonl (what the agent sees) and ground_truth/{split}.jsonl (hidden)."""
    out_dir = Path(out_dir)
    for sub, part in (("instances", "visible"), ("ground_truth", "hidden")):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)
        with open(out_dir / sub / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for inst in instances:
                f.write(split_lines(inst)[part] + "\n")
