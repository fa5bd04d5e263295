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
        for sym in table.get_symbols():
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
    return {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}


def _tables(top: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    out, todo = [], [top]
    while todo:
        table = todo.pop()
        out.append(table)
        todo.extend(table.get_children())
    return out
