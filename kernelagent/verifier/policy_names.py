"""What a name or expression in the candidate stands for, through aliases and dynamic lookups.

`import torch as t`, `sm = t.softmax`, `getattr(torch, "soft" + "max")`, `vars(torch)["softmax"]`,
`__import__("to" + "rch")`, `functools.partial(torch.softmax)`, a dict of functions, a factory that
returns a function: all resolve to the qualified name `torch.softmax`.
"""

from __future__ import annotations

import ast
import builtins

from kernelagent.verifier.policy_scopes import Binding, ClassInfo, FuncInfo, ModuleInfo, Scope, Val
from kernelagent.verifier.policy_tables import TORCH_AUTOGRAD_FUNCTION, TORCH_MODULE_BASES

EMPTY: frozenset[Val] = frozenset()
_BUILTINS = frozenset(dir(builtins))
_PASS_THROUGH = frozenset({
    "functools.partial", "builtins.staticmethod", "builtins.classmethod", "functools.wraps",
    "functools.cache", "functools.lru_cache", "builtins.property", "functools.cached_property",
})
_STR_METHODS = frozenset({
    "upper", "lower", "strip", "lstrip", "rstrip", "casefold", "title", "capitalize", "swapcase",
    "removeprefix", "removesuffix", "replace", "format", "decode", "encode", "join",
})
_AUTOGRAD_ENTRY = ("forward", "backward", "setup_context", "jvp", "vjp")
_MAX_DEPTH = 40


