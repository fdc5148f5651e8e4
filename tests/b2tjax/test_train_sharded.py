"""One GRPO step on an 8-device (fsdp=4 x tensor=2) CPU mesh equals the same step on one device.

The comparison runs in a subprocess started with XLA_FLAGS=--xla_force_host_platform_device_count=8
(the device count is fixed when JAX starts). The sharded step is the jitted step with explicit
in/out shardings, parameters FSDP x tensor sharded, the batch split over (data, fsdp).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # trains on 8 fake devices in a subprocess

ROOT = Path(__file__).resolve().parents[2]


def _compare(lora_rank: int) -> dict:
    """Both steps' results; with `lora_rank` > 0 the tiny model carries LoRA adapters (the trained
    params) on a frozen base passed beside them."""
    import jax
    import numpy as np
    import optax

    from b2tjax.config import GRPOConfig
    from b2tjax.step.batch import TrainBatch, loss_positions
    from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns, state_shardings
    from models.config import get_config
    from models.lora import LoraConfig, add_lora
    from models.qwen3 import create_model
    from models.sharding import make_mesh

    assert jax.device_count() == 8
    cfg = get_config("tiny")
    gcfg = GRPOConfig(aggregation="token_mean", beta=0.05, logprob_chunk=16)
    rng = np.random.default_rng(0)
    n, t = 8, 32
    ids = rng.integers(0, cfg.vocab_size, size=(n, t)).astype(np.int32)
    mask = (rng.random((n, t)) < 0.7).astype(np.float32)
    mask[:, :4] = 0
    adv = rng.normal(size=n).astype(np.float32)
    old = rng.normal(scale=0.1, size=(n, t)).astype(np.float32) - 7.0
    ref = old + rng.normal(scale=0.1, size=(n, t)).astype(np.float32)
    flat = dict(ids=ids, mask=mask, old_logprobs=old, ref_logprobs=ref, advantages=adv)
    batch = TrainBatch(**flat, positions=loss_positions(mask)).split(2)  # as the trainer lays it out
    # SGD with momentum: a sharded optimizer state, and an update linear in the gradient, so the
    # comparison is at float precision (Adam's first step, ~lr * sign(g), amplifies rounding noise).
    optimizer = optax.sgd(1.0, momentum=0.9)

    results = {}
    for name, mesh in (("single", None), ("sharded", make_mesh(data=1, fsdp=4, tensor=2))):
        model = add_lora(create_model(cfg, mesh, seed=0), LoraConfig(rank=lora_rank), seed=1, mesh=mesh)
        model_fn, params = BoundModel.from_model(model)
        state = init_train_state(params, optimizer, mesh)
        fns = make_step_fns(
            model_fn,
            optimizer,
            lambda s: 1.0,
            gcfg,
            temperature=1.0,
            fixed_length=t,
            state_sharding=state_shardings(state) if mesh is not None else None,
            mesh=mesh,
            frozen=BoundModel.frozen_of(model),
        )
        new_state, metrics = fns.grpo_step(state, fns.shard_batch(batch))
        leaves = jax.tree_util.tree_leaves_with_path(new_state.params)
        results[name] = {
            "loss": float(metrics["loss"]),
            "kl": float(metrics["kl"]),
            "params": {jax.tree_util.keystr(p): np.asarray(v).tolist() for p, v in leaves},
            "sharded_leaves": sum(
                len(v.sharding.device_set) > 1 and not v.sharding.is_fully_replicated for _, v in leaves
            ),
            "devices": sorted({d.id for _, v in leaves for d in v.sharding.device_set}),
            # momentum buffers follow their parameters' layout (not replicated on every device)
            "sharded_opt_leaves": sum(
                not v.sharding.is_fully_replicated for v in jax.tree.leaves(new_state.opt_state)
            ),
        }
    return results


RANKS = (0, 4)


@pytest.fixture(scope="module")
def compared() -> dict:
    """Both LoRA ranks' comparisons, from one subprocess (one JAX start on 8 devices)."""
    from tests.subprocess_env import fake_devices_env  # the child runs this file without tests/ on its path

    env = fake_devices_env(8)
    cmd = [sys.executable, __file__, *map(str, RANKS)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=500, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("lora_rank", RANKS)
def test_sharded_step_equals_single_device_step(lora_rank, compared):
    """Full fine-tuning, and LoRA: adapters sharded like their base weights, the base beside them."""
    import numpy as np

    res = compared[str(lora_rank)]
    single, sharded = res["single"], res["sharded"]
    assert sharded["devices"] == list(range(8))
    assert sharded["sharded_leaves"] >= 5  # embeddings, attention and MLP weights really are split
    assert single["sharded_leaves"] == 0
    assert all(("_lora_" in key) == (lora_rank > 0) for key in single["params"])  # what is trained
    assert sharded["sharded_opt_leaves"] == sharded["sharded_leaves"]
    np.testing.assert_allclose(sharded["loss"], single["loss"], rtol=1e-5)
    np.testing.assert_allclose(sharded["kl"], single["kl"], rtol=1e-4, atol=1e-7)
    for key, value in single["params"].items():
        np.testing.assert_allclose(
            np.asarray(sharded["params"][key]), np.asarray(value), rtol=1e-4, atol=1e-6, err_msg=key
        )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(json.dumps({rank: _compare(int(rank)) for rank in sys.argv[1:]}))
