"""Speed benchmark: padded vs packed training rows, in one run.

    python benchmarks/bench_packing.py --data /tmp/b2t --benchmark b2t           # expert traces' lengths
    python benchmarks/bench_packing.py --data /tmp/b2t --qwen3                   # Qwen3 tokens (make_data's)
    python benchmarks/bench_packing.py --lengths lengths.txt                      # one integer per line

1. Layout, on the length distribution: steps of `--records` records (drawn with a seeded RNG, with
   replacement) laid out padded (every record padded to the step's longest, a 64-token bucket) and
   packed (first-fit-decreasing into rows of `--row-tokens`, default the distribution's longest
   record's bucket, as `grpo.row_tokens: 0` takes the recipe's max_seq_len; micro-batches of at
   `--micro-rows` rows, split over `--row-devices` data x fsdp devices), at one row width and
   at `--row-widths` widths (each micro-batch the narrowest holding its rows;
   b2tjax/step/packing.py). Per layout: tokens computed per step, the useful share (records'
   tokens / tokens computed), the distinct compiled shapes over the steps (padded: [records, T];
   packed: a micro-batch's [rows, width]), and the host's wall and CPU time to lay a step out.
2. A step-shaped case through the real `grpo_update` on the tiny Qwen3 (CPU, fp32): `--step-records`
   records whose lengths are the distribution scaled to at most `--step-max` tokens, multi-turn
   masks, 8 rows per micro-batch, packed at the default `grpo.row_widths`; wall and CPU seconds of
   the update (compiled beforehand), median of `--repeats`, the two layouts' updates interleaved;
   the gradient programs compiled ("padded" here: one record per row, `grpo.row_tokens=1`);
   speed-ups by wall and by CPU time (the CPU time of the process, all its threads, is the
   steadier figure on a loaded machine).

The expert traces are tokenised with the data directory's own tokenizer (the tiny recipe's
SentencePiece model, trained on the data when missing); with `--qwen3` the lengths are instead the
Qwen3 token totals `launch/make_data.py` recorded in DATA/trace_lengths.json (every split's traces,
as SFT encodes them; b2tjax/sft/lengths.py), and any other tokenizer's lengths can be passed as
`--lengths`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import time
from pathlib import Path

import numpy as np

from b2tjax.step.batch import pad_length
from b2tjax.step.packing import RowPolicy, tokens_computed
from models.settings import ModelRuntime


def trace_lengths(data: Path, benchmark: str) -> list[int]:
    """Token counts of the data directory's expert traces (SFT examples, uncut)."""
    from b2tjax.config import load_config
    from b2tjax.run.task_build import build_task

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "tiny_cpu.yaml")
    cfg.benchmark, cfg.data.data_dir, cfg.data.build_missing = benchmark, str(data), False
    cfg.sft.max_seq_len = 1 << 30  # whole traces, no windows
    return [len(x["ids"]) for x in build_task(cfg).sft_examples()]


def recorded_lengths(data: Path) -> list[int]:
    """Qwen3 token totals of every expert trace, from the DATA/trace_lengths.json make_data wrote."""
    from b2tjax.sft.lengths import LENGTHS, read_lengths

    stats = read_lengths(data)
    if stats is None:
        raise SystemExit(f"bench_packing: no {LENGTHS} in {data} (rebuild it with launch/make_data.py)")
    return [int(n) for groups in stats["splits"].values() for n in groups["all"]["totals"]]


