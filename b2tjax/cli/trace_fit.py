"""Does a recipe hold the expert's episodes? The share of expert traces that fit its lengths.

`launch/plan.py` and `launch/train.py` print, from DATA/trace_lengths.json (b2tjax/sft/lengths.py),
the share of the expert's traces (the recipe's difficulties) whose whole length fits
`rollout.max_seq_len` and `sft.max_seq_len`, whose prompt fits `rollout.max_prompt_tokens` (a
longer one is compacted: behaviour events dropped, so the rollout would not see the prompt SFT
taught) and whose longest assistant turn fits `rollout.max_turn_tokens`, and refuse to start when
fewer than 90% fit one of them, in one line naming the key and the length that would hold 90% (p90)
and 99% (p99) of them. A run that means to train on cut traces sets
`data.allow_truncated_traces: true`. With `rollout.context_budget` a row never holds a whole
trace but one segment: `rollout.max_seq_len`'s share becomes the budget's, the share of the traces
whose episode under the budget never ends for room (replayed from DATA/sft through a fresh
environment, an even sample of them; `budget_fit`). Nothing is checked (one line says why) for a
data directory without the file (built before it existed), a tokenizer other than the one the
lengths were counted in, a HiMAP recipe (its streams are not the single agent's traces) or the toy
task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from b2tjax.errors import UserError
from b2tjax.sft.lengths import LENGTHS, percentile, read_lengths

if TYPE_CHECKING:
    from b2tjax.config.schema import TrainConfig

MIN_SHARE = 0.90  # below this share of whole expert traces a run is refused (data.allow_truncated_traces)
SFT_SPLIT = "train"  # the split whose expert traces SFT trains on (DATA/sft/train.jsonl)
BUDGET_TRACES = 48  # traces replayed under a context budget, spread evenly over the split (~0.3 s each)


@dataclass(frozen=True)
class Fit:
    """The share of traces one length key holds, and the lengths that would hold 90% and 99%."""

    key: str
    limit: int
    share: float
    p90: int
    p99: int
    hint: str = ""  # what to change instead of the length p90 holds (a context budget)

    def line(self) -> str:
        return f"{self.key} {self.limit:,}: {self.share:.0%}"

    def refusal(self) -> str:
        if self.hint:
            return (
                f"{self.key}={self.limit} holds {self.share:.0%} of the expert traces (< {MIN_SHARE:.0%}): "
                f"{self.hint}, or data.allow_truncated_traces=true"
            )
        return (
            f"{self.key}={self.limit} holds {self.share:.0%} of the expert traces whole (< {MIN_SHARE:.0%}): "
            f"set it to at least {self.p90} (p90; {self.p99} holds 99%), or data.allow_truncated_traces=true"
        )


def _share_and_needed(values: list[int], limit: int) -> tuple[float, int, int]:
    ordered = sorted(values)
    share = sum(v <= limit for v in ordered) / len(ordered)
    return share, percentile(ordered, 90), percentile(ordered, 99)


def recipe_traces(cfg: TrainConfig, stats: dict) -> tuple[list[int], list[int], list[int]]:
    """(prompts, totals, longest turns) of each expert trace of the recipe's difficulties of the SFT
    split, without the Python tool's schema when the recipe runs without the tool."""
    groups = stats["splits"].get(SFT_SPLIT) or next(iter(stats["splits"].values()))
    chosen = [groups[d] for d in cfg.data.difficulties if d in groups] or [groups["all"]]
    no_python = 0 if cfg.rollout.python_tool else int(stats.get("python_tool_tokens", 0))
    prompts = [t - no_python for g in chosen for t in g["prompts"]]
    totals = [t - no_python for g in chosen for t in g["totals"]]
    return prompts, totals, [t for g in chosen for t in g["longest_turns"]]


