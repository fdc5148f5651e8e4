"""Generation of trains (daily timetable) and flights (per date) between the world's cities.

Durations follow distance: rail distance is the great-circle distance times a detour factor,
covered at the typical commercial speed of each train class; flights add taxi/climb time to
cruise time. High-speed departures are spread over the day so that a plan can always pick one
that avoids travelling between 23:00 and 06:00 when the trip is shorter than about 16 hours.
"""

import datetime as dt
import json
import random
from collections.abc import Iterator
from typing import NamedTuple

from sandbox.benchmarks.b2t.geo import haversine_km
from sandbox.benchmarks.b2t.world.cities import CITIES, City
from sandbox.benchmarks.b2t.world.scales import Scale

RAIL_DETOUR = 1.25
# letter -> (train_type, average speed km/h incl. stops, second-class fare CNY/km, first/second ratio)
TRAIN_CLASSES = {
    "G": ("High-speed Rail", 250.0, 0.42, 1.6),
    "D": ("High-speed Rail", 190.0, 0.31, 1.6),
    "Z": ("Regular Train", 110.0, 0.16, 1.55),
    "T": ("Regular Train", 95.0, 0.15, 1.55),
    "K": ("Regular Train", 75.0, 0.13, 1.55),
}
NO_FLIGHTS_BELOW_KM = 400.0  # short hops (Beijing-Tianjin, Shanghai-Hangzhou...) have no flights

AIRLINES = (
    ("Air China", "CA"),
    ("China Eastern Airlines", "MU"),
    ("China Southern Airlines", "CZ"),
    ("Hainan Airlines", "HU"),
    ("Xiamen Airlines", "MF"),
    ("Sichuan Airlines", "3U"),
    ("Shenzhen Airlines", "ZH"),
    ("Spring Airlines", "9C"),
    ("Juneyao Air", "HO"),
    ("Shandong Airlines", "SC"),
)
AIRCRAFT = (
    "Airbus A320neo",
    "Airbus A321",
    "Boeing 737-800",
    "Boeing 737 MAX 8",
    "Airbus A330-300",
    "Boeing 787-9",
    "COMAC C919",
)
ECONOMY_CODES = (
    (1.0, "Y"),
    (0.9, "B"),
    (0.8, "M"),
    (0.7, "H"),
    (0.6, "K"),
    (0.5, "L"),
    (0.4, "Q"),
    (0.0, "V"),
)


def hhmm(minutes: int) -> str:
    minutes %= 24 * 60
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def duration_text(minutes: int) -> str:
    return f"{minutes // 60}h{minutes % 60:02d}m"


def city_distance_km(a: City, b: City) -> float:
    return haversine_km(a.latitude, a.longitude, b.latitude, b.longitude)


def ordered_pairs() -> Iterator[tuple[City, City]]:
    for a in CITIES:
        for b in CITIES:
            if a.name != b.name:
                yield a, b


