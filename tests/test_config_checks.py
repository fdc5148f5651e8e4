"""Config values are checked when the config loads, with the key and the allowed range (issue 10, item 11)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from b2tjax.config import load_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "override, expected",
    [
        ("steps=-3", "steps must be >= 0, got -3"),
        ("sft.steps=-5", "sft.steps must be >= 0, got -5"),
        ("optim.lr=-1", "optim.lr must be > 0, got -1.0"),
        ("sft.optim.lr=0", "sft.optim.lr must be > 0, got 0.0"),
        ("rollout.max_seq_len=-1", "rollout.max_seq_len must be >= 2, got -1"),
        ("sft.max_seq_len=-1", "sft.max_seq_len must be >= 2, got -1"),
        ("rollout.top_p=7", "rollout.top_p must be in (0, 1], got 7.0"),
        ("sft.batch_size=0", "sft.batch_size must be >= 1, got 0"),
        ("grpo.mini_batches=0", "grpo.mini_batches and grpo.epochs must be >= 1"),
        ("rollout.max_prompt_tokens=5000", "rollout.max_prompt_tokens must be < rollout.max_seq_len (1024)"),
    ],
)
def test_out_of_range_values_are_rejected(override, expected):
    with pytest.raises(ValueError) as info:
        load_config(None, [override])
    assert expected in str(info.value)


def test_the_recipes_load():
    for recipe in sorted((ROOT / "configs").glob("*.yaml")):
        load_config(recipe)


def test_overrides_on_both_sides_of_options(tmp_path):
    """`steps=-3 --out X sft.steps=-5`: both overrides reach the config (and both are reported)."""
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch" / "train.py"),
            "steps=-3",
            "--out",
            str(tmp_path / "run"),
            "sft.steps=-5",
            "--no-progress",
        ],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "steps must be >= 0, got -3" in result.stderr and "sft.steps must be >= 0, got -5" in result.stderr
