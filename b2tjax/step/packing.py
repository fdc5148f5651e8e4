"""Packed training rows: several records back to back in one row of a fixed token budget.

Padding every record to a step's longest spends a third or more of a train step on padding
(docs/TRAINING.md "Packed rows (issue 35)"). Here records are binned first-fit-decreasing into
rows of `capacity` tokens; a row carries `segment_ids` (record k of the row is segment k, 1, 2,
...; 0 = padding) and `token_positions` (0, 1, ... restarting per record), so the model attends
within a record only and each record sees the positions it was sampled at.

Shapes. A row is `capacity` tokens, or wider when a record is longer than the budget (that record
gets a row of its own; the step's rows then take its 64-token bucket). The rows of one optimizer
step are `micro` micro-batches of `rows` rows (`packed_shape`): the fewest micro-batches of at most
`micro_rows` rows, evenly filled, so under one row per micro-batch (per device) is padding. The
step compiles once per (micro, rows) pair a run meets (times the loss-position widths K): the
micro-batch count is at most the padded layout's, and a run's steps pack to a narrow band of row
counts (benchmarks/bench_packing.py counts them: 2-6 shapes over 50 steps).

Everything is a pure function of the records' lengths: every JAX process holds the whole global
batch and packs it alike, so the process count never changes which records share a row.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from b2tjax.step.batch import pad_length


def row_devices(mesh) -> int:
    """Devices a micro-batch's rows are split over (data x fsdp of a jax Mesh); 1 without one."""
    return 1 if mesh is None else mesh.shape["data"] * mesh.shape["fsdp"]


def first_fit_decreasing(lengths: list[int], capacity: int) -> list[list[int]]:
    """Bins of record indices, each holding at most `capacity` tokens (a longer record alone).

    Records are taken longest first (ties by index) and each goes to the first bin it fits in;
    the bins come out in creation order, records in each in placement order. Deterministic."""
    if capacity < 1:
        raise ValueError(f"row capacity must be >= 1 token, got {capacity}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    free: list[int] = []
    for i in order:
        n = lengths[i]
        for b, room in enumerate(free):
            if n <= room:
                bins[b].append(i)
                free[b] -= n
                break
        else:  # a new bin; a record over the budget fills one alone
            bins.append([i])
            free.append(max(capacity - n, 0) if n <= capacity else 0)
    return bins


def packed_shape(rows: int, micro_rows: int, row_devices: int = 1) -> tuple[int, int]:
    """(micro-batches, rows per micro-batch) for `rows` packed rows: as few micro-batches of at most
    `micro_rows` rows as hold them, evenly filled, each a multiple of `row_devices` rows where
    `micro_rows` is (so every device gets rows). Under `row_devices` rows per micro-batch pad."""
    micro = max(1, -(-rows // micro_rows))
    width = -(-rows // micro)
    if micro_rows % row_devices == 0:
        width = -(-width // row_devices) * row_devices
    return micro, width


def balanced_slots(row_tokens: list[int], micro: int, rows: int, row_devices: int = 1) -> list[int]:
    """Slot (micro-batch * rows + row) of each packed row: longest row first to the emptiest group
    with room, a group being one device's share of one micro-batch (`rows / row_devices` rows, when
    that divides), so micro-batches and the devices splitting them get about equal tokens."""
    shards = row_devices if rows % row_devices == 0 else 1
    per_group = rows // shards
    load = np.zeros(micro * shards, np.int64)
    used = np.zeros(micro * shards, np.int64)
    slots = [0] * len(row_tokens)
    for r in sorted(range(len(row_tokens)), key=lambda i: (-row_tokens[i], i)):
        open_groups = np.flatnonzero(used < per_group)
        g = int(open_groups[np.argmin(load[open_groups])])  # argmin: the first of equal loads
        m, shard = divmod(g, shards)
        slots[r] = m * rows + shard * per_group + int(used[g])
        load[g] += row_tokens[r]
        used[g] += 1
    return slots


@dataclasses.dataclass(frozen=True)
class Packing:
    """Where each record lies in a packed [micro * rows, width] array: row, first token, length."""

    row: np.ndarray  # [records] int
    start: np.ndarray  # [records] int
    length: np.ndarray  # [records] int
    micro: int
    rows: int  # per micro-batch
    width: int

    @property
    def total_rows(self) -> int:
        return self.micro * self.rows

    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """(segment_ids, token_positions), int32 [total_rows, width]: record k of a row (in start
        order) is segment k (from 1), positions count from 0 in each; padding 0 and 0."""
        seg = np.zeros((self.total_rows, self.width), np.int32)
        pos = np.zeros((self.total_rows, self.width), np.int32)
        count: dict[int, int] = {}
        for i in np.lexsort((self.start, self.row)):  # by row, then start
            r, s, n = int(self.row[i]), int(self.start[i]), int(self.length[i])
            count[r] = count.get(r, 0) + 1
            seg[r, s : s + n] = count[r]
            pos[r, s : s + n] = np.arange(n, dtype=np.int32)
        return seg, pos

    def place(self, values: list, dtype, fill=0) -> np.ndarray:
        """Per-record 1-D sequences (record i: `length[i]` entries; a scalar is spread over its
        tokens) -> [total_rows, width] array."""
        out = np.full((self.total_rows, self.width), fill, dtype)
        for i, v in enumerate(values):
            r, s, n = int(self.row[i]), int(self.start[i]), int(self.length[i])
            out[r, s : s + n] = np.asarray(v, dtype)[:n] if np.ndim(v) else v
        return out

    def take(self, packed: np.ndarray, i: int) -> np.ndarray:
        """Record i's entries of a [total_rows, width] array."""
        s = int(self.start[i])
        return packed[int(self.row[i]), s : s + int(self.length[i])]

    def tokens_computed(self) -> int:
        return self.total_rows * self.width


def pack_records(
    lengths: list[int], capacity: int, micro_rows: int, row_devices: int = 1, width: int | None = None
) -> Packing:
    """Records of `lengths` tokens packed into rows of `capacity` (FFD), the rows balanced over
    micro-batches and devices (`balanced_slots`). `width` (>= every row's need) fixes the row
    length, e.g. one agreed over processes; by default `capacity`, or the longest record's
    64-token bucket when a record is longer."""
    bins = first_fit_decreasing(lengths, capacity)
    width = pad_length(max([capacity, *lengths])) if width is None else width
    if width < max([0] + list(lengths)):
        raise ValueError(f"row width {width} is shorter than a record of {max(lengths)} tokens")
    micro, rows = packed_shape(len(bins), micro_rows, row_devices)
    slots = balanced_slots([sum(lengths[i] for i in b) for b in bins], micro, rows, row_devices)
    row = np.zeros(len(lengths), np.int64)
    start = np.zeros(len(lengths), np.int64)
    for b, members in enumerate(bins):
        offset = 0
        for i in members:
            row[i], start[i] = slots[b], offset
            offset += lengths[i]
    return Packing(row, start, np.asarray(lengths, np.int64), micro, rows, width)
