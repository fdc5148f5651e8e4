"""Convert a local Hugging Face Qwen3 directory into a b2tjax model checkpoint (Orbax).

python launch/import_hf.py --hf DIR --out CKPT_DIR [--dtype float32|bfloat16]

The checkpoint's tokenizer files (tokenizer.json, tokenizer_config.json, ...) are copied beside the
weights, so `launch/train.py --init ckpt:CKPT_DIR` trains with the tokenizer they were trained with
(b2tjax/run/weights_tokenizer.py), as `--init hf:DIR` does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.script import run_main
from b2tjax.errors import UserError
from models.checkpoint import save_model
from models.hf import load_pretrained
from models.qwen3 import DTYPES
from models.settings import ModelRuntime

PATHS = Paths(outputs=("--out",), inputs=("--hf",), dirs=True)  # the one output guard (b2tjax/outputs.py)


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
    guard(args, PATHS)
    start = time.time()
    model = load_pretrained(
        args.hf, progress=True, runtime=ModelRuntime(dtype=DTYPES[args.dtype], param_dtype=DTYPES[args.dtype])
    )
    print(
        f"loaded {model.config.num_params() / 1e6:.1f}M params from {args.hf} in {time.time() - start:.1f}s"
    )
    out = save_model(model, args.out)
    copied = copy_tokenizer_files(Path(args.hf), Path(out))
    print(
        f"wrote checkpoint {out} ({'tokenizer: ' + ', '.join(copied) if copied else 'no tokenizer files'}) "
        f"in {time.time() - start:.1f}s total"
    )
    return 0


TOKENIZER_FILES = (
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
)


def copy_tokenizer_files(src: Path, dest: Path) -> list[str]:
    """Copy a Hugging Face directory's tokenizer files (tokenizer*, and TOKENIZER_FILES) into `dest`."""
    names = sorted(
        p.name
        for p in src.iterdir()
        if p.is_file() and (p.name.startswith("tokenizer") or p.name in TOKENIZER_FILES)
    )
    for name in names:
        shutil.copyfile(src / name, dest / name)
    return names


if __name__ == "__main__":
    sys.exit(run_main(main))
