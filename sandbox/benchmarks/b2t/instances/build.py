"""Build the benchmark of a data directory: splits validated by the expert, stats, SFT traces.

Each instance is generated, then solved by the expert planner through the real environment; an
instance the expert cannot solve is regenerated with the next retry salt (and reported), so
every kept instance has a plan passing all 32 constraints. The expert's transcripts of the train
split are the chain-of-action SFT data. Work is spread over processes instance by instance;
results are gathered in order, so the files are identical for any worker count.
"""

import json
import multiprocessing as mp
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.benchmarks.b2t.expert import Expert
from sandbox.benchmarks.b2t.instances.catalog import Catalog
from sandbox.benchmarks.b2t.instances.generate import (
    SPLIT_SIZES,
    Instance,
    Progress,
    make_instance,
    write_split,
)
from sandbox.benchmarks.b2t.instances.profiles import DIFFICULTIES
from sandbox.benchmarks.b2t.instances.stats import format_table, split_stats
from sandbox.benchmarks.b2t.tools.registry import tool_schemas
from sandbox.benchmarks.b2t.world.store import open_world

MAX_RETRIES = 8

# Builds the chat prompt of a visible instance: (instance, tool_schemas) -> object with
# `.messages` (system + user) and `.tools` (sandbox.benchmarks.b2t.prompt.build_prompt fits).
PromptBuilder = Callable[[dict[str, Any], list[dict[str, Any]]], Any]


@dataclass
class Built:
    instance: Instance
    turns: list[dict[str, str]] | None  # expert transcript after the prompt
    retries: int
    failures: list[str]


_STATE: dict[str, Any] = {}


def _init_worker(store: str, use_expert: bool) -> None:
    _STATE["catalog"] = Catalog.load(store)
    if use_expert:
        _STATE["expert"] = Expert(open_world(store))


def _build_one(task: tuple[str, str, int, int, str]) -> Built:
    split, difficulty, index, seed, language = task
    failures: list[str] = []
    expert = _STATE.get("expert")
    for salt in range(MAX_RETRIES + 1):
        inst = make_instance(_STATE["catalog"], split, difficulty, index, seed, language, salt)
        if expert is None:
            return Built(inst, None, salt, failures)
        result = expert.solve(inst.visible, inst.hidden)
        if result.ok and not result.any_error:
            return Built(inst, result.turns, salt, failures)
        failures.append(f"{inst.visible['id']} (salt {salt}): {result.reason}")
    raise RuntimeError(
        f"the expert solved no variant of {split}-{difficulty}-{index}: " + "; ".join(failures[-3:])
    )


def build_benchmark(
    store: str | Path,
    out_dir: str | Path,
    scale: str = "small",
    seed: int = 0,
    language: str = "en",
    workers: int = 1,
    use_expert: bool = True,
    sizes: dict[str, int] | None = None,
    log: Callable[[str], None] = print,
    prompt_builder: PromptBuilder | None = None,
) -> dict[str, Any]:
    """Write instances/, ground_truth/, stats.json (and sft/train.jsonl); returns the stats plus
    `timings` (seconds per split), which stay out of stats.json so that it is byte-reproducible."""
    out_dir = Path(out_dir)
    sizes = sizes or SPLIT_SIZES[scale]
    stats: dict[str, Any] = {}
    report: dict[str, Any] = {}
    timings: dict[str, float] = {}
    # forkserver: never fork the caller, which may be a multi-threaded JAX process (launch/train.py)
    ctx = mp.get_context("forkserver") if workers > 1 else None
    pool = ctx.Pool(workers, _init_worker, (str(store), use_expert)) if ctx else None
    if pool is None:
        _init_worker(str(store), use_expert)
    try:
        for split, per_difficulty in sizes.items():
            tasks = [(split, d, i, seed, language) for d in DIFFICULTIES for i in range(per_difficulty)]
            progress = Progress(f"instances {split}", log=log)
            started = time.monotonic()
            built: list[Built] = []
            results = pool.imap(_build_one, tasks, chunksize=4) if pool else map(_build_one, tasks)
            for b in results:
                built.append(b)
                progress(len(built), len(tasks))
            instances = [b.instance for b in built]
            write_split(out_dir, split, instances)
            stats[split] = split_stats([i.visible for i in instances], [i.hidden for i in instances])
            failures = [f for b in built for f in b.failures]
            timings[split] = round(time.monotonic() - started, 1)
            report[split] = {
                "instances": len(instances),
                "regenerated": len(failures),
                "expert_failures": Counter(f.split(": ", 1)[1] for f in failures).most_common(5),
            }
            if failures:
                log(
                    f"[instances {split}] regenerated {len(failures)} instance(s) the expert could "
                    f"not solve, e.g. {failures[0]}"
                )
            if split == "train" and use_expert:
                _write_sft(out_dir, built, prompt_builder, store)
    finally:
        if pool:
            pool.close()
            pool.join()
    (out_dir / "stats.json").write_text(
        json.dumps({"table2": stats, "generation": report}, indent=2, sort_keys=True) + "\n"
    )
    log(format_table(stats))
    return {"table2": stats, "generation": report, "timings": timings}


def _write_sft(
    out_dir: Path, built: list[Built], prompt_builder: PromptBuilder | None, store: str | Path
) -> None:
    """sft/train.jsonl: {"id", "messages", "tools"} per train instance (see the B2T README)."""

    schemas = tool_schemas(python=True)  # the traces list every tool, Python included
    (out_dir / "sft").mkdir(parents=True, exist_ok=True)
    with open(out_dir / "sft" / "train.jsonl", "w", encoding="utf-8") as f:
        for b in built:
            record = trace_record(b.instance.visible, b.turns, schemas, prompt_builder)
            # Keys in their built order (deterministic): sorting would reorder the tool schemas,
            # and the SFT prompt would then differ from the one rollouts and the served template
            # render from the same tool_schemas().
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def trace_record(
    visible: dict[str, Any],
    turns: list[dict[str, str]],
    schemas: list[dict[str, Any]],
    prompt_builder: PromptBuilder | None,
) -> dict[str, Any]:
    """One SFT example. With a prompt builder: the full chat (system, user, then the expert's
    turns); without one, the turns follow a placeholder and `prompt` says to build it."""
    if prompt_builder is not None:
        prompt = prompt_builder(visible, schemas)
        return {"id": visible["id"], "messages": list(prompt.messages) + list(turns), "tools": prompt.tools}
    return {
        "id": visible["id"],
        "prompt": "build with sandbox.benchmarks.b2t.prompt.build_prompt(instance, tools)",
        "messages": list(turns),
        "tools": schemas,
    }
