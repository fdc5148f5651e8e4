"""The memory plan's attention note (b2tjax/plan/attention.py) against sizes computed by hand."""

from __future__ import annotations

from b2tjax.config import load_config
from b2tjax.plan.attention import attention_note
from models.config import get_config
from tests.b2tjax.test_memory_plan import ROOT

QWEN3_06B = get_config("qwen3-0.6b")  # 16 query heads over 8 KV heads


def _cfg(attention: str):
    return load_config(ROOT / "configs" / "tiny_cpu.yaml", [f"model.attention={attention}"])


def test_reference_note_gives_the_fp32_score_block():
    note = attention_note(_cfg("reference"), QWEN3_06B, None, 4, 16384)
    # 4 rows x 16 heads x 1024 queries x 16384 keys x 4 bytes = 4 GiB
    assert note == (
        "attention: reference path, fp32 scores of one query block per layer "
        "[4 rows x 16 heads x 1024 x 16384]: 4.000 GiB"
    )


def test_splash_note_gives_its_blocks_and_log_sum_exp():
    note = attention_note(_cfg("splash"), QWEN3_06B, None, 1, 1000)
    # T 1000 is padded to 1024 (blocks of 512); the reference path would not block a 1000-token row
    assert note.startswith("attention: Pallas splash (T 1024, blocks 512), scores in on-chip blocks")
    assert note.endswith("[1 rows x 16 heads x 1000 x 1000]: 0.060 GiB)")
