"""Natural-language travel requests: what the user says, never what they prefer.

An instruction states origin, destination, dates, duration, party size and budget, in one of
several phrasings (English by default, Chinese as an option). Preferences are left for the agent
to infer from the behavior trajectory, as in the paper's implicit instructions.
"""

import datetime as dt
import random
from typing import Any

LANGUAGES = ("en", "zh")

_EN_PARTY = {
    1: ("on my own", "solo", "by myself"),
    2: ("for two", "with my partner", "for the two of us"),
    3: ("for three", "for three of us", "with two friends"),
    4: ("for four", "with my family of four", "for a group of four"),
}
_EN_TEMPLATES = (
    "I'm planning a {days}-day trip from {origin} to {destination} {party}, from {start} to {end}. "
    "My budget is {budget} CNY in total. Could you make a travel plan for me?",
    "Please plan a {days}-day trip to {destination} {party}, leaving {origin} on {start} and "
    "coming back on {end}. We can spend up to {budget} CNY.",
    "Help me arrange a trip from {origin} to {destination}: {days} days ({start} - {end}), "
    "{people_text}, total budget {budget} CNY.",
    "We'd like to visit {destination} from {start} to {end} ({days} days), departing from "
    "{origin}, {people_text}. Budget: {budget} CNY. What would you suggest?",
    "Can you put together an itinerary for {days} days in {destination}? I'm travelling "
    "{party} from {origin}, {start} to {end}, with at most {budget} CNY to spend.",
)
_EN_PEOPLE = {1: "1 traveller", 2: "2 travellers", 3: "3 travellers", 4: "4 travellers"}

_ZH_PARTY = {1: "一个人", 2: "两个人", 3: "三个人", 4: "四个人"}
_ZH_TEMPLATES = (
    "我计划{start}从{origin}出发去{destination}玩{days}天，{end}返回，{party}，预算{budget}元，"
    "帮我做一份旅行计划吧。",
    "{party}从{origin}去{destination}，{start}到{end}，共{days}天，总预算{budget}元，请帮我规划行程。",
    "想在{start}至{end}去{destination}旅行{days}天，从{origin}出发，{party}，预算不超过{budget}元。",
)


def _en_date(d: dt.date) -> str:
    return f"{d.strftime('%B')} {d.day}, {d.year}"


def _zh_date(d: dt.date) -> str:
    return f"{d.year}年{d.month}月{d.day}日"


def make_instruction(
    rng: random.Random, query: dict[str, Any], city_zh: dict[str, str], language: str = "en"
) -> str:
    """One request for `query` (origin, destination, start_date, days, people, budget)."""
    start = dt.date.fromisoformat(query["start_date"])
    end = start + dt.timedelta(days=query["days"] - 1)
    people = query["people"]
    if people not in _EN_PARTY:
        raise ValueError(f"party size must be 1-4, got {people}")
    if language == "en":
        return rng.choice(_EN_TEMPLATES).format(
            days=query["days"],
            origin=query["origin"],
            destination=query["destination"],
            party=rng.choice(_EN_PARTY[people]),
            people_text=_EN_PEOPLE[people],
            start=_en_date(start),
            end=_en_date(end),
            budget=f"{query['budget']:,}",
        )
    if language == "zh":
        return rng.choice(_ZH_TEMPLATES).format(
            days=query["days"],
            origin=city_zh.get(query["origin"], query["origin"]),
            destination=city_zh.get(query["destination"], query["destination"]),
            party=_ZH_PARTY[people],
            start=_zh_date(start),
            end=_zh_date(end),
            budget=query["budget"],
        )
    raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
