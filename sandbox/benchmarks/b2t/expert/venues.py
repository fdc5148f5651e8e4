"""Steps 2 and 3 of the B2T expert (sandbox/benchmarks/b2t/expert/planner.py): a hotel that fits,
then restaurants and attractions around it, all learnt through the search tools' replies."""

from __future__ import annotations

import json
from typing import Any

from sandbox.benchmarks.b2t import geo
from sandbox.benchmarks.b2t.expert import responses
from sandbox.benchmarks.b2t.expert.schedule import Place
from sandbox.benchmarks.b2t.expert.shared import (
    BREAKFAST_CLOSE_FROM,
    BREAKFAST_OPEN_BY,
    HOTEL_BUDGET_SHARE,
    MAX_PLACE_ROUNDS,
    RADIUS_KM,
    SEARCH_N,
    Option,
    hm,
)
from sandbox.expert_session import ExpertFailure, tool_call


def _transport_memory(out: Option, back: Option) -> list[dict[str, Any]]:
    """The memory write that keeps the chosen trains/flights, sent with the first hotel search."""
    return [
        {
            "action": "write",
            "key": "transport",
            "value": {
                "outbound": f"{out.number} {hm(out.depart)}-{hm(out.arrive)} {out.seat} {out.price:g}",
                "return": f"{back.number} {hm(back.depart)}-{hm(back.arrive)} {back.seat} {back.price:g}",
            },
        }
    ]


class VenueSearch:
    """Mixin of the expert's _Solver: the hotel and place searches (state set by _Solver)."""

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
            f"Outbound {out.number} {hm(out.depart)}-{hm(out.arrive)}, return {back.number} "
            f"{hm(back.depart)}-{hm(back.arrive)}: {transport:.0f} CNY for {self.people}. "
            f"A hotel near the centre, at most about {cap:.0f} CNY a night"
            + (f", {json.dumps(prefs, ensure_ascii=False)}" if prefs else "")
            + "."
        )
        memory = _transport_memory(out, back)
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
        restaurants: dict[str, Place] = {}
        attractions: dict[str, Place] = {}
        memory = [
            {
                "action": "write",
                "key": "hotel",
                "value": {"name": hotel.name, "price_per_night": hotel.price, "rooms": self.rooms},
            }
        ]
        anchors = [hotel.name, self.city]
        for round_ in range(MAX_PLACE_ROUNDS):
            if round_ >= len(anchors):
                break
            anchor = anchors[round_]
            think = (
                f"Hotel {hotel.name} ({hotel.price:g} CNY/night). Now restaurants that fit (some open "
                f"for breakfast) and attractions near it, skipping places visited before."
                if round_ == 0
                else f"Not enough options yet; searching around {anchor} too."
            )
            replies = self.s.act(think, memory, self._place_calls(anchor))
            memory = []
            self._collect_places(replies, restaurants, attractions, anchors)
            if self._enough_places(restaurants, attractions):
                break
        self.s.act(
            "Saving the candidate places before timing the days.",
            [
                {"action": "write", "key": "restaurants", "value": sorted(restaurants)[:40]},
                {"action": "write", "key": "attractions", "value": sorted(attractions)[:20]},
            ],
        )
        return self._by_distance(hotel, restaurants, attractions)

    def _place_calls(self, anchor: str) -> list[dict[str, Any]]:
        """One round's searches around `anchor`: restaurants per preferred cuisine (any hours and
        open for breakfast), then attractions (the last call)."""
        dp, ap = self.pref["dining"], self.pref["attraction"]
        calls = []
        for cuisine in dp.get("cuisine_preferences") or [None]:
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
        return calls

    def _collect_places(
        self,
        replies: list[str],
        restaurants: dict[str, Place],
        attractions: dict[str, Place],
        anchors: list[str],
    ) -> None:
        """Add the round's new, not visited places (first seen wins); attractions become anchors."""
        for text in replies[:-1]:
            self._add_restaurants(text, restaurants)
        for name in self._add_attractions(replies[-1], attractions):
            if name not in anchors:
                anchors.append(name)

    def _add_restaurants(self, text: str, restaurants: dict[str, Place]) -> None:
        for r in responses.items(text):
            if r["name"].casefold() not in self.visited["restaurants"]:
                restaurants.setdefault(r["name"], _restaurant(r))

    def _add_attractions(self, text: str, attractions: dict[str, Place]) -> list[str]:
        """Add the reply's fitting attractions; their names, in reply order."""
        names = []
        for r in responses.items(text):
            if (
                r["name"].casefold() not in self.visited["attractions"]
                and r["walking_km"] <= self.walking_limit
            ):
                attractions.setdefault(r["name"], _attraction(r))
                names.append(r["name"])
        return names

    def _by_distance(
        self, hotel: Place, restaurants: dict[str, Place], attractions: dict[str, Place]
    ) -> tuple[list[Place], list[Place]]:
        """The candidates nearest the hotel first (cheap ones a little nearer), as the days use them."""
        near = lambda p: geo.haversine_km(hotel.lat, hotel.lon, p.lat, p.lon)  # noqa: E731
        return (
            sorted(restaurants.values(), key=lambda p: (near(p) + p.price / 40.0, p.name)),
            sorted(attractions.values(), key=lambda p: (near(p) + p.price / 40.0, p.name)),
        )

    def _enough_places(self, restaurants: dict[str, Place], attractions: dict[str, Place]) -> bool:
        """Enough to fill every day: breakfast places, other meals and sights with spares."""
        early = sum(
            1
            for p in restaurants.values()
            if p.open_min <= BREAKFAST_OPEN_BY and p.close_min >= BREAKFAST_CLOSE_FROM
        )
        return (
            len(restaurants) - early >= 2 * self.days + 2
            and early >= self.days + 2
            and len(attractions) >= self.days + 2
        )


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
