"""Launch scripts as fresh processes forked from one preloaded server.

Every CLI test runs a real launch script as `__main__` in a process of its own (its exit status,
stdout and stderr are the script's), but starting Python and importing JAX, orbax and the project
for each of the dozens of cases cost seconds apiece. The server imports them once (no JAX backend
starts in it: forking stays safe) and forks one child per case.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# What the launch scripts import at their top, so a child finds it in sys.modules.
PRELOAD = (
    "b2tjax.cli.make_data",
    "b2tjax.cli.script",
    "b2tjax.config",
    "b2tjax.report.build",
    "b2tjax.run.adapters",
    "b2tjax.run.policy",
    "b2tjax.run.resume",
    "b2tjax.cli.himap_agents",
    "models.checkpoint",
    "models.hf",
    "rollout",
    "sandbox.benchmarks.travelplanner.scoring",
)

# The child: the script as __main__ with the interpreter's own exit rules (SystemExit's code, a
# traceback and status 1 for an uncaught exception; then its threads joined and its atexit
# handlers run, as at a normal exit). What it skips is the final teardown of module objects, so a
# test of shutdown noise (tests/launch/test_resume_record.py) keeps a subprocess of its own.
SERVER = r"""
import atexit, importlib, json, os, runpy, sys, threading, traceback

def child(req):
    code = 1
    try:
        os.chdir(req["cwd"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(req["stdout"], os.O_WRONLY), 1)
        os.dup2(os.open(req["stderr"], os.O_WRONLY), 2)
        sys.argv = [req["script"], *req["args"]]
        sys.path[0] = os.path.dirname(req["script"])
        try:
            runpy.run_path(req["script"], run_name="__main__")
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) or stop.code is None else 1
            if code is not stop.code:
                print(stop.code, file=sys.stderr)
            code = code or 0
        except BaseException:
            traceback.print_exc()
    finally:
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

try:
    for name in sys.argv[1:]:
        importlib.import_module(name)
except Exception as err:  # the first line then says which preload failed, and why
    print(f"cannot preload {name}: {err!r}", flush=True)
    sys.exit(1)
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(req)
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class ScriptServer:
    """One server process for the tests of a worker; `run` behaves as subprocess.run of a script."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, *PRELOAD],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self.proc.stdout.readline().strip()
        assert first == "ready", f"the script server did not start: {first}"
        atexit.register(self.close)

    def run(
        self, script: Path, args: list[str], cwd: Path | None, timeout: float
    ) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            out.touch(), err.touch()
            request = {"script": str(script), "args": args, "cwd": str(cwd or os.getcwd())}
            self.proc.stdin.write(json.dumps(request | {"stdout": str(out), "stderr": str(err)}) + "\n")
            self.proc.stdin.flush()
            pid = int(self.proc.stdout.readline())
            if not select.select([self.proc.stdout], [], [], timeout)[0]:
                os.kill(pid, signal.SIGKILL)
                self.proc.stdout.readline()  # its status: the next request reads its own
                raise subprocess.TimeoutExpired([str(script), *args], timeout)
            code = int(self.proc.stdout.readline())
            return subprocess.CompletedProcess([str(script), *args], code, out.read_text(), err.read_text())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
