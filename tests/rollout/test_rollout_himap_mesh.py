"""HiMAP episodes on an 8-device mesh (data 2 x fsdp 2 x tensor 2, fake CPU devices, in a subprocess).

Three HiMAP episodes of 3, 2 and 2 days (coordinator's distribute_task forced from the scripted
expert, the executors sampled greedily by a tiny random model) on 4 rows for 7 executors, so
rows are refilled as executors end: the sharded engine's records and answers equal the
one-device engine's, and with prefix reuse (on in both) they equal the one-device engine's
without it. Fully forced turns never reach the model, so the sampled
turns (the executors', and each coordinator's second turn after its days report) are what this
checks about sharding. These episodes no longer park (no executor waits for a sibling), so
HiMAP-shaped team episodes whose coordinators sample and wait (tests/rollout/test_rollout_streams.py)
run on the same mesh on 4 rows, parked, with prefix reuse, against one device without it.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.benchmarks.b2t.instances.instructions import make_instruction
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)
from tests.subprocess_env import fake_devices_env

pytestmark = pytest.mark.slow  # rolls HiMAP out on 8 fake devices in a subprocess

ROOT = Path(__file__).resolve().parents[2]
EPISODES = 3
DAYS = (3, 2, 2)  # 7 executors on 4 rows: a 2-day pair is split across rows


def _trip(visible: dict, truth: dict, days: int) -> tuple[dict, dict]:
    """The instance as a `days`-day trip (short episodes keep the test fast)."""
    visible, truth = copy.deepcopy(visible), copy.deepcopy(truth)
    truth["query"]["days"] = days
    visible["instruction"] = make_instruction(random.Random(0), truth["query"], {}, "en")
    return visible, truth


def _teams(tok, cfg) -> dict:
    """HiMAP-shaped team episodes (tests/rollout/test_rollout_streams.py: coordinators sample, then wait
    for their days, holding rows) on 4 rows, so waiting coordinators are parked: sharded with
    prefix reuse against one device without it."""
    from models.qwen3 import create_model
    from models.sharding import make_mesh
    from rollout import RolloutEngine
    from tests.rollout.test_rollout_streams import _team_episodes
    from tests.rollout_fixtures import engine_config

    runs = []
    for mesh, reuse in ((None, False), (make_mesh(data=2, fsdp=2, tensor=2), True)):
        config = engine_config(batch_rows=4, temperature=1.0, prefix_reuse=reuse)
        engine = RolloutEngine(create_model(cfg, mesh, seed=0), tok, config, mesh=mesh)
        runs.append((engine.run(_team_episodes(tok), rng=3), engine.stats))
    (plain, off), (sharded, on) = runs
    same = [(r.ids, r.loss_mask, r.turns, str(r.stop_reason)) for r in plain] == [
        (r.ids, r.loss_mask, r.turns, str(r.stop_reason)) for r in sharded
    ]
    gap = max(
        (abs(a - b) for x, y in zip(plain, sharded) for a, b in zip(x.logprobs, y.logprobs)), default=0.0
    )
    return {
        "team_parks": [off.parks, on.parks],
        "team_reused": on.reused_tokens,
        "team_same": same,
        "team_gap": gap,
    }


def _child(bench_dir: str, tmp: str) -> dict:
    import dataclasses

    import jax

    from models.config import get_config
    from models.qwen3 import create_model
    from models.sharding import make_mesh
    from models.spm import SentencePieceTokenizer, train_sentencepiece
    from rollout import RolloutEngine
    from rollout.agents.himap import himap_episode
    from sandbox.benchmarks import b2t
    from sandbox.benchmarks.b2t.benchmark import B2TBenchmark
    from sandbox.himap.options import HimapOptions
    from sandbox.himap.scripted import solve
    from sandbox.limits import StreamLimits
    from tests.rollout_fixtures import engine_config

    assert jax.device_count() == 8
    bench = B2TBenchmark(bench_dir)
    corpus = [json.dumps(b2t.tool_schemas(python=True))] * 3 + [
        "Plan a 2-day trip from Shanghai to Chengdu for two people, budget 6000 CNY. " * 20
    ]
    tok = SentencePieceTokenizer(train_sentencepiece(corpus, Path(tmp) / "spm", vocab_size=1000))
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=tok.vocab_size, initializer_range=0.1)
    # Without the fallback the coordinator's prompt lists only the place searches of the executors'
    # tools: it fits 8192 tokens.
    expert = HimapOptions(max_response_chars=1200, fallback=False)
    # Short turn caps keep the records small; the expert ran with the full ones.
    options = dataclasses.replace(
        expert, executor_limits=StreamLimits(max_turns=2), coordinator_limits=StreamLimits(max_turns=2)
    )
    pairs = [_trip(v, h, d) for (v, h), d in zip(bench.load_split("test"), DAYS)]
    distribute = [solve(bench, v, h, expert).texts["coordinator"][-1:] for v, h in pairs]

    def run(mesh, reuse: bool = True) -> tuple[list, list]:
        episodes = [
            himap_episode(v, bench, tok, options, forced={"coordinator": list(d)})
            for (v, _), d in zip(pairs, distribute)
        ]
        # 4 rows (divisible over data x fsdp) for 7 executors (forced coordinators take no row).
        # Synchronous host work on one tool worker: otherwise the order in which episodes' jobs
        # finish (timing) orders the queue and so decides whether a stream parks; records do not
        # depend on it, but then a run could miss parking.
        config = engine_config(
            batch_rows=4,
            max_turns=4,
            max_seq_len=8192,
            cache_len=8192,
            tool_workers=1,
            prefix_reuse=reuse,
        )
        engine = RolloutEngine(create_model(cfg, mesh, seed=0), tok, config, mesh=mesh)
        records = engine.run(episodes, rng=0)
        out.setdefault("parks", []).append(engine.stats.parks)
        out.setdefault("reused", []).append(engine.stats.reused_tokens)
        out.setdefault("prefilled", []).append(engine.stats.prefill_tokens)
        return records, [e.answer for e in episodes]

    out: dict = {}
    plain, plain_answers = run(None, reuse=False)
    single, single_answers = run(None)
    sharded, sharded_answers = run(make_mesh(data=2, fsdp=2, tensor=2))
    exact = lambda r: (  # noqa: E731
        r.instance_id,
        r.stream,
        r.role,
        r.tag.detail("day"),
        r.tag.detail("round"),
        r.ids,
        r.loss_mask,
        r.turns,
        str(r.stop_reason),
        r.answer,
    )
    out["records"] = [exact(r) for r in single]
    out["records_equal"] = [exact(r) for r in single] == [exact(r) for r in sharded]
    out["reuse_records_equal"] = [exact(r) for r in plain] == [exact(r) for r in single]
    out["reuse_logprob_excess"] = max(  # |diff| beyond 1e-6 (relative above magnitude 1), <= 0 if within
        (
            abs(a - b) - 1e-6 * max(1.0, abs(a))
            for x, y in zip(plain, single)
            for a, b in zip(x.logprobs, y.logprobs)
        ),
        default=0.0,
    )
    out["reuse_answers_equal"] = plain_answers == single_answers
    out["logprob_max_diff"] = max(
        (abs(a - b) for x, y in zip(single, sharded) for a, b in zip(x.logprobs, y.logprobs)), default=0.0
    )
    out["logprob_lengths_equal"] = [len(r.logprobs) for r in single] == [len(r.logprobs) for r in sharded]
    out["answers"] = single_answers
    out["answers_equal"] = single_answers == sharded_answers
    out["prompt_lens"] = [r.prompt_len for r in single]
    out["sampled"] = [r.num_sampled for r in single]
    out.update(_teams(tok, cfg))
    return out


def test_sharded_himap_records_equal_one_device_records(tmp_path, small_benchmark):  # noqa: F811
    env = dict(fake_devices_env(8), PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, __file__, str(small_benchmark), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    records = res["records"]
    roles = [r[2] for r in records]
    assert roles.count("coordinator") == EPISODES and roles.count("executor") >= sum(DAYS)
    # Every stream sampled: the executors' turns and each coordinator's turn after its days report.
    assert min(res["sampled"]) > 0
    # No lockstep: sampled executors' turns call nothing shared, so none waits for a sibling and
    # parking (tests/rollout/test_rollout_streams.py) is not needed here; both engines schedule alike.
    assert len(set(res["parks"])) == 1
    assert res["records_equal"]
    assert res["logprob_lengths_equal"] and res["logprob_max_diff"] < 1e-4
    assert res["answers_equal"] and len(res["answers"]) == EPISODES
    # prefix reuse (the executors' shared system + tools prefix, parked streams' resident rows):
    # the records of the engine without it, fewer tokens computed, the copied ones accounted
    plain_prefilled, *prefilled = res["prefilled"]
    assert res["reused"][0] == 0 and min(res["reused"][1:]) > 0
    assert all(p + r == plain_prefilled for p, r in zip(prefilled, res["reused"][1:]))
    assert res["reuse_records_equal"] and res["reuse_answers_equal"]
    assert res["reuse_logprob_excess"] <= 0.0
    # parking with reuse on the mesh: team episodes whose coordinators wait for their days
    assert min(res["team_parks"]) > 0 and res["team_reused"] > 0
    assert res["team_same"] and res["team_gap"] < 1e-4  # other shapes on the mesh, as above


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(json.dumps(_child(sys.argv[1], sys.argv[2])))
