"""Packed training rows: several records back to back in one row of a fixed token budget.

Padding every record to a step's longest spends a third or more of a train step on padding
(docs/concepts/grpo.md, "Batches"). Here records are binned first-fit-decreasing into
rows of `capacity` tokens; a row carries `segment_ids` (record k of the row is segment k, 1, 2,
...; 0 = padding) and `token_positions` (0, 1, ... restarting per record), so the model attends
within a record only and each record sees the positions it was sampled at.

Shapes: a few, decided once per run (`RowPolicy.shapes`), so one set of programs serves a whole
run: on a TPU at 8B every new shape is minutes of recompiling the whole update. Rows as wide as
the longest record waste what shorter records' rows leave empty (most B2T records are over half a
row, so they cannot pair: a share of 0.78-0.84 at best), so a micro-batch takes the narrowest of
`width_buckets` holding its longest row (`row_widths` multiples of a 64-token granule; the widest
holds the longest record the recipe allows, the row launch/plan.py fits), and `micro_rows` rows or
one per data x fsdp x expert device (`micro_sizes`; one count when they are equal, as in most Qwen3
recipes). The rows (FFD at `capacity`) are sorted by tokens, longest first, and cut into
consecutive micro-batches (`micro_batch_plan`): the cut with the fewest tokens computed (then the
fewest micro-batches), a dynamic programme over the sorted rows. A micro-batch's loss positions
are as many as its tokens (b2tjax/step/batch.py `loss_positions`), so a run compiles one gradient
and one log-prob program per shape it meets, at most 2 x `row_widths`; `row_widths: 1` and
`micro_batch_size` = data x fsdp give one. Only a record longer than the recipe allows would add
one (its own 64-token bucket).

One record per row (the layout of padded rows) is a policy of the same packer, not a second
path: a budget below every record's length (`row_tokens: 1`) gives each record a row.

Everything is a pure function of the records' lengths: every JAX process holds the whole global
batch and packs it alike, so the process count never changes which records share a row.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from b2tjax.step.batch import pad_length
from models.sharding import row_devices as mesh_row_devices


def row_devices(mesh) -> int:
    """Devices a micro-batch's rows are split over (models.sharding.ROW_AXES of a jax Mesh); 1 without one."""
    return mesh_row_devices(None if mesh is None else dict(mesh.shape))


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


@dataclasses.dataclass(frozen=True)
class Packing:
    """Where each record lies in a packed [rows, width] array: row, first token, length."""

    row: np.ndarray  # [records] int
    start: np.ndarray  # [records] int
    length: np.ndarray  # [records] int
    rows: int
    width: int

    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """(segment_ids, token_positions), int32 [rows, width]: record k of a row (in start
        order) is segment k (from 1), positions count from 0 in each; padding 0 and 0."""
        seg = np.zeros((self.rows, self.width), np.int32)
        pos = np.zeros((self.rows, self.width), np.int32)
        count: dict[int, int] = {}
        for i in np.lexsort((self.start, self.row)):  # by row, then start
            r, s, n = int(self.row[i]), int(self.start[i]), int(self.length[i])
            count[r] = count.get(r, 0) + 1
            seg[r, s : s + n] = count[r]
            pos[r, s : s + n] = np.arange(n, dtype=np.int32)
        return seg, pos

    def place(self, values: list, dtype, fill=0) -> np.ndarray:
        """Per-record sequences (record i: `length[i]` entries, each of any shape [...]; a scalar is
        spread over its tokens) -> [rows, width, ...] array."""
        tail = np.shape(values[0])[1:] if values and np.ndim(values[0]) else ()
        out = np.full((self.rows, self.width, *tail), fill, dtype)
        for i, v in enumerate(values):
            r, s, n = int(self.row[i]), int(self.start[i]), int(self.length[i])
            out[r, s : s + n] = np.asarray(v, dtype)[:n] if np.ndim(v) else v
        return out

    def take(self, packed: np.ndarray, i: int) -> np.ndarray:
        """Record i's entries of a [rows, width] array."""
        s = int(self.start[i])
        return packed[int(self.row[i]), s : s + int(self.length[i])]

    def tokens_computed(self) -> int:
        return self.rows * self.width


