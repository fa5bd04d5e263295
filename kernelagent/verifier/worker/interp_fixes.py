"""Fixes that make Triton 3.6's interpreter compute bf16 the way the GPU does.

1. fp32 -> bf16 conversion truncates in the interpreter and rounds to nearest even on the GPU; the
   truncation doubles a bf16 kernel's output error on CPU and can push honest kernels over the bf16
   tolerance.
2. `tl.dot` on bf16 operands multiplies their raw uint16 storage (bf16 is kept as uint16 there),
   which gives garbage; the GPU's tensor cores multiply the values with fp32 accumulation.
3. `@triton.autotune` benchmarks its configs through the GPU driver, so it fails without one.
4. (Not about bf16, but about what the interpreter runs.) To run a kernel, the interpreter copies its own
   module's globals (`inspect`, `np`, `textwrap`, ...) into the module that defined the kernel, so after the
   first launch the candidate can use modules it never imported. The rewritten kernel now runs in a copy, where
   `print` is `tl.device_print`, as Triton's code generator binds it in a compiled kernel.
5. The interpreter re-reads a kernel's source at its first launch and starts at the *last* line that begins
   with `def `, even inside a string; the GPU compiler (and the AOT check) starts at the first `def` of the
   text read when the kernel was defined. A candidate could have the interpreter run Python the compiler
   never sees. The rewriter now reads the text the compiler reads, taken when the kernel is defined; each
   rewritten function is handed to `interp_lines`, which traces what of it runs (compared with the AOT compile).
6. The interpreter's `tl.device_print` calls Python's `print`, so whoever holds `sys.stdout` reads the
   printed values (read through NumPy, unseen by the host-read counters): a candidate captured its inputs
   that way and computed on the host (red team, 2026-12-03). It now writes straight to file descriptor 2,
   as the GPU's printf writes to the process's own output, out of the candidate's reach.
Applied in CPU-mode workers only, before any candidate is imported.
"""

from __future__ import annotations

import inspect
import io
import os
import re
import textwrap
from typing import Any

from kernelagent.verifier.worker import interp_calls, interp_lines


def round_bf16_to_nearest() -> bool:
    """Patch the interpreter's float conversion; False if this Triton has no such hook."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    truncating = getattr(interpreter, "_convert_float", None)
    if truncating is None:
        return False

    def convert(values: Any, input_dtype: Any, output_dtype: Any, rounding_mode: Any) -> Any:
        if not (input_dtype == tl.float32 and output_dtype == tl.bfloat16):
            return truncating(values, input_dtype, output_dtype, rounding_mode)
        flat = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
        bits = flat.view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        rounded[np.isnan(flat)] = 0x7FC0
        return rounded.reshape(np.shape(values))

    interpreter._convert_float = convert
    return True


def bf16_dot_in_fp32() -> bool:
    """Make the interpreter's tl.dot widen bf16 operands to fp32 before multiplying."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    original = getattr(builder, "create_dot", None)
    if original is None:
        return False

    def widen(handle: Any) -> Any:
        if getattr(handle.dtype, "scalar", handle.dtype) == tl.bfloat16:
            data = interpreter._convert_float(handle.data, tl.bfloat16, tl.float32, None).view(np.float32)
            return interpreter.TensorHandle(data, tl.float32)
        return handle

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot
    return True


def autotune_without_benchmarks() -> bool:
    """`@triton.autotune` with several configs benchmarks them, which needs a GPU driver; without one,
    rank the configs by their order instead (the interpreter then runs the first)."""
    from triton.runtime.autotuner import Autotuner

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
        rank = float(self.configs.index(config)) if config in self.configs else 0.0
        return [rank, rank, rank]

    Autotuner._bench = _bench
    return True


def keep_kernel_modules_clean() -> bool:
    """Run each rewritten kernel in a copy of its module's globals plus the interpreter's own, instead of
    writing the interpreter's globals into the module; False if this Triton has no such rewriter."""
    from triton.runtime import interpreter

    rewriter = getattr(interpreter, "FunctionRewriter", None)
    if rewriter is None or not hasattr(rewriter, "_compile_and_exec"):
        return False
    own = vars(interpreter)
    import triton.language as tl

    _BUILTIN_DEVICE_PRINT[0] = tl.core.device_print

    def compile_and_exec(self: Any, transformed_ast: Any) -> Any:
        code = compile(transformed_ast, filename=self.filename, mode="exec")
        interp_calls.TRUSTED.add(code)  # the module body that defines the rewritten kernel (run once, just below)
        scope = {**own, **self.fn.__globals__}  # the module's names first; the module itself is not touched
        scope["print"] = kernel_print  # what `print` is in a compiled kernel (a module's own `print` global too)
        local_namespace = {**self.kwargs}
        exec(code, scope, local_namespace)  # noqa: S102 - the interpreter's own step, on the kernel's own source
        rewritten = local_namespace[self.fn.__name__]
        _bind_as_defined(rewritten, self.fn)
        return interp_calls.trust(rewritten)

    rewriter._compile_and_exec = compile_and_exec
    return True


def kernel_print(*args: Any, **kwargs: Any) -> Any:
    """`print` in kernel code: compiled it is `tl.device_print` (Triton's code generator binds the name so), and
    so it is under the interpreter, whose device_print stands in for Triton's during a grid. Python's own print
    let kernel code turn blocks into text in a sink of its choosing (`print(..., file=...)`, red team round 11);
    device_print takes no `file`."""
    import triton.language as tl

    for module in (tl, tl.core):
        patched = module.device_print
        if patched is not _BUILTIN_DEVICE_PRINT[0]:
            return patched(*args, **kwargs)
    return tl.core.device_print(*args, **kwargs)  # outside a grid: fails as compiled code would outside a kernel


