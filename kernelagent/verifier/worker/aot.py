"""AOT compile of a candidate's Triton kernels for sm_90 without a GPU (the CPU path's compile stage).

The interpreter run records each distinct launch (argument types, constexpr values, num_warps,
num_stages); this worker, started without TRITON_INTERPRET, imports the candidate and compiles those
launches with `triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`, then reads
registers and spills from `ptxas -v`.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelagent.problem import ProblemError, load_module
from kernelagent.verifier.protocol import AotRequest
from kernelagent.verifier.worker import compiled_lines
from kernelagent.verifier.worker.compile_facts import _jit_objects, constexpr_globals
from kernelagent.verifier.worker.errors import classify_exception

_PTXAS_USED = re.compile(r"Used (\d+) registers")


class GlobalsDiffer(Exception):
    """A constexpr global the kernel reads has another value in the AOT compile than when it ran."""
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def _signature(fn: Any, args: dict[str, dict[str, Any]]) -> tuple[dict[str, str], dict[str, Any], dict]:
    from triton.backends.nvidia.compiler import CUDABackend

    signature, constexprs, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        desc = args.get(p.name)
        if desc is None:
            if p.has_default:
                continue
            raise KeyError(p.name)
        if p.is_constexpr or desc["kind"] in _ALWAYS_CONSTEXPR:
            if desc.get("numpy"):
                raise TypeError(f"constexpr {p.name} is a NumPy {desc['numpy']}, which the GPU JIT keeps as it is "
                                "(its arithmetic wraps): pass a Python int")
            signature[p.name] = "constexpr"
            constexprs[p.name] = _constexpr_value(p.name, desc, fn)
        elif desc["kind"] in ("ptr", "int"):
            if desc["kind"] == "ptr":
                signature[p.name] = "*" + desc["dtype"]
            else:
                v = int(desc["value"])
                signature[p.name] = "i32" if -(2**31) <= v < 2**31 else "i64"
            if desc.get("attr"):  # the GPU JIT's divisibility hint, so AOT compiles what the GPU would
                attrs[(i,)] = CUDABackend.parse_attr(desc["attr"])
        elif desc["kind"] == "float":
            signature[p.name] = "fp32"
        elif desc["kind"] == "bool":
            signature[p.name] = "i1"
        else:
            raise TypeError(f"argument {p.name} of type {desc.get('type')} cannot be compiled ahead of time")
    return signature, constexprs, attrs


_ALWAYS_CONSTEXPR = frozenset({"none", "const", "dtype", "torch_dtype", "tuple", "jit"})  # whatever the annotation
_CONSTEXPR_KINDS = _ALWAYS_CONSTEXPR | {"int", "float", "bool"}  # what a constexpr may be rebuilt from


def _constexpr_value(name: str, desc: dict[str, Any], kernel: Any = None) -> Any:
    """The value the interpreter launched with, rebuilt. An argument known only by its type cannot be: a
    stand-in (None) would compile another kernel than the one that ran (a constexpr branch), so it raises."""
    import triton.language as tl

    if desc["kind"] not in _CONSTEXPR_KINDS:
        raise TypeError(f"constexpr {name} of type {desc.get('type', desc['kind'])} is not a value the compile can "
                        "rebuild")
    if desc["kind"] == "dtype":
        try:
            return tl.dtype(desc["value"])
        except (AssertionError, ValueError, TypeError) as e:  # a pointer type, or a name Triton does not know
            raise TypeError(f"constexpr {name} of Triton type {desc['value']} cannot be rebuilt: {e}") from e
    if desc["kind"] == "torch_dtype":
        import torch

        value = getattr(torch, desc["value"], None)
        if not isinstance(value, torch.dtype):
            raise TypeError(f"constexpr {name}: torch.{desc['value']} is not a dtype")
        return value
    if desc["kind"] == "tuple":
        return tuple(_constexpr_value(name, item, kernel) for item in desc["items"])
    if desc["kind"] == "jit":  # the same @triton.jit function, found beside the kernel (its module's globals)
        body = getattr(kernel, "fn", None)
        scope = getattr(body, "__globals__", None) or {}
        for cand in _jit_objects(_with_class_members(scope.values(), getattr(body, "__module__", ""))):
            if cand.fn.__qualname__ == desc["qualname"] and cand.fn.__code__.co_firstlineno == desc["line"]:
                return cand
        raise TypeError(f"constexpr {name}: the @triton.jit function {desc['qualname']} is not at module level "
                        "or in a module-level class")
    return desc.get("value")


def _ptxas_report(ptx: str) -> dict[str, Any]:
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        proc = subprocess.run([str(ptxas), "-v", "-arch=sm_90a", str(src), "-o", str(Path(d) / "k.cubin")],
                              capture_output=True, text=True, timeout=120)
    log = proc.stdout + proc.stderr
    regs = [int(x) for x in _PTXAS_USED.findall(log)]
    spills = [int(a) + int(b) for a, b in _PTXAS_SPILL.findall(log)]
    return {"registers": max(regs) if regs else None, "spills": max(spills) if spills else 0}


def _shown(desc: dict[str, Any] | None) -> str:
    return "absent" if desc is None else repr(desc.get("value", desc.get("type", desc.get("kind"))))


def compile_one(fn: Any, req: dict[str, Any]) -> dict[str, Any]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    compiled_globals = constexpr_globals(fn)
    opaque = sorted(k for k, d in {**compiled_globals, **req.get("globals", {})}.items() if d["kind"] == "other")
    if opaque:  # known only by its type (a list, an object): a change to what it holds could not be seen
        raise GlobalsDiffer(f"the constexpr global {opaque[0]} holds a {_shown(compiled_globals.get(opaque[0]))}: "
                            "only numbers, strings, None, tuples of them, dtypes and @triton.jit functions can be "
                            "checked to be the same when compiled as when the kernel ran")
    if compiled_globals != req.get("globals", compiled_globals):
        differ = sorted(k for k in {*compiled_globals, *req["globals"]}
                        if compiled_globals.get(k) != req["globals"].get(k))
        ran, now = (_shown(d.get(differ[0])) for d in (req["globals"], compiled_globals))
        raise GlobalsDiffer(f"the constexpr global {differ[0]} was {ran} when the kernel ran and is {now} when it "
                            "is compiled: the compiled kernel is not the one that ran")
    signature, constexprs, attrs = _signature(fn, req["args"])
    options = {k: v for k, v in req.get("options", {}).items() if k in ("num_warps", "num_stages", "num_ctas")}
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    with _diagnostics_kept():
        ck, visits = compiled_lines.compile_recorded(
            lambda: triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options))
    if "ran" in req:  # the kernel code the interpreter ran must all be in what was compiled
        compiled_lines.check(req["ran"], visits)
    facts = {"kernel": req["kernel"], "backend": "triton", "target": "sm_90a",
             "shared_bytes": getattr(ck.metadata, "shared", None), "num_warps": ck.metadata.num_warps,
             "num_stages": ck.metadata.num_stages, "constexprs": {k: v for k, v in constexprs.items()
                                                                 if isinstance(v, (int, float, bool))}}
    facts.update(_ptxas_report(ck.asm["ptx"]))
    return facts


_AT = re.compile(r"^at (\d+):(\d+):")
# what Triton's C++ passes print on fd 2 when "PassManager::run failed": an assertion or an MLIR error
_DIAGNOSTIC = re.compile(r"Assertion `(?P<assertion>.+?)' failed|error: (?P<error>(?!Failures have been).+)")


@contextlib.contextmanager
def _diagnostics_kept() -> Iterator[None]:
    """Copy what the compile writes on fd 2 (passed on as it is); a compile that raises gets the first C++
    assertion or MLIR error from it as `ka_diagnostic` (its message says only "PassManager::run failed")."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        except Exception as e:
            found = _DIAGNOSTIC.search(_read(log))
            if found is not None:
                e.ka_diagnostic = (found.group("assertion") or found.group("error")).strip()[:300]
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            os.write(2, _read(log).encode(errors="replace"))


