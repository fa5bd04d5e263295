"""A long source file shortened by function, never cut mid-statement: for examples in the first prompt.

Imports and module-level assignments stay whole; each function keeps its decorators, signature and the
first line of its docstring, with the body replaced by `...`; a class keeps its header and its methods
shortened the same way. A file that does not parse is not shortened (the caller leaves it out).
"""

from __future__ import annotations

import ast

ELIDED = "..."


def _doc_line(node: ast.AST) -> str | None:
    doc = ast.get_docstring(node, clean=True) if isinstance(
        node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else None
    return doc.strip().splitlines()[0] if doc and doc.strip() else None


def _header(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    """Decorator lines and the signature up to the line holding the body's first statement."""
    start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
    body_line = node.body[0].lineno - 1
    head = lines[start:body_line] if body_line > start else lines[start:start + 1]
    return [line for line in head if line.strip()]


def _shorten(lines: list[str], node: ast.stmt, indent: str) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        out = _header(lines, node)
        doc = _doc_line(node)
        inner = indent + "    "
        return out + ([f'{inner}"""{doc}"""'] if doc else []) + [f"{inner}{ELIDED}"]
    if isinstance(node, ast.ClassDef):
        out = _header(lines, node)
        doc = _doc_line(node)
        inner = indent + "    "
        if doc:
            out.append(f'{inner}"""{doc}"""')
        for child in node.body:
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out += _shorten(lines, child, inner)
            elif not (isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant)):
                out += lines[child.lineno - 1:child.end_lineno]
        return out
    return lines[node.lineno - 1:node.end_lineno]


def summarise(source: str) -> str | None:
    """The file with every function body elided, or None when it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    lines = source.splitlines()
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]:
            continue  # module docstring
        block = _shorten(lines, node, "")
        if out and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append("")
        out += block
    return "\n".join(out).strip("\n") + "\n"


def fit(source: str, limit: int) -> tuple[str, bool] | None:
    """(text, shortened): the whole file when it fits in `limit` characters, else its summary if that fits."""
    if len(source) <= limit:
        return source, False
    short = summarise(source)
    return (short, True) if short is not None and len(short) <= limit else None
