"""Benchmark: synchronous GRPO steps vs streaming rollouts (rollout.max_staleness).

A step-shaped loop, co-located (decoding and the weight update alternate on one device): every step
rolls out `--prompts` x `--group` episodes on `--rows` rows of a tiny random Qwen3, then updates
the weights (`engine.update_weights`, plus `--train-ms` of simulated optimizer time: the CPU cannot
show a real step's cost next to a real model's decode). The episode lengths are long-tailed, as agent
episodes are: most take `--turns` turns, `--long` of each step's episodes take `--tail` x that many
(a turn is at most `--turn-tokens` sampled tokens, closed at the cap, then a short environment reply).

  synchronous : each step's episodes run to their end (`RolloutEngine.run`), today's trainer;
  staleness S : one `rollout.session.RolloutSession`, the next S steps' episodes submitted ahead,
                the step takes its own groups when they finish (b2tjax/run/streaming.py's schedule);
  decode during update (`--during S`, rollout.decode_during_update): the split placement's
                schedule. While the simulated update sleeps, a second thread decodes the next
                step's batch under the old weights; the step then waits only for what decoding
                outlasts the update. The sleep stands for a train sub-mesh busy with the update:
                on a CPU a real update would take the same cores the decoding needs, so only an
                accelerator (benchmarks/gpu_check.py --checks streaming) can show a real split.

Columns: row occupancy (generated tokens / (decode steps x rows), over the whole run), decode steps,
wall per trained episode and its ratio to synchronous, and the trainer's idle share (the part of the
wall spent waiting for rollouts; the simulated update is the rest).

    python benchmarks/bench_streaming.py [--steps 12] [--prompts 4] [--group 4] [--rows 8] [--tail 6]
        [--train-ms 0] [--staleness 1 2] [--during 1]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import time
from pathlib import Path

import numpy as np


def build(vocab_words: int):
    from flax import nnx

    from b2tjax.tasks.toy_tools import lookup_tokenizer
    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM

    # A few hundred words: the stop tokens are rarely sampled, so turns run to their cap.
    tok = lookup_tokenizer(vocab_words, vocab_words)
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=tok.vocab_size)
    return tok, Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))


def length_episodes(tok, step: int, count: int, turns: int, tail: int, long: int):
    """`count` episodes of `turns` turns, `long` of them (at seeded places) of `turns * tail`."""
    from models.chat import render
    from rollout.episodes import Continue, Episode, Stop, TurnOutcome
    from rollout.render import render_env_reply

    class Lengthy(Episode):
        def __init__(self, name: str, key: int, total: int):
            self.instance_id, self.key, self.total, self.done = name, key, total, 0

        def start(self):
            prompt = render([{"role": "user", "content": f"k{self.key}"}], add_generation_prompt=True)
            return [Continue("main", tok.encode(prompt))]

        def on_turn_end(self, stream, text, eos):
            self.done += 1
            if self.done >= self.total:
                return TurnOutcome([Stop(stream, "answer", "")])
            return TurnOutcome([Continue(stream, render_env_reply(tok, f"result v{self.done}"))])

    rng = np.random.default_rng([7, step])
    tails = set(rng.choice(count, size=long, replace=False).tolist())
    return [Lengthy(f"s{step}-{i}", i % 8, turns * (tail if i in tails else 1)) for i in range(count)]


def engine_config(args, staleness: int):
    from rollout import RolloutConfig

    return RolloutConfig(
        batch_rows=args.rows,
        max_turns=args.turns * args.tail + 1,
        max_turn_tokens=args.turn_tokens,
        max_seq_len=args.turns * args.tail * (args.turn_tokens + 16) + 64,
        temperature=1.0,
        turn_cap="close",
        prefill_chunk=128,
        max_staleness=staleness,
    )


def run_mode(args, tok, model, staleness: int, during: bool = False) -> dict:
    """`args.steps` steps on a fresh engine; the run's totals. `during`: the next step decodes in a
    second thread while the simulated update runs (the split placement's schedule)."""
    from rollout import RolloutEngine

    engine = RolloutEngine(model, tok, engine_config(args, staleness))
    per_step = args.prompts * args.group
    make = lambda step: length_episodes(tok, step, per_step, args.turns, args.tail, args.long)  # noqa: E731
    totals = dict(generated=0, decode_steps=0, rollout_s=0.0, trained=0)
    t0 = time.perf_counter()
    session = engine.session(rng=0) if staleness else None
    ahead: dict[int, list[int]] = {}
    ready: dict[int, concurrent.futures.Future] = {}

    def decode(step: int):  # b2tjax/run/streaming.py's schedule: groups start S (or S - 1) steps ahead
        for j in range(step, min(step + staleness - int(during), args.steps) + 1):
            if j not in ahead:
                ahead[j] = session.submit(make(j))
        return session.advance(ahead.pop(step)), session.stats

    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        for step in range(1, args.steps + 1):
            r0 = time.perf_counter()
            if session is None:
                records, stats = engine.run(make(step), rng=step), engine.stats
            else:
                records, stats = ready.pop(step).result() if step in ready else decode(step)
            totals["rollout_s"] += time.perf_counter() - r0  # the trainer waits for its batch
            totals["generated"] += stats.generated_tokens
            totals["decode_steps"] += stats.decode_steps
            totals["trained"] += len(records)
            if during and step < args.steps:
                ready[step + 1] = thread.submit(decode, step + 1)
            time.sleep(args.train_ms / 1000)  # the simulated optimizer step
            if step + 1 in ready:
                w0 = time.perf_counter()
                concurrent.futures.wait([ready[step + 1]])
                totals["rollout_s"] += time.perf_counter() - w0
            (session or engine).update_weights(model)
    wall = time.perf_counter() - t0
    if session is not None:
        session.close()
    name = "synchronous" if not staleness else f"streaming, max_staleness {staleness}"
    return {
        "mode": name + (", decode during update" if during else ""),
        "occupancy": totals["generated"] / max(totals["decode_steps"] * args.rows, 1),
        "decode_steps": totals["decode_steps"],
        "generated": totals["generated"],
        "wall_s": wall,
        "wall_per_episode_ms": 1000 * wall / totals["trained"],
        "trainer_idle": totals["rollout_s"] / wall,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--turns", type=int, default=2, help="turns of a median episode")
    p.add_argument("--tail", type=int, default=6, help="a long episode has this many times more turns")
    p.add_argument("--long", type=int, default=2, help="long episodes per step")
    p.add_argument("--turn-tokens", type=int, default=16)
    p.add_argument("--train-ms", type=float, default=0.0, help="simulated optimizer time per step")
    p.add_argument("--staleness", type=int, nargs="+", default=[1, 2])
    p.add_argument(
        "--during", type=int, nargs="*", default=[1], help="staleness values also run decoding during updates"
    )
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    tok, model = build(vocab_words=200)
    print(
        f"{args.steps} steps x {args.prompts * args.group} episodes on {args.rows} rows; "
        f"{args.long} per step {args.tail}x the median {args.turns} turns of <= {args.turn_tokens} tokens",
        flush=True,
    )
    modes = [(0, False), *((s, False) for s in args.staleness), *((s, True) for s in args.during)]
    for staleness, during in modes:  # untimed: compiles every shape any mode meets
        run_mode(args, tok, model, staleness, during)
    rows = [run_mode(args, tok, model, s, during) for s, during in modes]
    base = rows[0]["wall_per_episode_ms"]
    columns = ("occupancy", "decode steps", "ms/episode", "vs sync", "idle")
    print(f"{'mode':52s} " + " ".join(f"{c:>{max(len(c), 7)}s}" for c in columns))
    for r in rows:
        r["speedup"] = base / r["wall_per_episode_ms"]
        print(
            f"{r['mode']:52s} {r['occupancy']:9.2f} {r['decode_steps']:12d} {r['wall_per_episode_ms']:10.1f} "
            f"{r['speedup']:6.2f}x {r['trainer_idle']:5.2f}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
