"""Checks that apply to the whole file: imports, banned modules and names, introspection, patching,
streams, classes and dynamic lookups."""

from __future__ import annotations

import ast
import re
import string

from kernelagent.verifier.policy.canon import canonical, canonical_name, ends_process, private_home, private_path
from kernelagent.verifier.policy.findings import Reporter, short
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import ModuleInfo, Scope
from kernelagent.verifier.policy.tables import (
    ALLOWED_IMPORT_ROOTS,
    ATTR_RULES,
    BANNED,
    BUFFER_PROTOCOL,
    CUSTREAM_TYPES,
    DISPATCH_MACHINERY,
    FILE_GLOBALS,
    INTROSPECTION_ATTRS,
    INTROSPECTION_GLOBALS,
    MODULE_LIKE_ATTRS,
    OS_OK,
    OUTSIDE_ATTR_RULES,
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
    TORCH_UTILS_OK,
    raw_cuda,
)

_HOOK = re.compile(r"^_?register_\w*hook\w*$")
_LIBRARY_CALLS = frozenset({
    "Library", "impl", "register_kernel", "register_autograd", "register_fake", "custom_op", "triton_op",
    "define", "register_torch_dispatch", "register_vmap", "_scoped_library", "fallthrough_kernel",
})
_MUTATORS = frozenset({
    "update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__setattr__", "__delattr__",
})
_OPERATOR_WRITES = frozenset(f"operator.{n}" for base in (
    "setitem", "delitem", "iadd", "iand", "iconcat", "ior", "isub", "ixor", "imul", "ilshift", "irshift",
) for n in (base, f"__{base}__"))
_SAFE_BASE_ROOTS = frozenset({
    "triton", "cutlass", "cuda", "typing", "typing_extensions", "enum", "abc", "dataclasses", "collections",
    "numbers",
})
_DYNAMIC_GETTERS = frozenset({
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.object.__getattribute__",
    "builtins.type.__getattribute__",
})
_GETTER_VALUES = _DYNAMIC_GETTERS | {"operator.attrgetter", "operator.methodcaller"}
_OWN = ("self", "inst", "class", "func", "super")
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


_TYPE_NODES = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Constant,
               ast.BinOp, ast.BitOr, ast.Load)


def _literal_type(expr: ast.expr) -> bool:
    name = expr.id if isinstance(expr, ast.Name) else expr.attr if isinstance(expr, ast.Attribute) else ""
    return name == "Literal"


