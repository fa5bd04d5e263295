"""Checks that apply to the whole file: imports, banned modules and names, introspection, patching,
streams, classes and dynamic lookups."""

from __future__ import annotations

import ast
import re

from kernelagent.verifier.policy.findings import Reporter, short
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import ModuleInfo, Scope
from kernelagent.verifier.policy.tables import (
    ALLOWED_IMPORT_ROOTS,
    BANNED,
    CUSTREAM_TYPES,
    INTROSPECTION_ATTRS,
    OS_OK,
    PATCH_ATTRS,
    REFERENCE_MODULES,
    REFERENCE_NAMES,
    STREAM_CALLS,
    SYS_OK,
    TORCH_AUTOGRAD_FUNCTION,
    TORCH_CONTAINER_BASES,
    TORCH_MODULE_BASES,
    TORCH_OP_NAMESPACES,
    TORCH_TENSOR_BASES,
)

_HOOK = re.compile(r"^_?register_\w*hook\w*$")
_LIBRARY_CALLS = frozenset({
    "Library", "impl", "register_kernel", "register_autograd", "register_fake", "custom_op", "triton_op",
    "define", "register_torch_dispatch", "register_vmap", "_scoped_library", "fallthrough_kernel",
})
_MUTATORS = frozenset({
    "update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__setattr__", "__delattr__",
})
_SAFE_BASE_ROOTS = frozenset({
    "triton", "cutlass", "cuda", "typing", "typing_extensions", "enum", "abc", "dataclasses", "collections",
    "numbers",
})
_DYNAMIC_GETTERS = frozenset({
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.object.__getattribute__",
    "builtins.type.__getattribute__",
})
_SETTERS = frozenset({
    "builtins.setattr", "builtins.delattr", "builtins.object.__setattr__", "builtins.object.__delattr__",
    "builtins.type.__setattr__", "builtins.type.__delattr__",
})


def banned_prefix(qual: str) -> str | None:
    """The longest listed prefix of a qualified name that a rule covers, if any."""
    parts = [p.removesuffix("()") for p in qual.split(".")]
    for size in range(len(parts), 0, -1):
        prefix = ".".join(parts[:size])
        if prefix == "builtins" and qual != "builtins":
            continue
        if prefix in BANNED:
            return prefix
    return None


def banned_rule(qual: str) -> str | None:
    """The rule covering a qualified name, if any."""
    prefix = banned_prefix(qual)
    return None if prefix is None else BANNED[prefix]


