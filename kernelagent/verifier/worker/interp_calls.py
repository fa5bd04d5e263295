"""What may run while a Triton kernel is interpreted (CPU workers).

Under the interpreter a kernel is Python: its own rewritten code, Triton's, NumPy's. Compiled for a GPU it
is what Triton's code generator made of its source, and nothing else runs. Python the candidate gets run
during a launch any other way sees the blocks' values and can compute where the compiled kernel does not
(red team, 2026-12-03, eleven softmax cheats accepted on CPU): a helper a constexpr wraps (`"{}".format`
through `tl.constexpr`, a text parser), a function `tl.core.dispatch` hands the handles to, a helper
registered among the interpreter's rewritten kernels, list comprehensions and str / repr / getattr in a
kernel branch the compiler drops. So while a grid runs, a profile hook records:

* a call into Python code that is neither a kernel the interpreter rewrote (the code objects this worker
  compiled itself: `trust`, not the interpreter's public cache, which the candidate can write) nor from
  Triton's, NumPy's, torch's, the standard library's or the verifier's own files;
* a call from kernel code into a C function outside `_KERNEL_BUILTINS` (what Triton compiles in a kernel:
  print, len, min, max, getattr, ...): `format`, `str.split`, `io.StringIO.getvalue` have no compiled
  counterpart.

After the grid, any record fails the launch (`InterpreterInternals`, the candidate's runtime error). Also
exposed: `printing()`, whether kernel code is inside a `print` (the one way it may turn a block into text).

`tl.reduce` / `tl.associative_scan` call a kernel's own combine function: interp_combine makes the interpreter call
its rewritten copy (kernel code here), not the function as written.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from typing import Any

from kernelagent.verifier.worker.interp_lines import TRACERS, follow

TRUSTED: set[Any] = set()  # code objects of the kernels this worker's interpreter rewrote
_FOUND: list[str] = []  # what the hook saw during the running grid
_PRINT_DEPTH = [0]  # kernel code inside a `print` call
# what Triton's code generator also evaluates in a kernel (its builtin namespace; getattr on `tl`, say)
_KERNEL_BUILTINS = frozenset({print, len, min, max, abs, isinstance, round, divmod, pow, issubclass, getattr,
                              hasattr})


def trust(fn: Any) -> Any:
    """Record a function the interpreter rewrote from a kernel's source (its code object) as kernel code."""
    TRUSTED.add(fn.__code__)
    return fn


def printing() -> bool:
    return _PRINT_DEPTH[0] > 0


@functools.cache
def _roots() -> tuple[str, ...]:
    """Folders whose code may run during a launch: installed packages (Triton, NumPy, torch), the standard
    library, the verifier's own modules."""
    paths = sysconfig.get_paths()
    verifier = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    found = {os.path.realpath(p) + os.sep for p in (paths["stdlib"], paths["platstdlib"], paths["purelib"],
                                                    paths["platlib"], verifier)}
    import numpy
    import torch
    import triton

    for module in (numpy, triton, torch):
        found.add(os.path.dirname(os.path.dirname(os.path.realpath(module.__file__))) + os.sep)
    return tuple(sorted(found))


_SEEN_FILES: dict[str, bool] = {}  # file -> whether its code may run during a launch


def _allowed_file(path: str) -> bool:
    ok = _SEEN_FILES.get(path)
    if ok is None:
        ok = _SEEN_FILES[path] = path.startswith("<") or os.path.realpath(path).startswith(_roots())
    return ok


def _hook(frame: Any, event: str, arg: Any) -> None:
    """Called by the interpreter for every Python call and return and every C call while a grid runs: the
    common cases (Triton's code, a C call from it) return after a lookup or two."""
    if event == "call":
        code = frame.f_code
        if code in TRUSTED:
            trace = TRACERS.get(code)
            if trace is not None:
                follow(frame, trace)  # a kernel's own code: what of it runs is recorded (interp_lines)
            return
        if _allowed_file(code.co_filename):
            return
        _FOUND.append(f"{code.co_name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno}) ran "
                      "during the launch")
    elif event == "c_call":
        if frame.f_code not in TRUSTED:
            return
        if arg is print:
            _PRINT_DEPTH[0] += 1
        elif arg not in _KERNEL_BUILTINS:
            _FOUND.append(f"kernel code called {getattr(arg, '__qualname__', arg)!s} (line {frame.f_lineno})")
    elif arg is print and event != "return" and frame.f_code in TRUSTED:  # c_return, c_exception
        _PRINT_DEPTH[0] = max(_PRINT_DEPTH[0] - 1, 0)


def watch() -> None:
    """Profile every interpreted grid (GridExecutor.__call__): from its first program to its end."""
    from triton.runtime import interpreter as interp

    from kernelagent.verifier.worker import interp_combine, interp_lines
    from kernelagent.verifier.worker.interp_bounds import InterpreterInternals

    executor = interp.GridExecutor
    if getattr(executor.__call__, "_ka_watched", False):
        return
    _roots()
    run, set_idx = executor.__call__, interp.InterpreterBuilder.set_grid_idx

    def set_grid_idx(self: Any, *idx: Any) -> Any:
        if sys.getprofile() is not _hook:
            sys.setprofile(_hook)
        interp_lines.start()  # which instructions of the kernel's own code run (compared with the AOT compile)
        return set_idx(self, *idx)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        _FOUND.clear()
        _PRINT_DEPTH[0] = 0
        interp_lines.clear()
        try:
            result = run(self, *args, **kwargs)
        finally:
            sys.setprofile(None)
            interp_lines.stop()
        if _FOUND:
            raise InterpreterInternals("Python beside the kernel's own code ran while it was interpreted (compiled "
                                       f"for the GPU nothing of it runs): {'; '.join(sorted(set(_FOUND))[:3])}")
        return result

    call._ka_watched = True  # type: ignore[attr-defined]
    executor.__call__, interp.InterpreterBuilder.set_grid_idx = call, set_grid_idx
    _guard_constexpr_calls(InterpreterInternals)
    interp_combine.install(InterpreterInternals)  # tl.reduce / tl.associative_scan: the kernel's combine code


def _guard_constexpr_calls(error: type[Exception]) -> None:
    """`tl.constexpr(f)(block)` runs any callable on a block: under the interpreter on its values, compiled on
    an IR value. Only Triton's own functions may be called so on a block."""
    import triton.language as tl

    constexpr = tl.core.constexpr
    original = constexpr.__call__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        fn = self.value
        own = getattr(getattr(fn, "__code__", None), "co_filename", "")
        if not _triton_code(fn, own) and any(isinstance(a, tl.core.tensor) for a in (*args, *kwargs.values())):
            raise error(f"a constexpr-wrapped {getattr(fn, '__qualname__', fn)!s} called on a Triton block: "
                        "compiled for the GPU it would see an IR value, not the block's values")
        return original(self, *args, **kwargs)

    constexpr.__call__ = __call__


def _triton_code(fn: Any, filename: str) -> bool:
    """A kernel (@triton.jit: interpreted here), a function this worker's interpreter rewrote, or Triton's own."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return isinstance(fn, (JITFunction, InterpretedFunction)) or getattr(fn, "__code__", None) in TRUSTED or (
        bool(filename) and filename.startswith(_triton_root()))


@functools.cache
def _triton_root() -> str:
    import triton

    return os.path.dirname(os.path.realpath(triton.__file__)) + os.sep
