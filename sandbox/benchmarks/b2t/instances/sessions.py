"""A trajectory's POIs and their actions laid out as browsing sessions with timestamps.

`sandbox.benchmarks.b2t.instances.trajectories` decides which POIs the user touched and in which
session each action happens (the funnel); this module turns that into the event list: sessions
in city order, actions within a session by category block (transport, hotel, attraction,
dining), noise clicks never next to each other, timestamps increasing across the whole history.
"""

import datetime as dt
import random
from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.b2t.instances.matching import KIND_CATEGORY

SESSION_ORDER = ("transportation", "hotel", "attraction", "dining")
_RANK = {cat: i for i, cat in enumerate(SESSION_ORDER)}

Block = list[tuple["Poi", str]]  # one session's (poi, action) pairs, in time order


@dataclass
class Poi:
    """One POI of a trajectory and the session of each of its actions (None: not taken)."""

    kind: str  # "hotel" | "restaurant" | "attraction" | "transport"
    record: Any  # store row (dict) or TransportOption
    city: str
    noise: bool = False
    click_session: int = 0
    favorite_session: int | None = None
    book_session: int | None = None

    @property
    def poi_id(self) -> str:
        return self.record.number if self.kind == "transport" else self.record["id"]

    @property
    def name(self) -> str:
        if self.kind == "transport":
            r = self.record
            return f"{r.number} {r.origin} -> {r.destination}"
        return self.record["name"]

    @property
    def poi_type(self) -> str:
        return self.record.kind if self.kind == "transport" else self.kind


def poi_details(kind: str, record: Any) -> dict[str, Any]:
    """The POI fields an event carries (what the platform showed the user)."""
    if kind == "transport":
        return record.details()
    r = record
    if kind == "hotel":
        return {
            "city": r["city"],
            "district": r["district"],
            "star": r["secondary_category"],
            "hotel_type": r["tertiary_category"],
            "facilities": list(r["facilities"]),
            "price": r["avg_price"],
            "rating": r["avg_rating"],
        }
    if kind == "restaurant":
        return {
            "city": r["city"],
            "location": r["location"],
            "cuisine": r["secondary_category"],
            "dish_style": r["tertiary_category"],
            "avg_price": r["avg_price"],
            "price_level": r["price_level"],
            "environment": list(r["environment"]),
            "rating": r["avg_rating"],
        }
    if kind == "attraction":
        return {
            "city": r["city"],
            "location": r["location"],
            "attraction_type": r["attraction_type"],
            "custom_type": r["custom_type"],
            "walking_km": r["walking_km"],
            "ticket_price": r["avg_price"],
            "rating": r["avg_rating"],
            "recommended_duration_min": r["recommended_duration_min"],
        }
    raise ValueError(f"unknown POI kind {kind!r}")


def emit_events(
    rng: random.Random,
    span_days: tuple[int, int],
    cities: list[str],
    sessions_per_city: dict[str, int],
    pois: list[Poi],
    noise: list[Poi],
    request_date: dt.date,
) -> list[dict[str, Any]]:
    """Order actions into sessions and give them increasing timestamps (oldest event first)."""
    blocks = [
        _session_block(rng, [p for p in pois if p.city == city], s)
        for city in cities
        for s in range(sessions_per_city[city])
    ]
    _place_noise(rng, blocks, cities, sessions_per_city, noise)
    return _stamp(rng, span_days, [b for b in blocks if b], request_date)


def _session_block(rng: random.Random, city_pois: list[Poi], session: int) -> Block:
    """The actions of one session of a city, grouped by category block."""
    keyed = []
    for p in city_pois:
        acts = [
            a
            for a, sess in (
                ("click", p.click_session),
                ("add_to_favorites", p.favorite_session),
                ("book", p.book_session),
            )
            if sess == session
        ]
        # Same-session actions of one POI keep funnel order; otherwise actions mix within
        # their category block.
        keys = sorted(rng.random() for _ in acts)
        keyed += [((_RANK[KIND_CATEGORY[p.kind]], k), p, a) for k, a in zip(keys, acts)]
    keyed.sort(key=lambda t: t[0])
    return [(p, a) for _, p, a in keyed]


def _place_noise(
    rng: random.Random,
    blocks: list[Block],
    cities: list[str],
    sessions_per_city: dict[str, int],
    noise: list[Poi],
) -> None:
    """Noise clicks go into a session of their city (another one if that is full), at a spot with
    no noise neighbour."""
    city_blocks, i = {}, 0
    for city in cities:
        city_blocks[city] = list(range(i, i + sessions_per_city[city]))
        i += sessions_per_city[city]
    for p in noise:
        preferred = city_blocks[p.city][p.click_session]
        for b in [preferred] + [j for j in range(len(blocks)) if j != preferred]:
            slots = _quiet_slots(blocks, b)
            if slots:
                blocks[b].insert(rng.choice(slots), (p, "click"))
                break


def _quiet_slots(blocks: list[Block], b: int) -> list[int]:
    """Insertion points in session `b` whose neighbours in the whole trajectory are not noise."""
    before = next((blk[-1][0] for blk in reversed(blocks[:b]) if blk), None)
    after = next((blk[0][0] for blk in blocks[b + 1 :] if blk), None)
    block = [p for p, _ in blocks[b]]
    seq = [before] + block + [after]  # seq[j] and seq[j + 1] flank insertion point j
    return [
        j
        for j in range(len(block) + 1)
        if not (seq[j] is not None and seq[j].noise) and not (seq[j + 1] is not None and seq[j + 1].noise)
    ]


def _stamp(
    rng: random.Random, span_days: tuple[int, int], blocks: list[Block], request_date: dt.date
) -> list[dict[str, Any]]:
    """Sessions on days before the request (several on one day when there are more sessions than
    days), actions a few minutes apart, times never going back."""
    span = rng.randint(*span_days)
    first_day = request_date - dt.timedelta(days=span)
    days = sorted(rng.sample(range(span), min(len(blocks), span)))
    while len(days) < len(blocks):
        days.append(days[-1])
    days.sort()
    events, previous = [], None
    for number, (block, day) in enumerate(zip(blocks, days), start=1):
        start = dt.datetime.combine(
            first_day + dt.timedelta(days=day), dt.time(rng.randint(8, 20), rng.randint(0, 59))
        )
        t = (
            start
            if previous is None or start > previous
            else previous + dt.timedelta(minutes=rng.randint(30, 90))
        )
        for p, action in block:
            events.append(
                {
                    "timestamp": t.strftime("%Y-%m-%d %H:%M"),
                    "session": number,
                    "action": action,
                    "poi_type": p.poi_type,
                    "poi_id": p.poi_id,
                    "poi_name": p.name,
                    "details": poi_details(p.kind, p.record),
                }
            )
            previous = t
            t += dt.timedelta(minutes=rng.randint(1, 4))
    return events
