"""What the parameters of the candidate's functions receive: the arguments at every call site.

Without this, `def helper(m): return m.os` called as `helper(torch)` would hide `torch.os` behind a
parameter. Every call in the file is resolved (direct calls, bound methods, class construction,
`Fn.apply`, `functools.partial`, `map`) and its arguments are matched to the parameters of the
functions it may call. The resolver repeats this until nothing new is learnt, one call hop per
round; a function reached only in other ways (handed to outside code) keeps unknown parameters.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kernelagent.verifier.policy.scopes import FuncInfo, Scope, Val

if TYPE_CHECKING:
    from kernelagent.verifier.policy.names import Resolver

ParamKey = tuple[int, str]  # (id of the function's node, parameter name)
_PARTIAL = "functools.partial"
_MAP = "builtins.map"
_MAX_PARTS = 24


def collect_params(resolver: Resolver) -> dict[ParamKey, frozenset[Val]]:
    """Values that may reach each parameter, from the call sites as the resolver sees them now."""
    found: dict[ParamKey, set[Val]] = {}
    for call, scope in resolver.info.calls:
        for func, offset, args, keywords in _bindings(resolver, call, scope):
            for name, expr in _assign(func, offset, args, keywords):
                vals = {v for v in resolver.resolve(expr, scope) if _kept(v, resolver)}
                if vals:
                    found.setdefault((id(func.node), name), set()).update(vals)
    return {key: frozenset(vals) for key, vals in found.items()}


def _kept(val: Val, resolver: Resolver) -> bool:
    """Names and the candidate's own objects travel; values computed by calls (tensors) do not."""
    if val.kind != "ref":
        return True
    if "()" in val.name:
        return False
    if val.name.count(".") > _MAX_PARTS:  # a name that grows as it goes round a recursive call
        resolver.solver.too_deep = True
        return False
    return True


def _bindings(
    resolver: Resolver, call: ast.Call, scope: Scope,
) -> Iterator[tuple[FuncInfo, int, list[ast.expr], list[ast.keyword]]]:
    """(function, parameters it fills itself, positional args, keywords) for each function `call` may call."""
    refs = {v.name for v in resolver.resolve(call.func, scope) if v.kind == "ref"}
    if refs & {_PARTIAL, _MAP} and call.args:
        for func in _funcs(resolver, call.args[0], scope):
            if _MAP in refs:  # map(f, xs, ys): f gets elements of xs and ys
                yield func, 0, call.args[1:], []
            else:  # partial(f, a, k=b) binds a and b
                yield func, _method_offset(resolver, call.args[0], scope, func), call.args[1:], call.keywords
        return
    bound = _partial_prefix(resolver, call.func, scope)
    for val in resolver.resolve(call.func, scope):
        for func, offset in _callees(resolver, call.func, scope, val):
            yield func, offset + bound, list(call.args), list(call.keywords)


def _funcs(resolver: Resolver, expr: ast.expr, scope: Scope) -> list[FuncInfo]:
    return [resolver.info.funcs[v.node] for v in resolver.resolve(expr, scope)
            if v.kind == "func" and v.node in resolver.info.funcs]


def _partial_prefix(resolver: Resolver, expr: ast.expr, scope: Scope) -> int:
    """`partial(f, a)(b)`: b is f's second argument."""
    if isinstance(expr, ast.Call) and expr.args:
        if any(v.kind == "ref" and v.name == _PARTIAL for v in resolver.resolve(expr.func, scope)):
            return len(expr.args) - 1
    return 0


def _callees(resolver: Resolver, target: ast.expr, scope: Scope, val: Val) -> list[tuple[FuncInfo, int]]:
    """The candidate's functions a call of `target` (standing for `val`) runs, with their bound prefixes."""
    funcs = resolver.info.funcs
    if val.kind == "func" and val.node in funcs:
        func = funcs[val.node]
        return [(func, _method_offset(resolver, target, scope, func))]
    if val.kind == "class":
        names: tuple[str, ...] = ("__init__",)
    elif val.kind in ("inst", "self"):
        names = ("__call__", "forward")
    else:
        return []
    methods = {v.node for n in names for v in resolver.class_attr(val.node, n) if v.kind == "func"}
    return [(funcs[node], 1) for node in methods if node in funcs]


def _method_offset(resolver: Resolver, target: ast.expr, scope: Scope, func: FuncInfo) -> int:
    if func.kind == "classmethod":
        return 1
    access = resolver.attr_access(target, scope)
    if access is None:
        return 0
    receiver = resolver.resolve(access[0], scope)
    if func.kind == "method" and any(v.kind in ("self", "inst", "super") for v in receiver):
        return 1
    if func.kind == "static" and access[1] == "apply":  # Fn.apply(x): forward(ctx, x)
        return 1
    return 0


def _assign(
    func: FuncInfo, offset: int, args: list[ast.expr], keywords: list[ast.keyword],
) -> Iterator[tuple[str, ast.expr]]:
    """(parameter name, argument) pairs; a starred argument or `**kw` may reach any later parameter."""
    params = func.params
    rest = [func.vararg] if func.vararg else []
    spread: int | None = None  # after f(*xs), arguments may land on any later parameter
    for i, arg in enumerate(args):
        if isinstance(arg, ast.Starred) and spread is None:
            spread = i + offset
        value = arg.value if isinstance(arg, ast.Starred) else arg
        if spread is not None:
            for name in [*params[spread:], *rest]:
                yield name, value
        elif i + offset < len(params):
            yield params[i + offset], value
        elif func.vararg:
            yield func.vararg, value
    kwarg = getattr(getattr(func.node, "args", None), "kwarg", None)
    for kw in keywords:
        if kw.arg is None:
            for name in [*params[offset:], *func.kwonly]:
                yield name, kw.value
        elif kw.arg in params or kw.arg in func.kwonly:
            yield kw.arg, kw.value
        elif kwarg is not None:
            yield kwarg.arg, kw.value
