"""Speed benchmark: sequential single agent vs HiMAP parallel vs HiMAP serial on the same instances and
tiny model.

    python benchmarks/bench_himap.py [--data DATA] [--per-days 1] [--json OUT.json]

For each 3-, 5- and 7-day B2T trip (native instances of the test split, then train), the scripted
experts' turns are replayed through the RolloutEngine as forced tokens, one episode at a time:
the single-agent expert's turns in one stream (sequential), and the HiMAP expert's coordinator and
day executors with parallel and with serial executors. The plan content is therefore the experts'
(final pass = theirs), and the engine, the environment and Σ run for real.

Figures per episode: decode steps on the critical path (the primary figure: the assistant tokens
a model decodes one after another -- sequential: every turn; HiMAP: the coordinator's turns, then
per round the executors' lockstep turns, each as long as its longest executor's turn in parallel,
all of them in serial), tokens generated (assistant turns) and prefilled (prompts and environment
replies: every stream's context), the replay's wall time, which is host time only (protocol,
tools, Σ: the engine runs no model step for a turn that is forced to its end), and final pass.
Ratios are against the sequential agent. Latency on an accelerator follows the critical path
(decode-bound); on 2 CPU cores rows are not free, so wall time there is not reported as latency.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

MODES = ("sequential", "himap_parallel", "himap_serial")
DAYS = (3, 5, 7)
REPLY_CHARS = 1200  # environment replies in the replay (all modes; the experts read full ones)


def setup(data_dir: Path) -> tuple[Any, Any, Any]:
    """(benchmark, SentencePiece tokenizer trained on its corpus, random tiny Qwen3)."""
    import dataclasses

    from flax import nnx

    from b2tjax.prepare import ensure_data
    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM
    from models.spm import SentencePieceTokenizer, train_sentencepiece
    from sandbox.benchmarks import get_benchmark

    ensure_data(data_dir, "small")
    bench = get_benchmark("b2t", data_dir)
    path = data_dir / "tokenizer" / "bench_himap_sp4096.model"
    if not path.exists():
        train_sentencepiece(bench.tokenizer_corpus(), path.with_suffix(""), vocab_size=4096)
    tok = SentencePieceTokenizer(path)
    model = Qwen3ForCausalLM(
        dataclasses.replace(get_config("tiny"), vocab_size=tok.vocab_size), rngs=nnx.Rngs(0)
    )
    return bench, tok, model


def pick_instances(bench: Any, per_days: int) -> list[tuple[dict, dict]]:
    """`per_days` native instances of each trip length in DAYS (test split first)."""
    pool = bench.load_split("test") + bench.load_split("train")
    out = []
    for days in DAYS:
        found = [p for p in pool if p[1]["query"]["days"] == days][:per_days]
        if len(found) < per_days:
            raise SystemExit(f"error: fewer than {per_days} {days}-day instances in the data")
        out += found
    return out


def sequential_episode(bench: Any, tok: Any, visible: dict, truth: dict) -> Any:
    """The single-agent expert's turns, forced, in one stream with the agent's prompt and tools."""
    from rollout import ForcedTokens
    from rollout.prompt import prompt_ids
    from sandbox.benchmarks.b2t.expert import Expert
    from sandbox.env import EpisodeEnv

    result = Expert(bench.world).solve(visible, truth)
    texts = [m["content"] for m in result.turns if m["role"] == "assistant"]
    prompt = bench.prompt(visible, variant="tool_agent", memory=True)
    env = EpisodeEnv(
        bench.world_for(visible),
        memory_enabled=True,
        max_turns=len(texts) + 1,
        max_response_chars=REPLY_CHARS,
    )
    forced = {k: text + "<|im_end|>" for k, text in enumerate(texts)}
    return ForcedTokens(str(visible["id"]), prompt_ids(prompt, tok), env, tok, forced_turns=forced)


def himap_episode_for(bench: Any, tok: Any, visible: dict, truth: dict, parallel: bool) -> Any:
    from rollout.agents.himap import himap_episode
    from sandbox.himap.options import HimapOptions
    from sandbox.himap.scripted import solve

    expert = solve(bench, visible, truth, HimapOptions(parallel=parallel))
    # the texts alone decide the protocol's course, so shorter replies in the replay change nothing
    replay = HimapOptions(parallel=parallel, max_response_chars=REPLY_CHARS)
    return himap_episode(visible, bench, tok, replay, forced=expert.texts)


def turn_lengths(record: Any) -> list[int]:
    return [end - start for start, end in record.turns]


def critical_path(records: list[Any], parallel: bool) -> int:
    """Assistant tokens decoded one after another (see the module docstring)."""
    steps = 0
    rounds: dict[int, list[list[int]]] = collections.defaultdict(list)
    for record in records:
        if record.role == "executor":
            rounds[record.round].append(turn_lengths(record))
        else:  # the single agent, or the coordinator (it acts only between rounds)
            steps += sum(turn_lengths(record))
    for turns in rounds.values():
        if parallel:  # lockstep tick k lasts as long as the longest executor's turn k
            ticks = max(len(t) for t in turns)
            steps += sum(max(t[k] for t in turns if k < len(t)) for k in range(ticks))
        else:
            steps += sum(sum(t) for t in turns)
    return steps


def run_one(engine: Any, episode: Any, mode: str) -> dict[str, float]:
    started = time.perf_counter()
    records = engine.run([episode], rng=0)
    wall = time.perf_counter() - started
    generated = sum(sum(turn_lengths(r)) for r in records)
    return {
        "replay_s": wall,
        "critical_decode_steps": critical_path(records, parallel=mode != "himap_serial"),
        "generated": generated,
        "coordinator": sum(sum(turn_lengths(r)) for r in records if r.role == "coordinator"),
        "prefilled": sum(len(r.ids) for r in records) - generated,
        "streams": len(records),
        "answer": next((r.answer for r in records if r.answer is not None), None),
    }


def measure(bench: Any, tok: Any, model: Any, pairs: list) -> list[dict]:
    from rollout import RolloutConfig, RolloutEngine

    config = RolloutConfig(
        batch_rows=8,
        max_turns=64,
        max_turn_tokens=64,
        max_seq_len=65536,
        temperature=0.0,
        prefill_chunk=2048,
        prefill_min_bucket=256,
    )
    engine = RolloutEngine(model, tok, config)
    visible, truth = pairs[0]  # warm-up: compile the prefill widths before anything is timed
    for parallel in (True, False):
        engine.run([himap_episode_for(bench, tok, visible, truth, parallel)], rng=0)
    engine.run([sequential_episode(bench, tok, visible, truth)], rng=0)
    rows = []
    for visible, truth in pairs:
        for mode in MODES:
            if mode == "sequential":
                episode = sequential_episode(bench, tok, visible, truth)
            else:
                episode = himap_episode_for(bench, tok, visible, truth, parallel=mode == "himap_parallel")
            row = run_one(engine, episode, mode)
            row["passed"] = float(bench.evaluate(row.pop("answer"), visible, truth).all_passed)
            rows.append({"mode": mode, "days": truth["query"]["days"], "id": visible["id"], **row})
            print(f"  {visible['id']} {row['streams']:>2} streams {mode}: {row['replay_s']:.1f}s", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    keys = ("critical_decode_steps", "coordinator", "generated", "prefilled", "replay_s", "streams", "passed")
    mean = {
        (d, m): {k: statistics.fmean(r[k] for r in rows if r["days"] == d and r["mode"] == m) for k in keys}
        for d in DAYS
        for m in MODES
    }
    lines = [
        "| days | mode | streams | critical-path decode steps (coordinator) | tokens generated | "
        "tokens prefilled | replay (host) s | final pass | critical path x | generated x | prefilled x |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in DAYS:
        base = mean[(d, "sequential")]
        for m in MODES:
            v = mean[(d, m)]
            lines.append(
                f"| {d} | {m} | {v['streams']:.1f} | "
                f"{v['critical_decode_steps']:.0f} ({v['coordinator']:.0f}) | "
                f"{v['generated']:.0f} | {v['prefilled']:.0f} | {v['replay_s']:.2f} | {v['passed']:.2f} | "
                f"{v['critical_decode_steps'] / base['critical_decode_steps']:.2f} | "
                f"{v['generated'] / base['generated']:.2f} | {v['prefilled'] / base['prefilled']:.2f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("DATA"), help="B2T data (built when absent)")
    p.add_argument("--per-days", type=int, default=2, help="instances per trip length")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    started = time.perf_counter()
    bench, tok, model = setup(args.data)
    pairs = pick_instances(bench, args.per_days)
    rows = measure(bench, tok, model, pairs)
    print(table(rows))
    print(f"total {time.perf_counter() - started:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
