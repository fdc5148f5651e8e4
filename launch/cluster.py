"""Start N processes of a launch script on this machine as a stand-in pod (JAX multi-controller).

    python launch/cluster.py --processes 2 --devices-per-process 2 -- launch/train.py key=value ...

Each process gets the environment multi-node GPU uses (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
JAX_PROCESS_ID), the CPU backend with `--devices-per-process` devices, and its output prefixed with
`[i] ` (and, with --log-dir, written to process-i.log). The coordinator listens on 127.0.0.1 only,
and a `--port` that something already holds is refused in one line before anything starts.

Shutdown is bounded: once one process has exited (whatever its status) or the launcher was sent
SIGTERM/SIGINT (forwarded to every process; a preempted job saves and exits 143), the others get
SIGTERM after `--grace` seconds and SIGKILL `--grace` seconds later, so the job never hangs on a
collective or a shutdown barrier whose peer is gone. The signal handlers are installed before the
processes start, so they inherit the default dispositions even when the launcher's were ignored
(`nohup ... &` ignores SIGINT). The launcher exits with the status of the root cause: the first
process that failed before the launcher stopped anyone, reported with its last output line;
otherwise the worst status. The equivalent commands for real clusters are printed first.
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

from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.script import run_main
from b2tjax.errors import UserError
from b2tjax.run.coordinator import port_problem
from models.fields import finite_float


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=2, help="JAX processes (stand-in hosts)")
    parser.add_argument("--devices-per-process", type=int, default=1, help="CPU devices per process")
    parser.add_argument("--port", type=int, default=0, help="coordinator port (default: a free one)")
    parser.add_argument("--log-dir", type=Path, default=None, help="also write process-i.log files here")
    parser.add_argument(
        "--grace", type=finite_float, default=30.0, help="seconds before the others are stopped"
    )
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


# Where the printed pod and SLURM commands put a relative --out: every host must write one shared
# directory (docs/guides/tpu-pod.md), and a relative path is each host's own disk there.
SHARED = "/mnt/shared"


def shared_out(args: list[str]) -> list[str]:
    """`args` with a relative `--out PATH` (or `--out=PATH`) moved under SHARED."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--out" and i + 1 < len(out) and not out[i + 1].startswith("/"):
            out[i + 1] = f"{SHARED}/{out[i + 1]}"
        elif arg.startswith("--out=") and not arg[len("--out=") :].startswith("/"):
            out[i] = f"--out={SHARED}/{arg[len('--out=') :]}"
    return out


def cluster_commands(script: str, args: list[str]) -> str:
    """The same job on a TPU pod slice (every worker runs it; JAX finds its peers) and on SLURM
    (one task per node; jax.distributed.initialize() reads SLURM's variables, so the script is
    asked to call it: `distributed=true`, or `--distributed` for launch/export_hf.py), its --out
    on shared storage (`shared_out`)."""
    distributed = DISTRIBUTED_ARG.get(Path(script).name, "distributed=true")
    line = shlex.join(["python", script, *shared_out(args), distributed])
    remote = shlex.quote(f"cd b2tjax && {line}")
    return "\n".join(
        [
            f"# --out on storage every host mounts ({SHARED} stands for yours: docs/guides/tpu-pod.md)",
            "# TPU pod slice (one process per host):",
            f"gcloud compute tpus tpu-vm ssh $TPU --zone=$ZONE --worker=all --command={remote}",
            "# SLURM / multi-node GPU (one task per node):",
            f"srun --nodes=$NODES --ntasks-per-node=1 {line}",
        ]
    )


def exit_status(code: int) -> int:
    """A Popen return code as a shell exit status (killed by signal s: 128 + s)."""
    return 128 - code if code < 0 else code


