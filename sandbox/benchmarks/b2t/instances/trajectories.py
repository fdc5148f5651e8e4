"""Behavior trajectories generated from a profile and the store (paper section 3.2.2, Figure 9).

The paper has an LLM role-play the user under behavioral rules; here the same rules are enforced
by construction, which keeps generation deterministic and fast enough for the full benchmark:

1. Preference grounding: favorites and bookings only go to preference-matched records; noise
   records only ever get a click.
2. Funnel: click -> add_to_favorites -> book per POI, in that order; most POIs stop at click.
3. Sequential coherence: sessions of one city follow each other; early sessions explore (mostly
   clicks), later ones narrow toward favorites and end with bookings; nothing is booked twice.
4. Spatio-temporal consistency: one session browses one city, transport and hotel first, then
   attractions and dining.
5. Category coverage: the matched records cover exactly the profile's constrained categories.
6. Noise: clicks on mismatched records, spread through the sessions, never two in a row.

The user visited the destination before: what they booked there becomes the profile's history
(places a new plan must not revisit).
"""

import datetime as dt
import random
from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.b2t.instances.catalog import Catalog, TransportOption
from sandbox.benchmarks.b2t.instances.matching import KIND_CATEGORY, matching_pois, record_matches
from sandbox.benchmarks.b2t.instances.profiles import constrained_categories, empty_history

# Record kinds per preference category, in the order a session browses them.
CATEGORY_KIND = {
    "transportation": "transport",
    "hotel": "hotel",
    "attraction": "attraction",
    "dining": "restaurant",
}
SESSION_ORDER = ("transportation", "hotel", "attraction", "dining")
HISTORY_KEY = {
    "hotel": "accommodations",
    "restaurant": "restaurants",
    "attraction": "attractions",
    "transport": "transportation",
}


@dataclass(frozen=True)
class Shape:
    """Size targets of one difficulty level (means follow the paper's Table 2)."""

    pois_mean: float
    pois_sd: float
    pois_range: tuple[int, int]
    favorite_rate: float  # share of matched POIs that get favorited
    book_rate: float  # share of favorited POIs that get booked
    cities: tuple[int, int]  # how many cities the user browsed
    sessions: tuple[int, int]
    span_days: tuple[int, int]


SHAPES = {
    "easy": Shape(10.3, 2.0, (6, 15), 0.27, 0.5, (1, 2), (2, 4), (14, 28)),
    "medium": Shape(27.2, 4.0, (19, 36), 0.3, 0.5, (2, 3), (4, 7), (21, 42)),
    "hard": Shape(47.8, 6.0, (36, 60), 0.34, 0.5, (3, 4), (7, 11), (28, 63)),
}
# How many bookings one city visit plausibly has per kind.
BOOK_CAP = {"hotel": 1, "transport": 2, "attraction": 2, "restaurant": 3}
MAX_CITIES = 8


@dataclass
class _Poi:
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


def _pools(
    catalog: Catalog, profile: dict[str, Any], kind: str, origin: str, city: str
) -> tuple[list[Any], list[Any]]:
    """Preference-matched records of one kind in one city, and the candidates for noise.

    Noise candidates may include matching records (noise is drawn by rejection, see
    `_draw_noise`). Transport is keyed by train/flight number: a number offered in a matching
    seat class is matched (in that class); numbers without one are noise candidates.
    """
    if kind != "transport":
        return matching_pois(catalog, profile, kind, city), catalog.pois[kind].get(city, [])
    options = catalog.transport(origin, city, catalog.date_start) + catalog.transport(
        city, origin, catalog.date_start
    )
    matched: dict[str, TransportOption] = {}
    for opt in options:
        if record_matches(profile, kind, opt):
            matched.setdefault(opt.number, opt)
    noise: dict[str, TransportOption] = {}
    for opt in options:
        if opt.number not in matched:
            noise.setdefault(opt.number, opt)
    return list(matched.values()), list(noise.values())


