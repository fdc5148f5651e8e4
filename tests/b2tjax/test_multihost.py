"""A pod run on a local cluster: the tiny recipe on 2 processes x 2 devices (launch/cluster.py; mesh
fsdp across the processes, tensor within each) against 1 process x 4 devices, same mesh.

One pair of short runs (2 SFT + 1 GRPO step, one 8-token turn per episode, two prompts of two
episodes per step so both processes drive a group, prefix reuse on, a final evaluation) carries
most assertions, to fit the CI budget: the same per-step metrics within 1e-5, the same episode
records (ids and masks identical, log-probs within 1e-5), the same eval.json, each episode driven
by exactly one process (the one `rollout.hosts.episode_owner` names) whose environments' own
counts match its records. The 2-process checkpoint then resumes on 1 and on 2 processes with the
same next-step metrics and records, and exports to the same HF bytes from 1 and 2 processes.
Separate jobs: SIGTERM to one host inside a rollout, kill -9 of one host, and one HiMAP step. The pod
also records every cross-process call of some jobs' GRPO steps, which must come from the sites
tests/b2tjax/collectives.py allows.

The tiny travel model never calls a tool and scores every episode alike (a GRPO loss and gradient
of 0), so its GRPO steps skip their update (`grpo.drop_flat_groups`: a minute of attention over
3.5k-token rows per run that could only compare zeros) and a second, cheaper pair makes the update's
checks bite: the lookup task (b2tjax/tasks/toy_tools.py, a real multi-turn tool) after a short SFT,
whose rewards vary within and across the processes' groups: 2 GRPO steps with non-zero loss and
gradient equal to one process', every lookup run once in the cluster by the episode's owner (counted
by the episodes themselves). That pair runs padded, packed
and streaming at max_staleness 1 on packed rows (the session in lockstep over the processes, the
decoupled objective's importance weights in the packed rows); the split placement
(`mesh.rollout_devices`) runs it on 2 x (2 + 2) devices against 2 x 2.

The scenarios share launches (tests/b2tjax/pod_jobs.py): one pod of 2 processes x 2 devices runs
every 2 x 2 job in turn, the SIGTERM'd one last, and one process of 4 devices every 1 x 4 job (the
killed pod's resumption among them), so a pod starts, imports and loads the programs its jobs share
once; only the jobs that need another device count or a kill -9 launch their own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from b2tjax.run.metrics import read_metrics
from rollout.hosts import episode_owner
from tests.b2tjax.collectives import ALLOWED
from tests.subprocess_env import subprocess_env

pytestmark = pytest.mark.slow  # runs training on a local 2-process cluster

ROOT = Path(__file__).resolve().parents[2]
SFT_STEPS, GRPO_STEPS = 2, 1
TIMING = {"time", "tokens_per_s", "step_time_s", "rollout_time_s", "update_time_s"}
TIMING |= {"decode_ahead_time_s", "decode_wait_time_s"}  # rollout.decode_during_update
# Prefix reuse copies a shared prefix from a row of the same process: one process may find a source
# that is on another process in a 2-process run, so only their sum must agree.
REUSE = {"rollout/prefill_tokens", "rollout/reused_tokens"}
# Rows are driven by their episodes' owners, so two processes schedule decode segments otherwise than
# one (a HiMAP step: 0.69 against 0.92): occupancy describes the schedule, not the records.
SCHEDULE = {"rollout/row_occupancy"}


def _args(data: Path, out: Path, steps: int = GRPO_STEPS) -> list[str]:
    return [
        "--out",
        str(out),
        "--no-progress",
        f"data.data_dir={data}",
        f"sft.steps={SFT_STEPS}",
        f"steps={steps}",
        "eval_at_end=false",
        "rollout.max_turns=1",
        "rollout.max_turn_tokens=8",
        "rollout.turn_cap=close",  # a capped turn is closed and handed to the environment
        "rollout.prompts_per_step=2",
        "rollout.group_size=2",
        "grpo.drop_flat_groups=true",  # the step's groups score alike: no update (module docstring)
        "mesh.fsdp=2",
        "mesh.tensor=2",
        "save_records=true",
        "checkpoint.every_steps=1",
        "checkpoint.keep=10",
        "checkpoint.async_save=false",
    ]


# One HiMAP GRPO step of the tiny HiMAP recipe: a job of the pod and of the single process.
HIMAP_ARGS = [
    "--config",
    str(ROOT / "configs" / "himap_tiny_cpu.yaml"),
    "--no-progress",
    "steps=1",
    "eval_at_end=false",
    "mode=grpo",  # straight to one GRPO step (the recipe's scripted plans would warm-start it first)
    "himap.max_rounds=1",
    "rollout.max_turn_tokens=8",  # a capped turn is closed and answered: every role still acts
    # the records are what this test is about (the 2-process update is checked on the tiny
    # recipe): a step whose teams all score alike skips its update (~4 CPU-min per run)
    "grpo.drop_flat_groups=true",
    "rollout.prompts_per_step=2",
    "mesh.fsdp=2",
    "mesh.tensor=2",
    "save_records=true",
]


def _run(cmd: list[str], env: dict, timeout: int = 900, status: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == status, done.stdout[-4000:] + done.stderr[-4000:]
    return done


def _cluster_env(cache: Path) -> dict:
    """A pod's environment; PYTHONPATH for the drivers in tests/. (JAX's binary sharing between
    hosts cannot spare process 1 its compiles on CPU: the two processes' cache keys differ.)"""
    return dict(subprocess_env(cache), PYTHONPATH=str(ROOT))


