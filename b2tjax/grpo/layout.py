"""How a GRPO step's records, however many there are, become fixed-shape mini-batches.

With multi-stream episodes the number of records per step varies (a HiMAP episode has a
coordinator, one executor per day and a re-planned day per bargaining round). The jitted steps are
compiled per array shape, so every mini-batch is padded to a row count from a small ladder:
the configured mini-batch (`rollout_batch / mini_batches` rows, the size launch/plan.py checks)
times a power of two. Micro-batches keep their configured row count (memory per forward/backward
is what the plan measured); only the number of micro-batches scanned grows. Per sequence-length
bucket the train step therefore compiles at most 1 + log2(largest records per step /
rollout_batch) times, and a step that needs more than the configured rows pads under half of them.

Padding rows are all zero (ids 0, mask 0, advantage 0): `grpo.batch_normaliser` counts only rows
with trained tokens and every token weight is a multiple of the mask, so they change neither the
loss nor the gradient nor any normaliser.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rollout.hosts import agree


def bucket_rows(needed: int, nominal: int) -> int:
    """Smallest `nominal * 2**j` (j >= 0) holding `needed` rows."""
    rows = nominal
    while rows < needed:
        rows *= 2
    return rows


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """Rows of one GRPO step: `records` real rows first, then padding up to `rows`."""

    records: int
    mini_batches: int
    mini_rows: int  # rows per mini-batch, padding included
    micro_rows: int  # rows per micro-batch (divides mini_rows)

    def __post_init__(self):
        if self.records < self.mini_batches:
            raise ValueError(
                f"a step with {self.records} records cannot fill grpo.mini_batches={self.mini_batches}"
            )
        if self.mini_rows * self.mini_batches < self.records or self.mini_rows % self.micro_rows:
            raise ValueError(f"inconsistent row layout {self}")

    @classmethod
    def for_records(cls, records: int, mini_batches: int, nominal_rows: int, micro_rows: int) -> RowLayout:
        """The layout of a step with `records` rows; `nominal_rows` = rollout_batch / mini_batches."""
        needed = agree_on_maximum(-(-records // mini_batches))
        return cls(records, mini_batches, bucket_rows(needed, nominal_rows), micro_rows)

    @property
    def rows(self) -> int:
        return self.mini_batches * self.mini_rows

    @property
    def padded(self) -> int:
        return self.rows - self.records

    @property
    def micro_per_mini(self) -> int:
        return self.mini_rows // self.micro_rows

    def mini_batch_rows(self, order: np.ndarray) -> list[np.ndarray]:
        """Row indices of each mini-batch of an epoch.

        `order` (a permutation of the real records) is dealt into `mini_batches` consecutive parts
        whose sizes differ by at most one, and each part is topped up with padding rows. Records are
        dealt one by one, so the streams of one episode may land in different mini-batches: each
        record's loss depends only on its own tokens and advantage, and every mini-batch has real
        records (records >= mini_batches), so no optimizer step is taken on padding alone.
        """
        padding = iter(range(self.records, self.rows))
        out = []
        for part in np.array_split(np.asarray(order), self.mini_batches):
            fill = [next(padding) for _ in range(self.mini_rows - len(part))]
            out.append(np.concatenate([part, np.asarray(fill, part.dtype)]))
        return out


def agree_on_maximum(value: int) -> int:
    """The largest `value` over all JAX processes: each process passes its own rows, and the global
    batch they form needs one shape everywhere."""
    return int(agree([value]).max())
