"""Format (1 constraint): the answer is a plan with the trip's shape.

The reader (`sandbox.benchmarks.b2t.plan.read_plan`) already guarantees a list of day objects whose activities
have a known type and valid times; this check adds what needs the query: one day object per trip
day, numbered 1..N in order, and stated dates that are the trip's dates. A plan failing it is not
delivered, and every other constraint then fails too (TravelPlanner convention, R_format = 0).
"""

from __future__ import annotations

from sandbox.benchmarks.b2t.evaluator.context import EvalContext
from sandbox.benchmarks.b2t.evaluator.registry import constraint


@constraint(
    "json_format",
    "Format",
    "Valid JSON plan: a list of day objects (one per trip day, numbered 1..N, the trip's "
    "dates) whose activities have a known type and HH:MM start/end times.",
)
def json_format(ctx: EvalContext) -> list[str]:
    out = []
    days = ctx.plan.days
    if ctx.query.days is not None and len(days) != ctx.query.days:
        out.append(f"plan has {len(days)} day(s) but the trip lasts {ctx.query.days}")
    for position, day in enumerate(days, start=1):
        if day.number != position:
            out.append(f"day object {position} is numbered {day.number} (expected {position})")
        expected = ctx.query.date_of(position)
        if day.date is not None and expected is not None and day.date != expected:
            out.append(f"day {position} date {day.date!r} is not the trip date {expected}")
    return out