_BUILTIN_DEVICE_PRINT: list[Any] = [None]  # Triton's own device_print, before any interpreter patch


def _bind_as_defined(rewritten: Any, original: Any) -> None:
    """Give the rewritten kernel the defaults and annotations its `def` had when the module ran it: running the
    `def` again evaluates them again, and a default read from a global that changed since (red team, round 12: a
    constexpr default 0 at import, 1 when first launched) would bind differently from the compiled kernel."""
    rewritten.__defaults__ = original.__defaults__
    rewritten.__kwdefaults__ = original.__kwdefaults__
    rewritten.__annotations__ = dict(original.__annotations__)


def casts_and_ints_as_compiled() -> bool:
    """Two places where the interpreter's NumPy arithmetic is not the GPU's (red team, round 12): a float cast to
    an integer saturates on the GPU (PTX cvt.rzi; NaN gives 0) where NumPy gives INT_MIN or wraps, and an int
    argument in [2**31, 2**32) is an i64 in the compiled kernel but was held in a NumPy uint32 (so `a + a < a`
    held only under the interpreter). False if this Triton lacks the hooks."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter
    from triton.runtime.jit import mangle_type

    builder = getattr(interpreter, "InterpreterBuilder", None)
    implicit, np_dtype = getattr(interpreter, "_implicit_cvt", None), getattr(interpreter, "_get_np_dtype", None)
    if builder is None or implicit is None or np_dtype is None or not hasattr(builder, "cast_impl"):
        return False

    def fp_to_int(self: Any, src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar == tl.bfloat16:  # held as raw bits: the interpreter's own path
            return self.cast_impl(src, dst_type)
        target = np_dtype(dst_type)
        info, data = np.iinfo(target), src.data.astype(np.float64)
        top, bottom = float(int(info.max) + 1), float(int(info.min) - 1)  # exact powers of two (or -2**63)
        out = np.zeros(data.shape, dtype=target)  # NaN stays 0
        inside = (data > bottom) & (data < top)
        out[inside] = data[inside].astype(target)  # truncation toward zero, as cvt.rzi
        out[data >= top], out[data <= bottom] = info.max, info.min
        return interpreter.TensorHandle(out, dst_type.scalar)

    def implicit_cvt(arg: Any) -> Any:
        if type(arg) is int and 2**31 <= arg < 2**32:
            ty = tl.str_to_ty(mangle_type(arg), None)
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np_dtype(ty)), ty), ty)
        return implicit(arg)

    builder.create_fp_to_si = builder.create_fp_to_ui = fp_to_int
    interpreter._implicit_cvt = implicit_cvt
    return True


_DEF = re.compile(r"^def\s+\w+\s*\(", re.MULTILINE)  # where triton.runtime.jit.JITCallable starts a kernel


def rewrite_what_the_compiler_compiles() -> bool:
    """Snapshot each kernel's source when it is defined and start at its first `def`, as the compiler does;
    False if this Triton's rewriter differs from the one this was written against."""
    from triton.runtime import interpreter

    rewriter = getattr(interpreter, "FunctionRewriter", None)
    if rewriter is None or not all(hasattr(rewriter, n) for n in ("rewrite_ast", "_find_def", "_prepare_source")):
        return False
    define = rewriter.__init__

    def init(self: Any, fn: Any, **kwargs: Any) -> None:
        define(self, fn, **kwargs)
        try:
            self._kept_lines = inspect.getsourcelines(fn)[0]  # now, before any candidate code ran after it
        except (OSError, TypeError):
            self._kept_lines = None

    def find_def(self: Any, lines: list[str]) -> int:
        found = _DEF.search(textwrap.dedent("".join(lines)))
        return 0 if found is None else found.string[:found.start()].count("\n") + 1

    original = rewriter.rewrite_ast

    def rewrite_ast(self: Any) -> Any:
        kept = getattr(self, "_kept_lines", None)
        if kept is None:  # no source: the interpreter runs the function itself, the kernel's own code still
            return interp_calls.trust(original(self))
        self.filename, self.def_file_lineno = self._get_jit_fn_file_line()
        self.def_lineno = self._find_def(kept)
        src = self._prepare_source(kept)
        rewritten = self._compile_and_exec(self._transform_ast(src))
        return interp_lines.register(rewritten, self.fn, self.def_file_lineno, src)  # what it runs is traced

    rewriter.__init__, rewriter._find_def, rewriter.rewrite_ast = init, find_def, rewrite_ast
    return True


def print_to_the_real_stderr() -> bool:
    """Route the interpreter's device_print to fd 2 whatever sys.stdout is; False if this Triton has no hook."""
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    original = getattr(builder, "create_print", None)
    if original is None:
        return False

    def create_print(self: Any, *args: Any, **kwargs: Any) -> None:
        text = io.StringIO()
        saved = interpreter.__dict__.get("print")
        interpreter.print = lambda *a, **k: print(*a, **{**k, "file": text})  # the module's own print, redirected
        try:
            original(self, *args, **kwargs)
        finally:
            if saved is None:
                del interpreter.print
            else:
                interpreter.print = saved
        os.write(2, text.getvalue().encode(errors="replace"))

    builder.create_print = create_print
    return True
