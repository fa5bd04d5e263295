"""Compile facts of the candidate's kernels: registers, spills, shared memory, warps, stages.

On a GPU they are read from Triton's JIT cache after the runs. On CPU the interpreter compiles
nothing, so the launches it saw are turned into AOT requests (kernel, argument types, constexprs,
num_warps, num_stages) that a separate worker compiles for sm_90 (see aot.py).
"""

from __future__ import annotations

import sys
from typing import Any

import torch

_TRITON_PTR = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
               torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
               torch.bool: "i1"}
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _specialization(value: Any) -> tuple[str, Any] | None:
    """How the GPU JIT would specialise this argument: (type, attr) e.g. ('*fp32', 'D') for 16-divisible."""
    try:
        from triton._C.libtriton import native_specialize_impl
        from triton.backends.nvidia.compiler import CUDABackend
        return tuple(native_specialize_impl(CUDABackend, value, False, True, True))
    except (ImportError, TypeError, ValueError, RuntimeError):
        return None


# Levels of nesting a launch argument's description may have (a kernel's constexprs nest one or two); the parent
# refuses compile requests deeper than its MAX_AOT_DEPTH, which each level here takes two of.
_MAX_NEST = 6


def describe_arg(value: Any, depth: int = 0) -> dict[str, Any]:
    """A JSON description of one launch argument, enough to rebuild a Triton signature with the GPU
    JIT's specialisation (ints equal to 1 become constexprs; 16-divisible pointers and ints say so). Values
    nested past _MAX_NEST (tuples in tuples, constexprs of constexprs) are described as opaque, which the AOT
    compile refuses: a 450-deep tuple constexpr overflowed the recursion that serialises the worker's facts, and
    the verdict blamed the verifier (red team, 2026-12-05)."""
    if depth > _MAX_NEST:
        return {"kind": "other", "type": type(value).__name__}
    spec = _specialization(value) if isinstance(value, (torch.Tensor, int)) and not isinstance(value, bool) else None
    if isinstance(value, torch.Tensor):
        return {"kind": "ptr", "dtype": _TRITON_PTR.get(value.dtype, "fp32"), "attr": spec[1] if spec else ""}
    if isinstance(value, bool):
        return {"kind": "bool", "value": bool.__bool__(value)}
    if not isinstance(value, int) and hasattr(value, "__index__") and type(value).__module__ == "numpy":
        # a NumPy integer (np.prod of a shape) launches as a Python int; as a constexpr the GPU JIT keeps the NumPy
        # type (its arithmetic wraps), which the AOT compile cannot rebuild (red team, round 12): marked
        return {**describe_arg(int(value), depth + 1), "numpy": type(value).__name__}
    # exact builtins only (int.__int__ and friends skip a subclass's methods): the facts are serialised with
    # deep copies, and a subclass's __deepcopy__ is candidate code (red team, 2026-12-03: it raised there, and
    # the verdict was blamed on the verifier; or it returned a 600-deep list that crashed the parent)
    if isinstance(value, int):
        if spec and spec[0] == "constexpr":
            return {"kind": "const", "value": int.__int__(value)}
        return {"kind": "int", "value": int.__int__(value), "attr": spec[1] if spec else ""}
    if isinstance(value, float):
        return {"kind": "float", "value": float.__float__(value)}
    if value is None:
        return {"kind": "none"}
    if hasattr(value, "value") and type(value).__name__ == "constexpr":
        return describe_arg(value.value, depth + 1)
    if isinstance(value, str):
        return {"kind": "const", "value": str.__str__(value)}
    if isinstance(value, tuple):
        items = [describe_arg(v, depth + 1) for v in value]
        if all(i["kind"] in ("const", "int", "float", "bool", "none") for i in items):
            return {"kind": "const", "value": [i.get("value") for i in items]}
        return {"kind": "tuple", "items": items}  # rebuilt item by item, or refused (never as strings)
    if type(value).__name__ == "dtype" and type(value).__module__.startswith("triton."):
        return {"kind": "dtype", "value": value.name}  # tl.float32 and friends: a constexpr the kernel may branch on
    if isinstance(value, torch.dtype):
        return {"kind": "torch_dtype", "value": str(value).removeprefix("torch.")}
    if type(value).__name__ in ("InterpretedFunction", "JITFunction") and callable(getattr(value, "fn", None)):
        code = getattr(value.fn, "__code__", None)  # a @triton.jit function handed in (an activation, say)
        return {"kind": "jit", "qualname": value.fn.__qualname__, "line": getattr(code, "co_firstlineno", None)}
    return {"kind": "other", "type": type(value).__name__}


