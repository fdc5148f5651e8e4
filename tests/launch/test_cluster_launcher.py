"""launch/cluster.py: N processes with the multi-node environment, prefixed output, the worst exit
status, and a failed process bringing the others down within the grace period (no JAX needed:
the processes here are small Python scripts that read the same environment a launch script does)."""

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts local clusters

ROOT = Path(__file__).resolve().parents[2]


def _launch(tmp_path: Path, body: str, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    cmd = [sys.executable, str(ROOT / "launch" / "cluster.py"), "--processes", "2", *extra, "--", str(script)]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - t0


def test_environment_prefixes_logs_and_worst_status(tmp_path):
    body = """
        import os, sys
        i = int(os.environ["JAX_PROCESS_ID"])
        print("id", i, "of", os.environ["JAX_NUM_PROCESSES"], os.environ["JAX_COORDINATOR_ADDRESS"],
              os.environ["XLA_FLAGS"].split()[-1])
        sys.exit(3 if i == 1 else 0)
    """
    done, _ = _launch(tmp_path, body, "--devices-per-process", "2", "--log-dir", str(tmp_path / "logs"))
    assert done.returncode == 3, done.stdout
    lines = done.stdout.splitlines()
    for i in (0, 1):
        mine = [line for line in lines if line.startswith(f"[{i}] id {i} of 2 127.0.0.1:")]
        assert len(mine) == 1 and mine[0].endswith("--xla_force_host_platform_device_count=2")
        assert (tmp_path / "logs" / f"process-{i}.log").read_text().startswith(f"id {i} of 2")
    assert "[cluster] exit statuses [0, 3]" in done.stdout


def test_a_dead_process_stops_the_others_within_the_grace(tmp_path):
    # process 0 would wait forever (as on a collective whose peer died); process 1 is killed
    body = """
        import os, signal, time
        if os.environ["JAX_PROCESS_ID"] == "1":
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # even a process that ignores SIGTERM goes
        time.sleep(600)
    """
    done, elapsed = _launch(tmp_path, body, "--grace", "2")
    assert done.returncode == 137  # 128 + SIGKILL: the worst status
    assert elapsed < 30
    assert "a process failed; stopping the others" in done.stdout


def test_prints_pod_and_slurm_commands(tmp_path):
    launcher = str(ROOT / "launch" / "cluster.py")
    cmd = [sys.executable, launcher, "--print-only", "--", "launch/train.py", "steps=3"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "--worker=all" in out and "launch/train.py steps=3 distributed=true" in out
    assert "srun --nodes=$NODES --ntasks-per-node=1 python launch/train.py steps=3 distributed=true" in out


def test_the_export_is_asked_for_distributed_by_its_flag():
    from launch.cluster import cluster_commands

    out = cluster_commands("launch/export_hf.py", ["--checkpoint", "runs/x/checkpoints"])
    srun = [line for line in out.splitlines() if line.startswith("srun ")]
    export = "python launch/export_hf.py --checkpoint runs/x/checkpoints --distributed"
    assert srun == [f"srun --nodes=$NODES --ntasks-per-node=1 {export}"]
    assert "distributed=true" not in out  # export_hf.py's argparse would refuse it
