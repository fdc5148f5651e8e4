"""launch/plan.py compiles a recipe's real programs for 8 fake devices and checks the fit.

Runs in subprocesses (the device count is fixed when JAX starts). The Qwen3-0.6B recipe keeps every
shape but 2 of its 28 layers, so the compiles stay within the CI budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # compiles whole recipes in subprocesses

ROOT = Path(__file__).resolve().parents[2]
TWO_LAYERS = "model.overrides={num_hidden_layers: 2}"
GIB = 1024**3


def run_plan(tmp_path: Path, config: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    """launch/plan.py on `config` in a fresh process; its --json figures (None when it wrote none)."""
    out = tmp_path / "plan.json"
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch" / "plan.py"),
            "--config",
            str(config),
            "--json",
            str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        cwd=str(ROOT),
    )
    return proc, json.loads(out.read_text()) if out.exists() else None


def _plan(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    # The recipe's own target is h100-1 (the CUDA plugin, not installed for CI): plan on XLA:CPU.
    return run_plan(
        tmp_path, ROOT / "configs" / "qwen3_0.6b.yaml", "--target", "cpu", "--devices", "8", *args
    )


def test_qwen3_0_6b_recipe_fits_8_devices(tmp_path):
    proc, plan = _plan(tmp_path, "--hbm-gib", "80", TWO_LAYERS, "rollout.batch_rows=8")  # 1 row per device
    assert proc.returncode == 0, proc.stderr[-3000:]
    programs = {p["name"]: p for p in plan["programs"]}
    assert list(programs) == ["sft_step", "grpo_step", "sampler_refresh", "rollout_prefill", "rollout_decode"]
    # Hand-computed: 2 layers of Qwen3-0.6B + the tied 151936 x 1024 embedding, fp32, split over 8.
    layer = 1024 * 128 * (16 + 2 * 8) + 16 * 128 * 1024 + 2 * 128 + 3 * 1024 * 3072 + 2 * 1024
    params = (151936 * 1024 + 2 * layer + 1024) * 4
    grpo = programs["grpo_step"]
    assert abs(grpo["arguments"]["params"] - params / 8) < 0.01 * params / 8
    # AdamW's two moments are sharded like the parameters, not replicated.
    assert abs(grpo["arguments"]["optimizer state"] - 2 * params / 8) < 0.01 * params / 8
    # KV cache: the recipe's paged pool of kv_pages 32,768 = 8 rows x 65,536 slots in pages of 16: K
    # and V, 2 layers x 524,288 slots x 8 KV heads x 128 dims in bf16, over 8 shards.
    kv = 2 * 2 * 32768 * 16 * 8 * 128 * 2 / 8
    assert abs(programs["rollout_decode"]["arguments"]["KV cache"] - kv) < 1e-3 * kv  # + lengths, page tables
    assert programs["rollout_decode"]["resident"]["train state (params + Adam)"] >= 3 * params / 8 * 0.99
    for p in programs.values():
        assert p["temp_bytes"] > 0 and p["total_bytes"] < 0.9 * 80 * GIB
    assert proc.stdout.count("fits with 10% headroom") == 5


def test_too_many_rollout_rows_fail_naming_program_and_bytes(tmp_path):
    # kv_pages 0: a pool of 1,024 whole rows (the recipe's kv_pages would not grow with the rows)
    rows = ("rollout.batch_rows=1024", "rollout.kv_pages=0")
    proc, plan = _plan(tmp_path, "--hbm-gib", "80", "--programs", "rollout_decode", TWO_LAYERS, *rows)
    assert proc.returncode == 1
    decode = plan["programs"][0]
    kv = 2 * 2 * 1024 * 65536 * 8 * 128 * 2 / 8  # 32 GiB per device
    assert abs(decode["arguments"]["KV cache"] - kv) < 1e-4 * kv
    assert decode["total_bytes"] > 80 * GIB
    assert f"rollout_decode needs {decode['total_bytes']:,} bytes" in proc.stderr
    assert "DOES NOT FIT" in proc.stdout


def test_bad_arguments_are_one_line_errors(tmp_path):
    from tests.launch.test_cli_errors import run_script  # forked from one server: no JAX start

    proc = run_script("plan.py", "--config", ROOT / "configs" / "qwen3_0.6b.yaml", "--programs", "decode")
    assert (
        proc.returncode == 2
        and proc.stderr.startswith("error: --programs")
        and "Traceback" not in proc.stderr
    )


def test_himap_recipes_have_their_base_recipes_plan():
    """The HiMAP Qwen3 recipes (H100 and TPU) are not compiled here (like the other Qwen3 recipes);
    every setting the memory plan reads matches the base recipe's at its former 32k context (a HiMAP
    stream is one role's, not the whole episode): its Qwen3 RoPE,
    cache and turn cap, from the recipes' golden (tests/data/recipes_merged.json), and the paged pool
    (the single agent's recipes keep their contiguous bytes, as the HiMAP ones do). The rows
    are the pool's at the HiMAP streams' mean live length, more than the contiguous ones."""
    import json

    from b2tjax.config import load_config
    from tests.b2tjax.test_recipes import GOLDEN

    lengthened = json.loads((ROOT / "tests" / "data" / "recipe_changes" / "1_long_context.json").read_text())
    paged = json.loads((ROOT / "tests" / "data" / "recipe_changes" / "3_paged_kv.json").read_text())

    def planned(cfg) -> dict:
        r = cfg.rollout
        return {
            "model": cfg.model,
            "mesh": cfg.mesh,
            "hardware": cfg.hardware,
            "rollout": (r.cache_slots, r.cache_dtype, r.prefill_chunk, r.max_turn_tokens),
            "KV pool": (r.pool_pages, r.page_size),
            "sft": (cfg.sft.batch_size, cfg.sft.micro_batch_size, cfg.sft.max_seq_len),
            "grpo micro rows": cfg.grpo.micro_batch_size,
            "grpo": (cfg.grpo.logprob_chunk, cfg.grpo.beta),
        }

    for name in ("qwen3_4b", "qwen3_8b", "qwen3_8b_tpu"):
        himap = load_config(ROOT / "configs" / f"himap_{name}.yaml")
        old = GOLDEN[f"{name}.yaml"]
        before = [f"{key}={old[key]}" for key in lengthened[f"{name}.yaml"] if "rope" not in key]
        before.append("model.rope_scaling={kind: none, factor: 1.0, original_max_positions: 0}")
        base = load_config(ROOT / "configs" / f"{name}.yaml", before)
        assert himap.agent == "himap" and base.agent == "single"
        assert planned(himap) == planned(base), name
        rows = himap.rollout.batch_rows
        assert rows == paged[f"himap_{name}.yaml"]["rollout.batch_rows"] > base.rollout.batch_rows, name


def test_lora_recipe_trains_adapters_only_and_shares_the_base(tmp_path):
    """configs/qwen3_8b_lora.yaml with 2 of its 36 layers on its one 80 GB device: the optimizer
    state is the adapters' (hand-computed), the base is a bf16 argument of its own and the sampler
    holds only a bf16 copy of the adapters beside the train step."""
    config = ROOT / "configs" / "qwen3_8b_lora.yaml"
    proc, plan = run_plan(tmp_path, config, "--target", "cpu", "--programs", "grpo_step", TWO_LAYERS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (grpo,) = plan["programs"]
    # rank 16 on q, k, v, o, gate, up, down of Qwen3-8B (hidden 4096, 32 x 128 q, 8 x 128 kv, mlp 12288)
    per_layer = 16 * sum(i + o for i, o in [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096)])
    per_layer += 16 * (2 * (4096 + 12288) + (12288 + 4096))
    adapters = 2 * per_layer
    assert grpo["arguments"]["params"] == adapters * 4  # fp32
    assert grpo["arguments"]["optimizer state"] == 2 * adapters * 4 + 8  # two moments + counters
    layer = 4096 * 128 * (32 + 2 * 8) + 32 * 128 * 4096 + 2 * 128 + 3 * 4096 * 12288 + 2 * 4096
    base = 2 * 151936 * 4096 + 2 * layer + 4096  # untied embedding and LM head
    assert grpo["arguments"]["frozen base"] == base * 2  # bf16
    assert grpo["resident"]["sampler weights"] == adapters * 2  # the base is shared, not copied
    assert any("optimizer state" in note and "instead of" in note for note in grpo["notes"])
    assert "fits with 10% headroom" in proc.stdout
