"""Rows per chip that the rollout's KV budget holds at the expert traces' live lengths (issue 36).

Why: the contiguous cache reserves cache_len slots per row from its first token, so it holds
batch_rows / chips rows per chip however short the episodes are; the paged pool holds only the
pages a row's tokens fill, so the same bytes hold (pool pages per row shard) / (pages per live row)
rows per shard. A row's live tokens: an episode growing from its prompt p to its final length L
holds on average (p + L) / 2 tokens over its life (it grows roughly evenly), rounded up to whole
pages; the mean and p90 of that over the expert traces of the recipe's difficulties
(DATA/trace_lengths.json, selected as b2tjax/cli/trace_fit.py does). Pages a GRPO group shares
(its prompt) are not counted, so the paged figures are a lower bound.
"""

from __future__ import annotations

from b2tjax.cli.trace_fit import recipe_traces, skip_reason
from b2tjax.config.schema import TrainConfig
from b2tjax.sft.lengths import percentile
from rollout.pages import pages_for

GIB = 1024**3


def live_lengths(cfg: TrainConfig, stats: dict) -> tuple[int, int]:
    """(mean, p90) over the recipe's expert traces of a row's mean occupancy, (prompt + total) / 2."""
    prompts, totals, _ = recipe_traces(cfg, stats)
    live = sorted((p + t + 1) // 2 for p, t in zip(prompts, totals))
    return round(sum(live) / len(live)), percentile(live, 90)


def rows_per_chip(cfg: TrainConfig, live: int, shards: int, chips: int) -> float:
    """Rows per chip the pool (rollout.pool_pages, split over `shards` row shards) holds when every
    row holds `live` tokens in whole pages."""
    r = cfg.rollout
    per_shard = (r.pool_pages // shards) // pages_for(live, r.page_size)
    return per_shard * shards / chips


def kv_budget_lines(
    cfg: TrainConfig, stats: dict | None, shards: int, chips: int, slot_bytes: int, kv_bytes_per_chip: int
) -> list[str]:
    """The KV budget (pool bytes per chip) and the rows per chip it holds, contiguous vs paged at the
    mean and p90 live length (or why the lengths are not known)."""
    r = cfg.rollout
    tokens = r.pool_pages * r.page_size
    pool = f"{r.pool_pages:,} pages x {r.page_size}"
    kind = (
        f"paged pool of {pool}"
        if r.kv_cache == "paged"
        else f"contiguous, {r.batch_rows} rows x {cfg.cache_len:,} (as a pool: {pool})"
    )
    lines = [
        f"KV budget: {kind} = {tokens:,} token slots, {kv_bytes_per_chip / GIB:.2f} GiB per chip "
        f"({slot_bytes:,} bytes per token)"
    ]
    contiguous = f"contiguous {r.batch_rows / chips:g} (each row reserves {cfg.cache_len:,})"
    reason = skip_reason(cfg, stats)
    if reason is not None:
        return lines + [f"rows per chip at live lengths: {contiguous}; paged not estimated: {reason}"]
    mean, p90 = live_lengths(cfg, stats)
    paged = ", ".join(
        f"at the {name} live length {n:,}: {rows_per_chip(cfg, n, shards, chips):g}"
        for name, n in (("mean", mean), ("p90", p90))
    )
    lines.append(
        f"rows per chip the KV budget holds (live tokens per row = (prompt + final length) / 2 of the "
        f"expert traces, in pages of {r.page_size}): {contiguous}; paged {paged}"
    )
    if r.kv_cache == "paged":
        lines.append(
            f"the paged engine decodes at most rollout.batch_rows / chips = {r.batch_rows / chips:g} rows "
            "per chip: set batch_rows to the rows above to use the pool"
        )
    return lines
