"""A hand-made mini world, a hand-written ground truth and a plan that satisfies all 32 constraints.

Every POI sits at a chosen offset (km north, km east) from Chengdu's centre, so local trip
times are known; "alternative" POIs share the coordinates of the POI they stand in for, so a test
can swap one in and break exactly one rule. Local transport legs are filled from `sandbox.benchmarks.b2t.geo`
(the model MapGuide uses) by `route_plan`, which tests call again after editing a plan.
A worked example of the plan format and the evaluator (sandbox/benchmarks/b2t/README.md), and
the fixture of the evaluator tests and benchmarks/bench_eval.py.
"""

from __future__ import annotations

import copy
import math

from sandbox.benchmarks.b2t import geo

CENTRE = {"Chengdu": (30.5728, 104.0668), "Shanghai": (31.2304, 121.4737)}
TRIP_DATES = ("2026-05-01", "2026-05-02", "2026-05-03")
PEOPLE = 2

GROUND_TRUTH = {
    "id": "test-hard-00001",
    "query": {
        "origin": "Shanghai",
        "destination": "Chengdu",
        "start_date": "2026-05-01",
        "days": 3,
        "people": PEOPLE,
        "budget": 12000,
    },
    "profile": {
        "hotel": {"star_requirement": ["5-Star/Luxury"], "essential_facilities": ["Gym", "Free WiFi"]},
        "attraction": {
            "preferred_attraction_types": ["Museum/Exhibition", "Cultural/Historic Site", "Park/Square"],
            "walking_tolerance": "Medium (3-5km)",
        },
        "dining": {
            "cuisine_preferences": ["Sichuan Cuisine", "Hot Pot"],
            "price_level": "Moderate (80-150 CNY/person)",
            "dining_environment": ["Quiet", "Scenic View"],
        },
        "transportation": {
            "intercity_transport": "High-speed Rail",
            "intracity_transport": "Subway",
            "seat_class": "Second Class Seat",
        },
        "history": {
            "accommodations": ["Old Town Inn"],
            "restaurants": ["Forgotten Dumplings"],
            "attractions": ["Visited Pagoda"],
            "transportation": ["G1"],
        },
    },
}
INSTANCE = {
    "id": "test-hard-00001",
    "split": "test",
    "difficulty": "hard",
    "instruction": "A 3-day trip from Shanghai to Chengdu for two, budget 12,000 CNY.",
    "trajectory": [],
}

