"""RoPE scaling (linear, YaRN) against transformers: the frequencies, the logits far beyond the
original window, cached greedy decoding, and config.json import / export."""

from __future__ import annotations

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from models import rope
from models.config import Qwen3Config, get_config, with_rope_scaling
from models.greedy import greedy_generate
from models.hf import load_pretrained, save_pretrained
from models.kv_cache import init_cache
from models.qwen3 import Qwen3ForCausalLM
from models.rope import RopeScaling

WINDOW = 64  # the tiny models' "pretrained" window: the tests run 4-8x past it
YARN = RopeScaling("yarn", 4.0, WINDOW)
LINEAR = RopeScaling("linear", 4.0)
forward = nnx.jit(lambda m, x: m(x))


def _pair(model_pair, name: str, scaling: RopeScaling, positions: int = 4 * WINDOW):
    return model_pair(name, rope_scaling=scaling, max_position_embeddings=positions)


def _hf_logits(hf, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return hf(torch.from_numpy(ids).long()).logits.numpy()


@pytest.mark.parametrize(
    "scaling",
    [
        YARN,
        LINEAR,
        RopeScaling("yarn", 8.0, WINDOW, beta_fast=16, beta_slow=2, truncate=False),
        RopeScaling("yarn", 4.0, WINDOW, mscale=1.0, mscale_all_dim=0.5),
        RopeScaling("yarn", 2.0, 32768, attention_factor=1.5),
    ],
)
@pytest.mark.parametrize("head_dim, theta", [(16, 10_000.0), (128, 1_000_000.0)])
def test_frequencies_and_attention_scale_equal_transformers(scaling, head_dim, theta):
    """transformers' own init function on the config we export, to the last bits: torch's and XLA's
    fp32 pow differ by an ulp now and then (plain RoPE too), nothing more."""
    cfg = dataclasses.replace(get_config("tiny"), head_dim=head_dim, rope_theta=theta, rope_scaling=scaling)
    hf_cfg = transformers.Qwen3Config(**cfg.to_hf())
    inv_freq, attention_scale = ROPE_INIT_FUNCTIONS[scaling.kind](hf_cfg, "cpu")
    np.testing.assert_allclose(
        np.asarray(rope.inv_freq(scaling, head_dim, theta)), inv_freq.numpy(), rtol=5e-7
    )
    assert scaling.attention_scale == attention_scale
    plain = rope.inv_freq(RopeScaling(), head_dim, theta)
    assert not np.array_equal(np.asarray(plain), inv_freq.numpy())  # the scaling changes something


@pytest.mark.slow
@pytest.mark.parametrize("scaling", [YARN, LINEAR], ids=["yarn", "linear"])
def test_logits_equal_transformers_far_beyond_the_window(model_pair, scaling):
    cfg, hf, ours = _pair(model_pair, "tiny", scaling)
    assert hf.model.rotary_emb.rope_type == scaling.kind
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 8 * WINDOW), dtype=np.int32)
    expected = _hf_logits(hf, ids)
    got = np.asarray(forward(ours, jnp.asarray(ids)))
    assert expected.std() > 0.5
    assert np.abs(got - expected).max() < 1e-5
    # Plain RoPE on the same weights is far off: the scaling is really applied.
    plain = Qwen3ForCausalLM(dataclasses.replace(cfg, rope_scaling=RopeScaling()), rngs=nnx.Rngs(0))
    nnx.update(plain, nnx.state(ours, nnx.Param))
    assert np.abs(np.asarray(forward(plain, jnp.asarray(ids))) - expected).max() > 1e-2


@pytest.mark.slow
def test_yarn_logits_equal_transformers_untied_and_custom_ramp(model_pair):
    scaling = RopeScaling("yarn", 8.0, WINDOW, beta_fast=16, beta_slow=2, truncate=False)
    cfg, hf, ours = _pair(model_pair, "tiny-untied", scaling, positions=8 * WINDOW)
    ids = np.random.default_rng(1).integers(0, cfg.vocab_size, (2, 8 * WINDOW), dtype=np.int32)
    assert np.abs(np.asarray(forward(ours, jnp.asarray(ids))) - _hf_logits(hf, ids)).max() < 1e-5


@pytest.mark.slow
def test_cached_greedy_decoding_equals_transformers_argmax_with_yarn(model_pair):
    """Prefill in two chunks, then one-token decodes to 5x the window: every token our KV-cache
    path picks is transformers' argmax over the whole sequence at that position."""
    cfg, hf, ours = _pair(model_pair, "tiny", YARN)
    prompt_lens = [40, 96]  # one prompt inside the window, one beyond it
    prompts = np.random.default_rng(2).integers(0, cfg.vocab_size, (2, 96), dtype=np.int32)
    new = 5 * WINDOW - 96
    tokens = np.asarray(greedy_generate(ours, jnp.asarray(prompts), jnp.asarray(prompt_lens), new))
    assert len(set(tokens[1].tolist())) > 3  # not a degenerate constant continuation
    for b, n in enumerate(prompt_lens):
        seq = np.concatenate([prompts[b, :n], tokens[b]])[None]
        argmax = _hf_logits(hf, seq)[0, n - 1 : -1].argmax(-1)
        np.testing.assert_array_equal(tokens[b], argmax, err_msg=f"row {b}")
    # A prefix-reuse style append: a cached prompt, then a chunk past the window, equal to HF logits.
    step = nnx.jit(lambda m, t, k, c: m.forward_cached(t, k, c))
    seq = np.concatenate([prompts[1], tokens[1]])[None, :256]
    _, cache = step(ours, jnp.asarray(seq[:, :96]), jnp.asarray([96], jnp.int32), init_cache(cfg, 1, 256))
    logits, _ = step(ours, jnp.asarray(seq[:, 96:]), jnp.asarray([160], jnp.int32), cache)
    assert np.abs(np.asarray(logits)[0] - _hf_logits(hf, seq)[0, 96:]).max() < 1e-5


