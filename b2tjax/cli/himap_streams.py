"""Token lengths of the scripted HiMAP expert's streams: what a HiMAP recipe's rows hold.

Why: a HiMAP episode is a team of streams (a coordinator, one executor per day and round), each a
KV row of its own, so the single agent's trace lengths (DATA/trace_lengths.json) say nothing of
them. This runs the scripted HiMAP expert (sandbox.himap.scripted.expert_traces, the SFT warm
start's traces, with the recipe's switches) on the recipe's train instances and encodes every
stream as SFT does (b2tjax.sft.traces.encode_trace, Qwen3 tokens, the recipe's tool list): per
team, each stream's prompt (tokens before its first assistant turn) and final length, and the
common token prefix of its executors' records -- what the engine's prefix reuse (rollout/prefix.py,
exact longest common prefix) lets them hold once: the executor prompts put everything the days
share (request, trip essentials, the coordinator's searches) before the day's own sub-goal.

Computed on the fly (about a second per instance), nothing written:
    python benchmarks/trace_lengths.py --kv-rows --data b2t=/tmp/small11 [--himap-instances 60]
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from b2tjax.config.schema import TrainConfig
from b2tjax.sft.lengths import trace_parts
from rollout.prefix import common_prefix


def team_lengths(streams: Iterable[tuple[str, dict[str, int], list[int]]]) -> dict[str, Any]:
    """{"coordinator": [prompt, total] or None, "executors": [[prompt, total], ...], "executor_prefix":
    tokens every executor's record starts with (0 for fewer than two)} of one team's encoded streams
    ((role, trace_parts, ids))."""
    coordinator, executors, ids = None, [], []
    for role, parts, stream_ids in streams:
        if role == "coordinator":
            coordinator = [parts["prompt"], parts["total"]]
        else:
            executors.append([parts["prompt"], parts["total"]])
            ids.append(np.asarray(stream_ids, np.int32))
    prefix = min((common_prefix(ids[0], other) for other in ids[1:]), default=0)
    return {"coordinator": coordinator, "executors": executors, "executor_prefix": prefix}


def himap_lengths(cfg: TrainConfig, data_dir: Path, instances: int) -> dict[str, Any]:
    """{"instances": instances tried, "teams": [team_lengths, ...]} of the scripted expert on the
    recipe's first `instances` train instances of its difficulties (the teams whose merged plan
    passes every check: the SFT warm start's)."""
    from b2tjax.run.task_build import himap_options
    from b2tjax.sft.traces import encode_trace, tools_offered  # JAX, the tokenizer: on demand
    from b2tjax.tasks.benchmark import select_pairs
    from b2tjax.tasks.himap import expert_options
    from models.tokenizer import load_tokenizer
    from sandbox.benchmarks import get_benchmark
    from sandbox.himap.scripted import expert_traces

    tokenizer = load_tokenizer(cfg.model.tokenizer)
    benchmark = get_benchmark(cfg.benchmark, data_dir)
    pairs = select_pairs(benchmark, cfg.data.train_split, cfg.data.difficulties, instances)
    teams: dict[str, list] = {}
    for trace in expert_traces(benchmark, pairs, expert_options(himap_options(cfg))):
        tools = tools_offered(trace.get("tools"), cfg.rollout.python_tool)
        encoded = encode_trace(trace["messages"], tools, tokenizer)
        teams.setdefault(trace["id"], []).append(
            (trace["role"], trace_parts(encoded["mask"]), encoded["ids"])
        )
    return {"instances": len(pairs), "teams": [team_lengths(streams) for streams in teams.values()]}
