"""Generation of the four POI kinds (restaurants, hotels, attractions, entertainment) for one city.

Each function takes its own seeded `random.Random`, so a kind's records do not depend on how many
records of another kind were drawn. The first rows of each kind walk through every vocabulary
value (and value combination the searches care about), so every city covers every value even at
the small scale; the remaining rows are drawn from realistic weights.
"""

import json
import math
import random
from typing import Any

from sandbox.benchmarks.b2t import vocab
from sandbox.benchmarks.b2t.world import words
from sandbox.benchmarks.b2t.world.cities import City

MAX_RADIUS_KM = 14.0
KM_PER_DEG_LAT = 111.0


def _district_centres(city: City, rng: random.Random) -> list[tuple[str, float, float]]:
    """(district, lat, lon): the first district is downtown, the others ring it 4-8 km out."""
    centres = [(city.districts[0], city.latitude, city.longitude)]
    others = city.districts[1:]
    turn = rng.uniform(0, 2 * math.pi)
    for i, name in enumerate(others):
        angle = turn + 2 * math.pi * i / max(1, len(others))
        radius = rng.uniform(4.0, 8.0)
        centres.append((name, *_offset(city, radius * math.cos(angle), radius * math.sin(angle))))
    return centres


def _offset(city: City, north_km: float, east_km: float) -> tuple[float, float]:
    lat = city.latitude + north_km / KM_PER_DEG_LAT
    lon = city.longitude + east_km / (KM_PER_DEG_LAT * math.cos(math.radians(city.latitude)))
    return lat, lon


class _Places:
    """Draws a district and a point around it, never farther than MAX_RADIUS_KM from the centre."""

    def __init__(self, city: City, rng: random.Random):
        self.city = city
        self.rng = rng
        self.centres = _district_centres(city, rng)
        cos_lat = math.cos(math.radians(city.latitude))
        self._km = lambda lat, lon: (
            (lat - city.latitude) * KM_PER_DEG_LAT,
            (lon - city.longitude) * KM_PER_DEG_LAT * cos_lat,
        )

    def draw(self) -> tuple[str, float, float, str]:
        district, clat, clon = self.centres[self.rng.randrange(len(self.centres))]
        north, east = self._km(clat, clon)
        north += self.rng.gauss(0, 2.0)
        east += self.rng.gauss(0, 2.0)
        dist = math.hypot(north, east)
        if dist > MAX_RADIUS_KM:
            north, east = north * MAX_RADIUS_KM / dist, east * MAX_RADIUS_KM / dist
        lat, lon = _offset(self.city, north, east)
        road = f"{self.rng.choice(words.ROADS)} {self.rng.choice(words.ROAD_KINDS)}"
        address = f"No. {self.rng.randint(1, 999)} {road}, {district} District, {self.city.name}"
        return district, round(lat, 6), round(lon, 6), address

    def phone(self) -> str:
        return f"{self.city.area_code}-{self.rng.randint(5000_0000, 8999_9999)}"


class _UniqueNames:
    """Makes POI names unique within a city by adding the district branch, then a number."""

    def __init__(self):
        self.used: set[str] = set()

    def take(self, name: str, district: str) -> str:
        candidate, k = name, 1
        while candidate in self.used:
            k += 1
            candidate = f"{name} ({district} Branch)" if k == 2 else f"{name} ({district} Branch No. {k - 1})"
        self.used.add(candidate)
        return candidate


def _rating(rng: random.Random, mean: float = 4.3) -> float:
    return round(min(5.0, max(3.0, rng.gauss(mean, 0.35))), 1)


def _weighted(rng: random.Random, options: tuple):
    """One of `options`, tuples whose last element is the weight."""
    return rng.choices(options, weights=[o[-1] for o in options], k=1)[0]


def _reviews(rng: random.Random, kind: str) -> str:
    return json.dumps(rng.sample(words.REVIEWS[kind], rng.randint(2, 3)), ensure_ascii=False)


def _cover(table: str, poi_id: str) -> str:
    return f"https://images.b2tjax.local/{table}/{poi_id}.jpg"


def _add_rating_rank(rows: list[dict[str, Any]]) -> None:
    """rating_rank = 1 for the best rated POI of its kind in the city (ties: generation order)."""
    order = sorted(range(len(rows)), key=lambda i: (-rows[i]["avg_rating"], i))
    for rank, i in enumerate(order, start=1):
        rows[i]["rating_rank"] = rank


