"""Whether a store record satisfies a profile: the generator's view of the UPC checks.

A trajectory's favorites and bookings must be preference-aligned and its noise POIs must not be;
the feasibility check counts matching records. These predicates use the same per-item reading of
the preference attributes as the evaluator's personalization checks, so "aligned" here means
"would pass" there.
"""

from typing import Any

from sandbox.benchmarks.b2t import vocab
from sandbox.benchmarks.b2t.instances.catalog import Catalog, TransportOption

# Category of the profile that judges each record kind.
KIND_CATEGORY = {
    "hotel": "hotel",
    "attraction": "attraction",
    "restaurant": "dining",
    "transport": "transportation",
}


def hotel_matches(pref: dict[str, Any] | None, row: dict[str, Any]) -> bool:
    if not pref:
        return True
    stars = pref.get("star_requirement") or []
    if stars and row["secondary_category"] not in stars:
        return False
    return set(pref.get("essential_facilities") or []) <= set(row["facilities"])


def attraction_matches(pref: dict[str, Any] | None, row: dict[str, Any]) -> bool:
    if not pref:
        return True
    types = pref.get("preferred_attraction_types") or []
    if types and row["attraction_type"] not in types:
        return False
    walking = pref.get("walking_tolerance")
    return not walking or row["walking_km"] <= vocab.WALKING_LIMIT_KM[walking]


def restaurant_matches(pref: dict[str, Any] | None, row: dict[str, Any]) -> bool:
    if not pref:
        return True
    cuisines = pref.get("cuisine_preferences") or []
    if cuisines and row["secondary_category"] not in cuisines:
        return False
    level = pref.get("price_level")
    if level and row["price_level"] != level:
        return False
    environments = pref.get("dining_environment") or []
    return not environments or bool(set(environments) & set(row["environment"]))


def transport_matches(pref: dict[str, Any] | None, option: TransportOption) -> bool:
    if not pref:
        return True
    mode, seat = pref.get("intercity_transport"), pref.get("seat_class")
    return (not mode or option.mode == mode) and (not seat or option.seat_class == seat)


_MATCHERS = {
    "hotel": hotel_matches,
    "attraction": attraction_matches,
    "restaurant": restaurant_matches,
    "transport": transport_matches,
}


def record_matches(profile: dict[str, Any], kind: str, record: Any) -> bool:
    """Whether a record of `kind` ("hotel", "attraction", "restaurant", "transport") fits;
    records of other kinds (entertainment) are not judged by any preference."""
    matcher = _MATCHERS.get(kind)
    return matcher is None or matcher(profile.get(KIND_CATEGORY[kind]), record)


# The profile attribute that selects each kind's main category (see Catalog.by_category).
_MAIN_ATTRIBUTE = {
    "hotel": "star_requirement",
    "restaurant": "cuisine_preferences",
    "attraction": "preferred_attraction_types",
}


def matching_pois(catalog: Catalog, profile: dict[str, Any], kind: str, city: str) -> list[dict[str, Any]]:
    """Store records of a POI kind in `city` that fit the profile, in store order."""
    pref = profile.get(KIND_CATEGORY.get(kind, ""))
    values = (pref or {}).get(_MAIN_ATTRIBUTE.get(kind, "")) or []
    if values:
        rows = [r for v in values for r in catalog.by_category(kind, city, v)]
        rows.sort(key=lambda r: catalog.position(r))
    else:
        rows = catalog.pois[kind].get(city, [])
    return [r for r in rows if record_matches(profile, kind, r)]