def _type_expression(text: str) -> bool:
    """`"torch.Tensor"`, `"list[int] | None"`: names, subscripts and unions only."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return False
    return all(isinstance(n, _TYPE_NODES) for n in ast.walk(tree)) and all(
        isinstance(n.op, ast.BitOr) for n in ast.walk(tree) if isinstance(n, ast.BinOp))


def _shown(qual: str) -> str:
    return qual.replace("()", "(...)")


def banned_rule(qual: str) -> str | None:
    """The rule covering a qualified name, if any."""
    prefix = banned_prefix(qual)
    return None if prefix is None else BANNED[prefix]


def unlisted_torch_utils(qual: str) -> str | None:
    """`torch.utils.<m>` for a module m a kernel may not use (torch.utils is a toolbox: profilers, writers,
    benchmarks, tracers), else None."""
    parts = qual.replace("()", "").split(".")
    if parts[:2] != ["torch", "utils"] or len(parts) < 3 or parts[2] in TORCH_UTILS_OK:
        return None
    return ".".join(parts[:3])


# builtin types whose one positional class pattern matches the subject itself
_SELF_MATCHING = frozenset(f"builtins.{t}" for t in
                           "bool bytearray bytes dict float frozenset int list set str tuple".split())


class ModuleChecker:
    """Walks every node of the candidate (with its scope) and reports rules that hold everywhere."""

    def __init__(self, info: ModuleInfo, resolver: Resolver, report: Reporter) -> None:
        self.info, self.r, self.report = info, resolver, report
        self.imported_roots = {  # roots the file imports itself: reported at the import, not at each use
            a.name.split(".")[0] for n, _ in info.nodes if isinstance(n, ast.Import) for a in n.names
        } | {n.module.split(".")[0] for n, _ in info.nodes if isinstance(n, ast.ImportFrom) and n.module}

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
        return not (isinstance(parent, ast.Attribute) and parent.value is node and isinstance(parent.ctx, ast.Load))

    def _classify(self, qual: str, node: ast.AST, note: str = "") -> None:
        """Judge what a name denotes: its canonical name, and the home of the object when that differs."""
        label = f"`{short(node)}`{note}"
        if self._banned(qual, node, label):
            return
        found = canonical(qual)
        home = found.home
        if home is not None and self._banned(home, node, f"{label} (that is {home})"):
            return
        utils = unlisted_torch_utils(qual) or (unlisted_torch_utils(home) if home else None)
        if utils is not None and not private_path(utils):
            self.report.add("forbidden_import", node, f"{label} reaches {utils}, which is not on the allowed list")
            return
        root, _, rest = qual.partition(".")
        first = rest.split(".")[0].split("(")[0]
        if self._stream_maker(qual, home, node):
            self.report.add("stream_creation", node, f"{label} is {_shown(home or qual)}, which makes or switches "
                                                     "CUDA streams or graphs (handed on, not called here)")
        elif raw_cuda(qual) or (home is not None and raw_cuda(home)):
            self.report.add("stream_creation", node, f"{label} reaches the CUDA driver or runtime directly "
                                                     f"({_shown(qual)}): streams, copies and launches made there are "
                                                     "invisible to the verifier; only cuda.CUstream(torch.cuda."
                                                     "current_stream().cuda_stream) may be used")
        elif root in REFERENCE_MODULES and root not in self.imported_roots:
            self.report.add("reference_access", node, f"{label} reaches `{qual}`, the reference problem or the "
                                                      "verifier")
        elif root == "os" and first and first not in OS_OK:
            self.report.add("forbidden_import", node, f"{label} uses os.{first}, which is not allowed", "suspect")
        elif root == "sys" and first and first not in SYS_OK:
            self.report.add("introspection", node, f"{label} uses sys.{first}, which is not allowed", "suspect")
        elif private_path(qual):
            self.report.add("introspection", node, f"{label} reaches into private internals ({_shown(qual)})",
                            "suspect")
        elif private_home(found):
            self.report.add("introspection", node, f"{label} is {home}, private internals", "suspect")
        elif root not in ALLOWED_IMPORT_ROOTS | {"builtins"} | self.imported_roots:
            self.report.add("forbidden_import", node, f"{label} reaches module '{root}' ({_shown(qual)}), which is "
                                                      "not on the allowed list")

    def _stream_maker(self, qual: str, home: str | None, node: ast.AST) -> bool:
        """A stream or graph maker named anywhere but as the function of a call (`_check_stream` reports those):
        handed to map(), a default_factory or a container, it makes streams all the same."""
        if not ({qual.split("()")[0], home} & STREAM_CALLS) or "()" in qual:
            return False
        parent = self.info.parents.get(node)
        return not (isinstance(parent, ast.Call) and parent.func is node)

    def _banned(self, qual: str, node: ast.AST, label: str) -> bool:
        prefix = banned_prefix(qual)
        if prefix is None:
            return False
        shown = prefix.removeprefix("builtins.")
        self.report.add(BANNED[prefix], node, f"{label} uses {shown}")
        return True

    def _check_chain(self, node: ast.AST, scope: Scope, note: str = "") -> None:
        if not self._maximal(node):
            return
        refs = self._refs(node, scope)
        if isinstance(node, ast.Name) and all(q.endswith("()") for q in refs):
            return  # a value computed by a call; the call itself is where it is reported
        for qual in refs:
            self._classify(qual, node, note)
            if ends_process(qual) and not self._only_caught(node, scope):
                self.report.add("process_exit", node, f"`{short(node)}` is {_shown(qual)}, which ends the process "
                                                      "or the call outside the ordinary error path")

    def _only_caught(self, node: ast.AST, scope: Scope) -> bool:
        """The name is what an `except` clause catches (without keeping it) or the type an isinstance() tests."""
        child, parent = node, self.info.parents.get(node)
        while isinstance(parent, ast.Tuple):
            child, parent = parent, self.info.parents.get(parent)
        if isinstance(parent, ast.ExceptHandler):
            return parent.type is child and parent.name is None
        if isinstance(parent, ast.Call) and len(parent.args) == 2 and parent.args[1] is child:
            return bool(set(self._refs(parent.func, scope)) & {"builtins.isinstance", "builtins.issubclass"})
        return False

    def _check_attr_name(self, name: str, node: ast.AST, base: ast.expr, scope: Scope) -> None:
        for part in name.split("."):  # attrgetter("a.b") reads a, then b
            self._check_one_attr(part, node, base, scope)

    def _check_one_attr(self, name: str, node: ast.AST, base: ast.expr, scope: Scope) -> None:
        if name in INTROSPECTION_ATTRS:
            self.report.add("introspection", node, f"`{short(node)}` reads {name}, which exposes frames, code, "
                                                   "closures or class internals")
        if name in ATTR_RULES:
            self.report.add(ATTR_RULES[name], node, f"`{short(node)}` uses .{name}")
        if name in OUTSIDE_ATTR_RULES and not self._own_attr(base, name, scope):
            self.report.add(OUTSIDE_ATTR_RULES[name], node, f"`{short(node)}` uses .{name} of an object the "
                                                            "candidate did not define it on")
        if DISPATCH_MACHINERY.search(name) and not self._own_attr(base, name, scope):
            self._dispatch_machinery(node, name)
        elif name.startswith("_") and not name.startswith("__") and not any(
                v.kind == "ref" or v.kind in _OWN for v in self.r.resolve(base, scope)):
            self.report.add("introspection", node, f"`{short(node)}` reads the private attribute .{name} of a value "
                                                   "the checks cannot follow", "suspect")
        if name in MODULE_LIKE_ATTRS and not any("()" not in q for q in self._refs(base, scope)):
            if not any(v.kind in _OWN for v in self.r.resolve(base, scope)):
                self.report.add("introspection", node, f"`{short(node)}` reads an attribute named like the module "
                                                       f"{name} from a value that is not known", "suspect")
        if name in REFERENCE_NAMES:
            self.report.add("reference_access", node, f"`{short(node)}` reaches the reference's {name}")
        if name in ("format", "format_map"):
            self._check_format(node, base, scope)
        if name == "__dict__":
            vals = self.r.resolve(base, scope)
            if not vals or any(v.kind not in _OWN for v in vals):
                owner = self._external(base, scope)
                what = f"the namespace of {owner}" if owner else "the namespace of an object it did not create"
                self.report.add("introspection", node, f"`{short(node)}` reads {what} as a dict",
                                "violation" if owner else "suspect")
            elif self._namespace_write(node, scope):
                self.report.add("dynamic_attr", node, f"`{short(node)}` sets attributes through the namespace dict "
                                                      "with names the checks cannot read", "suspect")

    def _namespace_write(self, node: ast.AST, scope: Scope) -> bool:
        """`obj.__dict__` written with keys that do not fold to strings (`[k] = v`, `.update(d)`,
        `.setdefault(k, v)`, `|=`): attributes set so escape every check of attribute names."""
        parent = self.info.parents.get(node)
        if isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load):
            return self.r.fold(parent.slice, scope) is None
        if isinstance(parent, ast.AugAssign) and parent.target is node:
            return True
        call = self.info.parents.get(parent) if isinstance(parent, ast.Attribute) else None
        if not (isinstance(call, ast.Call) and call.func is parent and parent.attr in ("update", "setdefault",
                                                                                       "__setitem__", "__ior__")):
            return False
        keys = [call.args[0]] if parent.attr in ("setdefault", "__setitem__") and call.args else []
        for arg in call.args if parent.attr in ("update", "__ior__") else []:
            if not isinstance(arg, ast.Dict) or None in arg.keys:
                return True
            keys += arg.keys
        return bool(call.keywords and any(k.arg is None for k in call.keywords)) or any(
            self.r.fold(k, scope) is None for k in keys)

    def _check_format(self, node: ast.AST, base: ast.expr, scope: Scope) -> None:
        """`"{0.environ}".format(os)` reads attributes in C, where no name shows (red-team review 4): the
        template must be a string known when the candidate is read, and its fields plain (no `.` or `[`)."""
        texts = [self.r.fold(t, scope) for t in self._templates(node, base, scope)]
        if not texts or None in texts:
            self.report.add("introspection", node, f"`{short(node)}` formats with a template not known when the "
                                                   "candidate is read: its fields ({0.attr}, {0[key]}) read "
                                                   "attributes and items unseen", "suspect")
            return
        walks = [w for text in texts for w in _format_walks(text)]
        if walks:
            self.report.add("introspection", node, f"`{short(node)}` formats fields that read attributes or items "
                                                   f"({', '.join(walks[:3])}): use an f-string of the values")

    def _templates(self, node: ast.AST, base: ast.expr, scope: Scope) -> list[ast.expr]:
        """The template expressions a `.format` reads: the receiver, both branches of a conditional one, and for
        the unbound `str.format(template, ...)` the call's first argument."""
        if isinstance(base, ast.IfExp):
            return [base.body, base.orelse]
        if "builtins.str" in self._refs(base, scope):
            call = self.info.parents.get(node)
            return [call.args[0]] if isinstance(call, ast.Call) and call.func is node and call.args else []
        return [base]

    def _own_attr(self, base: ast.expr, name: str, scope: Scope) -> bool:
        """`base.name` is an attribute the candidate defines on its own class (or instance)."""
        vals = self.r.resolve(base, scope)
        return bool(vals) and all(
            v.kind in ("self", "inst", "class") and v.node in self.info.classes and self.r.defines(v.node, name)
            for v in vals
        )

    def _class_only_compared(self, node: ast.AST) -> bool:
        """The class is compared (`is`, `==`, `in`), named (`.__name__`, `.__qualname__`, `.__module__`) or the
        class an isinstance()/issubclass() tests, never kept or called."""
        parent = self.info.parents.get(node)
        if isinstance(parent, ast.Compare):
            return True
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return parent.attr in ("__name__", "__qualname__", "__module__")
        return isinstance(parent, ast.Call) and node in parent.args[1:] and isinstance(parent.func, ast.Name) and \
            parent.func.id in ("isinstance", "issubclass")

    def _check_foreign_class(self, node: ast.expr, scope: Scope) -> None:
        """`type(x)` or `x.__class__` of an object the candidate did not create, kept or called."""
        if self._foreign_class(node, scope) and not self._class_only_compared(node):
            self.report.add("introspection", node, f"`{short(node)}` takes the class of an object the candidate did "
                                                   "not create (kept or called, it makes what no name shows: "
                                                   "type(torch.cuda.current_stream())() is a stream)")

    def _foreign_class(self, expr: ast.expr, scope: Scope) -> bool:
        """`type(x)` or `x.__class__` where x is not one of the candidate's own objects."""
        is_type = isinstance(expr, ast.Call) and len(expr.args) == 1 and "builtins.type" in self._refs(expr.func, scope)
        is_class = isinstance(expr, ast.Attribute) and expr.attr == "__class__"
        return (is_type or is_class) and not any(v.kind == "class" for v in self.r.resolve(expr, scope))

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
        real = canonical_name(module) if root in ALLOWED_IMPORT_ROOTS else module  # `from torch import os` is os
        shown = module if real == module else f"{module}` (that is `{real}"
        rule = banned_rule(module) or banned_rule(real)
        utils = unlisted_torch_utils(real)
        if rule is not None:
            self.report.add(rule, node, f"importing `{shown}`{note} is not allowed")
        elif utils is not None and not private_path(utils):
            self.report.add("forbidden_import", node, f"importing `{shown}`{note} is not allowed ({utils} is not "
                                                      "on the allowed list)")
        elif root not in ALLOWED_IMPORT_ROOTS or real.split(".")[0] not in ALLOWED_IMPORT_ROOTS | {"builtins"}:
            self.report.add("forbidden_import", node, f"importing `{shown}`{note} is not allowed (module "
                                                      f"'{real.split('.')[0]}' is not on the allowed list)")

    def _check_star(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in ("os", "sys"):
            self.report.add("forbidden_import", node, f"`from {module} import *` is not allowed")
        elif root == "torch":
            self.report.add("dynamic_attr", node, f"`from {module} import *` hides which PyTorch functions are "
                                                  "used", "suspect")
        else:  # a module without __all__ hands out everything it imported (os, sys, ...) under bare names
            self.report.add("dynamic_attr", node, f"`from {module} import *` hides which names it brings in",
                            "suspect")

    # --- names --------------------------------------------------------------------------------
    def _on_Name(self, node: ast.Name, scope: Scope) -> None:
        if node.id in REFERENCE_NAMES:
            self.report.add("reference_access", node, f"`{node.id}` is the reference problem's name")
        if node.id in FILE_GLOBALS:
            self.report.add("file_io", node, f"`{node.id}` is the path of the candidate's own file; a kernel "
                                              "needs no paths")
        if node.id == "__annotations__":
            self.report.add("eval_exec", node, "`__annotations__` written or read directly: its keys become source "
                                               "text in the code dataclasses and typing generate and run")
        if node.id in INTROSPECTION_GLOBALS:
            self.report.add("introspection", node, f"`{node.id}` exposes the module's loader or the interpreter's "
                                                   "built-in namespace")
        if node.id in BUFFER_PROTOCOL:
            self._buffer_protocol(node, node.id)
        if isinstance(node.ctx, ast.Load):
            self._check_chain(node, scope)
            self._check_getter_value(node, scope)

    def _on_Attribute(self, node: ast.Attribute, scope: Scope) -> None:
        self._check_attr_name(node.attr, node, node.value, scope)
        if isinstance(node.ctx, ast.Load):
            self._check_foreign_class(node, scope)
            self._check_chain(node, scope)
            self._check_getter_value(node, scope)

    def _check_getter_value(self, node: ast.Name | ast.Attribute, scope: Scope) -> None:
        """getattr (attrgetter, methodcaller) handed to other code instead of called with a written name."""
        parent = self.info.parents.get(node)
        if isinstance(parent, ast.Call) and parent.func is node or isinstance(parent, ast.Attribute):
            return
        if isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr) and parent.value is node:
            return  # an alias: its calls are followed
        names = set(self._refs(node, scope)) & _GETTER_VALUES
        if names:
            self.report.add("dynamic_attr", node, f"`{short(node)}` ({min(names)}) is handed to other code, so "
                                                  "the attribute it reads is not written in the source", "suspect")

    def _on_MatchClass(self, node: ast.MatchClass, scope: Scope) -> None:
        """`case C(m)` reads the attributes C.__match_args__ names: only builtin types (which match the subject
        itself) and the candidate's own classes say which."""
        if not node.patterns:
            return
        vals = self.r.resolve(node.cls, scope)
        if not vals or any(v.kind == "ref" and v.name not in _SELF_MATCHING for v in vals):
            self.report.add("dynamic_attr", node, f"`case {short(node.cls)}(...)` with positional patterns reads "
                                                  "attributes the class names elsewhere", "suspect")

    def _on_Subscript(self, node: ast.Subscript, scope: Scope) -> None:
        access = self.r.attr_access(node, scope)
        if access is not None:
            self._check_attr_name(access[1], node, access[0], scope)
            self._check_chain(node, scope, " (name built from strings)" if access[2] else "")

    # --- definitions --------------------------------------------------------------------------
    def _on_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> None:
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
        for annotation in [*(a.annotation for a in params), node.returns]:
            self._check_annotation(annotation)
        if node.name in REFERENCE_NAMES:
            self.report.add("reference_access", node, f"defining `{node.name}` copies the reference problem")
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.report.add("tensor_subclass", node, f"`{node.name}` intercepts PyTorch calls")
        if node.name == "__del__":
            self.report.add("introspection", node, "`__del__` runs code when objects are garbage collected")
        if node.name in BUFFER_PROTOCOL:
            self._buffer_protocol(node, node.name)

    def _on_keyword(self, node: ast.keyword, scope: Scope) -> None:
        if node.arg and DISPATCH_MACHINERY.search(node.arg):  # torch.library's impl(..., with_keyset=True)
            self._dispatch_machinery(node, node.arg)

    def _on_Constant(self, node: ast.Constant, scope: Scope) -> None:
        self._check_folded(node, scope)

    def _on_BinOp(self, node: ast.BinOp, scope: Scope) -> None:
        self._check_folded(node, scope)

    def _on_JoinedStr(self, node: ast.JoinedStr, scope: Scope) -> None:
        self._check_folded(node, scope)

    def _check_folded(self, node: ast.expr, scope: Scope) -> None:
        """A string, however it is built from constants (`"__array_" + "interface__"`), that names a buffer
        protocol (it can only be meant for setattr, a class's dict or a namespace dict) or a piece of PyTorch's
        dispatch machinery (for getattr or attrgetter)."""
        name = node.value if isinstance(node, ast.Constant) else self.r.fold(node, scope)
        if isinstance(name, str) and name in BUFFER_PROTOCOL:
            self._buffer_protocol(node, name)
        parts = name.split(".") if isinstance(name, str) else []  # attrgetter("_C._DisableTorchDispatch")
        if parts and all(p.isidentifier() for p in parts) and any(DISPATCH_MACHINERY.search(p) for p in parts):
            self._dispatch_machinery(node, name)

    def _dispatch_machinery(self, node: ast.AST, name: str) -> None:
        self.report.add("torch_compute", node, f"`{name}` is PyTorch's dispatch machinery: with it, operators run "
                                               "where the op recorder does not see them")

    def _buffer_protocol(self, node: ast.AST, name: str) -> None:
        self.report.add("torch_compute", node, f"`{name}` offers memory to NumPy or PyTorch through a buffer "
                                               "protocol: at any address, a tensor's included, computing there on "
                                               "the host")

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
            elif qual == "builtins.type":
                self.report.add("introspection", node, f"{label}: a metaclass, whose methods run when classes "
                                                       "are made or used")
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

    def _on_AnnAssign(self, node: ast.AnnAssign, scope: Scope) -> None:
        self._check_target(node.target, scope)
        self._check_annotation(node.annotation)

    def _check_annotation(self, annotation: ast.expr | None) -> None:
        """Annotations written as strings are evaluated later (typing.get_type_hints, torch.library's schema
        inference): they may name types, never run code."""
        stack = [annotation] if annotation is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and not _type_expression(node.value):
                self.report.add("eval_exec", node, f"the annotation {short(node)} is code in a string, which "
                                                   "runs when annotations are evaluated")
            elif isinstance(node, ast.Subscript) and _literal_type(node.value):
                stack.append(node.value)  # Literal["a b"]: values, never evaluated
            else:
                stack.extend(ast.iter_child_nodes(node))

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
            elif self._foreign_class(target.value, scope):
                self.report.add("monkey_patch", target, f"assigning `{short(target)}` changes the class of an "
                                                        "object the candidate did not create")
        elif isinstance(target, ast.Subscript):
            owner = self._external(target.value, scope)
            if owner is not None:
                self.report.add("monkey_patch", target, f"writing into `{short(target.value)}` changes {owner}")

    # --- raising ------------------------------------------------------------------------------
    def _on_Raise(self, node: ast.Raise, scope: Scope) -> None:
        if node.exc is not None:
            self._check_raised(node.exc, node, scope)

    def _check_raised(self, expr: ast.expr, node: ast.AST, scope: Scope) -> None:
        """What is raised (or thrown into a generator) must be of a class that can be told: SystemExit and
        the like end the process or the call, and a caught GeneratorExit could be kept and raised later."""
        vals = self.r.resolve(expr, scope)
        if not vals and isinstance(expr, ast.Call):
            vals = frozenset(v for v in self.r.resolve(expr.func, scope) if v.kind in ("ref", "class"))
        for val in vals:
            if val.kind == "ref" and ends_process(val.name):
                self.report.add("process_exit", node, f"`{short(node)}` raises {_shown(val.name)}, which ends the "
                                                      "process or the call")
        if not vals and not self._handler_name(expr):
            self.report.add("process_exit", node, f"`{short(node)}` raises a value whose class cannot be told "
                                                  "(it could be SystemExit or a kept GeneratorExit)", "suspect")

    def _handler_name(self, expr: ast.expr) -> bool:
        """`raise e` inside `except SomeError as e:` (whose type is checked where it is written)."""
        if not isinstance(expr, ast.Name):
            return False
        parent = self.info.parents.get(expr)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                              ast.ClassDef, ast.Module)):
            if isinstance(parent, ast.ExceptHandler) and parent.name == expr.id:
                return True
            parent = self.info.parents.get(parent)
        return False

    # --- calls --------------------------------------------------------------------------------
    def _on_Call(self, node: ast.Call, scope: Scope) -> None:
        access = self.r.attr_access(node, scope)
        if access is not None:
            self._check_attr_name(access[1], node, access[0], scope)
            self._check_chain(node, scope, " (name built from strings)" if access[2] else "")
        self._check_folded(node, scope)  # "".join(...), "...".format(...), chr(...)
        funcs = set(self._refs(node.func, scope))
        self._check_getter_names(node, funcs, scope)
        self._check_dynamic_attr(node, funcs, scope)
        self._check_setattr(node, funcs, scope)
        self._check_hooks(node)
        self._check_library(node, funcs, scope)
        self._check_stream(node, funcs)
        self._check_dynamic_import(node, scope)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("throw", "athrow") and node.args:
            self._check_raised(node.args[0], node, scope)
        if "builtins.type" in funcs and len(node.args) == 3:
            self.report.add("introspection", node, f"`{short(node)}` creates a class at run time")
        if "builtins.super" in funcs and node.args and not self._own_class(node.args[0], scope):
            self.report.add("introspection", node, f"`{short(node)}` looks methods up past a class that is not the "
                                                   "candidate's own (super(torch.Tensor, x) reaches torch's C base "
                                                   "methods, which read values uncounted)")
        self._check_foreign_class(node, scope)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
            owner = self._external(func.value, scope)
            if owner is not None:
                self.report.add("monkey_patch", node, f"`{short(func)}(...)` changes {owner}")
        if funcs & _OPERATOR_WRITES and node.args:  # operator.setitem(lib_obj, k, v): red team round 10
            owner = self._external(node.args[0], scope)
            if owner is not None:
                self.report.add("monkey_patch", node, f"`{short(node.func)}(...)` changes {owner}")

    def _check_getter_names(self, node: ast.Call, funcs: set[str], scope: Scope) -> None:
        """attrgetter("a.b") and methodcaller("m", ...) read their names wherever the getter is applied later
        (stored, mapped, handed to a dataclass's default_factory: red-team review 5), so the names are checked
        where the getter is made, against an object that is not known."""
        if funcs & {"functools.update_wrapper", "functools.wraps"}:
            self._check_wrapper_names(node, funcs, scope)
            return
        if not funcs & {"operator.attrgetter", "operator.methodcaller"}:
            return
        args = node.args if "operator.attrgetter" in funcs else node.args[:1]
        self._check_names_read(node, args, scope)

    def _check_wrapper_names(self, node: ast.Call, funcs: set[str], scope: Scope) -> None:
        """update_wrapper / wraps read every name in `assigned` and `updated` from the wrapped object (red-team
        review 6 read a generator's gi_frame that way): the names must be written out, and each is checked."""
        first = 2 if "functools.update_wrapper" in funcs else 1
        given = [*node.args[first:first + 2], *(k.value for k in node.keywords if k.arg in ("assigned", "updated"))]
        for names in given:
            if set(self._refs(names, scope)) & {"functools.WRAPPER_ASSIGNMENTS", "functools.WRAPPER_UPDATES"}:
                continue  # the defaults, written out
            if isinstance(names, ast.Tuple | ast.List):
                self._check_names_read(node, names.elts, scope)
            else:
                self.report.add("dynamic_attr", node, f"`{short(node)}` reads attributes named by a value the "
                                                      "candidate builds", "suspect")

    def _check_names_read(self, node: ast.Call, args: list[ast.expr], scope: Scope) -> None:
        for arg in args:
            name = self.r.fold(arg, scope)
            if name is None:
                self.report.add("dynamic_attr", node, f"`{short(node)}` reads an attribute whose name is computed "
                                                      "at run time", "suspect")
            else:
                self._check_attr_name(name, node, node, scope)

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
        elif self._foreign_class(target, scope):
            self.report.add("monkey_patch", node, f"`{short(node)}` changes the class of an object the candidate "
                                                  "did not create")
        elif folded in PATCH_ATTRS:
            self.report.add("monkey_patch", node, f"`{short(node)}` rewires an existing object")

    def _check_hooks(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if _HOOK.match(name):
            self.report.add("monkey_patch", node, f"`{short(func)}(...)` registers a hook, code that runs "
                                                  "outside forward")

    def _own_class(self, expr: ast.expr, scope: Scope) -> bool:
        """Whether `expr` names a class defined in the candidate's file (super(Own, self) is fine)."""
        vals = self.r.resolve(expr, scope)
        return bool(vals) and all(v.kind == "class" for v in vals)

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
        homes = {canonical(q).home for q in funcs if "()" not in q} - {None}
        for qual in (funcs | homes) & STREAM_CALLS:
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


def _format_walks(template: str, depth: int = 0) -> list[str]:
    """The fields of a str.format template that walk attributes or items ("0.environ", "x[k]"), nested format
    specs included; an unparsable template counts as one."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError:
        return [template[:40]]
    walks = []
    for _, field, spec, _ in parts:
        if field and ("." in field or "[" in field):
            walks.append(field)
        if spec and depth < 3:
            walks += _format_walks(spec, depth + 1)
    return walks
