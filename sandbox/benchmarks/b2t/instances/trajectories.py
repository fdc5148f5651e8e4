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
from sandbox.benchmarks.b2t.instances.matching import matching_pois, record_matches
from sandbox.benchmarks.b2t.instances.profiles import constrained_categories, empty_history
from sandbox.benchmarks.b2t.instances.sessions import SESSION_ORDER, Poi, emit_events

# Record kinds per preference category, in the order a session browses them.
CATEGORY_KIND = {
    "transportation": "transport",
    "hotel": "hotel",
    "attraction": "attraction",
    "dining": "restaurant",
}
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
    n_pois, n_noise = _sizes(rng, shape, difficulty)
    n_matched = n_pois - n_noise
    cities, groups, pools, noise_pools = _browse(rng, catalog, profile, query, shape, n_matched)
    caps = [len(p) for p in pools]
    weights = [1.5 if city == query["destination"] else 1.0 for city, _ in groups]
    counts = _allocate(rng, n_matched, weights, caps)
    if sum(counts) < n_matched:
        raise TrajectoryError("too few preference-matched records for the trajectory")
    pois, used = _draw_matched(rng, groups, pools, counts)
    noise = _pick_noise(rng, profile, groups, noise_pools, n_noise, used)
    if len(noise) < n_noise:
        raise TrajectoryError("too few mismatched records to use as noise")

    sessions_per_city = _sessions_per_city(rng, shape, cities, pois)
    _assign_funnel(rng, shape, pois, sessions_per_city)
    for poi in noise:
        poi.click_session = rng.randrange(sessions_per_city[poi.city])
    events = emit_events(rng, shape.span_days, cities, sessions_per_city, pois, noise, request_date)
    return events, _history(pois, query["destination"])


def _sizes(rng: random.Random, shape: Shape, difficulty: str) -> tuple[int, int]:
    """How many POIs the trajectory touches, and how many of them are noise."""
    n_pois = int(
        min(max(round(rng.gauss(shape.pois_mean, shape.pois_sd)), shape.pois_range[0]), shape.pois_range[1])
    )
    if difficulty == "easy":
        return n_pois, 0
    if difficulty == "medium":
        return n_pois, 1
    return n_pois, round(n_pois * rng.uniform(0.15, 0.25))


def _browse(
    rng: random.Random,
    catalog: Catalog,
    profile: dict[str, Any],
    query: dict[str, Any],
    shape: Shape,
    n_matched: int,
) -> tuple[list[str], list[tuple[str, str]], list[list[Any]], list[list[Any]]]:
    """The cities the user browsed (shuffled), and per (city, category) group its matched records
    and its noise candidates. A user whose taste the store offers little of in one city browsed
    more cities."""
    categories = constrained_categories(profile)
    origin, destination = query["origin"], query["destination"]
    others = [c for c in catalog.city_names() if c not in (origin, destination)]
    rng.shuffle(others)
    wanted_cities = rng.randint(*shape.cities)
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
    return cities, groups, pools, noise_pools


def _draw_matched(
    rng: random.Random, groups: list[tuple[str, str]], pools: list[list[Any]], counts: list[int]
) -> tuple[list[Poi], set[str]]:
    """`counts[i]` records of group i's pool, each POI once; and the ids taken."""
    pois: list[Poi] = []
    used: set[str] = set()
    for (city, cat), pool, k in zip(groups, pools, counts):
        kind = CATEGORY_KIND[cat]
        for record in rng.sample(pool, k):
            poi = Poi(kind, record, city)
            if poi.poi_id in used:
                continue
            used.add(poi.poi_id)
            pois.append(poi)
    return pois, used


def _pick_noise(
    rng: random.Random,
    profile: dict[str, Any],
    groups: list[tuple[str, str]],
    noise_pools: list[list[Any]],
    n_noise: int,
    used: set[str],
) -> list[Poi]:
    """Up to `n_noise` records that do not match the profile (clicked, never booked); adds their
    ids to `used`."""
    noise: list[Poi] = []
    noise_groups = [i for i, p in enumerate(noise_pools) if p]
    for _ in range(n_noise * 20):
        if len(noise) == n_noise or not noise_groups:
            break
        i = rng.choice(noise_groups)
        (city, cat), record = groups[i], rng.choice(noise_pools[i])
        poi = Poi(CATEGORY_KIND[cat], record, city, noise=True)
        if not record_matches(profile, poi.kind, record) and poi.poi_id not in used:
            used.add(poi.poi_id)
            noise.append(poi)
    return noise


def _history(pois: list[Poi], destination: str) -> dict[str, list[str]]:
    """What the user booked in the destination: the profile's hidden history."""
    history = empty_history()
    for poi in pois:
        if poi.book_session is not None and poi.city == destination:
            history[HISTORY_KEY[poi.kind]].append(
                poi.record.number if poi.kind == "transport" else poi.record["name"]
            )
    return history


def _sessions_per_city(
    rng: random.Random, shape: Shape, cities: list[str], pois: list[Poi]
) -> dict[str, int]:
    total = rng.randint(*shape.sessions)
    sizes = {c: sum(1 for p in pois if p.city == c) for c in cities}
    alloc = {c: 1 for c in cities}
    for _ in range(max(0, total - len(cities))):
        c = rng.choices(cities, weights=[sizes[c] + 1 for c in cities])[0]
        alloc[c] += 1
    return alloc


def _assign_funnel(
    rng: random.Random, shape: Shape, pois: list[Poi], sessions_per_city: dict[str, int]
) -> None:
    """Choose favorites and bookings per (city, kind) and the session of every action."""
    by_group: dict[tuple[str, str], list[Poi]] = {}
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
