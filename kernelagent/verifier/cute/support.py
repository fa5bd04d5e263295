"""CuTe DSL inside the verifier's worker: launch counting, a compile cache, ptxas facts, the
compile-only path for machines without a GPU, and error messages trimmed to the candidate's code.

At module level only the standard library and the stdlib-only siblings cute_errors (error
categories and cleaning) and cute_keys (compile-cache keys) are imported; cutlass and torch are
imported inside the functions, so the worker pays for cutlass only when a candidate uses CuTe DSL.

`install_hooks(stats)` must run before the candidate is imported. It patches, at class level:

* `CompileCallable._compile` (every `cute.compile(...)` and `cute.compile[...](...)`): the compile
  cache, and the "compile" tag on exceptions raised while tracing or compiling;
* `compile_and_cache` of the DSL classes (every real compile, explicit or implicit): timing and
  the ptxas report (registers, spills, stack, static shared memory, barriers) for each kernel;
* `CompilerDiagnosticSession.format_success`: where the DSL prints ptxas remarks to stderr; they
  are captured into the compile record instead;
* `JitCompiledFunction.to` (where executors are made): each executor is tagged with its kernels;
* `JitExecutor.run_compiled_program`: the one place where compiled host code runs on a GPU, for
  `compiled(...)`, `compiled.to(dev)(...)` and a directly called `@cute.jit` function alike;
* `JitCompiledFunction.run_compiled_program` and `__call__`: the "run" tag on exceptions, the
  streams a candidate passes, and the launch skip of `compile_only_mode`.

`stats` (a dict the caller owns; keys are created when missing):

    cute_launches          int      kernel launches that ran (host calls x launch sites per call)
    cute_calls             int      host calls of compiled functions that ran
    cute_kernels           Counter  kernel symbol -> launches that ran
    cute_launches_skipped  int      launches not run under compile_only_mode (no GPU)
    cute_kernels_skipped   Counter  kernel symbol -> launches skipped
    cute_compiles          list     one dict per compiled kernel: kernel, backend="cute", function,
                                    target, compile_seconds, and from ptxas: registers, spills
                                    (spill store + load bytes), spill_stores, spill_loads,
                                    stack_bytes, static_shared_bytes, barriers; shared_bytes is
                                    None (CuTe's shared memory is dynamic, not in the report)
    cute_cache             dict     hits, misses, bypass (arguments the key cannot describe),
                                    seconds_saved
    cute_streams           list     distinct CUstream handles passed to compiled functions
    cute_diagnostics       list     other compiler diagnostics printed on success (warnings)
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from kernelagent.verifier.cute.errors import (
    ANSI,
    DEFAULT_ARCH,
    MAX_CHARS,
    NO_GPU,
    NO_GPU_NOTE,
    classify_exception,
    clean_error,
    tag_phase,
)
from kernelagent.verifier.cute.keys import Unkeyable, compile_key

__all__ = [
    "DEFAULT_ARCH", "NO_GPU", "NO_GPU_NOTE", "classify_exception", "clean_error", "compile_key",
    "compile_only_mode", "compile_only_outcome", "install_hooks", "parse_ptxas", "remove_launch_hooks",
]


class _Hooks:
    """Process-wide hook state: the stats dict, the cache and the compile-only switch."""

    def __init__(self) -> None:
        self.installed = False
        self.stats: dict[str, Any] = {}
        self.cache: dict[tuple, Any] = {}
        self.compile_only = False
        self.originals: dict[tuple[type, str], Any] = {}
        self.local = threading.local()  # .ptxas: list[str] while a compile runs
        self.on_stream: Callable[[int], None] | None = None  # told the stream of every compiled-function call


_HOOKS = _Hooks()


# ============================================================================= public API


def install_hooks(stats: dict, *, ptxas_report: bool = True, line_info: bool = True,
                  on_stream: Callable[[int], None] | None = None) -> None:
    """Instrument CuTe DSL in this process; call before the candidate is imported.

    `ptxas_report` asks ptxas for its resource report (`remarks{ptx}`: `ptxas -v`, no code
    change); `line_info` adds source lines to the IR (`CUTE_DSL_LINEINFO`) so that IR verification
    errors name the candidate's line and ncu can show source. `on_stream(handle)` is called with the
    CUstream of every call of a compiled function (a CuTe launch takes its stream as an argument, which
    no launch hook sees: the worker rejects one off the caller's stream). Calling it again only rebinds
    `stats` (and `on_stream` when given). Raises ImportError when cutlass is not installed.
    """
    _init_stats(stats)
    _HOOKS.stats = stats
    if on_stream is not None:
        _HOOKS.on_stream = on_stream
    if _HOOKS.installed:
        return
    _configure_environment(ptxas_report, line_info)
    import cutlass.cute  # noqa: F401 - imports the DSL, builds its singletons

    _patch_compile()
    _patch_run()
    _HOOKS.installed = True


@contextlib.contextmanager
def compile_only_mode(stats: dict | None = None, arch: str = DEFAULT_ARCH) -> Iterator[dict]:
    """Run a candidate's forward on a machine without a GPU: compile for `arch`, skip launches.

    Inside the block every launch of a compiled CuTe function is recorded
    (`cute_launches_skipped`) and skipped instead of failing in CUDA initialisation, so the
    forward returns and every kernel it would launch has been compiled; its outputs hold garbage
    and must not be compared. Host-only `@cute.jit` functions (no kernel) still run. Without CUDA
    in torch, `torch.cuda.current_stream()`/`default_stream()` return a null stream (handle 0)
    so that the usual `cuda.CUstream(torch.cuda.current_stream().cuda_stream)` works.
    """
    if stats is None:
        stats = _HOOKS.stats if _HOOKS.installed else {}
    _set_arch(arch)
    install_hooks(stats)
    previous = _HOOKS.compile_only
    _HOOKS.compile_only = True
    try:
        with _null_streams():
            yield stats
    finally:
        _HOOKS.compile_only = previous


def compile_only_outcome(stats: dict, arch: str = DEFAULT_ARCH) -> tuple[str, str]:
    """After a forward ran in compile_only_mode: ('ok', note) when it reached at least one launch
    (everything it launches compiled), else ('no_kernel_launched', message)."""
    skipped = int(stats.get("cute_launches_skipped", 0))
    if skipped:
        kernels = len(stats.get("cute_kernels_skipped", {}))
        return "ok", f"compiled {kernels} kernel(s) for {arch}; " + NO_GPU_NOTE.format(arch=arch)
    return "no_kernel_launched", "forward reached no launch of a compiled CuTe DSL kernel"


def remove_launch_hooks() -> None:
    """Restore the run path (timing must not pay a Python frame per launch); compiles stay hooked."""
    from cutlass.base_dsl.jit_executor import JitExecutor

    original = _HOOKS.originals.get((JitExecutor, "run_compiled_program"))
    if original is not None:
        JitExecutor.run_compiled_program = original


# ============================================================================= environment


def _init_stats(stats: dict) -> None:
    for key, default in (("cute_launches", 0), ("cute_calls", 0), ("cute_launches_skipped", 0)):
        stats.setdefault(key, default)
    for key in ("cute_kernels", "cute_kernels_skipped"):
        stats.setdefault(key, Counter())
    for key in ("cute_compiles", "cute_streams", "cute_diagnostics"):
        stats.setdefault(key, [])
    stats.setdefault("cute_cache", {"hits": 0, "misses": 0, "bypass": 0, "seconds_saved": 0.0})


def _configure_environment(ptxas_report: bool, line_info: bool) -> None:
    """Set the DSL's variables; they are read when cutlass builds its singletons, so they are
    also written onto those singletons when cutlass was imported first."""
    opts = os.environ.get("CUTE_DSL_COMPILER_OPT", "")
    if ptxas_report and "remarks" not in opts:
        os.environ["CUTE_DSL_COMPILER_OPT"] = (opts + " remarks{ptx}").strip()
    if line_info:
        os.environ.setdefault("CUTE_DSL_LINEINFO", "1")
    for envar in _dsl_envars():
        envar.compiler_opt = os.environ.get("CUTE_DSL_COMPILER_OPT", "")
        envar.lineinfo = os.environ.get("CUTE_DSL_LINEINFO", "0") not in ("", "0", "False", "false")


def _set_arch(arch: str) -> None:
    if not os.environ.get("CUTE_DSL_ARCH"):
        os.environ["CUTE_DSL_ARCH"] = arch
        for envar in _dsl_envars():
            envar.arch = arch


def _detected_arch() -> str:
    """The arch the DSL compiles for when CUTE_DSL_ARCH is unset (it probes the GPU once)."""
    for envar in _dsl_envars():
        with contextlib.suppress(Exception):  # noqa: BLE001 - a probe failure only loses a label
            return str(envar.arch)
    return "auto"


def _dsl_envars() -> list[Any]:
    if "cutlass.base_dsl.dsl" not in sys.modules:
        return []
    from cutlass.base_dsl.dsl import BaseDSL

    return [dsl.envar for dsl in type(BaseDSL)._instances.values()]


class _NullStream:
    """What `torch.cuda.current_stream()` returns in compile-only mode when torch has no CUDA."""

    cuda_stream = 0
    stream_id = 0
    device_index = 0

    def synchronize(self) -> None:
        return None


@contextlib.contextmanager
def _null_streams() -> Iterator[None]:
    import torch

    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.current_stream, torch.cuda.default_stream
    torch.cuda.current_stream = torch.cuda.default_stream = lambda device=None: _NullStream()
    try:
        yield
    finally:
        torch.cuda.current_stream, torch.cuda.default_stream = saved


# ============================================================================= compile hooks


def _subclasses(cls: type) -> list[type]:
    out, todo = [], list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        if sub not in out:
            out.append(sub)
            todo.extend(sub.__subclasses__())
    return out


def _patch(cls: type, name: str, make: Callable[[Any], Any]) -> None:
    original = cls.__dict__[name]
    _HOOKS.originals[(cls, name)] = original
    setattr(cls, name, functools.wraps(original)(make(original)))


def _patch_compile() -> None:
    from cutlass.base_dsl import diagnostics
    from cutlass.base_dsl.compiler import CompileCallable
    from cutlass.base_dsl.dsl import BaseDSL

    # The public entry of `cute.compile` and `cute.compile[...]`: the cache sits here, above
    # tracing, so a hit costs neither the trace nor the compile.
    _patch(CompileCallable, "_compile", _cached_compile)
    # Every real compile (explicit, or a directly called @cute.jit on a miss of the DSL's own
    # cache) goes through compile_and_cache of the DSL class; each override is wrapped once.
    for cls in [BaseDSL, *_subclasses(BaseDSL)]:
        if "compile_and_cache" in cls.__dict__:
            _patch(cls, "compile_and_cache", _recorded_compile)
        if "_func" in cls.__dict__:
            _patch(cls, "_func", _tagged_func)
    # The DSL prints collected remarks (the ptxas report) from here, after the pass pipeline.
    _patch(diagnostics.CompilerDiagnosticSession, "format_success", _captured_remarks)


def _cached_compile(original: Any) -> Any:
    def _compile(self: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        stats = _HOOKS.stats["cute_cache"]
        try:
            key = compile_key(self, func, args, kwargs)
        except Unkeyable:
            key = None
        if key is not None and key in _HOOKS.cache:
            stats["hits"] += 1
            fn, seconds = _HOOKS.cache[key]
            stats["seconds_saved"] += seconds
            return fn
        t0 = time.perf_counter()
        try:
            fn = original(self, func, *args, **kwargs)
        except BaseException as e:
            tag_phase(e, "compile")
            raise
        stats["misses" if key is not None else "bypass"] += 1
        if key is not None:
            _HOOKS.cache[key] = (fn, time.perf_counter() - t0)
        return fn

    return _compile


def _tagged_func(original: Any) -> Any:
    """A directly called @cute.jit traces, compiles and runs here; anything not already tagged
    "run" by the run hooks failed while tracing or compiling."""

    def _func(self: Any, *args: Any, **kwargs: Any) -> Any:
        _record_streams(args, kwargs)  # a direct call runs past the compiled function's own __call__
        try:
            return original(self, *args, **kwargs)
        except BaseException as e:
            tag_phase(e, "compile")
            raise

    return _func


def _recorded_compile(original: Any) -> Any:
    def compile_and_cache(self: Any, *args: Any, **kwargs: Any) -> Any:
        local = _HOOKS.local
        if getattr(local, "ptxas", None) is not None:  # an override calling super(): record once
            return original(self, *args, **kwargs)
        local.ptxas = []
        t0 = time.perf_counter()
        try:
            fn = original(self, *args, **kwargs)
            _record_compile(fn, local.ptxas, time.perf_counter() - t0)
            return fn
        finally:
            local.ptxas = None

    return compile_and_cache


def _captured_remarks(original: Any) -> Any:
    def format_success(self: Any) -> str:
        text = original(self)
        sink = getattr(_HOOKS.local, "ptxas", None)
        if not text or sink is None:
            return text
        plain = ANSI.sub("", text)
        if "ptxas" in plain:
            sink.append(plain)
        else:
            _HOOKS.stats["cute_diagnostics"].append(plain[:MAX_CHARS])
        return ""  # the facts go to stats, not to the candidate's stderr

    return format_success


def _record_compile(fn: Any, ptxas_texts: list[str], seconds: float) -> None:
    facts = parse_ptxas("\n".join(ptxas_texts))
    names = list(getattr(fn, "kernel_info", {}) or {}) or list(facts)
    target = os.environ.get("CUTE_DSL_ARCH") or _detected_arch()
    for name in names:
        entry = {"kernel": name, "backend": "cute", "function": getattr(fn, "function_name", ""),
                 "target": target, "compile_seconds": round(seconds, 4), "shared_bytes": None,
                 "num_warps": None, "num_stages": None}
        entry.update(facts.get(name, _EMPTY_FACTS))
        if entry["spills"]:  # the DSL's remark names a likely pressure region in the source
            entry["spill_remark"] = next((t for t in ptxas_texts if "spill" in t), "")[:MAX_CHARS]
        _HOOKS.stats["cute_compiles"].append(entry)


_EMPTY_FACTS = {"registers": None, "spills": None, "spill_stores": None, "spill_loads": None,
                "stack_bytes": None, "static_shared_bytes": None, "barriers": None}
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FACTS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "static_shared_bytes": re.compile(r"(\d+) bytes smem"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
}


def parse_ptxas(text: str) -> dict[str, dict[str, int | None]]:
    """Per-kernel facts from `ptxas -v` output: registers, barriers, static shared memory, stack,
    spill stores and loads and their sum `spills` (bytes). Missing facts are None; ptxas omits
    static shared memory when there is none, so it is 0 wherever the registers were found."""
    text = " ".join(text.split())  # the DSL wraps long remarks; facts may straddle a line break
    out: dict[str, dict[str, int | None]] = {}
    starts = [(m.start(), m.group(1)) for m in _ENTRY.finditer(text)] + [(len(text), "")]
    for (begin, name), (end, _) in zip(starts, starts[1:], strict=False):
        chunk = text[begin:end]
        facts: dict[str, int | None] = {}
        for key, pattern in _FACTS.items():
            m = pattern.search(chunk)
            facts[key] = int(m.group(1)) if m else None
        if facts["static_shared_bytes"] is None and facts["registers"] is not None:
            facts["static_shared_bytes"] = 0
        stores, loads = facts["spill_stores"], facts["spill_loads"]
        facts["spills"] = None if stores is None or loads is None else stores + loads
        out[name] = facts
    return out


# ============================================================================= run hooks


def _patch_run() -> None:
    from cutlass.base_dsl.jit_executor import JitCompiledFunction, JitExecutor

    # Executors are made here (lazily on the first call, or by `compiled.to(device)`); each is
    # tagged with the kernels its host code launches, which the executor cannot see itself.
    for cls in [JitCompiledFunction, *_subclasses(JitCompiledFunction)]:
        if "to" in cls.__dict__:
            _patch(cls, "to", _tagged_to)
    # The one funnel where compiled host code runs: every launch on a GPU passes here.
    _patch(JitExecutor, "run_compiled_program", _counted_run)
    # Before an executor exists (first call, and every call without a GPU): the skip of
    # compile-only mode and the "run" tag on exceptions.
    _patch(JitCompiledFunction, "run_compiled_program", _function_run)
    _patch(JitCompiledFunction, "__call__", _function_call)
    # `compiled.to(device)(...)` calls the executor itself: its stream is told to the recorder too
    _patch(JitExecutor, "__call__", _executor_call)


def _launch_facts(fn: Any) -> tuple[tuple[str, ...], int]:
    """(kernel symbols, launch sites in the host code) of a compiled function, cached on it.
    Sites are the `_cudaLaunchKernel*` calls in its host IR; a launch inside a host-side dynamic
    loop counts once per call (a lower bound)."""
    cached = getattr(fn, "_kernelagent_launch_facts", None)
    if cached is not None:
        return cached
    names = tuple(getattr(fn, "kernel_info", {}) or {})
    sites = 0
    if getattr(fn, "has_gpu_module", True) and getattr(fn, "ir_module", None) is not None:
        sites = len(re.findall(r"llvm\.call @_?cudaLaunchKernel", str(fn.ir_module)))
    if getattr(fn, "has_gpu_module", True) and sites == 0:
        sites = len(names)
    cached = (names, sites)
    with contextlib.suppress(AttributeError, TypeError):
        fn._kernelagent_launch_facts = cached
    return cached


def _tagged_to(original: Any) -> Any:
    def to(self: Any, device: Any = None) -> Any:
        if _HOOKS.compile_only and getattr(self, "has_gpu_module", True):
            return _SkippingExecutor(self)
        executor = original(self, device)
        executor._kernelagent_launch_facts = _launch_facts(self)
        return executor

    return to


def _counted_run(original: Any) -> Any:
    def run_compiled_program(self: Any, exe_args: list[Any]) -> Any:
        try:
            result = original(self, exe_args)
        except BaseException as e:
            tag_phase(e, "run")
            raise
        names, sites = getattr(self, "_kernelagent_launch_facts", ((), 0))
        _count(names, sites, "cute_launches", "cute_kernels")
        _HOOKS.stats["cute_calls"] += 1
        return result

    return run_compiled_program


def _function_run(original: Any) -> Any:
    def run_compiled_program(self: Any, exe_args: list[Any]) -> Any:
        if _HOOKS.compile_only and getattr(self, "has_gpu_module", True):
            names, sites = _launch_facts(self)
            _count(names, sites, "cute_launches_skipped", "cute_kernels_skipped")
            return 0
        try:
            return original(self, exe_args)
        except BaseException as e:
            tag_phase(e, "run")
            raise

    return run_compiled_program


def _function_call(original: Any) -> Any:
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        _record_streams(args, kwargs)
        try:
            return original(self, *args, **kwargs)
        except BaseException as e:
            tag_phase(e, "run")
            raise

    return __call__


class _SkippingExecutor:
    """`compiled.to(device)` in compile-only mode: records each call as skipped launches."""

    def __init__(self, fn: Any) -> None:
        self._facts = _launch_facts(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> int:
        _count(*self._facts, "cute_launches_skipped", "cute_kernels_skipped")
        return 0


def _count(names: tuple[str, ...], sites: int, total_key: str, names_key: str) -> None:
    stats = _HOOKS.stats
    stats[total_key] += sites
    counter = stats[names_key]
    per_name = max(1, sites // max(1, len(names))) if names else 0
    for name in names:
        counter[name] = counter.get(name, 0) + per_name


def _executor_call(original: Any) -> Any:
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        _record_streams(args, kwargs)
        return original(self, *args, **kwargs)

    return __call__


def _record_streams(args: tuple, kwargs: dict) -> None:
    seen = _HOOKS.stats["cute_streams"]
    for value in (*args, *kwargs.values()):
        if any(c.__name__ == "CUstream" for c in type(value).__mro__):  # a subclass is a CUstream too
            handle = int(value)
            if handle not in seen:
                seen.append(handle)
            if _HOOKS.on_stream is not None:
                _HOOKS.on_stream(handle)


