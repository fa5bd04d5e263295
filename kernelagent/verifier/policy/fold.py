"""Folding string expressions to their value: `"soft" + "max"`, `"xamtfos"[::-1]`, f-strings of
constants, `"".join(map(chr, [...]))`, names bound to such strings. Used to see through names built
at run time (getattr, __import__, torch.library namespaces).

A fold is exact or it is None: the policy judges the name a fold returns, so a fold that differs from
what Python computes lets a file show the policy one name and run another (red team, 2026-12-05:
`str(b"...")` folded as the bytes' text where Python gives "b'...'", f-string conversions ignored and a
`str` defined in the file taken for the builtin, each turned `torch.softmax` into an allowed name). So
only str values fold (no bytes, no encode/decode), the builtins str, chr, map and reversed count only
where the file does not rebind them, f-string fields only without conversion or format spec, and format
templates only with bare `{}` fields."""

from __future__ import annotations

import ast

from kernelagent.verifier.policy.scopes import Binding, Scope, Val

_STR_METHODS = frozenset({
    "upper", "lower", "strip", "lstrip", "rstrip", "casefold", "title", "capitalize", "swapcase",
    "removeprefix", "removesuffix", "replace", "format", "join",
})
_MAX_DEPTH = 60
_MAX_LENGTH = 1000  # longer results are not names; refusing them also bounds the work
# Folds evaluated (memo hits excluded) in one policy check at most: past it nothing more folds and the
# check reports the file as too indirect (red team, 2026-12-03: names bound twice, each to the one below
# added to itself, doubled the work a level; 13 levels held the verifier 4 minutes past its timeout).
_MAX_WORK = 50_000


