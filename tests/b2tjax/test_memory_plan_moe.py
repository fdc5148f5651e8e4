"""The memory plan of a Qwen3-MoE: its parameters counted by hand (routed experts, routers, a
dense layer among sparse ones), the experts split over the mesh's expert axis and the other weights
not; the libtpu compile of the 30B-A3B recipe's sampler refresh holds exactly those bytes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from flax import nnx
from jax.sharding import AbstractMesh

from b2tjax.config import load_config
from b2tjax.plan.memory_plan import analytic_sizes
from models.config import get_config
from models.moe_config import MoeConfig
from models.qwen3 import Qwen3ForCausalLM

ROOT = Path(__file__).resolve().parents[2]
# hidden 32, 3 layers (the middle one dense), 4 query / 2 KV heads of 8, vocab 128, untied
MOE = MoeConfig(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, mlp_only_layers=(1,))
CFG = get_config(
    "tiny-untied", vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
    head_dim=8, moe=MOE,
)  # fmt: skip
ATTENTION = 32 * 4 * 8 + 2 * (32 * 2 * 8) + 4 * 8 * 32 + 2 * 8  # q, k, v, o, q/k norms
EXPERTS = 8 * 3 * 32 * 16  # gate, up, down of 8 experts
SPARSE = EXPERTS + 32 * 8  # + the router
DENSE = 3 * 32 * 64
PARAMS = 2 * 128 * 32 + 3 * (ATTENTION + 2 * 32) + 2 * SPARSE + DENSE + 32  # embed, head, layers, norm


def test_a_moe_counts_its_experts_routers_and_dense_layers_by_hand():
    assert CFG.moe.sparse_layers(3) == (True, False, True)
    assert CFG.num_params() == PARAMS == 48_912
    assert CFG.num_expert_params() == 2 * EXPERTS
    state = nnx.state(nnx.eval_shape(lambda: Qwen3ForCausalLM(CFG, rngs=nnx.Rngs(0))), nnx.Param)
    assert sum(x.size for x in jax.tree.leaves(state)) == PARAMS  # the model builds what is counted
    dense = dataclasses.replace(CFG, moe=None)
    assert dense.num_expert_params() == 0 and dense.num_params() == PARAMS - 2 * SPARSE + 2 * DENSE


def test_the_expert_axis_splits_only_the_experts():
    cfg = load_config(None, ["model.compute_dtype=bfloat16"])
    others = PARAMS - 2 * EXPERTS
    mesh = AbstractMesh((1, 4, 2, 2), ("data", "fsdp", "expert", "tensor"))
    sizes = analytic_sizes(cfg, CFG, mesh)
    # fp32 train state: experts over all 16 devices, the rest over fsdp 4 x tensor 2 (replicated on expert)
    assert sizes["params"] == 2 * EXPERTS * 4 // 16 + others * 4 // 8
    assert sizes["optimizer state"] == 2 * sizes["params"]
    # bf16 sampler: experts over expert 2 x tensor 2, the rest over tensor 2
    assert sizes["sampler weights"] == 2 * EXPERTS * 2 // 4 + others * 2 // 2
    plain = analytic_sizes(cfg, CFG, AbstractMesh((1, 8, 1, 2), ("data", "fsdp", "expert", "tensor")))
    assert (plain["params"], plain["sampler weights"]) == (PARAMS * 4 // 16, PARAMS * 2 // 2)


@pytest.mark.slow
def test_libtpu_lays_the_30b_recipe_out_as_counted(tmp_path):
    """configs/qwen3_30b_a3b_tp.yaml at 2 of its 48 layers, its sampler refresh compiled by libtpu
    for the v5p-64: the train-layout params and the sampler weights it takes are the analytic split."""
    pytest.importorskip("libtpu", reason="libtpu is not installed (pip install -e .[test] brings it)")
    out = tmp_path / "plan.json"
    recipe = ROOT / "configs" / "qwen3_30b_a3b_tp.yaml"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "launch" / "plan.py"), "--config", str(recipe), "--programs",
         "sampler_refresh", "--json", str(out), "model.overrides={num_hidden_layers: 2}"],
        capture_output=True, text=True, timeout=600, cwd=str(ROOT),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (refresh,) = json.loads(out.read_text())["programs"]
    model = get_config("qwen3-30b-a3b", num_hidden_layers=2)
    experts, others = model.num_expert_params(), model.num_params() - model.num_expert_params()
    params = experts * 4 // 32 + others * 4 // 8  # fsdp 4 x expert 4 x tensor 2; others over fsdp x tensor
    sampler = experts * 2 // 8 + others * 2 // 2  # bf16 over expert x tensor; others over tensor
    assert refresh["arguments"] == {
        "params": pytest.approx(params, rel=1e-3),
        "sampler weights": pytest.approx(sampler, rel=1e-3),
    }
    assert refresh["analytic"]["params"] == params and refresh["analytic"]["sampler weights"] == sampler
