"""Child side of the sandbox: network namespace, an audit hook, and a snapshot of trusted functions.

Layers, each cheap: (1) a private network namespace when the kernel allows it; (2) a `sys.addaudithook`
hook, installed before the candidate is imported, that refuses sockets, writes outside the work dir,
reads of the reference's files, foreign subprocesses and frame/gc introspection from candidate code;
(3) identities of torch/triton/time functions recorded before the import and compared afterwards, so
monkey-patching that slipped past the static policy is still caught.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from dataclasses import dataclass, field

CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000

# Executables Triton / CuTe DSL / torch legitimately run while compiling.
_ALLOWED_EXECUTABLES = {"ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm", "nvlink", "fatbinary", "gcc", "cc",
                        "clang", "g++", "c++", "ld", "as", "ldconfig", "ldconfig.real", "nvcc", "uname",
                        "file"}  # `file`: platform.architecture(), which Triton calls for its launcher cache key
_INTROSPECTION_EVENTS = {"sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers",
                         "gc.get_referents", "sys.settrace", "sys.setprofile", "object.__getattr__"}
_NETWORK_EVENTS = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
                   "socket.gethostbyname", "socket.gethostbyaddr"}


def isolate_network() -> str:
    """Move this process into a fresh network namespace (no interfaces but a down loopback)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return "unavailable"
    for flags, name in ((CLONE_NEWNET, "netns"), (CLONE_NEWUSER | CLONE_NEWNET, "userns+netns")):
        if libc.unshare(flags) == 0:
            return name
    return "unavailable"


@dataclass
class GuardState:
    workdir: str
    candidate_file: str = ""
    deny_read: list[str] = field(default_factory=list)
    active: bool = False
    blocked: list[str] = field(default_factory=list)


_local = threading.local()


def _is_write(mode: object, flags: object) -> bool:
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _caller_is_candidate(state: GuardState) -> bool:
    """Whether the frame that raised the event is the candidate's own code (not a library it called).

    Stack here: _caller_is_candidate <- _check <- hook <- the caller of sys._getframe / gc.* / ...
    """
    frame = sys._getframe(3)
    return frame is not None and frame.f_code.co_filename == state.candidate_file


def install_audit_hook(state: GuardState) -> None:
    """Install the (irremovable) audit hook; it only bites once `state.active` is set."""
    write_roots = [os.path.realpath(state.workdir), "/dev/null", "/dev/shm", "/dev/nvidia"]

    def deny(reason: str) -> None:
        state.blocked.append(reason)
        raise PermissionError(f"blocked by the kernelagent sandbox: {reason}")

    def hook(event: str, args: tuple) -> None:
        if not state.active or getattr(_local, "busy", False):
            return
        _local.busy = True
        try:
            _check(event, args)
        finally:
            _local.busy = False

    def _check(event: str, args: tuple) -> None:
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if _is_write(args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None):
                if not _under(path, write_roots):
                    deny(f"write to {path}")
            elif _under(path, state.deny_read):
                deny(f"read of {path}")
        elif event in _NETWORK_EVENTS:
            deny(f"network ({event})")
        elif event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn"):
            exe = os.fsdecode(args[0]) if args and isinstance(args[0], (str, bytes)) else ""
            if not exe and len(args) > 1 and args[1]:
                exe = os.fsdecode(list(args[1])[0])
            if os.path.basename(exe) not in _ALLOWED_EXECUTABLES:
                deny(f"running {exe or 'a program'}")
        elif event in ("os.system", "os.fork", "os.forkpty", "pty.spawn"):
            deny(event)
        elif event in _INTROSPECTION_EVENTS:
            if event == "object.__getattr__" and not (len(args) > 1 and args[1] in ("tb_frame", "gi_frame",
                                                                                   "cr_frame", "ag_frame")):
                return
            if _caller_is_candidate(state):
                deny(f"introspection ({event})")

    sys.addaudithook(hook)


# Objects whose public attributes must keep their identity while a candidate runs.
def _watched_namespaces() -> dict[str, object]:
    import time

    import torch
    import torch.nn.functional as F  # noqa: N812

    spaces: dict[str, object] = {"torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.functional": F,
                                 "torch.cuda": torch.cuda, "torch.nn.Module": torch.nn.Module, "time": time,
                                 "torch.testing": torch.testing, "torch.autograd": torch.autograd}
    if hasattr(torch.cuda, "Event"):
        spaces["torch.cuda.Event"] = torch.cuda.Event
    try:
        import triton
        import triton.testing
        spaces["triton"], spaces["triton.testing"] = triton, triton.testing
    except ImportError:
        pass
    for name in ("kernelagent.verifier.tensorio", "kernelagent.verifier.timing", "kernelagent.verifier.integrity",
                 "kernelagent.verifier.candidate_run", "kernelagent.verifier.guard"):
        if name in sys.modules:
            spaces[name] = sys.modules[name]
    return spaces


def snapshot() -> dict[tuple[str, str], int]:
    """Identity of every attribute of the watched namespaces (taken before the candidate is imported)."""
    snap: dict[tuple[str, str], int] = {}
    for ns_name, ns in _watched_namespaces().items():
        for attr, value in list(vars(ns).items()):
            if _watchable(attr, value):
                snap[(ns_name, attr)] = id(value)
    return snap


def changed_since(snap: dict[tuple[str, str], int]) -> list[str]:
    """Names whose object was replaced or deleted since `snap` (new attributes are ignored)."""
    spaces = _watched_namespaces()
    changed = []
    for (ns_name, attr), ident in snap.items():
        ns = spaces.get(ns_name)
        if ns is None:
            continue
        current = vars(ns).get(attr, _MISSING)
        if current is _MISSING or id(current) != ident:
            changed.append(f"{ns_name}.{attr}")
    return changed


_MISSING = object()


def _watchable(attr: str, value: object) -> bool:
    """Public callables (functions, methods, classes); private state and plain values change legitimately."""
    if attr.startswith("_") and attr not in ("__call__", "__torch_function__", "__torch_dispatch__"):
        return False
    return callable(value) or isinstance(value, (staticmethod, classmethod, property))
