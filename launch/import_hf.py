"""Convert a local Hugging Face Qwen3 directory into a b2tjax model checkpoint (Orbax).

python launch/import_hf.py --hf DIR --out CKPT_DIR [--dtype float32|bfloat16]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from b2tjax.cli.outputs import check_outputs
from b2tjax.cli.script import run_main
from b2tjax.errors import UserError
from models.checkpoint import save_model
from models.config import DTYPES
from models.hf import load_pretrained


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hf", required=True, help="HF directory with config.json and *.safetensors")
    parser.add_argument("--out", required=True, help="output checkpoint directory")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES), help="stored param dtype")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.path.isdir(args.hf):
        raise UserError(f"--hf {args.hf} is not a directory")
    check_outputs([("--out", args.out)], inputs=[("--hf", args.hf)], files=False)
    start = time.time()
    model = load_pretrained(args.hf, dtype=DTYPES[args.dtype], progress=True)
    print(
        f"loaded {model.config.num_params() / 1e6:.1f}M params from {args.hf} in {time.time() - start:.1f}s"
    )
    out = save_model(model, args.out)
    print(f"wrote checkpoint {out} in {time.time() - start:.1f}s total")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
