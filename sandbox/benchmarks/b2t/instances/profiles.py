"""User preference profiles (SPEC.md section 4, paper Table 9) at three difficulty levels.

A profile constrains some of the four preference categories (hotel, attraction, dining,
transportation); the others are null, i.e. unconstrained. Easy profiles constrain one category,
medium two or three (mean 2.4, paper Table 2), hard all four. Profiles are sampled around one
spending tier so that they describe a plausible person, then checked by a rule-based
consistency filter (the paper uses an LLM judge, Figure 8; rules keep generation deterministic
and fast). The history dimension is filled later from the trajectory's bookings.
"""

import random
from typing import Any

from sandbox.benchmarks.b2t import vocab

CATEGORIES = ("hotel", "attraction", "dining", "transportation")
DIFFICULTIES = ("easy", "medium", "hard")

# Spending tier of each tier-bearing value: 0 frugal .. 3 luxurious.
STAR_TIER = {
    "2-Star & Below/Economy": 0,
    "3-Star/Comfort": 1,
    "City Homestay": 1,
    "4-Star/Upscale": 2,
    "5-Star/Luxury": 3,
}
PRICE_TIER = {level: i for i, level in enumerate(vocab.PRICE_LEVELS)}
SEAT_TIER = {"Second Class Seat": 0, "Economy Class": 0, "First Class Seat": 2, "Business Class": 3}
# Seat classes that exist for each intercity mode of the store (no long-distance bus data).
MODE_SEATS = {
    "High-speed Rail": vocab.TRAIN_SEATS,
    "Regular Train": vocab.TRAIN_SEATS,
    "Airplane": vocab.FLIGHT_CABINS,
}
# Attraction types a low walking tolerance rules out.
STRENUOUS_TYPES = frozenset({"Outdoor Adventure", "Ice/Snow Sports"})
# Facilities homestays do not have.
HOMESTAY_LACKS = frozenset({"Gym", "Swimming Pool"})
# Cuisines nobody pays fine-dining prices for.
CHEAP_CUISINES = frozenset({"Snacks/Fast Food", "Beverages"})


def empty_history() -> dict[str, list[str]]:
    return {key: [] for key in vocab.PROFILE_DIMENSIONS["history"]}


def category_count(difficulty: str, rng: random.Random) -> int:
    """How many preference categories a profile of this difficulty constrains."""
    if difficulty == "easy":
        return 1
    if difficulty == "medium":
        return 2 if rng.random() < 0.6 else 3  # mean 2.4 as in Table 2
    if difficulty == "hard":
        return len(CATEGORIES)
    raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")


def _near_tier(rng: random.Random, tiers: dict[str, int], tier: int) -> str:
    """A value whose tier is within one of `tier` (weighted towards the exact tier)."""
    values = sorted(tiers)
    weights = [{0: 4.0, 1: 1.0}.get(abs(tiers[v] - tier), 0.0) for v in values]
    return rng.choices(values, weights=weights)[0]


def sample_hotel(rng: random.Random, tier: int) -> dict[str, Any]:
    star = _near_tier(rng, STAR_TIER, tier)
    stars = [star]
    ordered = ["2-Star & Below/Economy", "3-Star/Comfort", "4-Star/Upscale", "5-Star/Luxury"]
    if star in ordered and rng.random() < 0.3:  # a neighbouring star level is also acceptable
        i = ordered.index(star)
        stars.append(ordered[i + 1] if i + 1 < len(ordered) else ordered[i - 1])
    pool = [f for f in vocab.HOTEL_FACILITIES if star != "City Homestay" or f not in HOMESTAY_LACKS]
    facilities = rng.sample(pool, rng.choice((1, 1, 2)))
    return {
        "star_requirement": [s for s in vocab.STAR_LEVELS if s in stars],
        "essential_facilities": [f for f in vocab.HOTEL_FACILITIES if f in facilities],
    }


def sample_attraction(rng: random.Random) -> dict[str, Any]:
    walking = rng.choice(vocab.WALKING_TOLERANCE)
    pool = [t for t in vocab.ATTRACTION_TYPES if walking != "Low (1-3km)" or t not in STRENUOUS_TYPES]
    types = rng.sample(pool, rng.choice((2, 3, 3, 4)))
    return {
        "preferred_attraction_types": [t for t in vocab.ATTRACTION_TYPES if t in types],
        "walking_tolerance": walking,
    }


