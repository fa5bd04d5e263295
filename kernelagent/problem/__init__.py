"""Loading problem files (op.py, KernelBench format plus our extensions) and candidate files (kernel.py).

Two levels: `inspect_*` reads a file with the AST only (safe in any process, used by the parent for
clear early errors and backend detection); `load_*` imports it (only ever done in a verifier worker).
Every failure is a `ProblemError` whose one-paragraph message names the file, the line and what is wrong.
This module imports only the standard library (torch lazily), so the bare verifier worker can use it.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import math
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

BACKENDS = ("triton", "cute")
TOLERANCE_KEYS = ("atol", "rtol")
_MAX_DETAIL = 400  # characters of an exception's text kept in a message


class ProblemError(Exception):
    """A problem or candidate file that cannot be used; the message is meant for a human."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.path, self.line = path, line


@dataclass
class ProblemSpec:
    path: str
    name: str
    source: str
    sha256: str
    has_test_inputs: bool = False
    backward: bool = False
    tolerance: dict[str, float] | None = None


@dataclass
class CandidateSpec:
    path: str
    source: str
    sha256: str
    backend: str  # triton | cute | unknown
    imports: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- messages


def _where(path: str, line: int | None) -> str:
    return f"{path}, line {line}" if line else path


def _fail(what: str, path: str, line: int | None, text: str) -> ProblemError:
    return ProblemError(f"{what} file {_where(path, line)}: {text}", path=path, line=line)


def exception_str(exc: BaseException) -> str:
    """str(exc), or '' where that fails: an exception from a candidate or a problem file may bring a
    `__str__` that recurses or raises, and rendering it must not become the caller's own error."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - RecursionError included: whatever its __str__ does
        return ""
    return text if type(text) is str else ""


def _exc_text(exc: BaseException) -> str:
    """`Type: message` on one line, trimmed, so a message never carries a traceback or a blank line."""
    detail = " ".join(exception_str(exc).split())
    if len(detail) > _MAX_DETAIL:
        detail = detail[: _MAX_DETAIL - 3] + "..."
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def _line_in(path: str, exc: BaseException) -> tuple[int | None, str]:
    """The deepest line of `path` in the exception's traceback, and its code (or '')."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _same_file(f.filename, path)]
    if not frames:
        return None, ""
    return frames[-1].lineno, (frames[-1].line or "").strip()


# ---------------------------------------------------------------- static inspection


def _read(path: str, what: str) -> str:
    p = Path(path)
    if not p.exists():
        raise ProblemError(f"{what} file {path} does not exist.", path=path)
    if p.is_dir():
        raise ProblemError(f"{what} path {path} is a folder; give the .py file.", path=path)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ProblemError(f"{what} file {path} is not UTF-8 text ({e.reason}).", path=path) from e
    except OSError as e:
        raise ProblemError(f"{what} file {path} cannot be read ({e.strerror or e}).", path=path) from e


def _parse(source: str, path: str, what: str) -> ast.Module:
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as e:
        raise _syntax_error(e, path, what) from e
    except ValueError as e:  # null bytes in the source (Python 3.11)
        raise _fail(what, path, None, f"cannot be parsed ({e}).") from e
    except (RecursionError, MemoryError) as e:  # a 3000-term expression: Python's own parser gives up
        raise _fail(what, path, None, f"is nested too deeply to be parsed ({type(e).__name__}); simplify it.") from e


def _syntax_error(e: SyntaxError, path: str, what: str) -> ProblemError:
    snippet = " ".join((e.text or "").split())
    code = f" in `{snippet}`" if snippet else ""
    return _fail(what, path, e.lineno, f"syntax error: {e.msg}{code}.")


def _top_level(tree: ast.Module) -> dict[str, ast.stmt]:
    """Names bound at module level (also inside module-level if/try/with blocks), last binding wins."""
    names: dict[str, ast.stmt] = {}
    for node in _module_statements(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    names[t.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names[(a.asname or a.name).split(".")[0]] = node
    return names


def _module_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.If, ast.With, ast.Try)):
            out += _module_statements(node.body)
            out += _module_statements(getattr(node, "orelse", []))
            for h in getattr(node, "handlers", []):
                out += _module_statements(h.body)
            out += _module_statements(getattr(node, "finalbody", []))
    return out


def _literal(node: ast.stmt | None, name: str, path: str, example: str) -> Any:
    """The value of a top-level `NAME = <literal>`; None when the name is not assigned."""
    if node is None:
        return None
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if value is None:
        raise _fail("problem", path, node.lineno,
                    f"{name} must be assigned a literal, like `{name} = {example}`.")
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
        code = ast.unparse(value)
        raise _fail("problem", path, node.lineno,
                    f"{name} must be a literal (it is read without running the file), like "
                    f"`{name} = {example}`; got `{code}`.") from e


