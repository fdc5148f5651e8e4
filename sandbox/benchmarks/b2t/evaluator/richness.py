"""Information richness (2 constraints): the plan tells the traveller enough to follow it."""

from __future__ import annotations

from sandbox.benchmarks.b2t.evaluator.context import EvalContext
from sandbox.benchmarks.b2t.evaluator.registry import constraint
from sandbox.benchmarks.b2t.plan import LOCAL_TYPES, MEALS, Activity

# "Extra details where possible": this share of the meals, attractions, entertainment and hotel
# check-ins carry a description or tips of at least MIN_DETAIL_CHARS characters.
MIN_DETAIL_SHARE = 0.8
MIN_DETAIL_CHARS = 10
_INTERCITY_FIELDS = ("mode", "number", "from_city", "to_city", "seat_class")


def missing_fields(act: Activity) -> list[str]:
    """The required fields an activity lacks (or gives with an unusable value)."""
    missing = [] if act.price is not None else ["price"]
    if act.type == "intercity_transport":
        return missing + [f for f in _INTERCITY_FIELDS if getattr(act, f) is None]
    if not act.name:
        missing.append("name")
    if act.type == "meal" and act.meal not in MEALS:
        missing.append("meal (breakfast/lunch/dinner)")
    if act.transport is None:
        missing.append("transport")
    else:
        missing += [
            f"transport.{f}"
            for f in ("mode", "duration_min", "distance_km")
            if getattr(act.transport, f) is None
        ]
    return missing


@constraint(
    "information_sufficiency",
    "Information richness",
    "Every day has its date and city; every activity has all required fields of its "
    "type (name, price, transport, meal, number, cities, seat class).",
)
def information_sufficiency(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        day = view.day
        for key in ("date", "city"):
            if getattr(day, key) is None:
                out.append(f"day {day.number}: missing {key}")
        for act in day.activities:
            missing = missing_fields(act)
            if missing:
                out.append(f"day {day.number} {act.label}: missing {', '.join(missing)}")
    return out


def _has_details(act: Activity) -> bool:
    return any(text and len(text.strip()) >= MIN_DETAIL_CHARS for text in (act.description, act.tips))


@constraint(
    "information_richness",
    "Information richness",
    "At least 80% of meals, attractions, entertainment and hotels carry a description "
    "or tips (>= 10 characters).",
)
def information_richness(ctx: EvalContext) -> list[str]:
    acts = [(view.day.number, a) for view in ctx.days for a in view.day.activities if a.type in LOCAL_TYPES]
    bare = [f"day {d} {a.label}" for d, a in acts if not _has_details(a)]
    if not acts or len(bare) <= (1 - MIN_DETAIL_SHARE) * len(acts) + 1e-9:
        return []
    return [
        f"{len(acts) - len(bare)} of {len(acts)} activities have a description or tips "
        f"(need {MIN_DETAIL_SHARE:.0%}); without: "
        + ", ".join(bare[:3])
        + (f" (+{len(bare) - 3} more)" if len(bare) > 3 else "")
    ]
