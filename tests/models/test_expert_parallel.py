"""A Qwen3-MoE model (LoRA on its experts) with its experts sharded over the
mesh's expert axis (8 fake CPU devices, in a subprocess), composed with data, FSDP and tensor
parallelism: logits and every parameter's gradient
equal the unsharded dense reference's, the load-balance loss's included, and so do the routers'
statistics over the whole batch. On a CPU the tokens move by all-gather and reduce-scatter;
the TPU exchange (ragged all-to-all) is compiled by libtpu for a v5p slice."""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path

import pytest

# mesh sizes, expert computation. 4 rows of 5 tokens: rows split over expert 4, not over 8 row
# devices, where the 20 tokens are padded with unrouted ones inside the block.
CASES = {
    "expert2_fsdp2_data2": (dict(data=2, fsdp=2, expert=2), "dense"),
    "expert4_tensor2": (dict(data=1, fsdp=1, expert=4, tensor=2), "ragged"),
}
ROWS, LENGTH = 4, 5


def _config(num_experts: int = 8):
    from models.config import get_config
    from models.moe_config import MoeConfig

    moe = MoeConfig(
        num_experts=num_experts, num_experts_per_tok=2, moe_intermediate_size=16, norm_topk_prob=True
    )
    return get_config(
        "tiny-untied", vocab_size=128, hidden_size=32, intermediate_size=64, head_dim=8, moe=moe,
        initializer_range=0.2,
    )  # fmt: skip


def _child() -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from models import lora
    from models.moe import EXPERT_NAMES, MoeBlock
    from models.qwen3 import Qwen3ForCausalLM
    from models.router_stats import load_balance_loss
    from models.settings import ModelRuntime
    from models.sharding import make_mesh, state_shardings

    cfg = _config()

    def build(impl: str) -> Qwen3ForCausalLM:
        """The model with LoRA on the experts, B nonzero (a trained adapter's): the factors are
        sharded and exchanged with the experts, their model dim gathered over fsdp and their MLP
        dim's partial sums added over tensor. Without adapters the same path, less the factors."""
        model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(moe_experts=impl))
        lora.add_lora(model, lora.LoraConfig(rank=4, alpha=8.0, targets=list(EXPERT_NAMES)), seed=1)
        for i, target in enumerate(EXPERT_NAMES):
            b = getattr(lora.modules_of(model, target)[0][1], f"{target}_lora_b")
            b[...] = 0.1 * jax.random.normal(jax.random.key(i), b.shape)
        return model

    reference = nnx.jit(build, static_argnums=0)("dense")
    weights = nnx.to_pure_dict(nnx.state(reference))

    def loss(model, ids, segments, probe):  # the load-balance loss too: its gradient reaches the routers
        hidden, router = model.hidden_and_router(ids, None, segments)
        logits = model.logits(hidden)
        probed = jnp.sum(jnp.where(segments[..., None] > 0, logits, 0.0) * probe)
        return probed + load_balance_loss(router), (logits, router)

    step = nnx.jit(nnx.value_and_grad(loss, has_aux=True))
    rng = np.random.default_rng(0)
    ids = jnp.asarray(rng.integers(0, cfg.vocab_size, (ROWS, LENGTH)), jnp.int32)
    segments = np.ones((ROWS, LENGTH), np.int32)
    segments[1, 3:] = 0  # padding: neither routed nor counted
    segments[2, 2:] = 2  # two records packed in a row
    segments = jnp.asarray(segments)
    probe = jnp.asarray(rng.normal(size=(ROWS, LENGTH, cfg.vocab_size)), jnp.float32)
    (_, (want, want_router)), want_grad = step(reference, ids, segments, probe)
    out: dict = {"grad_scale": max(float(jnp.abs(g).max()) for g in jax.tree.leaves(want_grad))}
    for name, (sizes, impl) in CASES.items():
        mesh = make_mesh(**sizes)
        graph, state = nnx.split(nnx.eval_shape(functools.partial(build, impl)))
        nnx.replace_by_pure_dict(state, jax.device_put(weights, state_shardings(state, mesh)))
        model = nnx.merge(graph, state)
        with jax.set_mesh(mesh):
            (_, (got, router)), grad = step(model, ids, segments, probe)
        gate = model.layers.mlp.gate_proj[...]
        out[name] = {
            "adapters": len(jax.tree.leaves(nnx.state(model, nnx.LoRAParam))),
            "experts": model.layers.mlp.experts,
            "gate_expert_axis": gate.sharding.spec[1],
            "gate_shard": list(gate.addressable_shards[0].data.shape),
            "logits_diff": float(jnp.abs(got - want).max()),
            "logits_scale": float(jnp.abs(want).max()),
            "router_tokens": want_router.tokens.tolist(),
            "router_counts_equal": bool((router.counts == want_router.counts).all()),
            "router_probs_diff": float(jnp.abs(router.probs - want_router.probs).max()),
            "grad_diff": max(
                float(jnp.abs(a - b).max()) for a, b in zip(*map(jax.tree.leaves, (grad, want_grad)))
            ),
        }

    from b2tjax.config import MeshConfig
    from b2tjax.run.mesh import build_mesh

    out["config_mesh"] = dict(build_mesh(MeshConfig(expert=2)).shape)  # fsdp -1: the rest
    out["dense_mesh"] = dict(make_mesh(data=2, fsdp=2, tensor=2).shape)

    six = _config(num_experts=6)
    f32 = jnp.float32
    graph, state = nnx.split(
        nnx.eval_shape(lambda: MoeBlock(six, rngs=nnx.Rngs(0), dtype=f32, param_dtype=f32, experts="dense"))
    )
    with jax.set_mesh(make_mesh(data=2, expert=4)):
        try:
            jax.eval_shape(
                lambda s, x: nnx.merge(graph, s)(x), state, jax.ShapeDtypeStruct((2, 4, 32), jnp.float32)
            )
        except ValueError as err:
            out["indivisible_error"] = str(err)
    return out


