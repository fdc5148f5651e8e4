"""Export a b2tjax model checkpoint (or a training run's CheckpointManager dir) to a Hugging Face
directory loadable by transformers.

    python launch/export_hf.py --checkpoint CKPT_DIR --out HF_DIR [--tokenizer qwen3|PATH]
                               [--dtype float32|bfloat16] [--max-shard-size 5GB] [--step N]

A training run's checkpoints/ directory exports its newest step; if that step is damaged (it
fails to restore or its checksums), the export stops with one line naming the older steps on
disk, and `--step N` picks one of them explicitly.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from b2tjax.cli import UserError, run_main
from b2tjax.outputs import check_outputs
from models.checkpoint import load_model
from models.config import DTYPES
from models.hf import save_pretrained


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, help="model checkpoint or OUT/checkpoints directory")
    parser.add_argument("--out", required=True, help="output HF directory")
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="'qwen3', a HF dir or a SentencePiece model (default: the checkpoint's own, if saved)",
    )
    parser.add_argument(
        "--dtype", default=None, choices=sorted(DTYPES), help="exported dtype (default: stored)"
    )
    parser.add_argument("--max-shard-size", default="5GB")
    parser.add_argument("--step", type=int, default=None, help="a run's step to export (default: newest)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.path.isdir(args.checkpoint):
        raise UserError(f"--checkpoint {args.checkpoint} is not a directory")
    inputs = [("--checkpoint", args.checkpoint), ("--tokenizer", args.tokenizer)]
    check_outputs([("--out", args.out)], inputs=inputs, files=False)
    tokenizer = None
    spec = args.tokenizer
    if spec is None and os.path.exists(os.path.join(args.checkpoint, "tokenizer.json")):
        spec = args.checkpoint  # a training run saves its tokenizer beside the checkpoints
    if spec:
        from models.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(spec)
    start = time.time()
    model = load_model(args.checkpoint, step=args.step)
    dtype = DTYPES[args.dtype] if args.dtype else None
    save_pretrained(
        model, args.out, tokenizer=tokenizer, max_shard_size=args.max_shard_size, dtype=dtype, progress=True
    )
    print(
        f"exported {model.config.num_params() / 1e6:.1f}M params to {args.out} in {time.time() - start:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