class ModuleChecker:
    """Walks every node of the candidate (with its scope) and reports rules that hold everywhere."""

    def __init__(self, info: ModuleInfo, resolver: Resolver, report: Reporter) -> None:
        self.info, self.r, self.report = info, resolver, report

    def run(self) -> None:
        for node, scope in self.info.nodes:
            handler = getattr(self, f"_on_{type(node).__name__}", None)
            if handler is not None:
                handler(node, scope)

    # --- helpers ------------------------------------------------------------------------------
    def _refs(self, expr: ast.AST, scope: Scope) -> list[str]:
        return [v.name for v in self.r.resolve(expr, scope) if v.kind == "ref"]

    def _external(self, expr: ast.AST, scope: Scope) -> str | None:
        """The outside module or object `expr` stands for (not an object the candidate created)."""
        return next((q for q in self._refs(expr, scope) if "()" not in q), None)

    def _maximal(self, node: ast.AST) -> bool:
        parent = self.info.parents.get(node)
        return not (isinstance(parent, ast.Attribute) and parent.value is node)

    def _classify(self, qual: str, node: ast.AST, note: str = "") -> None:
        prefix = banned_prefix(qual)
        label = f"`{short(node)}`{note}"
        if prefix is not None:
            rule = BANNED[prefix]
            shown = prefix.removeprefix("builtins.")
            self.report.add(rule, node, f"{label} uses {shown}")
            return
        root, _, rest = qual.partition(".")
        first = rest.split(".")[0].split("(")[0]
        if root == "os" and first and first not in OS_OK:
            self.report.add("forbidden_import", node, f"{label} uses os.{first}, which is not allowed", "suspect")
        elif root == "sys" and first and first not in SYS_OK:
            self.report.add("introspection", node, f"{label} uses sys.{first}, which is not allowed", "suspect")
        elif root == "torch" and any(p.startswith("_") and not p.startswith("__") for p in qual.split(".")):
            self.report.add("introspection", node, f"{label} reaches into private PyTorch internals", "suspect")

    def _check_chain(self, node: ast.AST, scope: Scope, note: str = "") -> None:
        if not self._maximal(node):
            return
        refs = self._refs(node, scope)
        if isinstance(node, ast.Name) and all(q.endswith("()") for q in refs):
            return  # a value computed by a call; the call itself is where it is reported
        for qual in refs:
            self._classify(qual, node, note)

    def _check_attr_name(self, name: str, node: ast.AST, base: ast.expr, scope: Scope) -> None:
        if name in INTROSPECTION_ATTRS:
            self.report.add("introspection", node, f"`{short(node)}` reads {name}, which exposes frames, code "
                                                   "or class internals")
        if name in REFERENCE_NAMES:
            self.report.add("reference_access", node, f"`{short(node)}` reaches the reference's {name}")
        if name == "__dict__" and self._external(base, scope) and not self._const_subscripted(node, scope):
            self.report.add("dynamic_attr", node, f"`{short(node)}` reads a module's namespace as a dict; what "
                                                  "is taken from it is not visible", "suspect")

    def _const_subscripted(self, node: ast.AST, scope: Scope) -> bool:
        parent = self.info.parents.get(node)
        return isinstance(parent, ast.Subscript) and self.r.fold(parent.slice, scope) is not None

    # --- imports ------------------------------------------------------------------------------
    def _on_Import(self, node: ast.Import, scope: Scope) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)

    def _on_ImportFrom(self, node: ast.ImportFrom, scope: Scope) -> None:
        module = "." * node.level + (node.module or "")
        if node.level:
            self.report.add("reference_access", node, f"relative import `from {module} import ...` reaches "
                                                      "files next to the candidate (the problem, the verifier)")
            return
        self._check_module(module, node)
        for alias in node.names:
            if alias.name == "*":
                self._check_star(module, node)
            else:
                self._check_module(f"{module}.{alias.name}", node)

    def _check_module(self, module: str, node: ast.AST, note: str = "") -> None:
        root = module.split(".")[0]
        if root in REFERENCE_MODULES:
            self.report.add("reference_access", node, f"importing `{module}`{note} reaches the reference problem "
                                                      "or the verifier")
            return
        rule = banned_rule(module)
        if rule is not None:
            self.report.add(rule, node, f"importing `{module}`{note} is not allowed")
        elif root not in ALLOWED_IMPORT_ROOTS:
            self.report.add("forbidden_import", node, f"importing `{module}`{note} is not allowed (module "
                                                      f"'{root}' is not on the allowed list)")

    def _check_star(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in ("os", "sys"):
            self.report.add("forbidden_import", node, f"`from {module} import *` is not allowed")
        elif root == "torch":
            self.report.add("dynamic_attr", node, f"`from {module} import *` hides which PyTorch functions are "
                                                  "used", "suspect")

    # --- names --------------------------------------------------------------------------------
    def _on_Name(self, node: ast.Name, scope: Scope) -> None:
        if node.id in REFERENCE_NAMES:
            self.report.add("reference_access", node, f"`{node.id}` is the reference problem's name")
        if node.id == "__builtins__":
            self.report.add("introspection", node, "`__builtins__` exposes the interpreter's built-in namespace")
        if isinstance(node.ctx, ast.Load):
            self._check_chain(node, scope)

    def _on_Attribute(self, node: ast.Attribute, scope: Scope) -> None:
        self._check_attr_name(node.attr, node, node.value, scope)
        if isinstance(node.ctx, ast.Load):
            self._check_chain(node, scope)

    def _on_Subscript(self, node: ast.Subscript, scope: Scope) -> None:
        access = self.r.attr_access(node, scope)
        if access is not None:
            self._check_attr_name(access[1], node, access[0], scope)
            self._check_chain(node, scope, " (name built from strings)" if access[2] else "")

    # --- definitions --------------------------------------------------------------------------
    def _on_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> None:
        if node.name in REFERENCE_NAMES:
            self.report.add("reference_access", node, f"defining `{node.name}` copies the reference problem")
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.report.add("tensor_subclass", node, f"`{node.name}` intercepts PyTorch calls")
        if node.name == "__del__":
            self.report.add("introspection", node, "`__del__` runs code when objects are garbage collected")

    _on_AsyncFunctionDef = _on_FunctionDef

    def _on_ClassDef(self, node: ast.ClassDef, scope: Scope) -> None:
        if node.name in REFERENCE_NAMES:
            self.report.add("reference_access", node, f"defining class `{node.name}` copies the reference problem")
        for kw in node.keywords:
            if kw.arg == "metaclass":
                self.report.add("introspection", node, f"class `{node.name}` uses a metaclass")
        for base in node.bases:
            self._check_base(node, base, scope)

    def _check_base(self, node: ast.ClassDef, base: ast.expr, scope: Scope) -> None:
        vals = self.r.resolve(base, scope)
        label = f"class `{node.name}` inherits `{short(base)}`"
        if not vals:
            self.report.add("reference_access", node, f"{label}, which is not defined in this file")
        for val in vals:
            qual = val.name
            if val.kind != "ref" or "()" in qual:
                continue
            root = qual.split(".")[0]
            if qual in TORCH_TENSOR_BASES or qual.startswith("torch.Tensor"):
                self.report.add("tensor_subclass", node, f"{label}: tensor subclasses are not allowed")
            elif qual in TORCH_MODULE_BASES | TORCH_AUTOGRAD_FUNCTION | TORCH_CONTAINER_BASES:
                continue
            elif root in _SAFE_BASE_ROOTS or root == "builtins":
                continue
            elif root == "torch":
                self.report.add("torch_compute", node, f"{label}; its PyTorch implementation would do the work")
            else:
                self.report.add("reference_access", node, f"{label} ({qual}), which is not defined in this file")

    # --- assignments --------------------------------------------------------------------------
    def _on_Assign(self, node: ast.Assign, scope: Scope) -> None:
        for target in node.targets:
            self._check_target(target, scope)

    def _on_AugAssign(self, node: ast.AugAssign | ast.AnnAssign, scope: Scope) -> None:
        self._check_target(node.target, scope)

    _on_AnnAssign = _on_AugAssign

    def _on_Delete(self, node: ast.Delete, scope: Scope) -> None:
        for target in node.targets:
            self._check_target(target, scope)

    def _check_target(self, target: ast.AST, scope: Scope) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt, scope)
        elif isinstance(target, ast.Starred):
            self._check_target(target.value, scope)
        elif isinstance(target, ast.Attribute):
            owner = self._external(target.value, scope)
            if target.attr in PATCH_ATTRS:
                self.report.add("monkey_patch", target, f"assigning `{short(target)}` rewires an existing object")
            elif owner is not None:
                self.report.add("monkey_patch", target, f"assigning `{short(target)}` changes {owner}, "
                                                        "which is not the candidate's own object")
        elif isinstance(target, ast.Subscript):
            owner = self._external(target.value, scope)
            if owner is not None:
                self.report.add("monkey_patch", target, f"writing into `{short(target.value)}` changes {owner}")

    # --- calls --------------------------------------------------------------------------------
    def _on_Call(self, node: ast.Call, scope: Scope) -> None:
        access = self.r.attr_access(node, scope)
        if access is not None:
            self._check_attr_name(access[1], node, access[0], scope)
            self._check_chain(node, scope, " (name built from strings)" if access[2] else "")
        funcs = set(self._refs(node.func, scope))
        self._check_dynamic_attr(node, funcs, scope)
        self._check_setattr(node, funcs, scope)
        self._check_hooks(node)
        self._check_library(node, funcs, scope)
        self._check_stream(node, funcs)
        self._check_dynamic_import(node, scope)
        if "builtins.type" in funcs and len(node.args) == 3:
            self.report.add("introspection", node, f"`{short(node)}` creates a class at run time")
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
            owner = self._external(func.value, scope)
            if owner is not None:
                self.report.add("monkey_patch", node, f"`{short(func)}(...)` changes {owner}")

    def _check_dynamic_attr(self, node: ast.Call, funcs: set[str], scope: Scope) -> None:
        func = node.func
        dunder = isinstance(func, ast.Attribute) and func.attr in ("__getattribute__", "__getattr__")
        if dunder and node.args:
            name_arg: ast.expr | None = node.args[0]
        elif funcs & _DYNAMIC_GETTERS and len(node.args) >= 2:
            name_arg = node.args[1]
        else:
            return
        owner = self._external(node.args[0], scope) if node.args and not dunder else None
        if owner is not None and _own_op_namespace(owner):
            return  # the candidate's own torch.ops namespace: only its own operators live there
        if self.r.fold(name_arg, scope) is None:
            self.report.add("dynamic_attr", node, f"`{short(node)}` uses an attribute name computed at run "
                                                  "time", "suspect")

    def _check_setattr(self, node: ast.Call, funcs: set[str], scope: Scope) -> None:
        func = node.func
        if funcs & _SETTERS and node.args:
            target, name = node.args[0], node.args[1] if len(node.args) > 1 else None
        elif isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__") and node.args:
            target, name = func.value, node.args[0]
        else:
            return
        owner = self._external(target, scope)
        folded = self.r.fold(name, scope) if name is not None else None
        if owner is not None:
            self.report.add("monkey_patch", node, f"`{short(node)}` changes {owner}, which is not the "
                                                  "candidate's own object")
        elif folded in PATCH_ATTRS:
            self.report.add("monkey_patch", node, f"`{short(node)}` rewires an existing object")

    def _check_hooks(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if _HOOK.match(name):
            self.report.add("monkey_patch", node, f"`{short(func)}(...)` registers a hook, code that runs "
                                                  "outside forward")

    def _check_library(self, node: ast.Call, funcs: set[str], scope: Scope) -> None:
        names = {q.rsplit(".", 1)[-1] for q in funcs if q.startswith("torch.library.") and "()" not in q}
        if not names & _LIBRARY_CALLS or not node.args:
            return
        first = node.args[0]
        text = self.r.fold_prefix(first, scope)
        known = "::" in text or self.r.fold(first, scope) is not None
        if not known:
            if not any(v.kind == "func" for v in self.r.resolve(first, scope)) and not self._refs(first, scope):
                self.report.add("monkey_patch", node, f"`{short(node)}` registers an operator whose namespace is "
                                                      "computed at run time", "suspect")
            return
        namespace = text.split("::")[0].split(".")[0]
        if namespace in TORCH_OP_NAMESPACES:
            self.report.add("monkey_patch", node, f"`{short(node)}` registers code for PyTorch's own operators "
                                                  f"('{namespace}')")

    def _check_stream(self, node: ast.Call, funcs: set[str]) -> None:
        for qual in funcs & STREAM_CALLS:
            self.report.add("stream_creation", node, f"`{short(node.func)}(...)` ({qual}) creates, switches or "
                                                     "captures a CUDA stream or graph")
        if funcs & CUSTREAM_TYPES:
            args = [*node.args, *[k.value for k in node.keywords]]
            if not args or all(isinstance(a, ast.Constant) for a in args):
                self.report.add("stream_creation", node, f"`{short(node)}` is a raw stream handle, not "
                                                         "torch's current stream", "suspect")

    def _check_dynamic_import(self, node: ast.Call, scope: Scope) -> None:
        name = self.r.dynamic_import_name(node, scope)
        if name is None:
            return
        self.report.add("dynamic_import", node, f"`{short(node)}` imports a module at run time")
        if name:
            built = "" if isinstance(node.args[0], ast.Constant) else " (name built from strings)"
            self._check_module(name, node, built)


def _own_op_namespace(qual: str) -> bool:
    parts = qual.split(".")
    return len(parts) == 3 and parts[:2] == ["torch", "ops"] and parts[2] not in TORCH_OP_NAMESPACES
