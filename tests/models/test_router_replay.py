"""Router replay in the model: every forward returns the experts each MoE layer chose, and a forward
given experts uses them: its own routes reproduce it, another router's routes are followed (the
block against a one-hot reference of the same experts, output and router gradient), padding stays
unrouted, the cached forward's routes equal the uncached one's, and a dense model has none."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models.config import get_config
from models.kv_cache import init_cache
from models.moe import MoeBlock
from models.moe_config import MoeConfig
from models.qwen3 import Qwen3ForCausalLM

F32 = jnp.float32
E, K = 8, 2
# three layers, the middle one with a dense MLP: two MoE layers in two scans of the `layers` stack
MOE = MoeConfig(
    num_experts=E, num_experts_per_tok=K, moe_intermediate_size=16, norm_topk_prob=True, mlp_only_layers=(1,)
)
CFG = get_config(
    "tiny-untied", vocab_size=128, hidden_size=32, intermediate_size=48, head_dim=8, num_hidden_layers=3,
    moe=MOE, initializer_range=0.2,
)  # fmt: skip
IDS = np.random.default_rng(0).integers(0, 128, (2, 12), dtype=np.int32)
# row 0: two records; row 1: one record and 4 padding tokens
SEGMENTS = np.array([[1] * 7 + [2] * 5, [1] * 8 + [0] * 4], np.int32)


def _perturbed(model: Qwen3ForCausalLM, scale: float) -> Qwen3ForCausalLM:
    """A copy of `model` whose routers are moved by noise of `scale`: it routes some tokens elsewhere."""
    other = nnx.clone(model)
    noise = np.random.default_rng(1).normal(scale=scale, size=other.layers.mlp.router.shape)
    other.layers.mlp.router[...] = other.layers.mlp.router[...] + jnp.asarray(noise, F32)
    return other


_routed = nnx.jit(lambda m, i, s, r: m.routed_forward(i, None, s, r))


def random_model(cfg, scale: float, seed: int = 0) -> Qwen3ForCausalLM:
    """A model of `cfg` with normal(scale) weights (norm scales about 1) set from numpy: an eager
    init costs seconds of dispatch."""
    graph, state = nnx.split(nnx.eval_shape(lambda: Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))))
    rng = np.random.default_rng(seed)
    weights = jax.tree.map(lambda a: (a.ndim == 1) + rng.normal(0.0, scale, a.shape), nnx.to_pure_dict(state))
    nnx.replace_by_pure_dict(state, jax.tree.map(lambda a: jnp.asarray(a, F32), weights))
    return nnx.merge(graph, state)


@pytest.fixture(scope="module")
def model() -> Qwen3ForCausalLM:
    return random_model(CFG, 0.2)


def test_forward_returns_routes_and_replays_them(model):
    ids, seg = jnp.asarray(IDS), jnp.asarray(SEGMENTS)
    hidden, (stats, chosen) = _routed(model, ids, seg, None)
    assert chosen.dtype == jnp.uint8 and chosen.shape == (2, 12, 2, K)
    valid = SEGMENTS != 0
    assert (np.asarray(chosen)[~valid] == 0).all()
    # distinct experts per token, each a top-k of its layer's router (counts agree with the stats)
    routes = np.asarray(chosen)[valid]  # [n, L, k]
    assert (routes[..., 0] != routes[..., 1]).all()
    for layer in range(2):
        np.testing.assert_array_equal(
            np.bincount(routes[:, layer].reshape(-1), minlength=E), stats.counts[layer]
        )
    again, (stats2, chosen2) = _routed(model, ids, seg, chosen)
    np.testing.assert_allclose(again, hidden, atol=1e-6)
    np.testing.assert_array_equal(chosen2, chosen)
    np.testing.assert_allclose(stats2.probs, stats.probs, atol=1e-6)

    # another router's routes: followed on every valid token, changing the output where they differ
    other = _routed(_perturbed(model, 0.03), ids, seg, None)[1][1]
    differs = (np.sort(np.asarray(other), -1) != np.sort(np.asarray(chosen), -1)).any((-1, -2))
    assert differs[valid].any() and not differs[valid].all()
    replayed, (_, used) = _routed(model, ids, seg, other)
    np.testing.assert_array_equal(np.asarray(used)[valid], np.asarray(other)[valid])
    assert (np.asarray(used)[~valid] == 0).all()
    gap = np.abs(np.asarray(replayed) - np.asarray(hidden)).max(-1)
    assert (gap[valid & differs] > 1e-4).all()
    first = np.argmax(differs[0])  # tokens before the first changed route see the same network
    np.testing.assert_allclose(np.asarray(replayed)[0, :first], np.asarray(hidden)[0, :first], atol=1e-6)
    # tokens given negative experts (none recorded) keep their own top-k
    mixed = np.asarray(other).astype(np.int16)
    mixed[0] = -1
    own, (_, used) = _routed(model, ids, seg, jnp.asarray(mixed))
    np.testing.assert_array_equal(used[0], chosen[0])
    np.testing.assert_array_equal(np.asarray(used)[1][valid[1]], np.asarray(other)[1][valid[1]])
    np.testing.assert_allclose(own[0], hidden[0], atol=1e-6)


def test_block_follows_given_experts_with_the_router_gradient():
    """A block given experts against a one-hot reference: renormalised softmax at those experts
    times each expert's SwiGLU; the output and every gradient (router included) agree."""
    block = MoeBlock(CFG, rngs=nnx.Rngs(3), dtype=F32, param_dtype=F32, experts="ragged")
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.normal(size=(1, 10, 32)), F32)
    valid = jnp.asarray(np.array([[1, 1, 1, 0, 1, 1, 0, 1, 1, 1]], bool))
    given = np.stack([rng.permutation(E)[:K] for _ in range(10)])[None].astype(np.uint8)  # not top-k
    probe = jnp.asarray(rng.normal(size=(1, 10, 32)), F32)

    def reference(b: MoeBlock) -> jax.Array:
        picked = jax.nn.one_hot(given[0], E, dtype=F32)  # [N, k, E]
        p = jax.nn.softmax(x[0] @ b.router[...], -1)
        w = jnp.einsum("nke,ne->nk", picked, p)
        w = w / w.sum(-1, keepdims=True) * valid[0, :, None]
        act = jax.nn.silu(jnp.einsum("nh,ehi->nei", x[0], b.gate_proj[...]))
        out = jnp.einsum(
            "nei,eih->neh", act * jnp.einsum("nh,ehi->nei", x[0], b.up_proj[...]), b.down_proj[...]
        )
        return jnp.einsum("nke,nk,neh->nh", picked, w, out)[None]

    def ours(b: MoeBlock) -> jax.Array:
        return b.forward(x, valid, jnp.asarray(given))[0]

    got, want = nnx.jit(ours)(block), nnx.jit(reference)(block)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert (np.asarray(got)[~np.asarray(valid)] == 0).all()
    grads = [nnx.jit(nnx.grad(lambda b, f=f: jnp.sum(f(b) * probe)))(block) for f in (ours, reference)]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), *grads)
    assert float(jnp.abs(grads[0]["router"][...]).max()) > 1e-3


