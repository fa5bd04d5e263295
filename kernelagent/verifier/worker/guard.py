"""Child side of the sandbox: network namespace, an audit hook, and a snapshot of trusted functions.

Layers, each cheap: (1) a private network namespace when the kernel allows it; (2) a `sys.addaudithook`
hook, installed before the candidate is imported, that refuses sockets, writes outside the work dir,
reads of the reference's files, foreign subprocesses and frame/gc introspection from candidate code;
(3) identities of torch/triton/time functions recorded before the import and compared afterwards, so
monkey-patching that slipped past the static policy is still caught.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field

CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000

# Executables Triton / CuTe DSL / torch legitimately run while compiling.
_ALLOWED_EXECUTABLES = {"ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm", "nvlink", "fatbinary", "gcc", "cc",
                        "clang", "g++", "c++", "ld", "as", "ldconfig", "ldconfig.real", "nvcc", "uname",
                        "file"}  # `file`: platform.architecture(), which Triton calls for its launcher cache key
_INTROSPECTION_EVENTS = {"sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers",
                         "gc.get_referents", "sys.settrace", "sys.setprofile", "object.__getattr__"}
_FRAME_WALKERS = {"inspect.py", "traceback.py", "linecache.py"}  # stdlib modules that walk frames for their caller
# code that calls sys._getframe on its caller's behalf and hands the frame (or its locals) back: looked past
# like the walkers (red-team review 7: logging.currentframe() gave the candidate its frame, and
# torch._jit_internal.createResolutionCallbackFromFrame(3) the runner from a frame's locals)
_FRAME_HOSTS = (("logging", "__init__.py", "<lambda>"), ("", "bdb.py", ""), ("", "pdb.py", ""), ("", "doctest.py", ""),
                ("asyncio", "format_helpers.py", ""), ("torch", "_jit_internal.py", ""))  # (package, file, function)
_FRAME_ATTRS = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")  # reading these hands out a live frame
_STDLIB = os.path.join(sysconfig.get_paths()["stdlib"], "")  # captured before any candidate code exists
# the compilers' own error paths walk a failed compile's traceback while the candidate is on the stack (Triton's
# compiler.filter_traceback, also on a failed autotuning config the autotuner catches; CuTe DSL's stacktrace
# filters and NameError locator; torch's CapturedTraceback and the Triton wrapper's logged fallback): a
# traceback's frames read from these files, and from no other (a general helper such as torch.utils._pytree's
# tree_map would host any getattr: review of 2026-12-02), stay allowed
_TB_READERS = tuple(os.sep + os.path.join(*p) for p in (
    ("triton", "compiler", "compiler.py"), ("cutlass", "base_dsl", "utils", "stacktrace.py"),
    ("cutlass", "base_dsl", "dsl.py"), ("cutlass", "base_dsl", "common.py"),
    ("cutlass", "_mlir", "_mlir_libs", "__init__.py"), ("torch", "utils", "_traceback.py"),
    ("torch", "_higher_order_ops", "triton_kernel_wrap.py")))
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
    out_dir: str = ""   # where the worker saves what the parent judges: the verifier's code alone writes there
    in_dir: str = ""    # where the parent delivers the trials: the verifier's code alone reads there


_local = threading.local()


def _is_write(mode: object, flags: object) -> bool:
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _candidate_frames(state: GuardState, depth: int) -> bool:
    """Whether one of the `depth` Python frames that raised the event is the candidate's own code.

    Stack here: _candidate_frames <- _check <- hook <- the frame that raised the event <- ...
    depth 1 means the direct caller only (sys._getframe, gc.*: libraries use them legitimately);
    a few frames reach through ctypes' own wrappers (ctypes.CDLL(...), libc.open) to the candidate.
    """
    frame = sys._getframe(3)
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_code.co_filename == state.candidate_file:
            return True
        frame = frame.f_back
    return False


def _caller_is_candidate(state: GuardState) -> bool:
    """Whether the frame that raised the event is the candidate's, looking through the standard library's
    own frame walkers (`inspect.stack()` calls sys._getframe from inspect's frame, on the candidate's behalf)
    and through code generated at run time (a dataclass's `__init__`, compiled from "<string>", calls the
    candidate's default_factory: red-team review 5 read frames from there)."""
    frame = sys._getframe(3)
    while frame is not None and (os.path.basename(frame.f_code.co_filename) in _FRAME_WALKERS
                                 or frame.f_code.co_filename.startswith("<") or _frame_host(frame.f_code)):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename == state.candidate_file


def _reader_beyond_stdlib(files: tuple[str, ...], workdir: str) -> bool:
    """Whether the first frame outside the standard library and generated code, from the one that raised the
    event, is one of `files` (path endings), and not a file in the candidate's own work dir."""
    frame = sys._getframe(3)
    while frame is not None and _stdlib_or_generated(frame.f_code.co_filename):
        frame = frame.f_back
    name = frame.f_code.co_filename if frame is not None else ""
    return name.endswith(files) and not _under(os.path.realpath(name), [os.path.realpath(workdir)])


def _stdlib_or_generated(filename: str) -> bool:
    if filename.startswith("<"):
        return True
    return filename.startswith(_STDLIB) and "-packages" + os.sep not in filename[len(_STDLIB):]


def _frame_host(code: types.CodeType) -> bool:
    """Code that hands its caller's frame back: logging's currentframe lambda (its own findCaller, which calls
    it, then stays the caller), torch's resolution callbacks, the debuggers."""
    parts = code.co_filename.split(os.sep)
    return any(parts[-1] == name and (not pkg or (len(parts) > 1 and parts[-2] == pkg))
               and (not func or code.co_name == func) for pkg, name, func in _FRAME_HOSTS)


def _foreign_proc(path: str) -> bool:
    """/proc/<pid>/... of another process (its environment, memory, command line)."""
    parts = path.split("/")
    return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and int(parts[2]) != os.getpid()


def _resolve_executable(exe: str, env: object) -> str:
    if "/" in exe:
        return os.path.realpath(exe)
    path = env.get("PATH") if isinstance(env, dict) else None
    for d in (path or os.environ.get("PATH", "")).split(os.pathsep):
        cand = os.path.join(d, exe)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.realpath(cand)
    return exe


# file-system changes other than open(): each path must be one the candidate may write
_PATH_CHANGES = ("os.mkdir", "os.remove", "os.rmdir", "os.rename", "os.truncate", "os.chmod", "os.chown",
                 "os.utime", "shutil.rmtree")


def _changed_paths(event: str, args: tuple, resolve) -> list[str | None]:
    """The paths a file-system change touches, fd-relative ones resolved. Audit arguments:
    rename (src, dst, src_dir_fd, dst_dir_fd); mkdir (path, mode, dir_fd); remove/rmdir (path, dir_fd);
    chmod (path, mode, dir_fd); chown (path, uid, gid, dir_fd); utime (path, times, ns, dir_fd);
    truncate (path, length); rmtree (path, dir_fd)."""
    if event == "os.rename":
        return [resolve(args[0], args[2] if len(args) > 2 else None),
                resolve(args[1] if len(args) > 1 else None, args[3] if len(args) > 3 else None)]
    fd_pos = {"os.mkdir": 2, "os.remove": 1, "os.rmdir": 1, "os.chmod": 2, "os.chown": 3, "os.utime": 3,
              "shutil.rmtree": 1}.get(event)
    return [resolve(args[0], args[fd_pos] if fd_pos is not None and len(args) > fd_pos else None)]


def install_audit_hook(state: GuardState) -> None:
    """Install the (irremovable) audit hook; it only bites once `state.active` is set."""
    own = os.path.realpath(state.workdir)
    write_roots = [own, "/dev/null", "/dev/shm", "/dev/nvidia"]
    # when the verifier's scratch (packs, reference outputs, other workers) lives in /dev/shm too, the
    # folder holding this work dir is off limits, but for the work dir itself
    parent = os.path.dirname(own)
    protected = [parent] if _under(parent, ["/dev/shm"]) and parent != "/dev/shm" else []

    def writable(path: str) -> bool:
        if _under(path, [own]):
            return True
        if state.out_dir and _under(path, [state.out_dir]):
            return not _candidate_on_stack(state)
        if not _under(path, write_roots) or _under(path, protected):
            return False
        # the verifier's own folders in /dev/shm (kernelagent-<uid>/...) are never the candidate's
        return not path.startswith("/dev/shm/kernelagent")

    # programs that may run: by name, and only from a directory the candidate cannot write to
    untrusted_dirs = [own, "/dev/shm"]  # the only places it may write

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

    def _check_open(args: tuple) -> None:
        path = os.path.realpath(os.fsdecode(args[0]))
        if _is_write(args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None):
            if not writable(path):
                deny(f"write to {path}")
        elif _under(path, state.deny_read) or _foreign_proc(path):
            deny(f"read of {path}")
        elif state.in_dir and _under(path, [state.in_dir]) and _candidate_on_stack(state):
            deny(f"read of the verifier's delivery {path}")  # forward gets its inputs as arguments
        elif path != own and os.path.isdir(path) and any(
                _under(r, [path]) for r in [*state.deny_read, *protected, state.out_dir] if r):
            # a descriptor of a folder above the verifier's files would reach them by relative paths
            # (`dir_fd=`), which the `open` audit event does not show
            deny(f"opening the folder {path}")

    def _resolve(path: object, dir_fd: object) -> str | None:
        """The real path an fd-relative call names (dir_fd resolved through /proc/self/fd)."""
        if not isinstance(path, (str, bytes)):
            return None
        name = os.fsdecode(path)
        if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(name):
            try:
                name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
            except OSError:
                return name
        return os.path.realpath(name)

    def _check_exec(event: str, args: tuple) -> None:
        exe = os.fsdecode(args[0]) if args and isinstance(args[0], (str, bytes)) else ""
        if not exe and len(args) > 1 and args[1]:
            exe = os.fsdecode(list(args[1])[0])
        env = args[3] if event == "subprocess.Popen" and len(args) > 3 else None
        real = _resolve_executable(exe, env)
        if os.path.basename(exe) not in _ALLOWED_EXECUTABLES or _under(real, untrusted_dirs):
            deny(f"running {exe or 'a program'}")

    def _check(event: str, args: tuple) -> None:
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            _check_open(args)
        elif event in ("os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes)):
            listed = os.path.realpath(os.fsdecode(args[0]))
            if _under(listed, state.deny_read) or (
                    state.in_dir and _under(listed, [state.in_dir]) and _candidate_on_stack(state)):
                deny(f"listing {os.fsdecode(args[0])}")
        elif event in _PATH_CHANGES and args and isinstance(args[0], (str, bytes)):
            for path in _changed_paths(event, args, _resolve):
                if path is not None and not writable(path):
                    deny(f"{event} of {path}")
        elif event in ("os.link", "os.symlink") and len(args) > 1 and isinstance(args[0], (str, bytes)):
            # link (src, dst, src_dir_fd, dst_dir_fd); symlink (src, dst, dir_fd), the fd naming dst's folder
            fds = (*args[2:], None, None) if event == "os.link" else (None, *args[2:], None)
            for path in (_resolve(args[0], fds[0]), _resolve(args[1], fds[1])):
                if path is not None and not writable(path):
                    deny(f"{event} of {path}")
        elif event in _NETWORK_EVENTS:
            deny(f"network ({event})")
        elif event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn"):
            _check_exec(event, args)
        elif event in ("os.system", "os.fork", "os.forkpty", "pty.spawn"):
            deny(event)
        elif event in ("ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function", "ctypes.cdata"):
            if _candidate_frames(state, 4):
                deny(f"foreign function access ({event})")
        elif event == "object.__setattr__" and len(args) > 1 and args[1] in ("__code__", "__defaults__",
                                                                               "__kwdefaults__", "__globals__"):
            if _candidate_frames(state, 2):
                deny(f"rewriting {args[1]} of {getattr(args[0], '__qualname__', '?')}")
        elif event == "object.__getattr__":
            # a frame handed out gives every frame and local above it, the verifier's included: refused while
            # candidate code is anywhere on the stack, whichever library does the read (red-team reviews 6
            # and 7: functools.update_wrapper(box, gen, assigned=("gi_frame",)), np.vectorize(getattr))
            if len(args) > 1 and args[1] in _FRAME_ATTRS and _candidate_on_stack(state):
                if not (args[1] == "tb_frame" and _reader_beyond_stdlib(_TB_READERS, state.workdir)):
                    deny(f"introspection ({event}: {args[1]})")
        elif event in _INTROSPECTION_EVENTS:
            if _caller_is_candidate(state):
                deny(f"introspection ({event})")

    sys.addaudithook(hook)


def _candidate_on_stack(state: GuardState) -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == state.candidate_file:
            return True
        frame = frame.f_back
    return False


def install_thread_guard(state: GuardState) -> None:
    """Refuse threads started from candidate code: work in another thread escapes the op recorder
    (dispatch modes are per thread) and the timing events. Python 3.11 raises no audit event for it."""
    import _thread

    original = _thread.start_new_thread

    def start_new_thread(function, args, kwargs=None):  # noqa: ANN001, ANN202 - same signature as _thread's
        if state.active and state.candidate_file and _candidate_on_stack(state):
            state.blocked.append("starting a thread")
            raise PermissionError("blocked by the kernelagent sandbox: starting a thread")
        return original(function, args, *(() if kwargs is None else (kwargs,)))

    _thread.start_new_thread = start_new_thread
    if hasattr(_thread, "start_new"):  # Python 3.11's old alias of the same function
        _thread.start_new = start_new_thread
    threading._start_new_thread = start_new_thread


def install_exec_guard() -> None:
    """Send `_posixsubprocess.fork_exec` through the audit hook's exec check: it forks and runs a program
    with no audit event of its own (subprocess raises one before calling it; a direct call raised none, so
    any program on the system ran; red team, 2026-12-03, with the static policy off, which refuses the
    import). A tripwire like the thread guard: Landlock still grants execute on the system's folders."""
    try:
        import _posixsubprocess
    except ImportError:
        return
    original = _posixsubprocess.fork_exec

    def fork_exec(args, executable_list, *rest, **kwargs):  # noqa: ANN001, ANN202 - same signature as the C one
        # (args, executable_list, close_fds, pass_fds, cwd, env, ...) in Python 3.11 and 3.12
        exe = executable_list[0] if executable_list else (args[0] if args else None)
        cwd, env = (rest[2] if len(rest) > 2 else None), (rest[3] if len(rest) > 3 else None)
        sys.audit("subprocess.Popen", exe, args, cwd, env)
        return original(args, executable_list, *rest, **kwargs)

    _posixsubprocess.fork_exec = fork_exec


# Objects whose public attributes must keep their identity while a candidate runs.
def _watched_namespaces() -> dict[str, object]:
    import time

    import torch
    import torch.nn.functional as F  # noqa: N812

    spaces: dict[str, object] = {"torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.functional": F,
                                 "torch.cuda": torch.cuda, "torch.nn.Module": torch.nn.Module, "time": time,
                                 "torch.testing": torch.testing, "torch.autograd": torch.autograd,
                                 "torch._tensor_str": torch._tensor_str}  # its printer counts host reads
    spaces.update(_host_read_homes())
    if hasattr(torch.cuda, "Event"):
        spaces["torch.cuda.Event"] = torch.cuda.Event
    try:
        import triton
        import triton.testing
        spaces["triton"], spaces["triton.testing"] = triton, triton.testing
        from triton.runtime.jit import JITFunction
        spaces["triton.JITFunction"] = JITFunction  # its run tells the recorder what each launch was given
        interp = sys.modules.get("triton.runtime.interpreter")  # the interpreter's bounds checks (CPU)
        if interp is not None:
            spaces["triton.InterpretedFunction"] = interp.InterpretedFunction
            spaces["triton.InterpreterBuilder"] = interp.InterpreterBuilder
            spaces["triton.GridExecutor"] = interp.GridExecutor
            spaces["triton.runtime.interpreter"] = interp  # _patch_lang_tensor: the conversion guards
            if hasattr(interp, "FunctionRewriter"):
                spaces["triton.FunctionRewriter"] = interp.FunctionRewriter  # trusts the kernels it rewrites
            language = sys.modules.get("triton.language")
            if language is not None:
                spaces["triton.language.tensor"] = language.core.tensor  # its sealed handle
                spaces["triton.language.constexpr"] = language.core.constexpr  # its guarded __call__
    except ImportError:
        pass
    import _thread
    spaces["threading"], spaces["_thread"], spaces["threading.Thread"] = threading, _thread, threading.Thread
    for name, module in list(sys.modules.items()):
        if not name.startswith("kernelagent.verifier") or module is None:
            continue
        spaces[name] = module
        for attr, value in list(vars(module).items()):  # the verifier's own classes, methods included
            if isinstance(value, type) and value.__module__ == name:
                spaces[f"{name}.{attr}"] = value
    return spaces


# namespaces where only the host-read counters are watched (the rest of torch._C is torch's own business)
_COUNTERS_ONLY = frozenset({"torch._C"})


def _host_read_homes() -> dict[str, object]:
    """Where integrity's host-read and storage-write counters live: one of them put back (the original is in
    the wrapper's closure) would read or write values uncounted."""
    import torch
    import torch.serialization
    import torch.utils.dlpack

    return {"torch.UntypedStorage": torch.UntypedStorage, "torch.TypedStorage": torch.TypedStorage,
            "torch.serialization": torch.serialization, "torch.utils.dlpack": torch.utils.dlpack,
            "torch._C": torch._C, "torch._C.PyTorchFileWriter": torch._C.PyTorchFileWriter,
            "torch._ops.OpOverload": torch._ops.OpOverload}  # its redispatch, recorded (integrity)


def snapshot() -> dict[tuple[str, str], tuple[int, int]]:
    """Identity of every attribute of the watched namespaces (taken before the candidate is imported)."""
    snap: dict[tuple[str, str], int] = {}
    for ns_name, ns in _watched_namespaces().items():
        for attr, value in list(vars(ns).items()):
            if _watchable(ns_name, attr, value):
                snap[(ns_name, attr)] = _identity(value)
    return snap


def changed_since(snap: dict[tuple[str, str], tuple[int, int]]) -> list[str]:
    """Names whose object was replaced or deleted since `snap` (new attributes are ignored)."""
    spaces = _watched_namespaces()
    changed = []
    for (ns_name, attr), ident in snap.items():
        ns = spaces.get(ns_name)
        if ns is None:
            continue
        current = vars(ns).get(attr, _MISSING)
        if current is _MISSING or (_identity(current) != ident and not _dynamo_rewrap(ns_name, attr, current, ident)):
            changed.append(f"{ns_name}.{attr}")
    return changed


def _dynamo_rewrap(ns_name: str, attr: str, current: object, ident: tuple[int, int]) -> bool:
    """Importing torch._dynamo (workers import it only when something asks for it: torch.compile,
    torch.library) replaces torch.manual_seed with torch's own disable-dynamo wrapper around the same
    function. That one rebinding is torch's, not the candidate's: the wrapper's code and the function it
    closes over are both checked."""
    if (ns_name, attr) != ("torch", "manual_seed") or "torch._dynamo" not in sys.modules:
        return False
    import torch

    code, cells = getattr(current, "__code__", None), getattr(current, "__closure__", None) or ()
    if code is None or code is not getattr(torch._disable_dynamo(_identity), "__code__", None):
        return False
    try:
        inner = dict(zip(code.co_freevars, (c.cell_contents for c in cells), strict=False))
    except ValueError:  # an empty cell
        return False
    return "fn" in inner and _identity(inner["fn"]) == ident


_MISSING = object()


def _watchable(ns_name: str, attr: str, value: object) -> bool:
    """Callables (functions, methods, classes); private state and plain values change legitimately.
    In the verifier's own modules private functions count too (they do the checking)."""
    own = ns_name.startswith("kernelagent.verifier")
    if isinstance(value, types.FunctionType) and getattr(value, "_ka_counted", False):
        return True  # the host-read counters (integrity), dunders and private names included
    if ns_name in _COUNTERS_ONLY:
        return False
    if attr.startswith("__") and attr not in ("__call__", "__torch_function__", "__torch_dispatch__"):
        return False
    if attr.startswith("_") and not own:
        return False
    return callable(value) or isinstance(value, (staticmethod, classmethod, property))


def _identity(value: object) -> tuple[int, int]:
    """The object and, for functions, its code: rewriting __code__ keeps the function's identity."""
    code = getattr(value, "__code__", None)
    return id(value), id(code) if code is not None else 0


_OWN_PREFIX = "kernelagent"


def _own(name: str) -> bool:
    return name == _OWN_PREFIX or name.startswith(_OWN_PREFIX + ".") or name == "__main__"


@contextlib.contextmanager
def hidden_modules() -> Iterator[None]:
    """While candidate code runs, the verifier's modules are not in `sys.modules`: whatever route reaches
    `sys.modules`, it finds no live verifier state (an import from the candidate gets a fresh copy, not
    the worker's objects). `__main__` is swapped for an empty module for the same reason."""
    hidden = {k: v for k, v in list(sys.modules.items()) if _own(k)}
    for name in hidden:
        del sys.modules[name]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        for name in [k for k in list(sys.modules) if _own(k)]:
            del sys.modules[name]  # copies the candidate imported meanwhile go with the dummy __main__
        sys.modules.update(hidden)
