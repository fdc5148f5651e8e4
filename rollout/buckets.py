"""The one power-of-two bucketer: every static shape the rollout compiles for (prefill width and
row count, decode segment length, teacher-forced width) is rounded up with it, so a run meets a
handful of shapes and compiles each once."""

from __future__ import annotations


def pow2_bucket(n: int, floor: int = 16) -> int:
    """Smallest power of two >= max(n, floor, 1)."""
    size = 1
    while size < max(n, floor):
        size *= 2
    return size