def _read(log: Any) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")


def _diagnosed(exc: BaseException) -> str:
    found = getattr(exc, "ka_diagnostic", "")
    return f" ({found})" if found else ""


def _def_line(fn: Any) -> int:
    """Line of `def` (Triton counts from it; co_firstlineno points at the first decorator)."""
    import linecache

    code = fn.__code__
    line = code.co_firstlineno
    for offset in range(20):
        if linecache.getline(code.co_filename, line + offset).lstrip().startswith("def "):
            return line + offset
    return line


def triton_error_line(exc: BaseException, fn: Any, kernel: str) -> str:
    """One line: which kernel, which source line, and the error itself."""
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else type(exc).__name__
    m = _AT.match(text)
    where = ""
    if m:
        try:
            where = f" at line {_def_line(fn.fn) + int(m.group(1)) - 1}"
        except AttributeError:
            where = f" at kernel line {m.group(1)}"
    return f"compiling {kernel} for sm_90a failed{where}: {last[:300]}"


def find_kernel(module: Any, launch: dict[str, Any]) -> Any | None:
    """The JITFunction the interpreter launched: a kernel of this module (at module level or in a
    module-level class) with the launched function's qualified name, defined on the same line. A kernel of the
    same name made elsewhere (in a factory, a closure) is not it; `triton.jit(body)` is found by `body`."""
    qualname = launch.get("qualname") or launch["kernel"]
    if "<locals>" in qualname:
        return None
    line = launch.get("line")
    for fn in _reachable_kernels(module):
        if fn.fn.__qualname__ == qualname and (line is None or fn.fn.__code__.co_firstlineno == line):
            return fn
    return None


