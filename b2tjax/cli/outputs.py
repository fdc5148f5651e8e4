"""Output paths of the launch scripts: never an input of the same command, never inside the data.

`eval.py --plans P --details P` once replaced the plans with verdicts, `--json
DATA/ground_truth/test.jsonl` the hidden answers, and `report.py --out` its rollouts file.
`check_outputs` refuses such a command in one line before anything is read or written. Paths are
compared after resolving symlinks (and by inode where both exist), so a link or a hard link to an
input is caught too. Every launch script that writes declares its path options once (`Paths`) and
calls this one guard through `guard`; tests/launch/test_output_flags.py tries each declared output
on each declared input of every script.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


@dataclasses.dataclass(frozen=True)
class Paths:
    """A launch script's path options by role: option strings (a positional as "LABEL:dest").
    `data`: data directories nothing may be written into; `dirs`: the outputs are directories."""

    outputs: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    dirs: bool = False


def named_paths(
    args: argparse.Namespace, names: Sequence[str], values: dict[str, Any]
) -> list[tuple[str, Any]]:
    """(label, path) of each option in `names`, one per element of a list-valued one."""
    out = []
    for name in names:
        label, _, dest = name.partition(":")
        dest = dest or label.lstrip("-").replace("-", "_")
        value = values[dest] if dest in values else getattr(args, dest, None)
        out += [(label, v) for v in value] if isinstance(value, list | tuple) else [(label, value)]
    return out


def guard(args: argparse.Namespace, paths: Paths, *, data_dirs: Sequence = (), **values: Any) -> None:
    """`check_outputs` on a parsed command line: `paths` names the options, `values` replaces an
    option's parsed value (e.g. the run directory a recipe gave), `data_dirs` adds data directories."""
    check_outputs(
        named_paths(args, paths.outputs, values),
        inputs=named_paths(args, paths.inputs, values),
        data_dirs=[p for _, p in named_paths(args, paths.data, values)] + list(data_dirs),
        files=not paths.dirs,
    )
