"""Compile-cache keys for `cute.compile`, which itself always recompiles.

The key holds everything a compile depends on and nothing that changes between calls with the
same meaning (data pointers, stream handles): see `compile_key`. Standard library only.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from typing import Any

_SCALARS = (bool, int, float, str, bytes, type(None))
_MAX_DEPTH = 6


class Unkeyable(Exception):
    """An argument the key cannot describe; that compile bypasses the cache."""


def compile_key(compiler: Any, func: Any, args: tuple, kwargs: dict) -> tuple:
    """The key of `compiler(func, *args, **kwargs)` (compiler: the `cute.compile` object).

    (sha256 of the function's source file, the function's file/qualname/line, the bound instance
    if any, every argument's type facts, the other keyword arguments, the compile options given as
    `cute.compile[...]`, every CUTE_DSL_* variable (arch, line info, compiler options; the
    `options=` string is a keyword argument), cutlass's version).

    Argument facts: tensors from `from_dlpack` give dtype, assumed alignment and layout (static
    shapes and strides by value, dynamic ones as `?` with their divisibility); fake tensors the
    same with SymInts numbered by first appearance; torch tensors dtype, shape, stride and device
    type; streams only their type; scalars, strings, types, enums and functions by value or
    identity; other objects by class and attributes. Raises Unkeyable otherwise.
    """
    import cutlass

    target = getattr(func, "__func__", func)
    owner = getattr(func, "__self__", None)
    code = _code_of(target)
    if code is None and callable(target):  # a callable instance: its class's __call__
        owner, code = target, _code_of(type(target).__call__)
    if code is None:
        raise Unkeyable(f"no code object for {func!r}")
    syms: dict[int, int] = {}
    return (
        source_hash(code.co_filename),
        (code.co_filename, code.co_qualname, code.co_firstlineno),
        _key(owner, syms) if owner is not None else None,
        tuple(_key(a, syms) for a in args),
        tuple(sorted((k, _key(v, syms)) for k, v in kwargs.items())),
        _options_key(compiler),
        tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("CUTE_DSL_"))),
        cutlass.__version__,
    )


def source_hash(path: str) -> str:
    """sha256 of a source file, read once per (path, mtime, size)."""
    try:
        st = os.stat(path)
    except OSError:
        raise Unkeyable(f"no source file {path}") from None
    return _file_hash(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _file_hash(path: str, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _key(value: Any, syms: dict[int, int], depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise Unkeyable("nested too deep")
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_key(v, syms, depth + 1) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _key(v, syms, depth + 1)) for k, v in value.items())))
    if isinstance(value, type):
        return ("type", value.__module__, value.__qualname__)
    kind = type(value).__name__  # type(), not .__class__: runtime tensors disguise their class
    if kind == "SymInt":
        return ("sym", syms.setdefault(id(value), len(syms)), value.width, value.divisibility)
    if kind == "_FakeTensor":
        return ("fake", _key(value.element_type, syms), str(value.memspace), value._typed_tensor.assumed_align,
                _key(tuple(value.shape), syms, depth + 1), _key(tuple(value.stride), syms, depth + 1))
    if kind in ("CUstream", "_FakeStream"):
        return ("stream", kind)
    if hasattr(type(value), "__cache_key__"):  # runtime tensors and pointers (from_dlpack, make_ptr)
        return ("cache_key", kind, _key(value.__cache_key__, syms, depth + 1))
    return _object_key(value, kind, syms, depth)


def _object_key(value: Any, kind: str, syms: dict[int, int], depth: int) -> Any:
    module = type(value).__module__
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return ("torch", str(value.dtype), tuple(value.shape), tuple(value.stride()), value.device.type)
    if hasattr(value, "name") and hasattr(type(value), "__members__"):  # an enum member
        return ("enum", module, type(value).__qualname__, value.name)
    if module.startswith("cutlass") and isinstance(getattr(value, "value", None), _SCALARS):
        return ("numeric", kind, value.value)  # cutlass.Float32(1e-6) and friends
    code = _code_of(value)
    if code is not None:
        return ("function", code.co_filename, code.co_qualname, code.co_firstlineno)
    if hasattr(value, "__dict__"):
        return ("object", module, type(value).__qualname__, _key(vars(value), syms, depth + 1))
    raise Unkeyable(kind)


def _code_of(fn: Any) -> Any:
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None)


def _options_key(compiler: Any) -> tuple:
    """The `cute.compile[...]` options as first seen: each compile applies the environment's
    settings onto the compiler's own options object (4.8.1 appends `diagnostic=ptx` again on every
    compile), so its later state would make every key new."""
    stashed = getattr(compiler, "_kernelagent_options_key", None)
    if stashed is not None:
        return stashed
    options = getattr(getattr(compiler, "_compile_options", None), "options", None) or {}
    key = tuple(sorted((type(o).__name__, repr(getattr(o, "value", o))) for o in options.values()))
    try:
        compiler._kernelagent_options_key = key
    except AttributeError:
        pass
    return key
