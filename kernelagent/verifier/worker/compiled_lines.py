"""The AOT compile's side of the line wall: which source positions Triton's code generator visited, and the check
that everything the interpreter ran is among them (the compile worker, aot.py).

Compiled for the GPU a kernel is what the code generator made of the AST nodes it visited: a branch whose
constexpr condition is false, the other arm of a conditional expression, the rest of a short-circuited `and`, a
passing `tl.static_assert`'s message are never visited and do not exist on the GPU. Under the interpreter Python
runs whatever the launch's values select. An instruction the interpreter ran (interp_lines) whose source position
lies inside a node the compile never visited is code that ran on CPU and exists nowhere on the GPU: the
candidate is refused (`compile_error`). Nodes the generator reads without visiting them (a loop's `range(...)`,
a `with` item, assignment targets, the parts of an f-string) are not such nodes; nor is a passing
`tl.static_assert` message without calls or assignment expressions (a constant, an f-string): Python evaluates it
and nothing changes.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kernelagent.verifier.worker.interp_lines import decode, function_key, source_digest

Span = tuple[int, int, int, int]  # line, end line, column, end column (lines from the `def`, 1)


class NotCompiled(Exception):
    """The interpreter ran kernel code that the compile for the GPU never generated."""


@dataclass
class Visits:
    """What the code generator visited in one @triton.jit function during one compile."""

    fn: Any  # the JITFunction
    spans: set[Span] = field(default_factory=set)
    messages: set[Span] = field(default_factory=set)  # a passing static_assert's message arguments


_SINK: list[dict[int, Visits] | None] = [None]  # id(JITFunction) -> visits, while a compile is recorded
_BY_HASH: dict[str, dict[str, Visits]] = {}  # compiled kernel hash -> visits (a cached compile visits nothing)


def _span(node: Any) -> Span | None:
    end_col = getattr(node, "end_col_offset", None)
    if end_col is None or getattr(node, "lineno", None) is None or node.end_lineno is None:
        return None
    return node.lineno, node.end_lineno, node.col_offset, end_col


def _visits(generator: Any) -> Visits | None:
    sink = _SINK[0]
    if sink is None:
        return None
    fn = generator.jit_fn
    found = sink.get(id(fn))
    if found is None:
        found = sink[id(fn)] = Visits(fn)
    return found


def install() -> None:
    """Record the code generator's visits (CodeGenerator.visit) and static_assert's message arguments."""
    import triton.language as tl
    from triton.compiler.code_generator import CodeGenerator

    if getattr(CodeGenerator.visit, "_ka_recording", False):
        return
    visit = CodeGenerator.visit

    def recording_visit(self: Any, node: Any) -> Any:
        found = _visits(self) if node is not None else None
        if found is not None:
            span = _span(node)
            if span is not None:
                found.spans.add(span)
        return visit(self, node)

    recording_visit._ka_recording = True  # type: ignore[attr-defined]
    CodeGenerator.visit = recording_visit
    table = CodeGenerator.statically_implemented_functions
    for static_assert in {tl.core.static_assert, *_gluon_static_asserts()}:
        if static_assert in table:
            table[static_assert] = _recording_static_assert(table[static_assert])


def _gluon_static_asserts() -> list[Any]:
    try:
        from triton.experimental.gluon import language as ttgl
    except ImportError:
        return []
    return [ttgl.static_assert]


def _recording_static_assert(execute: Any) -> Any:
    def execute_static_assert(self: Any, node: Any) -> Any:
        found = _visits(self)
        if found is not None:
            found.messages.update(s for s in map(_span, node.args[1:]) if s is not None)
        return execute(self, node)

    return execute_static_assert


@contextlib.contextmanager
def _recording() -> Iterator[dict[int, Visits]]:
    sink: dict[int, Visits] = {}
    _SINK[0] = sink
    try:
        yield sink
    finally:
        _SINK[0] = None


def _by_key(sink: dict[int, Visits]) -> dict[str, Visits]:
    out: dict[str, Visits] = {}
    for found in sink.values():
        key = function_key(getattr(found.fn, "fn", None))
        have = out.setdefault(key, Visits(found.fn))
        have.spans |= found.spans
        have.messages |= found.messages
    return out


def compile_recorded(compile_fn: Any) -> tuple[Any, dict[str, Visits]]:
    """Run `compile_fn` (a triton.compile call) recording what the code generator visited, per function key. A
    compile found in Triton's cache generates nothing: its visits are those of the same hash earlier in this
    process, or it is compiled again with the cache bypassed."""
    import triton

    install()
    with _recording() as sink:
        compiled = compile_fn()
    visits = _by_key(sink)
    if not visits:
        visits = _BY_HASH.get(getattr(compiled, "hash", None) or "", {})
    if not visits:
        knobs = triton.knobs.compilation
        saved = knobs.always_compile
        knobs.always_compile = True
        try:
            with _recording() as sink:
                compiled = compile_fn()
        finally:
            knobs.always_compile = saved
        visits = _by_key(sink)
    if getattr(compiled, "hash", None):
        _BY_HASH[compiled.hash] = visits
    return compiled, visits


_PURE_FORBIDDEN = (ast.Call, ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.ListComp,
                   ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _inert(node: ast.AST) -> bool:
    """An expression whose evaluation changes nothing: no call, no assignment expression, no nested code."""
    return not any(isinstance(n, _PURE_FORBIDDEN) for n in ast.walk(node))


def _read_unvisited(tree: ast.AST, messages: set[Span]) -> set[int]:
    """Nodes the code generator reads without visiting them (their parts are visited), and inert static_assert
    messages with all their parts."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if _span(node) in messages and _inert(node):
            out.update(id(n) for n in ast.walk(node))
        elif isinstance(node, ast.For):
            out.add(id(node.iter))  # range(...) / tl.range(...) / tl.static_range(...): func and args visited
        elif isinstance(node, ast.withitem):
            out.add(id(node.context_expr))
        elif isinstance(node, ast.JoinedStr):
            out.update(id(v) for v in node.values)  # constant parts and {fields}: the fields' values are visited
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None and _inert(node.format_spec):
            out.add(id(node.format_spec))  # ignored by the generator; harmless when inert
        elif isinstance(node, ast.Call):
            out.update(id(a) for a in node.args if isinstance(a, ast.Starred))
    return out


