"""The jailed Python tool: results, limits, and containment of hostile code.

Each attack must come back as an error result while this (host) process carries on and the next
normal call still works. The attacks run twice where the machine allows it: with the audit-hook
guard (the default) and without it, to show that the kernel layer alone contains them.
"""

import ast
import concurrent.futures as cf
import logging
import os
import shutil
import site
import socket
import sys
import tempfile
import time

import pytest

from sandbox.python_tool import PythonIsolationError, PythonLimits, PythonSandbox

LIMITS = PythonLimits(timeout_s=1.0, memory_mb=256, max_output_bytes=20000, max_output_chars=2000)


@pytest.fixture(scope="module")
def guarded():
    with PythonSandbox(num_workers=2, limits=LIMITS, isolation="unsafe-ok") as sb:
        yield sb


@pytest.fixture(scope="module")
def kernel_only():
    sb = PythonSandbox(num_workers=1, limits=LIMITS, isolation="unsafe-ok", audit_guard=False)
    if not sb.isolation["kernel"]:
        sb.close()
        pytest.skip(f"kernel isolation unavailable here: {sb.isolation}")
    yield sb
    sb.close()


@pytest.fixture(params=["guarded", "kernel_only"])
def sandbox(request):
    return request.getfixturevalue(request.param)


def _still_works(sb: PythonSandbox) -> None:
    res = sb.run("print(sum(range(10)))")
    assert (res.text, res.is_error) == ("45", False)


def _processes_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    uids = next(line for line in f if line.startswith("Uid:")).split()[1:]
            except (OSError, StopIteration):
                continue
            if int(uids[0]) == uid:
                pids.append(int(entry))
    return pids


def test_output_exceptions_and_repl_style_last_expression(guarded):
    assert guarded.run("x = 6 * 7\nprint('x is', x)\nx + 1").text == "x is 42\n43"
    assert guarded.run("y = 1").text == "(no output)"
    res = guarded.run("def f(d):\n    return d['missing']\nf({})")
    assert res.is_error and "exit code 1" in res.text
    assert 'File "<python>", line 2, in f' in res.text and "KeyError: 'missing'" in res.text
    assert "_python_worker" not in res.text  # the sandbox's own frames are hidden
    syntax = guarded.run("def broken(:\n  pass")
    assert syntax.is_error and "SyntaxError" in syntax.text


def test_fresh_scrubbed_working_directory_per_call(guarded):
    first = guarded.run("import os\nopen('note.txt', 'w').write('hi')\nprint(os.getcwd())")
    assert not first.is_error
    second = guarded.run("import os\nprint(os.listdir('.'), os.getcwd())")
    assert second.text.startswith("[] ")  # the previous call's file is gone
    assert not os.path.exists(first.text)  # and so is its directory
    env = guarded.run("import os\nprint(sorted(os.environ))").text
    assert "HOME" in env and "PYTHONPATH" not in env and "USER" not in env


def test_stdlib_and_numpy_are_importable(guarded):
    assert guarded.run("import json, math, statistics\njson.dumps(statistics.mean([1, 2, 6]))").text == "'3'"
    assert guarded.run("import numpy as np\nint(np.arange(5).sum())").text == "10"


def test_the_jailed_tool_imports_the_packages_of_the_environment_it_runs_in(kernel_only):
    # In a virtual environment (or conda) the packages live outside the base install that the
    # supervisor's `-S` start leaves in sys.prefix; the jail must still show them, read-only.
    where = os.path.dirname(os.path.dirname(__import__("numpy").__file__))
    res = kernel_only.run(f"import numpy\nprint(numpy.__file__.startswith({where!r}))")
    assert (res.text, res.is_error) == ("True", False), (sys.prefix, res.text)
    res = kernel_only.run(f"open({os.path.join(where, 'b2t-probe')!r}, 'w')")
    assert res.is_error and "Read-only file system" in res.text, res.text


def test_a_tool_whose_runtime_is_gone_is_an_environment_fault_not_the_agents(caplog):
    # A supervisor that died between calls (and could not be replaced) is not the code's doing.
    with PythonSandbox(num_workers=1, spare_workers=0, limits=LIMITS, isolation="unsafe-ok") as sb:
        slot = sb._slots[0]
        os.kill(slot.proc.pid, 9)
        slot.proc.wait()
        with caplog.at_level(logging.WARNING, logger="sandbox.python_tool"):
            res = sb.run("print(1)")
        assert (res.is_error, res.env_fault) == (False, True), res
        assert "could not start" in res.text and "could not start" in caplog.text
        _still_works(sb)


