"""Reductions and scans with a kernel's own combine function under the interpreter (CPU workers).

Triton 3.6's interpreter runs `tl.reduce` / `tl.associative_scan` with a custom combine function one element at a
time, calling the function as written (`combine_fn.fn`), not the rewritten copy every other @triton.jit call runs.
The profile hook (interp_calls) refused that as Python beside the kernel (the library's LayerNorm backward,
2026-12-03), and one Python call per element of a [rows, 4096] tile took minutes. Here the combine function is
the rewritten copy (trusted, and traced for the line wall: the compile generates the combine function too), called
on many elements at once: a tree of adjacent pairs for a reduction, a Hillis-Steele scan (log2 n calls, each
element's left operand the earlier one, as an associative combine function allows), its operands typed as scalars
(shape `[]`, as compiled and element by element) with every element's value in their arrays. Anything but a
@triton.jit function is refused, as the compiler refuses it. A combine function that cannot take many elements at
once (Python control flow on its operands) runs element by element, as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

# bound here, not imported during a launch: the verifier's modules are hidden from sys.modules while candidate code
# runs (guard.hidden_modules), and an import then would load a fresh copy
from kernelagent.verifier.worker import interp_bounds, interp_calls


class KernelCombine:
    """A reduction's or scan's combine function as the interpreter calls it (`.fn`): the rewritten copy of a
    @triton.jit function. Equal to that function, so the interpreter's fast paths (`_sum_combine`, ...) still
    recognise Triton's own."""

    __slots__ = ("jit", "fn")

    def __init__(self, jit: Any, fn: Any) -> None:
        self.jit, self.fn = jit, fn

    def __eq__(self, other: object) -> bool:
        return self.jit is (other.jit if isinstance(other, KernelCombine) else other)

    def __hash__(self) -> int:
        return id(self.jit)


def combine_function(combine_fn: Any, error: type[Exception]) -> Any:
    """What the interpreter's reduce / scan calls for `combine_fn`: a @triton.jit function's rewritten copy (what a
    call of it from a kernel runs), Triton's own JITFunction as it is; anything else raises `error`."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    if isinstance(combine_fn, InterpretedFunction):
        return KernelCombine(combine_fn, combine_fn.rewrite())
    body = getattr(combine_fn, "fn", None)
    filename = getattr(getattr(body, "__code__", None), "co_filename", "")
    if isinstance(combine_fn, JITFunction) and filename.startswith(interp_calls._triton_root()):
        return combine_fn
    raise error(f"the combine function of tl.reduce / tl.associative_scan must be a @triton.jit function, not "
                f"{getattr(combine_fn, '__qualname__', type(combine_fn).__name__)!s}")


@interp_bounds.reads_blocks
def _values(block: Any, like: np.ndarray) -> np.ndarray:
    """A combine function's result as an array shaped and typed as `like` (the interpreter casts it so too)."""
    import triton.language as tl

    if isinstance(block, tl.core.tensor):
        data = block.handle.data
    else:
        data = np.asarray(getattr(block, "value", block))
    return np.broadcast_to(data, like.shape).astype(like.dtype)


@interp_bounds.reads_blocks
def _arrays(blocks: Any) -> list[np.ndarray]:
    out = []
    for block in blocks:  # not a comprehension: its own frame would not be the reader registered
        out.append(block.handle.data)
    return out


class NeedsScalars(TypeError):
    """The combine function turned an operand into a Python bool or int: it runs element by element."""


def _refuse(self: Any, *args: Any) -> Any:
    raise NeedsScalars("a combine function's operand converted to a Python value")


@contextlib.contextmanager
def _no_conversions() -> Iterator[None]:
    """While a combine function runs on blocks, `bool(block)` and `int(block)` raise: the interpreter answers
    True for any block of several values, where each element's own answer was meant."""
    import triton.language as tl

    cls = tl.core.tensor
    saved = {name: cls.__dict__.get(name) for name in _CONVERSIONS}
    for name in _CONVERSIONS:
        setattr(cls, name, _refuse)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(cls, name)
            else:
                setattr(cls, name, value)


_CONVERSIONS = ("__bool__", "__index__", "__int__", "__float__")


def _operand(values: np.ndarray, dtype: Any) -> Any:
    """Many elements' operands as one scalar-typed block: the combine function sees the shape `[]` it has compiled
    (and element by element), while each operation computes on every element's value at once."""
    import triton.language as tl
    from triton.runtime import interpreter

    scalar = dtype.scalar
    return tl.core.tensor(interpreter.TensorHandle(values.astype(interpreter._get_np_dtype(scalar)), scalar), scalar)