class Resolver:
    """Resolves expressions of one module to sets of `Val`s; memoised, safe on cycles."""

    def __init__(self, info: ModuleInfo) -> None:
        self.info = info
        self.custom_ops: dict[str, FuncInfo] = {}  # "torch.ops.ns.name" -> the candidate's function
        self._memo: dict[int, frozenset[Val]] = {}
        self._busy: set[int] = set()
        self._fold_busy: set[int] = set()
        self._apply_attr_assigns()

    def reset(self) -> None:
        """Forget memoised answers (after new facts were recorded)."""
        self._memo.clear()

    def _apply_attr_assigns(self) -> None:
        for base, attr, value, scope in self.info.attr_assigns:
            for val in self.resolve(base, scope):
                if val.kind in ("self", "inst", "class") and val.node in self.info.classes:
                    self.info.classes[val.node].attrs.setdefault(attr, []).append(("expr", value, scope))
        self.reset()

    # --- names --------------------------------------------------------------------------------
    def lookup(self, name: str, scope: Scope) -> list[Binding]:
        """The bindings a name may refer to from `scope` (Python's rules; class bodies are skipped)."""
        current: Scope | None = scope
        first = True
        while current is not None:
            if (first or current.kind != "class") and name in current.bindings:
                return current.bindings[name]
            first = False
            current = current.parent
        if name == "__builtins__":
            return [("val", Val("ref", "builtins"))]
        if name in _BUILTINS:
            return [("val", Val("ref", f"builtins.{name}"))]
        return []

    def binding_vals(self, item: Binding) -> frozenset[Val]:
        if item[0] == "val":
            return frozenset({item[1]})
        if item[0] == "expr":
            return self.resolve(item[1], item[2])
        return EMPTY

    # --- expressions --------------------------------------------------------------------------
    def resolve(self, expr: ast.AST, scope: Scope) -> frozenset[Val]:
        """Everything `expr` may stand for; empty when unknown (a parameter, a number, ...)."""
        key = id(expr)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy or len(self._busy) > _MAX_DEPTH:
            return EMPTY
        self._busy.add(key)
        try:
            result = self._resolve(expr, scope)
        finally:
            self._busy.discard(key)
        self._memo[key] = result
        return result

    def _resolve(self, expr: ast.AST, scope: Scope) -> frozenset[Val]:
        access = self.attr_access(expr, scope)
        if access is not None:
            return self.attr_of(self.resolve(access[0], scope), access[1])
        if isinstance(expr, ast.Name):
            return frozenset().union(*(self.binding_vals(b) for b in self.lookup(expr.id, scope)))
        if isinstance(expr, ast.Call):
            return self._resolve_call(expr, scope)
        if isinstance(expr, ast.Subscript):
            return self._resolve_subscript(expr, scope)
        if isinstance(expr, ast.Lambda):
            return frozenset({Val("func", node=expr)})
        return self._resolve_compound(expr, scope)

    def _resolve_compound(self, expr: ast.AST, scope: Scope) -> frozenset[Val]:
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            parts = expr.elts
        elif isinstance(expr, ast.Dict):
            parts = expr.values
        elif isinstance(expr, ast.IfExp):
            parts = [expr.body, expr.orelse]
        elif isinstance(expr, ast.BoolOp):
            parts = expr.values
        elif isinstance(expr, (ast.NamedExpr, ast.Starred, ast.Await)):
            parts = [expr.value]
        else:
            return EMPTY
        return frozenset().union(*(self.resolve(p, scope) for p in parts))

    def _resolve_subscript(self, expr: ast.Subscript, scope: Scope) -> frozenset[Val]:
        base = self.resolve(expr.value, scope)
        key = self.fold(expr.slice, scope)
        if key is not None:
            for val in base:
                if val.kind == "ref" and val.name == "sys.modules":
                    return frozenset({Val("ref", key)})
                if val.kind == "ref" and val.name == "builtins":
                    return frozenset({Val("ref", f"builtins.{key}")})
                if val.kind == "ref" and val.name == "builtins.globals()":
                    return frozenset().union(*(self.binding_vals(b) for b in self.lookup(key, self.info.scope)))
        return base

    def _resolve_call(self, call: ast.Call, scope: Scope) -> frozenset[Val]:
        imported = self.dynamic_import_name(call, scope)
        if imported is not None:
            return frozenset({Val("ref", imported)}) if imported else EMPTY
        out: set[Val] = set()
        for val in self.resolve(call.func, scope):
            out |= self._call_result(val, call, scope)
        return frozenset(out)

    def _call_result(self, val: Val, call: ast.Call, scope: Scope) -> frozenset[Val]:
        if val.kind == "ref":
            if val.name in _PASS_THROUGH and call.args:
                return self.resolve(call.args[0], scope)
            if val.name == "builtins.super":
                cls = _enclosing_class(scope)
                return frozenset({Val("super", node=cls)}) if cls is not None else EMPTY
            return frozenset({Val("ref", f"{val.name}()")})
        if val.kind == "func":
            return self.returns(val.node)
        if val.kind == "class":
            return frozenset({Val("inst", node=val.node)})
        if val.kind in ("inst", "self"):
            call_attr = self.class_attr(val.node, "__call__") or self.class_attr(val.node, "forward")
            return frozenset().union(*(self._call_result(v, call, scope) for v in call_attr))
        return EMPTY

    def dynamic_import_name(self, call: ast.Call, scope: Scope) -> str | None:
        """The module named by `__import__(...)`/`importlib.import_module(...)`; "" if not constant."""
        if not call.args:
            return None
        funcs = {v.name for v in self.resolve(call.func, scope) if v.kind == "ref"}
        if not funcs & {"builtins.__import__", "importlib.import_module", "importlib.__import__"}:
            return None
        name = self.fold(call.args[0], scope)
        if name is None:
            return ""
        from_list = len(call.args) >= 4 or any(k.arg == "fromlist" for k in call.keywords)
        if "builtins.__import__" in funcs and not from_list:
            return name.split(".")[0]
        return name

    def returns(self, node: ast.AST) -> frozenset[Val]:
        """What calling one of the candidate's functions may return."""
        info = self.info.funcs.get(node)
        if info is None:
            return EMPTY
        if isinstance(node, ast.Lambda):
            return self.resolve(node.body, info.scope)
        out: set[Val] = set()
        for ret in own_nodes(node):
            if isinstance(ret, ast.Return) and ret.value is not None:
                out |= self.resolve(ret.value, info.scope)
        return frozenset(out)

    # --- attributes ---------------------------------------------------------------------------
    def attr_access(self, expr: ast.AST, scope: Scope) -> tuple[ast.expr, str, bool] | None:
        """(object, attribute name, name was computed) for `o.a`, getattr(o, c), o.__dict__[c], vars(o)[c]."""
        if isinstance(expr, ast.Attribute):
            return expr.value, expr.attr, False
        if isinstance(expr, ast.Call) and len(expr.args) >= 2 and self._is_ref(expr.func, scope, (
            "builtins.getattr", "builtins.object.__getattribute__", "builtins.type.__getattribute__",
        )):
            return self._named(expr.args[0], expr.args[1], scope)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and len(expr.args) == 1:
            if expr.func.attr in ("__getattribute__", "__getattr__"):
                return self._named(expr.func.value, expr.args[0], scope)
        if isinstance(expr, ast.Subscript):
            holder = expr.value
            if isinstance(holder, ast.Attribute) and holder.attr == "__dict__":
                return self._named(holder.value, expr.slice, scope)
            if isinstance(holder, ast.Call) and len(holder.args) == 1 and self._is_ref(
                holder.func, scope, ("builtins.vars",)
            ):
                return self._named(holder.args[0], expr.slice, scope)
        return None

    def _named(self, obj: ast.expr, name_expr: ast.expr, scope: Scope) -> tuple[ast.expr, str, bool] | None:
        name = self.fold(name_expr, scope)
        if name is None:
            return None
        literal = isinstance(name_expr, ast.Constant)
        return obj, name, not literal

    def _is_ref(self, expr: ast.AST, scope: Scope, names: tuple[str, ...]) -> bool:
        if isinstance(expr, ast.Name) and expr.id in ("getattr", "vars"):
            bound = self.lookup(expr.id, scope)
            return any(b[0] == "val" and b[1].name in names for b in bound)
        return any(v.kind == "ref" and v.name in names for v in self.resolve(expr, scope))

    def attr_of(self, vals: frozenset[Val], attr: str) -> frozenset[Val]:
        """The attribute `attr` of anything in `vals`."""
        out: set[Val] = set()
        for val in vals:
            if val.kind == "ref":
                qual = f"{val.name}.{attr}"
                out.add(Val("func", node=self.custom_ops[qual].node) if qual in self.custom_ops else Val("ref", qual))
            elif val.kind in ("class", "inst", "self"):
                out |= self._object_attr(val, attr)
            elif val.kind == "super" and val.node is not None:
                for base in self.local_bases(val.node):
                    out |= self.class_attr(base, attr)
                out |= {Val("ref", f"{q}.{attr}") for q in self.external_bases(val.node)}
        return frozenset(out)

    def _object_attr(self, val: Val, attr: str) -> frozenset[Val]:
        if val.kind == "class" and attr == "apply" and self.is_autograd(val.node):
            return frozenset().union(*(self.class_attr(val.node, n) for n in _AUTOGRAD_ENTRY))
        found = self.class_attr(val.node, attr)
        if found:
            return found
        return frozenset({Val("ref", f"{q}.{attr}") for q in self.external_bases(val.node)})

    def class_attr(self, cls: ast.ClassDef, attr: str, depth: int = 0) -> frozenset[Val]:
        """Methods and attributes named `attr` of a candidate class, its instances and local bases."""
        info: ClassInfo | None = self.info.classes.get(cls)
        if info is None or depth > 10:
            return EMPTY
        items = [*info.scope.bindings.get(attr, []), *info.attrs.get(attr, [])]
        found = frozenset().union(*(self.binding_vals(b) for b in items))
        if found:
            return found
        return frozenset().union(*(self.class_attr(b, attr, depth + 1) for b in self.local_bases(cls)))

    # --- classes ------------------------------------------------------------------------------
    def base_vals(self, cls: ast.ClassDef) -> list[frozenset[Val]]:
        scope = self.info.classes[cls].scope.parent or self.info.scope
        return [self.resolve(base, scope) for base in cls.bases]

    def local_bases(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        return [v.node for vals in self.base_vals(cls) for v in vals if v.kind == "class" and v.node is not cls]

    def external_bases(self, cls: ast.ClassDef, depth: int = 0) -> set[str]:
        """Qualified names of the outside classes `cls` inherits from, directly or through local bases."""
        out = {v.name for vals in self.base_vals(cls) for v in vals if v.kind == "ref"}
        if depth < 10:
            for base in self.local_bases(cls):
                out |= self.external_bases(base, depth + 1)
        return out

    def is_autograd(self, cls: ast.ClassDef) -> bool:
        return bool(self.external_bases(cls) & TORCH_AUTOGRAD_FUNCTION)

    def is_nn_module(self, cls: ast.ClassDef) -> bool:
        return any(q in TORCH_MODULE_BASES or q.startswith("torch.nn.") for q in self.external_bases(cls))

    # --- strings ------------------------------------------------------------------------------
    def fold(self, expr: ast.AST, scope: Scope, depth: int = 0) -> str | None:
        """The string `expr` evaluates to when it is built only from constants; else None."""
        if depth > _MAX_DEPTH or id(expr) in self._fold_busy:
            return None
        self._fold_busy.add(id(expr))
        try:
            return self._fold(expr, scope, depth + 1)
        finally:
            self._fold_busy.discard(id(expr))

    def _fold(self, expr: ast.AST, scope: Scope, depth: int) -> str | None:
        if isinstance(expr, ast.Constant):
            if isinstance(expr.value, bytes):
                return expr.value.decode("latin-1")
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

    def _fold_joined(self, expr: ast.JoinedStr, scope: Scope, depth: int) -> str | None:
        parts = []
        for part in expr.values:
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

    def _fold_call(self, call: ast.Call, scope: Scope, depth: int) -> str | None:
        func = call.func
        if isinstance(func, ast.Name) and func.id in ("str", "chr") and len(call.args) == 1:
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
                return None if items is None else base.join(items)
            args = [self.fold(a, scope, depth) for a in call.args]
            if any(a is None for a in args) or call.keywords:
                return None
            return _apply_str_method(base, func.attr, args)
        return None

    def _fold_items(self, expr: ast.AST, scope: Scope, depth: int) -> list[str] | None:
        if isinstance(expr, (ast.List, ast.Tuple)):
            items = [self.fold(e, scope, depth) for e in expr.elts]
            return None if any(i is None for i in items) else items  # type: ignore[return-value]
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and len(expr.args) >= 1:
            if expr.func.id == "reversed" and len(expr.args) == 1:
                text = self.fold(expr.args[0], scope, depth)
                items = list(text) if text is not None else self._fold_items(expr.args[0], scope, depth)
                return None if items is None else items[::-1]
            if expr.func.id == "map" and len(expr.args) == 2 and _is_name(expr.args[0], "chr"):
                codes = _const_ints(expr.args[1])
                return None if codes is None else [chr(c) for c in codes if 0 <= c < 0x110000]
        text = self.fold(expr, scope, depth)
        return list(text) if text is not None else None


def own_nodes(func: ast.AST) -> list[ast.AST]:
    """Nodes in a function's body, not descending into nested functions, lambdas or classes."""
    out: list[ast.AST] = []
    stack = list(getattr(func, "body", []))
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _enclosing_class(scope: Scope) -> ast.ClassDef | None:
    current: Scope | None = scope
    while current is not None:
        if current.cls is not None:
            return current.cls
        current = current.parent
    return None


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


def _is_name(expr: ast.AST, name: str) -> bool:
    return isinstance(expr, ast.Name) and expr.id == name


def _apply_str_method(base: str, method: str, args: list[str | None]) -> str | None:
    try:
        result = getattr(base, method)(*args)
    except (TypeError, ValueError, IndexError, KeyError, UnicodeError):
        return None
    if isinstance(result, bytes):
        return result.decode("latin-1")
    return result if isinstance(result, str) else None
