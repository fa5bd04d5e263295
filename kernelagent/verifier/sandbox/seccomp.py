"""seccomp for a worker: a small BPF filter refusing the system calls no kernel candidate needs (x86-64).

Installed on every thread of the worker at once (TSYNC) and inherited by all it starts; each refusal
answers EPERM (clone3: ENOSYS, so libc falls back to clone, whose flags the filter can read). Why each
call is refused: docs/verification.md, "Confinement". Stdlib + ctypes only (imported by the worker).
"""

from __future__ import annotations

import ctypes
import os
import platform
from typing import TYPE_CHECKING

from kernelagent.verifier.sandbox.landlock import no_new_privs

if TYPE_CHECKING:
    from kernelagent.verifier.sandbox.confine import Profile

_libc = ctypes.CDLL(None, use_errno=True)


class SeccompError(OSError):
    """No filter for this machine, or the kernel refused it."""


_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_CLONE, _CLONE3 = 56, 435
_NEW_NAMESPACES = 0x7E020080  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME

# x86-64 numbers of the calls refused to every worker, and why (docs/verification.md, Confinement)
ALWAYS_DENIED = {
    "kexec_load": 246, "kexec_file_load": 320,       # replace the running kernel
    "bpf": 321, "userfaultfd": 323,                  # kernel attack surface, exploit primitives
    "keyctl": 250, "add_key": 248, "request_key": 249,   # kernel keyrings may hold the host user's keys
    "mount": 165, "umount2": 166, "pivot_root": 155, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,   # change what paths mean
    "setns": 308, "unshare": 272,                    # leave or re-make namespaces (clone flags: below)
    "open_by_handle_at": 304, "name_to_handle_at": 303,   # open files by handle, around path rules
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,  # syscalls seccomp cannot see
    "init_module": 175, "finit_module": 313, "delete_module": 176,
    # root-only calls that matter when a worker keeps the host's user namespace (tool runs): raw I/O ports,
    # the machine's clock (the timings!), its name, swap, reboot, accounting, quotas, the kernel log,
    # watching the host's file systems
    "iopl": 172, "ioperm": 173, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305,
    "sethostname": 170, "setdomainname": 171, "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163,
    "quotactl": 179, "syslog": 103, "fanotify_init": 300,
}
SOCKET_DENIED = {"socket": 41}
TRACING_DENIED = {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "perf_event_open": 298}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def denied_syscalls(profile: Profile) -> dict[str, int]:
    return {**ALWAYS_DENIED, **(SOCKET_DENIED if profile.deny_sockets else {}),
            **(TRACING_DENIED if profile.deny_tracing else {})}


def program(denied: dict[str, int]) -> list[tuple[int, int, int, int]]:
    """A BPF program: foreign-ABI calls and `denied` fail with EPERM, clone3 with ENOSYS (libc falls back
    to clone, whose flags a filter can read), clone with a new-namespace flag with EPERM; the rest runs."""
    deny = (_RET_K, 0, 0, _RET_ERRNO | _EPERM)
    prog = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64), deny,
            (_LD_W_ABS, 0, 0, 0), (_JGE_K, 0, 1, _X32_BIT), deny,
            (_JEQ_K, 0, 1, _CLONE3), (_RET_K, 0, 0, _RET_ERRNO | _ENOSYS)]
    for nr in sorted(set(denied.values())):
        prog += [(_JEQ_K, 0, 1, nr), deny]
    prog += [(_JEQ_K, 0, 3, _CLONE), (_LD_W_ABS, 0, 0, 16), (_JSET_K, 0, 1, _NEW_NAMESPACES), deny,
             (_RET_K, 0, 0, _RET_ALLOW)]
    return prog


def install(profile: Profile) -> str:
    """Install the filter on every thread of this process (TSYNC), inherited by all it starts."""
    if platform.machine() != "x86_64":
        raise SeccompError(f"no filter for {platform.machine()} (x86-64 only)")
    denied = denied_syscalls(profile)
    prog = program(denied)
    arr = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), arr)
    no_new_privs()
    ret = _libc.syscall(317, 1, 1, ctypes.byref(fprog))  # seccomp(SET_MODE_FILTER, FILTER_FLAG_TSYNC, prog)
    if ret != 0:
        why = os.strerror(ctypes.get_errno()) if ret < 0 else f"thread {ret} could not be synchronised"
        raise SeccompError(why)
    return f"on ({len(denied)} calls refused{', sockets' if profile.deny_sockets else ''})"


def available() -> bool:
    """Whether this machine takes our filter (x86-64, and the kernel has seccomp)."""
    return platform.machine() == "x86_64" and _libc.prctl(21, 0, 0, 0, 0) >= 0  # PR_GET_SECCOMP
