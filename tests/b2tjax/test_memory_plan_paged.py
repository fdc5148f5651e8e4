"""launch/plan.py compiles the rollout decode over the KV page pool of
rollout.pool_pages pages, prints its bytes per chip and the rows per chip it holds at the traces'
live lengths, and refuses a kv_pages budget that does not fit (exit 1, naming program and bytes).

The Qwen3-0.6B recipe with 2 of its 28 layers on 8 fake CPU devices, as tests/b2tjax/test_memory_plan.py.
"""

from __future__ import annotations

import pytest

from tests.b2tjax.test_kv_rows import lengths
from tests.b2tjax.test_memory_plan import ROOT, TWO_LAYERS, run_plan

pytestmark = pytest.mark.slow  # two compiles of the decode program in subprocesses

GIB = 1024**3
POOL = 8 * 65536 // 16  # the recipe's kv_pages: 8 whole rows of 65,536 slots, in pages of 16


def _plan(tmp_path, *overrides: str):
    lengths(tmp_path / "data", [1000] * 10, [20000] * 10)  # live tokens per row: 10,500
    return run_plan(
        tmp_path,
        ROOT / "configs" / "qwen3_0.6b.yaml",
        *("--target", "cpu", "--devices", "8", "--hbm-gib", "16", "--programs", "rollout_decode"),
        *(TWO_LAYERS, f"data.data_dir={tmp_path / 'data'}", "rollout.batch_rows=8"),
        *overrides,
    )


def test_paged_decode_is_planned_on_the_pool_with_its_rows_per_chip(tmp_path):
    proc, plan = _plan(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the pool: K and V, 2 layers x POOL pages x 16 slots x 8 KV heads x 128 dims in bf16, over 8 shards
    kv = 2 * 2 * POOL * 16 * 8 * 128 * 2 / 8
    decode = plan["programs"][0]
    assert abs(decode["arguments"]["KV cache"] - kv) < 1e-3 * kv  # + the row lengths and page tables
    assert (
        f"KV budget: page pool of {POOL:,} pages x 16 = 524,288 token slots, 0.50 GiB per chip" in proc.stdout
    )
    # 10,500 live tokens: 657 pages; 4,096 pages per row shard hold 6 rows where contiguous holds 1
    assert "contiguous 1 (each row reserves 65,536); paged at the mean live length 10,500: 6" in proc.stdout
    assert "fits with 10% headroom" in proc.stdout


def test_a_pool_over_the_memory_is_refused(tmp_path):
    proc, plan = _plan(tmp_path, f"rollout.kv_pages={40 * POOL}")  # 20 GiB of pool per device
    assert proc.returncode == 1
    decode = plan["programs"][0]
    assert decode["arguments"]["KV cache"] >= 20 * GIB
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: rollout_decode needs {decode['total_bytes']:,} bytes"
    )
    assert "DOES NOT FIT" in proc.stdout
