"""Canonical names: what a qualified name in the candidate really denotes.

The resolver produces names as the candidate wrote them (`torch.os.kill`, `typing.sys.modules`,
`torch.nn.functional.torch.softmax`). Rules written against such names can be walked around by any
module that happens to import a banned one, so every name is looked up in the real library it starts
from and rewritten:

- a module is named by its own `__name__` (`torch.os` is `os`, `typing.sys` is `sys`, `os.path` is
  `os.path` even though its `__name__` is `posixpath`; C modules map to their public face, `posix` to
  `os`), and a name is "the last module reached, then the rest as written" (`torch.nn.functional.torch
  .softmax` is `torch.softmax`);
- a function or class gets a second name, its home (`__module__` + `__qualname__`), when that is
  another module than the one it was read from (`functools.RLock` lives in `_thread`).

Lookups are static: module dictionaries and `inspect.getattr_static`, so no `__getattr__`, property
or descriptor of a library runs. Only allow-listed libraries are imported, never the candidate, and
never the heavy optional ones (cutlass, cuda) unless this process has them already. A public
submodule that is not loaded yet (`numpy.random`, `torch.onnx`) is imported when a name goes through
it, since that is what the candidate's own process would do; a private one is judged by its name.
Where nothing can be looked up, a part that names a sensitive module (`os`, `sys`, `builtins`, ...)
starts the name again there. Results are memoised for the life of the process.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import inspect
import sys
import types
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from kernelagent.verifier.policy.tables import (
    ALLOWED_IMPORT_ROOTS,
    BANNED,
    MODULE_ALIASES,
    PRIVATE_MACHINERY,
    PRIVATE_OK,
)

_MISSING = object()
# Allowed roots that are imported on demand; cutlass and cuda are looked at only when already loaded.
_IMPORTABLE = (ALLOWED_IMPORT_ROOTS - {"cutlass", "cuda", "__future__"}) | {"builtins"}
# Names that, where a lookup is impossible, are taken to be the module of that name.
SENSITIVE_MODULES = frozenset({
    "os", "posix", "nt", "sys", "builtins", "__builtin__", "importlib", "inspect", "gc", "ctypes", "_ctypes",
    "subprocess", "socket", "signal", "threading", "_thread", "multiprocessing", "pickle", "_pickle", "marshal",
    "io", "_io", "shutil", "pathlib", "tempfile", "runpy", "pkgutil", "pty", "weakref", "traceback",
})
_NOT_IMPORTED = frozenset({"conftest", "tests", "test", "testing_utils", "setup"})  # test suites, installers
_IMPORT_ERRORS = (ImportError, OSError, RuntimeError, AttributeError, ValueError, TypeError, SyntaxError,
                  LookupError, AssertionError)
_DESCRIPTOR_TYPES = (
    property, classmethod, staticmethod, types.GetSetDescriptorType, types.MemberDescriptorType,
    functools.cached_property,
)


@dataclass(frozen=True)
class Canonical:
    """The canonical name of a qualified name, and the home of the object it reaches (if elsewhere)."""

    name: str
    home: str | None = None  # module.qualname of the object, where that module is not the one it was read from
    home_module: str | None = None


def canonical_name(qual: str) -> str:
    """`qual` rewritten to start from the last real module it passes through."""
    return canonical(qual).name


@functools.lru_cache(maxsize=65536)
def canonical(qual: str) -> Canonical:
    """Look `qual` up (the part before any call marker "()") and name what it denotes."""
    head, call, tail = qual.partition("()")
    parts = head.split(".")
    if not all(parts):
        return Canonical(qual)
    walk = _Walk(parts)
    home = walk.home()
    return Canonical(walk.name() + call + tail, f"{home[0]}.{home[1]}" if home else None, home[0] if home else None)


@functools.lru_cache(maxsize=4096)
def ends_process(qual: str) -> bool:
    """Whether `qual` (or what calling it made) is an exception class that is not an Exception: SystemExit,
    KeyboardInterrupt, GeneratorExit, BaseException and whatever a library builds on them."""
    parts = qual.partition("()")[0].split(".")
    if not all(parts):
        return False
    obj = _Walk(parts).obj
    return isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, Exception)


def is_private(part: str) -> bool:
    """`_x` (not a dunder)."""
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def private_path(qual: str) -> bool:
    """A `_x` part in a name (Triton's and CuTe DSL's few listed ones aside)."""
    plain = qual.replace("()", "")
    if any(plain == ok or plain.startswith(ok + ".") for ok in PRIVATE_OK):
        return False
    return any(is_private(p) for p in plain.split("."))


def private_home(found: Canonical) -> bool:
    """A public name for an object of PyTorch's dispatch/tracing machinery, or for a privately named one
    living in private internals (public names backed by private modules, like `F.avg_pool2d`, pass)."""
    module, home = found.home_module, found.home
    if module is None or home is None or module.split(".")[0] not in ("torch", "triton"):
        return False
    if not any(is_private(p) for p in module.split(".")):
        return False
    if any(home == m or home.startswith(m + ".") for m in PRIVATE_MACHINERY):
        return True
    return is_private(home[len(module) + 1:].split(".")[0])


def module_of(name: str) -> str:
    """The public face of a module name (`posixpath` -> `os.path`, `_io` -> `io`)."""
    if name in MODULE_ALIASES:
        return MODULE_ALIASES[name]
    root, dot, rest = name.partition(".")
    return MODULE_ALIASES[root] + dot + rest if root in MODULE_ALIASES else name


class _Walk:
    """One attribute walk: `base` is the last module reached, `rest` the parts after it."""

    def __init__(self, parts: list[str]) -> None:
        self.obj: object = _root_module(parts[0])
        self.base = module_of(_module_name(self.obj, parts[0]) if self.obj is not None else parts[0])
        self.rest: list[str] = []
        self.unknown_from = 0 if self.obj is None else None  # index into rest where lookups stopped
        for part in parts[1:]:
            self._step(part)

    def _step(self, part: str) -> None:
        if self.obj is None:
            self.rest.append(part)
            return
        found = _member(self.obj, self.base, part)
        if isinstance(found, types.ModuleType):
            self.obj, self.base, self.rest = found, module_of(_module_name(found, f"{self.base}.{part}")), []
            return
        if isinstance(found, _Unloaded):  # a submodule known by name only
            self.obj, self.base, self.rest, self.unknown_from = None, module_of(found.name), [], 0
            return
        self.rest.append(part)
        if found is _MISSING or isinstance(found, _DESCRIPTOR_TYPES):
            self.obj, self.unknown_from = None, len(self.rest)
        else:
            self.obj = found

    def name(self) -> str:
        rest = self.rest
        if self.unknown_from is not None:
            for i in range(self.unknown_from, len(rest)):
                if rest[i] in SENSITIVE_MODULES:
                    return module_of(".".join(rest[i:]))
        return ".".join([self.base, *rest])

    def home(self) -> tuple[str, str] | None:
        if self.obj is None or not self.rest:
            return None
        return _home(self.obj, self.base)


def _root_module(root: str) -> types.ModuleType | None:
    module = sys.modules.get(root)
    if isinstance(module, types.ModuleType):
        return module
    if root not in _IMPORTABLE:
        return None
    return _import(root)


def _import(name: str) -> types.ModuleType | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except _IMPORT_ERRORS:
        return None


def _module_name(module: object, fallback: str) -> str:
    name = vars(module).get("__name__") if isinstance(module, types.ModuleType) else None
    return name if isinstance(name, str) and name else fallback


@dataclass(frozen=True)
class _Unloaded:
    """A submodule found on disk but not imported: known by its name only."""

    name: str


def _member(obj: object, base: str, part: str) -> object:
    """The attribute `part` of `obj` without running library code (`_Unloaded` for a submodule not loaded)."""
    if part.startswith("__") and part.endswith("__"):
        return _MISSING
    try:
        found = inspect.getattr_static(obj, part, _MISSING)
    except (TypeError, AttributeError):  # objects with odd __dict__/__class__ (proxies)
        return _MISSING
    if found is _MISSING and isinstance(obj, types.ModuleType):
        return _submodule(obj, base, part)
    return found


def _submodule(module: types.ModuleType, base: str, part: str) -> object:
    full = f"{_module_name(module, base)}.{part}"
    loaded = sys.modules.get(full)
    if isinstance(loaded, types.ModuleType):
        return loaded
    locations = _paths(vars(module).get("__path__"))
    if locations is None or not _on_disk(full, locations):
        return _MISSING
    if _may_import(full):
        return _import(full) or _Unloaded(full)
    return _Unloaded(full)


def _on_disk(full: str, locations: list[str]) -> bool:
    """Whether the submodule `full` exists in its package's folders (found, not imported)."""
    try:
        return importlib.machinery.PathFinder.find_spec(full, locations) is not None
    except (ImportError, ValueError, OSError):
        return False


def _paths(value: object) -> list[str] | None:
    """A package's `__path__` (a list, or a namespace package's path object) as strings."""
    if value is None or isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return None
    paths = list(value)
    return paths if all(isinstance(p, str) for p in paths) else None


def _may_import(full: str) -> bool:
    """Public submodules of importable roots that no rule bans: loading them is what the candidate would do."""
    parts = full.split(".")
    if parts[0] not in _IMPORTABLE or any(is_private(p) or p in _NOT_IMPORTED for p in parts):
        return False
    return not any(".".join(parts[:n]) in BANNED for n in range(1, len(parts) + 1))


def _home(obj: object, base: str) -> tuple[str, str] | None:
    """(module, qualname) of a function or class, when the module is not `base` (the one it was read from)."""
    if isinstance(obj, type):
        module, qualname = type.__dict__["__module__"].__get__(obj), type.__dict__["__qualname__"].__get__(obj)
    elif isinstance(obj, types.FunctionType | types.BuiltinFunctionType):
        module, qualname = obj.__module__, obj.__qualname__
    else:
        return None
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    module = module_of(module)
    return None if module == base else (module, qualname)
