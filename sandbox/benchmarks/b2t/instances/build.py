"""Build the benchmark of a data directory: splits validated by the expert, stats, SFT traces.

Each instance is generated, then solved by the expert planner through the real environment; an
instance the expert cannot solve is regenerated with the next retry salt (and reported), so
every kept instance has a plan passing all 32 constraints. The expert's transcripts of the train
split are the chain-of-action SFT data (their prompts built in the workers too). Work is spread
over processes in chunks of instances, each kept as a file when done (sandbox.chunked); results
are gathered in order, so the files are identical for any worker count and after a resumed build.
"""

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.benchmarks.b2t.expert import Expert
from sandbox.benchmarks.b2t.instances.catalog import Catalog
from sandbox.benchmarks.b2t.instances.generate import (
    SPLIT_SIZES,
    Instance,
    make_instance,
    split_lines,
)
from sandbox.benchmarks.b2t.instances.profiles import DIFFICULTIES
from sandbox.benchmarks.b2t.instances.stats import format_table, split_stats
from sandbox.benchmarks.b2t.tools.registry import tool_schemas
from sandbox.benchmarks.b2t.world.store import open_world
from sandbox.chunked import CHUNKS_DIR, Workers, map_chunks

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
CHUNK = 4  # instances per resumable unit of work (sandbox.chunked)


def _init_worker(store: str, use_expert: bool, prompt_builder: PromptBuilder | None) -> None:
    _STATE["catalog"] = Catalog.load(store)
    _STATE["prompt_builder"] = prompt_builder
    _STATE["schemas"] = tool_schemas(python=True)  # the traces list every tool, Python included
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


def _build_chunk(tasks: list[tuple[str, str, int, int, str]]) -> list[dict[str, Any]]:
    """Each task's instance and hidden truth as their file lines, its SFT line (the prompt is built
    here, in the worker, not in the parent) and the expert's failures on the rejected variants."""
    out = []
    for task in tasks:
        b = _build_one(task)
        sft = None
        if b.turns is not None and task[0] == "train":
            record = trace_record(b.instance.visible, b.turns, _STATE["schemas"], _STATE["prompt_builder"])
            # Keys in their built order (deterministic): sorting would reorder the tool schemas,
            # and the SFT prompt would then differ from the one rollouts and the served template
            # render from the same tool_schemas().
            sft = json.dumps(record, ensure_ascii=False)
        out.append({**split_lines(b.instance), "sft": sft, "failures": b.failures})
    return out


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
    `timings` (seconds per split), which stay out of stats.json so that it is byte-reproducible.
    Finished chunks under out_dir/.chunks are loaded, not rebuilt (a resumed build)."""
    out_dir = Path(out_dir)
    sizes = sizes or SPLIT_SIZES[scale]
    stats: dict[str, Any] = {}
    report: dict[str, Any] = {}
    timings: dict[str, float] = {}
    # chunks of other settings (a caller reusing out_dir) are never taken for this build's
    spec = json.dumps([seed, language, use_expert, prompt_builder is not None, sizes]).encode()
    chunks = out_dir / CHUNKS_DIR / f"instances-{hashlib.sha256(spec).hexdigest()[:12]}"
    with Workers(workers, _init_worker, (str(store), use_expert, prompt_builder)) as pool:
        for split, per_difficulty in sizes.items():
            tasks = [(split, d, i, seed, language) for d in DIFFICULTIES for i in range(per_difficulty)]
            started = time.monotonic()
            records = map_chunks(
                pool,
                _build_chunk,
                tasks,
                store=chunks,
                label=f"instances-{split}",
                size=CHUNK,
                log=log,
            )
            visible, hidden, failures = _write_split(out_dir, split, records, split == "train" and use_expert)
            stats[split] = split_stats(visible, hidden)
            timings[split] = round(time.monotonic() - started, 1)
            report[split] = {
                "instances": len(visible),
                "regenerated": len(failures),
                "expert_failures": Counter(f.split(": ", 1)[1] for f in failures).most_common(5),
            }
            if failures:
                log(
                    f"[instances {split}] regenerated {len(failures)} instance(s) the expert could "
                    f"not solve, e.g. {failures[0]}"
                )
    (out_dir / "stats.json").write_text(
        json.dumps({"table2": stats, "generation": report}, indent=2, sort_keys=True) + "\n"
    )
    log(format_table(stats))
    return {"table2": stats, "generation": report, "timings": timings}


def _write_split(
    out_dir: Path, split: str, records: Iterable[dict[str, Any]], with_sft: bool
) -> tuple[list, list, list]:
    """instances/, ground_truth/ and (with_sft) sft/ files of a split, streamed from the chunks;
    returns the visible and hidden dicts (for the stats) and the expert's failures."""
    visible: list[dict] = []
    hidden: list[dict] = []
    failures: list[str] = []
    subs = ("instances", "ground_truth", "sft") if with_sft else ("instances", "ground_truth")
    with ExitStack() as stack:
        files = {}
        for sub in subs:
            (out_dir / sub).mkdir(parents=True, exist_ok=True)
            files[sub] = stack.enter_context(open(out_dir / sub / f"{split}.jsonl", "w", encoding="utf-8"))
        for r in records:
            files["instances"].write(r["visible"] + "\n")
            files["ground_truth"].write(r["hidden"] + "\n")
            if with_sft:
                files["sft"].write(r["sft"] + "\n")
            visible.append(json.loads(r["visible"]))
            hidden.append(json.loads(r["hidden"]))
            failures += r["failures"]
    return visible, hidden, failures


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
