"""Load and validate benchmark instances: generated ones or user-supplied real logs.

Files (docs/ARCHITECTURE.md, "Data directory"): `instances/{split}.jsonl` (what the agent sees:
id, instruction, trajectory) and `ground_truth/{split}.jsonl` (hidden: id, query, profile). A
user with real behavior logs writes the same two files; every problem is reported with the file,
line and field at fault, before any long job starts.
"""

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.benchmarks.b2t import vocab
from sandbox.benchmarks.b2t.instances.profiles import CATEGORIES, constrained_categories, empty_history
from sandbox.jsonl import read_jsonl_objects

ACTIONS = ("click", "add_to_favorites", "book")
_QUERY_FIELDS = {
    "origin": str,
    "destination": str,
    "start_date": str,
    "days": int,
    "people": int,
    "budget": (int, float),
}
# Allowed values of each profile attribute; list-valued attributes are marked.
_ATTRIBUTES: dict[str, dict[str, tuple[tuple[str, ...], bool]]] = {
    "hotel": {
        "star_requirement": (vocab.STAR_LEVELS, True),
        "essential_facilities": (vocab.HOTEL_FACILITIES, True),
    },
    "attraction": {
        "preferred_attraction_types": (vocab.ATTRACTION_TYPES, True),
        "walking_tolerance": (vocab.WALKING_TOLERANCE, False),
    },
    "dining": {
        "cuisine_preferences": (vocab.CUISINES, True),
        "price_level": (vocab.PRICE_LEVELS, False),
        "dining_environment": (vocab.DINING_ENVIRONMENTS, True),
    },
    "transportation": {
        "intercity_transport": (vocab.INTERCITY_MODES, False),
        "intracity_transport": (vocab.INTRACITY_MODES, False),
        "seat_class": (vocab.SEAT_CLASSES, False),
    },
}


class InstanceFormatError(ValueError):
    """An instance file does not follow the documented format."""


@dataclass
class LoadedInstance:
    visible: dict[str, Any]
    hidden: dict[str, Any]

    @property
    def id(self) -> str:
        return self.visible["id"]


def load_split(
    data_dir: str | Path, split: str, cities: Iterable[str] | None = None, with_ground_truth: bool = True
) -> list[LoadedInstance]:
    """Read and validate a split; `cities` (if given) are the store's city names."""
    data_dir = Path(data_dir)
    visible_path = data_dir / "instances" / f"{split}.jsonl"
    visible = [normalize_visible(obj, f"{visible_path}:{n}") for n, obj in _read(visible_path)]
    ids = [v["id"] for v in visible]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InstanceFormatError(f"{visible_path}: id {dup!r} appears more than once")
    if not with_ground_truth:
        return [LoadedInstance(v, {}) for v in visible]
    truth_path = data_dir / "ground_truth" / f"{split}.jsonl"
    known = set(cities) if cities is not None else None
    hidden, lines = {}, {}
    for n, obj in _read(truth_path):
        h = normalize_hidden(obj, f"{truth_path}:{n}", known)
        if h["id"] in hidden:  # last-wins would let a stale or planted line replace the real one
            raise InstanceFormatError(
                f"{truth_path}:{n}: id {h['id']!r} appears again (first on line {lines[h['id']]})"
            )
        hidden[h["id"]], lines[h["id"]] = h, n
    missing = [i for i in ids if i not in hidden]
    if missing:
        raise InstanceFormatError(
            f"{truth_path}: no ground truth for {len(missing)} instance(s), e.g. {missing[0]!r}"
        )
    out = []
    for v in visible:
        h = hidden[v["id"]]
        if v["difficulty"] is None:
            v["difficulty"] = difficulty_of(h["profile"])
        out.append(LoadedInstance(v, h))
    return out


def difficulty_of(profile: dict[str, Any]) -> str:
    """Difficulty implied by how many preference categories a profile constrains."""
    n = len(constrained_categories(profile))
    return "easy" if n <= 1 else "hard" if n == len(CATEGORIES) else "medium"


