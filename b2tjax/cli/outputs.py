"""Output paths of the launch scripts: never an input of the same command, never inside the data.

`eval.py --plans P --details P` once replaced the plans with verdicts, and `--json
DATA/ground_truth/test.jsonl` the hidden answers. `check_outputs` refuses such a command in one
line before anything is read or written. Paths are compared after resolving symlinks (and by
inode where both exist), so a link or a hard link to an input is caught too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from b2tjax.cli.script import check_output_file
from b2tjax.errors import UserError

Named = Sequence[tuple[str, "str | os.PathLike | None"]]


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return a.resolve() == b.resolve()


def check_outputs(
    outputs: Named, *, inputs: Named = (), data_dirs: Sequence = (), files: bool = True
) -> None:
    """Fail in one line when an output is an input, lies in an input directory or a data
    directory, or is given twice. `files`: the outputs are files (also checked for writability)."""
    seen: dict[Path, str] = {}
    for option, raw in outputs:
        if raw is None:
            continue
        path = Path(raw)
        if files:
            check_output_file(path, option)
        target = path.resolve()
        for in_option, in_raw in inputs:
            if in_raw is None:
                continue
            source = Path(in_raw)
            if _same(path, source) or (source.is_dir() and _inside(target, source.resolve())):
                raise UserError(f"{option} {path} is (inside) the input {in_option} {source}; choose another")
        for data in data_dirs:
            if data is not None and _inside(target, Path(data).resolve()):
                raise UserError(f"{option} {path} is inside the data directory {data}; write it elsewhere")
        if target in seen:
            raise UserError(f"{option} and {seen[target]} are the same path {path}; give each its own")
        seen[target] = option
