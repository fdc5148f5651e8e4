"""A recipe file read as plain YAML: a small regular file, every key once, no aliases.

PyYAML alone accepts a duplicate key (the last one silently wins, so a recipe can mean something
other than what its reader sees), expands aliases (a few lines can name a structure of billions of
nodes), and happily reads a 200 MB file, `/dev/zero` or a FIFO until memory or patience runs out.
A recipe is a few kilobytes a person wrote: anything else is refused at once, in one line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_CONFIG_BYTES = 1 << 20  # the largest recipe is ~4 KB; a 1 MiB file is no recipe
MAX_DEPTH = 32  # nesting levels; a recipe has 4 (PyYAML's composer recurses, and slowly, per level)

_KINDS = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISCHR, "is a character device, not a regular file"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
    (stat.S_ISFIFO, "is a named pipe (FIFO), not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
)


class _Refused(Exception):
    """Valid YAML that a recipe may not use; the message starts with its line."""


class _RecipeLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and deep nesting as it composes (before anything is built)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        where = f"line {event.start_mark.line + 1}, column {event.start_mark.column + 1}"
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"{where}: alias *{event.anchor} (a config allows no aliases)")
        if self._depth >= MAX_DEPTH:
            raise _Refused(f"{where}: nested deeper than {MAX_DEPTH} levels")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def read_recipe(path: Path) -> dict:
    """The mapping a recipe file holds ({} for an empty file); a ValueError naming `path` otherwise."""
    data = parse_yaml(_read_text(path), str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a recipe is a mapping of sections, got {type(data).__name__}")
    return data


def parse_yaml(text: str, where: str = "") -> Any:
    """`text` as YAML, refusing duplicate keys and aliases; ValueError '<where>: line L...: problem'."""
    loader = _RecipeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicate_keys(node)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{where}:{at} YAML syntax error ({problem})".lstrip(":").strip()) from None
    except _Refused as err:
        raise ValueError(f"{where}: {err}".lstrip(": ")) from None
    finally:
        loader.dispose()


def _refuse_duplicate_keys(root: yaml.Node) -> None:
    """Walk the composed document (iteratively: its depth is the author's) for a key given twice."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, prefix = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{prefix}[{i}].") for i, item in enumerate(node.value))
        if not isinstance(node, yaml.MappingNode):
            continue
        seen: set[str] = set()
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name is not None and name in seen:
                raise _Refused(f"line {key.start_mark.line + 1}: duplicate key {prefix + name!r}")
            seen.add(name)
            stack.append((value, f"{prefix}{name}."))


def _read_text(path: Path) -> str:
    """The file's UTF-8 text, if it is a regular file of at most MAX_CONFIG_BYTES."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; a regular file ignores it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ValueError(f"config file {path} does not exist") from None
    except OSError as err:
        raise ValueError(f"config file {path} cannot be opened ({err.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = next((what for is_kind, what in _KINDS if is_kind(mode)), "is not a regular file")
        raise ValueError(f"config file {path} {what}")
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_CONFIG_BYTES + 1)  # bounded even if the file grows while read
    if len(raw) > MAX_CONFIG_BYTES:
        raise ValueError(f"config file {path} is over {MAX_CONFIG_BYTES >> 20} MiB: not a recipe")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
