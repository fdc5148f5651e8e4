"""A pod run on a local cluster: the tiny recipe on 2 processes x 2 devices (launch/cluster.py; mesh
fsdp across the processes, tensor within each) against 1 process x 4 devices, same mesh.

One pair of short runs (2 SFT + 2 GRPO steps, one 8-token turn per episode, two prompts of two
episodes per step so both processes drive a group) carries every assertion, to fit the CI budget:
the same per-step metrics within 1e-5, the same episode records (ids and masks identical,
log-probs within 1e-5), each episode driven by exactly one process, the one
`rollout.hosts.episode_owner` names. Then the 2-process checkpoint resumes on 1 process and on 2
processes with the same next-step metrics.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from b2tjax.metrics import read_metrics
from rollout.hosts import episode_owner

ROOT = Path(__file__).resolve().parents[1]
SFT_STEPS, GRPO_STEPS = 2, 2
TIMING = {"time", "tokens_per_s", "step_time_s", "rollout_time_s"}


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
        "rollout.prompts_per_step=2",
        "rollout.group_size=2",
        "mesh.fsdp=2",
        "mesh.tensor=2",
        "save_records=true",
        "checkpoint.every_steps=1",
        "checkpoint.keep=10",
        "checkpoint.async_save=false",
    ]


def _env(cache: Path, devices: int | None = None) -> dict:
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONUNBUFFERED="1",
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    if devices is not None:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def _run(cmd: list[str], env: dict, timeout: int = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done


def _one(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return _run([sys.executable, str(ROOT / "launch" / "train.py"), *args], env)


def _cluster(args: list[str], env: dict) -> subprocess.CompletedProcess:
    launcher = [sys.executable, str(ROOT / "launch" / "cluster.py"), "--processes", "2"]
    script = str(ROOT / "launch" / "train.py")
    return _run([*launcher, "--devices-per-process", "2", "--", script, *args], env)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> tuple[Path, Path]:
    """(DATA, compilation cache) of the module's runs; the first cluster run builds DATA."""
    root = tmp_path_factory.mktemp("multihost")
    return root / "DATA", root / "cache"


@pytest.fixture(scope="module")
def runs(shared):
    """(one, two, data, cache): run directories of 1 x 4 and 2 x 2 devices over the same DATA."""
    data, cache = shared
    root = data.parent
    _cluster(_args(data, root / "two"), _env(cache))  # process 0 builds DATA, process 1 waits for it
    _one(_args(data, root / "one"), _env(cache, devices=4))
    return root / "one", root / "two", data, cache


def _steps(out: Path) -> dict[int, dict]:
    return read_metrics(out / "metrics.jsonl")


def _assert_same_metrics(a: dict, b: dict) -> None:
    shared = sorted(k for k in (set(a) & set(b)) - TIMING if not k.startswith("phase_s/"))  # wall times
    assert "loss" in shared and "grad_norm" in shared
    for key in shared:
        assert a[key] == pytest.approx(b[key], abs=1e-5, rel=1e-5), key