def _check_tolerance(tol: Any, path: str, line: int | None) -> dict[str, float] | None:
    if tol is None:
        return None
    example = "{'atol': 1e-2, 'rtol': 1e-2}"
    if not isinstance(tol, dict) or not tol:
        raise _fail("problem", path, line, f"TOLERANCE must be a non-empty dict like {example}; got {tol!r}.")
    unknown = sorted(str(k) for k in tol if k not in TOLERANCE_KEYS)
    if unknown:
        raise _fail("problem", path, line, f"TOLERANCE has unknown key(s) {', '.join(unknown)}; "
                    f"only 'atol' and 'rtol' are read, as in {example}.")
    for k, v in tol.items():
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        if not ok:
            raise _fail("problem", path, line, f"TOLERANCE['{k}'] must be a finite number >= 0; got {v!r}.")
    return {k: float(v) for k, v in tol.items()}


def _check_model_node(node: ast.stmt, path: str) -> None:
    """Reject a `Model` that is plainly not a class (a function, a constant); aliases wait for import."""
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    plain = isinstance(value, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.Lambda))
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or plain:
        kind = "a function" if value is None else f"`{ast.unparse(value)}`"
        raise _fail("problem", path, node.lineno, f"`Model` must be a class (`class Model(nn.Module)`), "
                    f"but it is {kind}.")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def inspect_problem(path: str | Path) -> ProblemSpec:
    """Check a problem file statically: Model and get_inputs must exist; TOLERANCE/BACKWARD are literals."""
    path = str(path)
    source = _read(path, "problem")
    names = _top_level(_parse(source, path, "problem"))
    missing = [n for n in ("Model", "get_inputs") if n not in names]
    if missing:
        raise _fail("problem", path, None,
                    f"missing {' and '.join(f'`{m}`' for m in missing)}. A problem file defines "
                    "`class Model(nn.Module)` (the reference), `get_inputs()` (one input set) and optionally "
                    "`get_init_inputs()` (constructor arguments), as in KernelBench.")
    _check_model_node(names["Model"], path)
    tol_node = names.get("TOLERANCE")
    tol = _literal(tol_node, "TOLERANCE", path, "{'atol': 1e-2, 'rtol': 1e-2}")
    tolerance = _check_tolerance(tol, path, tol_node.lineno if tol_node else None)
    bw_node = names.get("BACKWARD")
    backward = _literal(bw_node, "BACKWARD", path, "True")
    if backward is not None and not isinstance(backward, bool):
        raise _fail("problem", path, bw_node.lineno, f"BACKWARD must be True or False; got {backward!r}.")
    return ProblemSpec(
        path=path, name=problem_name(path), source=source, sha256=sha256_text(source),
        has_test_inputs="get_test_inputs" in names, backward=bool(backward), tolerance=tolerance)


def problem_name(path: str | Path) -> str:
    """The file's stem, or its folder's name for `op.py`/`reference.py`/`problem.py` (absolute: a bare
    `op.py` run from its own folder has an empty parent name)."""
    p = Path(path).absolute()
    return p.parent.name if p.stem in ("op", "reference", "problem") else p.stem


def detect_backend(tree: ast.Module) -> tuple[str, list[str]]:
    """The backend whose kernels the file decorates (`@triton.jit`, `@cute.kernel`); failing that,
    'cute' if it imports cutlass, 'triton' if it imports triton, else 'unknown'. Also the imports."""
    mods: list[str] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods += [a.name for a in node.names]
            aliases.update({a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                            for a in node.names})
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.append(node.module)
            aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    decorated = _decorated_roots(tree, aliases) & {"triton", "cutlass"}
    roots = decorated if len(decorated) == 1 else {m.split(".")[0] for m in mods}
    backend = "cute" if "cutlass" in roots else "triton" if "triton" in roots else "unknown"
    return backend, sorted(set(mods))


def _decorated_roots(tree: ast.Module, aliases: dict[str, str]) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                while isinstance(target, ast.Attribute):
                    target = target.value
                if isinstance(target, ast.Name) and target.id in aliases:
                    roots.add(aliases[target.id].split(".")[0])
    return roots


# The largest candidate file read: the library's largest kernel file is about 175 KB, and the static policy reads the
# whole file in the verifier's own process (red team, 2026-12-05: a 0.9 MB file held it 67 s, twice).
MAX_CANDIDATE_BYTES = 512 * 1024


