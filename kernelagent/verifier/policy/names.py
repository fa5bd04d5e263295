"""What a name or expression in the candidate stands for, through aliases and dynamic lookups.

`import torch as t`, `sm = t.softmax`, `getattr(torch, "soft" + "max")`, `vars(torch)["softmax"]`,
`__import__("to" + "rch")`, `functools.partial(torch.softmax)`, a dict of functions, a factory that
returns a function, a helper's parameter: all resolve to the qualified name `torch.softmax`. Every
outside name is canonical (see canon.py): `torch.nn.functional.torch.softmax` is `torch.softmax`
too, and `torch.os.kill` is `os.kill`.
"""

from __future__ import annotations

import ast
import builtins

from kernelagent.verifier.policy import deadline
from kernelagent.verifier.policy.canon import canonical_name
from kernelagent.verifier.policy.fixpoint import KeyedSolver
from kernelagent.verifier.policy.fold import StringFolding
from kernelagent.verifier.policy.params import ParamKey, collect_params
from kernelagent.verifier.policy.scopes import (
    Binding,
    ClassInfo,
    FuncInfo,
    ModuleInfo,
    Scope,
    Val,
    is_container,
)
from kernelagent.verifier.policy.tables import TORCH_AUTOGRAD_FUNCTION, TORCH_MODULE_BASES

EMPTY: frozenset[Val] = frozenset()
_BUILTINS = frozenset(dir(builtins))
_PASS_THROUGH = frozenset({
    "functools.partial", "builtins.staticmethod", "builtins.classmethod", "functools.wraps",
    "functools.cache", "functools.lru_cache", "builtins.property", "functools.cached_property",
})
_ATTR_CALLERS = frozenset({"operator.attrgetter", "operator.methodcaller"})
_GETTERS = ("builtins.getattr", "builtins.object.__getattribute__", "builtins.type.__getattribute__")
# Builtins and container methods that hand back (elements of) what they are given or hold.
_ELEMENTS_OF_ARGS = frozenset(f"builtins.{n}" for n in (
    "next iter list tuple reversed sorted min max set frozenset dict filter zip enumerate".split()))
_ELEMENTS_OF_RECEIVER = frozenset({
    "get", "pop", "setdefault", "popitem", "copy", "values", "items", "popleft", "__getitem__",
})
_PROPERTIES = frozenset({"property", "cached_property", "getter"})
_AUTOGRAD_ENTRY = ("forward", "backward", "setup_context", "jvp", "vjp")
_SETTLE_ROUNDS = 8  # call hops followed from an argument to the parameter that receives it
_MAX_DEPTH = 400  # nested lookups followed before giving up (and reporting the code as too indirect)


