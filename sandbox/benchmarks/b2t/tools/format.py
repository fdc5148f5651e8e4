"""Compact rendering of tool results under a character budget.

The agent's context is precious: a response is one header line and one compact JSON object per
result, and results stop before the budget is exceeded with a note on how many were left out.
"""

import json
from typing import Any

RESPONSE_CHAR_BUDGET = 5000  # ~1.3k tokens: room for about 15 POIs


def compact_json(obj: Any) -> str:
    """One-line JSON that keeps non-ASCII names readable (and short) for the agent."""
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def render(header: str, items: list[dict[str, Any]], budget: int = RESPONSE_CHAR_BUDGET) -> str:
    """Header, then items one per line while the total stays within `budget` characters."""
    lines = [header]
    used = len(header)
    for k, item in enumerate(items):
        line = compact_json(item)
        if used + 1 + len(line) > budget and k > 0:
            lines.append(
                f"... {len(items) - k} more result(s) omitted to fit the response limit; "
                f"lower n or narrow the search."
            )
            break
        lines.append(line)
        used += 1 + len(line)
    return "\n".join(lines)


def coords(lat: float, lon: float) -> str:
    """ "lat,lon" to 5 decimals (about 1 m): the form MapGuide and `near` accept back."""
    return f"{lat:.5f},{lon:.5f}"


def price(value: float) -> float | int:
    """Whole-yuan prices print without a trailing .0."""
    return int(value) if float(value).is_integer() else round(value, 1)
