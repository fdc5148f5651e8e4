"""Prefix reuse: which tokens each KV-cache row holds, and where a newly seated stream can copy the
KV of its record's prefix from instead of prefilling it (rollout/device.py runs the copy).

How prefixes are found: exact longest common prefix, token by token, between the record of a
stream that starts a row afresh (a new stream, or a parked one seated again) and the tokens that
every other local row holds. A row's content is a prefix of the record of the last stream that
wrote it (records are append-only): that stream's first `n` ids, `n` its tokens in the row, and it
stays valid after the stream leaves the row, until another stream is seated there. So the same
search finds a GRPO group's shared prompt (its G episodes have identical prompts), a HiMAP team's
common system + tools prefix, the system prompt every episode of a benchmark shares, and a parked
stream's own record while its old row is not yet reused. No registration and no radix tree: a
vectorised compare per candidate row costs microseconds against a prefill of thousands of tokens.

Rows seated in the same admission (a GRPO group's first wave) hold nothing yet. A fresh row whose
best match is a row being prefilled in this step (a *leader*: any row with pending tokens that is
not itself waiting) waits until the leader's cache holds the shared part, then copies it; rows are
planned in row order and only ever wait for a row planned before them, so waiting never cycles.

The copy leaves at least the record's last token to prefill: the prefill computes the next-token
logits the decode samples from.
"""

from __future__ import annotations

import dataclasses
import weakref

import numpy as np

from rollout.stream import Phase, RowTable, Stream


@dataclasses.dataclass(frozen=True)
class Copy:
    """Copy the first `length` cache slots of row `src` into row `dst`."""

    src: int
    dst: int
    length: int


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two int arrays."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


class PrefixIndex:
    """The content of every cache row (as (stream, n): that stream's first n record ids) and the
    copy plan of each admission. `min_tokens`: shorter shared prefixes are prefilled (a copy call
    has a fixed cost)."""

    def __init__(self, num_rows: int, min_tokens: int):
        self.holder: list[Stream | None] = [None] * num_rows
        self.held: list[int] = [0] * num_rows
        self.min_tokens = min_tokens
        # stream -> (record length, ids); weak: a finished stream a session dropped (and its id,
        # which a new stream may get) leaves with it
        self._ids: weakref.WeakKeyDictionary[Stream, tuple[int, np.ndarray]] = weakref.WeakKeyDictionary()

    def ids(self, stream: Stream) -> np.ndarray:
        """The stream's record ids as an array (rebuilt only when the record grew)."""
        ids = stream.record.ids
        cached = self._ids.get(stream)
        if cached is None or cached[0] != len(ids):
            cached = (len(ids), np.asarray(ids, np.int32))
            self._ids[stream] = cached
        return cached[1]

    def refresh(self, rows: RowTable) -> None:
        """Take each seated row's content from its stream: a stream about to restart its row holds
        nothing there (its row's old content is about to be overwritten), others hold `cached`."""
        for r in rows.local:
            stream = rows.slots[r]
            if stream is not None:
                self.holder[r], self.held[r] = stream, 0 if stream.reset else stream.cached

    def plan(self, rows: RowTable) -> tuple[list[Copy], set[int]]:
        """Copies for the fresh rows (seated, sampling, restarting at position 0) whose best source
        holds at least `min_tokens` of their record now, and the fresh rows that wait for a leader
        still prefilling a longer shared prefix."""
        self.refresh(rows)
        fresh = [r for r in rows.local if _is_fresh(rows.slots[r])]
        skip = set(fresh)
        copies: list[Copy] = []
        waiting: set[int] = set()
        for r in fresh:
            stream = rows.slots[r]
            want = self.ids(stream)
            limit = len(stream.pending) - 1  # the last token is prefilled: it gives the logits
            src, now = self._best_resident(want, skip, limit)
            ahead = self._best_leader(r, want, rows, waiting, limit)
            if ahead > max(now, self.min_tokens - 1):
                waiting.add(r)  # a leader's prefill will hold more of this record: copy then
            elif now >= self.min_tokens:
                copies.append(Copy(src, r, now))
        return copies, waiting

    def _best_resident(self, want: np.ndarray, skip: set[int], limit: int) -> tuple[int, int]:
        """(row, tokens) of the longest prefix of `want` that a row outside `skip` (the fresh rows,
        whose old content is about to go) holds now."""
        best, length = -1, 0
        for r, stream in enumerate(self.holder):
            if r in skip or stream is None or self.held[r] <= length:
                continue
            n = min(common_prefix(self.ids(stream)[: self.held[r]], want), limit)
            if n > length:
                best, length = r, n
        return best, length

    def _best_leader(self, dst: int, want: np.ndarray, rows: RowTable, waiting: set[int], limit: int) -> int:
        """Tokens of `want` that a row prefilling now (not itself waiting) will hold once done."""
        length = 0
        for r in rows.local:
            stream = rows.slots[r]
            if r == dst or r in waiting or not _prefilling(stream):
                continue
            n = min(common_prefix(self.ids(stream), want), limit)
            length = max(length, n)
        return length

    def shared(self, row: int, stream: Stream) -> int:
        """Tokens of `stream`'s record that `row` holds now (0 when it holds none)."""
        holder = self.holder[row]
        if holder is None or not self.held[row]:
            return 0
        return common_prefix(self.ids(holder)[: self.held[row]], self.ids(stream))

    def left(self, row: int, stream: Stream) -> None:
        """`stream` stopped in `row`: the row keeps every token it fed, its last turn included (an
        agent's next request continues it), until the row is seated again."""
        self.holder[row], self.held[row] = stream, 0 if stream.reset else stream.cached

    def forget(self, row: int) -> None:
        """The row's content is gone (a paged cache gave an unseated row's pages to another row)."""
        self.holder[row], self.held[row] = None, 0

    def copied(self, copy: Copy, stream: Stream) -> None:
        """The destination row now holds the copied prefix of `stream`'s record."""
        self.holder[copy.dst], self.held[copy.dst] = stream, copy.length


def _is_fresh(stream: Stream | None) -> bool:
    return stream is not None and stream.reset and stream.phase is Phase.SAMPLING and bool(stream.pending)


def _prefilling(stream: Stream | None) -> bool:
    return stream is not None and stream.phase is Phase.SAMPLING and bool(stream.pending)
