"""`launch/eval.py --policy model` for a single agent: a checkpoint's greedy episodes under a recipe's
rollout: section are scored as launch/rollouts.py's greedy records of the same checkpoint are (the same
answers, verdicts and metrics), and each episode's end is written beside the metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.launch_scripts import load_script
from tests.rollout_fixtures import rollout_setup  # noqa: F401  (session fixture)
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)

pytestmark = pytest.mark.slow  # rolls a checkpoint out twice through the engine

ROOT = Path(__file__).resolve().parents[2]


def _two_instances(data: Path, out: Path) -> Path:
    """`data` with a test split of its first two instances (the world linked, not copied)."""
    out.mkdir()
    (out / "world.sqlite").symlink_to(data / "world.sqlite")
    for sub in ("instances", "ground_truth"):
        (out / sub).mkdir()
        lines = (data / sub / "test.jsonl").read_text().splitlines(keepends=True)
        (out / sub / "test.jsonl").write_text("".join(lines[:2]))
    return out


def test_eval_of_a_model_scores_what_its_rollouts_answer(
    tmp_path,
    rollout_setup,  # noqa: F811
    small_benchmark,  # noqa: F811
):
    from models.checkpoint import save_model

    ckpt = tmp_path / "ckpt"
    save_model(rollout_setup.model, ckpt)
    rollout_setup.tokenizer.save_hf(ckpt)
    # the tiny recipe with short turns (a random model writes them all) and room for the prompts of
    # this smaller vocabulary
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"base: {ROOT / 'configs' / 'tiny_cpu.yaml'}\n"
        "rollout: {max_turns: 1, max_turn_tokens: 8, python_tool: false, max_seq_len: 8192,\n"
        "          max_prompt_tokens: 8000}\n"
    )
    data = ["--data", str(_two_instances(small_benchmark, tmp_path / "data")), "--split", "test"]
    records = tmp_path / "r.jsonl"
    rolled = load_script("launch/rollouts.py").main(
        [*data, "--checkpoint", str(ckpt), "--config", str(recipe), "--temperature", "0"]
        + ["--num", "2", "--out", str(records)]
    )
    assert rolled == 0
    evaluate = load_script("launch/eval.py").main
    outputs = {}
    for name, source in (
        ("records", ["--records", str(records)]),
        ("model", ["--policy", "model", "--checkpoint", str(ckpt), "--config", str(recipe)]),
    ):
        json_out, details = tmp_path / f"{name}.json", tmp_path / f"{name}.jsonl"
        assert evaluate([*data, *source, "--json", str(json_out), "--details", str(details)]) == 0
        outputs[name] = json.loads(json_out.read_text()), details.read_text().splitlines()

    (by_records, verdicts), (by_model, model_verdicts) = outputs["records"], outputs["model"]
    episodes = by_model.pop("episodes")
    assert by_model == by_records and by_model["n"] == 2
    assert model_verdicts == verdicts
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert sorted(episodes, key=lambda e: e["id"]) == sorted(
        (
            {
                "id": row["instance_id"],
                "stop_reason": row["stop_reason"],
                "turns": len(row["turns"]),
                "sampled_tokens": sum(row["loss_mask"]),
            }
            for row in rows
        ),
        key=lambda e: e["id"],
    )
    assert all(e["sampled_tokens"] > 0 for e in episodes)  # the episodes ran
