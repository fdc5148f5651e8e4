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
from models.qwen3 import Qwen3ForCausalLM, init_cache
from models.settings import ModelRuntime

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


@pytest.mark.slow
def test_remat_and_query_blocks_keep_loss_and_grads(model_pair):
    """remat='dots' + attention in query blocks of 8 == the plain model (value and gradient)."""
    cfg, hf, ours = model_pair("tiny")
    other = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(remat="dots", attention_block=8))
    nnx.update(other, nnx.state(ours, nnx.Param))
    ids = jnp.asarray(np.random.default_rng(3).integers(0, cfg.vocab_size, (2, 33), dtype=np.int32))

    def loss(model):
        logp = jax.nn.log_softmax(model(ids[:, :-1]))  # T = 32: four query blocks
        return -jnp.take_along_axis(logp, ids[:, 1:, None], -1).mean()

    l0, g0 = nnx.jit(nnx.value_and_grad(loss))(ours)
    l1, g1 = nnx.jit(nnx.value_and_grad(loss))(other)
    np.testing.assert_allclose(l0, l1, rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), g0, g1)
    # Blocked attention over a per-row cache mask, too.
    step = nnx.jit(lambda m, t, n, c: m.forward_cached(t, n, c))
    num_new = jnp.asarray([32, 20], jnp.int32)
    blocked, _ = step(other, ids[:, :32], num_new, init_cache(cfg, 2, 40))
    reference = nnx.jit(lambda m, x: m(x))(ours, ids[:, :20])
    np.testing.assert_allclose(blocked[1, :20], reference[1], atol=1e-5)


def test_bf16_compute_with_fp32_params_is_close(model_pair):
    cfg, hf, ours = model_pair("tiny")
    bf = Qwen3ForCausalLM(
        cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=jnp.bfloat16, param_dtype=jnp.float32)
    )
    nnx.update(bf, nnx.state(ours, nnx.Param))
    assert bf.embed.embedding[...].dtype == jnp.float32
    ids = jnp.asarray(np.random.default_rng(4).integers(0, cfg.vocab_size, (1, 64), dtype=np.int32))
    forward = nnx.jit(lambda m, x: m(x))
    got, ref = forward(bf, ids), forward(ours, ids)
    assert got.dtype == jnp.float32
    rel = float(jnp.abs(got - ref).max() / jnp.abs(ref).max())
    assert 0 < rel < 0.05  # bf16 really used (not bit-equal) yet close


def test_config_round_trips_and_counts_params(model_pair):
    import transformers

    from models.config import PRESETS, Qwen3Config

    for cfg in PRESETS.values():
        assert Qwen3Config.from_hf(cfg.to_hf()) == cfg
        # transformers 5 moves rope_theta into rope_parameters; both forms must read back.
        hf_config = transformers.Qwen3MoeConfig if cfg.moe else transformers.Qwen3Config
        assert Qwen3Config.from_hf(hf_config(**cfg.to_hf()).to_dict()) == cfg
    old_style = {k: v for k, v in PRESETS["qwen3-8b"].to_hf().items() if k != "rope_parameters"}
    assert Qwen3Config.from_hf({**old_style, "rope_theta": 5e5}).rope_theta == 5e5
    # Model-card numbers: Qwen3-0.6B has 0.44B, Qwen3-8B 6.95B, Qwen3-30B-A3B 29.9B and
    # Qwen3-235B-A22B 234B non-embedding parameters.
    cards = {"qwen3-0.6b": 0.44e9, "qwen3-8b": 6.95e9, "qwen3-30b-a3b": 29.9e9, "qwen3-235b-a22b": 234e9}
    for name, non_embedding in cards.items():
        cfg = PRESETS[name]
        embeddings = cfg.vocab_size * cfg.hidden_size * (1 if cfg.tie_word_embeddings else 2)
        assert abs(cfg.num_params() - embeddings - non_embedding) / non_embedding < 0.01
    for name in ("tiny", "tiny-untied"):
        cfg, hf, ours = model_pair(name)
        assert cfg.num_params() == sum(p.numel() for p in hf.parameters())
        assert cfg.num_params() == sum(x.size for x in jax.tree.leaves(nnx.state(ours, nnx.Param)))


def test_bad_config_is_rejected():
    from models.config import get_config

    with pytest.raises(ValueError, match="multiple"):
        dataclasses.replace(get_config("tiny"), num_key_value_heads=3)
    with pytest.raises(ValueError, match="remat"):
        Qwen3ForCausalLM(get_config("tiny"), rngs=nnx.Rngs(0), runtime=ModelRuntime(remat="bogus"))


def test_sliding_window_config_reads_like_transformers():
    """HF slides layer i iff use_sliding_window and i >= max_window_layers: all layers give our
    window, none gives full attention, a mix is refused in one line; ours round-trips."""
    import transformers

    from models.config import Qwen3Config, get_config

    base = {**get_config("tiny").to_hf(), "use_sliding_window": True, "sliding_window": 16}
    assert Qwen3Config.from_hf({**base, "max_window_layers": 0}).sliding_window == 16
    assert Qwen3Config.from_hf({**base, "max_window_layers": 2}).sliding_window is None
    assert Qwen3Config.from_hf({**base, "use_sliding_window": False}).sliding_window is None
    with pytest.raises(ValueError, match="1 of 2 layers"):
        Qwen3Config.from_hf({**base, "max_window_layers": 1})
    windowed = dataclasses.replace(get_config("tiny"), sliding_window=16)
    assert Qwen3Config.from_hf(windowed.to_hf()) == windowed
    assert Qwen3Config.from_hf(transformers.Qwen3Config(**windowed.to_hf()).to_dict()) == windowed
    with pytest.raises(ValueError, match="sliding_window"):
        dataclasses.replace(get_config("tiny"), sliding_window=0)
