"""The Pallas splash attention kernel (models/splash.py) in Pallas interpret mode on CPU against our
reference path (models.layers.grouped_attention): forward and gradients of q, k, v, packed and
unpacked rows, GQA, a sliding window, fp32 and bf16, lengths that are not a multiple of its blocks,
and sharded over a mesh under shard_map."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models.config import get_config
from models.layers import grouped_attention, resolve_attention
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime
from models.splash import splash_attention, splash_lengths
from tests.subprocess_env import fake_devices_env

pytestmark = pytest.mark.slow  # the Pallas splash kernel in interpret mode, forward and backward


def _inputs(t: int, heads: int, kv_heads: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape_q, shape_kv = (2, t, heads, 32), (2, t, kv_heads, 32)
    q, k, v = (jnp.asarray(rng.standard_normal(s), dtype) for s in (shape_q, shape_kv, shape_kv))
    cotangent = jnp.asarray(rng.standard_normal(shape_q), jnp.float32)
    # row 0: three records and padding; row 1: two records, the second crossing the block edges
    seg = np.zeros((2, t), np.int32)
    cuts = [(0, t // 5, 1), (t // 5, t // 2, 2), (t // 2, t - 9, 3)], [(0, t // 3, 1), (t // 3, t - 1, 2)]
    for row, spans in enumerate(cuts):
        for lo, hi, s in spans:
            seg[row, lo:hi] = s
    return q, k, v, cotangent, jnp.asarray(seg)


def _value_and_grads(attention, q, k, v, cotangent):
    def loss(q, k, v):
        out = attention(q, k, v)
        return (out.astype(jnp.float32) * cotangent).sum(), out

    (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(q, k, v)
    return [np.asarray(x, np.float32) for x in (out, *grads)]


def _close(got, want, tol):
    """Each of out, dq, dk, dv within `tol` of the reference's largest entry."""
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        err = np.abs(a - b).max() / np.abs(b).max()
        assert err < tol, (name, err)


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
@pytest.mark.parametrize(
    ("t", "heads", "kv_heads", "window"),
    [(200, 4, 2, None), (384, 4, 1, None), (200, 6, 2, 37)],
    ids=["T200-gqa2", "T384-mqa4-3blocks", "T200-gqa3-window"],
)
def test_splash_equals_reference_in_fp32(t, heads, kv_heads, window, packed):
    q, k, v, cotangent, seg = _inputs(t, heads, kv_heads, jnp.float32)
    seg = seg if packed else None
    got = _value_and_grads(
        lambda q, k, v: splash_attention(q, k, v, seg, window, interpret=True), q, k, v, cotangent
    )
    want = _value_and_grads(lambda q, k, v: grouped_attention(q, k, v, 64, window, seg), q, k, v, cotangent)
    _close(got, want, 2e-6)  # fp32 sums in another order: measured below 1e-6


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_splash_equals_reference_in_bf16(packed):
    """bf16 inputs, fp32 logits and softmax in both: within 2% of the largest entry (bf16 rounds the
    scaled q, the probabilities before the value product, and the outputs to 8 bits)."""
    q, k, v, cotangent, seg = _inputs(256, 4, 2, jnp.bfloat16, seed=1)
    seg = seg if packed else None
    got = _value_and_grads(lambda q, k, v: splash_attention(q, k, v, seg, interpret=True), q, k, v, cotangent)
    want = _value_and_grads(lambda q, k, v: grouped_attention(q, k, v, None, None, seg), q, k, v, cotangent)
    _close(got, want, 2e-2)


def test_block_and_padding_choice():
    assert [splash_lengths(t) for t in (1, 128, 200, 640, 1024, 4097, 32768)] == [
        (128, 128),
        (128, 128),
        (256, 256),
        (640, 128),
        (1024, 512),
        (4224, 128),
        (32768, 512),
    ]


def test_auto_takes_splash_for_tpu_programs_only():
    for dtype in (jnp.float32, jnp.bfloat16):
        assert resolve_attention("auto", dtype, "tpu") == "splash"
        assert resolve_attention("auto", dtype, "cpu") == "xla"
    assert resolve_attention("auto", jnp.bfloat16, "gpu") == "cudnn"
    assert resolve_attention("auto", jnp.float32, "gpu") == "reference"
    model = Qwen3ForCausalLM(get_config("tiny"), rngs=nnx.Rngs(0), runtime=ModelRuntime(platform="tpu"))
    assert model.layers.attn.impl == "splash" and model.layers.attn.platform == "tpu"


def test_model_with_splash_equals_reference_on_packed_rows():
    """The whole model (interpret mode on CPU): packed rows' logits as the reference path's."""
    cfg = get_config("tiny")
    reference = Qwen3ForCausalLM(
        cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(attention="reference", attention_block=None)
    )
    fused = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(attention="splash"))
    assert fused.layers.attn.impl == "splash"
    _, _, _, _, seg = _inputs(96, 4, 2, jnp.float32)
    ids = jnp.asarray(np.random.default_rng(3).integers(0, cfg.vocab_size, seg.shape, dtype=np.int32))
    forward = nnx.jit(lambda m, x, s: m(x, None, s))
    want = np.asarray(forward(reference, ids, seg))
    np.testing.assert_allclose(np.asarray(forward(fused, ids, seg)), want, atol=2e-6, rtol=0)


CHILD = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    from models.layers import grouped_attention
    from models.sharding import make_mesh
    from models.splash import splash_attention

    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((4, 136, 4, 32)), jnp.float32)
    k, v = (jnp.asarray(rng.standard_normal((4, 136, 2, 32)), jnp.float32) for _ in range(2))
    seg = jnp.asarray(np.repeat(np.arange(1, 5), 34)[None].repeat(4, 0) * (np.arange(4)[:, None] % 2 + 1))
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    rows = NamedSharding(mesh, P(("data", "fsdp"), None, "tensor", None))
    seg_rows = NamedSharding(mesh, P(("data", "fsdp")))
    loss = lambda f: jax.grad(lambda q, k, v: (f(q, k, v) ** 2).sum(), argnums=(0, 1, 2))
    with jax.set_mesh(mesh):
        args = (jax.device_put(q, rows), jax.device_put(k, rows), jax.device_put(v, rows))
        s = jax.device_put(seg, seg_rows)
        fn = jax.jit(loss(lambda q, k, v: splash_attention(q, k, v, s, interpret=True)))
        text = fn.lower(*args).as_text()
        got = fn(*args)
    want = jax.jit(loss(lambda q, k, v: grouped_attention(q, k, v, None, None, seg)))(q, k, v)
    err = max(float(jnp.abs(a - b).max() / jnp.abs(b).max()) for a, b in zip(got, want))
    print(json.dumps({"err": err, "shard_map": "shard_map" in text or "manual" in text,
                      "sharding": str(got[0].sharding.spec)}))
""")


def test_splash_under_a_mesh_runs_per_shard():
    """Rows over data x fsdp, heads over tensor: the kernel runs per shard (shard_map) and its
    gradients equal the unsharded reference path's."""
    env = fake_devices_env(8)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["err"] < 2e-6 and result["shard_map"], result
