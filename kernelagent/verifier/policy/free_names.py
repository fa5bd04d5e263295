"""Global names a candidate reads but never defines.

Honest code that reads an undefined global fails with NameError. A candidate's module can gain globals
it never wrote, though: the Triton interpreter copies its own module's globals (`inspect`, `np`, ...)
into the module of every kernel it runs. A name used but bound nowhere is therefore either a bug or a
way to reach a module the policy never saw imported. Scoping follows CPython's own symbol table.
"""

from __future__ import annotations

import ast
import builtins
import symtable

# what every module has without defining it (besides the builtins)
_MODULE_GLOBALS = frozenset({"__name__", "__doc__", "__file__", "__builtins__", "__spec__", "__loader__",
                             "__package__", "__cached__", "__annotations__", "__dict__",
                             "__qualname__", "__module__", "__class__"})  # a class body's own, a method's cell
_KNOWN = frozenset(dir(builtins)) | _MODULE_GLOBALS


def undefined_globals(tree: ast.Module, source: str, filename: str = "kernel.py") -> dict[str, ast.Name]:
    """Each global name read somewhere but bound nowhere in the module, with its first use."""
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)):
        return {}  # a star import binds names no reader can list (the policy reports the import itself)
    try:
        top = symtable.symtable(source, filename, "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    defined, read = _module_bindings(top), set()
    for table in _tables(top):
        for sym in _symbols(table):
            is_global = table is top or sym.is_global()
            if is_global and sym.is_referenced():
                read.add(sym.get_name())
            if sym.is_declared_global() and sym.is_assigned():
                defined.add(sym.get_name())  # `global x` then `x = ...` in a function binds a module name
    missing = read - defined - _KNOWN
    first: dict[str, ast.Name] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in missing and isinstance(node.ctx, ast.Load):
            if node.id not in first or (node.lineno, node.col_offset) < (first[node.id].lineno,
                                                                          first[node.id].col_offset):
                first[node.id] = node
    return first


def _module_bindings(top: symtable.SymbolTable) -> set[str]:
    return {s.get_name() for s in _symbols(top) if s.is_assigned() or s.is_imported() or s.is_namespace()}


def _symbols(table: symtable.SymbolTable) -> list[symtable.Symbol]:
    """table.get_symbols(), without its scan of every child table for each name: quadratic in the file's
    functions (30,000 one-line ones held the check 40 s; red team, 2026-12-05). The flags are the table's own, the
    namespaces its children indexed by name once."""
    raw = getattr(table, "_table", None)
    flags = getattr(raw, "symbols", None)
    if not isinstance(flags, dict):  # another CPython's layout: its own, slower, way
        return table.get_symbols()
    children: dict[str, list] = {}
    for child in raw.children:
        children.setdefault(child.name, []).append(child)
    top = raw.name == "top"
    return [symtable.Symbol(name, flag, tuple(children.get(name, ())), module_scope=top)
            for name, flag in flags.items()]


def _tables(top: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    out, todo = [], [top]
    while todo:
        table = todo.pop()
        out.append(table)
        todo.extend(table.get_children())
    return out