def _call(op: Any, dtypes: list[Any], left: list[np.ndarray], right: list[np.ndarray]) -> list[np.ndarray]:
    """combine_fn(*left, *right) on many elements at once; the results shaped and typed as `left`."""
    operands = [_operand(a, t) for a, t in zip([*left, *right], [*dtypes, *dtypes], strict=True)]
    with _no_conversions():
        out = op.combine_fn.fn(*operands)
    out = out if isinstance(out, tuple) else (out,)
    if len(out) != len(left):
        raise ValueError(f"the combine function returned {len(out)} values for {len(left)} operands")
    return [_values(o, a) for o, a in zip(out, left, strict=True)]


def _tree(op: Any, dtypes: list[Any], data: list[np.ndarray]) -> list[np.ndarray]:
    """Reduce the last axis of `data` by combining adjacent pairs until one element is left."""
    while data[0].shape[-1] > 1:
        n = data[0].shape[-1]
        even = n - n % 2
        merged = _call(op, dtypes, [d[..., 0:even:2] for d in data], [d[..., 1:even:2] for d in data])
        data = [np.concatenate([m, d[..., even:]], axis=-1) for m, d in zip(merged, data, strict=True)]
    return [d[..., 0] for d in data]


def _reduce(self: Any, input: Any) -> list[Any]:
    """ReduceOps.generic_reduce on whole blocks (the interpreter's own shape rules: axis None, keep_dims)."""
    original_axis = self.axis
    blocks, axis = self.unravel(input, self.axis)
    dtypes = [b.dtype for b in blocks]
    arrays = _arrays(blocks)
    shape = arrays[0].shape
    results = _tree(self, dtypes, [np.moveaxis(a, axis, -1) for a in arrays])
    out = []
    for data, dtype in zip(results, dtypes, strict=True):
        if self.keep_dims:
            data = np.expand_dims(data, axis) if original_axis is not None else data.reshape((1,) * len(shape))
        elif original_axis is None:
            data = data.item()
        out.append(self.to_tensor(data, dtype))
    return out


def _scan(self: Any, input: Any) -> list[Any]:
    """ScanOps.generic_scan on whole blocks: inclusive, element i combined with i - 1, i - 2, i - 4, ... (each call
    on the whole block, as Triton's blocks are powers of two long: element i < step is paired with itself and
    kept as it was)."""
    dtypes = [b.dtype for b in input]
    data = [np.moveaxis(a, self.axis, -1) for a in _arrays(input)]
    n, step = data[0].shape[-1], 1
    while step < n:
        earlier = [np.concatenate([d[..., :step], d[..., :n - step]], axis=-1) for d in data]
        merged = _call(self, dtypes, earlier, data)
        data = [np.concatenate([d[..., :step], m[..., step:]], axis=-1) for d, m in zip(data, merged, strict=True)]
        step *= 2
    return [self.to_tensor(np.moveaxis(d, -1, self.axis), t) for d, t in zip(data, dtypes, strict=True)]


def _blockwise(vectorized: Any, elementwise: Any) -> Any:
    """`vectorized`, or the interpreter's element-by-element `elementwise` where the combine function cannot take
    many elements at once (an `if` on an operand, an operand broadcast to a block): it runs the same code."""

    def run(self: Any, input: Any) -> Any:
        try:
            return vectorized(self, input)
        except (interp_bounds.InterpreterInternals, interp_bounds.OutOfBounds):
            raise  # the walls' refusals: the same code element by element would meet them again
        except (NeedsScalars, ValueError, TypeError, IndexError):
            return elementwise(self, input)

    return run


def install(error: type[Exception]) -> None:
    """Patch the interpreter's reduce and scan (ReduceScanOpInterface and its two subclasses)."""
    from triton.runtime import interpreter

    base = getattr(interpreter, "ReduceScanOpInterface", None)
    if base is None or getattr(base.__init__, "_ka_combine", False):
        return
    original = base.__init__

    def __init__(self: Any, axis: Any, combine_fn: Any, *args: Any, **kwargs: Any) -> None:
        original(self, axis, combine_function(combine_fn, error), *args, **kwargs)

    __init__._ka_combine = True  # type: ignore[attr-defined]
    base.__init__ = __init__
    reduce_ops, scan_ops = interpreter.ReduceOps, interpreter.ScanOps
    reduce_ops.generic_reduce = _blockwise(_reduce, reduce_ops.generic_reduce)
    scan_ops.generic_scan = _blockwise(_scan, scan_ops.generic_scan)