class Resolver(StringFolding):
    """Resolves expressions of one module to sets of `Val`s; memoised, safe on cycles."""

    def __init__(self, info: ModuleInfo) -> None:
        self.info = info
        self.custom_ops: dict[str, FuncInfo] = {}  # "torch.ops.ns.name" -> the candidate's function
        self.op_funcs: set[ast.AST] = set()  # functions decorated into operator objects (custom_op, triton_op)
        self.solver: KeyedSolver[frozenset[Val]] = KeyedSolver(EMPTY, max_depth=200)
        self._memo: dict[int, frozenset[Val]] = {}
        self._busy: set[int] = set()
        self._fold_busy: set[int] = set()
        self._fold_memo: dict[tuple[int, int], str | None] = {}
        self._fold_work = 0
        self._fold_cuts = 0
        self.fold_exhausted = False
        self.params: dict[ParamKey, frozenset[Val]] = {}
        self._recorded: set[tuple[int, int, str]] = set()
        self.settle()

    def reset(self) -> None:
        """Forget memoised answers (after new facts were recorded)."""
        self._memo.clear()
        self._fold_memo.clear()
        self.solver.clear()

    @property
    def too_deep(self) -> bool:
        """Some name went through more assignments than are followed, or folding names to strings ran out
        of its work budget; what they mean is unknown."""
        return self.solver.too_deep or self.fold_exhausted

    def settle(self) -> None:
        """Record what flows into attributes, containers and parameters, until nothing new is learnt."""
        self.reset()
        for _ in range(_SETTLE_ROUNDS):
            changed = self._apply_attr_assigns()
            params = collect_params(self)
            changed = changed or params != self.params
            self.params = params
            self.reset()
            if not changed:
                return
        self.solver.too_deep = True  # values still travelling through calls: what they are is not known

    def _apply_attr_assigns(self) -> bool:
        changed = False
        for base, attr, value, scope in self.info.attr_assigns:
            for val in self.resolve(base, scope):
                if val.kind in ("self", "inst", "class") and val.node in self.info.classes:
                    bindings = self.info.classes[val.node].attrs.setdefault(attr, [])
                    changed |= self._record(bindings, value, scope, attr)
        for container, value, scope in self.info.container_adds:
            for bindings in self._container_bindings(container, scope):
                changed |= self._record(bindings, value, scope, "")
        return changed

    def _record(self, bindings: list[Binding], value: ast.expr, scope: Scope, attr: str) -> bool:
        key = (id(bindings), id(value), attr)
        if key in self._recorded:
            return False
        self._recorded.add(key)
        bindings.append(("expr", value, scope))
        return True

    def _container_bindings(self, container: ast.expr, scope: Scope) -> list[list[Binding]]:
        """Binding lists of `container` (a name or an attribute) that hold a list/dict/set."""
        if isinstance(container, ast.Name):
            candidates = [self.lookup(container.id, scope)]
        elif isinstance(container, ast.Attribute):
            candidates = [
                self.info.classes[v.node].attrs.setdefault(container.attr, [])
                for v in self.resolve(container.value, scope)
                if v.kind in ("self", "inst", "class") and v.node in self.info.classes
            ]
        else:
            return []
        return [b for b in candidates if any(item[0] == "expr" and is_container(item[1]) for item in b)]

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

    def name_vals(self, name: str, scope: Scope) -> frozenset[Val]:
        """What a name may stand for: the union over all its bindings."""
        bindings = self.lookup(name, scope)
        if all(b[0] == "val" for b in bindings):  # imports, defs, builtins (lists made on the fly)
            return frozenset(_canonical(b[1]) for b in bindings)
        return self.solver.get(("n", id(bindings)), lambda: self.union_vals(bindings))

    def union_vals(self, items: list[Binding]) -> frozenset[Val]:
        return frozenset().union(*(self.binding_vals(b) for b in items))

    def binding_vals(self, item: Binding) -> frozenset[Val]:
        if item[0] == "val":
            return frozenset({_canonical(item[1])})
        if item[0] == "expr":
            return self.resolve(item[1], item[2])
        if item[0] == "param":
            return self.params.get((id(item[1].node), item[2]), EMPTY)
        return EMPTY

    # --- expressions --------------------------------------------------------------------------
    def resolve(self, expr: ast.AST, scope: Scope) -> frozenset[Val]:
        """Everything `expr` may stand for; empty when unknown (a parameter, a number, ...)."""
        key = id(expr)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy or len(self._busy) > _MAX_DEPTH:
            self.solver.too_deep = self.solver.too_deep or key not in self._busy
            self.solver.provisional_uses += 1
            return EMPTY
        deadline.check()
        before = self.solver.provisional_uses
        self._busy.add(key)
        try:
            result = self._resolve(expr, scope)
        finally:
            self._busy.discard(key)
        if self.solver.provisional_uses == before or (self.solver.idle and not self._busy):
            self._memo[key] = result  # final: nothing unfinished went into it
        return result

    def _resolve(self, expr: ast.AST, scope: Scope) -> frozenset[Val]:
        access = self.attr_access(expr, scope)
        if access is not None:
            found = self.attr_of(self.resolve(access[0], scope), access[1])
            if isinstance(expr, ast.Call) and len(expr.args) == 3 and self._is_ref(expr.func, scope, _GETTERS):
                found |= self.resolve(expr.args[2], scope)  # getattr(o, name, default)
            return found
        if isinstance(expr, ast.Name):
            return self.name_vals(expr.id, scope)
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
        elif isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            parts = [expr.elt]
        elif isinstance(expr, ast.DictComp):
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
                    return frozenset({Val("ref", canonical_name(key))})
                if val.kind == "ref" and val.name == "builtins":
                    return frozenset({Val("ref", canonical_name(f"builtins.{key}"))})
                if val.kind == "ref" and val.name == "builtins.globals()":
                    return frozenset().union(*(self.binding_vals(b) for b in self.lookup(key, self.info.scope)))
        return base

    def _resolve_call(self, call: ast.Call, scope: Scope) -> frozenset[Val]:
        imported = self.dynamic_import_name(call, scope)
        if imported is not None:
            return frozenset({Val("ref", canonical_name(imported))}) if imported else EMPTY
        out: set[Val] = set()
        for val in self.resolve(call.func, scope):
            out |= self._call_result(val, call, scope)
        if isinstance(call.func, ast.Attribute) and call.func.attr in _ELEMENTS_OF_RECEIVER:
            out |= self.resolve(call.func.value, scope)  # d.get("k") may be anything d holds
        return frozenset(out)

    def _call_result(self, val: Val, call: ast.Call, scope: Scope) -> frozenset[Val]:
        if val.kind == "ref":
            if val.name in _PASS_THROUGH and call.args:
                return self.resolve(call.args[0], scope)
            if val.name in _ELEMENTS_OF_ARGS:  # next(iter([m])) is m
                given = [*call.args, *(k.value for k in call.keywords)]
                return frozenset({Val("ref", f"{val.name}()")}).union(*(self.resolve(a, scope) for a in given))
            if val.name == "builtins.super":
                cls = _enclosing_class(scope)
                return frozenset({Val("super", node=cls)}) if cls is not None else EMPTY
            if val.name == "builtins.type" and len(call.args) == 1:  # type(self) is the candidate's class
                own = frozenset(Val("class", node=v.node) for v in self.resolve(call.args[0], scope)
                                if v.kind in ("self", "inst") and v.node is not None)
                if own:
                    return own
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
        return self.solver.get(("r", id(node)), lambda: self._returns(node))

    def _returns(self, node: ast.AST) -> frozenset[Val]:
        info = self.info.funcs.get(node)
        if info is None:
            return EMPTY
        if isinstance(node, ast.Lambda):
            return self.resolve(node.body, info.scope)
        out: set[Val] = set()
        for ret in self.info.body_nodes(node):
            if isinstance(ret, ast.Return) and ret.value is not None:
                out |= self.resolve(ret.value, info.scope)
        return frozenset(out)

    # --- attributes ---------------------------------------------------------------------------
    def attr_access(self, expr: ast.AST, scope: Scope) -> tuple[ast.expr, str, bool] | None:
        """(object, attribute name, name was computed) for `o.a`, getattr(o, c), o.__dict__[c], vars(o)[c]."""
        if isinstance(expr, ast.Attribute):
            return expr.value, expr.attr, False
        if isinstance(expr, ast.Call) and len(expr.args) >= 2 and self._is_ref(expr.func, scope, _GETTERS):
            return self._named(expr.args[0], expr.args[1], scope)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and len(expr.args) == 1:
            if expr.func.attr in ("__getattribute__", "__getattr__"):
                return self._named(expr.func.value, expr.args[0], scope)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and len(expr.args) == 2:
            if expr.func.attr == "__getattribute__":  # object.__getattribute__(o, n), type(o).__getattribute__(...)
                return self._named(expr.args[0], expr.args[1], scope)
        if isinstance(expr, ast.Call) and len(expr.args) == 1 and isinstance(expr.func, ast.Call):
            getter = expr.func  # attrgetter("a.b")(o), methodcaller("m", ...)(o)
            if getter.args and self._is_ref(getter.func, scope, tuple(_ATTR_CALLERS)):
                return self._named(expr.args[0], getter.args[0], scope)
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
        return any(v.kind == "ref" and v.name in names for v in self.resolve(expr, scope))

    def attr_of(self, vals: frozenset[Val], attr: str) -> frozenset[Val]:
        """The attribute `attr` of anything in `vals`."""
        out: set[Val] = set()
        for val in vals:
            if val.kind == "ref":
                qual = f"{val.name}.{attr}"
                if qual not in self.custom_ops:
                    qual = canonical_name(qual)
                out.add(Val("func", node=self.custom_ops[qual].node) if qual in self.custom_ops else Val("ref", qual))
            elif val.kind in ("class", "inst", "self"):
                out |= self._object_attr(val, attr)
            elif val.kind == "func" and attr == "default" and val.node in self.custom_op_nodes():
                out.add(val)
            elif val.kind == "func" and val.node in self.op_funcs:  # op.register_kernel, op.register_fake, ...
                out.add(Val("ref", f"torch.library.custom_op().{attr}"))
            elif val.kind == "super" and val.node is not None:
                for base in self.local_bases(val.node):
                    out |= self.class_attr(base, attr)
                out |= {Val("ref", f"{q}.{attr}") for q in self.external_bases(val.node)}
        return frozenset(out)

    def custom_op_nodes(self) -> set[ast.AST]:
        return {f.node for f in self.custom_ops.values()}

    def _object_attr(self, val: Val, attr: str) -> frozenset[Val]:
        if attr == "__class__" and val.kind in ("self", "inst"):
            return frozenset({Val("class", node=val.node)})
        if val.kind == "class" and attr == "apply" and self.is_autograd(val.node):
            return frozenset().union(*(self.class_attr(val.node, n) for n in _AUTOGRAD_ENTRY))
        found = self._with_properties(self.class_attr(val.node, attr), val)
        if not self.defines(val.node, attr) and val.kind == "self":  # a method only a subclass defines
            subs = [c for c in self.info.classes if val.node in self._all_local_bases(c)]
            found = frozenset().union(*(self.class_attr(c, attr) for c in subs))
            if any(self.defines(c, attr) for c in subs):
                return found
        if found or self.defines(val.node, attr):
            return found
        return frozenset({Val("ref", f"{q}.{attr}") for q in self.external_bases(val.node)})

    def _with_properties(self, found: frozenset[Val], val: Val) -> frozenset[Val]:
        """Reading a property on an instance gives what its getter returns (the getter stays, it runs)."""
        if val.kind not in ("self", "inst"):
            return found
        getters = [v.node for v in found if v.kind == "func" and _is_property(v.node)]
        return found.union(*(self.returns(node) for node in getters))

    def defines(self, cls: ast.ClassDef, attr: str, depth: int = 0) -> bool:
        """Whether the candidate binds `attr` on the class, its instances or one of its local bases."""
        info = self.info.classes.get(cls)
        if info is None or depth > 10:
            return False
        if attr in info.scope.bindings or attr in info.attrs:
            return True
        return any(self.defines(b, attr, depth + 1) for b in self.local_bases(cls))

    def _all_local_bases(self, cls: ast.ClassDef, depth: int = 0) -> set[ast.ClassDef]:
        direct = set(self.local_bases(cls))
        if depth < 10:
            for base in list(direct):
                direct |= self._all_local_bases(base, depth + 1)
        return direct

    def class_attr(self, cls: ast.ClassDef, attr: str) -> frozenset[Val]:
        """Methods and attributes named `attr` of a candidate class, its instances and local bases."""
        return self.solver.get(("c", id(cls), attr), lambda: self._class_attr(cls, attr))

    def _class_attr(self, cls: ast.ClassDef, attr: str) -> frozenset[Val]:
        info: ClassInfo | None = self.info.classes.get(cls)
        if info is None:
            return EMPTY
        found = self.union_vals([*info.scope.bindings.get(attr, []), *info.attrs.get(attr, [])])
        if found:
            return found
        return frozenset().union(*(self.class_attr(b, attr) for b in self.local_bases(cls)))

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


def _is_property(node: ast.AST) -> bool:
    for dec in getattr(node, "decorator_list", []):
        name = dec.id if isinstance(dec, ast.Name) else dec.attr if isinstance(dec, ast.Attribute) else ""
        if name in _PROPERTIES:
            return True
    return False


def _canonical(val: Val) -> Val:
    return Val("ref", canonical_name(val.name)) if val.kind == "ref" else val


def _enclosing_class(scope: Scope) -> ast.ClassDef | None:
    current: Scope | None = scope
    while current is not None:
        if current.cls is not None:
            return current.cls
        current = current.parent
    return None
