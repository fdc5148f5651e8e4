"""launch/cluster.py: N processes with the multi-node environment, prefixed output, the root
cause's exit status, signals forwarded whatever the launcher inherited, and a bounded shutdown once
one process has ended (no JAX needed: the processes here are small Python scripts that read the
same environment a launch script does), and the coordinator bound to its address only (JAX)."""

import ast
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.launch.test_cli_errors import ENV, assert_one_clear_line

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
    assert "process(es) [0] still running 2s on; stopping them" in done.stdout
    assert "process 1 failed first (exit status 137)" in done.stdout


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


def test_the_printed_pod_commands_write_to_shared_storage():
    """A relative --out is each host's own disk on a pod; the printed commands move it under the
    shared mount the TPU guide names, and leave an absolute one as it is."""
    from launch.cluster import cluster_commands

    for args, want in (
        (["--out", "runs/pod2", "mesh.fsdp=2"], "--out /mnt/shared/runs/pod2 mesh.fsdp=2"),
        (["--out=runs/pod2"], "--out=/mnt/shared/runs/pod2"),
        (["--out", "/nfs/run"], "--out /nfs/run"),
    ):
        jobs = [line for line in cluster_commands("launch/train.py", args).splitlines() if "python " in line]
        assert len(jobs) == 2 and all(f"launch/train.py {want} distributed=true" in job for job in jobs)


def test_a_finished_process_bounds_the_wait_for_a_hung_one(tmp_path):
    # process 0 exits 0; process 1 hangs ignoring SIGTERM (as in a shutdown barrier whose peer left)
    body = """
        import os, signal, sys, time
        if os.environ["JAX_PROCESS_ID"] == "0":
            sys.exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
    """
    done, elapsed = _launch(tmp_path, body, "--grace", "1")
    assert done.returncode == 137 and elapsed < 20, done.stdout
    assert "process(es) [1] still running 1s on; stopping them" in done.stdout
    assert "[cluster] exit statuses [0, 137]" in done.stdout


def test_the_root_cause_is_reported_not_the_peer_that_was_stopped(tmp_path):
    body = """
        import os, signal, sys, time
        if os.environ["JAX_PROCESS_ID"] == "1":
            print("error: the coordinator port 1 on 127.0.0.1 is taken", flush=True)
            sys.exit(2)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a preempted save, as train.py's
        time.sleep(60)
    """
    done, _ = _launch(tmp_path, body, "--grace", "1")
    assert done.returncode == 2, done.stdout
    cause = "[cluster] process 1 failed first (exit status 2): error: the coordinator port 1 on 127.0.0.1"
    assert cause in done.stdout and "[cluster] exit statuses [143, 2]" in done.stdout


def test_sigint_is_forwarded_even_when_the_launcher_inherited_it_ignored(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    cmd = [sys.executable, str(ROOT / "launch" / "cluster.py"), "--processes", "2", "--grace", "60"]
    ignore = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731 - as `nohup ... &` does
    launcher = subprocess.Popen(
        [*cmd, "--", str(script)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=ignore,
        start_new_session=True,
    )
    try:
        ready = 0
        while ready < 2:
            line = launcher.stdout.readline()
            assert line, "the launcher ended before its processes were ready"
            ready += line.rstrip().endswith("] ready")
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=30) == 128 + signal.SIGINT  # each process died of the SIGINT
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    assert "exit statuses [130, 130]" in launcher.stdout.read()


def _listening(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net shows them) that listen on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if int(hex_port, 16) == port and state == "0A":  # 0A: LISTEN
                found.add(address)
    return found


def _coordinator(port: int) -> subprocess.CompletedProcess:
    """One JAX process as launch scripts start it, reporting what listens on the coordinator port."""
    code = textwrap.dedent(
        f"""
        from b2tjax.cli.script import run_main
        from b2tjax.run.mesh import maybe_initialize_distributed
        from tests.launch.test_cluster_launcher import _listening

        def main(_argv):
            maybe_initialize_distributed(False)
            print("listening", sorted(_listening({port})), flush=True)
            return 0

        raise SystemExit(run_main(main))
        """
    )
    env = dict(ENV, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="1", JAX_PROCESS_ID="0")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_the_coordinator_binds_its_address_and_refuses_a_taken_port(tmp_path):
    from launch.cluster import free_port

    port = free_port()
    done = _coordinator(port)
    assert done.returncode == 0, done.stderr[-3000:]
    # 127.0.0.1 only (IPv4, or IPv4-mapped IPv6 as gRPC binds it), not [::] (every interface)
    listening = ast.literal_eval(done.stdout.split("listening ", 1)[1])
    assert listening and set(listening) <= {"0100007F", "0000000000000000FFFF00000100007F"}, listening
    with socket.socket() as other_job:  # a coordinator of another job: gRPC binds with SO_REUSEPORT
        other_job.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other_job.bind(("127.0.0.1", port))
        other_job.listen()
        assert_one_clear_line(_coordinator(port), f"coordinator port {port} on 127.0.0.1 is taken")
        script = tmp_path / "job.py"
        script.write_text("print('started')\n")
        cmd = [sys.executable, str(ROOT / "launch" / "cluster.py"), "--port", str(port), "--", str(script)]
        refused = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=60)
        assert_one_clear_line(refused, f"coordinator port {port} on 127.0.0.1 is taken")
        assert "started" not in refused.stdout
