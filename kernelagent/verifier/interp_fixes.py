"""Make the Triton interpreter round fp32 -> bf16 like the GPU does (to nearest even).

Triton 3.6's interpreter truncates on that conversion, which doubles a bf16 kernel's output error on
CPU and can push honest kernels over the bf16 tolerance; on the GPU the store rounds to nearest.
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
