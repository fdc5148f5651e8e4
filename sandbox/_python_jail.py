"""The Python tool's kernel jail: namespaces, a root file system built from scratch, a syscall filter.

Loaded by path by `_python_worker.py` (see its docstring for the whole design); imports nothing
from the project. Everything here needs root and raises OSError when the kernel refuses.
"""

import ctypes
import os
import platform
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
PR_SET_CHILD_SUBREAPER = 36
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


def _python_dirs(site_dirs: list[str]) -> list[str]:
    """The Python install's directories the jailed interpreter imports from.

    Only paths inside the install prefixes or the host's site-packages `site_dirs` (a virtual
    environment's lie outside the base install that `-S` leaves in `sys.prefix`): a `.pth` entry
    pointing elsewhere (an editable install of the project checkout) is deliberately left out.
    """
    roots = (sys.prefix, sys.base_prefix, sys.exec_prefix, *site_dirs)
    prefixes = {os.path.realpath(p) for p in roots if os.path.isdir(p)}
    paths = sysconfig.get_paths()
    candidates = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    candidates += [sysconfig.get_config_var("LIBDIR") or "", *sys.path, *site_dirs]
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


def _build_root(root: str, site_dirs: list[str]) -> None:
    """Fill the empty tmpfs at `root` with what the jail exposes (see the module docstring)."""
    dirs = set(_python_dirs(site_dirs))
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
    _mount("tmpfs", root + JAIL_SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0711")
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


def enter_jail(root: str, site_dirs: list[str]) -> str:
    """New network + mount namespace rooted in a fresh tmpfs at `root`; returns the scratch dir.

    `site_dirs` (the host's site-packages) are exposed read-only beside the install.
    """
    check(libc.unshare(CLONE_NEWNET | CLONE_NEWNS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    try:
        _build_root(root, site_dirs)
        _pivot_into(root)
    except OSError:
        libc.umount2(root.encode(), MNT_DETACH)  # leave the host's directory usable (unsafe-ok)
        raise
    return JAIL_SCRATCH


def own_namespaces() -> tuple[int, int]:
    """Descriptors of this process's IPC and PID namespaces (before the jail hides /proc)."""
    return os.open("/proc/self/ns/ipc", os.O_RDONLY), os.open("/proc/self/ns/pid", os.O_RDONLY)


def fork_into_call_namespaces(own: tuple[int, int]) -> int:
    """`os.fork()` with the child in a new IPC namespace and as pid 1 of a new PID namespace.

    The supervisor unshares both, forks, and returns to its own (`own`, from `own_namespaces`):
    System V and POSIX IPC objects then die with the call, and the call's code sees only its own
    process ids (no host pid can be named).
    """
    check(libc.unshare(CLONE_NEWIPC | CLONE_NEWPID), "unshare(ipc, pid)")
    try:
        return os.fork()
    finally:
        if os.getpid() != 1:  # the parent: back to its own IPC namespace and children's PID one
            check(libc.setns(own[0], CLONE_NEWIPC), "setns(ipc)")
            check(libc.setns(own[1], CLONE_NEWPID), "setns(pid)")


def mount_workdir(path: str, uid: int, size_mb: int, inodes: int) -> None:
    """A fresh tmpfs at `path`, owned by `uid`, 0700: one call's working directory.

    A mount per call makes the clean-up one unmount, whatever the call created (a million files,
    directories nested thousands deep): the kernel frees the whole file system at once. `inodes`
    bounds how many files and directories the call can make.
    """
    os.mkdir(path, 0o700)
    options = f"size={size_mb}m,nr_inodes={inodes},mode=0700,uid={uid},gid={uid}"
    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)


def unmount_workdir(path: str) -> None:
    """Remove a working directory made by `mount_workdir` (its processes must be dead)."""
    if libc.umount2(path.encode(), 0) != 0:
        check(libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")
    os.rmdir(path)