def _allocate(rng: random.Random, total: int, weights: list[float], caps: list[int]) -> list[int]:
    """Split `total` into integer parts proportional to weights, none above its cap."""
    counts = [0] * len(weights)
    for _ in range(total):
        open_ = [i for i in range(len(weights)) if counts[i] < caps[i]]
        if not open_:
            break
        i = rng.choices(open_, weights=[weights[j] for j in open_])[0]
        counts[i] += 1
    return counts


class TrajectoryError(ValueError):
    """The store cannot supply a trajectory for this profile (the generator resamples)."""


def build_trajectory(
    rng: random.Random,
    catalog: Catalog,
    profile: dict[str, Any],
    query: dict[str, Any],
    difficulty: str,
    request_date: dt.date,
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Events (oldest first) and the history they imply; raises TrajectoryError if impossible."""
    shape = SHAPES[difficulty]
    categories = constrained_categories(profile)
    n_pois = int(
        min(max(round(rng.gauss(shape.pois_mean, shape.pois_sd)), shape.pois_range[0]), shape.pois_range[1])
    )
    n_noise = (
        0
        if difficulty == "easy"
        else 1
        if difficulty == "medium"
        else round(n_pois * rng.uniform(0.15, 0.25))
    )
    n_matched = n_pois - n_noise

    origin, destination = query["origin"], query["destination"]
    others = [c for c in catalog.city_names() if c not in (origin, destination)]
    rng.shuffle(others)
    wanted_cities = rng.randint(*shape.cities)

    # Matched POIs per (city, category), within what the store has: a user whose taste the
    # store offers little of in one city browsed more cities.
    cities: list[str] = []
    groups: list[tuple[str, str]] = []
    pools: list[list[Any]] = []
    noise_pools: list[list[Any]] = []
    for city in [destination] + others:
        if len(cities) >= wanted_cities and sum(map(len, pools)) >= n_matched * 1.5:
            break
        if len(cities) >= MAX_CITIES:
            break
        cities.append(city)
        for cat in SESSION_ORDER:
            if cat in categories:
                matched, mismatched = _pools(catalog, profile, CATEGORY_KIND[cat], origin, city)
                groups.append((city, cat))
                pools.append(matched)
                noise_pools.append(mismatched)
    rng.shuffle(cities)
    caps = [len(p) for p in pools]
    weights = [1.5 if city == destination else 1.0 for city, _ in groups]
    counts = _allocate(rng, n_matched, weights, caps)
    if sum(counts) < n_matched:
        raise TrajectoryError("too few preference-matched records for the trajectory")

    pois: list[_Poi] = []
    used: set[str] = set()
    for (city, cat), pool, k in zip(groups, pools, counts):
        kind = CATEGORY_KIND[cat]
        for record in rng.sample(pool, k):
            poi = _Poi(kind, record, city)
            if poi.poi_id in used:
                continue
            used.add(poi.poi_id)
            pois.append(poi)
    noise = _pick_noise(rng, profile, groups, noise_pools, n_noise, used)
    if len(noise) < n_noise:
        raise TrajectoryError("too few mismatched records to use as noise")

    sessions_per_city = _sessions_per_city(rng, shape, cities, pois)
    _assign_funnel(rng, shape, pois, sessions_per_city)
    for poi in noise:
        poi.click_session = rng.randrange(sessions_per_city[poi.city])
    events = _emit(rng, shape, cities, sessions_per_city, pois, noise, request_date)

    return events, _history(pois, destination)


def _pick_noise(
    rng: random.Random,
    profile: dict[str, Any],
    groups: list[tuple[str, str]],
    noise_pools: list[list[Any]],
    n_noise: int,
    used: set[str],
) -> list[_Poi]:
    """Up to `n_noise` records that do not match the profile (clicked, never booked); adds their
    ids to `used`."""
    noise: list[_Poi] = []
    noise_groups = [i for i, p in enumerate(noise_pools) if p]
    for _ in range(n_noise * 20):
        if len(noise) == n_noise or not noise_groups:
            break
        i = rng.choice(noise_groups)
        (city, cat), record = groups[i], rng.choice(noise_pools[i])
        poi = _Poi(CATEGORY_KIND[cat], record, city, noise=True)
        if not record_matches(profile, poi.kind, record) and poi.poi_id not in used:
            used.add(poi.poi_id)
            noise.append(poi)
    return noise


def _history(pois: list[_Poi], destination: str) -> dict[str, list[str]]:
    """What the user booked in the destination: the profile's hidden history."""
    history = empty_history()
    for poi in pois:
        if poi.book_session is not None and poi.city == destination:
            history[HISTORY_KEY[poi.kind]].append(
                poi.record.number if poi.kind == "transport" else poi.record["name"]
            )
    return history


def _sessions_per_city(
    rng: random.Random, shape: Shape, cities: list[str], pois: list[_Poi]
) -> dict[str, int]:
    total = rng.randint(*shape.sessions)
    sizes = {c: sum(1 for p in pois if p.city == c) for c in cities}
    alloc = {c: 1 for c in cities}
    for _ in range(max(0, total - len(cities))):
        c = rng.choices(cities, weights=[sizes[c] + 1 for c in cities])[0]
        alloc[c] += 1
    return alloc


def _assign_funnel(
    rng: random.Random, shape: Shape, pois: list[_Poi], sessions_per_city: dict[str, int]
) -> None:
    """Choose favorites and bookings per (city, kind) and the session of every action."""
    by_group: dict[tuple[str, str], list[_Poi]] = {}
    for p in pois:
        by_group.setdefault((p.city, p.kind), []).append(p)
    booked_any = False
    for (city, kind), members in by_group.items():
        n_sessions = sessions_per_city[city]
        # Stochastic rounding keeps the means at the rates, also for small groups.
        n_fav = min(len(members), int(len(members) * shape.favorite_rate + rng.random()))
        n_book = min(n_fav, BOOK_CAP[kind], int(n_fav * shape.book_rate + rng.random()))
        favorites = rng.sample(members, n_fav)
        for p in members:
            # Early sessions explore: clicks lean towards the first sessions.
            p.click_session = min(int(rng.random() ** 1.6 * n_sessions), n_sessions - 1)
        for i, p in enumerate(favorites):
            p.favorite_session = rng.randint(p.click_session, n_sessions - 1)
            if i < n_book:  # bookings happen in the city's last session: the decision point
                p.book_session = n_sessions - 1
                booked_any = True
    if not booked_any and pois:  # every trajectory ends in at least one decision
        p = rng.choice(pois)
        last = sessions_per_city[p.city] - 1
        p.favorite_session = (
            p.favorite_session if p.favorite_session is not None else rng.randint(p.click_session, last)
        )
        p.book_session = last


def _quiet_slots(blocks: list[list[tuple[_Poi, str]]], b: int) -> list[int]:
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


def _emit(
    rng: random.Random,
    shape: Shape,
    cities: list[str],
    sessions_per_city: dict[str, int],
    pois: list[_Poi],
    noise: list[_Poi],
    request_date: dt.date,
) -> list[dict[str, Any]]:
    """Order actions into sessions and give them increasing timestamps."""
    blocks: list[list[tuple[_Poi, str]]] = []  # one list of (poi, action) per session, in time order
    rank = {cat: i for i, cat in enumerate(SESSION_ORDER)}
    for city in cities:
        for s in range(sessions_per_city[city]):
            keyed = []
            for p in pois:
                if p.city != city:
                    continue
                acts = [
                    a
                    for a, sess in (
                        ("click", p.click_session),
                        ("add_to_favorites", p.favorite_session),
                        ("book", p.book_session),
                    )
                    if sess == s
                ]
                # Same-session actions of one POI keep funnel order; otherwise actions mix within
                # their category block.
                keys = sorted(rng.random() for _ in acts)
                keyed += [((rank[KIND_CATEGORY[p.kind]], k), p, a) for k, a in zip(keys, acts)]
            keyed.sort(key=lambda t: t[0])
            blocks.append([(p, a) for _, p, a in keyed])
    # Noise clicks go into a session of their city (another one if that is full), at a spot
    # with no noise neighbour.
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
    blocks = [b for b in blocks if b]

    span = rng.randint(*shape.span_days)
    first_day = request_date - dt.timedelta(days=span)
    days = sorted(rng.sample(range(span), min(len(blocks), span)))
    while len(days) < len(blocks):  # more sessions than days: several sessions on a day
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
