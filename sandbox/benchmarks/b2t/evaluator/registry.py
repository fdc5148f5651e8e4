"""The registry of the 32 named constraints (SPEC.md section 5, paper Table 8).

A check is a function of an `EvalContext` that returns the list of violations it found, each a
short sentence naming the day and the activity at fault; an empty list is a pass. Each category
module registers its checks with `@constraint`; `CONSTRAINTS` holds them in the paper's order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

CATEGORIES = ("Format", "Authenticity", "Reasonableness", "Information richness", "Personalization")
GROUP_OF_CATEGORY = {
    "Format": "C",
    "Authenticity": "C",
    "Reasonableness": "C",
    "Information richness": "C",
    "Personalization": "UPC",
}
# How many violations a reason spells out before summarising the rest.
MAX_REASONS = 3


@dataclass(frozen=True)
class Constraint:
    name: str
    description: str
    category: str
    group: str  # "C" | "UPC"
    check: Callable[..., list[str]]


@dataclass(frozen=True)
class ConstraintResult:
    name: str
    category: str
    group: str
    passed: bool
    reason: str  # "" when passed


_REGISTRY: list[Constraint] = []


def constraint(name: str, category: str, description: str):
    """Register a check under a unique name in a category."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}")

    def register(check: Callable[..., list[str]]) -> Callable[..., list[str]]:
        if any(c.name == name for c in _REGISTRY):
            raise ValueError(f"constraint {name!r} registered twice")
        _REGISTRY.append(Constraint(name, description, category, GROUP_OF_CATEGORY[category], check))
        return check

    return register


def summarize(violations: list[str]) -> str:
    if len(violations) <= MAX_REASONS:
        return "; ".join(violations)
    return "; ".join(violations[:MAX_REASONS]) + f" (+{len(violations) - MAX_REASONS} more)"


def registered() -> list[Constraint]:
    return list(_REGISTRY)