def _reachable_kernels(module: Any) -> list[Any]:
    """JITFunctions bound in the module and in its classes' namespaces (static and class methods unwrapped)."""
    return _jit_objects(_with_class_members(vars(module).values(), module.__name__))


def _with_class_members(values: Any, module_name: str) -> list[Any]:
    """`values` and the members of the classes among them that module `module_name` defines."""
    values = list(values)
    for value in list(values):
        if isinstance(value, type) and getattr(value, "__module__", None) == module_name:
            values += [getattr(v, "__func__", v) for v in vars(value).values()]
    return values


def run_aot(req: AotRequest, state: Any) -> dict[str, Any]:
    """Compile every recorded launch; the first real compile error is returned as `error`."""
    state.candidate_file = str(Path(req.candidate).resolve())
    compiled_lines.install()  # before any candidate code: the code generator's visits are recorded
    state.active = True
    try:
        module = load_module(req.candidate, "kernelagent_candidate", "candidate")
    except ProblemError as e:
        return {"kernels": [], "error": {"category": "load_error", "message": str(e)}}
    kernels, error, skipped = [], None, []
    for r in req.requests:
        if r.get("over_cap"):
            skipped.append(f"{r['kernel']}: launched after more distinct launches than are compiled ahead of time")
            continue
        try:
            fn = find_kernel(module, r)
        except Exception as e:  # noqa: BLE001 - the candidate's objects raised while being looked through
            skipped.append(f"{r['kernel']}: could not be looked up ({type(e).__name__})")
            continue
        if fn is None:
            skipped.append(f"{r['kernel']}: not found by its name at module level or in a module-level class "
                           "(kernels made inside functions cannot be compiled ahead of time)")
            continue
        try:
            kernels.append(compile_one(fn, r))
        except (GlobalsDiffer, compiled_lines.NotCompiled) as e:
            if error is None:
                error = {"category": "compile_error", "message": f"{r['kernel']}: {e}", "detail": str(e)}
        except (KeyError, TypeError) as e:
            skipped.append(f"{r['kernel']}: its arguments cannot be compiled ahead of time ({e})")
        except Exception as e:  # noqa: BLE001 - a compile failure is the candidate's
            category, message = classify_exception(e, state.candidate_file)
            if category == "compile_error" and error is None:
                error = {"category": category, "message": triton_error_line(e, fn, r["kernel"]) + _diagnosed(e),
                         "detail": message}
            elif category != "compile_error":
                skipped.append(f"{r['kernel']}: {type(e).__name__}: {str(e)[:200]}{_diagnosed(e)}")
    return {"kernels": kernels, "error": error, "skipped": skipped}
