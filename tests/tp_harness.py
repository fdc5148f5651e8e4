"""The official TravelPlanner evaluation harness as a test oracle.

Lays out `../shared/reference/travelplanner_harness` in a temporary folder as its README says (code
folders linked, the database files under `database/<kind>/`), imports its two evaluation modules once
per session, and answers `verdicts(query, plan)` exactly as `evaluation/eval.py` combines them. Tests
skip with a clear reason where `../shared` (or pandas) is absent.
"""

import contextlib
import importlib
import io
import os
import shutil
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sandbox.benchmarks.travelplanner.database import PACKAGE_DATA_DIR

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
HARNESS_DIR = SHARED / "reference" / "travelplanner_harness"
DATA_DIR = PACKAGE_DATA_DIR  # the public data shipped with the package
DATABASE_DIR = DATA_DIR / "database"

_LAYOUT = {
    "accommodations/clean_accommodations_2022.csv": "clean_accommodations_2022.csv",
    "attractions/attractions.csv": "attractions.csv",
    "restaurants/clean_restaurant_2022.csv": "clean_restaurant_2022.csv",
    "googleDistanceMatrix/distance.csv": "distance.csv",
    "flights/clean_Flights_2022.csv": "clean_Flights_2022.csv",
    "background/citySet_with_states.txt": "citySet_with_states.txt",
}


def require_shared() -> None:
    """Skip the calling test when the official harness is not beside the checkout (../shared)."""
    if not HARNESS_DIR.is_dir():
        pytest.skip(f"the official TravelPlanner harness is not at {HARNESS_DIR} (the ../shared folder)")


class HarnessRaised(Exception):
    """The official harness raised on this plan."""


@dataclass(frozen=True)
class Verdicts:
    commonsense: dict[str, bool | None]
    hard: dict[str, bool | None] | None


def _plain(verdict: Any) -> bool | None:
    return None if verdict is None else bool(verdict)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


# Per harness table object: the columns holding the city names its lookups filter on.
_CITY_COLUMNS = {
    "accommodation": ("city",),
    "restaurants": ("City",),
    "attractions": ("City",),
    "googleDistanceMatrix": ("origin", "destination"),
}


class Harness:
    """The imported official modules; `verdicts` mirrors evaluation/eval.py for one plan."""

    def __init__(self, commonsense: types.ModuleType, hard: types.ModuleType):
        self._modules = (commonsense, hard)
        self._full = {
            (m.__name__, name): getattr(m, name).data for m in self._modules for name in _CITY_COLUMNS
        }
        # Row positions of each city per table (for a route: of each pair), in file order.
        self._positions: dict[tuple[str, str], dict[Any, np.ndarray]] = {}
        for key, frame in self._full.items():
            columns = list(_CITY_COLUMNS[key[1]])
            groups = frame.reset_index(drop=True).groupby(columns, sort=False).indices
            self._positions[key] = {k if isinstance(k, tuple) else (k,): v for k, v in groups.items()}
        self._cities = sorted({city for groups in self._positions.values() for k in groups for city in k})

    @contextlib.contextmanager
    def _narrowed(self, plan: Any) -> Iterator[None]:
        """Keep only the table rows of cities whose name occurs in the plan's texts.

        Every harness lookup of a place or route filters on a city taken from a plan text (a
        substring of it), so rows of other cities can never match and the order of the kept rows is
        the file order: the verdicts are unchanged and the pandas scans get ~100x shorter. Flights
        (313 rows) are kept whole: their cost lookup is by number only."""
        text = "\n".join(_strings(plan))
        cities = {city for city in self._cities if city in text}
        try:
            for key, frame in self._full.items():
                chosen = [pos for k, pos in self._positions[key].items() if set(k) <= cities]
                rows = np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=int)
                self._table(key).data = frame.iloc[rows]
            yield
        finally:
            for key, frame in self._full.items():
                self._table(key).data = frame

    def _table(self, key: tuple[str, str]) -> Any:
        module = next(m for m in self._modules if m.__name__ == key[0])
        return getattr(module, key[1])

    def verdicts(self, query: dict, plan: list, narrow: bool = True) -> Verdicts:
        """Official verdicts of a delivered plan; HarnessRaised where the harness raises.
        `narrow` speeds the lookups up without changing a verdict (see `_narrowed`)."""
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                self._narrowed(plan) if narrow else contextlib.nullcontext(),
            ):
                box = self._modules[0].evaluation(query, plan)
                hard = None
                if box["is_not_absent"][0] and box["is_valid_information_in_sandbox"][0]:
                    hard = self._modules[1].evaluation(query, plan)
        except Exception as err:
            raise HarnessRaised(f"{type(err).__name__}: {err}") from err
        common = {k: _plain(v[0]) for k, v in box.items()}
        # A hard check may return a bare None instead of a tuple (cuisine listed twice).
        hard_out = (
            None
            if hard is None
            else {k: _plain(v[0] if isinstance(v, tuple) else v) for k, v in hard.items()}
        )
        return Verdicts(common, hard_out)


def _lay_out(root: Path) -> None:
    # evaluation/ is copied, not linked: its modules chdir to their own folder and open
    # "../database", which must resolve inside `root`.
    shutil.copytree(HARNESS_DIR / "evaluation", root / "evaluation")
    for folder in ("utils", "tools"):
        (root / folder).symlink_to(HARNESS_DIR / folder, target_is_directory=True)
    for target, source in _LAYOUT.items():
        path = root / "database" / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(DATABASE_DIR / source)


def load_harness(root: Path) -> Harness:
    """Import the harness from a fresh layout in `root` (the import changes directory: restored)."""
    require_shared()
    pytest.importorskip("pandas", reason="the official harness needs pandas (test extra)")
    _lay_out(root)
    sys.modules.setdefault("gradio", types.ModuleType("gradio"))  # utils/func.py imports it
    cwd, path, known = os.getcwd(), list(sys.path), set(sys.modules)
    sys.path[:0] = [str(root), str(root / "evaluation")]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            commonsense = importlib.import_module("commonsense_constraint")
            hard = importlib.import_module("hard_constraint")
    finally:
        os.chdir(cwd)
        sys.path[:] = path
        # Its generic top-level names (utils, tools, ...) must not shadow anything imported later.
        for name in set(sys.modules) - known:
            if name.split(".")[0] in ("utils", "tools", "commonsense_constraint", "hard_constraint"):
                del sys.modules[name]
    return Harness(commonsense, hard)


@pytest.fixture(scope="session")
def tp_harness(tmp_path_factory: pytest.TempPathFactory) -> Harness:
    """The official harness, imported once per test session."""
    return load_harness(tmp_path_factory.mktemp("tp_harness"))
