"""LoRA on a tiny Qwen3-MoE (8 experts, top-2, hidden 64; layer 0 routed, layer 1 a dense MLP): per-
expert adapters inside the grouped (ragged) and dense expert computations equal the merged weights,
a training step moves the adapters only, and the PEFT export loads onto transformers'
Qwen3MoeForCausalLM (+ peft) with our logits."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from b2tjax.step.train_step import BoundModel
from models import lora, peft
from models.hf import load_pretrained
from models.qwen3 import Qwen3ForCausalLM
from models.settings import LoraConfig, ModelRuntime
from tests.lora_fixtures import lora_sft_step

HF_CONFIG = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=96,
    moe_intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_experts=8,
    num_experts_per_tok=2,
    mlp_only_layers=[1],
    norm_topk_prob=True,
    rope_theta=10_000.0,
    tie_word_embeddings=False,
)
IDS = np.random.default_rng(0).integers(0, HF_CONFIG["vocab_size"], (2, 16), dtype=np.int32)
LORA = LoraConfig(rank=4, alpha=8.0)  # every target: attention, experts and the dense layer's MLP

forward = nnx.jit(lambda m, x: m(x))


def _assert_close(got: np.ndarray, want: np.ndarray) -> None:
    """fp32 logits that differ only by the order of their sums: within 1e-5 of the largest (~5)."""
    scale = np.abs(want).max()
    assert scale > 1.0  # far from 0, so the bound is a real one
    assert np.abs(got - want).max() <= 1e-5 * scale, np.abs(got - want).max()


@pytest.fixture(scope="module")
def base():
    """(a transformers Qwen3-MoE with random weights, the directory it saved)."""
    import transformers

    torch.manual_seed(0)
    hf = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(**HF_CONFIG))
    with torch.no_grad():  # a larger spread than the init's, so routing and logits vary
        for p in hf.parameters():
            p.normal_(0.0, 0.15 if p.ndim > 1 else 1.0).add_(1.0 if p.ndim == 1 else 0.0)
    return hf.eval()


@pytest.fixture(scope="module")
def base_dir(base, tmp_path_factory):
    path = tmp_path_factory.mktemp("hf_moe")
    base.save_pretrained(path)
    return path


def _adapted(path, experts: str = "ragged") -> Qwen3ForCausalLM:
    """The base with LORA's adapters, B nonzero (a trained adapter: the output changes)."""
    model = lora.add_lora(load_pretrained(path, runtime=ModelRuntime(moe_experts=experts)), LORA, seed=3)
    state = nnx.state(model, nnx.LoRAParam)
    leaves, tree = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    nnx.update(
        model,
        jax.tree.unflatten(tree, [x + 0.1 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)]),
    )
    return model


def _hf_logits(model) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(IDS).long()).logits.float().numpy()


@pytest.mark.slow
def test_adapters_ride_the_experts_and_both_expert_paths_equal_the_merged_weights(base, base_dir):
    adapted = {impl: _adapted(base_dir, impl) for impl in ("ragged", "dense")}
    mlp = adapted["ragged"].layers.mlp  # [L, E, in, r] and [L, E, r, out]: one adapter per expert
    assert mlp.gate_proj_lora_a.shape == (1, 8, 64, 4) and mlp.down_proj_lora_b.shape == (1, 8, 4, 64)
    assert not any(
        "router" in jax.tree_util.keystr(k) for k, _ in nnx.to_flat_state(nnx.state(mlp, nnx.LoRAParam))
    )
    assert adapted["ragged"].dense_layers.mlp.up_proj_lora_a.shape == (1, 64, 4)  # the dense layer's MLP
    merged_model = lora.merge_lora(nnx.clone(adapted["ragged"]))
    assert not lora.has_lora(merged_model)
    # the experts' weights took their own updates: the merge is W_e + (alpha / r) A_e B_e per expert
    a, b = (np.asarray(getattr(mlp, f"down_proj_lora_{w}")[...]) for w in "ab")
    base_down = np.asarray(load_pretrained(base_dir).layers.mlp.down_proj[...])
    update = np.asarray(merged_model.layers.mlp.down_proj[...]) - base_down
    np.testing.assert_allclose(update[0, 3], 2.0 * a[0, 3] @ b[0, 3], atol=1e-6, rtol=0)  # expert 3's
    merged = np.asarray(forward(merged_model, IDS))
    assert np.abs(merged - _hf_logits(base)).max() > 0.1  # the adapters change the model
    for model in adapted.values():
        _assert_close(np.asarray(forward(model, IDS)), merged)


