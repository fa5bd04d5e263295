"""Fixes that make Triton 3.6's interpreter compute bf16 the way the GPU does.

1. fp32 -> bf16 conversion truncates in the interpreter and rounds to nearest even on the GPU; the
   truncation doubles a bf16 kernel's output error on CPU and can push honest kernels over the bf16
   tolerance.
2. `tl.dot` on bf16 operands multiplies their raw uint16 storage (bf16 is kept as uint16 there),
   which gives garbage; the GPU's tensor cores multiply the values with fp32 accumulation.
3. `@triton.autotune` benchmarks its configs through the GPU driver, so it fails without one.
Applied in CPU-mode workers only, before any candidate is imported.
"""

from __future__ import annotations

from typing import Any


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
