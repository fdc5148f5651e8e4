"""Rows per chip that the rollout's KV budget holds at the expert traces' live lengths.

Why: a contiguous cache (the reference: models/kv_cache.py) reserves cache_len slots per row from
its first token, so its bytes hold budget / cache_len rows however short the episodes are; the
sampler's page pool holds only the pages a row's tokens fill, so the same bytes hold (pool pages
per row shard) / (pages per live row) rows per shard. A row's live tokens: an episode growing from
its prompt p to its final length L holds on average (p + L) / 2 tokens over its life (it grows
roughly evenly), rounded up to whole pages; the mean and p90 of that over the expert traces of the
recipe's difficulties (DATA/trace_lengths.json, selected as b2tjax/cli/trace_fit.py does).

Shared prompt pages: the G rows of a GRPO group point at one copy of their prompt's full pages
(the engine's prefix reuse; the partly filled last page is copied into each row), so a group of G
rows holds G x pages(live) - (G - 1) x full_pages(prompt) pages: per row, pages(live) - (G - 1) / G
x full_pages(prompt), with the traces' mean prompt length. Both figures are printed: "no sharing"
(G = 1, the lower bound) and "shared prompt" (the recipe's rollout.group_size).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from b2tjax.cli.trace_fit import recipe_traces, skip_reason
from b2tjax.config.schema import TrainConfig
from b2tjax.sft.lengths import percentile
from rollout.pages import pages_for

GIB = 1024**3


def live_lengths(cfg: TrainConfig, stats: dict) -> tuple[int, int]:
    """(mean, p90) over the recipe's expert traces of a row's mean occupancy, (prompt + total) / 2."""
    prompts, totals, _ = recipe_traces(cfg, stats)
    return live_stats(zip(prompts, totals))


def live_stats(streams: Iterable[Sequence[int]]) -> tuple[int, int]:
    """(mean, p90) of a row's mean occupancy, (prompt + total) / 2, over (prompt, total) pairs."""
    live = sorted((p + t + 1) // 2 for p, t in streams)
    return round(sum(live) / len(live)), percentile(live, 90)


def mean_prompt(cfg: TrainConfig, stats: dict) -> int:
    """The mean prompt length of the recipe's expert traces: what a GRPO group shares."""
    prompts, _, _ = recipe_traces(cfg, stats)
    return round(sum(prompts) / len(prompts))


def saved_pages(prefixes: Sequence[tuple[int, float, float]], rows: float, page_size: int) -> float:
    """Pages per row that `rows` rows save when each (tokens, sharers, copies) prefix -- `copies`
    of them, each held by `sharers` rows -- is held once: (sharers - 1) x copies x its full pages."""
    return sum((n - 1) * copies * (tokens // page_size) for tokens, n, copies in prefixes) / rows


def row_pages(live: int, prompt: int, group: int, page_size: int) -> float:
    """Pages one row holds at `live` tokens when its group of `group` rows holds the full pages of
    their common `prompt` once: pages(live) - (group - 1) / group x full_pages(prompt)."""
    return pages_for(live, page_size) - saved_pages([(min(prompt, live), group, 1)], group, page_size)


def budget_pages(cfg: TrainConfig) -> int:
    """The KV budget in pages: the sampler's page pool (rollout.pool_pages)."""
    return cfg.rollout.pool_pages


def contiguous_rows(cfg: TrainConfig, chips: int) -> float:
    """Rows per chip a contiguous cache of the budget's bytes holds: each reserves cache_len."""
    return budget_pages(cfg) // cfg.rollout.pages_per_row / chips


def pool_rows(cfg: TrainConfig, pages_per_row: float, shards: int, chips: int) -> float:
    """Rows per chip the pool (rollout.pool_pages, split over `shards` row shards) holds at
    `pages_per_row` pages a row."""
    return int((budget_pages(cfg) // shards) // pages_per_row) * shards / chips


def rows_per_chip(
    cfg: TrainConfig, live: int, shards: int, chips: int, prompt: int = 0, group: int = 1
) -> float:
    """Rows per chip the pool holds when every row holds `live` tokens in whole pages, a group of
    `group` rows sharing its `prompt`'s full pages (group 1: no sharing)."""
    return pool_rows(cfg, row_pages(live, prompt, group, cfg.rollout.page_size), shards, chips)


def paged_rows(cfg: TrainConfig, stats: dict, shards: int, chips: int) -> dict[str, tuple[int, float, float]]:
    """{"mean" / "p90": (live tokens, rows per chip with no sharing, rows per chip with the
    group's shared prompt pages)}: the figures launch/plan.py and trace_lengths.py print."""
    prompt, group = mean_prompt(cfg, stats), cfg.rollout.group_size
    return {
        name: (n, rows_per_chip(cfg, n, shards, chips), rows_per_chip(cfg, n, shards, chips, prompt, group))
        for name, n in zip(("mean", "p90"), live_lengths(cfg, stats))
    }


def himap_streams(lengths: dict) -> list[list[int]]:
    """[prompt, total] of every stream of the HiMAP teams: each coordinator and executor."""
    return [
        s for t in lengths["teams"] for s in ([t["coordinator"]] if t["coordinator"] else []) + t["executors"]
    ]


def himap_live_lengths(lengths: dict) -> tuple[int, int]:
    """(mean, p90) over every stream of the HiMAP teams (b2tjax/cli/himap_streams.py) of a row's mean
    occupancy, (prompt + total) / 2."""
    return live_stats(himap_streams(lengths))


def himap_team(lengths: dict) -> tuple[int, float, int]:
    """(mean coordinator prompt, mean executors per team, mean common prefix of a team's executors)."""
    teams = lengths["teams"]
    coordinators = [t["coordinator"][0] for t in teams if t["coordinator"]]
    executors = sum(len(t["executors"]) for t in teams) / len(teams)
    prefix = sum(t["executor_prefix"] for t in teams) / len(teams)
    return round(sum(coordinators) / max(1, len(coordinators))), executors, round(prefix)


def team_row_pages(live: int, lengths: dict, group: int, page_size: int) -> float:
    """Pages one HiMAP stream holds at `live` tokens when the G = `group` coordinators of a GRPO group
    hold their common prompt once and each team's E executors their common prefix once:
    pages(live) - ((G - 1) x full_pages(prompt) + G x (E - 1) x full_pages(prefix)) / (G x (1 + E))."""
    prompt, executors, prefix = himap_team(lengths)
    prefixes = [(min(prompt, live), group, 1), (min(prefix, live), executors, group)]
    return pages_for(live, page_size) - saved_pages(prefixes, group * (1 + executors), page_size)


def himap_rows(
    cfg: TrainConfig, lengths: dict, shards: int, chips: int
) -> dict[str, tuple[int, float, float]]:
    """{"mean" / "p90": (stream live tokens, rows per chip with no sharing, rows per chip with the
    group's coordinator prompt and each team's executor prefix held once)}, as paged_rows."""
    size, group = cfg.rollout.page_size, cfg.rollout.group_size
    return {
        name: (
            n,
            pool_rows(cfg, pages_for(n, size), shards, chips),
            pool_rows(cfg, team_row_pages(n, lengths, group, size), shards, chips),
        )
        for name, n in zip(("mean", "p90"), himap_live_lengths(lengths))
    }


def kv_budget_lines(
    cfg: TrainConfig, stats: dict | None, shards: int, chips: int, slot_bytes: int, kv_bytes_per_chip: int
) -> list[str]:
    """The KV budget (pool bytes per chip) and the rows per chip it holds, contiguous vs paged at the
    mean and p90 live length (or why the lengths are not known)."""
    r = cfg.rollout
    tokens = budget_pages(cfg) * r.page_size
    lines = [
        f"KV budget: page pool of {budget_pages(cfg):,} pages x {r.page_size} = {tokens:,} token slots, "
        f"{kv_bytes_per_chip / GIB:.2f} GiB per chip "
        f"({slot_bytes:,} bytes per token)"
    ]
    contiguous = f"contiguous {contiguous_rows(cfg, chips):g} (each row reserves {cfg.cache_len:,})"
    reason = skip_reason(cfg, stats)
    if reason is not None and cfg.agent == "himap":  # the scripted expert's streams take a minute
        reason += " (the HiMAP streams' rows: python benchmarks/trace_lengths.py --kv-rows --data ...)"
    if reason is not None:
        return lines + [f"rows per chip at live lengths: {contiguous}; paged not estimated: {reason}"]
    paged = ", ".join(
        f"at the {name} live length {n:,}: {alone:g} ({shared:g} with the group's shared prompt pages)"
        for name, (n, alone, shared) in paged_rows(cfg, stats, shards, chips).items()
    )
    lines.append(
        f"rows per chip the KV budget holds (live tokens per row = (prompt + final length) / 2 of the "
        f"expert traces, in pages of {r.page_size}; a group of {r.group_size} holds its mean "
        f"{mean_prompt(cfg, stats):,}-token prompt's full pages once): {contiguous}; paged {paged}"
    )
    lines.append(
        f"the engine decodes at most rollout.batch_rows / chips = {r.batch_rows / chips:g} rows "
        "per chip: set batch_rows to the rows above to use the pool"
    )
    return lines
