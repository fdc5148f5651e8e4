"""The rollout package's one power-of-two bucketer (the size rules of every package are in
tests/project/test_code_shape.py)."""

from __future__ import annotations

import math

import pytest

from rollout.buckets import pow2_bucket


@pytest.mark.parametrize("n", [0, 1, 2, 3, 15, 16, 17, 100, 1024, 1025])
@pytest.mark.parametrize("floor", [1, 16, 64])
def test_pow2_bucket_is_the_smallest_power_of_two_at_least_n_and_floor(n: int, floor: int) -> None:
    expected = 2 ** math.ceil(math.log2(max(n, floor, 1)))
    assert pow2_bucket(n, floor) == expected