V4_YARN = {"type": "yarn", "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def test_hf_config_forms_of_transformers_4_and_5_import():
    base = {k: v for k, v in get_config("qwen3-8b").to_hf().items() if not k.startswith("rope")}
    v4 = Qwen3Config.from_hf({**base, "rope_theta": 1e6, "rope_scaling": V4_YARN})
    assert v4.rope_scaling == RopeScaling("yarn", 4.0, 32768) and v4.rope_theta == 1e6
    linear = Qwen3Config.from_hf({**base, "rope_theta": 1e6, "rope_scaling": {"type": "linear", "factor": 2}})
    assert linear.rope_scaling == RopeScaling("linear", 2.0)
    params = {"rope_type": "yarn", "rope_theta": 5e5, "factor": 2.0, "original_max_position_embeddings": 64}
    v5 = Qwen3Config.from_hf({**base, "rope_parameters": {**params, "beta_fast": 8, "truncate": False}})
    assert v5.rope_theta == 5e5
    assert v5.rope_scaling == RopeScaling("yarn", 2.0, 64, beta_fast=8.0, truncate=False)
    for cfg in (v4, linear, v5):  # ours -> transformers 5 -> its to_dict -> ours
        assert Qwen3Config.from_hf(cfg.to_hf()) == cfg
        assert Qwen3Config.from_hf(transformers.Qwen3Config(**cfg.to_hf()).to_dict()) == cfg


@pytest.mark.parametrize(
    "rope, match",
    [
        ({"rope_type": "yarn", "factor": 0.5, "original_max_position_embeddings": 64}, "factor must be >= 1"),
        ({"rope_type": "yarn", "factor": 4.0}, "original_max_position_embeddings"),
        ({"rope_type": "longrope", "factor": 4.0}, "'longrope' is not supported"),
        ({"rope_type": "dynamic", "factor": 4.0}, "KV cache"),
        ({"rope_type": "linear"}, "needs a factor"),
        ({"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64, "beta_fast": 0.5}, "beta"),
    ],
)
def test_bad_rope_scaling_is_one_line_value_error(rope, match):
    hf = {**get_config("tiny").to_hf(), "rope_scaling": rope}
    with pytest.raises(ValueError, match=match) as err:
        Qwen3Config.from_hf(hf)
    assert "\n" not in str(err.value)


def test_recipe_scaling_sets_the_window_and_refuses_a_conflict():
    qwen = with_rope_scaling(get_config("qwen3-4b"), "yarn", 2.0)
    assert qwen.rope_scaling == RopeScaling("yarn", 2.0, 32768) and qwen.max_position_embeddings == 65536
    assert with_rope_scaling(qwen, "yarn", 2.0) == qwen  # a checkpoint that already has it
    assert with_rope_scaling(qwen, "none", 1.0) == qwen
    tiny = with_rope_scaling(get_config("tiny"), "linear", 2.0, original=512)
    assert tiny.rope_scaling == RopeScaling("linear", 2.0) and tiny.max_position_embeddings == 1024
    with pytest.raises(ValueError, match="conflicts with the model's own yarn x2 over 32768"):
        with_rope_scaling(qwen, "yarn", 4.0)


@pytest.mark.slow
def test_hf_directory_import_and_export_keep_yarn(model_pair, tmp_path):
    """transformers' save_pretrained (its 5.x config.json) -> ours -> save_pretrained -> transformers:
    the rope settings intact, the logits the source model's (ours within 1e-5 on the way)."""
    cfg, hf, _ = _pair(model_pair, "tiny", YARN)
    hf.save_pretrained(tmp_path / "hf")
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["rope_parameters"]["rope_type"] == "yarn" and "rope_scaling" not in written
    model = load_pretrained(tmp_path / "hf")
    assert model.config.rope_scaling == YARN
    ids = np.random.default_rng(3).integers(0, cfg.vocab_size, (1, 6 * WINDOW), dtype=np.int32)
    expected = _hf_logits(hf, ids)
    assert np.abs(np.asarray(forward(model, jnp.asarray(ids))) - expected).max() < 1e-5
    save_pretrained(model, tmp_path / "export")
    exported = json.loads((tmp_path / "export" / "config.json").read_text())
    v4_form = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": WINDOW}
    assert exported["rope_scaling"] == v4_form and exported["max_position_embeddings"] == 4 * WINDOW
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "export", dtype=torch.float32).eval()
    assert back.config.rope_parameters == {**hf.config.rope_parameters}
    assert back.model.rotary_emb.attention_scaling == YARN.attention_scale
    np.testing.assert_array_equal(_hf_logits(back, ids), expected)
