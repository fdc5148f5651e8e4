"""launch/plan.py compiles the Qwen3-0.6B TPU recipe with the TPU compiler itself, on this CPU machine.

libtpu (the `[test]` extra brings it through `jax[tpu]`) gives compile-only devices of the recipe's
v5p-8 slice (4 chips); the figures checked are the TPU compiler's own `memory_analysis()`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.b2tjax.test_memory_plan import ROOT, run_plan

pytestmark = pytest.mark.slow  # compiles recipes with libtpu

pytest.importorskip("libtpu", reason="libtpu is not installed (pip install -e .[test] brings it)")

RECIPE = ROOT / "configs" / "qwen3_0.6b_tpu.yaml"
GIB = 1024**3
# Qwen3-0.6B by hand: hidden 1024, 16 query / 8 KV heads of 128, MLP 3072, tied 151936-token embedding.
LAYER = 1024 * 128 * (16 + 2 * 8) + 16 * 128 * 1024 + 2 * 128 + 3 * 1024 * 3072 + 2 * 1024
LAYERS = 2  # every shape of the recipe but 2 of its 28 layers (the layers are one scan either way)
PARAMS = 151936 * 1024 + LAYERS * LAYER + 1024
CHIPS = 4
PROGRAMS = ("grpo_step", "sampler_refresh", "rollout_decode")


def _plan(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    return run_plan(tmp_path, RECIPE, *args)


@pytest.fixture(scope="module")
def tpu_plan(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    # The programs holding the weights, AdamW state and KV cache; the SFT step and the prefill (whose
    # plans docs/results/memory-plans.md shows) would double the compile time without checking other sizes.
    proc, plan = _plan(
        tmp_path_factory.mktemp("tpu"),
        "--programs",
        ",".join(PROGRAMS),
        f"model.overrides={{num_hidden_layers: {LAYERS}}}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, plan


def test_recipe_compiles_for_its_tpu_slice_by_default(tpu_plan):
    proc, plan = tpu_plan
    assert (plan["target"], plan["platform"], plan["devices"]) == ("v5p-8", "tpu", 4)
    assert plan["hbm_bytes"] == 95 * GIB  # a v5p chip
    assert "v5p-8: 4 x TPU v5p (TPU compiler)" in proc.stdout
    assert "rollout 96 rows (24 per chip)" in proc.stdout  # paged: the pool holds 24 a chip at the mean
    assert tuple(p["name"] for p in plan["programs"]) == PROGRAMS
    assert proc.stdout.count("fits with 10% headroom") == len(PROGRAMS)


def test_tpu_compiler_bytes_match_the_analytic_sizes(tpu_plan):
    """The compiler's argument bytes are the weights, AdamW state and KV cache computed by hand."""
    programs = {p["name"]: p for p in tpu_plan[1]["programs"]}
    fp32_params = 4 * PARAMS / CHIPS  # FSDP over the 4 chips
    grpo = programs["grpo_step"]
    batch = grpo["arguments"]["batch"]
    assert grpo["argument_bytes"] == pytest.approx(3 * fp32_params + batch, rel=0.005)  # params + 2 moments
    assert grpo["output_bytes"] == pytest.approx(3 * fp32_params, rel=0.005)  # donated: updated in place
    assert grpo["alias_bytes"] == pytest.approx(3 * fp32_params, rel=0.005)
    # KV cache: the paged pool of 131,072 pages x 16 slots (the 32 contiguous rows' 32 x 65,536):
    # K and V, 2 layers x 8 KV heads x 128 dims in bf16, pages over 4; + lengths and page tables.
    kv = 2 * LAYERS * 131072 * 16 * 8 * 128 * 2 / CHIPS
    logits = 96 * 151936 * 4 / CHIPS  # the 96 rows' next-token logits (fp32), carried with the cache
    sampler = 2 * PARAMS  # bf16 sampler weights, replicated (tensor 1)
    decode = programs["rollout_decode"]
    assert decode["argument_bytes"] == pytest.approx(sampler + kv + logits, rel=0.005)
    # The TPU compile updates the donated cache in place: no second cache in the temporaries (the
    # XLA:CPU fallback's decode temporaries hold about two).
    assert decode["alias_bytes"] == pytest.approx(kv + logits, rel=0.005)
    assert decode["temp_bytes"] < 0.25 * kv
    refresh = programs["sampler_refresh"]
    assert refresh["argument_bytes"] == pytest.approx(fp32_params + sampler, rel=0.005)