def inspect_candidate(path: str | Path) -> CandidateSpec:
    """Check a candidate file statically: at most MAX_CANDIDATE_BYTES, it must parse and define `class ModelNew`."""
    path = str(path)
    source = _read(path, "candidate")
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > MAX_CANDIDATE_BYTES:
        raise _fail("candidate", path, None, f"is {size // 1024} KiB; the verifier reads kernel files of up to "
                                             f"{MAX_CANDIDATE_BYTES // 1024} KiB. Keep the kernel and ModelNew only.")
    tree = _parse(source, path, "candidate")
    node = _top_level(tree).get("ModelNew")
    if not isinstance(node, ast.ClassDef):
        found = "" if node is None else f" (`ModelNew` at line {node.lineno} is not a class)"
        raise _fail("candidate", path, getattr(node, "lineno", None),
                    f"no `class ModelNew(nn.Module)` at top level{found}. A candidate defines ModelNew with "
                    "the reference's constructor and forward signature, computing with its own Triton or "
                    "CuTe DSL kernels.")
    backend, imports = detect_backend(tree)
    return CandidateSpec(path=path, source=source, sha256=sha256_text(source), backend=backend,
                         imports=imports)


# ---------------------------------------------------------------- importing


def _import_error(path: str, exc: BaseException, what: str) -> ProblemError:
    line, code = _line_in(path, exc)
    if line is None and isinstance(exc, SyntaxError) and exc.filename and _same_file(exc.filename, path):
        line = exc.lineno
    at = f" at `{code}`" if code else ""
    return _fail(what, path, line, f"importing it raised {_exc_text(exc)}{at}.")


def load_module(path: str | Path, module_name: str, what: str = "problem") -> ModuleType:
    """Import a real .py file under `module_name` (Triton and CuTe DSL both need a real file)."""
    shown = str(path)
    if not Path(shown).is_file():
        _read(shown, what)  # raises the precise "does not exist" / "is a folder" error
    spec = importlib.util.spec_from_file_location(module_name, str(Path(shown).resolve()))
    if spec is None or spec.loader is None:
        raise _fail(what, shown, None, "cannot be imported (is it a .py file?).")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(module_name, None)
        own = e.filename is not None and _same_file(e.filename, shown)
        raise (_syntax_error(e, shown, what) if own else _import_error(shown, e, what)) from e
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any import failure is the file's fault
        sys.modules.pop(module_name, None)
        raise _import_error(shown, e, what) from e
    return module


@dataclass
class LoadedProblem:
    module: ModuleType
    spec: ProblemSpec

    @property
    def model_cls(self) -> type:
        return self.module.Model

    def init_inputs(self) -> list[Any]:
        """The constructor arguments (get_init_inputs(), or none when the file has no such function)."""
        fn = getattr(self.module, "get_init_inputs", None)
        return list(_call(fn, self.spec.path, "get_init_inputs")) if fn is not None else []

    def input_sets(self) -> list[list[Any]]:
        """The main input set first, then every set of get_test_inputs(); dtypes as the file made them."""
        path = self.spec.path
        sets = [list(_call(getattr(self.module, "get_inputs", None), path, "get_inputs"))]
        fn = getattr(self.module, "get_test_inputs", None)
        if fn is not None:
            for i, s in enumerate(_call(fn, path, "get_test_inputs")):
                if not isinstance(s, (list, tuple)):
                    raise _fail("problem", path, _def_line(fn),
                                f"get_test_inputs() must return a list of input sets (each a list, like "
                                f"get_inputs() returns), but item {i} is a {type(s).__name__}.")
                sets.append(list(s))
        return sets


def problem_error(exc: BaseException, path: str, what: str) -> ProblemError | None:
    """A ProblemError naming the problem file's line when `exc` was raised in that file's code (its forward
    or its helpers), else None (the failure was not the problem's)."""
    line, code = _line_in(path, exc)
    if line is None:
        return None
    at = f" at `{code}`" if code else ""
    return _fail("problem", path, line, f"{what} raised {_exc_text(exc)}{at}.")


def _def_line(fn: Any) -> int | None:
    code = getattr(fn, "__code__", None)
    return code.co_firstlineno if code is not None else None


def _call(fn: Any, path: str, name: str) -> list[Any] | tuple[Any, ...]:
    if not callable(fn):
        raise _fail("problem", path, None, f"`{name}` must be a function; got {type(fn).__name__}.")
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001 - any failure here is the problem file's
        line, code = _line_in(path, e)
        at = f" at `{code}`" if code else ""
        raise _fail("problem", path, line, f"{name}() raised {_exc_text(e)}{at}.") from e
    if not isinstance(out, (list, tuple)):
        raise _fail("problem", path, _def_line(fn),
                    f"{name}() must return a list or tuple, got {type(out).__name__}.")
    return out


def load_problem(path: str | Path, module_name: str = "kernelagent_problem") -> LoadedProblem:
    """Inspect, then import a problem file; `Model` must be an nn.Module subclass after import."""
    spec = inspect_problem(path)
    module = load_module(spec.path, module_name, "problem")
    try:
        _check_model_class(module, spec)
    except ProblemError:
        sys.modules.pop(module_name, None)
        raise
    return LoadedProblem(module=module, spec=spec)


