"""Token lengths of the expert traces, recorded as data: DATA/trace_lengths.json.

A B2T expert trajectory is ~35k Qwen3 tokens; a recipe whose `max_seq_len` is shorter cuts SFT
traces into windows and truncates rollouts before they can answer. `launch/make_data.py` writes,
per split holding expert traces (DATA/sft/<split>.jsonl) and per difficulty, the distribution of
the prompt, generated (assistant turns), environment (tool and memory replies) and total tokens
(mean, p50, p90, p99, max), the longest assistant turn, and every trace's total, prompt and
longest turn,
so `launch/plan.py` and `launch/train.py` can say which share fits a recipe (b2tjax/cli/trace_fit.py).

The tokens are those SFT trains on: `b2tjax.sft.traces.encode_trace` with the Qwen3 tokenizer the
Qwen3 recipes use, over the trace's own tool list (the Python tool included);
`python_tool_tokens` is what that tool's schema adds to the prompt, which a run without the tool
(`rollout.python_tool: false`) does not have. Percentiles are nearest-rank (a value that occurs),
so the file is byte-reproducible. The traces are encoded by `workers` processes in resumable chunks
(sandbox.chunked), in order, so the file is the same for any worker count. Nothing here imports JAX
(make_data's workers must start before it).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from b2tjax.errors import UserError
from sandbox.benchmarks import BenchmarkError, get_benchmark
from sandbox.chunked import CHUNKS_DIR, Workers, map_chunks

LENGTHS = "trace_lengths.json"
TOKENIZER = "qwen3"  # the tokenizer of every Qwen3 recipe (model.tokenizer)
PERCENTILES = (50, 90, 99)
PARTS = ("prompt", "generated", "environment", "total", "longest_turn")
CHUNK = 4  # traces per resumable unit of work
_STATE: dict[str, Any] = {}


def percentile(sorted_values: Sequence[int], p: float) -> int:
    """Nearest-rank percentile: the smallest value with at least p% of the values at or below it."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return int(sorted_values[rank - 1])


def summary(values: Sequence[int]) -> dict[str, float | int]:
    """{"mean", "p50", "p90", "p99", "max"} of token counts."""
    ordered = sorted(values)
    out: dict[str, float | int] = {"mean": round(sum(ordered) / len(ordered), 1)}
    out.update({f"p{p}": percentile(ordered, p) for p in PERCENTILES})
    out["max"] = ordered[-1]
    return out


def trace_parts(mask: Sequence[int]) -> dict[str, int]:
    """Token counts of one encoded trace from its loss mask: the prompt is the untrained run before
    the first assistant token, generated tokens are the trained ones, the environment the rest."""
    prompt = next((i for i, m in enumerate(mask) if m), len(mask))
    generated = sum(1 for m in mask if m)
    longest = run = 0
    for m in mask:
        run = run + 1 if m else 0
        longest = max(longest, run)
    return {
        "prompt": prompt,
        "generated": generated,
        "environment": len(mask) - prompt - generated,
        "total": len(mask),
        "longest_turn": longest,
    }


def group_stats(parts: Sequence[dict[str, int]]) -> dict[str, Any]:
    """The summary of each part over a group of traces, and each trace's total, prompt and longest
    turn (sorted together by total), from which a recipe's share is counted."""
    rows = sorted((p["total"], p["prompt"], p["longest_turn"]) for p in parts)
    out: dict[str, Any] = {"traces": len(parts)}
    out.update({name: summary([p[name] for p in parts]) for name in PARTS})
    out["totals"] = [row[0] for row in rows]
    out["prompts"] = [row[1] for row in rows]
    out["longest_turns"] = [row[2] for row in rows]
    return out


def split_lengths(rows: Sequence[dict[str, Any]], difficulty: dict[str, str]) -> dict[str, Any]:
    """{"all": ..., <difficulty>: ...} of one split's traces; `rows` hold each trace's "id" and
    "parts" (`trace_parts`), `difficulty` maps an instance id to its difficulty ("" when unknown)."""
    by_group: dict[str, list[dict[str, int]]] = {"all": []}
    for row in rows:
        by_group["all"].append(row["parts"])
        level = difficulty.get(row["id"], "")
        if level:
            by_group.setdefault(level, []).append(row["parts"])
    return {name: group_stats(parts) for name, parts in sorted(by_group.items())}


def _init_worker() -> None:
    from models.tokenizer import load_tokenizer

    _STATE["tokenizer"] = load_tokenizer(TOKENIZER)


