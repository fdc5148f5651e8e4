"""A recipe is a small regular file of plain YAML: what is not is one line.

Each case is a real file (or device, FIFO, directory) given to load_config; the message names the
file and what is wrong with it, and nothing is read past the size cap or waited on.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from b2tjax.config import load_config
from b2tjax.config.recipe_yaml import MAX_CONFIG_BYTES


def _error(path: Path | str, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(ValueError) as info:
        load_config(path, overrides)
    return str(info.value)


def test_a_duplicate_key_names_the_key_the_line_and_the_file(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("steps: 3\nseed: 1\nsteps: 30\n")
    assert _error(path) == f"{path}: line 3: duplicate key 'steps'"
    path.write_text("rollout:\n  max_turns: 2\n  top_k: 5\n  max_turns: 20\n")
    assert _error(path) == f"{path}: line 4: duplicate key 'rollout.max_turns'"
    path.write_text("rollout: {top_k: 5, top_k: 6}\n")
    assert _error(path) == f"{path}: line 1: duplicate key 'rollout.top_k'"
    message = _error(None, ("model.overrides={num_hidden_layers: 2, num_hidden_layers: 4}",))
    assert "duplicate key 'num_hidden_layers'" in message


def test_aliases_are_refused_before_they_expand(tmp_path):
    path = tmp_path / "laughs.yaml"
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path.write_text("model:\n  overrides:\n" + "".join(f"    {row}\n" for row in rows))
    assert _error(path) == f"{path}: line 4, column 14: alias *a0 (a config allows no aliases)"


def test_a_file_over_the_cap_fails_without_being_read(tmp_path):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:
        handle.truncate(200 << 20)  # 200 MB, sparse: nothing but the size is on disk
    assert _error(path) == f"config file {path} is over 1 MiB: not a recipe"
    path.write_bytes(b"steps: 2\n" + b"#" * (MAX_CONFIG_BYTES - 10) + b"\n")  # exactly at the cap
    assert load_config(path).steps == 2


def test_a_device_a_fifo_a_directory_and_nothing_are_called_what_they_are(tmp_path):
    assert _error("/dev/zero") == "config file /dev/zero is a character device, not a regular file"
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # no writer: opening it blocking would wait forever
    assert _error(fifo) == f"config file {fifo} is a named pipe (FIFO), not a regular file"
    assert _error(tmp_path) == f"config file {tmp_path} is a directory"
    assert _error(tmp_path / "no.yaml") == f"config file {tmp_path / 'no.yaml'} does not exist"
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")  # the target is what counts
    assert _error(link) == f"config file {link} is a character device, not a regular file"


def test_not_a_mapping_not_utf8_and_too_deep_are_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("- steps\n- 3\n")
    assert _error(path) == f"{path}: a recipe is a mapping of sections, got list"
    path.write_bytes(b"steps: \xff\n")
    assert _error(path) == f"{path}: not UTF-8 text"
    path.write_text("steps: " + "[" * 100_000 + "]" * 100_000 + "\n")  # PyYAML alone: RecursionError
    assert _error(path) == f"{path}: line 1, column 39: nested deeper than 32 levels"
