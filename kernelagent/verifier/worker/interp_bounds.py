"""Bounds on the Triton interpreter's memory accesses (CPU workers).

Under the interpreter a kernel's pointers are plain addresses in the worker's own memory, and its loads
and stores are not checked: a kernel could read or rewrite any Python object of the worker — the op
recorder's counts, the outputs already saved — by offsetting from a tensor it was given (red team,
2026-12-01). On a GPU such an access faults or lands in device memory; here every access of a launch
must fall inside the storage of a tensor passed to that launch, else the launch fails with an
out-of-bounds error (a `runtime_error` of the candidate's, as compute-sanitizer would report on the GPU).
Masked-off lanes are not accesses. Installed before any candidate code; the builder class is watched by
the identity guard, so putting the unchecked methods back is a `policy_violation`.
"""

from __future__ import annotations

import functools
import os
import secrets
import sys
from typing import Any

import numpy as np

# bound here, not imported when a launch runs: while candidate code runs the verifier's modules are hidden from
# sys.modules (guard.hidden_modules), and an import then would load a fresh copy with no recorder in it
from kernelagent.verifier.worker import integrity, interp_calls

_KEY = f"_h{secrets.token_hex(8)}"  # where a sealed block keeps its handle: not a name the candidate can know
_RANGES: list[tuple[int, int]] = []  # (first byte, end) of every storage the running launch was given
_SHARED: list[tuple[int, int]] = []  # those of them host code reads uncounted (integrity.host_shared)


class OutOfBounds(IndexError):
    """A kernel under the interpreter touched memory outside every tensor passed to its launch."""


class InterpreterInternals(AttributeError):
    """Candidate code read a block's `handle` under the interpreter (its NumPy array of values)."""


@functools.cache
def _triton_dir() -> str:
    import triton

    return os.path.dirname(os.path.realpath(triton.__file__)) + os.sep


def _from_kernel_code(frame: Any) -> bool:
    """Whether the nearest frame outside Triton's own files (by the file its code was compiled from, which
    the candidate cannot set, unlike `__name__`: red team, 2026-12-03) runs the kernel's own code (a
    @triton.jit function this worker's interpreter rewrote: `interp_calls.TRUSTED`, not the interpreter's
    public cache, which candidate code could add a helper to). Triton functions in between
    (`constexpr.__repr__` formatting a block) do not make a helper's call Triton's."""
    triton_dir = _triton_dir()
    while frame is not None and frame.f_code.co_filename.startswith(triton_dir):
        frame = frame.f_back
    return frame is not None and frame.f_code in interp_calls.TRUSTED


def _in_triton(frame: Any) -> bool:
    """Triton's own code (static_print, device_print formatting a block) called the conversion."""
    return frame.f_code.co_filename.startswith(_triton_dir())


_READERS: set[Any] = set()  # code of the verifier's own functions that read blocks' values (interp_combine)


def reads_blocks(fn: Any) -> Any:
    """Let `fn` (the verifier's own, standing in for a part of the interpreter) read a block's `handle`."""
    _READERS.add(fn.__code__)
    return fn


def seal_handles() -> None:
    """Under the interpreter a Triton block (`tl.tensor`) holds its values as a NumPy array in `handle`;
    compiled for a GPU it holds an IR value, and a kernel never reads it. Python the candidate runs while a
    kernel is interpreted (a helper, a constexpr callable) could read the values there and compute with
    NumPy where the compiled kernel does something else (red-team review, 2026-12-03): only Triton's own
    modules may read it; anyone else gets an error, which fails the launch."""
    import triton.language as tl

    cls = tl.core.tensor
    if isinstance(cls.__dict__.get("handle"), property):
        return
    _triton_dir()  # resolved now, before any candidate code

    def get(self: Any) -> Any:
        caller = sys._getframe(1).f_code
        if caller not in _READERS and not caller.co_filename.startswith(_triton_dir()):
            raise InterpreterInternals("a Triton block's `handle` is the interpreter's own (its values as a NumPy "
                                       "array): kernel code computes with tl.* operations, which the GPU compiles")
        return self.__dict__[_KEY]

    def put(self: Any, value: Any) -> None:
        self.__dict__[_KEY] = value

    cls.handle = property(get, put)


_CONVERSIONS = ("__index__", "__bool__", "__repr__", "__str__")  # what the interpreter gives a block, per launch
_TEXT = ("__repr__", "__str__")  # kernel code turns a block into text only inside print (device_print compiled)