def _price_in_level(rng: random.Random, level: str) -> float:
    low, high = vocab.PRICE_LEVEL_RANGE[level]
    # Strictly inside the level so that the derived level is unambiguous at shared bounds.
    return float(rng.randint(int(low) + 1, int(high) - 1))


def restaurants(city: City, count: int, rng: random.Random) -> list[dict[str, Any]]:
    places, names = _Places(city, rng), _UniqueNames()
    combos = [(c, p) for c in vocab.CUISINES for p in vocab.PRICE_LEVELS]
    rows = []
    for i in range(count):
        if i < len(combos):
            cuisine, level = combos[i]
        else:
            cuisine = rng.choice(vocab.CUISINES)
            level = rng.choices(vocab.PRICE_LEVELS, weights=words.CUISINE_STYLES[cuisine][2])[0]
        name_words, dishes, _ = words.CUISINE_STYLES[cuisine]
        district, lat, lon, address = places.draw()
        base = f"{rng.choice(words.BRANDS)} {rng.choice(name_words)}"
        name = names.take(base, district)
        tertiary = rng.choice(dishes)
        environment = set(rng.sample(vocab.DINING_ENVIRONMENTS, rng.randint(1, 2)))
        if i < len(vocab.DINING_ENVIRONMENTS):
            environment.add(vocab.DINING_ENVIRONMENTS[i])
        environment_list = [e for e in vocab.DINING_ENVIRONMENTS if e in environment]
        hours = words.CAFE_HOURS if cuisine in ("Beverages", "Bakery/Desserts") else words.RESTAURANT_HOURS
        open_time, close_time, _ = _weighted(rng, hours)
        price = _price_in_level(rng, level)
        ambience = " and ".join(words.ENVIRONMENT_PHRASES[e] for e in environment_list)
        poi_id = f"R-{city.name}-{i + 1}"
        rows.append(
            {
                "id": poi_id,
                "name": name,
                "details": (
                    f"{tertiary} ({cuisine}) in {district}, with {ambience}. "
                    f"About {price:.0f} CNY per person."
                ),
                "address": address,
                "phone": places.phone(),
                "province": city.province,
                "city": city.name,
                "location": district,
                "longitude": lon,
                "latitude": lat,
                "primary_category": "Food",
                "secondary_category": cuisine,
                "tertiary_category": tertiary,
                "business_hours": f"{open_time}-{close_time}",
                "open_time": open_time,
                "close_time": close_time,
                "rating_rank": 0,
                "parking": rng.choice(("Free parking", "Paid parking nearby", "No parking")),
                "avg_price": price,
                "price_level": level,
                "environment": json.dumps(environment_list),
                "avg_rating": _rating(rng),
                "reviews": _reviews(rng, "restaurant"),
            }
        )
    _add_rating_rank(rows)
    return rows


def hotels(city: City, count: int, rng: random.Random) -> list[dict[str, Any]]:
    places, names = _Places(city, rng), _UniqueNames()
    # Coverage rows: every (star level, facility) pair appears at least once in the city.
    combos = [(s, f) for s in vocab.STAR_LEVELS for f in vocab.HOTEL_FACILITIES]
    stars, star_weights = zip(*words.HOTEL_STAR_WEIGHTS.items())
    rows = []
    for i in range(count):
        star, forced = combos[i] if i < len(combos) else (rng.choices(stars, weights=star_weights)[0], None)
        patterns, tertiaries, (low, high), probs, room_types = words.HOTEL_STYLES[star]
        district, lat, lon, address = places.draw()
        name = names.take(rng.choice(patterns).format(b=rng.choice(words.BRANDS)), district)
        facilities = [f for f, p in zip(vocab.HOTEL_FACILITIES, probs) if f == forced or rng.random() < p]
        price = float(round(rng.uniform(low, high), -1))
        rooms = [
            {"room_type": rt, "price": float(round(price * factor, -1)), "capacity": cap}
            for rt, factor, cap in room_types
        ]
        parking = (
            ("Free parking" if rng.random() < 0.6 else f"Paid parking ({rng.choice((20, 30, 50))} CNY/day)")
            if "Parking" in facilities
            else "No parking"
        )
        rating_mean = {"5-Star/Luxury": 4.6, "4-Star/Upscale": 4.5, "3-Star/Comfort": 4.3}.get(star, 4.2)
        poi_id = f"H-{city.name}-{i + 1}"
        tertiary = rng.choice(tertiaries)
        rows.append(
            {
                "id": poi_id,
                "name": name,
                "details": (
                    f"{star} {tertiary.lower()} in {district}; "
                    f"facilities: {', '.join(facilities) or 'basic'}."
                ),
                "cover_image": _cover("hotels", poi_id),
                "address": address,
                "phone": places.phone(),
                "province": city.province,
                "city": city.name,
                "district": district,
                "longitude": lon,
                "latitude": lat,
                "primary_category": "Hotel",
                "secondary_category": star,
                "tertiary_category": tertiary,
                "business_hours": "00:00-24:00",
                "rating_rank": 0,
                "parking": parking,
                "wifi": int("Free WiFi" in facilities),
                "facilities": json.dumps(facilities),
                "avg_price": price,
                "avg_rating": _rating(rng, rating_mean),
                "reviews": _reviews(rng, "hotel"),
                "room_info": json.dumps(rooms),
            }
        )
    _add_rating_rank(rows)
    return rows


