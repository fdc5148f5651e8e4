"""The rollout package's shape rules: one power-of-two bucketer, and small modules (no file over
500 lines, no function over 80) so the engine stays split by job."""

from __future__ import annotations

import ast
import math
import pathlib

import pytest

from rollout.buckets import pow2_bucket

ROLLOUT = pathlib.Path(__file__).resolve().parent.parent / "rollout"


@pytest.mark.parametrize("n", [0, 1, 2, 3, 15, 16, 17, 100, 1024, 1025])
@pytest.mark.parametrize("floor", [1, 16, 64])
def test_pow2_bucket_is_the_smallest_power_of_two_at_least_n_and_floor(n: int, floor: int) -> None:
    expected = 2 ** math.ceil(math.log2(max(n, floor, 1)))
    assert pow2_bucket(n, floor) == expected


def test_rollout_modules_and_functions_stay_small() -> None:
    too_big = []
    for path in sorted(ROLLOUT.rglob("*.py")):
        source = path.read_text()
        if source.count("\n") > 500:
            too_big.append(f"{path.name}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    too_big.append(f"{path.name}:{node.lineno} {node.name}: {length} lines")
    assert not too_big, too_big