def _records(out: Path, step: int) -> list[dict]:
    lines = (out / "records" / f"step-{step}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_two_processes_match_one(runs):
    one, two, _, _ = runs
    a, b = _steps(one), _steps(two)
    assert sorted(a) == sorted(b) == list(range(1, SFT_STEPS + GRPO_STEPS + 1))
    for step in a:
        _assert_same_metrics(a[step], b[step])
    # the GRPO metrics include the rollout's reward and the trained tokens
    assert {"reward", "response_tokens", "loss", "grad_norm"} <= set(b[SFT_STEPS + 1])
    for step in range(SFT_STEPS + 1, SFT_STEPS + GRPO_STEPS + 1):
        ra, rb = _records(one, step), _records(two, step)
        assert [r["episode"] for r in ra] == [r["episode"] for r in rb] == [0, 1, 2, 3]
        for x, y in zip(ra, rb):
            assert x["ids"] == y["ids"] and x["loss_mask"] == y["loss_mask"]
            np.testing.assert_allclose(x["logprobs"], y["logprobs"], atol=1e-5)
            assert x["reward"] == y["reward"]


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
        calls = [metrics[step][f"hosts/tool_calls_p{p}"] for p in (0, 1)]
        assert sum(calls) == sum(len(r["calls"]) for r in records)
        # the owner is the pure function of (step, episode, processes): recompute it
        step_seed = int(np.random.default_rng([0, step]).integers(2**31 - 1))  # Trainer._step_seed
        expected = [episode_owner(r["episode"], 2, 2, step_seed) for r in records]
        assert [r["process"] for r in records] == expected


@pytest.mark.parametrize("processes", [1, 2])
def test_a_two_process_checkpoint_resumes_on_any_count(runs, tmp_path, processes):
    one, two, data, cache = runs
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    # the run directory as it was after step SFT_STEPS + 1 (its last step is then redone)
    import shutil

    shutil.copytree(two / "checkpoints", resumed / "checkpoints")
    for step in range(SFT_STEPS + 2, SFT_STEPS + GRPO_STEPS + 1):
        shutil.rmtree(resumed / "checkpoints" / str(step))
    args = [*_args(data, resumed), "--resume"]
    if processes == 1:
        _one(args, _env(cache, devices=4))
    else:
        _cluster(args, _env(cache))
    last = SFT_STEPS + GRPO_STEPS
    _assert_same_metrics(_steps(two)[last], _steps(resumed)[last])


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


def _sft_job_past_step_2(runs, out: Path) -> tuple[subprocess.Popen, dict[int, int], list[str]]:
    """An SFT-only cluster job that has committed its step-2 checkpoint: (job, pids, its args)."""
    _, _, data, cache = runs
    args = [*_args(data, out), *SFT_ONLY]
    job, pids = _start_cluster(args, _env(cache))
    _wait_for_step(out / "checkpoints", 2, job)
    return job, pids, args


def test_sigterm_to_one_process_stops_both_at_the_same_step(runs, tmp_path):
    out = tmp_path / "preempted"
    job, pids, _ = _sft_job_past_step_2(runs, out)
    os.kill(pids[1], signal.SIGTERM)  # one host is preempted
    output, _ = job.communicate(timeout=300)
    assert job.returncode == 143, output[-3000:]
    assert "[cluster] exit statuses [143, 143]" in output
    lines = [line for line in output.splitlines() if "preempted at step" in line]
    saved = {line.split()[0]: line.split("preempted at step ")[1].split(";")[0] for line in lines}
    assert set(saved) == {"[0]", "[1]"} and len(set(saved.values())) == 1, saved
    assert (out / "checkpoints" / saved["[0]"]).is_dir()


def test_kill_9_brings_the_job_down_and_it_resumes(runs, tmp_path):
    job, pids, args = _sft_job_past_step_2(runs, tmp_path / "killed")
    os.kill(pids[1], signal.SIGKILL)
    t0 = time.monotonic()
    output, _ = job.communicate(timeout=300)
    assert time.monotonic() - t0 < 120
    assert job.returncode != 0, output[-3000:]
    statuses = output.split("[cluster] exit statuses ")[1].splitlines()[0]
    assert statuses.startswith("[") and "137" in statuses
    resumed = _one([*args, "--resume"], _env(runs[3], devices=4))
    assert "resuming from step" in resumed.stdout


@pytest.mark.slow
@pytest.mark.skip(
    reason=(
        "fails in the merged suite (its 1-process run wrote no records/step-1.jsonl); "
        "passed on the multihost branch before the last merges: open in issue 21"
    )
)
def test_a_himap_step_on_two_processes_matches_one(shared, tmp_path):
    data, cache = shared
    himap = [
        "--config",
        str(ROOT / "configs" / "himap_tiny_cpu.yaml"),
        "--no-progress",
        f"data.data_dir={data}",
        "steps=1",
        "eval_at_end=false",
        "himap.max_rounds=1",  # no scripted plan passes: no SFT, straight to one GRPO step
        "rollout.prompts_per_step=2",
        "mesh.fsdp=2",
        "mesh.tensor=2",
        "save_records=true",
    ]
    _cluster([*himap, "--out", str(tmp_path / "two")], _env(cache))
    _one([*himap, "--out", str(tmp_path / "one")], _env(cache, devices=4))
    _assert_same_metrics(_steps(tmp_path / "one")[1], _steps(tmp_path / "two")[1])
    ra, rb = _records(tmp_path / "one", 1), _records(tmp_path / "two", 1)
    assert [(r["episode"], r["stream"]) for r in ra] == [(r["episode"], r["stream"]) for r in rb]
    assert {r["process"] for r in rb} == {0, 1}  # both processes drove a team
    for x, y in zip(ra, rb):
        assert x["ids"] == y["ids"] and x["loss_mask"] == y["loss_mask"] and x["reward"] == y["reward"]
        np.testing.assert_allclose(x["logprobs"], y["logprobs"], atol=1e-5)
