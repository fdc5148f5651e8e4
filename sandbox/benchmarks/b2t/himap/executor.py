"""The scripted B2T executor of one HiMAP day (the coordinator is expert.B2TExpertPolicies).

Weather and the day's train/flight; the candidates from the coordinator's searches in its prompt
(it searches them itself only when the prompt has none: flat); the day timed (schedule.py) from its
own share of every candidate list (every D-th from position d-1: the days' shares are disjoint, so
such a day needs no Σ check), fitted to the hint by cheaper swaps from its share first; MapGuide
for every leg; submit_day. Only a day whose share cannot make a day (or whose swaps leave it) plans
from the other candidates (first around what the other stay days will take from their shares) and
checks those venues with check_items before submitting (a venue another day holds is replaced). A
day that cannot get within its hint is rejected (code "budget"), or, where it cannot reject (flat,
no bargaining), submitted at its cheapest: Σ then has the last word.
"""

from __future__ import annotations

from typing import Any

from sandbox.benchmarks.b2t.expert import responses
from sandbox.benchmarks.b2t.expert.planner import _Solver
from sandbox.benchmarks.b2t.expert.schedule import DayFrame, Place, Stop
from sandbox.benchmarks.b2t.expert.shared import (
    BREAKFAST_CLOSE_FROM,
    BREAKFAST_OPEN_BY,
    Option,
    add_new_legs,
    map_guide_calls,
)
from sandbox.expert_session import ExpertFailure, tool_call, turn_text
from sandbox.himap.expert import RoleSession, lookups_of, subgoal_of
from sandbox.himap.protocol import StreamStart

MAX_ATTEMPTS = 8
VENUE_KINDS = ("breakfast", "lunch", "dinner", "attraction")