def _departures(rng: random.Random, count: int, earliest: int, latest: int) -> list[int]:
    """`count` departure minutes spread evenly over [earliest, latest], jittered, 5-minute aligned."""
    if count == 1:
        return [earliest + (latest - earliest) // 3]
    step = (latest - earliest) / (count - 1)
    times = []
    for k in range(count):
        t = earliest + k * step + rng.uniform(-0.3, 0.3) * min(step, 60)
        times.append(int(min(latest, max(earliest, t))) // 5 * 5)
    return times


def trains(scale: Scale, seed: int) -> list[tuple]:
    """Rows of the trains table in schema column order, ids 1..N."""
    rng = random.Random(f"{seed}:trains")
    n_fast, n_slow = scale.trains_per_pair
    counters = {letter: 100 for letter in TRAIN_CLASSES}
    rows: list[tuple] = []
    for a, b in ordered_pairs():
        rail_km = city_distance_km(a, b) * RAIL_DETOUR
        services: list[tuple[str, int, int]] = []  # (class letter, departure minute, duration)
        # High-speed: G mostly, D for some; departures between 06:30 and the latest one that
        # still arrives by 22:30 (or morning departures when the trip is too long for that).
        fast_letters = ["G" if k % 3 != 2 else "D" for k in range(n_fast)]
        for letter in ("G", "D"):
            letter_count = fast_letters.count(letter)
            if not letter_count:
                continue
            minutes = _train_minutes(letter, rail_km, rng)
            # Too long to arrive the same day: morning departures, arriving the next day.
            latest = min(20 * 60, max(9 * 60, 22 * 60 + 30 - minutes))
            for dep in _departures(rng, letter_count, 6 * 60 + 30, latest):
                services.append((letter, dep, minutes))
        # Regular trains: overnight sleepers and daytime services over the whole day.
        for k in range(n_slow):
            letter = ("K", "T", "Z")[k % 3]
            services.append((letter, rng.randrange(6 * 60, 22 * 60, 5), _train_minutes(letter, rail_km, rng)))
        for letter, dep, minutes in sorted(services, key=lambda s: (s[1], s[0])):
            counters[letter] += 1
            number = f"{letter}{counters[letter]}"
            train_type, _, per_km, first_ratio = TRAIN_CLASSES[letter]
            arrive = dep + minutes
            second = float(round(rail_km * per_km + 10, 1))
            fares = {"Second Class Seat": second, "First Class Seat": float(round(second * first_ratio, 1))}
            rows.append(
                (
                    len(rows) + 1,
                    number,
                    train_type,
                    a.name,
                    rng.choice(a.stations),
                    b.name,
                    rng.choice(b.stations),
                    hhmm(dep),
                    hhmm(arrive),
                    arrive // (24 * 60),
                    duration_text(minutes),
                    minutes,
                    json.dumps(fares),
                )
            )
    return rows


def _train_minutes(letter: str, rail_km: float, rng: random.Random) -> int:
    speed = TRAIN_CLASSES[letter][1]
    return int(round(60 * rail_km / speed * rng.uniform(0.95, 1.08) + 10))


def flight_routes(scale: Scale) -> list[tuple[City, City, int]]:
    """(origin, destination, daily flights) of every flown route, in a fixed order."""
    hub_hub, hub_other, other_other = scale.flights_per_route
    routes = []
    for a, b in ordered_pairs():
        if city_distance_km(a, b) < NO_FLIGHTS_BELOW_KM:
            continue
        hubs = a.hub + b.hub
        if scale.flights_hub_routes_only and hubs == 0:
            continue
        daily = (other_other, hub_other, hub_hub)[hubs]
        if daily:
            routes.append((a, b, daily))
    return routes


def _dates(scale: Scale) -> list[dt.date]:
    start, end = dt.date.fromisoformat(scale.date_start), dt.date.fromisoformat(scale.date_end)
    return [start + dt.timedelta(days=k) for k in range((end - start).days + 1)]


class _Schedule(NamedTuple):
    """A daily flight: the same number, airports, times and full fare on every date."""

    origin: City
    destination: City
    number: str
    airline: str
    airline_code: str
    origin_airport: tuple[str, str]  # (name, IATA code)
    destination_airport: tuple[str, str]
    depart: int  # minutes after midnight
    minutes: int
    full_fare: float
    departure_terminal: str
    arrival_terminal: str
    aircraft: str
    on_time_rate: float
    meal: int
    codeshare: str
    km: float


def _flight_schedules(rng: random.Random, scale: Scale) -> list[_Schedule]:
    """The fixed per-route schedules: a flight keeps its number and times every day."""
    schedules = []
    used_numbers: set[str] = set()
    for a, b, daily in flight_routes(scale):
        km = city_distance_km(a, b)
        minutes = int(round((25 + 60 * km * 1.1 / 780) / 5)) * 5
        full_fare = float(round(0.9 * km * 1.1 + 150, -1))
        # Last departure lands by 22:45, so every flight avoids the 23:00-06:00 window.
        for dep in _departures(rng, daily, 7 * 60, min(21 * 60 + 30, 22 * 60 + 45 - minutes)):
            airline, code = rng.choice(AIRLINES)
            number = f"{code}{rng.randint(1000, 9999)}"
            while number in used_numbers:
                number = f"{code}{rng.randint(1000, 9999)}"
            used_numbers.add(number)
            o_airport, d_airport = rng.choice(a.airports), rng.choice(b.airports)
            codeshare = f"{rng.choice(AIRLINES)[1]}{rng.randint(1000, 9999)}" if rng.random() < 0.3 else ""
            schedules.append(
                _Schedule(
                    a,
                    b,
                    number,
                    airline,
                    code,
                    o_airport,
                    d_airport,
                    dep,
                    minutes,
                    full_fare,
                    f"T{rng.randint(1, 3)}",
                    f"T{rng.randint(1, 3)}",
                    rng.choice(AIRCRAFT),
                    round(rng.uniform(0.72, 0.96), 2),
                    int(rng.random() < 0.7),
                    codeshare,
                    km,
                )
            )
    return schedules


def flights(scale: Scale, seed: int) -> Iterator[tuple]:
    """Rows of the flights table in schema column order: each daily flight, each date, both cabins."""
    rng = random.Random(f"{seed}:flights")
    dates = _dates(scale)
    schedules = _flight_schedules(rng, scale)  # draws first, as the rows below always did
    row_id = 0
    for date in dates:
        for schedule in schedules:
            for cabin in ("Economy Class", "Business Class"):
                row_id += 1
                yield _flight_row(rng, row_id, date, schedule, cabin)


def _cabin_fare(rng: random.Random, cabin: str, full_fare: float) -> tuple[float, str, float]:
    """(discount, cabin code, fare) of one cabin on one date: economy 35-100% of the full fare,
    business 2.5 times it at 70-100%; the code follows the discount."""
    if cabin == "Economy Class":
        discount = round(rng.randrange(35, 101, 5) / 100, 2)
        cabin_code = next(c for bound, c in ECONOMY_CODES if discount >= bound)
        return discount, cabin_code, float(round(full_fare * discount, -1))
    discount = round(rng.randrange(70, 101, 5) / 100, 2)
    cabin_code = "C" if discount < 1.0 else "J"
    return discount, cabin_code, float(round(full_fare * 2.5 * discount, -1))


def _flight_row(rng: random.Random, row_id: int, date: dt.date, s: _Schedule, cabin: str) -> tuple:
    """One row of the flights table: a schedule's flight on `date` in `cabin`."""
    arrive = s.depart + s.minutes
    arrival_date = (date + dt.timedelta(days=arrive // (24 * 60))).isoformat()
    fuel = 20.0 if s.km < 800 else 40.0
    child = float(round(s.full_fare * 0.5, -1))
    discount, cabin_code, fare = _cabin_fare(rng, cabin, s.full_fare)
    return (
        row_id,
        s.number,
        s.airline,
        s.airline_code,
        s.origin.name,
        s.origin.city_code,
        s.destination.name,
        s.destination.city_code,
        s.origin_airport[0],
        s.origin_airport[1],
        s.destination_airport[0],
        s.destination_airport[1],
        date.isoformat(),
        hhmm(s.depart),
        arrival_date,
        hhmm(arrive),
        s.minutes,
        s.departure_terminal,
        s.arrival_terminal,
        s.aircraft,
        cabin,
        cabin_code,
        fare,
        child,
        fuel,
        50.0,
        fare + fuel + 50.0,
        discount,
        s.on_time_rate,
        s.meal,
        s.codeshare,
    )