def test_cached_routes_equal_the_uncached_forward(model):
    """Prefill (layers unrolled) then decode (scanned): the routes of every computed token are
    those of the uncached forward of the whole sequence; a dense model returns none."""
    ids = IDS[:1]
    step = nnx.jit(lambda m, t, n, c, w: m.routed_forward_cached(t, n, c, last_only=True, layer_states=w))
    _, cache, prefill = step(
        model, jnp.asarray(ids[:, :8]), jnp.asarray([6]), init_cache(CFG, 1, 16), model.layer_weights()
    )
    routes = [np.asarray(prefill)[0, :6]]
    for t in range(6, 12):
        _, cache, chosen = step(model, jnp.asarray(ids[:, t : t + 1]), jnp.asarray([1]), cache, None)
        routes.append(np.asarray(chosen)[0])
    full = np.asarray(_routed(model, jnp.asarray(ids), None, None)[1][1])[0]
    np.testing.assert_array_equal(np.sort(np.concatenate(routes), -1), np.sort(full, -1))

    dense_cfg = get_config("tiny-untied", vocab_size=128, hidden_size=32, intermediate_size=48, head_dim=8)
    dense = random_model(dense_cfg, 0.2)
    assert _routed(dense, jnp.asarray(ids), None, None)[1] is None
    with pytest.raises(ValueError, match="routes given to a dense Qwen3 model"):
        dense.routed_forward(jnp.asarray(ids), routes=jnp.zeros((1, 12, 2, K), jnp.uint8))
