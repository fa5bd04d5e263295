"""Turning a candidate's exception into a category and a short message that points at its own code."""

from __future__ import annotations

import re
import traceback

from kernelagent.problem import exception_str

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MAX_CHARS = 2000

_TRITON_COMPILE = ("CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                   "OutOfResources", "PTXASError", "PTXASCompilationError", "MLIRCompilationError")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def _names(exc: BaseException) -> list[str]:
    return [c.__name__ for c in type(exc).__mro__]


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        out.append(cur)
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return out


def candidate_location(exc: BaseException, candidate_path: str) -> str:
    """'line N: `code`' of the innermost frame in the candidate file, or ''."""
    if not candidate_path:
        return ""
    for e in _chain(exc):
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == candidate_path]
        if frames:
            f = frames[-1]
            return f"line {f.lineno}: `{(f.line or '').strip()}`"
    return ""


def _is_cute(exc: BaseException) -> bool:
    return any(n.startswith("DSL") for n in _names(exc)) or type(exc).__module__.startswith("cutlass")


def classify_exception(exc: BaseException, candidate_path: str = "") -> tuple[str, str]:
    """(category, message) for an exception raised by candidate code."""
    if _is_cute(exc):
        try:
            from kernelagent.verifier.cute import support as cute_support
            return cute_support.classify_exception(exc, candidate_path)
        except (ImportError, AttributeError):
            pass
    for e in _chain(exc):
        names = _names(e)
        if any(n in _TRITON_COMPILE for n in names):
            return "compile_error", _message(e, candidate_path)
    text = exception_str(exc)
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        return "runtime_error", "out of memory: " + _first_line(text)
    if "illegal memory access" in text or "misaligned address" in text or "CUDA error" in text:
        return "runtime_error", "CUDA error (the kernel faulted; check bounds and masks): " + _first_line(text)
    return "runtime_error", _message(exc, candidate_path)


def _first_line(text: str) -> str:
    lines = [ln for ln in strip_ansi(text).splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def _message(exc: BaseException, candidate_path: str) -> str:
    where = candidate_location(exc, candidate_path)
    body = strip_ansi(exception_str(exc)).strip()
    if len(body) > MAX_CHARS:
        body = body[:MAX_CHARS] + " ..."
    head = f"{type(exc).__name__}: {body}" if body else type(exc).__name__
    return f"{head} ({where})" if where and where not in head else head


_TRACEBACK = BaseException.__dict__["__traceback__"]  # read through BaseException's own descriptors: an
_CAUSE = BaseException.__dict__["__cause__"]  # exception class of the candidate's may override the names
_CONTEXT = BaseException.__dict__["__context__"]
_MAX_CHAIN = 64


def passes_through(exc: BaseException, path: str) -> bool:
    """Whether code of `path` (the candidate's file) was running when `exc` was raised: one of its frames is
    in the traceback of `exc` or of an exception it was raised from or while handling."""
    if not path:
        return False
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(cur))
        if any(frame.f_code.co_filename == path for frame, _ in traceback.walk_tb(_TRACEBACK.__get__(cur))):
            return True
        cause = _CAUSE.__get__(cur)
        cur = cause if cause is not None else _CONTEXT.__get__(cur)
    return False
