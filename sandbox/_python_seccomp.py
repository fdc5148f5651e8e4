"""The Python tool's syscall filter: an allow-list of what jailed Python needs, nothing else.

Loaded by path by `_python_worker.py` (via `_python_child.py`); imports nothing from the project.
As in nsjail's and gVisor's profiles, everything not listed fails (EPERM): namespaces
(`unshare`, `setns`, `clone` with a CLONE_NEW* flag), mounts, `bpf`, `io_uring_*`, `ptrace`,
`perf_event_open`, `userfaultfd`, the kernel keyring, module loading, `personality`. Sockets
may be AF_UNIX, AF_INET or AF_INET6 only (the jail's network namespace has no interface up, so
the latter fail to connect as on an offline machine); netlink, packet and every other family are
refused. `clone3` answers ENOSYS, which makes glibc fall back to `clone`, whose flags a filter
can read (clone3 passes them in memory a filter cannot). Calls of another ABI (32-bit, x32) are
refused wholesale, as they would reach the same kernel code under other numbers.
"""

import ctypes
import functools
import platform
import struct

# Allowed as they are (clone, socket and socketpair are allowed with argument checks below).
ALLOWED = """
    read write open close stat fstat lstat poll lseek mmap mprotect munmap brk rt_sigaction
    rt_sigprocmask rt_sigreturn ioctl pread64 pwrite64 readv writev access pipe select
    sched_yield mremap msync mincore madvise shmget shmat shmctl dup dup2 pause nanosleep
    getitimer alarm setitimer getpid sendfile connect accept sendto recvfrom sendmsg recvmsg
    shutdown bind listen getsockname getpeername setsockopt getsockopt fork vfork execve exit
    wait4 kill uname semget semop semctl shmdt msgget msgsnd msgrcv msgctl fcntl flock fsync
    fdatasync truncate ftruncate getdents getcwd chdir fchdir rename mkdir rmdir creat link
    unlink symlink readlink chmod fchmod chown fchown lchown umask gettimeofday getrlimit
    getrusage sysinfo times getuid getgid geteuid getegid setpgid getppid getpgrp setsid
    getgroups getresuid getresgid getpgid getsid rt_sigpending rt_sigtimedwait rt_sigqueueinfo
    rt_sigsuspend sigaltstack utime statfs fstatfs getpriority setpriority sched_getparam
    sched_getscheduler sched_get_priority_max sched_get_priority_min sched_rr_get_interval mlock
    munlock prctl arch_prctl setrlimit gettid readahead tkill time futex sched_setaffinity
    sched_getaffinity epoll_create getdents64 set_tid_address semtimedop fadvise64 timer_create
    timer_settime timer_gettime timer_getoverrun timer_delete clock_gettime clock_getres
    clock_nanosleep exit_group epoll_wait epoll_ctl tgkill utimes mbind set_mempolicy
    get_mempolicy mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr waitid
    inotify_init inotify_add_watch inotify_rm_watch openat mkdirat fchownat futimesat newfstatat
    unlinkat renameat linkat symlinkat readlinkat fchmodat faccessat pselect6 ppoll
    set_robust_list get_robust_list splice tee sync_file_range vmsplice utimensat epoll_pwait
    signalfd timerfd_create eventfd fallocate timerfd_settime timerfd_gettime accept4 signalfd4
    eventfd2 epoll_create1 dup3 pipe2 inotify_init1 preadv pwritev rt_tgsigqueueinfo recvmmsg
    prlimit64 sendmmsg renameat2 getrandom memfd_create execveat membarrier mlock2
    copy_file_range preadv2 pwritev2 statx rseq close_range openat2 faccessat2 epoll_pwait2
    futex_waitv setuid setgid setgroups setreuid setregid setresuid setresgid setfsuid setfsgid
""".split()


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split())


