"""Steps 4 and 5 of the B2T expert (sandbox/benchmarks/b2t/expert/planner.py): time every day with
the schedule module and MapGuide legs, fit the budget, and write the plan's activities."""

from __future__ import annotations

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
from sandbox.benchmarks.b2t.expert.shared import (
    BRANCHING,
    BREAKFAST_CLOSE_FROM,
    BREAKFAST_OPEN_BY,
    FAST_MODES,
    MAX_DAY_LEG_MINUTES,
    MIN_LEG_MINUTES,
    Option,
    add_new_legs,
    describe,
    hm,
    map_guide_calls,
)
from sandbox.expert_session import ExpertFailure


class DayPlanning:
    """Mixin of the expert's _Solver: day timing, budget fitting and the plan (state set by _Solver)."""

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
                "start_time": hm(o.depart),
                "end_time": hm(o.arrive),
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
                "start_time": hm(s.start),
                "end_time": hm(s.end),
                "price": round(p.price * (self.rooms if s.kind == "hotel" else self.people), 2),
                "transport": {
                    "mode": s.leg.mode,
                    "duration_min": s.leg.duration_min,
                    "distance_km": s.leg.distance_km,
                },
            }
        )
        act.update(describe(s.kind, p, self.rooms))
        return act


_ANY = Place("any", "any", 0.0, 0.0)


def _km(a: Place, b: Place) -> float:
    return geo.haversine_km(a.lat, a.lon, b.lat, b.lon)
