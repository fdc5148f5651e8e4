"""Speed benchmark: sequential single agent vs HiMAP (parallel, serial, no Σ, flat) on 3-, 5- and
7-day trips.

    python benchmarks/bench_himap.py --benchmark b2t [--data DATA] [--per-days 2] [--json OUT.json]
    python benchmarks/bench_himap.py --benchmark travelplanner [--per-days 2]
    python benchmarks/bench_himap.py --benchmark b2t --engine 2   # + the engine's prefill counts

For each trip the scripted experts' turns are replayed, as text, through the real protocol (the
single agent's through an EpisodeEnv): the plans are the experts' (final pass = theirs), the
environment, Σ and the protocol's ordering run for real. Time is counted in **decode steps**: a
turn of n tokens (SentencePiece, trained on the benchmark's corpus) takes n steps, parallel
streams decode at the same time (on an accelerator decode is memory-bound: a row more costs
little), and a stream's next turn starts when the protocol answers it. So the episode's finish
time is its critical path: the coordinator's turns, then each executor's chain of turns, a
turn with protocol calls waiting for the logical clock (sandbox/himap/protocol.py), the round
ending with its slowest day. The session's clock is that step counter, so its phase marks give
the paper's Table-15 breakdown (coordinator / executors / bargaining) in decode steps.

Also per episode: tokens generated (every assistant token), tokens prefilled (every stream's
prompt and environment replies) and the same with each episode's executors' shared prompt prefix
(system message, tool schemas, trip essentials) counted once, as the engine's prefix reuse does;
rounds; final pass. Ratios are against the sequential agent. No wall time: on the 2-core host
rows are not free, so host time is not latency. `--engine N` also replays the first N 7-day trips
(sequential and full) through the real RolloutEngine with a tiny random model and prints the
prefill it computed and the prefix tokens it copied (benchmarks/himap_engine.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODES = ("sequential", "full", "serial", "no_sigma", "flat")
DAYS = (3, 5, 7)
REPLY_CHARS = 1200  # environment replies as the replay renders them (all modes alike)
KEYS = ("critical", "coordinator_s", "executors_s", "bargaining_s", "generated", "prefilled")
KEYS += ("prefilled_shared", "rounds", "streams", "passed")


@dataclasses.dataclass
class Setup:
    bench: Any
    tok: Any
    pairs: list[tuple[dict, dict]]
    single: Callable[[dict, dict], list[str]]  # the single expert's assistant turns
    passes: Callable[[str | None, dict, dict], bool]


def tokenizer_for(corpus: Callable[[], list[str]], path: Path) -> Any:
    from models.spm import SentencePieceTokenizer, train_sentencepiece

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        train_sentencepiece(corpus(), path.with_suffix(""), vocab_size=4096)
    return SentencePieceTokenizer(path)


def b2t_setup(data_dir: Path, per_days: int) -> Setup:
    from b2tjax.cli.prepare import ensure_data
    from sandbox.benchmarks import get_benchmark
    from sandbox.benchmarks.b2t.expert import Expert

    ensure_data(data_dir, "small")
    bench = get_benchmark("b2t", data_dir)
    pool = bench.load_split("test") + bench.load_split("train")
    pairs = pick(pool, per_days, lambda truth: truth["query"]["days"])
    expert = Expert(bench.world)

    def single(visible: dict, truth: dict) -> list[str]:
        return [m["content"] for m in expert.solve(visible, truth).turns if m["role"] == "assistant"]

    def passes(answer: str | None, visible: dict, truth: dict) -> bool:
        return answer is not None and bench.evaluate(answer, visible, truth).all_passed

    tok = tokenizer_for(bench.tokenizer_corpus, data_dir / "tokenizer" / "bench_himap_sp4096.model")
    return Setup(bench, tok, pairs, single, passes)


def travelplanner_setup(data: Path | None, cache: Path, per_days: int) -> Setup:
    from sandbox.benchmarks.travelplanner.benchmark import TravelPlannerBenchmark
    from sandbox.benchmarks.travelplanner.database import PACKAGE_DATA_DIR
    from sandbox.benchmarks.travelplanner.evaluator import evaluate
    from sandbox.benchmarks.travelplanner.expert import TravelPlannerExpert
    from sandbox.benchmarks.travelplanner.tools import TravelPlannerWorld
    from sandbox.benchmarks.travelplanner.training import load_training

    data = data or PACKAGE_DATA_DIR
    root = Path(tempfile.mkdtemp(prefix="bench_himap_tp_"))
    (root / "database").symlink_to(data / "database")
    bench = TravelPlannerBenchmark(root)
    examples = {str(e.index): e for e in load_training(data)}
    pool = [
        (
            {"id": i, "query": e.query["query"], "days": e.query["days"]},
            {"query": e.query, "cities": e.reference_cities},
        )
        for i, e in examples.items()
    ]
    pairs = pick(pool, per_days, lambda truth: int(truth["query"]["days"]))
    expert = TravelPlannerExpert(TravelPlannerWorld(bench.db))

    def single(visible: dict, truth: dict) -> list[str]:
        return [m["content"] for m in expert.solve(visible, truth).turns if m["role"] == "assistant"]

    def passes(answer: str | None, visible: dict, truth: dict) -> bool:
        plan = json.loads(answer) if answer else []
        return bool(answer) and evaluate(examples[visible["id"]].query, plan, bench.db).final_pass

    def corpus() -> list[str]:  # no DATA here: the queries, tool schemas and the expert's turns
        texts = [v["query"] for v, _ in pool] + [json.dumps(bench.world_for(pool[0][0]).tool_schemas())]
        return texts + [t for v, h in pairs for t in single(v, h)]

    tok = tokenizer_for(corpus, cache / "bench_himap_tp_sp4096.model")
    return Setup(bench, tok, pairs, single, passes)


def pick(pool: list, per_days: int, days_of: Callable[[dict], int]) -> list:
    out = []
    for days in DAYS:
        found = [p for p in pool if days_of(p[1]) == days][:per_days]
        if len(found) < per_days:
            raise SystemExit(f"error: fewer than {per_days} {days}-day instances in the data")
        out += found
    return out


def turn_tokens(tok: Any, text: str) -> int:
    return len(tok.encode(text)) + 1  # + <|im_end|>


def sequential(s: Setup, visible: dict, truth: dict) -> dict[str, float]:
    """The single agent: every turn on the path; its prompt and replies prefilled."""
    from rollout.prompt import prompt_ids
    from rollout.render import render_env_reply
    from sandbox.env import EpisodeEnv

    texts = s.single(visible, truth)
    world = s.bench.world_for(visible)
    env = EpisodeEnv(world, memory_enabled=True, max_turns=len(texts) + 1, max_response_chars=REPLY_CHARS)
    prefilled = len(prompt_ids(s.bench.prompt(visible, variant="tool_agent", memory=True), s.tok))
    generated, answer = 0, None
    for text in texts:
        generated += turn_tokens(s.tok, text)
        step = env.step(text)
        if step.done:
            answer = step.answer
            break
        prefilled += len(render_env_reply(s.tok, step.rendered))
    row = {"critical": generated, "generated": generated, "prefilled": prefilled, "rounds": 0, "streams": 1}
    row.update(coordinator_s=0, executors_s=0, bargaining_s=0, prefilled_shared=prefilled)
    return {**row, "passed": float(s.passes(answer, visible, truth))}


def himap(s: Setup, visible: dict, truth: dict, mode: str) -> dict[str, float]:
    """The HiMAP expert's turns under `mode`, replayed on a decode-step clock (module docstring)."""
    from sandbox.himap.options import HimapOptions
    from sandbox.himap.scripted import solve

    options = HimapOptions.ablation(mode)
    texts = solve(s.bench, visible, truth, options).texts
    row = simulate(s, visible, texts, dataclasses.replace(options, max_response_chars=REPLY_CHARS))
    return {**row, "passed": float(s.passes(row.pop("answer"), visible, truth))}