class StringFolding:
    """Mixin for the resolver: needs `lookup(name, scope)`; keeps its own cycle guard, a memo of what
    each (expression, scope) folded to, and a work budget."""

    _fold_busy: set[int]
    _fold_memo: dict[tuple[int, int], str | None]
    _fold_work: int
    _fold_cuts: int  # folds cut short by the cycle guard or the depth limit: answers that depend on the path
    fold_exhausted: bool

    def lookup(self, name: str, scope: Scope) -> list[Binding]:
        raise NotImplementedError

    def fold(self, expr: ast.AST, scope: Scope, depth: int = 0) -> str | None:
        """The string `expr` evaluates to when it is built only from constants; else None."""
        key = (id(expr), id(scope))
        if key in self._fold_memo:
            return self._fold_memo[key]
        if depth > _MAX_DEPTH or id(expr) in self._fold_busy:
            self._fold_cuts += 1
            return None
        self._fold_work += 1
        if self._fold_work > _MAX_WORK:
            self.fold_exhausted = True
            return None
        cuts = self._fold_cuts
        self._fold_busy.add(id(expr))
        try:
            text = self._fold(expr, scope, depth + 1)
        finally:
            self._fold_busy.discard(id(expr))
        text = text if text is None or len(text) <= _MAX_LENGTH else None
        if cuts == self._fold_cuts and not self.fold_exhausted:  # the answer holds wherever it is asked
            self._fold_memo[key] = text
        return text

    def _fold(self, expr: ast.AST, scope: Scope, depth: int) -> str | None:
        if isinstance(expr, ast.Constant):
            return expr.value if isinstance(expr.value, str) else None
        if isinstance(expr, ast.JoinedStr):
            return self._fold_joined(expr, scope, depth)
        if isinstance(expr, ast.BinOp):
            return self._fold_binop(expr, scope, depth)
        if isinstance(expr, ast.Name):
            return self._fold_name(expr.id, scope, depth)
        if isinstance(expr, ast.Subscript):
            return self._fold_slice(expr, scope, depth)
        if isinstance(expr, ast.Call):
            return self._fold_call(expr, scope, depth)
        return None

    def fold_prefix(self, expr: ast.AST, scope: Scope) -> str:
        """The constant start of a string expression (all of it when it folds): f"ns::{name}" -> "ns::"."""
        text = self.fold(expr, scope)
        if text is not None:
            return text
        if isinstance(expr, ast.JoinedStr):
            prefix = []
            for part in expr.values:
                piece = self.fold(part.value if isinstance(part, ast.FormattedValue) else part, scope)
                if piece is None:
                    break
                prefix.append(piece)
            return "".join(prefix)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self.fold_prefix(expr.left, scope)
        return ""

    def _fold_joined(self, expr: ast.JoinedStr, scope: Scope, depth: int) -> str | None:
        parts = []
        for part in expr.values:
            if isinstance(part, ast.FormattedValue) and (part.conversion not in (-1, ord("s")) or part.format_spec):
                return None  # !r, !a and format specs change the text
            inner = part.value if isinstance(part, ast.FormattedValue) else part
            text = self.fold(inner, scope, depth)
            if text is None:
                return None
            parts.append(text)
        return "".join(parts)

    def _fold_binop(self, expr: ast.BinOp, scope: Scope, depth: int) -> str | None:
        left = self.fold(expr.left, scope, depth)
        if isinstance(expr.op, ast.Add):
            right = self.fold(expr.right, scope, depth)
            return None if left is None or right is None else left + right
        if isinstance(expr.op, ast.Mult) and left is not None:
            count = _const_int(expr.right)
            return left * count if count is not None and 0 <= count <= 64 else None
        return None

    def _fold_name(self, name: str, scope: Scope, depth: int) -> str | None:
        bindings = self.lookup(name, scope)
        values = {self.fold(b[1], b[2], depth) if b[0] == "expr" else None for b in bindings}
        return values.pop() if len(values) == 1 else None

    def _fold_slice(self, expr: ast.Subscript, scope: Scope, depth: int) -> str | None:
        text = self.fold(expr.value, scope, depth)
        if text is None:
            return None
        sl = expr.slice
        if isinstance(sl, ast.Slice):
            bounds = [None if b is None else _const_int(b) for b in (sl.lower, sl.upper, sl.step)]
            given = [b for b in (sl.lower, sl.upper, sl.step) if b is not None]
            if any(_const_int(b) is None for b in given) or bounds[2] == 0:
                return None
            return text[slice(*bounds)]
        index = _const_int(sl)
        return text[index] if index is not None and -len(text) <= index < len(text) else None

    def _builtin(self, expr: ast.AST, name: str, scope: Scope) -> bool:
        """`expr` names the builtin `name` (not a function or value of the file's own by that name)."""
        return isinstance(expr, ast.Name) and expr.id == name and self.lookup(name, scope) == [
            ("val", Val("ref", f"builtins.{name}"))]

    def _fold_call(self, call: ast.Call, scope: Scope, depth: int) -> str | None:
        func = call.func
        if (any(self._builtin(func, name, scope) for name in ("str", "chr")) and len(call.args) == 1
                and not call.keywords):
            if func.id == "chr":
                code = _const_int(call.args[0])
                return chr(code) if code is not None and 0 <= code < 0x110000 else None
            return self.fold(call.args[0], scope, depth)
        if isinstance(func, ast.Attribute) and func.attr in _STR_METHODS:
            base = self.fold(func.value, scope, depth)
            if base is None:
                return None
            if func.attr == "join":
                items = self._fold_items(call.args[0], scope, depth) if len(call.args) == 1 else None
                if items is None or len(base) * len(items) + sum(map(len, items)) > 4 * _MAX_LENGTH:
                    return None
                return base.join(items)
            args = [self.fold(a, scope, depth) for a in call.args]
            if any(a is None for a in args) or call.keywords:
                return None
            return _apply_str_method(base, func.attr, args)
        return None

    def _fold_items(self, expr: ast.AST, scope: Scope, depth: int) -> list[str] | None:
        if isinstance(expr, ast.Name) and depth <= _MAX_DEPTH:  # a name bound once to a list of strings
            bindings = self.lookup(expr.id, scope)
            if len(bindings) == 1 and bindings[0][0] == "expr" and isinstance(bindings[0][1], ast.List | ast.Tuple):
                return self._fold_items(bindings[0][1], bindings[0][2], depth + 1)
        if isinstance(expr, (ast.List, ast.Tuple)):
            items = [self.fold(e, scope, depth) for e in expr.elts]
            return None if any(i is None for i in items) else items  # type: ignore[return-value]
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and len(expr.args) >= 1:
            if self._builtin(expr.func, "reversed", scope) and len(expr.args) == 1 and not expr.keywords:
                text = self.fold(expr.args[0], scope, depth)
                items = list(text) if text is not None else self._fold_items(expr.args[0], scope, depth)
                return None if items is None else items[::-1]
            if (self._builtin(expr.func, "map", scope) and len(expr.args) == 2 and not expr.keywords
                    and self._builtin(expr.args[0], "chr", scope)):
                codes = _const_ints(expr.args[1])
                if codes is None or not all(0 <= c < 0x110000 for c in codes):
                    return None  # chr raises there
                return [chr(c) for c in codes]
        text = self.fold(expr, scope, depth)
        return list(text) if text is not None else None


def _const_int(expr: ast.AST | None) -> int | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = _const_int(expr.operand)
        return None if inner is None else -inner
    return None


def _const_ints(expr: ast.AST) -> list[int] | None:
    if not isinstance(expr, (ast.List, ast.Tuple)):
        return None
    values = [_const_int(e) for e in expr.elts]
    return None if any(v is None for v in values) else values  # type: ignore[return-value]


def _apply_str_method(base: str, method: str, args: list[str]) -> str | None:
    """`base.method(*args)` on folded strings, or None where it would raise or could grow past what a name
    needs (bounded before it is computed: the folds' work budget counts calls, not their cost)."""
    if method == "format":  # bare fields only: no index, name, conversion, width or escaped brace to read
        rest = base.replace("{}", "")
        if "{" in rest or "}" in rest or base.count("{}") * max(map(len, args), default=0) > _MAX_LENGTH:
            return None
    if method == "replace" and len(args) == 2 and (not args[0] or base.count(args[0]) * len(args[1]) > _MAX_LENGTH):
        return None
    try:
        result = getattr(base, method)(*args)
    except Exception:  # noqa: BLE001 - whatever Python raises, the fold does not know the value
        return None
    return result if isinstance(result, str) else None