def test_infinite_loop_is_stopped_at_the_wall_clock_limit(sandbox):
    start = time.monotonic()
    res = sandbox.run("while True:\n    pass")
    assert res.is_error and "time limit" in res.text
    assert time.monotonic() - start < LIMITS.timeout_s + 1.5
    _still_works(sandbox)


def test_sleeping_code_is_stopped_too(guarded):
    res = guarded.run("import time\ntime.sleep(30)", timeout_s=0.5)
    assert res.is_error and "0.5 s time limit" in res.text


def test_memory_bomb_hits_the_memory_limit(sandbox):
    # a time limit the bomb cannot reach first on a loaded machine: the memory limit must stop it
    bomb = "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2**20))"
    res = sandbox.run(bomb, timeout_s=20.0)
    assert res.is_error and ("MemoryError" in res.text or "memory limit" in res.text)
    _still_works(sandbox)


def test_fork_bomb_is_contained_and_leaves_no_process(sandbox):
    res = sandbox.run(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    )
    assert res.is_error
    uid = sandbox.isolation.get("uid")
    if isinstance(uid, int) and uid != os.getuid():
        assert _processes_of_uid(uid) == []
    _still_works(sandbox)


def test_huge_print_is_cut_at_the_output_bound(sandbox):
    res = sandbox.run("while True:\n    print('spam' * 1000)")
    assert res.is_error and "printed more than 20000 bytes" in res.text
    assert len(res.text) < LIMITS.max_output_chars + 200
    assert "characters truncated" in res.text
    _still_works(sandbox)


def test_network_is_unreachable_even_to_a_host_loopback_server(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        res = sandbox.run(
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=0.5)\n'connected'"
        )
        assert res.is_error and "connected" not in res.text.splitlines()[-1]
        assert "network access is disabled" in res.text or "Network is unreachable" in res.text
    finally:
        server.close()
    _still_works(sandbox)


def test_writing_outside_the_working_directory_is_blocked(sandbox, tmp_path):
    target_dir = tmp_path / "open"
    target_dir.mkdir()
    os.chmod(tmp_path, 0o777)
    os.chmod(target_dir, 0o777)  # even a world-writable directory must stay untouched
    for target in (target_dir / "evil.txt", "/tmp/b2t-evil.txt", "/dev/shm/b2t-evil.txt"):
        res = sandbox.run(f"open({str(target)!r}, 'w').write('pwned')")
        assert res.is_error, res.text
        assert not os.path.exists(target)
    _still_works(sandbox)


def test_killing_its_parent_does_not_reach_the_supervisor_or_host(sandbox):
    res = sandbox.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)")
    assert res.is_error and ("not allowed" in res.text or "Operation not permitted" in res.text)
    _still_works(sandbox)


def test_a_dead_supervisor_is_replaced_and_the_call_fails_cleanly():
    # Without any isolation the code runs as the supervisor's uid and can kill it: the host must
    # notice, report an error and restart the slot.
    with PythonSandbox(
        num_workers=1, limits=LIMITS, isolation="unsafe-ok", kernel_isolation=False, audit_guard=False
    ) as sb:
        # The call's processes are user <- init <- supervisor (see _python_child.py).
        res = sb.run(
            "import os, time\n"
            "def parent(p):\n    return int(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1])\n"
            "os.kill(parent(os.getppid()), 9)\ntime.sleep(5)"
        )
        assert res.is_error and "restarted" in res.text
        _still_works(sb)


def test_children_die_with_a_killed_supervisor(kernel_only):
    # A supervisor killed mid-call (e.g. by an operator) must not leave the jailed code running.
    sb = PythonSandbox(num_workers=1, limits=PythonLimits(timeout_s=20.0), spare_workers=0)
    try:
        uid = sb.isolation["uid"]
        slot = sb._slots[0]
        with cf.ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(sb.run, "import time\ntime.sleep(60)")
            deadline = time.monotonic() + 5
            while not _processes_of_uid(uid) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _processes_of_uid(uid), "the child never started"
            os.kill(slot.proc.pid, 9)
            res = pending.result(timeout=10)
        assert res.is_error and "restarted" in res.text
        deadline = time.monotonic() + 2
        while _processes_of_uid(uid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _processes_of_uid(uid) == []
        _still_works(sb)
    finally:
        sb.close()


def test_concurrent_calls_from_threads_get_their_own_results(guarded):
    with cf.ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda i: guarded.run(f"print({i} * {i})"), range(12)))
    assert [r.text for r in results] == [str(i * i) for i in range(12)]


