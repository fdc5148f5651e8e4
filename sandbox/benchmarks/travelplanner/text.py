"""How the official evaluation reads the texts of a plan: "Name, City", "from A to B", "(State)".

These rules decide verdicts, so they follow the official reading exactly, including its corners
(a "(State)" suffix leaves the space before it in place, a name is cut at the LAST comma). Like the
official code they raise TypeError on a value that is not a string; the evaluator turns that into
`official_raises`.
"""

import re
from typing import Any

# "from A to B": A is the shortest text before a whitespace-delimited "to", B runs to the next comma.
_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)")
# "Name, City": Name is everything before the last comma (on one line), City the rest.
_NAME_CITY = re.compile(r"(.*?),\s*([^,]+)$")


def before_parenthesis(text: str) -> str:
    """Text before the first "(" that a ")" follows ("Rockford (Illinois)" -> "Rockford ").

    The space before "(" is kept, as the official reading keeps it; a "(" after a line break does
    not count (the official pattern does not cross lines)."""
    if not isinstance(text, str):
        raise TypeError(f"expected a string, got {type(text).__name__}")
    start = text.find("(")
    if start < 0 or "\n" in text[:start] or ")" not in text[start + 1 :]:
        return text
    return text[:start]


def from_to(text: Any) -> tuple[str, str] | tuple[None, None]:
    """(A, B) of the first "from A to B" in `text`, or (None, None)."""
    match = _FROM_TO.search(text)
    return (match.group(1), match.group(2)) if match else (None, None)


def name_and_city(item: Any) -> tuple[str, str]:
    """("Name", "City") of "Name, City (State)"; ("-", "-") when there is no comma to split at."""
    match = _NAME_CITY.search(item)
    if not match:
        return "-", "-"
    return match.group(1).strip(), before_parenthesis(match.group(2).strip()).strip()


def same_place_key(item: str) -> tuple[str, str]:
    """What strict mode compares to tell two items apart: name and city, each with its whitespace
    collapsed and case folded (as B2T compares names), so "Cafe X , Paris" repeats "Cafe X, Paris"."""
    name, city = name_and_city(item)
    if name == "-" and city == "-":
        name, city = item, ""
    return " ".join(name.split()).casefold(), " ".join(city.split()).casefold()


def attraction_items(text: str, strict: bool) -> list[str]:
    """Items of an attraction field "A, City;B, City;".

    Official: split on ";" and drop the part after the last ";" (an item without a trailing ";" is
    never seen). Strict: every non-blank part."""
    parts = text.split(";")
    return [p for p in parts if p.strip()] if strict else parts[:-1]


def transport_mode(text: str) -> str | None:
    """ "Taxi", "Self-driving" or "Flight" by case-insensitive search in that order; None otherwise."""
    lowered = text.lower()
    for needle, mode in (("taxi", "Taxi"), ("self-driving", "Self-driving"), ("flight", "Flight")):
        if needle in lowered:
            return mode
    return None


def is_filled(value: Any) -> bool:
    """A plan field counts as given when it is truthy and not "-" (the official test)."""
    return bool(value) and value != "-"


def flight_number(text: str) -> str:
    """The flight number after "Flight Number: " (IndexError without that exact prefix, as officially)."""
    return text.split("Flight Number: ")[1].split(",")[0]


def plan_names(plan: Any) -> list[str]:
    """The flight numbers, meals, attractions and stays a plan names (each item's name before its
    city), from its day rows; rows or fields of another shape name nothing."""
    names = set()
    for day in plan if isinstance(plan, list) else []:
        if not isinstance(day, dict):
            continue
        transport = str(day.get("transportation") or "")
        if "Flight Number: " in transport:
            names.add(flight_number(transport))
        items = [str(day.get(k) or "") for k in ("breakfast", "lunch", "dinner", "accommodation")]
        items += attraction_items(str(day.get("attraction") or ""), strict=True)
        names.update(name for name, _ in map(name_and_city, items) if is_filled(name))
    return sorted(names)
