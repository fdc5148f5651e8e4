"""SHA-256 manifests of checkpoint directories: a changed byte is found before it is loaded.

Orbax and tensorstore read a parameter file with a flipped byte without complaint, and export
then writes silently changed tensors. A checkpoint (a model's `params` item with its config, or a
training run's step directory) therefore carries `b2t_checksums.json` listing every file's
SHA-256, written once the save has finished, and each load compares the files with it first.
A directory without a manifest (saved before manifests existed) loads as before. Hashing reads
every byte: about 1 s per GB on one core.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MANIFEST = "b2t_checksums.json"
_BUFFER = 1 << 20


class ChecksumError(OSError):
    """A checkpoint file differs from its manifest; the message names the file (one line)."""


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(_BUFFER):
            digest.update(chunk)
    return digest.hexdigest()


def _files(directory: Path, only: tuple[str, ...] | None) -> dict[str, Path]:
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            rel = path.relative_to(directory).as_posix()
            if rel != MANIFEST and (only is None or rel.split("/", 1)[0] in only):
                out[rel] = path
    return out


def write_manifest(directory: str | os.PathLike, only: tuple[str, ...] | None = None) -> None:
    """Record the SHA-256 of every file under `directory` (or under its entries `only`)."""
    directory = Path(directory)
    files = {rel: _file_hash(path) for rel, path in sorted(_files(directory, only).items())}
    record = {"algorithm": "sha256", "only": list(only) if only else None, "files": files}
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(directory / MANIFEST)


def has_manifest(directory: str | os.PathLike) -> bool:
    return (Path(directory) / MANIFEST).is_file()


def verify_manifest(directory: str | os.PathLike) -> None:
    """Raise ChecksumError when a listed file is missing or changed, or an unlisted one appeared."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not path.is_file():
        return
    try:
        record = json.loads(path.read_text())
        listed: dict[str, str] = record["files"]
        only = tuple(record["only"]) if record.get("only") else None
    except (ValueError, KeyError, TypeError) as err:
        raise ChecksumError(f"{path} is not a checksum manifest ({type(err).__name__})") from None
    present = _files(directory, only)
    for rel, expected in listed.items():
        if rel not in present:
            raise ChecksumError(f"{directory / rel} is missing (listed in {MANIFEST})")
        if _file_hash(present[rel]) != expected:
            raise ChecksumError(f"{directory / rel} changed after it was saved (its SHA-256 differs)")
    extra = sorted(set(present) - set(listed))
    if extra:
        raise ChecksumError(f"{directory / extra[0]} appeared after the checkpoint was saved")
