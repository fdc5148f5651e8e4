"""Speed benchmark: tool latency on the full-scale world: p50/p99 of each search tool and MapGuide, Python
tool rate.

    python benchmarks/bench_sandbox.py [--store /tmp/b2t_full/world.sqlite] [--calls 300]

Builds the full store first when it is missing (and reports the build time). The reference is a
bare indexed SQLite lookup of the same city's rows measured in the same run, so the ratio column
shows what validation, filtering and formatting add on top of the database.
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from sandbox.benchmarks.b2t import vocab
from sandbox.benchmarks.b2t.tools.registry import B2TTools
from sandbox.benchmarks.b2t.world.generator import build_world
from sandbox.benchmarks.b2t.world.store import open_world


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def tool_calls(world, rng: random.Random, count: int) -> dict[str, list[dict]]:
    """Varied, valid calls per tool: random cities, preferences and filters, fixed by the seed."""
    cities = world.city_names()
    dates = [f"2026-{m:02d}-{d:02d}" for m in range(3, 9) for d in (1, 10, 20)]

    def some(options, k=2):
        return rng.sample(list(options), rng.randint(1, k))

    def poi_name(table, city):
        return world.query(
            f"SELECT name FROM {table} WHERE city = ? ORDER BY id LIMIT 1 OFFSET ?", (city, rng.randrange(30))
        )[0][0]

    calls: dict[str, list[dict]] = {}
    for _ in range(count):
        city, other = rng.sample(cities, 2)
        for name, args in one_round(city, other, rng, dates, some, poi_name).items():
            calls.setdefault(name, []).append(args)
    return calls


def one_round(city: str, other: str, rng: random.Random, dates: list[str], some, poi_name) -> dict[str, dict]:
    """One valid call of each tool around `city` (and `other` for intercity searches)."""
    calls: dict[str, dict] = {}
    calls["AccommodationSearch"] = {
        "city": city,
        "preferences": {
            "star_rating": some(vocab.STAR_LEVELS),
            "amenities": some(vocab.HOTEL_FACILITIES),
        },
    }
    calls["AttractionSearch"] = {
        "city": city,
        "preferences": {
            "attraction_type": some(vocab.ATTRACTION_TYPES, 3),
            "walk_tolerance": some(vocab.WALKING_TOLERANCE, 1),
        },
    }
    calls["EntertainmentSearch"] = {"city": city, "preferences": {"type": some(vocab.ENTERTAINMENT_TYPES)}}
    calls["RestaurantSearch"] = {
        "city": city,
        "open_at": "12:00",
        "preferences": {
            "cuisine": some(vocab.CUISINES, 3),
            "price_level": some(vocab.PRICE_LEVELS, 1),
            "environment": some(vocab.DINING_ENVIRONMENTS),
        },
    }
    calls["FlightSearch"] = {
        "origin": other,
        "destination": city,
        "departure_date": rng.choice(dates),
        "preferences": {"cabin_class": some(vocab.FLIGHT_CABINS, 1)},
    }
    calls["TrainSearch"] = {"origin": city, "destination": other}
    calls["WeatherSearch"] = {"city": city, "date": rng.choice(dates), "n": 5}
    calls["MapGuide (city)"] = {
        "origin_cityName": city,
        "origin": poi_name("hotels", city),
        "destination_cityName": city,
        "destination": poi_name("attractions", city),
    }
    calls["MapGuide (intercity)"] = {
        "origin_cityName": city,
        "origin": city,
        "destination_cityName": other,
        "destination": other,
    }
    calls["Search with near"] = {
        "city": city,
        "near": poi_name("hotels", city),
        "radius_km": 3,
        "preferences": {"cuisine": some(vocab.CUISINES, 4)},
    }
    return calls


def time_calls(fn, args_list: list) -> list[float]:
    out = []
    for args in args_list:
        t0 = time.perf_counter()
        fn(args)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def python_rate(calls: int = 40) -> str:
    """Serial calls/s of the Python tool's pool (the one an episode's Python calls run on)."""
    try:
        from sandbox.python_tool import PythonSandbox  # optional for this benchmark

        sandbox = PythonSandbox()
    except Exception as e:  # no jail on this machine, or not installed
        return f"unavailable ({type(e).__name__})"
    with sandbox:
        sandbox.run("print(1)")  # warm the pool
        t0 = time.perf_counter()
        for k in range(calls):
            sandbox.run(f"print(sum(range({k})))")
        return f"{calls / (time.perf_counter() - t0):.1f} calls/s (serial)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", type=Path, default=Path("/tmp/b2t_full/world.sqlite"))
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args(argv)
    if not args.store.exists():
        t0 = time.perf_counter()
        counts = build_world(args.store, "full", seed=0)
        print(f"built full store in {time.perf_counter() - t0:.1f}s: {counts}")
    world = open_world(args.store)
    tools = B2TTools(world)
    counts = {
        t: world.query(f"SELECT COUNT(*) FROM {t}")[0][0]
        for t in ("restaurants", "hotels", "attractions", "entertainment", "flights", "trains", "weather")
    }
    print(f"store {args.store} ({args.store.stat().st_size / 2**20:.0f} MiB): {counts}")
    rng = random.Random(0)
    calls = tool_calls(world, rng, args.calls)
    cities = world.city_names()
    reference = time_calls(
        lambda c: world.query("SELECT * FROM restaurants WHERE city = ? LIMIT 5", (c,)),
        [rng.choice(cities) for _ in range(args.calls)],
    )
    ref_p50 = statistics.median(reference)
    rows = [("raw SQLite lookup (reference)", reference)]
    for label, args_list in calls.items():
        tool = label.split(" (")[0] if label != "Search with near" else "RestaurantSearch"
        for warm in args_list[:5]:
            tools.call_tool(tool, warm)
        errors = [a for a in args_list if tools.call_tool(tool, a).is_error]
        assert not errors, (label, errors[:1], tools.call_tool(tool, errors[0]).text)
        rows.append((label, time_calls(lambda a, t=tool: tools.call_tool(t, a), args_list)))
    print(f"\n{'tool':34s} {'calls':>6s} {'p50 ms':>8s} {'p99 ms':>8s} {'p50 / ref':>10s}")
    for label, times in rows:
        p50 = statistics.median(times)
        print(f"{label:34s} {len(times):6d} {p50:8.3f} {percentile(times, 0.99):8.3f} {p50 / ref_p50:10.1f}")
    print(f"\nPython tool: {python_rate()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
