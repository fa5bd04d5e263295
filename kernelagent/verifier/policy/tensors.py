"""Which expressions on the forward path are (probably) torch tensors.

Types are not known statically, so this tracks what clearly is a tensor: forward's inputs, results
of torch calls and tensor methods, tensor attributes of the module, and what flows from those into
the candidate's helpers. Shapes, strides and other metadata are plain Python values.
"""

from __future__ import annotations

import ast
import re

from kernelagent.verifier.policy.fixpoint import KeyedSolver
from kernelagent.verifier.policy.graph import AUTOGRAD_METHODS, CallGraph
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import Binding, FuncInfo, ModuleInfo, Scope
from kernelagent.verifier.policy.tables import (
    OP_WRAPPERS,
    TENSOR_NONTENSOR_METHODS,
    TENSOR_TENSOR_ATTRS,
    TORCH_ALLOWED_CALLS,
)

_SCALAR_ANNOTATION = re.compile(r"\b(int|float|bool|str|complex|None|SymInt)\b")
_TENSOR_CLASSES = frozenset({"Parameter", "Tensor", "Buffer"})
_INPUT_METHODS = frozenset({"forward", "__call__", "_call_impl", "_wrapped_call_impl", *AUTOGRAD_METHODS})
# Builtins that hand back (elements of) what they are given.
_PASS_THROUGH = frozenset(f"builtins.{n}" for n in (
    "next iter list tuple reversed sorted dict set frozenset enumerate zip filter map min max".split()))
_MAX_ROUNDS = 6
_MAX_DEPTH = 400


def is_nn_module_instance(qual: str) -> bool:
    """`torch.nn.Linear()`: the result of constructing a torch.nn layer."""
    base = qual.split("()")[0]
    last = base.rsplit(".", 1)[-1]
    return "()" in qual and base.startswith("torch.nn.") and last[:1].isupper() and last not in _TENSOR_CLASSES


def _param_attr_is_tensor(attr: str) -> bool:
    return "weight" in attr or "bias" in attr or attr.startswith("running_")