def timed(fn, *args):
    """(result, wall seconds, CPU seconds of this process: all its threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def layout_rows(lengths: list[int], records: int, steps: int, shape: tuple[int, ...], seed: int):
    """Table rows (layout, tokens computed / step, useful share, shapes, wall ms, CPU ms) for steps
    of `records` records drawn from `lengths`: padded, packed at one row width, packed at
    `widths` widths (`shape`: row tokens, rows per micro-batch, widths, row devices). A packed shape is a
    micro-batch's (rows, width): one gradient program each."""
    row_tokens, micro_rows, widths, devices = shape
    rng = np.random.default_rng(seed)
    draws = [rng.choice(lengths, records).tolist() for _ in range(steps)]
    real = sum(sum(d) for d in draws)
    padded_shapes = {(records, pad_length(max(d))) for d in draws}
    padded_tokens = sum(records * pad_length(max(d)) for d in draws)
    out = [("padded", padded_tokens / steps, real / padded_tokens, len(padded_shapes), 0.0, 0.0)]
    for count in sorted({1, widths}):
        started = (time.perf_counter(), time.process_time())
        policy = RowPolicy(row_tokens, micro_rows, devices, count)
        packs = [policy.pack(d) for d in draws]
        wall, cpu = time.perf_counter() - started[0], time.process_time() - started[1]
        tokens = sum(tokens_computed(p) for p in packs)
        shapes = {(mb.pack.rows, mb.pack.width) for p in packs for mb in p}
        name = f"packed, {count} width{'s' if count > 1 else ''}"
        out.append((name, tokens / steps, real / tokens, len(shapes), 1e3 * wall / steps, 1e3 * cpu / steps))
    return out


