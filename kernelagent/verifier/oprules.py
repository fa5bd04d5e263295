"""Which aten ops a candidate's forward may dispatch, and the poison values of fresh allocations.

The worker only records what was dispatched; the parent decides here what counts as PyTorch compute,
so a candidate that edits the worker's copy of these tables changes nothing but its own record.
"""

from __future__ import annotations

import torch

# Allocation, views and layout, copies and dtype/device moves, metadata, initialisation fills.
# Anything else computes, and means PyTorch did the work.
ALLOCATION_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
ALLOWED_OPS = ALLOCATION_OPS | frozenset({
    "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
    "fill_", "zero_", "fill", "arange", "scalar_tensor", "lift_fresh", "lift_fresh_copy",
    "view", "_unsafe_view", "reshape", "as_strided", "as_strided_", "t", "transpose", "permute", "expand",
    "squeeze", "unsqueeze", "slice", "select", "split", "split_with_sizes", "chunk", "unbind", "narrow",
    "flatten", "unflatten", "alias", "detach", "detach_", "view_as_real", "view_as_complex", "unfold",
    "numpy_T", "movedim", "_reshape_alias", "diagonal", "view_as", "expand_as", "contiguous",
    "clone", "copy_", "_to_copy", "to", "_copy_from", "_copy_from_and_resize", "resize_",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "dim", "is_contiguous",
    "_local_scalar_dense", "item", "is_same_size", "record_stream", "set_", "_has_compatible_shallow_copy_type",
})
# The autograd engine sums the gradients of an input used twice; that is the engine's work, not the
# candidate's (two autograd.Functions sharing an input are honest).
ENGINE_OPS = frozenset({"add", "add_"})

# Host compute shows as input data leaving the GPU inside forward: more than this many bytes (and more
# than this share of the inputs), or more than this many single-element reads.
D2H_MIN_BYTES = 64 * 1024
D2H_MIN_SHARE = 0.01
D2H_MOST_SHARE = 0.5   # ... or, for small inputs, at least half of them
SCALAR_READS_MAX = 16

_INT_POISON = {torch.int8: 127, torch.uint8: 255, torch.int16: 32767, torch.int32: 2**31 - 1,
               torch.int64: 2**63 - 1, torch.bool: True}


def is_allowed(name: str) -> bool:
    ns, _, base = name.partition(".")
    return ns in ("aten", "prim") and base in ALLOWED_OPS


def compute_ops(ops: dict[str, int], engine_adds: int = 0) -> dict[str, int]:
    """The ops of a record that computed (not allocation, views or copies); `engine_adds` gradient
    accumulations by the autograd engine are forgiven."""
    out = {k: v for k, v in ops.items() if not is_allowed(k)}
    for name in ("aten.add", "aten.add_"):  # one allowance for both spellings: a sum forgiven once
        if name in out and engine_adds:
            used = min(out[name], engine_adds)
            engine_adds -= used
            out[name] -= used
            if not out[name]:
                del out[name]
    return out


def host_compute(host_bytes: int, scalar_reads: int, input_bytes: int) -> str:
    """Why a call's host traffic means the answer was computed on the host ('' when it does not): bytes copied
    from the GPU to the host, or read into Python or NumPy on any device, and single-element reads."""
    big = host_bytes > max(D2H_MIN_BYTES, D2H_MIN_SHARE * input_bytes)
    most = input_bytes and host_bytes >= D2H_MOST_SHARE * input_bytes  # small inputs, copied whole
    if big or most:
        return f"{host_bytes:,} bytes of tensor data copied to the host or read there (NumPy, .tolist()) inside forward"
    if scalar_reads > SCALAR_READS_MAX:
        return f"{scalar_reads} single-element reads (.item(), .tolist()) inside forward"
    return ""


def poison_value(dtype: torch.dtype, sentinel: bool) -> float | int | bool:
    if dtype.is_floating_point or dtype.is_complex:
        return -3.25e3 if sentinel else float("nan")
    return _INT_POISON.get(dtype, 0) if not sentinel else 77
