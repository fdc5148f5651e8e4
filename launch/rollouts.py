r"""Roll out the agent on a benchmark split and write one JSON object per episode.

    python launch/rollouts.py --checkpoint CKPT_OR_HF_DIR --data DATA --split test --num 16 \
        --out rollouts.jsonl
    python launch/rollouts.py --benchmark travelplanner --checkpoint CKPT --data TP_DATA --out r.jsonl
    python launch/rollouts.py --model tiny --data DATA --num 4 --out /tmp/r.jsonl   # random tiny model
    python launch/rollouts.py --agent himap --model tiny --data DATA --num 2 --out /tmp/h.jsonl  # HiMAP teams

Rollout knobs (rollout.config.RolloutConfig) come from the script's defaults, then the `rollout:`
section of `--config RECIPE.yaml`, then the flags below, then `rollout.key=value` arguments
(e.g. `rollout.top_k=20 rollout.turn_cap=close rollout.tool_workers=4`), as in launch/train.py.

`--model tiny` builds a random 2-layer Qwen3; its tokenizer is a SentencePiece model trained on the
spot on the data (saved beside --out) unless `--tokenizer` names one (e.g. `qwen3`). Each line
holds instance_id, ids, loss_mask, logprobs (0.0 where the mask is 0), turns, errors, answer,
stop_reason, truncated, timings and `tokenizer` (what `models.tokenizer.load_tokenizer` reloads).
With `--agent himap` every instance is a HiMAP team episode (docs/concepts/himap.md) and each line is one
stream: `stream`, `role` (coordinator | executor), `day`, `round` and `episode` say which; the
episode's merged plan is the coordinator's `answer`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, get_args

from tqdm import tqdm

from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.script import (
    UserError,
    add_benchmark_options,
    add_trust_option,
    benchmark_parser,
    damaged_store,
    run_main,
    setup_logging,
    trust_from_args,
)
from b2tjax.config import freeze, load_rollout_config
from b2tjax.run.policy import ROLLOUT_DEFAULTS, checkpoint_error, prompt_tokenizer
from b2tjax.run.policy import load_policy as load
from rollout import RolloutEngine
from rollout.agents.himap import himap_episode
from rollout.agents.single import agent_episodes
from rollout.config import RolloutConfig, TurnCap
from rollout.record import EpisodeRecord, stop_reason_counts
from sandbox.benchmarks import BenchmarkError, benchmark_class
from sandbox.himap.options import ABLATIONS, HimapOptions
from sandbox.limits import StreamLimits
from sandbox.python_tool import ISOLATION_MODES, PythonSandbox

log = logging.getLogger("rollout")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The script's options, then the chosen benchmark's own (known once --benchmark is read)."""
    p, name = benchmark_parser(argv, "to roll out on", description=__doc__)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--checkpoint", type=Path, help="Orbax model checkpoint, training run checkpoints/ or HF dir"
    )
    src.add_argument("--model", choices=["tiny"], help="random-init model preset")
    p.add_argument("--tokenizer", default=None, help="'qwen3', a HF dir or a SentencePiece .model")
    p.add_argument(
        "--data", type=Path, required=True, help="the benchmark's data directory (launch/make_data.py)"
    )
    p.add_argument("--split", default="test")
    p.add_argument("--num", type=int, default=8, help="number of instances (first N of the split)")
    p.add_argument("--out", type=Path, required=True, help="output JSONL file")
    p.add_argument("--config", type=Path, help="YAML recipe whose rollout: section is used")
    add_trust_option(p)
    # Flags name rollout knobs; unset ones leave the recipe's (or the script's default) value.
    p.add_argument("--batch-size", type=int, help="rollout.batch_rows: KV-cache rows (default 8)")
    p.add_argument("--max-turns", type=int, help="rollout.max_turns (default 10)")
    p.add_argument("--max-turn-tokens", type=int, help="rollout.max_turn_tokens (default 1024)")
    p.add_argument("--max-total-tokens", type=int, help="rollout.max_seq_len (default 16384)")
    p.add_argument("--max-prompt-tokens", type=int, help="rollout.max_prompt_tokens (default: half)")
    p.add_argument("--temperature", type=float, help="rollout.temperature (default 1.0)")
    p.add_argument("--top-p", type=float, help="rollout.top_p")
    p.add_argument("--top-k", type=int, help="rollout.top_k")
    p.add_argument(
        "--turn-cap",
        choices=get_args(TurnCap),
        help="rollout.turn_cap: at --max-turn-tokens end the episode (stop) or close the turn and go on",
    )
    p.add_argument(
        "--variant",
        help="rollout.prompt_style (tool_agent: tools + memory agent prompt, react: ReAct baseline)",
    )
    p.add_argument("--no-memory", action="store_true", help="rollout.memory_enabled=false (ablation)")
    p.add_argument(
        "--python-tool-isolation",
        choices=ISOLATION_MODES,
        help="rollout.python_tool_isolation: full refuses to run the Python tool without its kernel "
        "jail (root); unsafe-ok runs it anyway",
    )
    p.add_argument(
        "--agent",
        choices=("single", "himap"),
        default="single",
        help="single agent (default) or a HiMAP team: coordinator + one executor per day",
    )
    p.add_argument(
        "--himap-ablation",
        choices=ABLATIONS,
        default="full",
        help="--agent himap: the full system or one of the paper's Table-7 ablations",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("overrides", nargs="*", metavar="rollout.key=value", help="rollout config overrides")
    add_benchmark_options(p, name)
    return p.parse_intermixed_args(argv)  # overrides may sit before and after the options


# The script's own defaults (long episodes of a real model, the Python tool on), under any recipe.
# flag -> rollout key
FLAG_KEYS = {
    "batch_size": "batch_rows",
    "max_turns": "max_turns",
    "max_turn_tokens": "max_turn_tokens",
    "max_total_tokens": "max_seq_len",
    "max_prompt_tokens": "max_prompt_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "turn_cap": "turn_cap",
    "variant": "prompt_style",
    "python_tool_isolation": "python_tool_isolation",
}


def rollout_config(args: argparse.Namespace) -> RolloutConfig:
    """Script defaults <- --config's rollout: section <- flags <- rollout.key=value arguments."""
    flags = [
        f"rollout.{key}={getattr(args, flag)}"
        for flag, key in FLAG_KEYS.items()
        if getattr(args, flag) is not None
    ]
    if args.no_memory:
        flags.append("rollout.memory_enabled=false")
    try:
        return freeze(load_rollout_config(args.config, [*flags, *args.overrides], base=ROLLOUT_DEFAULTS))
    except ValueError as err:
        raise UserError(str(err)) from None


def load_policy(args: argparse.Namespace, bench: Any, instances: list[dict]) -> Any:
    """The policy (b2tjax.run.policy): --checkpoint, else a random tiny Qwen3; the tokenizer --tokenizer,
    else the checkpoint's own, else a SentencePiece model trained now on the instances' prompts."""

    def train() -> str:
        path = prompt_tokenizer(bench, instances, args.variant, args.out.with_suffix("").as_posix() + ".spm")
        log.info("trained a SentencePiece tokenizer on %d prompts: %s", len(instances), path)
        return path

    try:
        return load(args.checkpoint, args.tokenizer, train_tokenizer=train, seed=args.seed)
    except ValueError as err:
        raise UserError(str(err)) from None


PATHS = Paths(  # the one output guard's view of the options (b2tjax/outputs.py)
    outputs=("--out",), inputs=("--checkpoint", "--config", "--tokenizer", "--queries"), data=("--data",)
)


def check_arguments(args: argparse.Namespace) -> None:
    """Fail before loading anything when a path or number on the command line cannot work."""
    guard(args, PATHS)
    if args.num < 1:
        raise UserError(f"--num must be at least 1, got {args.num}")
    if not args.data.is_dir():
        raise UserError(f"--data {args.data} is not a directory")
    if args.checkpoint is not None and (error := checkpoint_error(args.checkpoint)) is not None:
        raise UserError(error)


def himap_episodes(
    args: argparse.Namespace, config: RolloutConfig, bench: Any, tok: Any, instances: list[dict]
) -> list[Any]:
    """One HiMAP team episode per instance (--himap-ablation; the roles' default turn limits, at
    most rollout.max_turns: a stream's limits may only tighten the engine's)."""

    defaults = HimapOptions()
    options = HimapOptions.ablation(
        args.himap_ablation,
        max_response_chars=config.max_response_chars,
        coordinator_limits=StreamLimits(min(defaults.coordinator_limits.max_turns or 1, config.max_turns)),
        executor_limits=StreamLimits(min(defaults.executor_limits.max_turns or 1, config.max_turns)),
    )
    try:
        return [himap_episode(inst, bench, tok, options) for inst in instances]
    except ValueError as err:  # a benchmark without a HiMAP domain
        raise UserError(str(err)) from None


def open_benchmark(args: argparse.Namespace, config: RolloutConfig) -> tuple[Any, list[dict]]:
    """The benchmark on --data and the first --num instances of --split, its world opened (so a
    damaged store is found before any work); every problem is a UserError."""
    cls = benchmark_class(args.benchmark)
    try:
        bench = cls(args.data, **cls.options_from_args(args))
        instances = bench.load_visible(args.split)[: args.num]
        bench.check_prompt_variant(config.prompt_style, "rollout.prompt_style (--variant)")
        if instances:
            bench.world_for(instances[0])  # opened now: a damaged store is found before any work
    except BenchmarkError as err:
        raise UserError(str(err)) from None
    except sqlite3.DatabaseError as err:
        raise damaged_store(args.data, err) from None
    if not instances:
        raise UserError(f"no instances in split {args.split!r} of {args.data}")
    return bench, instances


def write_records(path: Path, records: list[EpisodeRecord], tokenizer_spec: str) -> None:
    """One JSON line per record, each naming the tokenizer that reloads its ids."""
    with open(path, "w") as f:
        for record in records:
            record.tokenizer = tokenizer_spec
            f.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    setup_logging()
    args = parse_args(argv)
    trust_from_args(args)
    config = rollout_config(args)
    check_arguments(args)
    bench, instances = open_benchmark(args, config)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    policy = load_policy(args, bench, instances)
    model, tok, spec = policy.model, policy.tokenizer, policy.tokenizer_spec

    python_tool = None
    if args.agent == "himap":
        episodes = himap_episodes(args, config, bench, tok, instances)
    else:
        python_tool = PythonSandbox(isolation=config.python_tool_isolation) if config.python_tool else None
        episodes = agent_episodes(instances, bench, tok, config, python_tool)
    engine = RolloutEngine(model, tok, config)
    bar = tqdm(total=len(episodes), desc="episodes", unit="ep")
    engine.progress = lambda done, total: bar.update(done - bar.n)
    started = time.perf_counter()
    records = engine.run(episodes, rng=args.seed)
    bar.close()
    write_records(args.out, records, spec)
    stats = engine.stats
    log.info(
        "%d episodes (%d streams) in %.1fs: %d generated tokens (%.1f tok/s), host share %.1f%%, "
        "stop reasons: %s -> %s",
        len(episodes),
        len(records),
        time.perf_counter() - started,
        stats.generated_tokens,
        stats.generated_tokens / max(stats.wall_s, 1e-9),
        100 * stats.host_share,
        stop_reason_counts(records),
        args.out,
    )
    if python_tool is not None:
        python_tool.close()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