def sample_dining(rng: random.Random, tier: int) -> dict[str, Any]:
    price = _near_tier(rng, PRICE_TIER, tier)
    pool = [c for c in vocab.CUISINES if PRICE_TIER[price] < 2 or c not in CHEAP_CUISINES]
    cuisines = rng.sample(pool, rng.choice((2, 3, 3, 4)))
    environments = rng.sample(vocab.DINING_ENVIRONMENTS, rng.choice((1, 2, 2, 3)))
    return {
        "cuisine_preferences": [c for c in vocab.CUISINES if c in cuisines],
        "price_level": price,
        "dining_environment": [e for e in vocab.DINING_ENVIRONMENTS if e in environments],
    }


def sample_transportation(rng: random.Random, tier: int) -> dict[str, Any]:
    mode = rng.choices(tuple(MODE_SEATS), weights=(5, 2, 4))[0]
    seats = {s: SEAT_TIER[s] for s in MODE_SEATS[mode]}
    seat = _near_tier(rng, seats, min(tier, max(seats.values())))
    return {
        "intercity_transport": mode,
        "intracity_transport": rng.choice(vocab.INTRACITY_MODES),
        "seat_class": seat,
    }


def sample_profile(rng: random.Random, difficulty: str, count: int | None = None) -> dict[str, Any]:
    """A profile constraining `count` categories (default: drawn for `difficulty`), no history."""
    tier = rng.choices((0, 1, 2, 3), weights=(2, 4, 3, 1))[0]
    count = category_count(difficulty, rng) if count is None else count
    picked = set(rng.sample(CATEGORIES, count))
    chosen = [c for c in CATEGORIES if c in picked]
    profile: dict[str, Any] = {c: None for c in CATEGORIES}
    for category in chosen:
        if category == "hotel":
            profile["hotel"] = sample_hotel(rng, tier)
        elif category == "attraction":
            profile["attraction"] = sample_attraction(rng)
        elif category == "dining":
            profile["dining"] = sample_dining(rng, tier)
        else:
            profile["transportation"] = sample_transportation(rng, tier)
    profile["history"] = empty_history()
    return profile


def constrained_categories(profile: dict[str, Any]) -> list[str]:
    return [c for c in CATEGORIES if profile.get(c)]


def consistency_problems(profile: dict[str, Any]) -> list[str]:
    """Rule-based persona filter: reasons the profile describes an implausible person ([] = ok)."""
    problems = []
    tiers = []
    hotel, attraction = profile.get("hotel"), profile.get("attraction")
    dining, transport = profile.get("dining"), profile.get("transportation")
    if hotel:
        tiers += [STAR_TIER[s] for s in hotel["star_requirement"]]
        if hotel["star_requirement"] == ["City Homestay"] and HOMESTAY_LACKS & set(
            hotel["essential_facilities"]
        ):
            problems.append("a homestay guest requiring a gym or swimming pool")
    if dining:
        tiers.append(PRICE_TIER[dining["price_level"]])
        if PRICE_TIER[dining["price_level"]] >= 2 and CHEAP_CUISINES & set(dining["cuisine_preferences"]):
            problems.append("fine-dining prices for fast food or drinks")
    if transport:
        tiers.append(SEAT_TIER[transport["seat_class"]])
        if transport["intercity_transport"] not in MODE_SEATS:
            problems.append(f"no {transport['intercity_transport']} service in the store")
        elif transport["seat_class"] not in MODE_SEATS[transport["intercity_transport"]]:
            problems.append(
                f"seat class {transport['seat_class']} does not exist on {transport['intercity_transport']}"
            )
    if (
        attraction
        and attraction["walking_tolerance"] == "Low (1-3km)"
        and STRENUOUS_TYPES & set(attraction["preferred_attraction_types"])
    ):
        problems.append("low walking tolerance with strenuous attraction types")
    if tiers and max(tiers) - min(tiers) > 2:
        problems.append("spending habits that contradict each other (budget and luxury at once)")
    return problems