# name -> (offset north km, offset east km, cuisine, avg price, environment, open, close)
RESTAURANTS = {
    "Lotus Pond Kitchen": (1.5, 1.0, "Sichuan Cuisine", 120, ["Quiet"], "10:00", "22:00"),
    "Bamboo Hotpot": (0.0, 2.5, "Hot Pot", 130, ["Scenic View"], "11:00", "23:00"),
    "Morning Dew Noodles": (-1.2, 1.8, "Sichuan Cuisine", 90, ["Quiet"], "06:00", "22:00"),
    "Teahouse Garden": (-2.0, -2.0, "Sichuan Cuisine", 110, ["Quiet", "Scenic View"], "10:00", "22:00"),
    "Red Lantern Hotpot": (1.0, 0.0, "Hot Pot", 140, ["Quiet"], "11:00", "23:00"),
    "Sunrise Dumplings": (-0.8, 1.2, "Sichuan Cuisine", 85, ["Quiet"], "06:30", "21:00"),
    "Jade River Bistro": (-0.5, 4.5, "Sichuan Cuisine", 100, ["Scenic View"], "10:00", "22:00"),
    # alternatives at Teahouse Garden's place
    "Steak House": (-2.0, -2.0, "Western Food", 110, ["Quiet"], "10:00", "22:00"),
    "Golden Palace": (-2.0, -2.0, "Sichuan Cuisine", 450, ["Quiet"], "10:00", "22:00"),
    "Noisy Hotpot": (-2.0, -2.0, "Hot Pot", 110, ["Lively"], "10:00", "22:00"),
    "Forgotten Dumplings": (-2.0, -2.0, "Sichuan Cuisine", 110, ["Quiet"], "10:00", "22:00"),
}
# name -> (north, east, type, ticket price, walking km, open, close)
ATTRACTIONS = {
    "Wenshu Monastery Museum": (2.5, 2.5, "Museum/Exhibition", 50, 0.6, "09:00", "18:00"),
    "Kuanzhai Old Lanes": (1.0, 3.5, "Cultural/Historic Site", 0, 0.6, "09:00", "21:00"),
    "Sichuan Museum": (-3.0, 1.0, "Museum/Exhibition", 60, 0.6, "09:00", "18:00"),
    "Du Fu Thatched Cottage": (-3.5, -1.0, "Cultural/Historic Site", 50, 0.6, "09:00", "18:00"),
    "People's Park": (0.0, -3.0, "Park/Square", 0, 0.6, "06:00", "22:00"),
    "Wuhou Shrine": (1.5, -2.0, "Cultural/Historic Site", 50, 0.6, "09:00", "18:00"),
    "Jinsha Site Museum": (-2.0, 3.5, "Museum/Exhibition", 70, 0.6, "09:00", "18:00"),
    "Tianfu Square": (1.5, 4.5, "Park/Square", 0, 0.6, "00:00", "24:00"),
    # alternatives
    "Happy Theme Park": (-3.0, 1.0, "Theme Park", 60, 0.6, "09:00", "18:00"),
    "Long Walk Park": (-3.0, 1.0, "Museum/Exhibition", 60, 4.0, "09:00", "18:00"),
    "Visited Pagoda": (-3.0, 1.0, "Museum/Exhibition", 60, 0.6, "09:00", "18:00"),
    "Early Closing Temple": (-2.0, 3.5, "Museum/Exhibition", 70, 0.6, "09:00", "11:00"),
    "Distant Mountain Park": (13.5, 18.5, "Park/Square", 0, 0.6, "00:00", "24:00"),
    "Lantern Square": (0.5, 1.5, "Park/Square", 0, 0.6, "00:00", "24:00"),
}
# name -> (north, east, category, avg price, open, close)
ENTERTAINMENT = {
    "Shu Opera House": (0.5, 1.5, "Theater/Show", 150, "10:00", "24:00"),
    "Jinsha Escape Room": (-2.0, 3.5, "Escape Room", 100, "09:00", "22:00"),
    "Tianfu Cinema": (1.5, 4.5, "Cinema", 60, "09:00", "24:00"),
}
# name -> (north, east, star, facilities, price per room and night)
HOTELS = {
    "Jinjiang Grand Hotel": (-1.0, 1.5, "5-Star/Luxury", ["Free WiFi", "Gym", "Swimming Pool"], 900),
    "Comfort Inn Chengdu": (-1.0, 1.5, "3-Star/Comfort", ["Free WiFi", "Gym", "Swimming Pool"], 900),
    "Palace Hotel No Gym": (-1.0, 1.5, "5-Star/Luxury", ["Free WiFi", "Swimming Pool"], 900),
    "Old Town Inn": (-1.0, 1.5, "5-Star/Luxury", ["Free WiFi", "Gym", "Swimming Pool"], 900),
}
# number, type, from, to, departure, arrival, fares
TRAINS = (
    (
        "G1",
        "High-speed Rail",
        "Shanghai",
        "Chengdu",
        "07:00",
        "11:30",
        {"Second Class Seat": 800.0, "First Class Seat": 1300.0},
    ),
    (
        "G2",
        "High-speed Rail",
        "Chengdu",
        "Shanghai",
        "17:30",
        "22:00",
        {"Second Class Seat": 800.0, "First Class Seat": 1300.0},
    ),
    (
        "D5",
        "High-speed Rail",
        "Chengdu",
        "Shanghai",
        "17:30",
        "23:30",
        {"Second Class Seat": 800.0, "First Class Seat": 1300.0},
    ),
    (
        "K1",
        "Regular Train",
        "Shanghai",
        "Chengdu",
        "07:00",
        "11:30",
        {"Second Class Seat": 800.0, "First Class Seat": 1300.0},
    ),
    (
        "G7",
        "High-speed Rail",
        "Shanghai",
        "Chengdu",
        "13:30",
        "18:10",
        {"Second Class Seat": 800.0, "First Class Seat": 1300.0},
    ),
)
# number, from, to, date, departure, arrival, cabin, total price per adult
FLIGHTS = (("3U8888", "Shanghai", "Chengdu", "2026-05-01", "08:00", "11:00", "Economy Class", 1200.0),)
WEATHER = {
    "2026-05-01": ("Sunny", 26, 15),
    "2026-05-02": ("Cloudy", 24, 16),
    "2026-05-03": ("Light Rain", 22, 15),
}


def latlon(north_km: float, east_km: float, city: str = "Chengdu") -> tuple[float, float]:
    lat0, lon0 = CENTRE[city]
    return (lat0 + north_km / 111.195, lon0 + east_km / (111.195 * math.cos(math.radians(lat0))))


def _train(number: str, seat: str = "Second Class Seat") -> dict:
    _, _, origin, dest, dep, arr, fares = next(t for t in TRAINS if t[0] == number)
    return {
        "type": "intercity_transport",
        "mode": "train",
        "number": number,
        "from_city": origin,
        "to_city": dest,
        "start_time": dep,
        "end_time": arr,
        "seat_class": seat,
        "price": fares[seat] * PEOPLE,
    }


