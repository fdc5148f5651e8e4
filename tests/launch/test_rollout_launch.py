"""`python launch/rollouts.py --model tiny`: the JSONL it writes is a faithful, reloadable record."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from tests.sandbox_fixtures import small_world_path  # noqa: F401

pytestmark = pytest.mark.slow  # runs launch/rollouts.py end to end

SCRIPT = Path(__file__).resolve().parents[2] / "launch" / "rollouts.py"


def _launch_main():
    """launch/rollouts.py's main, loaded by path (launch/ is not a package)."""
    spec = importlib.util.spec_from_file_location("launch_rollout", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def _write_instances(data: Path) -> None:
    (data / "instances").mkdir(parents=True)
    rows = []
    for i in range(2):
        events = [
            {
                "timestamp": f"2026-03-0{1 + k} 10:00",
                "session": 1 + k,
                "action": a,
                "poi_type": "hotel",
                "poi_id": "H-Chengdu-1",
                "poi_name": "Jinjiang Hotel",
                "details": {"city": "Chengdu"},
            }
            for k, a in enumerate(["click", "add_to_favorites", "book"])
        ]
        rows.append(
            {
                "id": f"test-easy-{i:05d}",
                "split": "test",
                "difficulty": "easy",
                "instruction": f"Plan a {2 + i}-day trip from Shanghai to Chengdu for two.",
                "trajectory": events,
            }
        )
    (data / "instances" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_launch_rollout_tiny_writes_records(tmp_path, small_world_path):
    from models.tokenizer import load_tokenizer

    main = _launch_main()
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(small_world_path, data / "world.sqlite")
    _write_instances(data)
    out = tmp_path / "out" / "r.jsonl"
    assert (
        main(
            [
                "--model",
                "tiny",
                "--data",
                str(data),
                "--split",
                "test",
                "--num",
                "2",
                "--out",
                str(out),
                "--batch-size",
                "1",
                "--max-turns",
                "1",
                "--max-turn-tokens",
                "4",
                "--max-total-tokens",
                "4096",
                "--max-prompt-tokens",
                "4000",
                "--turn-cap",
                "close",
            ]
        )
        == 0
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["instance_id"] for r in records] == ["test-easy-00000", "test-easy-00001"]
    tok = load_tokenizer(records[0]["tokenizer"])
    for r in records:
        for key in ("ids", "loss_mask", "logprobs", "turns", "errors", "answer", "stop_reason", "tokenizer"):
            assert key in r
        assert len(r["ids"]) == len(r["loss_mask"]) == len(r["logprobs"])
        assert all(lp == 0.0 for lp, m in zip(r["logprobs"], r["loss_mask"]) if m == 0)
        assert r["stop_reason"] == "max_turns" and r["truncated"] and len(r["turns"]) == 1
        assert r["errors"] and all(r["errors"])  # random text is never a valid action
        text = tok.decode(r["ids"][: r["prompt_len"]])
        assert "# Tools" in text and "Jinjiang Hotel" in text and text.endswith("<|im_start|>assistant\n")