def _read(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise InstanceFormatError(f"{path} not found")
    return read_jsonl_objects(path, InstanceFormatError)


def _fail(where: str, message: str) -> None:
    raise InstanceFormatError(f"{where}: {message}")


def normalize_visible(obj: Any, where: str) -> dict[str, Any]:
    """Check one visible instance; fills `split`/`difficulty` with None when absent."""
    if not isinstance(obj, dict):
        _fail(where, "instance must be a JSON object")
    for key in ("id", "instruction"):
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            _fail(where, f"'{key}' must be a non-empty string")
    trajectory = obj.get("trajectory")
    if not isinstance(trajectory, list):
        _fail(where, "'trajectory' must be a list of events")
    previous = ""
    for i, event in enumerate(trajectory):
        at = f"{where} trajectory[{i}]"
        if not isinstance(event, dict):
            _fail(at, "event must be an object")
        if event.get("action") not in ACTIONS:
            _fail(at, f"'action' must be one of {ACTIONS}, got {event.get('action')!r}")
        for key in ("poi_id", "poi_name", "poi_type"):
            if not isinstance(event.get(key), str) or not event[key]:
                _fail(at, f"'{key}' must be a non-empty string")
        stamp = event.get("timestamp")
        if not isinstance(stamp, str) or not _is_timestamp(stamp):
            _fail(at, f"'timestamp' must be 'YYYY-MM-DD HH:MM', got {stamp!r}")
        if stamp < previous:
            _fail(at, f"timestamps must not decrease ({stamp} after {previous})")
        previous = stamp
        if "details" in event and not isinstance(event["details"], dict):
            _fail(at, "'details' must be an object")
    difficulty = obj.get("difficulty")
    if difficulty is not None and difficulty not in ("easy", "medium", "hard"):
        _fail(where, f"'difficulty' must be easy, medium or hard, got {difficulty!r}")
    return {**obj, "split": obj.get("split"), "difficulty": difficulty}


def _is_timestamp(text: str) -> bool:
    for fmt in ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            dt.datetime.strptime(text, fmt)
            return True
        except ValueError:
            pass
    return False


def normalize_hidden(obj: Any, where: str, cities: set[str] | None = None) -> dict[str, Any]:
    """Check one ground-truth record; absent categories become null, absent history empty."""
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        _fail(where, "ground truth must be an object with a string 'id'")
    query = obj.get("query")
    if not isinstance(query, dict):
        _fail(where, "'query' must be an object")
    for key, kind in _QUERY_FIELDS.items():
        value = query.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            _fail(where, f"query '{key}' is missing or not a {getattr(kind, '__name__', 'number')}")
    try:
        dt.date.fromisoformat(query["start_date"])
    except ValueError:
        _fail(where, f"query 'start_date' must be YYYY-MM-DD, got {query['start_date']!r}")
    if query["days"] < 1 or query["people"] < 1 or query["budget"] <= 0:
        _fail(where, "query days, people and budget must be positive")
    if cities is not None:
        for key in ("origin", "destination"):
            if query[key] not in cities:
                _fail(where, f"query {key} {query[key]!r} is not a city of the store")
    profile = obj.get("profile")
    if not isinstance(profile, dict):
        _fail(where, "'profile' must be an object")
    clean: dict[str, Any] = {}
    for category, attributes in _ATTRIBUTES.items():
        pref = profile.get(category)
        if pref is None:
            clean[category] = None
            continue
        if not isinstance(pref, dict):
            _fail(where, f"profile '{category}' must be an object or null")
        for attr, value in pref.items():
            if attr not in attributes:
                _fail(where, f"profile '{category}' has unknown attribute {attr!r}")
            allowed, is_list = attributes[attr]
            values = value if is_list and isinstance(value, list) else [value]
            if value is None:
                continue
            if is_list != isinstance(value, list):
                _fail(where, f"profile {category}.{attr} must be {'a list' if is_list else 'a string'}")
            bad = [v for v in values if v not in allowed]
            if bad:
                _fail(where, f"profile {category}.{attr} has unknown value {bad[0]!r}")
        clean[category] = dict(pref)
    history = profile.get("history") or {}
    if not isinstance(history, dict):
        _fail(where, "profile 'history' must be an object")
    clean["history"] = empty_history()
    for key, names in history.items():
        if key not in clean["history"]:
            _fail(where, f"profile history has unknown list {key!r}")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            _fail(where, f"profile history.{key} must be a list of names")
        clean["history"][key] = list(names)
    return {**obj, "profile": clean}