def budget_fit(cfg: TrainConfig, data_dir: Path) -> Fit:
    """Under `rollout.context_budget` (<= max_seq_len) a row holds one segment, never the whole
    trace: the share of the expert traces of the recipe's difficulties (an even sample of at most
    BUDGET_TRACES) whose episode under the budget never ends for room (StopReason.CONTEXT_BUDGET),
    each laid out as the recipe's records hold it (b2tjax/cli/expert_budget.py); p90 and p99 are
    their peak contexts."""
    from b2tjax.cli.expert_budget import trace_under_budget  # the tokenizer: on demand
    from models.tokenizer import load_tokenizer
    from sandbox.benchmarks import get_benchmark
    from sandbox.expert_session import ExpertFailure

    bench = get_benchmark(cfg.benchmark, data_dir)
    visible = {str(v["id"]): v for v in bench.load_visible(SFT_SPLIT)}
    traces = bench.sft_traces() or []
    chosen = [t for t in traces if visible[str(t["id"])].get("difficulty") in cfg.data.difficulties] or traces
    sample = chosen[:: -(-len(chosen) // BUDGET_TRACES)]
    tokenizer = load_tokenizer(cfg.model.tokenizer)
    runs = []
    for trace in sample:
        try:
            runs.append(trace_under_budget(bench, visible[str(trace["id"])], trace, cfg.rollout, tokenizer))
        except ExpertFailure as err:
            raise UserError(f"{data_dir}/sft: trace {trace['id']}: {err}; rebuild the data") from None
    peaks = sorted(r.peak for r in runs)
    hint = (
        "raise it or lower rollout.context_keep_turns (launch/eval.py --policy expert --config: each episode)"
    )
    share = sum(not r.stopped for r in runs) / len(runs)
    return Fit(
        "rollout.context_budget",
        cfg.rollout.context_budget,
        share,
        percentile(peaks, 90),
        percentile(peaks, 99),
        hint,
    )


def trace_fits(cfg: TrainConfig, stats: dict, data_dir: Path | None = None) -> tuple[int, list[Fit]]:
    """(traces counted, the fit of each length key) for the recipe's difficulties of the SFT split;
    with a context budget its fit (`budget_fit`, on `data_dir`'s traces: default the recipe's data)
    stands for rollout.max_seq_len's."""
    prompts, totals, turns = recipe_traces(cfg, stats)
    fits = []
    if cfg.rollout.context_budget:
        fits.append(budget_fit(cfg, Path(data_dir or cfg.data.data_dir)))
    for key, limit, values in (
        *([] if cfg.rollout.context_budget else [("rollout.max_seq_len", cfg.rollout.max_seq_len, totals)]),
        ("rollout.max_prompt_tokens", cfg.rollout.prompt_budget, prompts),
        ("rollout.max_turn_tokens", cfg.rollout.max_turn_tokens, turns),
        ("sft.max_seq_len", cfg.sft.max_seq_len, totals),
    ):
        share, p90, p99 = _share_and_needed(values, limit)
        fits.append(Fit(key, limit, share, p90, p99))
    return len(totals), fits


def skip_reason(cfg: TrainConfig, stats: dict | None) -> str | None:
    """Why the check does not apply to this recipe and data, or None when it does."""
    data_dir = cfg.data.data_dir
    if stats is None:
        held = f"has no {LENGTHS} (built before it existed)" if Path(data_dir).is_dir() else "does not exist"
        return f"data.data_dir {data_dir} {held}: the expert traces' lengths are not checked"
    if cfg.agent != "single":
        return f"agent {cfg.agent}: its streams are not the single agent's expert traces; lengths not checked"
    if cfg.model.tokenizer != stats.get("tokenizer"):
        return (
            f"{data_dir}/{LENGTHS} counts {stats.get('tokenizer')} tokens and model.tokenizer is "
            f"{cfg.model.tokenizer}: the expert traces' lengths are not checked"
        )
    if not stats["splits"]:
        return f"{data_dir}/{LENGTHS} holds no expert traces: lengths not checked"
    return None


def check_trace_fit(cfg: TrainConfig, echo=print) -> list[Fit]:
    """Print the recipe's share of whole expert traces per length key (or why it is not checked);
    UserError, naming the first key and the length it needs, when one holds fewer than 90% and
    data.allow_truncated_traces is false."""
    if cfg.task != "travel":
        return []
    stats = read_lengths(cfg.data.data_dir) if Path(cfg.data.data_dir).is_dir() else None
    reason = skip_reason(cfg, stats)
    if reason is not None:
        echo(f"trace lengths: {reason}")
        return []
    count, fits = trace_fits(cfg, stats)
    figures = ", ".join(f.line() for f in fits)
    echo(f"expert traces that fit whole ({count}, {stats['tokenizer']} tokens): {figures}")
    short = [f for f in fits if f.share < MIN_SHARE]
    if short and not cfg.data.allow_truncated_traces:
        raise UserError(short[0].refusal())
    if short:
        cut = ", ".join(f.key for f in short)
        echo(f"data.allow_truncated_traces is true: running with {cut} under {MIN_SHARE:.0%} of the traces")
    return fits
