"""Export a b2tjax model checkpoint (or a training run's CheckpointManager dir) to a Hugging Face
directory loadable by transformers.

    python launch/export_hf.py --checkpoint CKPT_DIR --out HF_DIR [--tokenizer qwen3|PATH]
                               [--dtype float32|bfloat16] [--max-shard-size 5GB] [--step N] [--adapter]

A training run's checkpoints/ directory exports its newest step; if that step is damaged (it
fails to restore or its checksums), the export stops with one line naming the older steps on
disk, and `--step N` picks one of them explicitly.

A LoRA run exports its base with the adapters merged in, or with --adapter the adapters alone as
a PEFT directory (adapter_config.json + adapter_model.safetensors) for
`peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(BASE), HF_DIR)`.

On several processes (a pod, or `launch/cluster.py ... -- launch/export_hf.py ...`) every process
restores its shards of the weights over one mesh of all devices; each tensor is then gathered in
turn and process 0 writes it, so no host holds more than one tensor (plus the shard being written).
The files are byte-identical to a one-process export. `--distributed` calls
jax.distributed.initialize() where the multi-node variables are not set (TPU pods, SLURM).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax

from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.script import add_trust_option, run_main, trust_from_args
from b2tjax.errors import UserError
from b2tjax.run.adapters import base_init, is_lora_run
from b2tjax.run.lora_run import load_lora_run
from b2tjax.run.mesh import maybe_initialize_distributed
from models.checkpoint import load_model
from models.hf import save_pretrained
from models.lora import merge_lora
from models.peft import save_adapter
from models.qwen3 import DTYPES
from models.sharding import make_mesh
from models.tokenizer import load_tokenizer

PATHS = Paths(outputs=("--out",), inputs=("--checkpoint", "--tokenizer"), dirs=True)  # b2tjax/outputs.py


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
    parser.add_argument(
        "--adapter", action="store_true", help="a LoRA run: write its adapters as a PEFT directory"
    )
    parser.add_argument(
        "--distributed", action="store_true", help="initialise JAX's multi-process runtime (pods, SLURM)"
    )
    add_trust_option(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trust_from_args(args)
    if not os.path.isdir(args.checkpoint):
        raise UserError(f"--checkpoint {args.checkpoint} is not a directory")
    run_checkpoints = os.path.join(args.checkpoint, "checkpoints")
    if os.path.isdir(run_checkpoints) and not os.path.exists(os.path.join(args.checkpoint, "config.json")):
        raise UserError(f"--checkpoint {args.checkpoint} is a training run: pass {run_checkpoints}")
    guard(args, PATHS)
    maybe_initialize_distributed(args.distributed)  # before any other JAX call
    lora_run = is_lora_run(args.checkpoint)
    if lora_run and jax.process_count() > 1:
        raise UserError(
            "a LoRA run exports on one process (its base is rebuilt whole); run it without a cluster"
        )
    if args.adapter:
        if not lora_run:
            raise UserError(f"--adapter: {args.checkpoint} is not a LoRA run's checkpoint directory")
        return export_adapter(args.checkpoint, args.out, args.step)
    tokenizer = None
    spec = args.tokenizer
    if spec is None and os.path.exists(os.path.join(args.checkpoint, "tokenizer.json")):
        spec = args.checkpoint  # a training run saves its tokenizer beside the checkpoints
    if spec:
        tokenizer = load_tokenizer(spec)
    start = time.time()
    if lora_run:
        model = merge_lora(load_lora_run(args.checkpoint, step=args.step)[0])
    else:
        # several processes: each restores only its shards (fsdp over every device of the job)
        mesh = make_mesh(data=1, fsdp=-1) if jax.process_count() > 1 else None
        model = load_model(args.checkpoint, step=args.step, mesh=mesh)
    dtype = DTYPES[args.dtype] if args.dtype else None
    save_pretrained(
        model, args.out, tokenizer=tokenizer, max_shard_size=args.max_shard_size, dtype=dtype, progress=True
    )
    if jax.process_index() == 0:
        seconds = time.time() - start
        print(f"exported {model.config.num_params() / 1e6:.1f}M params to {args.out} in {seconds:.1f}s")
    return 0


def export_adapter(directory: str, out: str, step: int | None = None) -> int:
    """The adapters of a LoRA run as a PEFT directory naming the run's Hugging Face base."""

    model, cfg = load_lora_run(directory, step=step)
    init = base_init(cfg.model)
    if not init.startswith("hf:"):
        raise UserError(
            "--adapter needs a Hugging Face base (model.init=hf:DIR), the run's is "
            f"{init or 'a random init'}; export the merged model instead (without --adapter)"
        )
    save_adapter(model, out, os.path.abspath(init[3:]))
    print(f"exported the LoRA adapters of {directory} to {out} (base {init[3:]})")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