class TensorFacts:
    """Answers `is_tensor(expr, scope)` for host code on the forward path."""

    def __init__(self, info: ModuleInfo, resolver: Resolver, graph: CallGraph,
                 entry_tensors: frozenset[int] | None = None) -> None:
        """entry_tensors: positions of the model's call arguments that hold tensors in the reference's
        inputs, once it has run; the entry methods' (forward, __call__, ...) parameters there hold tensors
        whatever their annotations or defaults say."""
        self.info, self.r, self.graph = info, resolver, graph
        self.entry_tensors = entry_tensors
        self.entries = {v.node for cls in graph.models for name in _INPUT_METHODS
                        for v in resolver.class_attr(cls, name) if v.kind == "func"}
        self.tensor_params: dict[ast.AST, set[str]] = {n: set() for n in info.funcs}
        self.solver: KeyedSolver[bool] = KeyedSolver(False, max_depth=200)
        self._memo: dict[int, bool] = {}
        self._busy: set[int] = set()
        for node in graph.roots - graph.setup_contexts - graph.hooks:  # a library's callbacks get its values
            self._seed_inputs(info.funcs[node], operator=node in graph.op_bodies)
        self._propagate()

    # --- parameters ---------------------------------------------------------------------------
    def _seed_inputs(self, func: FuncInfo, operator: bool = False) -> None:
        """Parameters of entry points (and of bodies registered for operators, lambdas too) hold tensors."""
        if func.dsl or isinstance(func.node, ast.Lambda) and not operator:
            return
        if not operator and func.node.name not in _INPUT_METHODS and func.cls is not None:
            return
        args: ast.arguments = func.node.args
        params = [*args.posonlyargs, *args.args]
        skip_first = func.kind in ("method", "classmethod") or (func.cls is not None and func.kind == "static")
        skip_first = skip_first or bool(params and params[0].arg in ("ctx", "context", "self"))
        known = None
        if self.entry_tensors is not None and func.node in self.entries:  # bound to the model: one parameter
            known, skip_first = self.entry_tensors, func.kind != "static"  # is the instance, whatever its name
        defaults = dict(zip([p.arg for p in params][len(params) - len(args.defaults):], args.defaults, strict=True))
        for i, param in enumerate(params[1 if skip_first else 0:]):
            if (known is not None and i in known) or not _is_scalar(param, defaults.get(param.arg)):
                self.tensor_params[func.node].add(param.arg)
        if args.vararg is not None:
            self.tensor_params[func.node].add(args.vararg.arg)

    def _propagate(self) -> None:
        """Mark helper parameters that receive tensors from the forward path, until nothing changes."""
        for _ in range(_MAX_ROUNDS):
            changed = False
            for func in self.graph.forward_functions():
                for call in (n for n in self.info.body_nodes(func.node) if isinstance(n, ast.Call)):
                    changed |= self._mark_call(call, self.info.scope_at(call, func.scope))
            if not changed:
                return
            self._memo.clear()
            self.solver.clear()

    def _mark_call(self, call: ast.Call, scope: Scope) -> bool:
        changed = False
        for callee, offset in self._callees(call, scope):
            marks = self.tensor_params[callee.node]
            before = len(marks)
            for i, arg in enumerate(call.args):
                if isinstance(arg, ast.Starred):
                    if self.is_tensor(arg.value, scope):
                        marks.update(callee.params[i + offset:])
                        marks.update([callee.vararg] if callee.vararg else [])
                    break
                index = i + offset
                name = callee.params[index] if index < len(callee.params) else callee.vararg
                if name and self.is_tensor(arg, scope):
                    marks.add(name)
            for kw in call.keywords:
                if kw.arg and self.is_tensor(kw.value, scope):
                    marks.add(kw.arg)
            changed |= len(marks) != before
        return changed

    def _callees(self, call: ast.Call, scope: Scope) -> list[tuple[FuncInfo, int]]:
        out = []
        access = self.r.attr_access(call.func, scope)
        receiver = self.r.resolve(access[0], scope) if access else frozenset()
        bound = any(v.kind in ("self", "inst", "super") for v in receiver)
        via_apply = access is not None and access[1] == "apply"
        for val in self.r.resolve(call.func, scope):
            if val.kind in ("class", "inst", "self"):  # constructing or calling an object of a local class
                names = ("__init__",) if val.kind == "class" else ("__call__", "forward")
                methods = [v for n in names for v in self.r.class_attr(val.node, n) if v.kind == "func"]
                out += [(self.info.funcs[v.node], 1) for v in methods if not self.info.funcs[v.node].dsl]
                continue
            callee = self.info.funcs.get(val.node) if val.kind == "func" else None
            if callee is None or callee.dsl:
                continue
            offset = 1 if (bound and callee.kind == "method") or (via_apply and callee.kind == "static") else 0
            out.append((callee, offset))
        return out

    # --- expressions --------------------------------------------------------------------------
    def is_tensor(self, expr: ast.AST, scope: Scope) -> bool:
        """True when `expr` clearly evaluates to a torch tensor (or a tuple of tensors)."""
        key = id(expr)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy or len(self._busy) > _MAX_DEPTH:
            self.solver.provisional_uses += 1
            return False
        before = self.solver.provisional_uses
        self._busy.add(key)
        try:
            result = self._is_tensor(expr, scope)
        finally:
            self._busy.discard(key)
        if result or self.solver.provisional_uses == before or (self.solver.idle and not self._busy):
            self._memo[key] = result
        return result

    def _is_tensor(self, expr: ast.AST, scope: Scope) -> bool:
        if isinstance(expr, ast.Name):
            bindings = self.r.lookup(expr.id, scope)
            if all(b[0] == "val" for b in bindings):  # imports, defs, builtins (lists made on the fly)
                return False
            return self.solver.get(("n", id(bindings)), lambda: any(self._binding_is_tensor(b) for b in bindings))
        if isinstance(expr, ast.Attribute):
            return self._attribute_is_tensor(expr, scope)
        if isinstance(expr, ast.Subscript):
            return self.is_tensor(expr.value, scope)
        if isinstance(expr, ast.Call):
            return self._call_is_tensor(expr, scope)
        if isinstance(expr, ast.BinOp):
            return self.is_tensor(expr.left, scope) or self.is_tensor(expr.right, scope)
        if isinstance(expr, ast.UnaryOp):
            return not isinstance(expr.op, ast.Not) and self.is_tensor(expr.operand, scope)
        if isinstance(expr, ast.Compare):
            return _elementwise(expr) and any(self.is_tensor(e, scope) for e in [expr.left, *expr.comparators])
        return self._compound_is_tensor(expr, scope)

    def _compound_is_tensor(self, expr: ast.AST, scope: Scope) -> bool:
        if isinstance(expr, ast.IfExp):
            parts = [expr.body, expr.orelse]
        elif isinstance(expr, ast.BoolOp):
            parts = expr.values
        elif isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            parts = expr.elts
        elif isinstance(expr, (ast.NamedExpr, ast.Starred, ast.Await)):
            parts = [expr.value]
        elif isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            parts = [expr.elt]
        elif isinstance(expr, ast.Dict):  # {"t": x}["t"] is x
            parts = list(expr.values)
        elif isinstance(expr, ast.DictComp):
            parts = [expr.value]
        else:
            return False
        return any(self.is_tensor(p, scope) for p in parts)

    def _binding_is_tensor(self, item: Binding) -> bool:
        if item[0] == "expr":
            return self.is_tensor(item[1], item[2])
        if item[0] == "param":
            return item[2] in self.tensor_params.get(item[1].node, ())
        return False

    def _attribute_is_tensor(self, expr: ast.Attribute, scope: Scope) -> bool:
        if expr.attr in ("saved_tensors", "saved_variables"):
            return True
        if self.is_tensor(expr.value, scope):
            return expr.attr in TENSOR_TENSOR_ATTRS
        for val in self.r.resolve(expr.value, scope):
            if val.kind in ("self", "inst", "class") and self._class_attr_is_tensor(val.node, expr.attr):
                return True
            if val.kind == "ref" and is_nn_module_instance(val.name) and _param_attr_is_tensor(expr.attr):
                return True
        return False

    def _class_attr_is_tensor(self, cls: ast.ClassDef, attr: str) -> bool:
        return self.solver.get(("c", id(cls), attr), lambda: self._compute_class_attr(cls, attr))

    def _compute_class_attr(self, cls: ast.ClassDef, attr: str) -> bool:
        info = self.info.classes.get(cls)
        if info is None:
            return False
        items = [*info.scope.bindings.get(attr, []), *info.attrs.get(attr, [])]
        if any(self._binding_is_tensor(b) for b in items):
            return True
        return any(self._class_attr_is_tensor(b, attr) for b in self.r.local_bases(cls))

    def _call_is_tensor(self, call: ast.Call, scope: Scope) -> bool:
        access = self.r.attr_access(call.func, scope)
        if access is not None and self.is_tensor(access[0], scope):
            return access[1] not in TENSOR_NONTENSOR_METHODS
        for val in self.r.resolve(call.func, scope):
            if val.kind == "ref" and _torch_call_returns_tensor(val.name):
                return True
            if val.kind == "ref" and val.name in _PASS_THROUGH and call.args:  # next(iter([x])) is x
                return any(self.is_tensor(a, scope) for a in call.args)
            if val.kind == "func" and self.returns_tensor(val.node):
                return True
            if val.kind in ("inst", "self"):
                forward = self.r.class_attr(val.node, "forward")
                if any(v.kind == "func" and self.returns_tensor(v.node) for v in forward):
                    return True
        return False

    def returns_tensor(self, node: ast.AST) -> bool:
        """Whether one of the candidate's functions may return a tensor."""
        return self.solver.get(("r", id(node)), lambda: self._returns_tensor(node))

    def _returns_tensor(self, node: ast.AST) -> bool:
        func = self.info.funcs.get(node)
        if func is None or func.dsl:
            return False
        if isinstance(node, ast.Lambda):
            return self.is_tensor(node.body, func.scope)
        return any(
            isinstance(n, ast.Return) and n.value is not None and self.is_tensor(n.value, func.scope)
            for n in self.info.body_nodes(node)
        )


def _torch_call_returns_tensor(qual: str) -> bool:
    if is_nn_module_instance(qual) or qual.split("()")[0] in OP_WRAPPERS and qual.endswith("()"):
        return True  # an nn layer, or the candidate's own operator: both return tensors
    if not qual.startswith("torch.") or "()" in qual:
        return False
    if qual in TORCH_ALLOWED_CALLS:
        return TORCH_ALLOWED_CALLS[qual]
    if qual.startswith(("torch.cuda.", "torch.backends.", "torch.library.", "torch.autograd.function.")):
        return False
    if qual.startswith("torch.Tensor."):
        return qual.rsplit(".", 1)[-1] not in TENSOR_NONTENSOR_METHODS
    last = qual.rsplit(".", 1)[-1]
    return not last[:1].isupper() or last in _TENSOR_CLASSES


def _elementwise(expr: ast.Compare) -> bool:
    return not any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in expr.ops)


def _is_scalar(param: ast.arg, default: ast.expr | None) -> bool:
    if param.annotation is not None:
        text = ast.unparse(param.annotation)
        return "Tensor" not in text and bool(_SCALAR_ANNOTATION.search(text))
    return isinstance(default, ast.Constant) and default.value is not None