JOBS = ROOT / "tests" / "b2tjax" / "pod_jobs.py"
PREEMPTED = 143  # launch/train.py's status after a SIGTERM: a pod whose last job is preempted


def _jobs(
    root: Path, name: str, jobs: list[dict], cache: Path, processes: int, devices: int, status: int = 0
) -> Path:
    """Run `jobs` (tests/b2tjax/pod_jobs.py) in one launch of `processes` x `devices`, which must end
    with `status`; their output is root/name.log. Returns root."""
    listing = root / f"{name}.json"
    listing.write_text(json.dumps(jobs))
    if processes == 1:
        env = dict(subprocess_env(cache, devices), PYTHONPATH=str(ROOT))
        cmd = [sys.executable, str(JOBS), str(listing)]
    else:
        env = _cluster_env(cache)
        launcher = [sys.executable, str(ROOT / "launch" / "cluster.py"), "--processes", str(processes)]
        cmd = [*launcher, "--devices-per-process", str(devices), "--", str(JOBS), str(listing)]
    done = _run(cmd, env, timeout=3600, status=status)
    (root / f"{name}.log").write_text(done.stdout)
    return root


def _job_output(log: Path, job: str) -> str:
    """The lines job `job` printed (with their `[process] ` prefix in a pod)."""
    current: dict[str, str] = {}
    kept = []
    for line in log.read_text().splitlines():
        prefix = line[: line.index("] ") + 2] if line.startswith("[") and "] " in line else ""
        if line[len(prefix) :].startswith("=== job "):
            current[prefix] = line[len(prefix) + len("=== job ") :]
        elif current.get(prefix) == job:
            kept.append(line)
    return "\n".join(kept)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> tuple[Path, Path]:
    """(DATA, compilation cache) of the module's runs; the pod's first job builds DATA."""
    root = tmp_path_factory.mktemp("multihost")
    return root / "DATA", root / "cache"


def _lookup(name: str, root: Path, overrides: list[str]) -> dict:
    return {"name": name, "kind": "lookup", "argv": [str(root / name), *LOOKUP_ARGS, *overrides]}


def _train(name: str, root: Path, args: list[str]) -> dict:
    return {"name": name, "kind": "train", "argv": [*args, "--out", str(root / name)]}


