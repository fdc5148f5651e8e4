"""b2tjax/cli/kv_rows.py: the rows per chip a KV budget holds, contiguous vs paged, at live lengths.

Fast: a recipe and a synthetic DATA/trace_lengths.json, no compile (test_memory_plan_paged.py
compiles the paged programs).
"""

from __future__ import annotations

import json
from pathlib import Path

from b2tjax.cli.himap_streams import team_lengths
from b2tjax.cli.kv_rows import (
    budget_pages,
    contiguous_rows,
    himap_live_lengths,
    himap_rows,
    himap_team,
    kv_budget_lines,
    live_lengths,
    mean_prompt,
    paged_rows,
    row_pages,
    rows_per_chip,
    saved_pages,
    team_row_pages,
)
from b2tjax.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def lengths(data: Path, prompts: list[int], totals: list[int]) -> dict:
    """A trace_lengths.json of the Qwen3 tokenizer's traces (prompts, totals), written to `data`."""
    group = {"prompts": prompts, "totals": totals, "longest_turns": [100] * len(prompts)}
    stats = {"tokenizer": "qwen3", "python_tool_tokens": 0, "splits": {"train": {"all": group}}}
    data.mkdir(parents=True, exist_ok=True)
    (data / "trace_lengths.json").write_text(json.dumps(stats))
    return stats


def test_rows_per_chip_at_the_mean_and_p90_live_length(tmp_path):
    # 8 rows x 65,536 slots = 32,768 pages of 16 on 8 chips (8 row shards of 4,096 pages)
    overrides = [f"data.data_dir={tmp_path}", "rollout.batch_rows=8", "rollout.kv_pages=0"]
    cfg = load_config(ROOT / "configs" / "qwen3_0.6b.yaml", overrides)
    stats = lengths(tmp_path, [1000] * 9 + [8000], [20000] * 9 + [60000])
    # (p + L) / 2: nine traces of 10,500 and one of 34,000 -> mean 12,850, p90 10,500
    assert live_lengths(cfg, stats) == (12850, 10500)
    # a 10,500-token row takes 657 pages: 4,096 // 657 = 6 per shard, 6 x 8 shards / 8 chips
    assert rows_per_chip(cfg, 10500, shards=8, chips=8) == 6
    assert rows_per_chip(cfg, 12850, shards=8, chips=8) == 4096 // 804
    lines = kv_budget_lines(cfg, stats, shards=8, chips=8, slot_bytes=1000, kv_bytes_per_chip=2**30)
    assert lines[0].startswith("KV budget: page pool of 32,768 pages x 16 = 524,288 token slots")
    assert "1.00 GiB per chip" in lines[0]
    assert "contiguous 1 (each row reserves 65,536); paged at the mean live length 12,850: 5 (" in lines[1]
    assert "at the p90 live length 10,500: 6 (" in lines[1]


def test_a_group_holds_its_prompts_full_pages_once(tmp_path):
    """Shared prompt pages by hand: a group of G = 8 rows holds the full pages of its prompt once."""
    cfg = load_config(
        ROOT / "configs" / "qwen3_0.6b.yaml", [f"data.data_dir={tmp_path}", "rollout.batch_rows=8"]
    )
    assert (cfg.rollout.group_size, cfg.rollout.page_size, cfg.rollout.pool_pages) == (8, 16, 32768)
    # a 1,000-token prompt: 62 full pages (the 63rd, 8 tokens, is each row's own copy)
    assert row_pages(10500, 1000, 1, 16) == 657  # no sharing: pages(10,500)
    assert row_pages(10500, 1000, 8, 16) == 657 - 7 / 8 * 62  # 602.75: 8 rows hold 4,822 pages
    assert row_pages(10, 1000, 8, 16) == 1  # a row shorter than the prompt shares no more than it holds
    stats = lengths(tmp_path, [1000] * 9 + [8000], [20000] * 9 + [60000])
    assert mean_prompt(cfg, stats) == 1700  # (9 x 1,000 + 8,000) / 10: 106 full pages
    # mean live 12,850: 804 pages - 7/8 x 106 = 711.25 -> 4,096 // 711.25 = 5 rows per shard;
    # p90 live 10,500: 657 - 92.75 = 564.25 -> 7 (6 without sharing)
    assert rows_per_chip(cfg, 12850, 8, 8, prompt=1700, group=8) == 5
    assert rows_per_chip(cfg, 10500, 8, 8, prompt=1700, group=8) == 7
    assert paged_rows(cfg, stats, shards=8, chips=8) == {"mean": (12850, 5, 5), "p90": (10500, 6, 7)}
    lines = kv_budget_lines(cfg, stats, shards=8, chips=8, slot_bytes=1000, kv_bytes_per_chip=2**30)
    assert "a group of 8 holds its mean 1,700-token prompt's full pages once" in lines[1]
    assert "at the p90 live length 10,500: 6 (7 with the group's shared prompt pages)" in lines[1]


