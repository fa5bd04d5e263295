"""Option presets: the option sets a library entry declares for matching (`MATCH_PRESETS` in its reference.py),
the one a match found, and the entry's kernel with it bound.

A match runs in a worker beside the user's problem, so its `options` are only a name for a preset: they are used
when they equal, type for type, one the entry's file declares (read here as a literal, never run), and what is
written is that declared literal, as the defaults of the kernel file's `ModelNew.forward`.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from kernelagent.kernels import LibraryEntry, LibraryError

NAME = "MATCH_PRESETS"


def declared_presets(entry: LibraryEntry) -> list[dict[str, Any]]:
    """The entry's MATCH_PRESETS as its reference file writes them (the last assignment, annotated or not); none
    when it has none or they are not a literal list of dicts with string keys."""
    try:
        tree = ast.parse(entry.reference_path.read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    value = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == NAME for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == NAME and node.value is not None:
            value = node.value
    try:
        found = ast.literal_eval(value) if value is not None else []
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return []
    ok = isinstance(found, list) and all(isinstance(p, dict) and all(isinstance(k, str) for k in p) for p in found)
    return found if ok else []


def _canonical(options: Any) -> str | None:
    """A type-strict key for comparing option sets across JSON (True is not 1; a tuple reads as a list)."""
    try:
        return json.dumps(options, sort_keys=True) if isinstance(options, dict) else None
    except (TypeError, ValueError):
        return None


def declared(entry: LibraryEntry, options: Any) -> dict[str, Any]:
    """The entry's declared preset that `options` (from a match result) names; LibraryError when none does."""
    key = _canonical(options)
    for preset in declared_presets(entry):
        if key is not None and _canonical(preset) == key:
            return preset
    raise LibraryError(f"{entry.name} declares no option set {options!r} ({NAME})")


def options_text(options: Any) -> str:
    """Options as a call would write them (`causal=True`); empty for anything but a dict."""
    return ", ".join(f"{k}={v!r}" for k, v in options.items()) if isinstance(options, dict) else ""


def bound_kernel(entry: LibraryEntry, backend: str, options: Any) -> str:
    """The entry's kernel file for `backend` with the declared preset `options` names bound: each option's default
    in its ModelNew.forward replaced by the preset's value, the rest of the file as it is (so the verifier's policy
    sees the signature it knows); the file itself for no options."""
    source = entry.backends[backend].read_text()
    if not options:
        return source
    preset = declared(entry, options)
    defaults = _defaults(_forward_of_model_new(ast.parse(source)))
    if any(k not in defaults for k in preset):
        raise LibraryError(f"{entry.name}'s {backend} ModelNew.forward has no default to bind for "
                           f"{options_text(preset)}")
    lines = re.split(r"(?<=\n)", source)  # the parser's lines: \n only (str.splitlines also breaks at \f, ...)
    for name in sorted(preset, key=lambda k: (defaults[k].lineno, defaults[k].col_offset), reverse=True):
        node = defaults[name]  # one line each; replaced from the last, so the offsets before it hold
        if node.lineno != node.end_lineno:
            raise LibraryError(f"{entry.name}: the default of {name} in ModelNew.forward spans lines")
        line = lines[node.lineno - 1].encode()  # AST columns are UTF-8 byte offsets
        lines[node.lineno - 1] = (line[:node.col_offset] + repr(preset[name]).encode()
                                  + line[node.end_col_offset:]).decode()
    note = (f"# Written by kernelagent's offline path: library entry `{entry.name}` with {options_text(preset)}\n"
            "# bound as ModelNew.forward's default(s): what your problem computes on the inputs it was checked on.\n")
    return note + "".join(lines)


def _forward_of_model_new(tree: ast.Module) -> ast.FunctionDef | None:
    """The forward of the module's last top-level `class ModelNew` (the one Python binds)."""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    methods = [n for n in classes[-1].body if isinstance(n, ast.FunctionDef) and n.name == "forward"] if classes else []
    return methods[-1] if methods else None


def _defaults(fn: ast.FunctionDef | None) -> dict[str, ast.expr]:
    """Each parameter's default expression, by name (those that have one)."""
    if fn is None:
        return {}
    pos = fn.args.posonlyargs + fn.args.args
    out = dict(zip([a.arg for a in pos[len(pos) - len(fn.args.defaults):]], fn.args.defaults, strict=True))
    out.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is not None})
    return out
