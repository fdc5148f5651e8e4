"""The Python tool's kernel jail: namespaces, a root file system built from scratch, a syscall filter.

Loaded by path by `_python_worker.py` (see its docstring for the whole design); imports nothing
from the project. Everything here needs root and raises OSError when the kernel refuses.
"""

import ctypes
import os
import platform
import struct
import sys
import sysconfig

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}  # glibc has no wrapper
UID_BASE = 1_000_000  # far above any real account; uid = UID_BASE + supervisor pid (unique while alive)
JAIL_SCRATCH = "/scratch"  # where the working directories live inside the jail
# System library directories (a symlink such as /lib -> usr/lib is recreated as a symlink).
_LIB_DIRS = ("/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/local/lib")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
_FILES = ("/etc/ld.so.cache",)

libc = ctypes.CDLL(None, use_errno=True)


def check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags: int, data) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _python_dirs() -> list[str]:
    """The Python install's directories the jailed interpreter imports from.

    Only paths inside the install prefixes: a `.pth` entry pointing elsewhere (an editable
    install of the project checkout) is deliberately left out.
    """
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths = sysconfig.get_paths()
    candidates = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    candidates += [sysconfig.get_config_var("LIBDIR") or "", *sys.path]
    dirs = {os.path.realpath(p) for p in candidates if p and os.path.isdir(p)}
    return [d for d in dirs if any(d == p or d.startswith(p + os.sep) for p in prefixes)]


def _outermost(dirs: set[str]) -> list[str]:
    """`dirs` without those nested in another one (a bind mount already shows them)."""
    return sorted(d for d in dirs if not any(d != o and d.startswith(o + os.sep) for o in dirs))


def _bind_read_only(source: str, root: str, flags: int = MS_NOSUID | MS_NODEV) -> None:
    """Bind `source` at the same path under `root`, read-only."""
    target = root + source
    if os.path.isdir(source):
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND, None)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, None)


def _build_root(root: str) -> None:
    """Fill the empty tmpfs at `root` with what the jail exposes (see the module docstring)."""
    dirs = set(_python_dirs())
    for d in _LIB_DIRS:
        if os.path.islink(d):
            os.makedirs(os.path.dirname(root + d), 0o755, exist_ok=True)
            os.symlink(os.readlink(d), root + d)
        elif os.path.isdir(d):
            dirs.add(os.path.realpath(d))
    for d in _outermost(dirs):
        _bind_read_only(d, root)
    for f in _FILES:
        if os.path.isfile(f):
            _bind_read_only(f, root)
    for dev in _DEVICES:
        if os.path.exists(dev):
            _bind_read_only(dev, root, MS_NOSUID)
    os.makedirs(root + JAIL_SCRATCH, 0o755)
    _mount("tmpfs", root + JAIL_SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0711")
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def _pivot_into(root: str) -> None:
    """Make `root` this mount namespace's `/` and detach the host's file system from it."""
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(0, f"pivot_root: unknown system call number on {platform.machine()}")
    os.chdir(root)
    check(libc.syscall(number, b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def enter_jail(root: str) -> str:
    """New network + mount namespace rooted in a fresh tmpfs at `root`; returns the scratch dir."""
    check(libc.unshare(CLONE_NEWNET | CLONE_NEWNS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    try:
        _build_root(root)
        _pivot_into(root)
    except OSError:
        libc.umount2(root.encode(), MNT_DETACH)  # leave the host's directory usable (unsafe-ok)
        raise
    return JAIL_SCRATCH


def enter_call_namespaces() -> None:
    """Give this process a new IPC namespace and its future children a new PID namespace.

    Called once per call in the call's first process: System V and POSIX IPC objects then die
    with the call, and the call's code sees only its own process ids (no host pid can be named).
    """
    check(libc.unshare(CLONE_NEWIPC | CLONE_NEWPID), "unshare(ipc, pid)")


# The key-management system calls, per architecture: denied so that no key outlives a call or
# passes between calls (a uid's user keyring is kept by the kernel after its processes exit).
_KEY_SYSCALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219), "riscv64": (217, 218, 219)}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7, "riscv64": 0xC00000F3}
_X32_SYSCALL_BIT = 0x40000000


def deny_keyrings() -> None:
    """Install a seccomp filter: add_key, request_key and keyctl fail with EPERM.

    Syscalls of another ABI (32-bit or x32 on x86_64) are denied wholesale, as they would
    reach the same calls under other numbers. Irreversible for this process and its children.
    """
    machine = platform.machine()
    if machine not in _KEY_SYSCALLS:
        raise OSError(0, f"seccomp: no system call table for {machine}")
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, _AUDIT_ARCH[machine]), (ret, 0, 0, deny), (ld, 0, 0, 0)]
    for nr in _KEY_SYSCALLS[machine]:
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, deny)]
    if machine == "x86_64":
        prog += [(jge, 0, 1, _X32_SYSCALL_BIT), (ret, 0, 0, deny)]
    prog.append((ret, 0, 0, allow))
    raw = b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(prog), ctypes.addressof(buf))
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
    check(libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(fprog), 0, 0), "prctl(seccomp)")