def test_a_paged_pool_says_batch_rows_caps_the_rows_and_unknown_lengths_say_why(tmp_path):
    cfg = load_config(
        ROOT / "configs" / "qwen3_0.6b.yaml",
        [
            f"data.data_dir={tmp_path}",
            "rollout.batch_rows=8",
            "rollout.kv_pages=8192",
        ],
    )
    lines = kv_budget_lines(cfg, None, shards=8, chips=8, slot_bytes=1000, kv_bytes_per_chip=2**28)
    assert lines[0].startswith("KV budget: page pool of 8,192 pages x 16 = 131,072 token slots")
    assert "paged not estimated" in lines[1] and "trace_lengths.json" in lines[1]
    stats = lengths(tmp_path, [1000] * 10, [3000] * 10)  # 2,000 live tokens: 125 pages, 1,024 per shard
    lines = kv_budget_lines(cfg, stats, shards=8, chips=8, slot_bytes=1000, kv_bytes_per_chip=2**28)
    assert "paged at the mean live length 2,000: 8" in lines[1]
    assert lines[2].startswith("the engine decodes at most rollout.batch_rows / chips = 1 rows per chip")


def test_the_contiguous_rows_are_the_budgets_not_batch_rows():
    """The recipe's pool (kv_pages 32,768 = 8 rows x 65,536 / 16) runs 24 rows; a contiguous cache of
    its bytes holds 8. kv_pages 0 sizes the pool as batch_rows whole rows."""
    paged = load_config(ROOT / "configs" / "qwen3_0.6b.yaml")
    assert (paged.rollout.batch_rows, budget_pages(paged)) == (24, 32768)
    assert contiguous_rows(paged, chips=1) == 8
    whole = load_config(ROOT / "configs" / "qwen3_0.6b.yaml", ["rollout.kv_pages=0"])
    assert budget_pages(whole) == 24 * 4096 and contiguous_rows(whole, chips=4) == 6


HIMAP = {  # two teams of the scripted HiMAP expert: [prompt, total] per stream
    "instances": 2,
    "teams": [
        {"coordinator": [1000, 3000], "executors": [[4000, 6000]] * 3, "executor_prefix": 3900},
        {"coordinator": [1000, 5000], "executors": [[4000, 8000]], "executor_prefix": 0},
    ],
}


def test_a_himap_team_s_streams_by_hand(tmp_path):
    """HiMAP rows are streams: live (p + L) / 2 over every coordinator and executor; a GRPO group of
    G teams holds its coordinators' prompt once and each team's executors their common prefix once."""
    cfg = load_config(
        ROOT / "configs" / "qwen3_0.6b.yaml", [f"data.data_dir={tmp_path}", "rollout.batch_rows=8"]
    )
    # lives 2,000, 5,000 x 3, 3,000, 6,000: mean 26,000 / 6 = 4,333, p90 (6th of 6) 6,000
    assert himap_live_lengths(HIMAP) == (4333, 6000)
    assert himap_team(HIMAP) == (1000, 2.0, 1950)  # (3 + 1) / 2 executors, (3,900 + 0) / 2 prefix
    # G = 8: 7 x 62 full prompt pages + 8 teams x 1 x 121 full prefix pages over 8 x 3 rows
    assert saved_pages([(1000, 8, 1), (1950, 2.0, 8)], 24, 16) == (7 * 62 + 8 * 121) / 24
    assert team_row_pages(4333, HIMAP, 8, 16) == 271 - 1402 / 24  # 212.58 pages
    # 4,096 pages per shard: 4,096 // 271 = 15 alone, // 212.58 = 19; p90 375 pages: 10, // 316.58 = 12
    assert himap_rows(cfg, HIMAP, shards=8, chips=8) == {"mean": (4333, 15, 19), "p90": (6000, 10, 12)}
    assert team_row_pages(4333, HIMAP, 1, 16) == 271 - 121 / 3  # one team: its executors' prefix only
    himap = load_config(ROOT / "configs" / "himap_qwen3_4b.yaml", [f"data.data_dir={tmp_path}"])
    stats = lengths(tmp_path, [1000], [3000])
    lines = kv_budget_lines(himap, stats, shards=8, chips=8, slot_bytes=1000, kv_bytes_per_chip=2**30)
    assert "paged not estimated: agent himap" in lines[1] and "trace_lengths.py --kv-rows" in lines[1]


def test_a_team_s_executors_share_their_records_common_prefix():
    streams = [
        ("coordinator", {"prompt": 5, "total": 9}, [1, 2, 3]),
        ("executor", {"prompt": 4, "total": 6}, [7, 7, 7, 1]),
        ("executor", {"prompt": 4, "total": 8}, [7, 7, 8, 1]),
    ]
    assert team_lengths(streams) == {
        "coordinator": [5, 9],
        "executors": [[4, 6], [4, 8]],
        "executor_prefix": 2,
    }
    assert team_lengths(streams[:2])["executor_prefix"] == 0  # one executor shares with none
