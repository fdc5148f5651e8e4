"""EngineStats: where the wall time and the tokens of one `RolloutEngine.run` went, and the span
arithmetic (union, overlap) that turns device-call and pool-job intervals into host/hidden time."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class EngineStats:
    """Where the wall time of the last run went. host_s = wall_s - device_s."""

    wall_s: float = 0.0
    device_s: float = 0.0  # prefill + decode calls, until their results were on the host
    env_s: float = 0.0  # while any episode callback ran in the pool (tools, parsing, rendering)
    hidden_s: float = 0.0  # of env_s, the time during device calls (hidden host work)
    generated_tokens: int = 0
    prefill_tokens: int = 0  # every token computed by prefill, reprefill_tokens included
    reused_tokens: int = 0  # tokens whose KV was copied from another row (prefix reuse), not computed
    reprefill_tokens: int = 0  # tokens computed again because their stream had been parked
    parks: int = 0  # times a waiting stream gave its row up
    decode_steps: int = 0  # while-loop iterations summed over segments
    segments: int = 0
    folds: int = 0  # contexts folded to the budget (rollout/context.py): new segments started
    folded_tokens: int = 0  # context tokens those folds removed
    episodes: int = 0
    rows: int = 0  # batch rows this process decodes in (its local rows)
    # KV memory, summed over decode segments (means: divide by `segments`)
    rows_decoding: int = 0  # rows sampling in the segment
    peak_rows_decoding: int = 0  # most rows sampling in one segment
    live_tokens: int = 0  # tokens in the cache rows of seated streams
    kv_bytes_held: int = 0  # KV memory held: the pages in use
    pages_used: int = 0  # pages referenced by at least one row
    peak_pages: int = 0  # most pages in use at a segment
    peak_shared_pages: int = 0  # most pages referenced by two rows or more at a segment

    @property
    def kv_bytes_per_live_token(self) -> float:
        """KV memory held per token of a live stream (a row's partly filled last page included)."""
        return self.kv_bytes_held / self.live_tokens if self.live_tokens else 0.0

    @property
    def pages_in_use(self) -> float:
        """Pages in use, mean over decode segments."""
        return self.pages_used / self.segments if self.segments else 0.0

    @property
    def host_s(self) -> float:
        """Time the host was busy: everything outside device calls, plus pool work hidden behind
        them. Synchronous engine: wall_s - device_s. Overlap shows as wall_s < device_s + host_s."""
        return max(0.0, self.wall_s - self.device_s) + self.hidden_s

    @property
    def row_occupancy(self) -> float:
        """Generated tokens / (decode steps x rows): the share of row-steps that produced a token
        (the tail of a step, with most rows empty, drags it down)."""
        steps = self.decode_steps * self.rows
        return self.generated_tokens / steps if steps else 0.0

    @property
    def host_share(self) -> float:
        return self.host_s / self.wall_s if self.wall_s else 0.0


Span = tuple[float, float]


def merged(spans: list[Span]) -> list[Span]:
    """Sorted disjoint intervals covering the same time as `spans` (parallel jobs overlap)."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def union_length(spans: list[Span]) -> float:
    return sum(end - start for start, end in merged(spans))


def overlap_length(spans: list[Span], other: list[Span]) -> float:
    """Time covered by both `spans` and `other` (a two-pointer sweep over their unions)."""
    a, b = merged(spans), merged(other)
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
