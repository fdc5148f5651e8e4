"""The scripted expert's episodes under context budgets (not a timer): what folding costs and saves.

    python launch/make_data.py --scale small --seed 11 --out /tmp/small11
    python benchmarks/bench_context_budget.py --data /tmp/small11 [--config configs/qwen3_1.7b.yaml]
        [--budgets 0 32768 24576 16384] [--keep-turns 1 2] [--split test] [--benchmark b2t]

The expert solves each instance of the split once through the real tools; its episode is then laid
out under each budget as the recipe's rollouts would hold it (its tokenizer, prompt options and
`rollout.max_turn_tokens`; b2tjax/cli/expert_budget.py, rollout/replay.py, folding with the engine's
own ContextBudget; a budget's prompt is compacted to at most half of it, so that a whole turn fits
beside it). Budget 0 is today's unfolded episode, the reference of every ratio. Per budget
and `rollout.context_keep_turns`, printed as Markdown:

- solved: the benchmark's final pass rate (an episode stopped by the budget has no answer);
- unfolded: the episodes' length without a budget, mean / max;
- peak: the largest context any turn saw (a segment's whole length), mean / max;
- segments per episode, and stops (episodes that end with StopReason.CONTEXT_BUDGET);
- trained: tokens over an episode's segments, each segment's folded prompt included (what the
  loss reads), mean, and its ratio to the unfolded episode;
- names unseen: answers naming a place or id that its last context no longer shows (memory
  replies and unfolded replies); 0 means the expert's memory carried what it needed;
- live: a row's mean live length (each segment's mean of start and end, weighted by the tokens it
  adds), mean over episodes; KV rows per chip at equal memory relative to budget 0 are the pool's
  tokens / live (paged), so the ratio is live(0) / live(budget); contiguous rows are one row per
  `max_seq_len`: the recipe's today (65,536 for B2T) against the budget's tokens with one.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from b2tjax.cli.expert_budget import episode_under_budget
from b2tjax.config import load_config
from models.tokenizer import load_tokenizer
from sandbox.benchmarks import get_benchmark
from sandbox.expert_session import unseen


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a data directory (launch/make_data.py)")
    parser.add_argument("--benchmark", default="b2t")
    parser.add_argument("--config", type=Path, default=Path("configs/qwen3_1.7b.yaml"), help="the recipe")
    parser.add_argument("--budgets", type=int, nargs="+", default=[0, 32768, 24576, 16384])
    parser.add_argument("--keep-turns", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--split", default="test")
    parser.add_argument("--instances", type=int, default=0, help="the split's first N (0: all)")
    return parser.parse_args(argv)


def row(bench, solved, rollout, tokenizer, today: int, reference: float | None) -> tuple[str, float]:
    """One table row of the expert's solved episodes under `rollout`, and its mean live length."""
    runs, verdicts, lost = [], [], 0
    for pair, result in solved:
        run = episode_under_budget(bench, pair.visible, result, rollout, tokenizer)
        runs.append(run)
        verdicts.append(bench.evaluate(None if run.stopped else result.answer, pair.visible, pair.truth))
        lost += not run.stopped and bool(unseen(bench.plan_names(result.plan), run.shown()))
    n, budget = len(runs), rollout.context_budget
    live = sum(r.live for r in runs) / n
    unfolded, peaks = [r.unfolded for r in runs], [r.peak for r in runs]
    trained = sum(r.trained for r in runs) / n
    line = (
        f"| {budget or 'off'} | {rollout.context_keep_turns if budget else '-'} "
        f"| {bench.metrics(verdicts)['final_pass_rate']:.0%} "
        f"| {sum(unfolded) / n:,.0f} / {max(unfolded):,} | {sum(peaks) / n:,.0f} / {max(peaks):,} "
        f"| {sum(len(r.segments) for r in runs) / n:.2f} | {sum(r.stopped for r in runs)} "
        f"| {trained:,.0f} | {trained / (sum(unfolded) / n):.2f}x | {lost} | {live:,.0f} "
        f"| {(reference or live) / live:.2f}x / {today / (budget or today):.2f}x |"
    )
    return line, live


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = load_config(args.config)
    tokenizer = load_tokenizer(cfg.model.tokenizer)
    bench = get_benchmark(args.benchmark, args.data)
    pairs = bench.load_split(args.split)
    pairs = pairs[: args.instances] if args.instances else pairs
    started = time.perf_counter()
    solved = [(p, r) for p, (_, r) in zip(pairs, bench.expert_results(pairs)) if r is not None and r.ok]
    print(
        f"{args.benchmark} {args.split}: {len(solved)} of {len(pairs)} instances solved by the expert "
        f"({time.perf_counter() - started:.0f} s), {cfg.model.tokenizer} tokens, recipe {args.config.name} "
        f"(max_turn_tokens {cfg.rollout.max_turn_tokens:,}, max_prompt_tokens {cfg.rollout.prompt_budget:,})"
    )
    print()
    print(
        "| budget | keep turns | solved | unfolded mean / max | peak mean / max | segments per episode "
        "| stops | trained per episode | trained / unfolded | names unseen | live mean "
        "| KV rows at equal memory: paged / contiguous |"
    )
    print("|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|")
    reference, today = None, cfg.rollout.max_seq_len
    for budget in args.budgets:
        for keep in args.keep_turns if budget else args.keep_turns[:1]:
            rollout = dataclasses.replace(
                cfg.rollout,
                context_budget=budget,
                context_keep_turns=keep,
                max_seq_len=budget or today,
                max_prompt_tokens=min(cfg.rollout.prompt_budget, budget // 2 or cfg.rollout.prompt_budget),
            )
            line, live = row(bench, solved, rollout, tokenizer, today, reference)
            reference = reference or live
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