def width_buckets(longest: int, count: int) -> tuple[int, ...]:
    """The row widths a micro-batch may take: multiples of a 64-token granule (`longest / count`
    rounded up), the widest `longest`'s 64-token bucket; a few, so the steps compile a few shapes."""
    if count < 1:
        raise ValueError(f"row widths must be >= 1, got {count}")
    top = pad_length(longest)
    granule = pad_length(-(-top // count))
    return tuple(sorted({min(top, granule * k) for k in range(1, count + 1)}))


def width_of(tokens: int, widths: tuple[int, ...]) -> int:
    """The narrowest of `widths` holding `tokens`; a longer row (a record over what the recipe
    allows): its own 64-token bucket."""
    return next((w for w in widths if tokens <= w), pad_length(tokens))


def micro_sizes(micro_rows: int, row_devices: int = 1) -> tuple[int, ...]:
    """Rows a micro-batch may have: `micro_rows`, or one per device (`row_devices`, when
    `micro_rows` splits over them; else 1, the rows replicated). Two sizes, not every multiple:
    the same tokens computed on these length distributions at half the compiled shapes."""
    devices = row_devices if micro_rows % row_devices == 0 else 1
    return tuple(sorted({devices, micro_rows}))


def micro_batch_plan(
    row_tokens: list[int], widths: tuple[int, ...], sizes: tuple[int, ...]
) -> list[tuple[int, int, int]]:
    """Micro-batches of rows of `row_tokens` tokens sorted longest first: consecutive runs, each
    padded to the smallest of `sizes` holding it and as wide as its first (longest) row needs; the
    cut with the fewest tokens computed, then the fewest micro-batches (a dynamic programme over
    the run ends). (first row, stop, rows, width) per micro-batch, in row order."""
    n = len(row_tokens)
    best: list[tuple[int, int]] = [(0, 0)] + [(1 << 62, 0)] * n  # (tokens, micro-batches)
    cut = [(0, 0, 0)] * (n + 1)  # (first, rows, width) of the micro-batch ending at j
    for j in range(1, n + 1):
        for k in range(1, min(sizes[-1], j) + 1):
            first = j - k
            rows = next(s for s in sizes if s >= k)
            width = width_of(row_tokens[first], widths)
            cost = (best[first][0] + rows * width, best[first][1] + 1)
            if cost < best[j]:
                best[j], cut[j] = cost, (first, rows, width)
    plan, j = [], n
    while j > 0:
        first, rows, width = cut[j]
        plan.append((first, j, rows, width))
        j = first
    return plan[::-1]


@dataclasses.dataclass(frozen=True)
class MicroBatch:
    """One micro-batch of a packed mini-batch: its records (indices into the mini-batch's) and
    where each lies in its own [rows, width] array (`pack`, over `members` in that order)."""

    members: np.ndarray  # [records] int
    pack: Packing


def pack_micro_batches(
    lengths: list[int], capacity: int, sizes: tuple[int, ...], widths: tuple[int, ...]
) -> list[MicroBatch]:
    """Records of `lengths` tokens packed first-fit-decreasing into rows of `capacity`, the rows
    cut into micro-batches of one of `sizes` rows and one of `widths` each (`micro_batch_plan`),
    widest first. A pure function of the lengths: every JAX process packs the global batch alike."""
    bins = first_fit_decreasing(lengths, capacity)
    tokens = [sum(lengths[i] for i in b) for b in bins]
    order = sorted(range(len(bins)), key=lambda b: (-tokens[b], b))
    plan = micro_batch_plan([tokens[b] for b in order], widths, sizes)
    return [
        _micro_batch(lengths, [bins[k] for k in order[first:stop]], rows, width)
        for first, stop, rows, width in plan
    ]


def _micro_batch(lengths: list[int], bins: list[list[int]], rows: int, width: int) -> MicroBatch:
    """The MicroBatch of `bins` (record indices per row, in placement order) in [rows, width]."""
    members = np.asarray([i for b in bins for i in b], np.int64)
    row = np.asarray([r for r, b in enumerate(bins) for _ in b], np.int64)
    start = np.asarray([sum(lengths[j] for j in b[:k]) for b in bins for k in range(len(b))], np.int64)
    length = np.asarray([lengths[i] for i in members], np.int64)
    return MicroBatch(members, Packing(row, start, length, rows, width))


def tokens_computed(micro_batches: list[MicroBatch]) -> int:
    """Tokens a packed mini-batch computes: rows x width summed over its micro-batches."""
    return sum(m.pack.tokens_computed() for m in micro_batches)


@dataclasses.dataclass(frozen=True)
class RowPolicy:
    """How a step's records become rows, and so the shapes a run compiles, fixed at start-up: the
    row budget (`capacity` tokens), rows per micro-batch (`micro_rows`, split over `devices`), the
    longest record the recipe allows (`longest`, 0 = `capacity`) and how many widths a
    micro-batch may take (`row_widths`)."""

    capacity: int
    micro_rows: int
    devices: int = 1
    row_widths: int = 16
    longest: int = 0

    @property
    def sizes(self) -> tuple[int, ...]:
        """The row counts a micro-batch may have (`micro_sizes`)."""
        return micro_sizes(self.micro_rows, self.devices)

    @property
    def widths(self) -> tuple[int, ...]:
        """The row widths of the run: `row_widths` up to the budget, and as many coarser ones up to
        the longest record when it is longer (a record over the budget has a row of its own)."""
        below = width_buckets(self.capacity, self.row_widths)
        above = width_buckets(max(self.longest, self.capacity), self.row_widths)
        return tuple(sorted({*below, *(w for w in above if w > below[-1])}))

    @property
    def shapes(self) -> set[tuple[int, int]]:
        """Every (rows, width) a micro-batch of the run may take: its programs' shapes."""
        return {(rows, width) for rows in self.sizes for width in self.widths}

    def pack(self, lengths: list[int]) -> list[MicroBatch]:
        """Records of `lengths` tokens in micro-batches of the run's shapes (`pack_micro_batches`)."""
        return pack_micro_batches(lengths, self.capacity, self.sizes, self.widths)