def simulate(s: Setup, visible: dict, texts: dict[str, list[str]], options: Any) -> dict[str, Any]:
    from rollout.prompt import prompt_ids
    from rollout.render import render_env_reply
    from sandbox.himap.kinds import Role
    from sandbox.himap.protocol import HimapSession

    now = [0]
    session = HimapSession(s.bench.himap_domain(visible), options, clock=lambda: now[0])
    queue: list[tuple[int, int, str, str | None]] = []  # (finish step, order, stream, text)
    used: dict[str, int] = {}
    order = itertools.count()  # ties: hand-over order (the outcome does not depend on it)
    count = {"generated": 0, "prefilled": 0, "shared": 0}
    prompts: list[list[int]] = []  # executor prompts, to find the shared prefix

    def begin(name: str) -> None:
        k, recorded = used.get(name, 0), texts.get(name, [])
        text = recorded[k] if k < len(recorded) else None  # None: out of turns, cut it
        length = turn_tokens(s.tok, text) if text is not None else 0
        used[name] = k + 1
        count["generated"] += length
        heapq.heappush(queue, (now[0] + length, next(order), name, text))

    def handle(adv: Any) -> None:
        for start in adv.start:
            ids = prompt_ids(start.prompt, s.tok)
            count["prefilled"] += len(ids)
            if start.role == Role.EXECUTOR:
                if prompts:
                    count["shared"] += max(_common(ids, p) for p in prompts)
                prompts.append(ids)
            begin(start.name)
        for name, step in adv.reply:
            count["prefilled"] += len(render_env_reply(s.tok, step.rendered))
            begin(name)

    handle(session.start())
    while queue and not session.finished:
        now[0], _, name, text = heapq.heappop(queue)
        handle(session.cut(name, "no more turns") if text is None else session.turn(name, text))
    figures = session.figures()
    return {
        "critical": now[0],
        **{f"{k}_s": v for k, v in dataclasses.asdict(figures.phase_s).items()},
        "generated": count["generated"],
        "prefilled": count["prefilled"],
        "prefilled_shared": count["prefilled"] - count["shared"],
        "rounds": figures.rounds,
        "streams": figures.executors + int(session.coordinator is not None),
        "answer": session.answer,
    }


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def measure(s: Setup) -> list[dict]:
    rows = []
    for visible, truth in s.pairs:
        for mode in MODES:
            row = sequential(s, visible, truth) if mode == "sequential" else himap(s, visible, truth, mode)
            rows.append({"mode": mode, "days": int(truth["query"]["days"]), "id": visible["id"], **row})
        print(f"  {visible['id']}: {len(MODES)} modes", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    mean = {
        (d, m): {k: statistics.fmean(r[k] for r in rows if r["days"] == d and r["mode"] == m) for k in KEYS}
        for d in DAYS
        for m in MODES
    }
    lines = [
        "| days | mode | streams | rounds | critical path (coord / executors / bargaining) | generated | "
        "prefilled (shared prefix once) | final pass | critical x | generated x | prefilled x (shared) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in DAYS:
        base = mean[(d, "sequential")]
        for m in MODES:
            v = mean[(d, m)]
            phases = f"{v['coordinator_s']:.0f} / {v['executors_s']:.0f} / {v['bargaining_s']:.0f}"
            lines.append(
                f"| {d} | {m} | {v['streams']:.1f} | {v['rounds']:.1f} | {v['critical']:.0f} "
                f"({phases if m != 'sequential' else '-'}) | {v['generated']:.0f} | {v['prefilled']:.0f} "
                f"({v['prefilled_shared']:.0f}) | {v['passed']:.2f} | "
                f"{v['critical'] / base['critical']:.2f} | "
                f"{v['generated'] / base['generated']:.2f} | {v['prefilled'] / base['prefilled']:.2f} "
                f"({v['prefilled_shared'] / base['prefilled']:.2f}) |"
            )
    return "\n".join(lines)


def engine_table(s: Setup, count: int) -> str:
    """The engine's prefill for the first `count` 7-day trips, beside this benchmark's estimate."""
    from benchmarks.himap_engine import engine_counts
    from sandbox.himap.options import HimapOptions
    from sandbox.himap.scripted import solve

    lines = [
        "| trip | mode | prefilled (estimate; shared prefix once) | engine: computed - turns | "
        "engine: copied | final pass (engine replay) |",
        "|---|---|---|---|---|---|",
    ]
    full = HimapOptions.ablation("full")
    for visible, truth in [p for p in s.pairs if int(p[1]["query"]["days"]) == 7][:count]:
        runs = (
            ("sequential", s.single(visible, truth), None, sequential(s, visible, truth)),
            ("full", solve(s.bench, visible, truth, full).texts, full, himap(s, visible, truth, "full")),
        )
        for mode, texts, options, est in runs:
            got = engine_counts(s, visible, texts, options, REPLY_CHARS)
            lines.append(
                f"| {visible['id']} | {mode} | {est['prefilled']} ({est['prefilled_shared']}) | "
                f"{got['computed'] - est['generated']} | {got['copied']} | "
                f"{s.passes(got['answer'], visible, truth)} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", choices=("b2t", "travelplanner"), default="b2t")
    p.add_argument("--data", type=Path, default=Path("data/small"), help="B2T data (built when absent)")
    p.add_argument(
        "--tp-data",
        type=Path,
        default=None,
        help="TravelPlanner data (default: the copy shipped in the package)",
    )
    p.add_argument("--cache", type=Path, default=Path("runs/bench_himap"), help="TravelPlanner tokenizer")
    p.add_argument("--per-days", type=int, default=2, help="instances per trip length")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--engine", type=int, default=0, help="7-day trips also replayed through the engine")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.benchmark == "b2t":
        setup = b2t_setup(args.data, args.per_days)
    else:
        setup = travelplanner_setup(args.tp_data, args.cache, args.per_days)
    rows = measure(setup)
    print(table(rows))
    if args.engine:
        print(engine_table(setup, args.engine))
    print(f"total {time.perf_counter() - started:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