slow = pytest.mark.slow  # a fake-device mesh in a subprocess (~20 s on 2 cores); the TPU compile is quick


@pytest.fixture(scope="module")
def result() -> dict:
    from tests.subprocess_env import script_json  # the test runs from the repository root

    return script_json(__file__, devices=8)


@slow
@pytest.mark.parametrize("case", list(CASES))
def test_sharded_experts_equal_the_unsharded_dense_reference(result, case):
    got = result[case]
    assert got["experts"] == CASES[case][1]
    assert got["adapters"] == 6  # A and B of gate, up and down, per expert
    assert got["logits_scale"] > 1.0  # far from 0, so the bounds below are real
    assert got["logits_diff"] <= 1e-5
    assert got["grad_diff"] <= 1e-5 * result["grad_scale"]  # every parameter's, adapters' and routers' too
    # the router's statistics over the whole batch's 18 real tokens (2 layers), as unsharded
    assert got["router_tokens"] == [18.0, 18.0] and got["router_counts_equal"]
    assert got["router_probs_diff"] <= 1e-5


@slow
def test_expert_weights_are_sharded_over_the_expert_axis(result):
    # gate_proj [layers, E, H, I]: experts over expert, the model dim over fsdp, the MLP over tensor
    assert result["expert2_fsdp2_data2"]["gate_expert_axis"] == "expert"
    assert result["expert2_fsdp2_data2"]["gate_shard"] == [2, 4, 16, 16]
    assert result["expert4_tensor2"]["gate_shard"] == [2, 2, 32, 8]


@slow
def test_mesh_expert_adds_the_axis_and_a_size_of_1_leaves_the_mesh_as_it_was(result):
    assert result["config_mesh"] == {"data": 1, "fsdp": 4, "expert": 2, "tensor": 1}
    assert result["dense_mesh"] == {"data": 2, "fsdp": 2, "tensor": 2}


@slow
def test_experts_must_split_over_the_expert_axis(result):
    assert result["indivisible_error"] == "num_experts (6) must be a multiple of mesh.expert (4)"


def test_ragged_all_to_all_compiles_for_a_tpu_slice():
    """One MoE block's forward and backward on a v5p-8 (4 chips: fsdp 2 x expert 2) compiled by
    libtpu: the tokens move by ragged all-to-all, both ways; the experts carry LoRA factors, sharded
    and applied with them."""
    pytest.importorskip("libtpu", reason="libtpu is not installed (pip install -e .[test] brings it)")
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from b2tjax.plan.targets import parse_target, target_mesh
    from models.moe import EXPERT_NAMES, MoeBlock, param_names, resolve_exchange, resolve_experts
    from models.sharding import mesh_platform, state_shardings

    mesh = target_mesh(parse_target("v5p-8"), 1, 2, 1, expert=2)
    platform = mesh_platform(mesh)
    exchange = resolve_exchange(platform)  # what a model built for this mesh chooses

    def adapted_block() -> MoeBlock:
        block = MoeBlock(
            _config(),
            rngs=nnx.Rngs(0),
            dtype=jnp.bfloat16,
            param_dtype=jnp.float32,
            experts=resolve_experts("auto", platform),
            exchange=exchange,
        )
        for name in EXPERT_NAMES:  # rank-4 factors per expert, as models/lora.py sets them in a stack
            e, into, out = getattr(block, name).shape
            for which, shape in (("a", (e, into, 4)), ("b", (e, 4, out))):
                axes = param_names(f"{name}_lora_{which}")
                setattr(
                    block,
                    f"{name}_lora_{which}",
                    nnx.LoRAParam(jnp.zeros(shape), out_sharding=axes, eager_sharding=False),
                )
        block.lora_scale = 2.0
        return block

    graph, state = nnx.split(nnx.eval_shape(adapted_block))
    params = jax.tree.map(
        lambda v, s: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=s),
        nnx.to_pure_dict(state),
        state_shardings(state, mesh),
    )

    def loss(params, x):
        traced = jax.tree.map(lambda v: v, state)
        nnx.replace_by_pure_dict(traced, params)
        return nnx.merge(graph, traced)(x).astype(jnp.float32).sum()

    x = jax.ShapeDtypeStruct((8, 16, 32), jnp.bfloat16, sharding=NamedSharding(mesh, P(("fsdp", "expert"))))
    with jax.set_mesh(mesh):
        text = jax.jit(jax.grad(loss)).lower(params, x).compile().as_text()
    assert exchange == "all_to_all"
    # dispatch and return, and in the backward pass the return's transpose (x takes no gradient)
    assert len(re.findall(r" ragged-all-to-all\(", text)) == 3


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout, not an installed one
    print(json.dumps(_child()))