class DayPlanner(_Solver):
    """One executor's day, with the single expert's search, timing and budget-fitting steps."""

    def __init__(self, rs: RoleSession, visible, hidden, start: StreamStart):
        super().__init__(rs, visible, hidden)
        goal = subgoal_of(start)
        self.goal, self.day, self.date, self.kind = goal, goal["day"], goal["date"], goal["day_type"]
        self.hint = goal.get("budget")
        tools = {t["function"]["name"] for t in start.prompt.tools or []}
        self.claims = "check_items" in tools
        self.can_reject = "reject_subgoal" in tools
        self.excluded: set[str] = set()
        self.claimed: set[str] = set()
        self.lookups = lookups_of(start)
        self.refused = False  # Σ refused a submit: check venues from now on, own share or not

    def run(self) -> None:
        weather, hotel, options = self._look_up()
        restaurants, attractions = self._shared_places(hotel) if self.lookups else self._step_places(hotel)
        early = [
            p for p in restaurants if p.open_min <= BREAKFAST_OPEN_BY and p.close_min >= BREAKFAST_CLOSE_FROM
        ]
        self.breakfast_pool = early[: self.days + 2]
        self.meal_pool = [p for p in restaurants if p not in self.breakfast_pool]
        pools = (self.breakfast_pool, self.meal_pool, attractions)
        self.share = {p.name for pool in pools for p in self._mine(pool)}
        for _ in range(MAX_ATTEMPTS):
            try:
                stops, frame, out, back = self._plan_shared(hotel, options, restaurants, attractions)
            except ExpertFailure as err:  # e.g. the venues left free cannot make a day: bargain
                return self._give_up(str(err), "no_options")
            if self._fit_hint(stops, frame, out, back, restaurants, attractions) is False:
                return
            if self._ask_map(stops, frame):
                continue  # re-plan with MapGuide's times
            if (
                self.claims
                and (self.refused or not self._own(stops))
                and self._claim(stops, restaurants + attractions)
            ):
                continue  # some venue is taken: re-plan without it
            if self._submit(stops, out, back, weather):
                return
        self._give_up("no day that fits the sub-goal after several attempts", "timing")

    def _give_up(self, reason: str, code: str) -> None:
        if not self.can_reject:
            raise ExpertFailure(reason)
        self.s.act(
            f"I cannot meet this sub-goal: {reason}.",
            calls=[tool_call("reject_subgoal", reason=reason, code=code)],
        )

    # -- steps -----------------------------------------------------------------------------------
    def _shared_places(self, hotel: Place) -> tuple[list[Place], list[Place]]:
        """The candidates from the coordinator's searches in the prompt (no search of our own)."""
        restaurants: dict[str, Place] = {}
        attractions: dict[str, Place] = {}
        for name, text in self.lookups:
            if name == "RestaurantSearch":
                self._add_restaurants(text, restaurants)
            elif name == "AttractionSearch":
                self._add_attractions(text, attractions)
        return self._by_distance(hotel, restaurants, attractions)

    def _mine(self, pool: list[Place], day: int | None = None) -> list[Place]:
        """This day's share of a candidate list, by one rule every day applies to the same list:
        every D-th from position day - 1. The shares are disjoint, so a day planned from its own
        share needs no Σ check: no other day can take those venues."""
        return [p for i, p in enumerate(pool) if i % self.days == (day or self.day) - 1]

    def _own(self, stops: list[Stop]) -> bool:
        return all(s.place.name in self.share for s in stops if s.kind in VENUE_KINDS)

    def _look_up(self) -> tuple[dict[str, Any], Place, list[Option]]:
        calls = [tool_call("WeatherSearch", city=self.city, date=self.date, n=1)]
        hotel_name, info = self.goal.get("hotel"), self.goal.get("hotel_info")
        legs = {
            "departure": [(self.origin, self.city, self.date)],
            "return": [(self.city, self.origin, self.date)],
        }
        more, kinds = self._transport_calls(legs.get(self.kind, []))
        mode = self.goal.get("transport_mode")
        think = (
            f"Day {self.day} ({self.kind}) in {self.city} on {self.date}, budget hint {self.hint}: weather"
            + (f", the hotel {hotel_name}" if hotel_name else "")
            + (f" and the {mode or 'train/flight'} of the day." if kinds else ".")
        )
        replies = self.s.act(think, calls=calls + [c for c, k in zip(more, kinds) if not mode or k == mode])
        weather = responses.items(replies[0])[0]
        rest = replies[1:]
        if info:  # the coordinator's hotel, as its search showed it
            lat, lon = responses.coords(info["coords"])
            hotel = Place(
                "hotel", info["name"], lat, lon, 0, 24 * 60, float(info["price_per_night"]), info=info
            )
        else:  # flat: every executor picks the hotel by the same rule, so the nights agree
            none = Option("train", "-", "", "", 0, 0, 0.0)
            hotel = self._step_hotel(none, none)
        kept = [k for k in kinds if not mode or k == mode]
        options = [o for k, t in zip(kept, rest) for o in self._options(k, t)]
        if self.kind == "departure":
            options = sorted(
                (o for o in options if o.same_day_ok(21 * 60, 6 * 60)), key=lambda o: (o.price, o.arrive)
            )
        else:
            options = sorted(
                (o for o in options if o.same_day_ok(23 * 60, 7 * 60)), key=lambda o: (o.price, -o.depart)
            )
        if self.kind in legs and not options:
            raise ExpertFailure("no daytime train or flight in the trip's mode")
        return weather, hotel, options[:4]

    def _frame(self, hotel: Place, option: Option | None) -> DayFrame:
        centre = Place("centre", self.city, hotel.lat, hotel.lon)
        return DayFrame(
            start_place=centre if self.kind == "departure" else hotel,
            arrive=(option.depart, option.arrive) if self.kind == "departure" and option else None,
            depart=(option.depart, option.arrive) if self.kind == "return" and option else None,
            walking_limit=self.walking_limit,
        )

    def _plan_shared(self, hotel, options, restaurants, attractions):
        """Plan from this day's share of the candidates first (every d-th of each list), so that
        parallel days rarely reach for the same venue; the whole lists when the share is too thin."""
        pools = (self.breakfast_pool, self.meal_pool, attractions)
        share = [self._mine(pool) for pool in pools]
        self.breakfast_pool, self.meal_pool = share[0], share[1]
        try:
            return self._plan(hotel, options, restaurants, share[2])
        except ExpertFailure:
            pass
        finally:
            self.breakfast_pool, self.meal_pool = pools[0], pools[1]
        excluded = self.excluded
        self.excluded = excluded | self._predicted(hotel, pools)
        try:  # first around what the other stay days will take from their shares
            return self._plan(hotel, options, restaurants, attractions)
        except ExpertFailure:
            pass
        finally:
            self.excluded = excluded
        return self._plan(hotel, options, restaurants, attractions)

    def _predicted(self, hotel: Place, pools) -> set[str]:
        """The venues the other stay days will plan from their own shares: the same rule, this
        day's leg estimates (days 1 and D are left out: their trains decide their hours)."""
        frame = DayFrame(start_place=hotel, walking_limit=self.walking_limit)
        names: set[str] = set()
        for day in range(2, self.days):
            if day != self.day:
                share = [self._mine(pool, day) for pool in pools]
                self.breakfast_pool, self.meal_pool = share[0], share[1]
                stops = self._plan_day(frame, False, hotel, [], share[2], set())
                names |= {s.place.name for s in stops or [] if s.kind in VENUE_KINDS}
        self.breakfast_pool, self.meal_pool = pools[0], pools[1]
        return names

    def _plan(self, hotel, options, restaurants, attractions):
        for option in options or [None]:
            frame = self._frame(hotel, option)
            stops = self._plan_day(
                frame, self.kind == "departure", hotel, restaurants, attractions, self.excluded
            )
            if stops is not None:
                out = option if self.kind == "departure" else None
                back = option if self.kind == "return" else None
                return stops, frame, out, back
        raise ExpertFailure(f"could not time day {self.day}")

    def _day_cost(self, stops: list[Stop], out: Option | None, back: Option | None) -> float:
        total = sum(o.price * self.people for o in (out, back) if o is not None)
        for s in stops:
            if s.place is not None:
                total += s.place.price * (self.rooms if s.kind == "hotel" else self.people)
        return total

    def _fit_hint(self, stops, frame, out, back, restaurants, attractions) -> bool | None:
        """Swap to cheaper places until within the hint; False when it rejected the sub-goal."""
        if self.hint is None:
            return None
        days = [stops]
        first = 0 if self.kind == "departure" else -1
        mine = [[p for p in pool if p.name in self.share] for pool in (restaurants, attractions)]
        while self._day_cost(days[0], out, back) > self.hint + 1e-6:
            if not (
                self._cheaper_swap(days, [frame], *mine, first, self.excluded)
                or self._cheaper_swap(days, [frame], restaurants, attractions, first, self.excluded)
            ):
                if not self.can_reject:  # nobody to bargain with: the hint is only a hint
                    break
                cost = self._day_cost(days[0], out, back)
                self._give_up(
                    f"the cheapest day I can time costs {cost:.0f} CNY, over the hint {self.hint:.0f}",
                    "budget",
                )
                return False
        stops[:] = days[0]
        return None

    def _ask_map(self, stops: list[Stop], frame: DayFrame) -> bool:
        """MapGuide for legs not asked yet; True when it asked (the day is then re-planned)."""
        pairs: list[tuple[str, str]] = []
        add_new_legs(stops, frame.start_place.name, self.s.legs, pairs)
        if not pairs:
            return False
        calls = map_guide_calls(self.city, pairs)
        replies = self.s.act("Checking the day's local trips with MapGuide.", calls=calls)
        for (a, b), text in zip(pairs, replies):
            self.s.legs[(a, b)] = responses.routes(text)
        return True

    def _claim(self, stops: list[Stop], candidates: list[Place]) -> bool:
        """check_items for each venue not yet seen free; True when some are taken (now excluded).
        Checks reserve nothing, so a day never holds venues it may drop; submit_day commits. After
        a first conflict every candidate is checked at once (a survey), so re-plans are few."""
        # minimal probes, not the full activities: a check only asks whether the venue is free
        todo = [(s.place, self._probe(s.place)) for s in stops if s.kind in VENUE_KINDS]
        if self.excluded:
            todo += [(p, self._probe(p)) for p in candidates]
        seen, calls, places = set(), [], []
        for place, item in todo:
            if place.name not in self.claimed | self.excluded | seen:
                seen.add(place.name)
                calls.append(tool_call("check_items", items=[item]))
                places.append(place)
        if not calls:
            return False
        think = (
            "Some places are taken by other days: checking every candidate against the shared state."
            if self.excluded
            else "Checking the day's restaurants and attractions against the shared state."
        )
        taken = False
        for place, text in zip(places, self.s.act(think, calls=calls)):
            if text.startswith("ok"):
                self.claimed.add(place.name)
            else:
                self.excluded.add(place.name)
                taken = taken or any(s.place is place for s in stops)
        return taken

    def _probe(self, place: Place) -> dict[str, Any]:
        """A minimal activity at `place`, enough for Σ to key and price it."""
        kind = "attraction" if place.kind == "attraction" else "meal"
        item = {"type": kind, "name": place.name, "start_time": "12:00", "end_time": "13:00"}
        if kind == "meal":
            item["meal"] = "lunch"
        return {**item, "price": round(place.price * self.people, 2)}

    def _submit(self, stops, out, back, weather) -> bool:
        acts = [self._activity(s, out, back) for s in stops]
        total = sum(a["price"] for a in acts)
        w = {
            "condition": weather["weather"],
            "max_temp": weather["max_temp"],
            "min_temp": weather["min_temp"],
        }
        info = (
            f"{self.city}, day {self.day} of {self.days}: {weather['weather']}, {weather['min_temp']}-"
            f"{weather['max_temp']} C, air quality {weather['air_quality']}."
        )
        step = self.s.raw(
            turn_text(
                f"Day {self.day} is timed with MapGuide's durations and costs {total:.0f} CNY; submitting.",
                (),
                [tool_call("submit_day", activities=acts, weather=w, city_info=info)],
            )
        )
        reply = step.responses[-1]
        if reply.is_error:
            raise ExpertFailure(f"submit_day refused: {reply.text[:200]}")
        if step.done:
            return True
        if "budget" in reply.text.split(":")[1]:
            self._give_up("the shared budget has no room left for this day", "budget")
            return True
        for s in stops:  # a venue conflict: claim venue by venue next time
            if s.kind in VENUE_KINDS:
                self.claimed.discard(s.place.name)
        self.refused = True  # a day planning beyond its share took a venue of this share first
        return False