def _parts_of(spans: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """{"id", "parts"} per trace, read from its (file, offset, length) span; the file's first trace
    also has "tool_tokens", what the Python tool's schema adds to its prompt."""
    from b2tjax.sft.traces import encode_trace, tools_offered

    tokenizer, out = _STATE["tokenizer"], []
    for path, offset, length in spans:
        with open(path, "rb") as f:
            f.seek(offset)
            trace = json.loads(f.read(length))
        encoded = encode_trace(trace["messages"], trace.get("tools"), tokenizer)
        row = {"id": str(trace.get("id", "")), "parts": trace_parts(encoded["mask"])}
        if offset == 0:
            without = encode_trace(trace["messages"], tools_offered(trace.get("tools"), False), tokenizer)
            row["tool_tokens"] = len(encoded["ids"]) - len(without["ids"])
        out.append(row)
    return out


def line_spans(path: Path) -> list[tuple[str, int, int]]:
    """(path, byte offset, length) of each non-empty line: workers read their own traces."""
    spans, offset = [], 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                spans.append((str(path), offset, len(line)))
            offset += len(line)
    return spans


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()[:12]


def record_lengths(
    data_dir: Path, benchmark: str, log: Callable[[str], None], workers: int = 1
) -> dict | None:
    """Write DATA/trace_lengths.json from DATA/sft/*.jsonl (None, nothing written, without traces)."""
    files = sorted((data_dir / "sft").glob("*.jsonl")) if (data_dir / "sft").is_dir() else []
    if not files:
        return None
    source = get_benchmark(benchmark, data_dir)
    stats: dict[str, Any] = {"tokenizer": TOKENIZER, "splits": {}}
    with Workers(workers, _init_worker) as pool:
        for path in files:
            split = path.stem
            spans = line_spans(path)
            if not spans:
                continue
            store = data_dir / CHUNKS_DIR / f"lengths-{file_digest(path)}"  # never another file's
            rows = list(
                map_chunks(pool, _parts_of, spans, store=store, label=f"lengths-{split}", size=CHUNK, log=log)
            )
            try:
                difficulty = {str(v["id"]): str(v.get("difficulty", "")) for v in source.load_visible(split)}
            except (BenchmarkError, OSError):  # a split without instances: no per-difficulty rows
                difficulty = {}
            stats["splits"][split] = split_lengths(rows, difficulty)
            stats.setdefault("python_tool_tokens", rows[0]["tool_tokens"])
            total = stats["splits"][split]["all"]["total"]
            log(
                f"{LENGTHS}: {split} expert traces in {TOKENIZER} tokens: mean {total['mean']:,.0f}, "
                f"p50 {total['p50']:,}, p90 {total['p90']:,}, p99 {total['p99']:,}, max {total['max']:,}"
            )
    (data_dir / LENGTHS).write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return stats


def read_lengths(data_dir: Path | str) -> dict | None:
    """DATA/trace_lengths.json, or None when the directory has none (built by an older make_data); a file
    that does not read, or not in the shape `record_lengths` writes, is a one-line UserError naming
    it (a quiet None would turn the length check off)."""
    path = Path(data_dir) / LENGTHS
    if not path.is_file():
        return None
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
        problem = _shape_problem(stats)
    except (OSError, ValueError, RecursionError) as err:  # truncated JSON, bad UTF-8, deep nesting
        problem = f"does not read ({type(err).__name__}: {str(err)[:80]})"
    if problem:
        raise UserError(
            f"{path} {problem}; rebuild it (launch/make_data.py --force) or delete it to skip the check"
        )
    return stats


def _count_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(type(v) is int and v >= 0 for v in value)


def _shape_problem(stats: Any) -> str | None:
    """What keeps `stats` from being what `record_lengths` writes (the fields readers use), or None."""
    if not isinstance(stats, dict) or not isinstance(stats.get("splits"), dict):
        return "is not a trace-lengths record (an object with `splits`)"
    if not isinstance(stats.get("tokenizer"), str):
        return "has no `tokenizer` name"
    tool = stats.get("python_tool_tokens", 0)
    if type(tool) is not int or tool < 0:
        return "has a `python_tool_tokens` that is not a token count"
    for split, groups in stats["splits"].items():
        if not isinstance(groups, dict) or not isinstance(groups.get("all"), dict):
            return f"has a split {split!r} without its `all` group"
        for name, group in groups.items():
            lists = (
                [group.get(key) for key in ("totals", "prompts", "longest_turns")]
                if isinstance(group, dict)
                else []
            )
            if not lists or not all(_count_list(v) for v in lists) or len({len(v) for v in lists}) != 1:
                return f"has a group {split}/{name} without equal, non-empty lists of token counts"
    return None
