"""SHA-256 manifests of checkpoint directories: a changed byte is found before it is loaded.

Orbax and tensorstore read a parameter file with a flipped byte without complaint, and export
then writes silently changed tensors. A checkpoint (a model's `params` item with its config, a
training run's step directory, or the run's `checkpoints/config.json`) therefore carries
`b2t_checksums.json` listing every file's size and SHA-256, written once the save has finished,
and each load compares the files with it first. Only regular files count: a listed file replaced by
a symlink, a FIFO or a device is refused before a byte is read (reading /dev/zero or a FIFO never
ends), and sizes are compared before hashing. A directory without a manifest is refused
(`UnverifiedError`) unless the user trusts it (`allow_unverified`, the scripts'
`--trust-unverified`): a deleted manifest must not make a changed tensor load. Hashing reads every
byte (about 1 s per GB on one core), so files are hashed by a pool of threads: hashlib releases the
GIL, and on shared storage several reads in flight are what reaches its bandwidth.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MANIFEST = "b2t_checksums.json"
_BUFFER = 1 << 20
_MANIFEST_LIMIT = 64 << 20  # a manifest lists files, one short line each; more is not one of ours
_trusted = False  # set by allow_unverified (launch scripts' --trust-unverified)
_WORKERS = min(32, (os.cpu_count() or 1) * 2)  # reads in flight: storage latency, not cores, bounds them


class ChecksumError(OSError):
    """A checkpoint file differs from its manifest; the message names the file (one line)."""


class UnverifiedError(ChecksumError):
    """A checkpoint directory has no manifest and the user did not say to trust it."""


def allow_unverified(trust: bool = True) -> None:
    """Load directories without a manifest from now on (the user's `--trust-unverified`)."""
    global _trusted
    _trusted = trust


def _regular(path: Path) -> os.stat_result:
    """lstat of `path`, which must be a regular file (no symlink, FIFO, device or directory)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ChecksumError(f"{path} is missing (listed in {MANIFEST})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ChecksumError(f"{path} is not a regular file (a symlink, FIFO or device); refused")
    return info


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    # O_NOFOLLOW | O_NONBLOCK: a file swapped for a link or a FIFO after the lstat still never blocks
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    with open(fd, "rb", buffering=0) as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ChecksumError(f"{path} is not a regular file (a symlink, FIFO or device); refused")
        while chunk := f.read(_BUFFER):
            digest.update(chunk)
    return digest.hexdigest()


def _hashes(paths: Iterable[Path]) -> list[str]:
    """SHA-256 of each file, in order, hashed in parallel."""
    with ThreadPoolExecutor(_WORKERS, thread_name_prefix="sha256") as pool:
        return list(pool.map(_file_hash, paths))


def _files(directory: Path, only: tuple[str, ...] | None) -> dict[str, Path]:
    """Every entry under `directory` (or its entries `only`) but the manifest; a symlinked folder
    counts as an entry (os.walk would not enter it, so it could hide what it points at)."""
    out = {}
    for root, dirs, names in os.walk(directory):
        linked = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        for name in [*names, *linked]:
            path = Path(root) / name
            rel = path.relative_to(directory).as_posix()
            if rel != MANIFEST and (only is None or rel.split("/", 1)[0] in only):
                out[rel] = path
    return out


def write_manifest(directory: str | os.PathLike, only: tuple[str, ...] | None = None) -> None:
    """Record the size and SHA-256 of every file under `directory` (or under its entries `only`)."""
    directory = Path(directory)
    listed = sorted(_files(directory, only).items())
    sizes = {rel: _regular(path).st_size for rel, path in listed}
    files = dict(zip(sizes, _hashes(path for _, path in listed), strict=True))
    record = {"algorithm": "sha256", "only": list(only) if only else None, "files": files, "sizes": sizes}
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(directory / MANIFEST)


def has_manifest(directory: str | os.PathLike) -> bool:
    return (Path(directory) / MANIFEST).is_file()


def _read_manifest(path: Path) -> tuple[dict[str, str], dict[str, int], tuple[str, ...] | None]:
    if _regular(path).st_size > _MANIFEST_LIMIT:
        raise ChecksumError(f"{path} is larger than any checksum manifest ({_MANIFEST_LIMIT >> 20} MB)")
    try:
        record = json.loads(path.read_text())
        listed: dict[str, str] = dict(record["files"])
        sizes: dict[str, int] = dict(record.get("sizes") or {})  # manifests before sizes: hashes only
        only = tuple(record["only"]) if record.get("only") else None
    except (ValueError, KeyError, TypeError) as err:
        raise ChecksumError(f"{path} is not a checksum manifest ({type(err).__name__})") from None
    return listed, sizes, only


def verify_manifest(directory: str | os.PathLike, hashes: bool = True) -> None:
    """Raise ChecksumError when a listed file is missing, not a regular file, or changed (its size,
    then its hash), or an unlisted one appeared; UnverifiedError when there is no manifest (unless
    `allow_unverified`). `hashes=False`: no hashing (before a small read that must not block on a
    FIFO; the load itself verifies in full)."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not os.path.lexists(path):
        if _trusted:
            return
        raise UnverifiedError(
            f"{directory} has no checksum manifest ({MANIFEST}), so its files cannot be verified; "
            "pass --trust-unverified to load it anyway"
        )
    listed, sizes, only = _read_manifest(path)
    present = _files(directory, only)
    for rel in listed:
        info = _regular(directory / rel)
        if rel in sizes and info.st_size != sizes[rel]:
            raise ChecksumError(
                f"{directory / rel} changed after it was saved ({info.st_size} bytes, {sizes[rel]} saved)"
            )
    found = _hashes(directory / rel for rel in listed) if hashes else list(listed.values())
    for (rel, expected), digest in zip(listed.items(), found, strict=True):
        if digest != expected:
            raise ChecksumError(f"{directory / rel} changed after it was saved (its SHA-256 differs)")
    extra = sorted(set(present) - set(listed))
    if extra:
        raise ChecksumError(f"{directory / extra[0]} appeared after the checkpoint was saved")