def _resume_from_sft(name: str, root: Path, data: Path, pod: Path) -> dict:
    """The 2-process run's directory as it was after the SFT phase (its GRPO step is then redone)."""
    drop = list(range(SFT_STEPS + 1, SFT_STEPS + GRPO_STEPS + 1))
    copy = {"src": str(pod / "two" / "checkpoints"), "dst": str(root / name / "checkpoints"), "drop": drop}
    return {"name": name, "kind": "train", "argv": [*_args(data, root / name), "--resume"], "copy": copy}


def _export(name: str, root: Path, pod: Path) -> dict:
    # the newest step of the 2-process run, with the run's tokenizer
    argv = ["--checkpoint", str(pod / "two" / "checkpoints"), "--out", str(root / name)]
    return {"name": name, "kind": "export", "argv": argv}


@pytest.fixture(scope="module")
def pod(shared) -> Path:
    """Every 2 processes x 2 devices job, in one launch; their run directories under the returned
    root (log: root/pod.log). The first job builds DATA (process 0 builds, 1 waits)."""
    data, cache = shared
    root = data.parent / "pod"
    root.mkdir()
    evaluate = ["eval_at_end=true", "data.eval_instances=4"]  # the end-of-run evaluation, 2 per process
    jobs = [
        # data.build_missing: a data.data_dir named on the command line is built only when asked
        {
            "name": "two",
            "kind": "train",
            "argv": [*_args(data, root / "two"), *evaluate, "data.build_missing=true"],
        },
        _resume_from_sft("resumed", root, data, root),
        _export("export", root, root),
        *(_lookup(f"lookup-{layout}", root, LAYOUTS[layout]) for layout in sorted(LAYOUTS)),
        *(
            _lookup(f"split-{case}-{side}", root, overrides)
            for case in sorted(SPLIT_CASES)
            for side, (overrides, devices) in _split_runs(case).items()
            if devices == 2 and _pod_job(case, side) == f"split-{case}-{side}"
        ),
        _train("himap", root, [*HIMAP_ARGS, f"data.data_dir={data}"]),
        # last: the stop ends the pod. No checkpoint schedule has a step due after SFT: the step
        # saved at the stop is saved by the stop. The tiny model's groups score alike: the
        # completed step skips its update (what is tested is where the stop lands).
        {
            "name": "preempted",
            "kind": "preempted",
            "argv": [
                *_args(data, root / "preempted", steps=5),
                "checkpoint.every_steps=100",
            ],
        },
    ]
    for job in jobs:
        if job["name"] in RECORDED:
            job["collectives"] = str(root / f"{job['name']}.collectives")
    return _jobs(root, "pod", jobs, cache, processes=2, devices=2, status=PREEMPTED)


@pytest.fixture(scope="module")
def solo(shared, pod, killed) -> Path:
    """The same jobs on 1 process x 4 devices, same mesh (what the pod's runs must match), and the
    resumption of the killed pod's run."""
    data, cache = shared
    root = data.parent / "solo"
    root.mkdir()
    evaluate = ["eval_at_end=true", "data.eval_instances=4"]
    jobs = [
        {"name": "one", "kind": "train", "argv": [*_args(data, root / "one"), *evaluate]},
        _resume_from_sft("resumed", root, data, pod),
        _export("export", root, pod),
        *(_lookup(f"lookup-{layout}", root, LAYOUTS[layout]) for layout in sorted(LAYOUTS)),
        _train("himap", root, [*HIMAP_ARGS, f"data.data_dir={data}"]),
        {"name": "killed-resumed", "kind": "train", "argv": killed["resume"]},
    ]
    return _jobs(root, "solo", jobs, cache, processes=1, devices=4)


@pytest.fixture(scope="module")
def runs(shared, pod, solo):
    """(one, two, data, cache): run directories of 1 x 4 and 2 x 2 devices over the same DATA."""
    data, cache = shared
    return solo / "one", pod / "two", data, cache


def _steps(out: Path) -> dict[int, dict]:
    return read_metrics(out / "metrics.jsonl")