def dead_nodes(tree: ast.AST, visits: Visits) -> list[ast.AST]:
    """Statements and expressions of `tree` that the compile never generated and Python would evaluate."""
    read = _read_unvisited(tree, visits.messages)
    dead = []
    for node in ast.walk(tree):
        span = _span(node) if isinstance(node, (ast.stmt, ast.expr)) else None
        if span is None or span in visits.spans or id(node) in read:
            continue
        if isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            continue  # an assignment's target: its statement is what is generated or not
        dead.append(node)
    return dead


def _inside(span: Span, node: ast.AST) -> bool:
    line, end, col, end_col = span
    outer = _span(node)
    return outer is not None and (outer[0], outer[2]) <= (line, col) and (end, end_col) <= (outer[1], outer[3])


def _source_line(visits: Visits, line: int) -> str:
    lines = str(getattr(visits.fn, "src", "")).splitlines()
    return lines[line - 1].strip()[:120] if 0 < line <= len(lines) else "?"


def _def_line(fn: Any, default: int) -> int:
    """The file line of the function's `def`, as Triton counts it."""
    from triton.runtime.jit import get_jit_fn_file_line

    try:
        return int(get_jit_fn_file_line(fn)[1])
    except (AttributeError, TypeError, ValueError):
        return default


def check(ran: Any, compiled: dict[str, Visits]) -> None:
    """Raise NotCompiled naming the first line the interpreter ran (`ran`, the launch record's) that is not
    in the compile (`compiled`, from compile_recorded)."""
    if not isinstance(ran, dict):
        raise NotCompiled("the record of the kernel code the interpreter ran is malformed")
    for key, entry in sorted(ran.items()):
        try:
            spans, def_line, digest = decode(entry["pos"]), int(entry["def"]), str(entry["src"])
        except (KeyError, TypeError, ValueError) as e:
            raise NotCompiled("the record of the kernel code the interpreter ran is malformed") from e
        name = key.split(":")[1] if key.count(":") >= 2 else key
        visits = compiled.get(key)
        if visits is None:
            first = min(spans, default=(1, 1, 0, 0))[0]
            raise NotCompiled(f"line {def_line + first - 1} ran under the interpreter but is not in the kernel "
                              f"compiled for the GPU: {name} is never compiled in it")
        src = str(getattr(visits.fn, "src", ""))
        def_line = _def_line(visits.fn, def_line)
        if source_digest(src) != digest:
            raise NotCompiled(f"the source of {name} compiled for the GPU is not the source the interpreter ran")
        dead = dead_nodes(ast.parse(src), visits)
        for span in sorted(spans):
            if any(_inside(span, node) for node in dead):
                raise NotCompiled(f"line {def_line + span[0] - 1} ran under the interpreter but is not in the "
                                  f"kernel compiled for the GPU: `{_source_line(visits, span[0])}` ({name}; the "
                                  "compiler dropped it)")
