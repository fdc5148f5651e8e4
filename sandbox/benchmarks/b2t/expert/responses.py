"""Reading the tools' text replies back into records: the expert learns only what the agent sees.

Search tools answer with one header line and one compact JSON object per result
(sandbox/benchmarks/b2t/tools/format.py); MapGuide answers with one JSON object per mode.
"""

import json
from typing import Any


def items(text: str) -> list[dict[str, Any]]:
    """The JSON object lines of a tool reply (header and notes skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def minutes(hhmm: str) -> int:
    """ "HH:MM" (optionally followed by more text) -> minutes after midnight."""
    hours, mins = hhmm.strip()[:5].split(":")
    return int(hours) * 60 + int(mins)


def hours(text: str) -> tuple[int, int]:
    """ "HH:MM-HH:MM" -> (open, close) minutes; a close at or before the open wraps past midnight."""
    start, _, end = text.partition("-")
    open_min, close_min = minutes(start), minutes(end)
    return open_min, close_min if close_min > open_min else 24 * 60


def coords(text: str) -> tuple[float, float]:
    """A result's "lat,lon" text (sandbox/benchmarks/b2t/tools/format.py) -> (lat, lon)."""
    lat, lon = text.split(",")
    return float(lat), float(lon)


def routes(text: str) -> dict[str, tuple[int, float]]:
    """MapGuide reply -> {mode: (duration_min, distance_km)}."""
    return {
        r["mode"]: (int(r["duration_min"]), float(r["distance_km"]))
        for r in items(text)
        if "mode" in r and "duration_min" in r
    }
