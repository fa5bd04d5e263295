"""What of each kernel's source the interpreter ran, for the AOT compile to compare (CPU workers).

Under the interpreter a kernel's Python runs on the launch's values; compiled for the GPU only what Triton's code
generator visited exists. A kernel can tell the two apart without any call the profile hook sees (`type` of a
constexpr through a module, a branch on what `__dict__` holds, an assignment expression in a passing
`tl.static_assert` message) and compute the answer in code the compiler drops (2026-12-03). So while a grid runs,
the instructions executed in the kernel's own rewritten code (and the @triton.jit functions it calls) are traced
and their source positions sent with the launch; `compiled_lines` refuses any that the compile never generated.

Positions are (line, end line, column, end column) with lines counted from the function's `def` (1), as the code
generator's parse counts them, and columns in the interpreter's dedented source.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Traced:
    """One rewritten kernel function: the key both processes name it by, and where its source starts."""

    key: str
    def_line: int  # line of `def` in the file
    digest: str  # of the source the interpreter parsed
    ran: set[int] = field(default_factory=set)  # instruction offsets run during the current grid


TRACED: dict[Any, Traced] = {}  # rewritten code object -> its record
TRACERS: dict[Any, Any] = {}  # rewritten code object -> its local trace function


def function_key(fn: Any) -> str:
    """How a kernel's Python function is named in the launch record and in the AOT compile (module, qualified
    name, first line: the candidate is imported under the same module name in both processes)."""
    code = getattr(fn, "__code__", None)
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}:{getattr(code, 'co_firstlineno', 0)}"


def source_digest(src: str) -> str:
    return hashlib.sha256(src.encode()).hexdigest()[:16]


def register(rewritten: Any, original: Any, def_line: int, src: str) -> Any:
    """Trace `rewritten` (the interpreter's copy of `original`, parsed from `src`, its `def` on line
    `def_line`) during grids. Triton's own @jit functions are not the candidate's and are left out."""
    from kernelagent.verifier.worker.interp_calls import _allowed_file

    code = getattr(rewritten, "__code__", None)
    if code is not None and not _allowed_file(code.co_filename):
        record = TRACED[code] = Traced(function_key(original), int(def_line), source_digest(src))
        add = record.ran.add

        def trace(frame: Any, event: str, arg: Any) -> Any:
            add(frame.f_lasti)
            return trace

        TRACERS[code] = trace
    return rewritten


def follow(frame: Any, trace: Any) -> None:
    """Trace the opcodes of `frame`, a traced kernel's (called by interp_calls' profile hook as the frame starts):
    opcode events say which instructions ran, line events would add nothing."""
    frame.f_trace = trace
    frame.f_trace_lines = False
    frame.f_trace_opcodes = True


def start() -> None:
    """Begin (or keep) tracing: called as each program of a grid starts. The global trace function is a C
    function that returns None (`getattr(frame, "call", None)`): every Python call of the grid pays a C call,
    not a Python one; only the frames `follow` marks get a local trace function."""
    if sys.gettrace() is not getattr:
        sys.settrace(getattr)


def stop() -> None:
    sys.settrace(None)


def clear() -> None:
    for record in TRACED.values():
        record.ran.clear()


def ran() -> dict[str, dict[str, Any]]:
    """What the traced kernels ran since `clear`: per function key, its `def` line, source digest and the
    positions of the instructions run, encoded as one string ("line,end,col,endcol;...")."""
    out: dict[str, dict[str, Any]] = {}
    for code, record in TRACED.items():
        if not record.ran:
            continue
        positions = list(code.co_positions())
        spans = set()
        for offset in record.ran:
            line, end, col, end_col = positions[offset // 2] if offset // 2 < len(positions) else (None,) * 4
            if line is None or end is None or col is None or end_col is None:
                continue  # an instruction the compiler placed nowhere (a function's prologue)
            spans.add((line - record.def_line + 1, end - record.def_line + 1, col, end_col))
        entry = out.setdefault(record.key, {"def": record.def_line, "src": record.digest, "pos": set()})
        entry["pos"] |= spans
    return {k: {**v, "pos": encode(v["pos"])} for k, v in out.items()}


def encode(spans: set[tuple[int, int, int, int]]) -> str:
    return ";".join(",".join(map(str, s)) for s in sorted(spans))


def decode(text: str) -> set[tuple[int, int, int, int]]:
    """The spans `encode` wrote; malformed items are dropped by the caller's ValueError."""
    out = set()
    for item in filter(None, str(text).split(";")):
        a, b, c, d = (int(x) for x in item.split(","))
        out.add((a, b, c, d))
    return out


def merge_into(record: dict[str, Any], found: dict[str, dict[str, Any]]) -> None:
    """Add one grid's positions to a launch record (launches of the same compile share one record)."""
    have = record.setdefault("ran", {})
    for key, entry in found.items():
        old = have.get(key)
        if old is None:
            have[key] = dict(entry)
        else:
            old["pos"] = encode(decode(old["pos"]) | decode(entry["pos"]))