def _check_model_class(module: ModuleType, spec: ProblemSpec) -> None:
    model = getattr(module, "Model", None)
    node = _top_level(ast.parse(spec.source)).get("Model")
    line = node.lineno if node is not None else None
    if not inspect.isclass(model):
        raise _fail("problem", spec.path, line, f"`Model` is not a class after import (it is a "
                    f"{type(model).__name__}); define `class Model(nn.Module)`.")
    torch = sys.modules.get("torch")
    if torch is not None and not issubclass(model, torch.nn.Module):
        raise _fail("problem", spec.path, line, f"`Model` must subclass torch.nn.Module (it is "
                    f"{model.__name__}, bases {', '.join(b.__name__ for b in model.__bases__)}).")


# ---------------------------------------------------------------- signatures


@dataclass
class _Arity:
    signature: str
    required: int          # positional parameters without a default
    most: float            # positional parameters accepted (inf with *args)
    required_kwonly: list[str]


def signature_mismatch(ref_cls: type, new_cls: type) -> str | None:
    """Whether ModelNew can be built and called exactly as Model is; a message saying how not, or None.

    Extra optional parameters and *args/**kwargs in ModelNew are fine; so is a reference that takes *args.
    """
    return _first_mismatch(lambda meth: (_arity(ref_cls, meth), _arity(new_cls, meth)))


def _first_mismatch(arities: Any) -> str | None:
    """Compare __init__ then forward; `arities(meth)` gives (reference, candidate), either may be None."""
    for meth in ("__init__", "forward"):
        a, b = arities(meth)
        if a is None or b is None:
            continue
        why = _incompatible(a, b)
        if why:
            return (f"ModelNew.{meth}{b.signature} does not match Model.{meth}{a.signature}: {why}; "
                    "keep the reference's constructor and forward signature.")
    return None


def _incompatible(ref: _Arity, new: _Arity) -> str | None:
    if new.required_kwonly:
        return f"it requires keyword-only argument(s) {', '.join(new.required_kwonly)} that no caller passes"
    if ref.most == math.inf:
        return None  # the reference takes *args: the actual count is only known from get_inputs()
    if new.most < ref.most:
        return f"it accepts {_count(new.most)} positional argument(s), the reference {_count(ref.most)}"
    if new.required > ref.required:
        return f"it requires {new.required} argument(s), the reference {ref.required}"
    return None


def _count(n: float) -> str:
    return "any number of" if n == math.inf else str(int(n))


def _arity(cls: type, meth: str) -> _Arity | None:
    fn = getattr(cls, meth, None)
    if fn is None:
        return None
    if meth == "__init__" and _inherits_base_init(cls):
        return _Arity("(self)", 0, 0, [])  # nn.Module's own __init__ takes no arguments
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())[1:]  # drop self
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return _Arity(
        signature=str(sig),
        required=sum(p.default is p.empty for p in positional),
        most=math.inf if any(p.kind is p.VAR_POSITIONAL for p in params) else len(positional),
        required_kwonly=[p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty])


def _inherits_base_init(cls: type) -> bool:
    """Whether `cls` defines no __init__ of its own below nn.Module (by where it is defined in the MRO, not by
    the function object, which a profiler or patch may have wrapped)."""
    owner = next((k for k in cls.__mro__ if "__init__" in vars(k)), object)
    return owner is object or (owner.__module__, owner.__qualname__) == ("torch.nn.modules.module", "Module")


def _ast_arity(tree: ast.Module, cls_name: str, meth: str) -> _Arity | None:
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name), None)
    if cls is None:
        return None
    fn = next((n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == meth),
              None)
    if fn is None:
        plain = all(isinstance(b, ast.Attribute) and b.attr == "Module" or
                    isinstance(b, ast.Name) and b.id == "Module" for b in cls.bases)
        return _Arity("(self)", 0, 0, []) if meth == "__init__" and plain else None
    a = fn.args
    positional = (a.posonlyargs + a.args)[1:]
    n_defaults = len(a.defaults)
    kw_required = [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    return _Arity(signature=f"({ast.unparse(a)})", required=len(positional) - n_defaults,
                  most=math.inf if a.vararg else len(positional), required_kwonly=kw_required)


def static_signature_mismatch(problem_source: str, candidate_source: str) -> str | None:
    """`signature_mismatch` from the sources alone (the parent never imports a candidate); None where the
    sources cannot tell (unparsable, or nested past what ast.unparse can print: the worker's import decides)."""
    try:
        ref_tree, new_tree = ast.parse(problem_source), ast.parse(candidate_source)
        return _first_mismatch(lambda meth: (_ast_arity(ref_tree, "Model", meth),
                                             _ast_arity(new_tree, "ModelNew", meth)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