def guard_conversions() -> None:
    """Under the interpreter a block also converts to a Python int, bool or text (`__index__`, `__bool__`,
    `__str__`, installed by Triton for each launch): a helper the kernel calls at trace time (a constexpr
    callable) could read every value that way, bit by bit, and compute in Python where the compiled kernel
    copies (red team, 2026-12-03: softmax through `bool((v >> b) & 1)`, accepted on 11 trials). Only the
    kernel's own code (the interpreter's rewritten @triton.jit functions) and Triton may convert a block;
    anyone else gets an error, which fails the launch."""
    from triton.runtime import interpreter as interp

    original = interp._patch_lang_tensor
    if getattr(original, "_ka_guarded", False):
        return
    _triton_dir()  # resolved now, before any candidate code

    def patch(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        for name in _CONVERSIONS:
            installed = tensor.__dict__.get(name)
            if installed is not None:
                scope.set_attr(tensor, name, _kernel_only(installed, name in _TEXT))

    patch._ka_guarded = True  # type: ignore[attr-defined]
    interp._patch_lang_tensor = patch


def _kernel_only(convert: Any, text: bool) -> Any:
    def conversion(self: Any, *args: Any) -> Any:
        caller = sys._getframe(1)
        if not _from_kernel_code(caller) or (text and not (interp_calls.printing() or _in_triton(caller))):
            raise InterpreterInternals("a Triton block converted to a Python value outside the kernel's own code "
                                       "(a helper it calls), or to text outside print: compiled for the GPU a "
                                       "block holds no values there")
        return convert(self, *args)

    return conversion


def install() -> None:
    from triton.runtime import interpreter as interp

    executor, builder = interp.GridExecutor, interp.InterpreterBuilder
    init_args = executor._init_args_hst

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        _RANGES[:] = sorted(set(_ranges([*args_hst, *kwargs_hst.values()])))
        _SHARED[:] = sorted(set(_ranges([*args_hst, *kwargs_hst.values()], shared_only=True)))
        return args_hst, kwargs_hst

    executor._init_args_hst = _init_args_hst
    load, store = builder.create_masked_load, builder.create_masked_store
    cas, rmw = builder.create_atomic_cas, builder.create_atomic_rmw

    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any, **kw: Any) -> Any:
        check(ptrs.data, mask.data, _width(ptrs.get_element_ty()), "read")
        return load(self, ptrs, mask, other, *rest, **kw)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        check(ptrs.data, mask.data, np.asarray(value.data).dtype.itemsize, "write")
        return store(self, ptrs, value, mask, *rest, **kw)

    def create_atomic_cas(self: Any, ptr: Any, cmp: Any, val: Any, *rest: Any) -> Any:
        check(ptr.data, True, np.asarray(val.data).dtype.itemsize, "atomic")
        return cas(self, ptr, cmp, val, *rest)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:
        check(ptr.data, mask.data, np.asarray(val.data).dtype.itemsize, "atomic")
        return rmw(self, op, ptr, val, mask, *rest)

    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store
    builder.create_atomic_cas, builder.create_atomic_rmw = create_atomic_cas, create_atomic_rmw


def _width(dtype: Any) -> int:
    return max(1, int(getattr(dtype, "primitive_bitwidth", 8)) // 8)


def _ranges(values: list[Any], shared_only: bool = False) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for v in values:
        if isinstance(v, (tuple, list)):
            out += _ranges(list(v), shared_only)
        elif hasattr(v, "base") and hasattr(v, "block_shape"):  # a host-side tensor descriptor
            out += _ranges([v.base], shared_only)
        elif hasattr(v, "untyped_storage") and (not shared_only or integrity.host_shared(v)):
            storage = v.untyped_storage()
            out.append((int(storage.data_ptr()), int(storage.data_ptr()) + int(storage.nbytes())))
    return out


def _count_shared(active: Any, width: int) -> None:
    inside = np.zeros(active.shape, dtype=bool)
    for lo, hi in _SHARED:
        inside |= (active >= np.uint64(lo)) & (active < np.uint64(hi))
    if inside.any() and integrity._active:
        integrity._active[-1].transfers.host_read_bytes += int(inside.sum()) * width


def check(ptrs: Any, mask: Any, width: int, what: str) -> None:
    """Raise OutOfBounds when an active lane's `width` bytes at its address leave every range; a write into
    host-shared memory is counted as a host read of the bytes written (integrity.host_shared)."""
    p = np.asarray(ptrs).astype(np.uint64, copy=False).reshape(-1)
    m = np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(ptrs)).reshape(-1)
    active = p[m]
    if active.size == 0:
        return
    if _SHARED and what != "read":
        _count_shared(active, width)
    inside = np.zeros(active.shape, dtype=bool)
    for lo, hi in _RANGES:
        inside |= (active >= np.uint64(lo)) & (active + np.uint64(width) <= np.uint64(hi))
    if not inside.all():
        bad = int(active[~inside][0])
        raise OutOfBounds(f"out-of-bounds {what}: the kernel touched address {bad:#x}, outside every tensor "
                          "passed to the launch")
