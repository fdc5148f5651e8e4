"""The expert planner: solves an instance through the episode environment, recording its turns.

It knows the hidden profile and query (an annotator's privilege), but learns everything about the
world the way the agent must: tool calls and memory operations sent through `EpisodeEnv.step` as
assistant text in the agent's action format. Its turns (think, memory, tool calls) and the
environment's replies form a chain-of-action trace for SFT (paper section 3.2.3).

Steps: (1) note the trip and preferences in memory; weather and transport both ways;
(2) a hotel that fits, near the centre and within a share of the budget; (3) restaurants and
attractions that fit, near the hotel, none visited before; (4) time every day
(sandbox/benchmarks/b2t/expert/schedule.py) and ask MapGuide for every local leg used; (5) read
memory back and
answer with the plan.
"""

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.b2t import geo
from sandbox.benchmarks.b2t.expert import responses
from sandbox.benchmarks.b2t.expert.schedule import (
    MEAL_WINDOWS,
    DayFrame,
    Leg,
    Place,
    Stop,
    problems,
    sequences,
    timeline,
)
from sandbox.benchmarks.b2t.vocab import WALKING_LIMIT_KM
from sandbox.env import EpisodeEnv
from sandbox.expert_session import ExpertFailure, ExpertResult, ExpertSession, tool_call

SEARCH_N = 20
HOTEL_BUDGET_SHARE = 0.4
RADIUS_KM = 25.0
MAX_PLACE_ROUNDS = 4
MAX_TURNS = 16
FAST_MODES = ("Taxi", "Subway")
BRANCHING = 6
MAX_DAY_LEG_MINUTES = 120  # the evaluator's daily local transport limit
MIN_LEG_MINUTES = 5
BREAKFAST_OPEN_BY, BREAKFAST_CLOSE_FROM = 7 * 60 + 40, 9 * 60 + 30


@dataclass
class Option:
    """One intercity choice read from a search reply."""

    mode: str  # "train" | "flight"
    number: str
    kind: str  # profile vocabulary: High-speed Rail / Regular Train / Airplane
    seat: str
    depart: int
    arrive: int
    price: float  # per person

    def same_day_ok(self, latest_arrival: int, earliest_departure: int) -> bool:
        return earliest_departure <= self.depart < self.arrive <= latest_arrival


class Expert:
    """Solves instances of one world; `solve` never raises for an unsolvable instance."""

    def __init__(self, world: Any, max_turns: int = MAX_TURNS):
        self.world = world
        self.max_turns = max_turns

    def solve(self, visible: dict[str, Any], hidden: dict[str, Any]) -> ExpertResult:
        session = ExpertSession(EpisodeEnv(self.world, memory_enabled=True, max_turns=self.max_turns))
        try:
            answer, plan = _Solver(session, visible, hidden).run()
        except ExpertFailure as err:
            return ExpertResult(False, str(err), session.turns, any_error=session.env.any_error)
        except (KeyError, ValueError, TypeError) as err:  # a reply or instance it cannot read
            return ExpertResult(
                False,
                f"unreadable data ({type(err).__name__}: {err})",
                session.turns,
                any_error=session.env.any_error,
            )
        return ExpertResult(True, "", session.turns, answer, session.env.any_error, plan)


def add_new_legs(
    stops: Sequence[Stop], start: str, known: Mapping[tuple[str, str], Any], pairs: list[tuple[str, str]]
) -> None:
    """Append to `pairs` the (from, to) legs of a day walked from `start` that MapGuide has not
    answered yet (`known`) and that are not asked already: each leg is asked once per expert."""
    here = start
    for stop in stops:
        if stop.place is None:
            continue
        leg = (here, stop.place.name)
        if leg not in known and leg not in pairs:
            pairs.append(leg)
        here = stop.place.name