def test_bad_input_is_an_error_result(guarded):
    assert guarded.run(123).is_error  # type: ignore[arg-type]
    too_long = guarded.run("x = 1\n" * 5000)
    assert too_long.is_error and "limit is 20000" in too_long.text


def _world_readable_data_dir() -> str:
    """A data directory any uid could read on the host (mode 0755/0644), like a real DATA dir."""
    root = tempfile.mkdtemp(prefix="b2t-jail-test-")
    os.chmod(root, 0o755)
    for rel, text in (
        ("ground_truth/test.jsonl", '{"id": "test-easy-00000", "profile": "SECRET"}\n'),
        ("sft/train.jsonl", '{"messages": "SECRET"}\n'),
        ("world.sqlite", "SECRET"),
    ):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
    return root


def test_the_jail_exposes_only_the_python_runtime_and_its_scratch_dir(kernel_only):
    # kernel_only runs without the audit hook: the file system view alone must hide the host.
    data = _world_readable_data_dir()
    checkout_file = os.path.abspath(__file__)
    try:
        for path in (
            f"{data}/ground_truth/test.jsonl",
            f"{data}/sft/train.jsonl",
            f"{data}/world.sqlite",
            checkout_file,
            "/etc/passwd",
            "/proc/self/environ",
            "/work/shared/spec/SPEC.md",
        ):
            assert os.path.exists(path) or path.startswith(("/work/shared", "/proc")), path
            res = kernel_only.run(f"print(open({path!r}, 'rb').read(40))")
            assert res.is_error and "FileNotFoundError" in res.text, (path, res.text)
        for directory in (data, os.path.dirname(checkout_file), "/home", "/tmp", "/proc"):
            res = kernel_only.run(f"import os\nprint(os.listdir({directory!r}))")
            assert res.is_error and "FileNotFoundError" in res.text, (directory, res.text)
        etc = kernel_only.run("import os\nprint(sorted(os.listdir('/etc')), sorted(os.listdir('/dev')))").text
        assert etc.startswith("['ld.so.cache'] [") and "'null'" in etc and "'sda'" not in etc
        # The root holds the system directories and the ways to the Python install only.
        install = {p.split(os.sep)[1] for p in (sys.base_prefix, *site.getsitepackages())}
        root = kernel_only.run("import os\nprint(sorted(os.listdir('/')))").text
        system = {"dev", "etc", "scratch", "lib", "lib32", "lib64", "usr"}
        assert set(ast.literal_eval(root)) <= system | install, root
        # ... while the runtime still works: standard library, numpy, files in the scratch dir.
        res = kernel_only.run(
            "import numpy as np, json, os\nopen('x.txt', 'w').write('7')\n"
            "print(int(np.arange(5).sum()) + int(open('x.txt').read()), os.getcwd())"
        )
        assert not res.is_error and res.text.startswith("17 /scratch/run-"), res.text
    finally:
        shutil.rmtree(data)


def test_without_the_kernel_jail_the_pool_refuses_unless_the_user_opts_in():
    # kernel_isolation=False makes the supervisor's capability probe fail, as without root.
    with pytest.raises(PythonIsolationError) as refused:
        PythonSandbox(num_workers=1, limits=LIMITS, kernel_isolation=False)
    message = str(refused.value)
    assert "\n" not in message and "root" in message and "unsafe-ok" in message
    with PythonSandbox(num_workers=1, limits=LIMITS, isolation="unsafe-ok", kernel_isolation=False) as sb:
        assert sb.isolation["kernel"] is False and "switched off" in sb.isolation["kernel_error"]
        _still_works(sb)
    with pytest.raises(ValueError, match="isolation must be one of"):
        PythonSandbox(num_workers=1, isolation="off")


def test_a_launch_script_reports_the_refusal_in_one_line_not_a_traceback(capsys):
    from b2tjax.cli.script import USER_ERROR_EXIT, run_main

    status = run_main(lambda argv: PythonSandbox(num_workers=1, limits=LIMITS, kernel_isolation=False))
    err = capsys.readouterr().err
    assert status == USER_ERROR_EXIT and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("error: the Python tool cannot be jailed here")