def _defaults(fn: Any) -> dict[str, Any]:
    import inspect

    try:  # the function's own defaults: not those of a `__wrapped__` it points to (red team, round 12)
        params = inspect.signature(fn, follow_wrapped=False).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def constexpr_globals(fn: Any, depth: int = 4) -> dict[str, dict[str, Any]]:
    """The `tl.constexpr` globals a kernel's code reads (and those of the @triton.jit functions it names, a few
    levels down), described as launch arguments are. The interpreter run and the AOT compile must see the same
    values: a global that differs between them (computed from what `@triton.jit` returns, or set in
    `__init__`) selects a branch under the interpreter that the compiler drops (red team rounds 10 and 11)."""
    found: dict[str, dict[str, Any]] = {}
    seen: set[int] = set()
    todo = [(getattr(fn, "fn", fn), depth)]
    while todo:
        func, left = todo.pop()
        code = getattr(func, "__code__", None)
        scope = getattr(func, "__globals__", None)
        if code is None or scope is None or id(code) in seen:
            continue
        seen.add(id(code))
        for name in code.co_names:
            value = scope.get(name)
            if type(value).__name__ == "constexpr" and type(value).__module__.startswith("triton."):
                found[f"{func.__qualname__}.{name}"] = describe_arg(value)
            elif left > 0 and type(value).__name__ in ("InterpretedFunction", "JITFunction"):
                todo.append((getattr(value, "fn", None), left - 1))
    return found


def describe_launch(fn_self: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """One interpreter launch as an AOT request: kernel, argument types, constexprs, options."""
    fn = fn_self.fn
    names = list(fn_self.arg_names)
    values = _defaults(fn)  # a parameter left out of the launch runs with its default: the compile must too
    values.update(zip(names, args, strict=False))
    values.update({k: v for k, v in kwargs.items() if k in names})
    return {"kernel": fn.__name__, "module": fn.__module__, "qualname": fn.__qualname__,
            "line": getattr(getattr(fn, "__code__", None), "co_firstlineno", None),
            "args": {n: describe_arg(values[n]) for n in names if n in values},
            "globals": constexpr_globals(fn),
            "options": {k: kwargs[k] for k in _LAUNCH_OPTIONS if k in kwargs and kwargs[k] is not None}}


def launch_key(req: dict[str, Any]) -> str:
    """What makes two launches the same compile: the kernel (its name, qualified name and line: two kernels
    may share a name), argument kinds and values that specialise, launch options, and the constexpr globals it
    read (a global changed between two launches of one kernel is two compiles, each checked)."""
    return repr((req["kernel"], req.get("qualname"), req.get("line"), sorted(req["args"].items(), key=str),
                 sorted(req["options"].items(), key=str), sorted(req.get("globals", {}).items(), key=str)))


def aot_requests(launches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Distinct launch descriptions (the interpreter sees the same launch many times)."""
    seen: dict[str, dict[str, Any]] = {}
    for req in launches:
        seen.setdefault(launch_key(req), req)
    return list(seen.values())


def _jit_objects(values: Any) -> list[Any]:
    """The JITFunctions among `values` (a module's, say), unwrapping autotune/heuristics wrappers."""
    out = []
    for value in list(values):
        fn, depth = value, 0
        try:
            while fn is not None and depth < 4 and not hasattr(fn, "device_caches"):
                fn, depth = getattr(fn, "fn", None), depth + 1
            if fn is not None and hasattr(fn, "device_caches") and all(fn is not o for o in out):
                out.append(fn)
        except Exception:  # noqa: BLE001, S112 - a candidate's object whose attributes raise is no kernel
            continue
    return out


def triton_cache_facts(module: Any) -> list[dict[str, Any]]:
    """Registers/spills/shared memory of every kernel Triton compiled for the candidate (GPU)."""
    facts = []
    for fn in _jit_objects(vars(module).values()):
        for caches in getattr(fn, "device_caches", {}).values():
            kernel_cache = caches[0] if isinstance(caches, tuple) else {}
            for kernel in list(kernel_cache.values()):
                if hasattr(kernel, "result"):
                    kernel = kernel.result()
                md = getattr(kernel, "metadata", None)
                facts.append({"kernel": getattr(kernel, "name", fn.__name__), "backend": "triton",
                              "registers": getattr(kernel, "n_regs", None), "spills": getattr(kernel, "n_spills", None),
                              "shared_bytes": getattr(md, "shared", None), "num_warps": getattr(md, "num_warps", None),
                              "num_stages": getattr(md, "num_stages", None)})
    return facts


def collect(device: str, launch_stats: dict[str, Any]) -> dict[str, Any]:
    """Compile facts for the report; on CPU also the AOT requests for the parent to compile."""
    module = sys.modules.get("kernelagent_candidate")
    out: dict[str, Any] = {"kernels": [], "aot_requests": []}
    if module is None:
        return out
    if device == "cuda":
        out["kernels"] = triton_cache_facts(module)
    else:
        out["aot_requests"] = aot_requests(launch_stats.get("interpreter_launches", []))
    out["kernels"] += list(launch_stats.get("cute_compiles", []))
    return out