def step_case(lengths: list[int], records: int, step_max: int, repeats: int, seed: int) -> list[tuple]:
    """(layout, rows, useful share, train programs compiled, wall s, CPU s) of the real
    grpo_update, padded and packed."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from b2tjax.config import TrainConfig
    from b2tjax.grpo.update import RolloutBatch
    from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM
    from rollout.record import EpisodeRecord

    rng = np.random.default_rng(seed)
    scale = step_max / max(lengths)
    sizes = [max(8, int(n * scale)) for n in rng.choice(lengths, records)]
    batch = RolloutBatch([_record(rng, n, EpisodeRecord) for n in sizes], {})
    model = Qwen3ForCausalLM(
        get_config("tiny"), rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    )
    model_fn, params = BoundModel.from_model(model)
    updates, states, metrics, fns_of = {}, {}, {}, {}
    for packing in (False, True):
        cfg = TrainConfig()
        cfg.rollout.prompts_per_step, cfg.rollout.group_size = records // 8, 8
        cfg.rollout.max_seq_len = step_max
        row_tokens = 0 if packing else 1  # padded: one record per row (a one-token budget)
        cfg.grpo = dataclasses.replace(cfg.grpo, micro_batch_size=8, logprob_chunk=128, row_tokens=row_tokens)
        fns = make_step_fns(
            model_fn, optax.adamw(1e-5), lambda s: 1e-5, cfg.grpo, temperature=1.0, fixed_length=step_max
        )
        updates[packing], fns_of[packing] = functools.partial(_update, cfg, fns, batch), fns
        state = init_train_state(jax.tree.map(jnp.copy, params), optax.adamw(1e-5))
        states[packing], metrics[packing] = updates[packing](state)  # compile
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(repeats):  # interleaved, so a change in the machine's load hits both layouts
        for packing in (False, True):
            (states[packing], metrics[packing]), wall, cpu = timed(updates[packing], states[packing])
            times[packing].append((wall, cpu))
    out = []
    for packing in (False, True):
        wall, cpu = np.median(times[packing], axis=0)
        name = "packed" if packing else "padded"
        step = fns_of[packing].grpo_grad
        m = metrics[packing]
        out.append((name, m["rows"], m["useful_token_share"], step.fn._cache_size(), wall, cpu))
    return out


def _update(cfg, fns, batch, state):
    """One GRPO update, finished (its state on the host's hands) before the clock stops."""
    import jax

    from b2tjax.grpo.update import UpdateSpec, grpo_update

    state, metrics = grpo_update(
        UpdateSpec.of(cfg.grpo, cfg.rollout, cfg.rollout_batch, 1), fns, state, batch, seed=0
    )
    return jax.block_until_ready(state), metrics


def _record(rng, n: int, record_type):
    """A record of n tokens: a prompt of a quarter, then turns of 16-48 sampled and 8-24 env tokens."""
    rec = record_type(instance_id="r", prompt_len=n // 4, reward=float(rng.integers(0, 2)))
    ids = rng.integers(0, 1024, n).tolist()
    rec.append(ids[: n // 4], sampled=False)
    at = n // 4
    while at < n:
        turn = ids[at : at + int(rng.integers(16, 49))]
        rec.append(turn, sampled=True, logprobs=(-2.0 + rng.normal(0, 0.3, len(turn))).tolist())
        at += len(turn)
        env = ids[at : at + int(rng.integers(8, 25))]
        rec.append(env, sampled=False)
        at += len(env)
    return rec


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="a data directory (launch/make_data.py) with expert traces")
    source.add_argument("--lengths", type=Path, help="a file of record lengths, one integer per line")
    parser.add_argument("--benchmark", default="b2t", help="the data directory's benchmark (with --data)")
    parser.add_argument(
        "--qwen3",
        action="store_true",
        help="with --data: the Qwen3 token totals recorded in DATA/trace_lengths.json",
    )
    parser.add_argument("--records", type=int, nargs="+", default=[32, 256], help="records per step")
    parser.add_argument("--steps", type=int, default=50, help="steps drawn per record count")
    parser.add_argument("--row-tokens", type=int, default=0, help="row budget; 0 = the longest's bucket")
    parser.add_argument("--micro-rows", type=int, default=8, help="rows per micro-batch")
    parser.add_argument(
        "--row-widths", type=int, default=16, help="packed micro-batches' widths (grpo.row_widths)"
    )
    parser.add_argument("--row-devices", type=int, default=1, help="data x fsdp devices of a micro-batch")
    parser.add_argument(
        "--step-records", type=int, default=64, help="records of the grpo_update case; 0 = skip"
    )
    parser.add_argument("--step-max", type=int, default=512, help="longest record of the grpo_update case")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.qwen3 and not args.data:
        parser.error("--qwen3 reads a data directory's trace_lengths.json: give --data")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.lengths:
        lengths = [int(line) for line in args.lengths.read_text().split()]
        source = str(args.lengths)
    elif args.qwen3:
        lengths = recorded_lengths(args.data)
        source = f"expert traces in {args.data} (Qwen3 tokens, {args.data / 'trace_lengths.json'})"
    else:
        lengths = trace_lengths(args.data, args.benchmark)
        source = f"{args.benchmark} expert traces in {args.data}"
    if not lengths or min(lengths) < 1:
        raise SystemExit("bench_packing: need at least one positive record length")
    row_tokens = args.row_tokens or pad_length(max(lengths))
    q = np.percentile(lengths, [50, 90, 100]).astype(int).tolist()
    print(f"lengths: {len(lengths)} from {source}; median {q[0]}, p90 {q[1]}, max {q[2]}")
    print(
        f"rows of {row_tokens} tokens, micro-batches of at most {args.micro_rows} rows "
        f"over {args.row_devices} row device(s)"
    )
    columns = ["records/step", "layout", "tokens computed/step", "useful share", "compiled shapes"]
    print("| " + " | ".join([*columns, "layout wall ms", "layout CPU ms"]) + " |")
    print("|---|---|---|---|---|---|---|")
    for records in args.records:
        for name, tokens, share, shapes, wall, cpu in layout_rows(
            lengths,
            records,
            args.steps,
            (row_tokens, args.micro_rows, args.row_widths, args.row_devices),
            args.seed,
        ):
            print(f"| {records} | {name} | {tokens:,.0f} | {share:.3f} | {shapes} | {wall:.2f} | {cpu:.2f} |")
    if args.step_records:
        rows = step_case(lengths, args.step_records, args.step_max, args.repeats, args.seed)
        print(
            f"\ngrpo_update, tiny Qwen3 on CPU: {args.step_records} records of at most {args.step_max} tokens"
        )
        print(
            "| layout | rows | useful share | compiled train programs | step wall s | step CPU s "
            "| speed-up (wall) | speed-up (CPU) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for name, n_rows, share, programs, wall, cpu in rows:
            print(
                f"| {name} | {n_rows:.0f} | {share:.3f} | {programs} | {wall:.2f} | {cpu:.2f} "
                f"| {rows[0][4] / wall:.2f}x | {rows[0][5] / cpu:.2f}x |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