@pytest.mark.slow
def test_a_training_step_moves_every_adapter_and_nothing_else(base_dir):
    model = lora.add_lora(load_pretrained(base_dir), LORA, seed=3)
    before = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.LoRAParam)))
    frozen_before = jax.tree.map(np.asarray, BoundModel.frozen_of(model))
    _, _, frozen, _, (state, metrics) = lora_sft_step(model, IDS)
    assert metrics["applied"] == 1.0 and np.isfinite(metrics["loss"])
    # the trained tree is the adapters (experts' and router-free); the base, routers included, is unchanged
    assert jax.tree.structure(state.params) == jax.tree.structure(before)
    jax.tree.map(np.testing.assert_array_equal, jax.tree.map(np.asarray, frozen), frozen_before)
    assert "router" in frozen["layers"]["mlp"]
    moved = {
        jax.tree_util.keystr(k): not np.array_equal(new, old)
        for (k, new), old in zip(
            jax.tree_util.tree_flatten_with_path(state.params)[0], jax.tree.leaves(before)
        )
    }
    assert all(moved.values()), moved  # every A and B, B from zero: gradients reached each of them
    # each expert's adapter moved: a routed expert from its tokens (16 x 2 top-2 slots over 8 experts)
    b = np.asarray(state.params["layers"]["mlp"]["gate_proj_lora_b"])[0]
    assert all(np.abs(b[e]).max() > 0 for e in range(8))


@pytest.mark.slow
def test_peft_export_loads_onto_transformers_with_our_logits(base, base_dir, tmp_path):
    import peft as hf_peft
    import transformers

    model = _adapted(base_dir)
    ours = np.asarray(forward(model, IDS))
    saved = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.LoRAParam)))
    peft.save_adapter(model, tmp_path, base_path=str(base_dir))
    config = json.loads((tmp_path / peft.CONFIG_FILE).read_text())
    assert config["target_modules"] == list(lora.TARGETS) and config["r"] == 4
    hf_model = transformers.Qwen3MoeForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    hf_lora = hf_peft.PeftModel.from_pretrained(hf_model, tmp_path).eval()
    theirs = _hf_logits(hf_lora)
    _assert_close(theirs, ours)
    # peft applied the experts' adapters too: without them our logits are far from its
    mlp = model.layers.mlp
    for name in ("gate_proj", "up_proj", "down_proj"):
        setattr(mlp, f"{name}_lora_b", nnx.LoRAParam(jnp.zeros_like(getattr(mlp, f"{name}_lora_b")[...])))
    assert np.abs(np.asarray(forward(model, IDS)) - theirs).max() > 0.1
    assert np.abs(theirs - _hf_logits(base)).max() > 0.1
    # and back: our loader reads the same directory onto fresh adapters, bit for bit
    fresh = lora.add_lora(load_pretrained(base_dir), peft.check_adapter(tmp_path, model.config), seed=9)
    peft.load_adapter(fresh, tmp_path)
    jax.tree.map(np.testing.assert_array_equal, nnx.to_pure_dict(nnx.state(fresh, nnx.LoRAParam)), saved)


def test_moe_lora_settings_transformers_cannot_carry_are_one_line_errors():
    from models.config import Qwen3Config

    cfg = Qwen3Config.from_hf({**HF_CONFIG, "model_type": "qwen3_moe"})
    build = lambda: Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))  # noqa: E731
    with pytest.raises(ValueError, match=r"gate_proj and up_proj are adapted together or not at all"):
        nnx.eval_shape(lambda: lora.add_lora(build(), LoraConfig(rank=4, targets=["q_proj", "gate_proj"])))
    with pytest.raises(ValueError, match=r"^QLoRA \(model.lora.quant: int8\) on a Qwen3-MoE model"):
        nnx.eval_shape(lambda: lora.quantize_base(build()))
    attention_only = nnx.eval_shape(
        lambda: lora.add_lora(build(), LoraConfig(rank=4, targets=["q_proj", "o_proj"]))
    )
    assert lora.adapter_config(attention_only)["targets"] == ["q_proj", "o_proj"]
