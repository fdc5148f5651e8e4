"""HiMAP-Travel: a coordinator splits a trip into days, one executor plans each day, and the
synchronized global state Σ (`state.GlobalState`) keeps the parallel days jointly valid: one budget,
no venue twice, one intercity mode. Each benchmark supplies its `Pricing` (in its
folder's himap/pricing.py) so that Σ's spend is exactly what that benchmark's evaluator counts."""

from sandbox.himap.state import (
    BadItem,
    GlobalState,
    ModeForbidden,
    Pricing,
    SigmaCode,
    SigmaEvent,
    SigmaVerdict,
    UnknownPlace,
)

__all__ = [
    "BadItem",
    "GlobalState",
    "ModeForbidden",
    "Pricing",
    "SigmaCode",
    "SigmaEvent",
    "SigmaVerdict",
    "UnknownPlace",
]
