"""The split placement's weight hand-over (rollout/handover.py) on 8 fake CPU devices, one process:
`mesh.rollout_devices=4` makes the train sub-mesh of devices 0-3 (fsdp 2 x tensor 2) and the
rollout sub-mesh of devices 4-7 (same shape); an uneven split is refused in one line.

- The sampler's weights made and refreshed by the hand-over equal the train params cast to bf16
  bitwise, lie on the rollout sub-mesh in the sampler layout, and are written into the old sampler
  buffers (donated); the program moves nothing through the host (transfer guard).
- The pre-hand-over check refuses, in one line, a different tree, shape, dtype or sharding.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a tiny model on 8 fake devices in a subprocess (~40 s on 2 cores)


def _check(fn, state, dst) -> str:
    try:
        fn(state, dst)
    except ValueError as e:
        assert "\n" not in str(e)
        return str(e)
    return "no error"


def _child() -> dict:
    import dataclasses

    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from b2tjax.config import MeshConfig
    from b2tjax.errors import UserError
    from b2tjax.run.mesh import build_mesh, rollout_mesh
    from models.config import get_config
    from models.qwen3 import create_model
    from rollout.handover import check_handover
    from rollout.placement import SamplerWeights, cast_floats

    config = MeshConfig(fsdp=2, tensor=2, rollout_devices=4)
    train, rollout = build_mesh(config), rollout_mesh(config)
    devices = jax.devices()
    assert list(train.devices.flat) == devices[:4] and list(rollout.devices.flat) == devices[4:]
    try:
        build_mesh(MeshConfig(fsdp=-1, rollout_devices=3))
    except UserError as e:
        out_uneven = str(e)
    model = create_model(dataclasses.replace(get_config("tiny"), vocab_size=64), train, seed=0)
    state = nnx.state(model)
    weights = SamplerWeights(state, jnp.bfloat16, rollout)
    sampler = weights.create(state)
    out: dict = {"split": weights.handover is not None, "uneven": out_uneven}

    def equal(sampler_state, train_state) -> bool:
        want, got = jax.tree.leaves(cast_floats(train_state, jnp.bfloat16)), jax.tree.leaves(sampler_state)
        return all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(want, got, strict=True))

    out["created_equal"] = equal(sampler, state)
    # a "trained" state: every param changed, still on the train sub-mesh
    trained = jax.jit(lambda s: jax.tree.map(lambda x: x * 1.5 + 0.25, s))(state)
    old = jax.tree.leaves(sampler)
    with jax.transfer_guard("disallow"):
        new = weights.refresh(trained, sampler)
    out["refreshed_equal"] = equal(new, trained)
    out["on_rollout"] = all(x.sharding.mesh == rollout for x in jax.tree.leaves(new))
    out["layout"] = all(
        x.sharding.is_equivalent_to(s, x.ndim)
        for x, s in zip(jax.tree.leaves(new), jax.tree.leaves(weights.shardings), strict=True)
    )
    out["donated"] = all(x.is_deleted() for x in old)
    out["checks"] = weights.handover.checks
    fn = weights.handover
    own = weights.split(trained)[1]
    leaves, treedef = jax.tree.flatten(new)
    out["tree"] = _check(fn, own, {"x": leaves[0]})
    out["shape"] = _check(fn, own, treedef.unflatten([leaves[0][:1], *leaves[1:]]))
    out["dtype"] = _check(fn, own, treedef.unflatten([leaves[0].astype(jnp.float32), *leaves[1:]]))
    moved = jax.device_put(leaves[0], jax.sharding.NamedSharding(train, leaves[0].sharding.spec))
    out["sharding"] = _check(fn, own, treedef.unflatten([moved, *leaves[1:]]))
    out["passes"] = _check(lambda s, d: check_handover(s, d, jnp.bfloat16, train, rollout), own, new)
    return out


def test_the_handover_moves_the_cast_train_weights_into_the_sampler_buffers():
    from tests.subprocess_env import script_json  # the test runs from the repository root

    out = script_json(__file__, devices=8)
    assert out["split"] and out["created_equal"] and out["refreshed_equal"], out
    assert out["on_rollout"] and out["layout"] and out["donated"], out
    assert out["checks"] == 2
    assert "mesh.rollout_devices=3 must be half of each process's devices (process 0 has 8)" in out["uneven"]
    assert "tree structures" in out["tree"]
    assert "shape" in out["shape"] and "dtype" in out["dtype"], out
    assert "destination not on the rollout sub-mesh" in out["sharding"], out
    assert out["passes"] == "no error"


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout, not an installed one
    print(json.dumps(_child()))