def _assert_same_metrics(a: dict, b: dict, trained: bool = True) -> None:
    shared = sorted(k for k in (set(a) & set(b)) - TIMING - REUSE - SCHEDULE if not k.startswith("phase_s/"))
    assert not trained or ("loss" in shared and "grad_norm" in shared)
    for key in shared:  # numbers within 1e-5; text (the step's phase) equal
        expected = b[key] if isinstance(b[key], str) else pytest.approx(b[key], abs=1e-5, rel=1e-5)
        assert a[key] == expected, key
    if REUSE <= set(a) & set(b):  # a GRPO step: each token went into a cache once, copied or computed
        assert sum(a[k] for k in REUSE) == sum(b[k] for k in REUSE)


def _records(out: Path, step: int) -> list[dict]:
    lines = (out / "records" / f"step-{step}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _assert_same_records(ra: list[dict], rb: list[dict]) -> None:
    """Token ids, masks and rewards identical, log-probs within 1e-5."""
    assert len(ra) == len(rb)
    for x, y in zip(ra, rb):
        assert x["ids"] == y["ids"] and x["loss_mask"] == y["loss_mask"] and x["reward"] == y["reward"]
        np.testing.assert_allclose(x["logprobs"], y["logprobs"], atol=1e-5)


def _owners(records: list[dict], group_size: int, step: int) -> list[int]:
    """Each record's owner by the pure function of (step seed, episode, 2 processes)."""
    step_seed = int(np.random.default_rng([0, step]).integers(2**31 - 1))  # Trainer._step_seed
    return [episode_owner(r["episode"], group_size, 2, step_seed) for r in records]


def test_two_processes_match_one(runs):
    one, two, _, _ = runs
    a, b = _steps(one), _steps(two)
    assert sorted(a) == sorted(b) == list(range(1, SFT_STEPS + GRPO_STEPS + 1))
    for step in a:
        _assert_same_metrics(a[step], b[step], trained=step <= SFT_STEPS)
    # the GRPO metrics include the rollout's reward and sampled tokens; its flat groups trained nothing
    assert {"reward", "rollout/generated_tokens"} <= set(b[SFT_STEPS + 1])
    assert b[SFT_STEPS + 1]["trained_records"] == b[SFT_STEPS + 1]["applied"] == 0
    # prefix reuse ran on both processes: each group's second episode took its shared prompt's pages
    # (each process' rows take pages of their own shards)
    assert all(
        b[step]["rollout/reused_tokens"] > 0 for step in range(SFT_STEPS + 1, SFT_STEPS + GRPO_STEPS + 1)
    )
    for step in range(SFT_STEPS + 1, SFT_STEPS + GRPO_STEPS + 1):
        ra, rb = _records(one, step), _records(two, step)
        assert [r["episode"] for r in ra] == [r["episode"] for r in rb] == [0, 1, 2, 3]
        _assert_same_records(ra, rb)


def test_the_end_of_run_evaluation_matches_one_process(runs):
    one, two, _, _ = runs
    a, b = (json.loads((out / "eval.json").read_text()) for out in (one, two))
    assert a == b and "mean_reward" in a  # the same greedy episodes, judged alike


def test_each_episode_driven_by_its_owner_once(runs):
    _, two, _, _ = runs
    metrics = _steps(two)
    for step in range(SFT_STEPS + 1, SFT_STEPS + GRPO_STEPS + 1):
        records = _records(two, step)
        assert all(r["process"] in (0, 1) for r in records)
        # the step's groups (2 episodes each) are dealt to both processes
        owners = {r["process"] for r in records}
        assert owners == {0, 1}
        episodes = [metrics[step][f"hosts/episodes_p{p}"] for p in (0, 1)]
        assert episodes == [2.0, 2.0]
        # what each process' environments executed, counted where they ran (sandbox.env.EXECUTED),
        # is what its records report: no episode's turns or tools ran on two processes
        for p in (0, 1):
            calls = [c for r in records if r["process"] == p for c in r["calls"]]
            assert metrics[step][f"hosts/answered_p{p}"] == len(calls) > 0
            assert metrics[step][f"hosts/tool_calls_p{p}"] == len(calls)
            tools = [c for c in calls if c not in ("parse", "memory", "answer", "limit")]
            assert metrics[step][f"hosts/tool_runs_p{p}"] == len(tools)
        # the owner is the pure function of (step, episode, processes): recompute it
        assert [r["process"] for r in records] == _owners(records, 2, step)


LOOKUP_SFT, LOOKUP_GRPO = 20, 2  # 20 SFT steps: the protocol (lookup, answer) is learnt, the value not
LOOKUP_ARGS = [
    "model.overrides={vocab_size: 32, initializer_range: 0.1}",
    f"sft.steps={LOOKUP_SFT}",
    "sft.batch_size=16",
    "sft.optim.lr=1e-2",
    f"steps={LOOKUP_GRPO}",
    "eval_at_end=false",
    "rollout.prompts_per_step=2",
    "rollout.group_size=4",
    "rollout.batch_rows=8",
    "rollout.max_seq_len=64",
    "optim.lr=3e-3",
    "optim.warmup_steps=0",  # the first GRPO step changes the weights the second one samples
    "mesh.fsdp=2",
    "mesh.tensor=2",
    "save_records=true",
    "checkpoint.every_steps=1000",
    "checkpoint.async_save=false",
]


# each step's records packed into rows of 128 tokens; "padded": one record per row (a one-token budget)
PACKED = ["grpo.row_tokens=128", "sft.row_tokens=128"]
LAYOUTS = {
    "padded": ["grpo.row_tokens=1", "sft.row_tokens=1"],
    "packed": PACKED,
    # streaming rollouts on packed rows: step 2's episodes start during step 1 and finish
    # under the updated weights; records bit for bit: the default host schedule runs tool turns
    # between segments
    "streaming": ["rollout.max_staleness=1", *PACKED],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_lookup_grpo_steps_with_tools_on_two_processes_match_one(pod, solo, layout):
    one, two = solo / f"lookup-{layout}", pod / f"lookup-{layout}"
    args = [*LOOKUP_ARGS, *LAYOUTS[layout]]
    a, b = _steps(one), _steps(two)
    if "grpo.row_tokens=128" in args:  # several records to a row: fewer rows than records, mostly real
        grpo = b[LOOKUP_SFT + 1]
        assert grpo["rows"] < grpo["records"] and 0 < grpo["useful_token_share"] <= 1
    if layout == "streaming":  # the first step trains on fresh tokens, the second on some one update old
        assert [b[LOOKUP_SFT + k]["staleness_max"] for k in (1, 2)] == [0.0, 1.0]
        last = [r["versions"] for r in _records(two, LOOKUP_SFT + 2)]
        assert last == [r["versions"] for r in _records(one, LOOKUP_SFT + 2)]
        # some of step 2's tokens were sampled before step 1's update (policy version 0): one update old
        assert min(v for versions in last for v in versions if v >= 0) == 0
    assert sorted(a) == sorted(b) == list(range(1, LOOKUP_SFT + LOOKUP_GRPO + 1))
    for step in a:
        _assert_same_metrics(a[step], b[step])
    for step in range(LOOKUP_SFT + 1, LOOKUP_SFT + LOOKUP_GRPO + 1):
        assert b[step]["loss"] != 0 and b[step]["grad_norm"] > 0.01  # the update is not a no-op
        ra, rb = _records(one, step), _records(two, step)
        assert [r["episode"] for r in ra] == [r["episode"] for r in rb] == list(range(8))
        _assert_same_records(ra, rb)
        # each process drove its own groups (a group on one process), by the pure owner function
        assert [r["process"] for r in rb] == _owners(rb, 4, step)
        assert {r["process"] for r in rb} == {0, 1}
        # lookups each episode ran where it was driven (its own count) are the records' calls there:
        # every tool ran once in the cluster, none on both processes, and some on each
        for p in (0, 1):
            calls = [c for r in rb if r["process"] == p for c in r["calls"]]
            assert b[step][f"hosts/tool_runs_p{p}"] == calls.count("lookup") > 0
            assert b[step][f"hosts/answered_p{p}"] == b[step][f"hosts/tool_calls_p{p}"] == len(calls)
    # rewards differ across the step's records (not all equal), so advantages are not all zero
    rewards = [r["reward"] for step in (LOOKUP_SFT + 1, LOOKUP_SFT + 2) for r in _records(two, step)]
    assert 0 < sum(rewards) < len(rewards)


# (overrides, devices per process co-located, rollout devices per process when split)
SPLIT_CASES = {
    "synchronous": (PACKED, 2, 2),  # its co-located side is the pod's lookup-packed job
    # Step 2 decodes during step 1's update: on the split placement in a second thread, at once.
    # One device per side on each process: XLA:CPU's cross-process (gloo) collectives deadlock when
    # two programs with several local devices each run at once (docs/guides/streaming.md).
    "decode-during-update": (
        [
            "rollout.max_staleness=1",
            "rollout.decode_during_update=true",
            "mesh.tensor=1",
        ],
        1,
        1,
    ),
}


# Cases whose side in a launch of its own starts from the pod's co-located SFT checkpoint: its SFT
# steps on the split placement are the other case's (the pod's split side against its own launch).
FROM_SFT = {"synchronous"}


def _split_runs(case: str) -> dict[str, tuple[list[str], int]]:
    """The co-located and the split run of a case: {side: (overrides, devices per process)}."""
    overrides, devices, rollout_devices = SPLIT_CASES[case]
    split = [*overrides, f"mesh.rollout_devices={rollout_devices}"]
    return {"co": (overrides, devices), "split": (split, devices + rollout_devices)}


def _pod_job(case: str, side: str) -> str:
    """The pod's job of a side on 2 devices per process: the lookup layout it is, if it is one."""
    overrides = _split_runs(case)[side][0]
    same = [f"lookup-{layout}" for layout in sorted(LAYOUTS) if LAYOUTS[layout] == overrides]
    return same[0] if same else f"split-{case}-{side}"


@pytest.mark.parametrize("case", sorted(SPLIT_CASES))
def test_the_split_placement_gives_the_co_located_records(shared, pod, tmp_path, case):
    """`mesh.rollout_devices` on 2 processes against the co-located run of the same layout (fsdp 2 x
    tensor 2 on 2 x (2 + 2) devices against 2 x 2, packed rows; decoding during the update, fsdp 2 on
    2 x (1 + 1) against 2 x 1): the same records, token versions included, and per-step metrics,
    synchronous and decoding during the update at S = 1 (the split run decodes while it trains,
    each thread agreeing over its own devices; the co-located one decodes after the update), with
    the synchronous host (the deterministic schedule); the weight hand-over's check ran on both
    processes. The side on the pod's 2 devices per process is the pod's job; the other launches
    (FROM_SFT: from the pod side's SFT checkpoint, its GRPO steps compared)."""
    _, cache = shared
    dirs, logs = {}, {}
    for side, (overrides, devices) in _split_runs(case).items():
        if devices == 2:
            dirs[side], logs[side] = pod / _pod_job(case, side), (pod / "pod.log", _pod_job(case, side))
            continue
        job = _lookup(side, tmp_path, overrides)
        if case in FROM_SFT:  # the pod's side as it was after SFT, then its GRPO steps
            last = LOOKUP_SFT + LOOKUP_GRPO
            shutil.copytree(pod / _pod_job(case, "co") / "checkpoints", tmp_path / side / "checkpoints")
            shutil.rmtree(tmp_path / side / "checkpoints" / str(last))
            job["argv"].append("--resume")
        _jobs(tmp_path, side, [job], cache, 2, devices)
        dirs[side], logs[side] = tmp_path / side, (tmp_path / f"{side}.log", side)
    co, split = dirs["co"], dirs["split"]
    output = _job_output(*logs["split"])
    assert all(f"[{p}] weight hand-over checked" in output for p in (0, 1))
    a, b = _steps(co), _steps(split)
    first = LOOKUP_SFT + 1 if case in FROM_SFT else 1
    assert sorted(a)[first - 1 :] == sorted(b) == list(range(first, LOOKUP_SFT + LOOKUP_GRPO + 1))
    for step in b:
        _assert_same_metrics(a[step], b[step])
    during = case == "decode-during-update"
    assert [b[LOOKUP_SFT + k].get("staleness_max", 0.0) for k in (1, 2)] == [0.0, float(during)]
    # the second step's batch was decoded during the first step's update
    assert ("decode_ahead_time_s" in b[LOOKUP_SFT + 1]) is during
    for step in range(LOOKUP_SFT + 1, LOOKUP_SFT + LOOKUP_GRPO + 1):
        ra, rb = _records(co, step), _records(split, step)
        _assert_same_records(ra, rb)
        assert [r["versions"] for r in ra] == [r["versions"] for r in rb]
    if during:  # every token of step 2 sampled by the weights before step 1's update
        assert {v for r in rb for v in r["versions"] if v >= 0} == {0}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_two_process_checkpoint_resumes_on_any_count(runs, pod, solo, processes):
    """The 2-process run's SFT checkpoints resumed on 1 and on 2 processes: its GRPO step redone
    with the same metrics and records (the sampler's log-probs: the restored weights)."""
    _, two, _, _ = runs
    resumed = (solo if processes == 1 else pod) / "resumed"
    last = SFT_STEPS + GRPO_STEPS
    assert sorted(_steps(resumed)) == [last]  # it started after the SFT phase
    _assert_same_metrics(_steps(two)[last], _steps(resumed)[last], trained=False)
    _assert_same_records(_records(two, last), _records(resumed, last))


def test_hf_export_on_two_processes_is_byte_identical_to_one(pod, solo):
    one, two = solo / "export", pod / "export"
    output = _job_output(pod / "pod.log", "export").splitlines()
    assert [line.split()[0] for line in output if " exported " in line] == ["[0]"]
    files = sorted(p.name for p in one.iterdir())
    assert "model-00001-of-00001.safetensors" in files and "tokenizer.json" in files
    assert sorted(p.name for p in two.iterdir()) == files
    for name in files:
        assert (two / name).read_bytes() == (one / name).read_bytes(), name


def _start_cluster(args: list[str], env: dict) -> tuple[subprocess.Popen, dict[int, int]]:
    """A cluster in the background, and its processes' pids (the launcher prints them first)."""
    launcher = [sys.executable, str(ROOT / "launch" / "cluster.py"), "--processes", "2", "--grace", "20"]
    script = str(ROOT / "launch" / "train.py")
    cmd = [*launcher, "--devices-per-process", "2", "--", script, *args]
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids: dict[int, int] = {}
    while len(pids) < 2:
        line = job.stdout.readline()
        assert line, "the launcher ended before starting its processes"
        if line.startswith("[cluster] process "):
            index, pid = line.split()[2].rstrip(":"), line.split()[-1]
            pids[int(index)] = int(pid)
    return job, pids


def _wait_for_step(ckpt: Path, step: int, job: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not (ckpt / str(step)).is_dir():
        assert job.poll() is None and time.monotonic() < deadline, "no checkpoint came"
        time.sleep(0.2)


SFT_ONLY = ["mode=sft_only", "sft.steps=40", "checkpoint.every_steps=1", "checkpoint.async_save=false"]


@pytest.fixture(scope="module")
def killed(shared, pod) -> dict:
    """An SFT-only pod job killed (-9) on one process once it has committed its step-2 checkpoint:
    its output, exit status, seconds from the kill to its end, and the arguments that resume it (a
    job of the solo launch)."""
    data, cache = shared
    out = data.parent / "killed"
    args = [*_args(data, out), *SFT_ONLY]
    job, pids = _start_cluster(args, _cluster_env(cache))
    _wait_for_step(out / "checkpoints", 2, job)
    os.kill(pids[1], signal.SIGKILL)
    t0 = time.monotonic()
    output, _ = job.communicate(timeout=300)
    seconds = time.monotonic() - t0
    resume = [*args, "--resume", "checkpoint.every_steps=100"]  # its remaining steps, saved once
    return {"output": output, "status": job.returncode, "seconds": seconds, "resume": resume}


def test_sigterm_to_one_process_mid_rollout_stops_both_in_that_rollout(pod):
    """Process 1 SIGTERM'd as the second GRPO rollout starts (the pod's last job): the stop is agreed
    inside that rollout, not at the step's end, and both processes exit 143."""
    output, out = _job_output(pod / "pod.log", "preempted"), pod / "preempted"
    assert "[cluster] exit statuses [143, 143]" in (pod / "pod.log").read_text()
    last = SFT_STEPS + 1  # the first GRPO step completed; the second was given up in its rollout
    assert f"[0] preempted during the rollout of step {last + 1}: saved step {last}" in output
    assert all(f"[{p}] preempted at step {last};" in output for p in (0, 1)), output[-3000:]
    saved = sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    assert saved[-1] == last  # no schedule had step 3 due: the stop saved it
    assert sorted(_steps(out)) == list(range(1, last + 1))


def test_kill_9_brings_the_job_down_and_it_resumes(killed, solo):
    assert killed["seconds"] < 120
    assert killed["status"] != 0, killed["output"][-3000:]
    statuses = killed["output"].split("[cluster] exit statuses ")[1].splitlines()[0]
    assert statuses.startswith("[") and "137" in statuses
    resumed = _job_output(solo / "solo.log", "killed-resumed")
    assert "resuming from step" in resumed, resumed[-3000:]


def test_a_himap_step_on_two_processes_matches_one(pod, solo):
    one, two = solo / "himap", pod / "himap"
    _assert_same_metrics(_steps(one)[1], _steps(two)[1], trained=False)
    ra, rb = _records(one, 1), _records(two, 1)
    assert [(r["episode"], r["stream"]) for r in ra] == [(r["episode"], r["stream"]) for r in rb]
    assert {r["process"] for r in rb} == {0, 1}  # both processes drove a team
    assert _steps(two)[1]["rollout/reused_tokens"] > 0  # a team's streams share prefixes
    _assert_same_records(ra, rb)


# The pod jobs whose GRPO steps' cross-process calls are recorded, and their GRPO step counts: the
# travel task's step, two streaming lookup steps with tools, a HiMAP team's step.
RECORDED = {"two": GRPO_STEPS, "lookup-streaming": LOOKUP_GRPO, "himap": 1}


def test_a_grpo_step_talks_across_processes_only_where_allowed(pod):
    """Every cross-process call of those steps, by call site (tests/b2tjax/collectives.py): the
    sites of ALLOWED only, the step's one agreement once a step, and each process the same calls
    (a collective that one process skips or makes from elsewhere hangs the pod)."""
    for job, steps in RECORDED.items():
        logs = [pod / f"{job}.collectives.p{p}" for p in (0, 1)]
        calls = [[tuple(c) for c in json.loads(log.read_text())] for log in logs]
        seen = Counter(calls[0])
        listing = "\n".join(f"{n} x {site} ({primitive})" for (site, primitive), n in seen.items())
        print(f"{job}: the cross-process calls of {steps} GRPO step(s) on process 0\n{listing}")
        assert seen == Counter(calls[1]), job
        assert {site for site, _ in calls[0]} <= set(ALLOWED), f"{job}: a call outside ALLOWED\n{listing}"
        assert Counter(site for site, _ in calls[0])["b2tjax/run/agreement.py:agree_step"] == steps, job


def test_rows_that_do_not_split_over_the_processes_are_refused_at_start():
    from b2tjax.errors import UserError
    from b2tjax.run.mesh import check_rows_split

    mesh = {"data": 1, "fsdp": 2, "tensor": 2}
    check_rows_split(4, mesh, processes=2)
    check_rows_split(3, mesh, processes=1)  # one process: an uneven count only shards less
    with pytest.raises(UserError, match=r"rollout.batch_rows=3 must be a multiple of .* \(2\)"):
        check_rows_split(3, mesh, processes=2)