def map_guide_calls(city: str, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """One MapGuide call per local leg inside `city`."""
    return [
        tool_call("MapGuide", origin_cityName=city, origin=a, destination_cityName=city, destination=b)
        for a, b in pairs
    ]


class _Solver:
    def __init__(self, session: ExpertSession, visible: dict[str, Any], hidden: dict[str, Any]):
        self.s = session
        self.q = hidden["query"]
        self.profile = hidden["profile"]
        self.city = self.q["destination"]
        self.origin = self.q["origin"]
        self.days = int(self.q["days"])
        self.people = int(self.q["people"])
        self.rooms = math.ceil(self.people / 2)
        self.budget = float(self.q["budget"])
        self.start = dt.date.fromisoformat(self.q["start_date"])
        self.dates = [(self.start + dt.timedelta(days=i)).isoformat() for i in range(self.days)]
        history = self.profile.get("history") or {}
        self.visited = {
            k: {n.casefold() for n in history.get(k, [])}
            for k in ("accommodations", "restaurants", "attractions")
        }
        self.pref = {
            c: (self.profile.get(c) or {}) for c in ("hotel", "attraction", "dining", "transportation")
        }
        self.leg_cache: dict[tuple[str, str], tuple[bool, Leg]] = {}
        walking = self.pref["attraction"].get("walking_tolerance")
        self.walking_limit = WALKING_LIMIT_KM.get(walking, float("inf")) if walking else float("inf")

    # ------------------------------------------------------------------ the episode

    def run(self) -> tuple[str, list[dict[str, Any]]]:
        weather, outbound, returns = self._step_transport()
        out, back = self._choose_transport(outbound, returns)
        hotel = self._step_hotel(out, back)
        restaurants, attractions = self._step_places(hotel)
        days, out, back = self._plan_with_transport(hotel, restaurants, attractions)
        days = self._step_map(days, hotel, out, back, restaurants, attractions)
        plan = self._assemble(days, weather, out, back)
        total = sum(a["price"] for d in plan for a in d["activities"])
        answer = self.s.answer(
            f"Every day is timed with MapGuide durations, meals fall in their windows and the "
            f"total is {total:.0f} CNY within the {self.budget:.0f} CNY budget. Writing the plan.",
            plan,
        )
        return answer, plan

    # ------------------------------------------------------------------ step 1

    def _preference_notes(self) -> dict[str, Any]:
        notes = {}
        for category, pref in self.pref.items():
            if pref:
                notes[category] = {k: v for k, v in pref.items() if v}
        return notes

    def _step_transport(self) -> tuple[dict[str, dict], list[Option], list[Option]]:
        notes = self._preference_notes()
        seen = {k: sorted(v) for k, v in (self.profile.get("history") or {}).items() if v}
        think = (
            f"The user wants {self.days} days in {self.city} from {self.origin}, "
            f"{self.dates[0]} to {self.dates[-1]}, {self.people} traveller(s), budget "
            f"{self.budget:.0f} CNY. Their favorites and bookings show: "
            + (
                "; ".join(f"{c}: {json.dumps(v, ensure_ascii=False)}" for c, v in notes.items())
                or "no firm preferences"
            )
            + (f". Already visited: {json.dumps(seen, ensure_ascii=False)}" if seen else "")
            + ". First the weather and the trains/flights both ways."
        )
        memory = [
            {
                "action": "write",
                "key": "trip",
                "value": {
                    "origin": self.origin,
                    "destination": self.city,
                    "dates": [self.dates[0], self.dates[-1]],
                    "people": self.people,
                    "budget": self.budget,
                },
            },
            {"action": "write", "key": "preferences", "value": notes or "none stated"},
        ]
        if seen:
            memory.append({"action": "write", "key": "visited_before", "value": seen})
        calls = [tool_call("WeatherSearch", city=self.city, date=self.dates[0], n=self.days)]
        legs = ((self.origin, self.city, self.dates[0]), (self.city, self.origin, self.dates[-1]))
        more, plan = self._transport_calls(legs)
        calls += more
        replies = self.s.act(think, memory, calls)
        weather = {r["date"]: r for r in responses.items(replies[0])}
        half = len(plan) // 2
        outbound, returns = [], []
        for i, (kind, text) in enumerate(zip(plan, replies[1:])):
            options = self._options(kind, text)
            (outbound if i < half else returns).extend(options)
        return weather, outbound, returns

    def _transport_calls(self, legs) -> tuple[list[dict[str, Any]], list[str]]:
        """Searches for each (origin, destination, date) leg in the preferred intercity modes, and
        the kind ("flight" | "train") of each call, in order."""
        t = self.pref["transportation"]
        modes = (
            [t["intercity_transport"]]
            if t.get("intercity_transport")
            else ["High-speed Rail", "Regular Train", "Airplane"]
        )
        calls, plan = [], []
        for origin, dest, date in legs:
            if "Airplane" in modes:
                cabin = [t["seat_class"]] if t.get("seat_class") else None
                calls.append(
                    tool_call(
                        "FlightSearch",
                        origin=origin,
                        destination=dest,
                        departure_date=date,
                        n=SEARCH_N,
                        preferences={"cabin_class": cabin} if cabin else None,
                        depart_after="06:00",
                    )
                )
                plan.append("flight")
            trains = [m for m in modes if m != "Airplane"]
            if trains:
                calls.append(
                    tool_call(
                        "TrainSearch",
                        origin=origin,
                        destination=dest,
                        n=SEARCH_N,
                        preferences={"train_type": trains},
                        depart_after="06:00",
                    )
                )
                plan.append("train")
        return calls, plan

    def _options(self, kind: str, text: str) -> list[Option]:
        seat_pref = self.pref["transportation"].get("seat_class")
        mode_pref = self.pref["transportation"].get("intercity_transport")
        out = []
        for r in responses.items(text):
            if kind == "flight":
                dep_date, dep = r["depart"].split()
                arr_date, arr = r["arrive"].split()
                if dep_date != arr_date or (seat_pref and r["cabin"] != seat_pref):
                    continue
                out.append(
                    Option(
                        "flight",
                        r["flight_number"],
                        "Airplane",
                        r["cabin"],
                        responses.minutes(dep),
                        responses.minutes(arr),
                        float(r["price"]),
                    )
                )
            else:
                if "(+" in r["arrive"] or (mode_pref and r["type"] != mode_pref):
                    continue
                fares = {k: float(v) for k, v in r["fares"].items()}
                seats = [seat_pref] if seat_pref else sorted(fares, key=fares.get)
                for seat in seats:
                    if seat in fares:
                        out.append(
                            Option(
                                "train",
                                r["train_number"],
                                r["type"],
                                seat,
                                responses.minutes(r["depart"]),
                                responses.minutes(r["arrive"]),
                                fares[seat],
                            )
                        )
                        break
        return out

    def _choose_transport(self, outbound: list[Option], returns: list[Option]) -> tuple[Option, Option]:
        outs = sorted(
            (o for o in outbound if o.same_day_ok(21 * 60, 6 * 60)), key=lambda o: (o.price, o.arrive)
        )
        backs = sorted(
            (o for o in returns if o.same_day_ok(23 * 60, 7 * 60)), key=lambda o: (o.price, -o.depart)
        )
        if not outs or not backs:
            raise ExpertFailure("no daytime train or flight in the preferred mode and class")
        self.transport_options = (outs, backs)
        return outs[0], backs[0]

    # ------------------------------------------------------------------ step 2

    def _step_hotel(self, out: Option, back: Option) -> Place:
        transport = (out.price + back.price) * self.people
        nights = max(1, self.days - 1)
        cap = max(150.0, round(HOTEL_BUDGET_SHARE * (self.budget - transport) / (nights * self.rooms), -1))
        hp = self.pref["hotel"]
        prefs = {
            k: v
            for k, v in (
                ("star_rating", hp.get("star_requirement")),
                ("amenities", hp.get("essential_facilities")),
            )
            if v
        }
        think = (
            f"Outbound {out.number} {_hm(out.depart)}-{_hm(out.arrive)}, return {back.number} "
            f"{_hm(back.depart)}-{_hm(back.arrive)}: {transport:.0f} CNY for {self.people}. "
            f"A hotel near the centre, at most about {cap:.0f} CNY a night"
            + (f", {json.dumps(prefs, ensure_ascii=False)}" if prefs else "")
            + "."
        )
        memory = [
            {
                "action": "write",
                "key": "transport",
                "value": {
                    "outbound": f"{out.number} {_hm(out.depart)}-{_hm(out.arrive)} {out.seat} {out.price:g}",
                    "return": (
                        f"{back.number} {_hm(back.depart)}-{_hm(back.arrive)} {back.seat} {back.price:g}"
                    ),
                },
            }
        ]
        attempts = [
            dict(near=self.city, radius_km=8, max_price=cap),
            dict(max_price=cap),
            dict(near=self.city, radius_km=10),
            dict(),
        ]
        for i, extra in enumerate(attempts):
            reply = self.s.act(
                think,
                memory if i == 0 else [],
                [
                    tool_call(
                        "AccommodationSearch", city=self.city, n=SEARCH_N, preferences=prefs or None, **extra
                    )
                ],
            )[0]
            hotels = [
                h
                for h in responses.items(reply)
                if h["name"].casefold() not in self.visited["accommodations"]
            ]
            if hotels:
                best = min(hotels, key=lambda h: (float(h["price_per_night"]), h.get("distance_km", 0)))
                lat, lon = responses.coords(best["coords"])
                self.hotel_info = best
                return Place(
                    "hotel", best["name"], lat, lon, 0, 24 * 60, float(best["price_per_night"]), info=best
                )
            think = "No suitable hotel in that search; widening it."
        raise ExpertFailure("no hotel that fits the preferences")

    # ------------------------------------------------------------------ step 3

    def _step_places(self, hotel: Place) -> tuple[list[Place], list[Place]]:
        dp, ap = self.pref["dining"], self.pref["attraction"]
        need_sights = self.days + 2
        restaurants: dict[str, Place] = {}
        attractions: dict[str, Place] = {}
        memory = [
            {
                "action": "write",
                "key": "hotel",
                "value": {"name": hotel.name, "price_per_night": hotel.price, "rooms": self.rooms},
            }
        ]
        cuisines = dp.get("cuisine_preferences") or [None]
        anchors = [hotel.name, self.city]
        for round_ in range(MAX_PLACE_ROUNDS):
            if round_ >= len(anchors):
                break
            anchor = anchors[round_]
            calls = []
            for cuisine in cuisines:
                prefs = {
                    k: v
                    for k, v in (
                        ("cuisine", [cuisine] if cuisine else None),
                        ("price_level", [dp["price_level"]] if dp.get("price_level") else None),
                        ("environment", dp.get("dining_environment")),
                    )
                    if v
                }
                max_price = None if dp.get("price_level") else 120
                for open_at in (None, "07:30"):
                    calls.append(
                        tool_call(
                            "RestaurantSearch",
                            city=self.city,
                            n=SEARCH_N,
                            preferences=prefs or None,
                            near=anchor,
                            radius_km=RADIUS_KM,
                            max_price=max_price,
                            open_at=open_at,
                        )
                    )
            aprefs = {
                k: v
                for k, v in (
                    ("attraction_type", ap.get("preferred_attraction_types")),
                    ("walk_tolerance", [ap["walking_tolerance"]] if ap.get("walking_tolerance") else None),
                )
                if v
            }
            calls.append(
                tool_call(
                    "AttractionSearch",
                    city=self.city,
                    n=SEARCH_N,
                    preferences=aprefs or None,
                    near=anchor,
                    radius_km=RADIUS_KM,
                    max_price=None if aprefs else 80,
                )
            )
            think = (
                f"Hotel {hotel.name} ({hotel.price:g} CNY/night). Now restaurants that fit (some open "
                f"for breakfast) and attractions near it, skipping places visited before."
                if round_ == 0
                else f"Not enough options yet; searching around {anchor} too."
            )
            replies = self.s.act(think, memory, calls)
            memory = []
            for text in replies[:-1]:
                for r in responses.items(text):
                    if r["name"].casefold() not in self.visited["restaurants"]:
                        restaurants.setdefault(r["name"], _restaurant(r))
            for r in responses.items(replies[-1]):
                if (
                    r["name"].casefold() not in self.visited["attractions"]
                    and r["walking_km"] <= self.walking_limit
                ):
                    attractions.setdefault(r["name"], _attraction(r))
                    if r["name"] not in anchors:
                        anchors.append(r["name"])
            early = sum(
                1
                for p in restaurants.values()
                if p.open_min <= BREAKFAST_OPEN_BY and p.close_min >= BREAKFAST_CLOSE_FROM
            )
            if (
                len(restaurants) - early >= 2 * self.days + 2
                and early >= self.days + 2
                and len(attractions) >= need_sights
            ):
                break
        self.s.act(
            "Saving the candidate places before timing the days.",
            [
                {"action": "write", "key": "restaurants", "value": sorted(restaurants)[:40]},
                {"action": "write", "key": "attractions", "value": sorted(attractions)[:20]},
            ],
        )
        near = lambda p: geo.haversine_km(hotel.lat, hotel.lon, p.lat, p.lon)  # noqa: E731
        return (
            sorted(restaurants.values(), key=lambda p: (near(p) + p.price / 40.0, p.name)),
            sorted(attractions.values(), key=lambda p: (near(p) + p.price / 40.0, p.name)),
        )

    # ------------------------------------------------------------------ step 4

    def _leg(self, a: Place, b: Place) -> Leg:
        """The local trip a -> b: MapGuide's numbers when asked, else the same geo model's estimate."""
        key = (a.name, b.name)
        cached = self.leg_cache.get(key)
        if cached is not None and cached[0] == (key in self.s.legs):
            return cached[1]
        known = self.s.legs.get(key)
        routes = known or {
            m: (r.duration_min, r.distance_km)
            for m, r in geo.local_routes(a.lat, a.lon, b.lat, b.lon).items()
        }
        preferred = self.pref["transportation"].get("intracity_transport")
        fastest = min(FAST_MODES, key=lambda m: (routes[m][0], m))
        mode = fastest
        if preferred and preferred in routes and preferred != fastest:
            if routes[preferred][0] <= min(30, routes[fastest][0] + 10) and (
                preferred != "Walking" or self.walking_limit == float("inf")
            ):
                mode = preferred
        leg = Leg(mode, *routes[mode])
        self.leg_cache[key] = (known is not None, leg)
        return leg

    def _frames(self, hotel: Place, out: Option, back: Option) -> list[DayFrame]:
        # Day 1 starts at the city centre (MapGuide knows it by the city's name; before asking,
        # the hotel near the centre stands in for it).
        centre = Place("centre", self.city, hotel.lat, hotel.lon)
        frames = []
        for i in range(self.days):
            frames.append(
                DayFrame(
                    start_place=centre if i == 0 else hotel,
                    arrive=(out.depart, out.arrive) if i == 0 else None,
                    depart=(back.depart, back.arrive) if i == self.days - 1 else None,
                    walking_limit=self.walking_limit,
                )
            )
        return frames

    def _plan_with_transport(self, hotel, restaurants, attractions):
        """Days for the cheapest pair of trains/flights whose times let every day work."""
        outs, backs = self.transport_options
        pairs = sorted(
            ((o, b) for o in outs[:4] for b in backs[:4]), key=lambda ob: ob[0].price + ob[1].price
        )
        failure = ExpertFailure("no trains or flights")
        for out, back in pairs:
            try:
                return self._plan_days(hotel, out, back, restaurants, attractions), out, back
            except ExpertFailure as err:
                failure = err
        raise failure

    def _plan_days(
        self, hotel: Place, out: Option, back: Option, restaurants: list[Place], attractions: list[Place]
    ) -> list[list[Stop]]:
        frames = self._frames(hotel, out, back)
        # Keep the early-opening restaurants closest to the hotel for breakfasts.
        early = [
            p for p in restaurants if p.open_min <= BREAKFAST_OPEN_BY and p.close_min >= BREAKFAST_CLOSE_FROM
        ]
        n_breakfasts = sum(1 for f in frames if f.arrive is None) + 1
        self.breakfast_pool = early[: n_breakfasts + 2]
        reserved = {p.name for p in self.breakfast_pool}
        self.meal_pool = [p for p in restaurants if p.name not in reserved]
        used: set[str] = set()
        days = []
        for i, frame in enumerate(frames):
            stops = self._plan_day(frame, i == 0, hotel, restaurants, attractions, used)
            if stops is None:
                raise ExpertFailure(f"could not time day {i + 1}")
            used.update(s.place.name for s in stops if s.place is not None and s.kind != "hotel")
            days.append(stops)
        return self._fit_budget(days, frames, hotel, out, back, restaurants, attractions)

    def _plan_day(
        self,
        frame: DayFrame,
        is_first: bool,
        hotel: Place,
        restaurants: list[Place],
        attractions: list[Place],
        used: set[str],
    ) -> list[Stop] | None:
        for kinds in sequences(frame):
            draft = timeline(kinds, [_ANY] * len(kinds), frame, lambda a, b: Leg("Taxi", 15, 4.0))
            places = self._assign(kinds, draft, hotel, restaurants, attractions, used, frame.start_place)
            if places is None:
                continue
            stops = timeline(kinds, places, frame, self._leg)
            if not problems(stops, frame, is_first):
                return stops
        return None

    def _assign(
        self,
        kinds: list[str],
        draft: list[Stop],
        hotel: Place,
        restaurants: list[Place],
        attractions: list[Place],
        used: set[str],
        start: Place,
    ) -> list[Place] | None:
        """Places for a day's stops: open at the drafted times, and a route whose local transport
        stays well within 2 h (a small depth-first search over the nearest candidates)."""
        timed = [s for s in draft if s.kind not in ("outbound", "return")]
        options = []
        for kind, stop in zip(kinds, timed):
            if kind == "hotel":
                options.append([hotel])
                continue
            if kind == "attraction":
                pool, lo, hi = attractions, stop.start, stop.start + 60
            else:
                pool = self.breakfast_pool if kind == "breakfast" else self.meal_pool
                lo, hi = stop.start - 20, stop.end + 20
                if kind != "breakfast":
                    lo = max(lo, MEAL_WINDOWS[kind][0])
            options.append(
                [
                    p
                    for p in pool
                    if p.name not in used and p.open_min <= max(lo, 0) and p.close_min >= min(hi, 24 * 60)
                ]
            )
        best: list[Any] = [None, float(MAX_DAY_LEG_MINUTES) + 1]
        floor = MIN_LEG_MINUTES

        def search(i: int, here: Place, chosen: list[Place], minutes: float) -> None:
            if minutes + floor * (len(options) - i) >= best[1]:
                return
            if i == len(options):
                best[0], best[1] = list(chosen), minutes
                return
            names = {p.name for p in chosen}
            near = sorted(
                (p for p in options[i] if p.name not in names),
                key=lambda p: (self._leg(here, p).duration_min, p.price, p.name),
            )
            for p in near[:BRANCHING]:
                chosen.append(p)
                search(i + 1, p, chosen, minutes + self._leg(here, p).duration_min)
                chosen.pop()

        search(0, start, [], 0.0)
        return best[0]

    def _cost(self, days: list[list[Stop]], out: Option, back: Option) -> float:
        total = (out.price + back.price) * self.people
        for stops in days:
            for s in stops:
                if s.place is not None:
                    total += s.place.price * (self.rooms if s.kind == "hotel" else self.people)
        return total

    def _fit_budget(self, days, frames, hotel, out, back, restaurants, attractions):
        """Swap the priciest restaurants and attractions for cheaper unused ones until in budget."""
        while self._cost(days, out, back) > self.budget:
            if not self._cheaper_swap(days, frames, restaurants, attractions):
                raise ExpertFailure(
                    f"cheapest plan found costs {self._cost(days, out, back):.0f} "
                    f"CNY, over the {self.budget:.0f} CNY budget"
                )
        return days

    def _cheaper_swap(self, days, frames, restaurants, attractions, first: int = 0, used=()) -> bool:
        """One swap of a priced stop for a cheaper unused place; `first`: index of the trip's first
        day in `days` (-1: none, when a HiMAP executor fits one later day); `used`: names taken
        elsewhere."""
        used = {s.place.name for d in days for s in d if s.place is not None and s.kind != "hotel"} | set(
            used
        )
        candidates = sorted(
            (
                (s.place.price, di, s.place.name)
                for di, d in enumerate(days)
                for s in d
                if s.place is not None and s.kind != "hotel"
            ),
            reverse=True,
        )
        for price, di, name in candidates:
            local = [s for s in days[di] if s.kind not in ("outbound", "return")]
            kinds = [s.kind for s in local]
            at = [s.place.name for s in local].index(name)
            pool = attractions if kinds[at] == "attraction" else restaurants
            for cand in sorted(
                (p for p in pool if p.name not in used and p.price < price), key=lambda p: (p.price, p.name)
            ):
                places = [s.place for s in local]
                places[at] = cand
                trial = timeline(kinds, places, frames[di], self._leg)
                if not problems(trial, frames[di], di == first):
                    days[di] = trial
                    return True
        return False

    # ------------------------------------------------------------------ step 5

    def _step_map(self, days, hotel, out, back, restaurants, attractions) -> list[list[Stop]]:
        """Ask MapGuide for every leg of the drafted days; re-time with its numbers."""
        for round_ in range(3):
            pairs: list[tuple[str, str]] = []
            for i, stops in enumerate(days):
                add_new_legs(stops, self.city if i == 0 else hotel.name, self.s.legs, pairs)
            if not pairs:
                return days
            calls = map_guide_calls(self.city, pairs)
            memory = [{"action": "read", "key": "all"}] if round_ == 0 else []
            think = (
                "Draft itinerary ready; checking every local trip with MapGuide and re-reading my notes."
                if round_ == 0
                else "Some trips changed; checking the new legs."
            )
            replies = self.s.act(think, memory, calls)
            for (a, b), text in zip(pairs, replies):
                self.s.legs[(a, b)] = responses.routes(text)
            days = self._retime(days, hotel, out, back, restaurants, attractions)
        raise ExpertFailure("local trips kept changing after MapGuide")

    def _retime(self, days, hotel, out, back, restaurants, attractions) -> list[list[Stop]]:
        frames = self._frames(hotel, out, back)
        new_days = []
        for i, (stops, frame) in enumerate(zip(days, frames)):
            kinds = [s.kind for s in stops if s.kind not in ("outbound", "return")]
            places = [s.place for s in stops if s.kind not in ("outbound", "return")]
            trial = timeline(kinds, places, frame, self._leg)
            if problems(trial, frame, i == 0):
                used = {
                    s.place.name
                    for j, d in enumerate(new_days + days[i + 1 :])
                    for s in d
                    if s.place is not None and s.kind != "hotel"
                }
                trial = self._plan_day(frame, i == 0, hotel, restaurants, attractions, used)
                if trial is None:
                    raise ExpertFailure(f"day {i + 1} does not fit with MapGuide's times")
            new_days.append(trial)
        return new_days

    # ------------------------------------------------------------------ the answer

    def _assemble(self, days, weather, out, back) -> list[dict[str, Any]]:
        plan = []
        for i, (stops, date) in enumerate(zip(days, self.dates)):
            w = weather.get(date)
            if w is None:
                raise ExpertFailure(f"no weather for {date}")
            acts = [self._activity(s, out, back) for s in stops]
            plan.append(
                {
                    "day": i + 1,
                    "date": date,
                    "city": self.city,
                    "weather": {
                        "condition": w["weather"],
                        "max_temp": w["max_temp"],
                        "min_temp": w["min_temp"],
                    },
                    "city_info": f"{self.city}, day {i + 1} of {self.days}: {w['weather']}, "
                    f"{w['min_temp']}-{w['max_temp']} C, air quality {w['air_quality']}.",
                    "activities": acts,
                }
            )
        return plan

    def _activity(self, s: Stop, out: Option, back: Option) -> dict[str, Any]:
        if s.kind in ("outbound", "return"):
            o = out if s.kind == "outbound" else back
            frm, to = (self.origin, self.city) if s.kind == "outbound" else (self.city, self.origin)
            return {
                "type": "intercity_transport",
                "mode": o.mode,
                "number": o.number,
                "from_city": frm,
                "to_city": to,
                "start_time": _hm(o.depart),
                "end_time": _hm(o.arrive),
                "seat_class": o.seat,
                "price": round(o.price * self.people, 2),
            }
        p = s.place
        act: dict[str, Any] = {"type": "meal" if s.kind in MEAL_WINDOWS else s.kind}
        if s.kind in MEAL_WINDOWS:
            act["meal"] = s.kind
        act.update(
            {
                "name": p.name,
                "start_time": _hm(s.start),
                "end_time": _hm(s.end),
                "price": round(p.price * (self.rooms if s.kind == "hotel" else self.people), 2),
                "transport": {
                    "mode": s.leg.mode,
                    "duration_min": s.leg.duration_min,
                    "distance_km": s.leg.distance_km,
                },
            }
        )
        act.update(_describe(s.kind, p, self.rooms))
        return act


_ANY = Place("any", "any", 0.0, 0.0)


def _km(a: Place, b: Place) -> float:
    return geo.haversine_km(a.lat, a.lon, b.lat, b.lon)


def _hm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _restaurant(r: dict[str, Any]) -> Place:
    lat, lon = responses.coords(r["coords"])
    open_min, close_min = responses.hours(r["hours"])
    return Place("restaurant", r["name"], lat, lon, open_min, close_min, float(r["price_per_person"]), info=r)


def _attraction(r: dict[str, Any]) -> Place:
    lat, lon = responses.coords(r["coords"])
    open_min, close_min = responses.hours(r["hours"])
    return Place(
        "attraction",
        r["name"],
        lat,
        lon,
        open_min,
        close_min,
        float(r["ticket"]),
        float(r["walking_km"]),
        info=r,
    )


def _describe(kind: str, p: Place, rooms: int) -> dict[str, str]:
    r = p.info
    if kind == "hotel":
        return {
            "description": f"{r.get('star', '')} {r.get('type', 'hotel').lower()} in "
            f"{r.get('district', '')}, rated {r.get('rating', '')}.",
            "tips": f"{rooms} room(s); facilities: {', '.join(r.get('facilities', [])) or 'basic'}.",
        }
    if kind == "attraction":
        return {
            "description": f"{r.get('type', '')}, rated {r.get('rating', '')}; about "
            f"{r.get('walking_km', 0)} km on foot.",
            "tips": f"Open {r.get('hours', '')}; ticket {r.get('ticket', 0)} CNY per person.",
        }
    return {
        "description": f"{r.get('style', '')} ({r.get('cuisine', '')}), rated {r.get('rating', '')}.",
        "tips": f"About {r.get('price_per_person', '')} CNY per person; open {r.get('hours', '')}.",
    }