def test_unknown_target_and_mismatched_devices_are_one_line_errors(tmp_path):
    from tests.launch.test_cli_errors import run_script  # forked from one server: no JAX start each

    for args, message in (
        (("--target", "v7x-8"), "error: unknown target 'v7x-8'"),
        (("--target", "v5p-12"), "error: target 'v5p-12': a v5p slice has 8, 16"),
        (("--target", "v5e-8", "--devices", "4"), "error: --devices 4 disagrees with target v5e-8"),
        (("hardware.devices=8",), "error: hardware.devices is 8 but target v5p-8 has 4 chips"),
    ):
        proc = run_script("plan.py", "--config", RECIPE, "--json", tmp_path / "plan.json", *args)
        assert proc.returncode == 2 and proc.stderr.startswith(message), (args, proc.stderr[-500:])
        assert "Traceback" not in proc.stderr


def test_multislice_mesh_puts_the_slices_on_the_data_axis():
    """2 x v5e-4: data spans the slices (DCN), fsdp stays inside one slice (ICI); with data 1 the
    fsdp axis spans them."""
    from b2tjax.plan.targets import parse_target, target_mesh
    from rollout.programs import program_platform

    target = parse_target("2xv5e-4")
    mesh = target_mesh(target, 2, -1, 1)
    assert dict(mesh.shape) == {"data": 2, "fsdp": 4, "tensor": 1}
    assert program_platform(mesh) == "tpu"  # the sampler's programs are built for the slice, not the host
    slices = [[d.slice_index for d in row] for row in mesh.devices[:, :, 0]]
    assert slices == [[0] * 4, [1] * 4]
    mesh = target_mesh(target, 1, -1, 1)
    assert sorted(d.slice_index for d in mesh.devices.reshape(-1)) == [0] * 4 + [1] * 4


def test_tpu_prefill_writes_the_donated_cache_in_place():
    """The TPU compile of a prefill chunk holds no copy of the cache. With the cache laid out as
    [L, B, S, KVH, D], or the KV heads as the write's scatter window, the TPU compiler copied K or V
    whole into another layout around the layer loop (27 GiB on the 8B v5p-32 recipe at 192 rows)
    when a chip held fewer than 8 KV heads of a query group over 1 (here: 8 KV heads over tensor 2
    leave 4 per chip, 2 queries each, as the 8B has 4 per chip, 4 queries each)."""
    from b2tjax.config import load_config
    from b2tjax.plan import memory_plan
    from b2tjax.plan.targets import parse_target, target_mesh

    heads = "model.overrides={head_dim: 128, num_attention_heads: 16, num_key_value_heads: 8}"
    cfg = load_config(
        ROOT / "configs" / "tiny_cpu.yaml",
        [heads, "model.compute_dtype=bfloat16", "mesh={data: 1, fsdp: 2, tensor: 2}", "rollout.batch_rows=8"]
        + ["rollout.max_seq_len=4096"],
    )
    mesh = target_mesh(parse_target("v5e-4"), 1, 2, 2)
    (prefill,) = memory_plan.plan_programs(cfg, mesh, ("rollout_prefill",))
    kv = 2 * 2 * (8 // 2) * (8 // 2) * 4096 * 128 * 2  # K and V: 2 layers x 4 rows x 4 heads per chip, bf16
    assert prefill.arguments["KV cache"] == pytest.approx(kv, rel=0.001)
    assert prefill.temp_bytes < 0.1 * kv  # the old layouts: 0.53 x the cache; now 0.04


def test_tensor_pairs_split_a_torus_axis():
    """fsdp 8 x tensor 2 on a 4x4 v6e-16 takes no whole torus axis per mesh axis (libtpu's own
    assignment refuses it): the grid splits them, each tensor pair two neighbouring chips."""
    from b2tjax.plan.targets import parse_target, target_mesh

    mesh = target_mesh(parse_target("v6e-16"), 1, -1, 2)
    assert dict(mesh.shape) == {"data": 1, "fsdp": 8, "tensor": 2}
    assert len({d.id for d in mesh.devices.reshape(-1)}) == 16
    for pair in mesh.devices.reshape(8, 2):
        distance = sum(abs(a - b) for a, b in zip(pair[0].coords, pair[1].coords, strict=True))
        assert distance == 1, [d.coords for d in pair]
