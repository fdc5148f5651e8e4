"""LoRA / QLoRA on the tiny Qwen3: exact identity at B = 0, adapter-only training steps, merging,
int8 base error, and the shardings the mesh rules give adapters."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from b2tjax.step.train_step import BoundModel
from models import lora
from models.config import get_config
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime
from tests.lora_fixtures import lora_sft_step

CFG = get_config("tiny", initializer_range=0.1)
IDS = np.random.default_rng(0).integers(0, CFG.vocab_size, size=(2, 24)).astype(np.int32)


RANK = 8  # one adapter rank for every test: each new rank compiles its own initialisers and forwards


@functools.cache
def _initial(dtype) -> Qwen3ForCausalLM:
    return Qwen3ForCausalLM(CFG, rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=dtype, param_dtype=dtype))


def _base(dtype=jnp.float32) -> Qwen3ForCausalLM:
    """A fresh copy of the base initialised once per dtype."""
    return nnx.clone(_initial(dtype))


def _randomise_b(model: nnx.Module, seed: int = 1) -> None:
    """Non-zero B matrices (a trained adapter), so the adapters change the output."""
    state = nnx.state(model, nnx.LoRAParam)
    leaves, tree = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    leaves = [x + 0.05 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)]
    nnx.update(model, jax.tree.unflatten(tree, leaves))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_zero_b_adapters_leave_the_logits_exactly_unchanged(dtype):
    base = _base(dtype)
    want = np.asarray(base(IDS))
    adapted = lora.add_lora(_base(dtype), lora.LoraConfig(rank=RANK), seed=3)
    got = np.asarray(adapted(IDS))
    np.testing.assert_array_equal(got, want)
    a = np.asarray(adapted.layers.attn.q_proj_lora_a[...])
    assert a.dtype == np.float32 and np.abs(a).max() > 0  # A is random (fp32), only B is zero
    _randomise_b(adapted)
    assert np.abs(np.asarray(adapted(IDS)) - want).max() > 1e-2  # the adapters are live


@pytest.mark.slow
def test_merged_forward_equals_the_adapter_forward():
    model = lora.add_lora(_base(), lora.LoraConfig(rank=RANK, alpha=2.0 * RANK), seed=3)
    _randomise_b(model)
    unmerged = np.asarray(model(IDS))
    merged_model = lora.merge_lora(nnx.clone(model))
    assert not lora.has_lora(merged_model)
    merged = np.asarray(merged_model(IDS))
    np.testing.assert_allclose(merged, unmerged, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_one_step_trains_the_adapters_only():
    model = lora.add_lora(_base(jnp.bfloat16), lora.LoraConfig(rank=RANK, targets=["q_proj", "down_proj"]))
    frozen_before = jax.tree.map(np.asarray, BoundModel.frozen_of(model))
    adapters_before = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.LoRAParam)))
    _, params, frozen, _, (new_state, metrics) = lora_sft_step(model, IDS)
    assert metrics["applied"] == 1.0
    # the trained tree is the adapters, nothing else; the base is bf16 and bit-identical after the step
    assert jax.tree.structure(new_state.params) == jax.tree.structure(adapters_before)
    assert {x.dtype for x in jax.tree.leaves(frozen)} == {jnp.dtype(jnp.bfloat16)}
    jax.tree.map(np.testing.assert_array_equal, jax.tree.map(np.asarray, frozen), frozen_before)
    changed = [
        not np.array_equal(new, old)
        for new, old in zip(jax.tree.leaves(new_state.params), jax.tree.leaves(adapters_before))
    ]
    assert all(changed), changed  # both A and B of both targets moved (B from zero)
    # the optimizer state holds moments of the adapter leaves only (plus scalar counters)
    adapter_sizes = sorted(x.size for x in jax.tree.leaves(adapters_before))
    moments = sorted(x.size for x in jax.tree.leaves(new_state.opt_state) if x.ndim > 0)
    assert moments == sorted(adapter_sizes * 2)
    n_adapter = sum(adapter_sizes)
    n_base = sum(x.size for x in jax.tree.leaves(frozen_before))
    assert n_adapter < n_base / 10


@pytest.mark.slow
def test_qlora_int8_logits_stay_close_to_bf16():
    """int8 per-channel base vs the bf16 base it was quantized from, same zero-B adapters: the logits
    differ by quantization noise only. Stated tolerance, relative to the logits' spread (std): mean
    |diff| <= 3%, max |diff| <= 25%, and the top-1 token agrees on >= 95% of positions (measured:
    1.9%, 16%, 100%)."""
    bf16 = lora.add_lora(_base(jnp.bfloat16), lora.LoraConfig(rank=RANK))
    int8 = lora.add_lora(lora.quantize_base(_base(jnp.bfloat16)), lora.LoraConfig(rank=RANK))
    assert int8.layers.attn.q_proj[...].dtype == jnp.int8
    assert int8.layers.attn.q_proj_scale[...].shape == (CFG.num_hidden_layers, 1, 4, 16)
    want = np.asarray(bf16(IDS), np.float32)
    got = np.asarray(int8(IDS), np.float32)
    mean_err, max_err = (f(np.abs(got - want)) / want.std() for f in (np.mean, np.max))
    agree = np.mean(got.argmax(-1) == want.argmax(-1))
    assert mean_err <= 0.03 and max_err <= 0.25 and agree >= 0.95, (mean_err, max_err, agree)
    # the adapters train on top of the int8 base the same way
    _, _, frozen, _, (state, metrics) = lora_sft_step(int8, IDS)
    assert metrics["applied"] == 1.0
    assert np.asarray(frozen["layers"]["mlp"]["up_proj"]).dtype == np.int8


def test_adapters_shard_like_their_base_weights():
    """On an fsdp 2 x tensor 2 mesh: A splits the base weight's input axis as the base does, B its
    output axes; the rank axis is never split."""
    from jax.sharding import PartitionSpec as P

    from models.sharding import logical_to_spec

    model = lora.add_lora(_base(), lora.LoraConfig(rank=RANK))
    mesh = {"data": 1, "fsdp": 2, "tensor": 2}

    def spec(var: nnx.Variable) -> P:
        return logical_to_spec(var.get_metadata()["out_sharding"], var.shape, mesh)

    attn, mlp = model.layers.attn, model.layers.mlp
    assert spec(attn.q_proj) == P(None, "fsdp", "tensor", None)
    assert spec(attn.q_proj_lora_a) == P(None, "fsdp", None)
    assert spec(attn.q_proj_lora_b) == P(None, None, "tensor", None)
    assert spec(attn.o_proj_lora_a) == P(None, "tensor", None, None)
    assert spec(attn.o_proj_lora_b) == P(None, None, "fsdp")
    assert spec(mlp.down_proj_lora_a) == P(None, "tensor", None)
    assert spec(mlp.gate_proj_lora_b) == P(None, None, "tensor")


def test_bad_lora_settings_are_one_line_errors():
    assert lora.LoraConfig(rank=-1).errors() == ["model.lora.rank must be >= 0 (0 = off), got -1"]
    assert "targets" in lora.LoraConfig(rank=4, targets=["qkv"]).errors()[0]
    assert "dropout" in lora.LoraConfig(rank=4, dropout=0.1).errors()[0]
    assert "needs adapters" in lora.LoraConfig(quant="int8").errors()[0]


def test_sampler_uses_the_frozen_base_in_place_on_a_one_device_mesh():
    """fsdp 1 splits nothing, so the trainer's P("fsdp", ...) base has the sampler's layout: the
    sampler holds its own copy of the adapters only. (It compared the specs' names, so a LoRA run
    compiled for one GPU planned a second 8.8 GiB copy of the QLoRA base.)"""
    from models.sharding import make_mesh
    from rollout.placement import SamplerWeights

    model = lora.add_lora(_base(jnp.bfloat16), lora.LoraConfig(rank=RANK))
    state = nnx.state(model)
    weights = SamplerWeights(state, jnp.bfloat16, make_mesh(1, 1, 1, devices=jax.devices()[:1]))
    kept, own = weights.split(state)
    adapters = jax.tree.leaves(nnx.state(model, nnx.LoRAParam))
    assert sorted(x.shape for x in jax.tree.leaves(own)) == sorted(x.shape for x in adapters)
    assert len(jax.tree.leaves(kept)) == len(jax.tree.leaves(nnx.state(model, nnx.Param))) - len(adapters)
