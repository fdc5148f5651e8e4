"""Our Qwen3 (fp32) against transformers.Qwen3ForCausalLM with identical random weights."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from models.hf import model_to_state_dict, state_dict_to_model
from models.qwen3 import Qwen3ForCausalLM

SEQ_LEN = 512


def _hf_logits(hf, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return hf(torch.from_numpy(ids).long()).logits.float().numpy()


@pytest.mark.parametrize("name", ["tiny", "tiny-untied"])
def test_logits_match_transformers(model_pair, name):
    cfg, hf, ours = model_pair(name)
    assert cfg.num_attention_heads > cfg.num_key_value_heads and cfg.rope_theta != 1e6
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, SEQ_LEN), dtype=np.int32)
    expected = _hf_logits(hf, ids)
    got = np.asarray(nnx.jit(lambda m, x: m(x))(ours, jnp.asarray(ids)))
    assert got.dtype == np.float32 and got.shape == (2, SEQ_LEN, cfg.vocab_size)
    assert expected.std() > 0.05  # logits are far from constant, so 1e-4 is a real bound
    np.testing.assert_array_less(np.abs(got - expected).max(), 1e-4)


def test_rope_theta_matters(model_pair):
    """A model identical but for rope_theta = 1e6 disagrees with transformers: theta is really used."""
    cfg, hf, ours = model_pair("tiny")
    wrong = Qwen3ForCausalLM(dataclasses.replace(cfg, rope_theta=1e6), rngs=nnx.Rngs(0))
    state_dict_to_model(wrong, hf.state_dict())
    ids = np.random.default_rng(1).integers(0, cfg.vocab_size, (1, 128), dtype=np.int32)
    diff = np.abs(np.asarray(wrong(jnp.asarray(ids))) - _hf_logits(hf, ids)).max()
    assert diff > 1e-2


def test_hidden_states_and_head_compose_to_logits(model_pair):
    cfg, _, ours = model_pair("tiny-untied")
    ids = jnp.asarray(np.random.default_rng(2).integers(0, cfg.vocab_size, (2, 16), dtype=np.int32))
    h = ours.hidden_states(ids)
    assert h.shape == (2, 16, cfg.hidden_size)
    np.testing.assert_allclose(h @ ours.lm_head_weight(), ours(ids), atol=1e-5)
    tied_cfg, _, tied = model_pair("tiny")
    np.testing.assert_array_equal(tied.lm_head_weight(), tied.embed.embedding[...].T)


def test_state_dict_round_trip_is_exact(model_pair):
    _, hf, ours = model_pair("tiny-untied")
    back = model_to_state_dict(ours)
    for name, tensor in hf.state_dict().items():
        np.testing.assert_array_equal(back[name], tensor.numpy(), err_msg=name)
    assert set(back) == set(hf.state_dict())


@pytest.mark.parametrize("remat", ["dots"])
def test_remat_policies_same_loss_and_grads(model_pair, remat):
    cfg, hf, ours = model_pair("tiny")
    other = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), remat=remat)
    nnx.update(other, nnx.state(ours, nnx.Param))
    ids = jnp.asarray(np.random.default_rng(3).integers(0, cfg.vocab_size, (2, 32), dtype=np.int32))

    def loss(model):
        logp = jax.nn.log_softmax(model(ids[:, :-1]))
        return -jnp.take_along_axis(logp, ids[:, 1:, None], -1).mean()

    l0, g0 = nnx.jit(nnx.value_and_grad(loss))(ours)
    l1, g1 = nnx.jit(nnx.value_and_grad(loss))(other)
    np.testing.assert_allclose(l0, l1, rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), g0, g1)


def test_bf16_compute_with_fp32_params_is_close(model_pair):
    cfg, hf, ours = model_pair("tiny")
    bf = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), dtype=jnp.bfloat16, param_dtype=jnp.float32)
    nnx.update(bf, nnx.state(ours, nnx.Param))
    assert bf.embed.embedding[...].dtype == jnp.float32
    ids = jnp.asarray(np.random.default_rng(4).integers(0, cfg.vocab_size, (1, 64), dtype=np.int32))
    forward = nnx.jit(lambda m, x: m(x))
    got, ref = forward(bf, ids), forward(ours, ids)
    assert got.dtype == jnp.float32
    rel = float(jnp.abs(got - ref).max() / jnp.abs(ref).max())
    assert 0 < rel < 0.05  # bf16 really used (not bit-equal) yet close


def test_bad_config_is_rejected():
    from models.config import get_config

    with pytest.raises(ValueError, match="multiple"):
        dataclasses.replace(get_config("tiny"), num_key_value_heads=3)
    with pytest.raises(ValueError, match="remat"):
        Qwen3ForCausalLM(get_config("tiny"), rngs=nnx.Rngs(0), remat="bogus")
