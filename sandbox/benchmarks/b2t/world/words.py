"""Word lists the generator composes POI names, addresses, details and reviews from.

The lists are a data table, so they live in words.json beside this module (shipped as package
data) and are read once at import; this module names them and says what each entry holds. Every
vocabulary value of `sandbox/benchmarks/b2t/vocab.py` used as an attribute has an entry there
(tests/sandbox/test_world.py checks every value reaches the generated POIs). The generator relies
on the order of every list (seeded draws), so the file keeps them in the order they were written.
"""

import json
from pathlib import Path
from typing import Any


def _tuples(value: Any) -> Any:
    """JSON arrays as tuples, the immutable sequences the generator concatenates and unpacks."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    return value


_WORDS: dict[str, Any] = _tuples(
    json.loads((Path(__file__).parent / "words.json").read_text(encoding="utf-8"))
)

ROADS: tuple[str, ...] = _WORDS["ROADS"]
ROAD_KINDS: tuple[str, ...] = _WORDS["ROAD_KINDS"]
BRANDS: tuple[str, ...] = _WORDS["BRANDS"]

# cuisine -> (name words, tertiary dish styles, typical price-level weights Budget..Luxury)
CUISINE_STYLES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[int, int, int, int]]] = _WORDS[
    "CUISINE_STYLES"
]

# (open, close, weight): most cover lunch and dinner, some breakfast, a few round the clock.
RESTAURANT_HOURS: tuple[tuple[str, str, int], ...] = _WORDS["RESTAURANT_HOURS"]
CAFE_HOURS: tuple[tuple[str, str, int], ...] = _WORDS["CAFE_HOURS"]

# dining environment -> the phrase a restaurant's description uses for it
ENVIRONMENT_PHRASES: dict[str, str] = _WORDS["ENVIRONMENT_PHRASES"]

# star level -> (name patterns, tertiary categories, nightly price range, facility probabilities
#               in vocab.HOTEL_FACILITIES order, room types (name, price factor, capacity))
HOTEL_STYLES: dict[
    str,
    tuple[
        tuple[str, ...],
        tuple[str, ...],
        tuple[int, int],
        tuple[float, ...],
        tuple[tuple[str, float, int], ...],
    ],
] = _WORDS["HOTEL_STYLES"]
HOTEL_STAR_WEIGHTS: dict[str, int] = _WORDS["HOTEL_STAR_WEIGHTS"]

PLACE_WORDS: tuple[str, ...] = _WORDS["PLACE_WORDS"]

# attraction type -> (name suffixes, custom types, walking km range, duration min range,
#                     ticket price range (low == 0 means often free), hours options, best season)
ATTRACTION_STYLES: dict[
    str,
    tuple[
        tuple[str, ...],
        tuple[str, ...],
        tuple[float, float],
        tuple[int, int],
        tuple[int, int],
        tuple[tuple[str, str], ...],
        str,
    ],
] = _WORDS["ATTRACTION_STYLES"]

# entertainment type -> (name patterns, price range, hours options)
ENTERTAINMENT_STYLES: dict[str, tuple[tuple[str, ...], tuple[int, int], tuple[tuple[str, str], ...]]] = (
    _WORDS["ENTERTAINMENT_STYLES"]
)

# POI kind -> review sentences a POI draws two or three of
REVIEWS: dict[str, tuple[str, ...]] = _WORDS["REVIEWS"]