class Cluster:
    """The running processes, their output pumps, and the shutdown rule."""

    def __init__(self, args: argparse.Namespace):
        self.args, self.lock = args, threading.Lock()
        self.procs: list[subprocess.Popen] = []
        self.pumps: list[threading.Thread] = []
        self.logs: list[IO[str]] = []
        self.last_line: list[str] = []
        self.exits: list[tuple[int, int, float]] = []  # (process, status, when) in exit order
        self.stopping_at: float | None = None  # when the launcher first signalled the processes
        self.ended_at: float | None = None  # when the first process exited

    def start(self) -> None:
        port = self.args.port or free_port()
        if self.args.log_dir is not None:
            self.args.log_dir.mkdir(parents=True, exist_ok=True)
        for i in range(self.args.processes):
            env = process_env(i, self.args.processes, self.args.devices_per_process, port)
            proc = subprocess.Popen(
                [sys.executable, self.args.script, *self.args.args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # a signal to the launcher's group is forwarded, not duplicated
            )
            # listed before its output is pumped: a signal sent once its first line shows reaches it
            self.procs.append(proc)
            log = None
            if self.args.log_dir is not None:
                log = open(self.args.log_dir / f"process-{i}.log", "w")  # noqa: SIM115 (closed in wait)
                self.logs.append(log)
            self.last_line.append("")
            pump = threading.Thread(target=self._pump, args=(i, proc.stdout, log), daemon=True)
            pump.start()
            self.pumps.append(pump)
            self._say(f"process {i}: pid {proc.pid}")  # e.g. to preempt one host by hand

    def _pump(self, index: int, stream: IO[str], log: IO[str] | None) -> None:
        for line in stream:
            with self.lock:
                sys.stdout.write(f"[{index}] {line}")
                sys.stdout.flush()
                if line.strip():
                    self.last_line[index] = line.strip()
                if log is not None:
                    log.write(line)
                    log.flush()

    def signal_all(self, sig: int) -> None:
        """Send `sig` to every running process (also the launcher's handler: forwarding)."""
        if self.stopping_at is None:
            self.stopping_at = time.monotonic()
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(sig)

    def _note_exits(self) -> None:
        done = {i for i, _, _ in self.exits}
        for i, proc in enumerate(self.procs):
            if i not in done and proc.poll() is not None:
                self.exits.append((i, exit_status(proc.returncode), time.monotonic()))
                if self.ended_at is None:
                    self.ended_at = time.monotonic()

    def wait(self) -> int:
        """Wait for every process; from the first exit or forwarded signal on, stop the rest
        within 2 x grace seconds (SIGTERM, then SIGKILL)."""
        termed = False
        while any(p.poll() is None for p in self.procs):
            self._note_exits()
            starts = [t for t in (self.ended_at, self.stopping_at) if t is not None]
            waited = time.monotonic() - min(starts) if starts else 0.0
            if waited > 2 * self.args.grace:
                self.signal_all(signal.SIGKILL)
            elif waited > self.args.grace and not termed:
                running = [i for i, p in enumerate(self.procs) if p.poll() is None]
                self._say(f"process(es) {running} still running {self.args.grace:g}s on; stopping them")
                self.signal_all(signal.SIGTERM)
                termed = True
            time.sleep(0.1)
        self._note_exits()
        for pump in self.pumps:
            pump.join(timeout=5)
        for log in self.logs:
            log.close()
        return self._verdict()

    def _verdict(self) -> int:
        """The root cause's status (the first failure before the launcher signalled), reported
        with its last line; else the worst status."""
        codes = [exit_status(p.returncode) for p in self.procs]
        self._say(f"exit statuses {codes}")
        # a process that exited before the launcher signalled anyone failed on its own
        stop = self.stopping_at if self.stopping_at is not None else float("inf")
        cause = next(((i, code) for i, code, at in self.exits if code != 0 and at <= stop), None)
        if cause is None:
            return max(codes)
        i, code = cause
        self._say(f"process {i} failed first (exit status {code}): {self.last_line[i] or '(no output)'}")
        return code

    def _say(self, text: str) -> None:
        with self.lock:
            print(f"[cluster] {text}", flush=True)


PATHS = Paths(outputs=("--log-dir",), inputs=("script",), dirs=True)  # b2tjax/outputs.py


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]
    print(cluster_commands(args.script, args.args), flush=True)
    if args.print_only:
        return 0
    guard(args, PATHS)
    if args.port and (problem := port_problem("127.0.0.1", args.port)):
        raise UserError(problem)
    cluster = Cluster(args)
    # before the processes start: they inherit default dispositions, not an ignored SIGINT (nohup)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _frame: cluster.signal_all(s))
    cluster.start()
    return cluster.wait()


if __name__ == "__main__":
    sys.exit(run_main(main))
