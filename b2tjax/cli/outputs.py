"""Output paths of the launch scripts: never an input of the same command, never inside the data.

`eval.py --plans P --details P` once replaced the plans with verdicts, `--json
DATA/ground_truth/test.jsonl` the hidden answers, and `report.py --out` its rollouts file.
`check_outputs` refuses such a command in one line before anything is read or written. Paths are
compared after resolving symlinks (and by inode where both exist), so a link or a hard link to an
input is caught too. An object-store URL (`gs://...`, any `scheme://`) is refused too: every writer
here uses local paths (pathlib would turn `gs://b/x` into a local folder `gs:/b/x` and the first
checkpoint would fail after training); on a pod, write to a filesystem every host mounts. Every
launch script that writes declares its path options once (`Paths`) and calls this one guard through
`guard`; tests/launch/test_output_flags.py tries each declared output on each declared input of every
script, and a URL on each output.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from b2tjax.cli.script import check_output_file
from b2tjax.errors import UserError

Named = Sequence[tuple[str, "str | os.PathLike | None"]]
# `gs://b/x`, or `gs:/b/x` once argparse's `type=Path` has folded the double slash
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):/")


def check_local(option: str, raw: str | os.PathLike) -> None:
    """Fail in one line when an output path is a URL (`gs://BUCKET/...`): not supported yet."""
    scheme = _URL.match(os.fspath(raw))
    if scheme:
        raise UserError(
            f"{option} {os.fspath(raw)}: object-store output ({scheme.group(1)}://) is not supported yet; "
            "give a filesystem path (on a pod: a shared filesystem every host mounts, e.g. NFS or Filestore)"
        )


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
    """Fail in one line when an output is a URL, is an input, lies in an input directory or a data
    directory, or is given twice. `files`: the outputs are files (also checked for writability)."""
    seen: dict[Path, str] = {}
    for option, raw in outputs:
        if raw is None:
            continue
        check_local(option, raw)
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
