"""Our Qwen3-MoE (fp32) against transformers.Qwen3MoeForCausalLM with identical random weights, read
from the directory transformers saves (one tensor per expert), and written back for it."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from models.config import Qwen3Config
from models.hf import load_pretrained, save_pretrained
from models.kv_cache import init_cache
from models.moe import MoeBlock
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime

F32 = jnp.float32

# 8 experts, top-2, 3 layers of which layer 1 keeps a dense MLP: the model holds two stacks and
# runs three scans (sparse, dense, sparse).
HF_CONFIG = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=96,
    moe_intermediate_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_experts=8,
    num_experts_per_tok=2,
    decoder_sparse_step=1,
    mlp_only_layers=[1],
    rope_theta=10_000.0,
    tie_word_embeddings=False,
)


def _hf_logits(hf, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return hf(torch.from_numpy(ids).long()).logits.float().numpy()


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    """norm_topk_prob -> (a transformers model with random weights, the directory it saved)."""
    import transformers

    out = {}
    for norm in (True, False):
        torch.manual_seed(0)
        hf = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(**HF_CONFIG, norm_topk_prob=norm))
        with torch.no_grad():  # a larger spread than the init's, so routing and logits vary
            for p in hf.parameters():
                p.normal_(0.0, 0.15 if p.ndim > 1 else 1.0).add_(1.0 if p.ndim == 1 else 0.0)
        path = tmp_path_factory.mktemp(f"hf_moe_norm{norm}")
        hf.eval().save_pretrained(path)
        out[norm] = (hf, path)
    return out


@pytest.mark.parametrize("norm", [True, False])
def test_logits_match_transformers(hf_dirs, norm):
    """Grouped matmuls with renormalised gates, the dense path (auto on a CPU) without."""
    hf, path = hf_dirs[norm]
    experts = "ragged" if norm else "auto"  # auto: dense on a CPU
    ours = load_pretrained(path, runtime=ModelRuntime(moe_experts=experts))
    assert isinstance(ours, Qwen3ForCausalLM) and ours.config.moe.norm_topk_prob is norm
    assert ours.layers.mlp.experts == ("ragged" if norm else "dense")
    assert ours.config.num_params() == sum(p.numel() for p in hf.parameters())
    ids = np.random.default_rng(0).integers(0, HF_CONFIG["vocab_size"], (2, 24), dtype=np.int32)
    expected = _hf_logits(hf, ids)
    got = np.asarray(nnx.jit(lambda m, x: m(x))(ours, jnp.asarray(ids)))
    assert expected.std() > 0.05  # far from constant, so 1e-4 is a real bound
    np.testing.assert_array_less(np.abs(got - expected).max(), 1e-4)
    other = _hf_logits(hf_dirs[not norm][0], ids)
    assert np.abs(other - expected).max() > 1e-2  # the renormalisation really changes the logits


def test_ragged_equals_dense_and_padding_is_not_routed(hf_dirs):
    ours = load_pretrained(hf_dirs[True][1])

    def block(experts: str) -> MoeBlock:  # layer 0's expert block, computed by `experts`
        make = lambda: MoeBlock(ours.config, rngs=nnx.Rngs(0), dtype=F32, param_dtype=F32, experts=experts)
        layer0 = jax.tree.map(lambda a: a[0], nnx.state(ours.layers.mlp, nnx.Param))
        return nnx.merge(nnx.split(nnx.eval_shape(make))[0], layer0)

    ragged, dense = block("ragged"), block("dense")
    x = np.random.default_rng(2).normal(size=(10, 64)).astype(np.float32)
    valid = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1, 0], bool)
    run = nnx.jit(lambda r, d, x, v: (r.route(x, v), r(x[None], v[None])[0], d(x[None], v[None])[0]))
    routing, out, reference = run(ragged, dense, jnp.asarray(x), jnp.asarray(valid))
    np.testing.assert_allclose(out, reference, atol=1e-5)
    # The routing against top-2 of the router's logits computed here in numpy.
    top2 = np.argsort(-(x @ np.asarray(ragged.router[...])), axis=-1)[:, :2]
    np.testing.assert_array_equal(routing.counts, np.bincount(top2[valid].reshape(-1), minlength=8))
    np.testing.assert_array_equal(np.sort(routing.experts[valid], -1), np.sort(top2[valid], -1))
    assert (np.asarray(routing.experts)[~valid] == 8).all() and (
        np.asarray(routing.weights)[~valid] == 0
    ).all()
    np.testing.assert_allclose(np.asarray(routing.weights)[valid].sum(-1), 1.0, rtol=1e-6)  # renormalised
    assert (np.asarray(out)[~valid] == 0).all() and (np.abs(np.asarray(out)[valid]).sum(-1) > 0).all()
    # The gradients too (router included: the gate weights are differentiable through top-k).
    probe = jnp.asarray(np.random.default_rng(5).normal(size=out.shape), F32)
    grad = nnx.jit(nnx.grad(lambda b, x, v: jnp.sum(b(x[None], v[None])[0] * probe)))
    got, want = (grad(b, jnp.asarray(x), jnp.asarray(valid)) for b in (ragged, dense))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), got, want)
    assert float(jnp.abs(got["router"][...]).max()) > 1e-4


def test_export_loads_back_in_transformers(hf_dirs, tmp_path):
    import transformers
    from safetensors import safe_open

    hf, path = hf_dirs[True]
    ours = load_pretrained(path)
    save_pretrained(ours, tmp_path, max_shard_size="200KB")
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1  # experts split across shards

    def shapes(folder) -> dict[str, tuple[int, ...]]:
        out = {}
        for f in folder.glob("*.safetensors"):
            with safe_open(str(f), "np") as h:
                out |= {k: tuple(h.get_slice(k).get_shape()) for k in h.keys()}
        return out

    assert shapes(tmp_path) == shapes(path)
    hf_config = json.loads((tmp_path / "config.json").read_text())
    assert Qwen3Config.from_hf(hf_config) == Qwen3Config.from_hf(path)
    back = transformers.Qwen3MoeForCausalLM.from_pretrained(tmp_path).eval()
    ids = np.random.default_rng(3).integers(0, 256, (1, 12), dtype=np.int32)
    np.testing.assert_array_equal(_hf_logits(back, ids), _hf_logits(hf, ids))


@pytest.mark.slow
def test_cached_decode_equals_full_forward(hf_dirs):
    """Prefill with the layers unrolled per layer (`layer_weights`: sparse and dense layers' own
    graphs), then decode with them scanned in runs, against transformers' full forward of each row;
    row 1's prompt is 3 tokens shorter: its padding is neither cached nor routed."""
    hf, path = hf_dirs[False]
    ours = load_pretrained(path)
    ids = np.random.default_rng(4).integers(0, 256, (2, 12), dtype=np.int32)
    row1 = np.concatenate([ids[1, :5], ids[1, 8:]])  # row 1's tokens: 9
    full0, full1 = _hf_logits(hf, ids[:1])[0], _hf_logits(hf, row1[None])[0]
    step = nnx.jit(lambda m, t, n, c, w: m.forward_cached(t, n, c, last_only=True, layer_states=w))
    cache = init_cache(ours.config, 2, 16)
    logits, cache = step(ours, jnp.asarray(ids[:, :8]), jnp.asarray([8, 5]), cache, ours.layer_weights())
    np.testing.assert_allclose(logits, np.stack([full0[7], full1[4]]), atol=1e-4)
    for t in range(8, 12):
        tokens = jnp.asarray([[ids[0, t]], [row1[t - 3]]])
        logits, cache = step(ours, tokens, jnp.asarray([1, 1]), cache, None)
        np.testing.assert_allclose(logits, np.stack([full0[t], full1[t - 3]]), atol=1e-4)


def test_config_reads_as_transformers_does():
    """Fields a file leaves out default as transformers' Qwen3MoeConfig; bad values are one line."""
    import transformers

    raw = {k: v for k, v in HF_CONFIG.items() if k not in ("mlp_only_layers", "decoder_sparse_step")}
    theirs = transformers.Qwen3MoeConfig(**raw)
    moe = Qwen3Config.from_hf({**raw, "model_type": "qwen3_moe"}).moe
    assert moe.norm_topk_prob is theirs.norm_topk_prob
    assert moe.decoder_sparse_step == theirs.decoder_sparse_step
    assert list(moe.mlp_only_layers) == theirs.mlp_only_layers and moe.sparse_layers(3) == (True,) * 3
    with pytest.raises(ValueError, match="num_experts_per_tok .9. exceeds num_experts .8."):
        Qwen3Config.from_hf({**raw, "model_type": "qwen3_moe", "num_experts_per_tok": 9})