# The numbers of ALLOWED per system call table (from the kernel's unistd headers; checked by
# tests/sandbox/test_python_seccomp.py against the headers where they are installed).
_X86_64 = _numbers(
    """
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33
    34 35 36 37 38 39 40 42 43 44 45 46 47 48 49 50 51 52 54 55 57 58 59 60 61 62 63 64 65 66 67
    68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98
    99 100 102 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123
    124 127 128 129 130 131 132 137 138 140 141 143 145 146 147 148 149 150 157 158 160 186 187
    200 201 202 203 204 213 217 218 220 221 222 223 224 225 226 228 229 230 231 232 233 234 235
    237 238 239 240 241 242 243 244 245 247 253 254 255 257 258 260 261 262 263 264 265 266 267
    268 269 270 271 273 274 275 276 277 278 280 281 282 283 284 285 286 287 288 289 290 291 292
    293 294 295 296 297 299 302 307 316 318 319 322 324 325 326 327 328 332 334 436 437 439 441
    449
"""
)
# asm-generic/unistd.h, shared by aarch64 and riscv64
_GENERIC = _numbers(
    """
    17 19 20 21 22 23 24 25 26 27 28 29 32 34 35 36 37 38 43 44 45 46 47 48 49 50 52 53 54 55 56
    57 59 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 82 83 84 85 86 87 88 93 94
    95 96 98 99 100 101 102 103 107 108 109 110 111 113 114 115 120 121 122 123 124 125 126 127
    129 130 131 132 133 134 135 136 137 138 139 140 141 143 144 145 146 147 148 149 150 151 152
    153 154 155 156 157 158 159 160 163 164 165 166 167 169 172 173 174 175 176 177 178 179 180
    181 182 183 184 185 186 187 188 189 190 191 192 193 194 195 196 197 200 201 202 203 204 205
    206 207 208 209 210 211 212 213 214 215 216 221 222 223 226 227 228 229 232 233 235 236 237
    240 242 243 260 261 269 276 278 279 281 283 284 285 286 287 291 293 436 437 439 441 449
"""
)
# arch -> (AUDIT_ARCH, allowed numbers, clone, socket, socketpair, clone3)
TABLES = {
    "x86_64": (0xC000003E, _X86_64, 56, 41, 53, 435),
    "aarch64": (0xC00000B7, _GENERIC, 220, 198, 199, 435),
    "riscv64": (0xC00000F3, _GENERIC, 220, 198, 199, 435),
}
CLONE_NEW_FLAGS = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
SOCKET_FAMILIES = (1, 2, 10)  # AF_UNIX, AF_INET, AF_INET6
_X32_SYSCALL_BIT = 0x40000000
# BPF_LD|W|ABS, BPF_JMP|{JEQ,JGE,JSET}|K, BPF_RET|K
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _EPERM, _ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38  # SECCOMP_RET_ALLOW / _ERRNO
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low 32 bits: little-endian)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def _if_arg0(nr: int, allowed: tuple[int, ...] = (), denied_bits: int = 0) -> list[tuple]:
    """For syscall `nr`: allow when arg0 is in `allowed` (or has none of `denied_bits`), else EPERM."""
    body = [(_LD, 0, 0, _ARG0)]
    if denied_bits:
        body += [(_JSET, 0, 1, denied_bits), (_RET, 0, 0, _EPERM), (_RET, 0, 0, _ALLOW)]
    else:
        body += [(_JEQ, len(allowed) - i, 0, v) for i, v in enumerate(allowed)]
        body += [(_RET, 0, 0, _EPERM), (_RET, 0, 0, _ALLOW)]
    return [(_JEQ, 0, len(body), nr), *body]


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` as (code, jt, jf, k) instructions; OSError for an unknown one."""
    if machine not in TABLES:
        raise OSError(0, f"seccomp: no system call table for {machine}")
    arch, allowed, clone, socket, socketpair, clone3 = TABLES[machine]
    prog = [(_LD, 0, 0, _ARCH), (_JEQ, 1, 0, arch), (_RET, 0, 0, _EPERM), (_LD, 0, 0, _NR)]
    if machine == "x86_64":
        prog += [(_JGE, 0, 1, _X32_SYSCALL_BIT), (_RET, 0, 0, _EPERM)]
    prog += [(_JEQ, 0, 1, clone3), (_RET, 0, 0, _ENOSYS)]
    prog += _if_arg0(clone, denied_bits=CLONE_NEW_FLAGS)
    prog += _if_arg0(socket, allowed=SOCKET_FAMILIES)
    prog += _if_arg0(socketpair, allowed=(1,))
    # The allowed numbers as ascending runs (39 on x86_64 for 235 numbers): the kernel compiles a
    # filter at every call's start and runs it at every system call, both in time linear in its
    # length. Per run: above it, on to the next; inside, allowed; below it (a gap), refused.
    for lo, hi in _runs(allowed):
        prog += [(_JGE, 3, 0, hi + 1), (_JGE, 0, 1, lo), (_RET, 0, 0, _ALLOW), (_RET, 0, 0, _EPERM)]
    return prog + [(_RET, 0, 0, _EPERM)]


def _runs(numbers: tuple[int, ...]) -> list[tuple[int, int]]:
    """`numbers` as sorted, maximal runs of consecutive integers (lo, hi), both ends included."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return [(lo, hi) for lo, hi in runs]


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.cache
def compiled(machine: str) -> tuple[_Fprog, ctypes.Array]:
    """`program(machine)` as the kernel's sock_fprog (and the buffer it points into, kept alive).

    Built once in the supervisor, so a call's processes inherit it instead of building it again.
    """
    prog = program(machine)
    raw = b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    return _Fprog(len(prog), ctypes.addressof(buf)), buf


def install(libc: ctypes.CDLL) -> None:
    """Install the filter on this process (and its future children); irreversible.

    It allows the set*id calls: the user process installs it as root, before it drops to the
    run's uid (an unprivileged process's set*id cannot gain anything).
    """
    fprog, _ = compiled(platform.machine())
    for args, what in (
        ((PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)"),
        ((PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "prctl(seccomp)"),
    ):
        if libc.prctl(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what} failed (errno {err})")