def _ticket_info(price: float) -> str:
    if price == 0:
        return json.dumps([{"ticket": "Free admission", "price": 0.0}])
    half = float(round(price / 2))
    return json.dumps(
        [
            {"ticket": "Adult", "price": price},
            {"ticket": "Student", "price": half},
            {"ticket": "Child (1.2-1.5m)", "price": half},
        ]
    )


def attractions(city: City, count: int, rng: random.Random) -> list[dict[str, Any]]:
    places, names = _Places(city, rng), _UniqueNames()
    types = vocab.ATTRACTION_TYPES
    rows = []
    for i in range(count):
        # Two full passes over the types first, so every type has at least two attractions.
        kind = types[i % len(types)] if i < 2 * len(types) else rng.choice(types)
        suffixes, customs, (wlo, whi), (dlo, dhi), (plo, phi), hours, season = words.ATTRACTION_STYLES[kind]
        district, lat, lon, address = places.draw()
        prefix = city.name if i < len(types) else rng.choice(words.PLACE_WORDS + (district,))
        name = names.take(f"{prefix} {rng.choice(suffixes)}", district)
        open_time, close_time = rng.choice(hours)
        price = 0.0 if plo == 0 and rng.random() < 0.5 else float(round(rng.uniform(max(plo, 10), phi), -1))
        duration = rng.randrange(dlo, dhi + 1, 30)
        walking = round(rng.uniform(wlo, whi), 1)
        custom = rng.choice(customs)
        poi_id = f"A-{city.name}-{i + 1}"
        rows.append(
            {
                "id": poi_id,
                "name": name,
                "details": (
                    f"{custom} in {district}, {city.name}. "
                    f"Plan about {duration} minutes and {walking} km on foot."
                ),
                "cover_image": _cover("attractions", poi_id),
                "address": address,
                "phone": places.phone(),
                "province": city.province,
                "city": city.name,
                "location": district,
                "longitude": lon,
                "latitude": lat,
                "category_name": "Attraction",
                "attraction_type": kind,
                "custom_type": custom,
                "opening_hours": f"{open_time}-{close_time}",
                "open_time": open_time,
                "close_time": close_time,
                "best_season": season,
                "recommended_duration_min": duration,
                "walking_km": walking,
                "avg_price": price,
                "avg_rating": _rating(rng, 4.5),
                "reviews": _reviews(rng, "attraction"),
                "ticket_info": _ticket_info(price),
            }
        )
    return rows


def entertainment(city: City, count: int, rng: random.Random) -> list[dict[str, Any]]:
    places, names = _Places(city, rng), _UniqueNames()
    types = vocab.ENTERTAINMENT_TYPES
    rows = []
    for i in range(count):
        kind = types[i % len(types)] if i < 2 * len(types) else rng.choice(types)
        patterns, (plo, phi), hours = words.ENTERTAINMENT_STYLES[kind]
        district, lat, lon, address = places.draw()
        name = names.take(rng.choice(patterns).format(b=rng.choice(words.BRANDS)), district)
        open_time, close_time = rng.choice(hours)
        poi_id = f"E-{city.name}-{i + 1}"
        rows.append(
            {
                "id": poi_id,
                "name": name,
                "details": f"{kind} venue in {district}, {city.name}.",
                "cover_image": _cover("entertainment", poi_id),
                "address": address,
                "phone": places.phone(),
                "province": city.province,
                "city": city.name,
                "district": district,
                "longitude": lon,
                "latitude": lat,
                "categories": kind,
                "business_hours": f"{open_time}-{close_time}",
                "open_time": open_time,
                "close_time": close_time,
                "rating_rank": 0,
                "avg_price": float(round(rng.uniform(plo, phi), -1)),
                "avg_rating": _rating(rng),
            }
        )
    _add_rating_rank(rows)
    return rows
