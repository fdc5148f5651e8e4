"""Start N processes of a launch script on this machine as a stand-in pod (JAX multi-controller).

    python launch/cluster.py --processes 2 --devices-per-process 2 -- launch/train.py key=value ...

Each process gets the environment multi-node GPU uses (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
JAX_PROCESS_ID), the CPU backend with `--devices-per-process` devices, and its output prefixed with
`[i] ` (and, with --log-dir, written to process-i.log). The launcher exits with the status of the
worst process. Why a grace period: when one process dies, the others may be blocked in a collective
that never completes; after `--grace` seconds they are sent SIGTERM, and SIGKILL `--grace` seconds
later, so the job never hangs. A SIGTERM/SIGINT to the launcher is forwarded to every process (a
preempted job saves and exits 143). The equivalent commands for real clusters are printed first.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=2, help="JAX processes (stand-in hosts)")
    parser.add_argument("--devices-per-process", type=int, default=1, help="CPU devices per process")
    parser.add_argument("--port", type=int, default=0, help="coordinator port (default: a free one)")
    parser.add_argument("--log-dir", type=Path, default=None, help="also write process-i.log files here")
    parser.add_argument("--grace", type=float, default=30.0, help="seconds before the others are stopped")
    parser.add_argument("--print-only", action="store_true", help="print the cluster commands and exit")
    parser.add_argument("script", help="the launch script, then its arguments (after --)")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.processes < 1 or args.devices_per_process < 1:
        parser.error("--processes and --devices-per-process must be >= 1")
    return args


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_env(index: int, count: int, devices: int, port: int) -> dict[str, str]:
    """The environment of process `index`: the multi-node GPU variables and a CPU backend."""
    flags = os.environ.get("XLA_FLAGS", "")
    flags = " ".join(f for f in flags.split() if not f.startswith("--xla_force_host_platform_device_count"))
    return dict(
        os.environ,
        JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
        JAX_NUM_PROCESSES=str(count),
        JAX_PROCESS_ID=str(index),
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"{flags} --xla_force_host_platform_device_count={devices}".strip(),
        PYTHONUNBUFFERED="1",
    )


# How a launch script is told to call jax.distributed.initialize(): a config override for the
# training scripts, a command-line flag for the export (it takes no config).
DISTRIBUTED_ARG = {"export_hf.py": "--distributed"}


def cluster_commands(script: str, args: list[str]) -> str:
    """The same job on a TPU pod slice (every worker runs it; JAX finds its peers) and on SLURM
    (one task per node; jax.distributed.initialize() reads SLURM's variables, so the script is
    asked to call it: `distributed=true`, or `--distributed` for launch/export_hf.py)."""
    line = shlex.join(["python", script, *args, DISTRIBUTED_ARG.get(Path(script).name, "distributed=true")])
    remote = shlex.quote(f"cd b2tjax && {line}")
    return "\n".join(
        [
            "# TPU pod slice (one process per host):",
            f"gcloud compute tpus tpu-vm ssh $TPU --zone=$ZONE --worker=all --command={remote}",
            "# SLURM / multi-node GPU (one task per node):",
            f"srun --nodes=$NODES --ntasks-per-node=1 {line}",
        ]
    )


def exit_status(code: int) -> int:
    """A Popen return code as a shell exit status (killed by signal s: 128 + s)."""
    return 128 - code if code < 0 else code


def _pump(stream: IO[str], prefix: str, log: IO[str] | None, lock: threading.Lock) -> None:
    for line in stream:
        with lock:
            sys.stdout.write(prefix + line)
            sys.stdout.flush()
            if log is not None:
                log.write(line)
                log.flush()


class Cluster:
    """The running processes, their output pumps, and the shutdown rule."""

    def __init__(self, args: argparse.Namespace):
        self.args, self.lock = args, threading.Lock()
        port = args.port or free_port()
        self.procs: list[subprocess.Popen] = []
        self.pumps: list[threading.Thread] = []
        self.logs: list[IO[str]] = []
        if args.log_dir is not None:
            args.log_dir.mkdir(parents=True, exist_ok=True)
        for i in range(args.processes):
            env = process_env(i, args.processes, args.devices_per_process, port)
            proc = subprocess.Popen(
                [sys.executable, args.script, *args.args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # a signal to the launcher's group is forwarded, not duplicated
            )
            log = None
            if args.log_dir is not None:
                log = open(args.log_dir / f"process-{i}.log", "w")  # noqa: SIM115 (closed in wait)
                self.logs.append(log)
            pump = threading.Thread(target=_pump, args=(proc.stdout, f"[{i}] ", log, self.lock), daemon=True)
            pump.start()
            self.procs.append(proc)
            self.pumps.append(pump)
            self._say(f"process {i}: pid {proc.pid}")  # e.g. to preempt one host by hand

    def signal_all(self, sig: int) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(sig)

    def wait(self) -> int:
        """Wait for every process; once one has failed, stop the rest within 2 x grace seconds."""
        failed_at: float | None = None
        termed = False
        while any(p.poll() is None for p in self.procs):
            if failed_at is None and any(p.poll() not in (None, 0) for p in self.procs):
                failed_at = time.monotonic()
            if failed_at is not None:
                waited = time.monotonic() - failed_at
                if waited > 2 * self.args.grace:
                    self.signal_all(signal.SIGKILL)
                elif waited > self.args.grace and not termed:
                    self._say("a process failed; stopping the others")
                    self.signal_all(signal.SIGTERM)
                    termed = True
            time.sleep(0.2)
        for pump in self.pumps:
            pump.join(timeout=5)
        for log in self.logs:
            log.close()
        codes = [exit_status(p.returncode) for p in self.procs]
        self._say(f"exit statuses {codes}")
        return max(codes)

    def _say(self, text: str) -> None:
        with self.lock:
            print(f"[cluster] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]
    print(cluster_commands(args.script, args.args), flush=True)
    if args.print_only:
        return 0
    cluster = Cluster(args)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _frame: cluster.signal_all(s))
    return cluster.wait()


if __name__ == "__main__":
    sys.exit(main())
