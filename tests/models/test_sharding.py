"""Sharding on 8 fake CPU devices (in a subprocess): params really sharded, forward == single device."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from jax.sharding import PartitionSpec as P

from models.sharding import logical_to_spec
from tests.subprocess_env import fake_devices_env

pytestmark = pytest.mark.slow  # runs 8-device meshes in subprocesses

CHILD = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    from flax import nnx
    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM, init_cache
    from models.qwen3 import create_model
    from models.sharding import make_mesh
    from models.hf import load_pretrained, save_pretrained
    from models.checkpoint import load_model, save_model

    out = {"devices": jax.device_count()}
    cfg = get_config("tiny-untied")
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    out["mesh"] = dict(mesh.shape)
    out["mesh_auto"] = dict(make_mesh().shape)
    try:
        make_mesh(tensor=3)
    except ValueError as e:
        out["bad_mesh_error"] = str(e)

    sharded = create_model(cfg, mesh, seed=0)
    single = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))

    def spec(x):  # padded to x.ndim: P('a') and P('a', None) are the same placement
        axes = list(x.sharding.spec) + [None] * (x.ndim - len(x.sharding.spec))
        return [list(a) if isinstance(a, tuple) else a for a in axes]

    def describe(x):
        return {"spec": spec(x),
                "shard_shape": list(x.addressable_shards[0].data.shape), "shape": list(x.shape)}

    out["q_proj"] = describe(sharded.layers.attn.q_proj[...])
    out["gate_proj"] = describe(sharded.layers.mlp.gate_proj[...])
    out["lm_head"] = describe(sharded.lm_head.kernel[...])
    out["embedding"] = describe(sharded.embed.embedding[...])
    out["k_proj"] = describe(sharded.layers.attn.k_proj[...])
    out["init_diff"] = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(
        jax.tree.leaves(nnx.state(sharded, nnx.Param)), jax.tree.leaves(nnx.state(single, nnx.Param))))

    ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (4, 64), dtype=np.int32))
    forward = nnx.jit(lambda m, x: m(x))
    ref = np.asarray(forward(single, ids))
    with jax.set_mesh(mesh):
        got = forward(sharded, ids)
        out["logits_spec"] = spec(got)
        out["forward_diff"] = float(np.abs(np.asarray(got) - ref).max())
        step = nnx.jit(lambda m, t, n, c: m.forward_cached(t, n, c))
        cache = init_cache(cfg, 4, 80, mesh=mesh)
        out["cache_spec"] = spec(cache.k)
        logits, cache = step(sharded, ids, jnp.asarray([64, 10, 0, 33], jnp.int32), cache)
        out["cache_spec_after"] = spec(cache.k)
        logits = np.asarray(logits)
        out["cached_diff"] = float(max(np.abs(logits[0] - ref[0]).max(),
                                       np.abs(logits[1, :10] - ref[1, :10]).max(),
                                       np.abs(logits[3, :33] - ref[3, :33]).max()))

    tmp = sys.argv[1]
    save_pretrained(single, tmp + "/hf", max_shard_size="100KB")
    loaded = load_pretrained(tmp + "/hf", mesh=mesh)
    out["hf_loaded"] = describe(loaded.layers.mlp.down_proj[...])
    save_model(sharded, tmp + "/ckpt")
    restored = load_model(tmp + "/ckpt", mesh=mesh)
    out["ckpt_loaded"] = describe(restored.layers.attn.o_proj[...])
    with jax.set_mesh(mesh):
        out["loaded_diff"] = float(np.abs(np.asarray(forward(loaded, ids)) - ref).max())
        out["restored_diff"] = float(np.abs(np.asarray(forward(restored, ids)) - ref).max())
    print("RESULT" + json.dumps(out))
""")


@pytest.fixture(scope="module")
def child_result(tmp_path_factory):
    env = fake_devices_env(8)
    tmp = tmp_path_factory.mktemp("sharding")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def test_mesh_for_any_device_count(child_result):
    assert child_result["devices"] == 8
    assert child_result["mesh"] == {"data": 2, "fsdp": 2, "tensor": 2}
    assert child_result["mesh_auto"] == {"data": 8, "fsdp": 1, "tensor": 1}
    assert "does not divide 8 devices" in child_result["bad_mesh_error"]


def test_params_are_really_sharded(child_result):
    # [L, H, NH, D]: model dim over fsdp, heads over tensor -> each device holds 1/4.
    assert child_result["q_proj"] == {
        "spec": [None, "fsdp", "tensor", None],
        "shard_shape": [2, 32, 2, 16],
        "shape": [2, 64, 4, 16],
    }
    assert child_result["gate_proj"]["spec"] == [None, "fsdp", "tensor"]
    assert child_result["gate_proj"]["shard_shape"] == [2, 32, 80]
    assert child_result["lm_head"]["spec"] == ["fsdp", "tensor"]
    assert child_result["embedding"]["spec"] == ["tensor", "fsdp"]
    assert child_result["k_proj"]["shard_shape"] == [2, 32, 1, 16]
    # Created sharded under jit: the same values as an eager single-device init (up to erfinv ulps).
    assert child_result["init_diff"] <= 1e-6


def test_sharded_forward_equals_single_device(child_result):
    assert child_result["logits_spec"][0] == ["data", "fsdp"]  # batch sharded over data x fsdp
    assert child_result["forward_diff"] <= 1e-5
    assert child_result["cached_diff"] <= 1e-4
    assert child_result["cache_spec"] == [None, ["data", "fsdp"], "tensor", None, None]
    assert child_result["cache_spec_after"] == child_result["cache_spec"]


def test_import_and_restore_into_sharded_arrays(child_result):
    assert child_result["hf_loaded"]["spec"] == [None, "tensor", "fsdp"]
    assert child_result["ckpt_loaded"]["spec"] == [None, "tensor", None, "fsdp"]
    assert child_result["loaded_diff"] <= 1e-5 and child_result["restored_diff"] <= 1e-5


def test_rules_drop_axes_that_do_not_divide():
    mesh = {"data": 2, "fsdp": 2, "tensor": 4}
    assert logical_to_spec(("embed", "kv_heads", "head_dim"), (64, 2, 16), mesh) == P("fsdp", None, None)
    assert logical_to_spec(("batch", "seq"), (4, 7), mesh) == P(("data", "fsdp"), None)
    assert logical_to_spec(("batch", "seq"), (2, 7), mesh) == P("data", None)
    assert logical_to_spec(("embed",), (64,), {"data": 8}) == P(None)


def test_an_unknown_logical_name_is_an_error_not_a_replicated_axis():
    with pytest.raises(
        ValueError, match=r"unknown logical axis name\(s\) \['embd'\]; known: batch, seq, embed"
    ):
        logical_to_spec(("embd", "mlp"), (64, 128), {"fsdp": 2, "tensor": 2})
