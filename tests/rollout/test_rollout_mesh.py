"""The sampler on an 8-device mesh (data 2 x fsdp 2 x tensor 2, fake CPU devices, in a subprocess).

- Greedy records of a sharded engine (FSDP-sharded training weights in, sampler copy laid out for
  sampling, the KV page pool's shards over data x fsdp (each row shard's pages on its own devices)
  and KV heads over tensor, fewer rows than episodes so rows are refilled) equal those of the same
  engine on one device.
- After a weight update the sampler's copy equals the trained weights cast to the compute dtype,
  is laid out without FSDP, and the refresh moves nothing through the host (transfer guard).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from models.settings import ModelRuntime

pytestmark = pytest.mark.slow  # rolls out on 8 fake devices in a subprocess

ROOT = Path(__file__).resolve().parents[2]


def _child(tmp: str) -> dict:
    import dataclasses

    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from models.config import get_config
    from models.qwen3 import create_model
    from models.sharding import make_mesh
    from models.spm import SentencePieceTokenizer, train_sentencepiece
    from rollout import RolloutEngine
    from sandbox.benchmarks import b2t
    from sandbox.benchmarks.b2t.world.generator import build_world
    from tests.rollout_fixtures import ANSWER, SEARCH, Setup, engine_config, forced_episode

    assert jax.device_count() == 8
    build_world(Path(tmp) / "world.sqlite", scale="small", seed=0)
    world = b2t.B2TTools(b2t.open_world(Path(tmp) / "world.sqlite"))
    corpus = [json.dumps(b2t.tool_schemas(python=True))] * 3 + [
        "Plan a 3-day trip from Shanghai to Chengdu for two people, budget 6000 CNY. " * 20
    ]
    tok = SentencePieceTokenizer(train_sentencepiece(corpus, Path(tmp) / "spm", vocab_size=1000))
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=tok.vocab_size, initializer_range=0.1)
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    out: dict = {}

    def episodes(setup):
        return [
            forced_episode(
                setup, f"ep{i}", f"Plan trip number {i} to Chengdu.", {0: SEARCH, 1 + i % 3: ANSWER}
            )
            for i in range(6)
        ]

    # 4 rows (divisible over data x fsdp = 4) for 6 episodes: rows are refilled.
    config = engine_config(batch_rows=4, temperature=0.0)
    records = {}
    for name, m in (("single", None), ("sharded", mesh)):
        model = create_model(cfg, m, seed=0)
        engine = RolloutEngine(model, tok, config, mesh=m)
        records[name] = [
            (r.ids, r.loss_mask, r.stop_reason) for r in engine.run(episodes(Setup(world, tok, model)))
        ]
        if m is not None:
            out["sampler_specs"] = sorted(
                {str(x.sharding.spec) for x in jax.tree.leaves(engine.runner.state)}
            )
    out["records_equal"] = records["single"] == records["sharded"]
    out["num_records"] = len(records["single"])
    out["tokens"] = sum(len(ids) for ids, _, _ in records["single"])

    # bf16 sampler of fp32 FSDP-sharded training weights; "train" = move the weights, then refresh.
    model = create_model(cfg, mesh, seed=1, runtime=ModelRuntime(dtype=jnp.bfloat16))
    engine = RolloutEngine(model, tok, config, mesh=mesh)
    pointers = lambda tree: [
        s.data.unsafe_buffer_pointer()
        for x in jax.tree.leaves(tree)  # noqa: E731
        for s in x.addressable_shards
    ]
    before = pointers(engine.runner.state)
    graphdef, params = nnx.split(model)
    trained = jax.jit(lambda p: jax.tree.map(lambda x: x * 1.5 + 0.01, p))(params)
    jax.block_until_ready(trained)
    with jax.transfer_guard("disallow"):
        engine.update_weights(nnx.merge(graphdef, trained))
        jax.block_until_ready(engine.runner.state)
    got = jax.tree.leaves(engine.runner.state)
    want = jax.tree.leaves(trained)
    out["refresh_dtypes"] = sorted({str(x.dtype) for x in got})
    out["refresh_exact"] = all(
        bool(np.array_equal(np.asarray(g), np.asarray(w.astype(jnp.bfloat16)))) for g, w in zip(got, want)
    )
    out["train_specs_have_fsdp"] = any("fsdp" in str(x.sharding.spec) for x in want)
    out["refresh_specs"] = sorted({str(x.sharding.spec) for x in got})
    out["refresh_devices"] = sorted({len(x.sharding.device_set) for x in got})
    out["refresh_in_place"] = before == pointers(engine.runner.state)
    return out


def test_sharded_rollout_and_weight_refresh(tmp_path):
    from tests.subprocess_env import fake_devices_env  # the child runs this file without tests/ on its path

    env = fake_devices_env(8)
    proc = subprocess.run(
        [sys.executable, __file__, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["num_records"] == 6 and res["tokens"] > 600
    assert res["records_equal"]
    # The sampler's weights: tensor-parallel only (no fsdp), on all 8 devices.
    assert not any("fsdp" in s for s in res["sampler_specs"]) and any(
        "tensor" in s for s in res["sampler_specs"]
    )
    assert res["refresh_dtypes"] == ["bfloat16"]
    assert res["refresh_exact"]
    assert res["train_specs_have_fsdp"] and not any("fsdp" in s for s in res["refresh_specs"])
    assert res["refresh_devices"] == [8]
    assert res["refresh_in_place"]  # written into the donated previous copy


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(json.dumps(_child(sys.argv[1])))