def visit(kind: str, name: str, start: str, end: str, mode: str = "Taxi", meal: str | None = None) -> dict:
    """A meal/attraction/entertainment/hotel activity with its store price; transport by route_plan."""
    if kind == "meal":
        price = RESTAURANTS[name][3] * PEOPLE
    elif kind == "attraction":
        price = ATTRACTIONS[name][3] * PEOPLE
    elif kind == "entertainment":
        price = ENTERTAINMENT[name][3] * PEOPLE
    else:
        price = HOTELS[name][4] * math.ceil(PEOPLE / 2)
    act = {
        "type": kind,
        **({"meal": meal} if meal else {}),
        "name": name,
        "start_time": start,
        "end_time": end,
        "price": price,
        "transport": {"mode": mode},
        "description": f"{name}: a local favourite worth the trip.",
        "tips": "Arrive a little early to avoid queues.",
    }
    return act


def _day(n: int, activities: list[dict]) -> dict:
    condition, hi, lo = WEATHER[TRIP_DATES[n - 1]]
    return {
        "day": n,
        "date": TRIP_DATES[n - 1],
        "city": "Chengdu",
        "weather": {"condition": condition, "max_temp": hi, "min_temp": lo},
        "city_info": "Chengdu, capital of Sichuan: pandas, teahouses and spicy food.",
        "activities": activities,
    }


def _place(name: str) -> tuple[float, float]:
    for table in (RESTAURANTS, ATTRACTIONS, ENTERTAINMENT, HOTELS):
        if name in table:
            return latlon(table[name][0], table[name][1])
    raise KeyError(name)


def route_plan(plan: list[dict]) -> list[dict]:
    """Fill every local leg's duration/distance from the geo model, following the evaluator's
    place sequence (day 1 and intercity arrivals: city centre; later days: last night's hotel).
    Legs from or to unknown places are left as they are."""
    start: tuple[float, float] | None = CENTRE["Chengdu"]
    for day in plan:
        place = start
        for act in day["activities"]:
            if act["type"] == "intercity_transport":
                place = CENTRE["Chengdu"]
                continue
            try:
                here = _place(act["name"])
            except KeyError:
                here = None
            leg = act.get("transport")
            if isinstance(leg, dict) and place and here and leg.get("mode") in geo.LOCAL_MODES:
                route = geo.local_route(leg["mode"], *place, *here)
                leg["duration_min"], leg["distance_km"] = route.duration_min, route.distance_km
            place = here
        hotels = [a for a in day["activities"] if a["type"] == "hotel"]
        start = _place(hotels[-1]["name"]) if hotels and hotels[-1]["name"] in HOTELS else None
    return plan


def valid_plan() -> list[dict]:
    """A fresh copy of the plan that passes all 32 constraints (see test_valid_plan_passes_all)."""
    return route_plan(copy.deepcopy(_VALID))


_VALID = [
    _day(
        1,
        [
            _train("G1"),
            visit("meal", "Lotus Pond Kitchen", "12:10", "13:10", meal="lunch"),
            visit("attraction", "Wenshu Monastery Museum", "13:50", "15:50"),
            visit("attraction", "Kuanzhai Old Lanes", "16:20", "17:20"),
            visit("meal", "Bamboo Hotpot", "18:00", "19:00", meal="dinner"),
            visit("hotel", "Jinjiang Grand Hotel", "19:40", "20:00"),
        ],
    ),
    _day(
        2,
        [
            visit("meal", "Morning Dew Noodles", "08:00", "08:40", mode="Walking", meal="breakfast"),
            visit("attraction", "Sichuan Museum", "09:20", "10:40"),
            visit("attraction", "Du Fu Thatched Cottage", "11:10", "11:50"),
            visit("meal", "Teahouse Garden", "12:30", "13:20", meal="lunch"),
            visit("attraction", "People's Park", "14:00", "15:30"),
            visit("attraction", "Wuhou Shrine", "16:00", "16:50"),
            visit("meal", "Red Lantern Hotpot", "17:30", "18:20", meal="dinner"),
            visit("entertainment", "Shu Opera House", "19:00", "20:30"),
            visit("hotel", "Jinjiang Grand Hotel", "21:00", "21:15"),
        ],
    ),
    _day(
        3,
        [
            visit("meal", "Sunrise Dumplings", "08:00", "08:40", mode="Walking", meal="breakfast"),
            visit("attraction", "Jinsha Site Museum", "09:20", "11:30"),
            visit("meal", "Jade River Bistro", "12:00", "13:00", meal="lunch"),
            visit("attraction", "Tianfu Square", "14:10", "16:00"),
            _train("G2"),
        ],
    ),
]


def find(plan: list[dict], day: int, name: str) -> dict:
    """The activity of a day with a name (or train number)."""
    return next(a for a in plan[day - 1]["activities"] if name in (a.get("name"), a.get("number")))
