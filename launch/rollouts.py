"""Roll out the agent on a benchmark split and write one JSON object per episode.

    python launch/rollouts.py --checkpoint CKPT_OR_HF_DIR --data DATA --split test --num 16 \
        --out rollouts.jsonl
    python launch/rollouts.py --benchmark travelplanner --checkpoint CKPT --data TP_DATA --out r.jsonl
    python launch/rollouts.py --model tiny --data DATA --num 4 --out /tmp/r.jsonl   # random tiny model

`--model tiny` builds a random 2-layer Qwen3; its tokenizer is a SentencePiece model trained on the
spot on the data (saved beside --out) unless `--tokenizer` names one (e.g. `qwen3`). Each line
holds instance_id, ids, loss_mask, logprobs (0.0 where the mask is 0), turns, errors, answer,
stop_reason, truncated, timings and `tokenizer` (what `models.tokenizer.load_tokenizer` reloads).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from b2tjax.cli import (
    UserError,
    add_benchmark_options,
    benchmark_parser,
    check_output_file,
    damaged_store,
    run_main,
)
from sandbox.benchmarks import BenchmarkError, benchmark_class
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
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-turns", type=int, default=10)
    p.add_argument("--max-turn-tokens", type=int, default=1024)
    p.add_argument("--max-total-tokens", type=int, default=16384)
    p.add_argument("--max-prompt-tokens", type=int, default=None, help="default: half of --max-total-tokens")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument(
        "--turn-cap",
        choices=["stop", "close"],
        default="stop",
        help="at --max-turn-tokens: end the episode, or close the turn and continue",
    )
    p.add_argument(
        "--variant",
        default="b2t",
        help="prompt variant of the benchmark (b2t: agent prompt, react: ReAct baseline)",
    )
    p.add_argument("--no-memory", action="store_true", help="ablation: no memory module")
    p.add_argument(
        "--python-tool-isolation",
        choices=ISOLATION_MODES,
        default="full",
        help="full: refuse to run the Python tool without its kernel jail (root); unsafe-ok: run it anyway",
    )
    p.add_argument("--seed", type=int, default=0)
    add_benchmark_options(p, name)
    return p.parse_args(argv)


def load_model(args: argparse.Namespace, vocab_size: int | None) -> Any:
    """The policy: --checkpoint (Hugging Face safetensors or Orbax), else a random tiny Qwen3 sized
    to the tokenizer."""
    from flax import nnx

    if args.checkpoint is not None:
        ckpt = args.checkpoint
        if any(ckpt.glob("*.safetensors")):
            from models.hf import load_pretrained

            return load_pretrained(ckpt)
        from models.checkpoint import load_model as load_orbax

        return load_orbax(ckpt)
    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM

    cfg = dataclasses.replace(get_config("tiny"), vocab_size=vocab_size)
    return Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(args.seed))


def tokenizer_spec(args: argparse.Namespace, bench: Any, instances: list[dict]) -> str:
    """What to load: --tokenizer, else the checkpoint's own, else (tiny) a SentencePiece model trained now."""
    if args.tokenizer:
        return args.tokenizer
    if args.checkpoint is not None:
        has_own = (args.checkpoint / "tokenizer.json").exists() or len(
            list(args.checkpoint.glob("*.model"))
        ) == 1
        return str(args.checkpoint) if has_own else "qwen3"
    from models.spm import train_sentencepiece
    from rollout.prompt import prompt_text

    corpus = [prompt_text(bench.prompt(inst, variant=args.variant)) for inst in instances]
    prefix = args.out.with_suffix("").as_posix() + ".spm"
    path = train_sentencepiece(corpus, prefix, vocab_size=2048)
    log.info("trained a SentencePiece tokenizer on %d prompts: %s", len(corpus), path)
    return str(path)


def check_arguments(args: argparse.Namespace) -> None:
    """Fail before loading anything when a path on the command line cannot work."""
    if not args.data.is_dir():
        raise UserError(f"--data {args.data} is not a directory")
    ckpt = args.checkpoint
    if ckpt is not None:
        if not ckpt.is_dir():
            raise UserError(f"--checkpoint {ckpt} is not a directory")
        if not (ckpt / "config.json").is_file():
            raise UserError(
                f"--checkpoint {ckpt} holds no config.json: it is no model checkpoint, run "
                "checkpoints/ or Hugging Face directory"
            )
    check_output_file(args.out, "--out")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    check_arguments(args)
    from models.tokenizer import load_tokenizer
    from rollout import RolloutConfig, RolloutEngine, agent_episode

    cls = benchmark_class(args.benchmark)
    try:
        bench = cls(args.data, **cls.options_from_args(args))
        instances = bench.load_visible(args.split)[: args.num]
        if args.variant not in bench.prompt_variants:
            raise BenchmarkError(f"--variant must be one of {bench.prompt_variants} for {bench.name}")
        if instances:
            bench.world_for(instances[0])  # opened now: a damaged store is found before any work
    except BenchmarkError as err:
        raise UserError(str(err)) from None
    except sqlite3.DatabaseError as err:
        raise damaged_store(args.data, err) from None
    if not instances:
        raise UserError(f"no instances in split {args.split!r} of {args.data}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    spec = tokenizer_spec(args, bench, instances)
    tok = load_tokenizer(spec)
    model = load_model(args, tok.vocab_size)
    if model.config.vocab_size < tok.vocab_size:
        raise UserError(
            f"tokenizer {spec} has {tok.vocab_size} ids but the model only {model.config.vocab_size}"
        )

    config = RolloutConfig(
        batch_size=args.batch_size,
        max_turns=args.max_turns,
        max_turn_tokens=args.max_turn_tokens,
        max_total_tokens=args.max_total_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        turn_cap=args.turn_cap,
    )
    max_prompt = args.max_prompt_tokens or args.max_total_tokens // 2
    python_tool = PythonSandbox(isolation=args.python_tool_isolation)
    episodes = [
        agent_episode(
            inst,
            bench,
            tok,
            max_turns=args.max_turns,
            max_prompt_tokens=max_prompt,
            memory=not args.no_memory,
            variant=args.variant,
            python_tool=python_tool,
        )
        for inst in instances
    ]
    engine = RolloutEngine(model, tok, config)
    from tqdm import tqdm

    bar = tqdm(total=len(episodes), desc="episodes", unit="ep")
    engine.progress = lambda done, total: bar.update(done - bar.n)
    started = time.perf_counter()
    records = engine.run(episodes, rng=args.seed)
    bar.close()
    with open(args.out, "w") as f:
        for record in records:
            record.tokenizer = spec
            f.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
    stats = engine.stats
    reasons = collections.Counter(r.stop_reason for r in records)
    log.info(
        "%d episodes in %.1fs: %d generated tokens (%.1f tok/s), host share %.1f%%, stop reasons %s -> %s",
        len(records),
        time.perf_counter() - started,
        stats.generated_tokens,
        stats.generated_tokens / max(stats.wall_s, 1e-9),
        100 * stats.host_share,
        dict(reasons),
        args.out,
    )
    python_tool.close()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
