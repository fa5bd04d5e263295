"""Checks of the forward path: PyTorch compute, and try/except (or suppress) around the kernel path."""

from __future__ import annotations

import ast

from kernelagent.verifier.policy.findings import Reporter, short
from kernelagent.verifier.policy.graph import ROOT_METHODS, CallGraph
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import FuncInfo, ModuleInfo, Scope, header, walk_local
from kernelagent.verifier.policy.tables import (
    BUILTIN_TENSOR_COMPUTE,
    HOST_BYTES_BUILTINS,
    NN_MODULE_OK_METHODS,
    OP_WRAPPERS,
    OPERATOR_ALWAYS,
    STREAM_CALLS,
    TENSOR_ALLOWED_METHODS,
    TENSOR_COMPUTE_METHODS,
    TENSOR_HOST_BYTES_METHODS,
    TORCH_ALLOWED_CALLS,
    TORCH_CONSTANTS,
    TORCH_NAMESPACES,
)
from kernelagent.verifier.policy.tensors import TensorFacts, is_nn_module_instance

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_OPERATOR_NEUTRAL = frozenset({"getitem", "itemgetter", "attrgetter", "methodcaller", "index", "length_hint"})
# Methods of lists/dicts/sets that tensors do not have: a "tensor" receiving them is a container of tensors.
_CONTAINER_METHODS = frozenset({
    "append", "extend", "insert", "pop", "popitem", "setdefault", "get", "update", "keys", "values", "items",
    "index", "count", "remove", "clear", "appendleft", "discard", "copy",
})
_EINOPS_COMPUTE = frozenset({"reduce", "einsum"})
# Callables that apply the function they are given to the items of what they are given.
_APPLIERS = frozenset({"functools.reduce", "builtins.map", "itertools.accumulate", "itertools.starmap"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_HOST_READS = frozenset({"item", "tolist", "numpy", "__float__", "__int__", "__index__"})
# read as a value (not called at once), these hand over a way to read memory on the host, whatever they are
# read from; `item`, `tolist` and `numpy` only when read from a tensor (other objects have such names too)
_VALUE_HOST_READS = (TENSOR_HOST_BYTES_METHODS - {"__cuda_array_interface__"}) | {"__float__", "__int__",
                                                                                  "__index__"}
_LITERALS = (ast.Constant, ast.List, ast.Dict, ast.Set, ast.Tuple, ast.JoinedStr, ast.ListComp, ast.DictComp)
# A tensor turned into text: torch's printer reads every value on the host (with PyTorch's dispatch modes off,
# where the op recorder sees nothing), and the text can be parsed back into numbers (red team, 2026-12-03:
# softmax in `math` from str(x[i, j].view(torch.int32)), accepted). Shapes, dtypes and sizes are not tensors.
_TEXT_CALLS = frozenset({
    "builtins.str", "builtins.repr", "builtins.format", "builtins.ascii", "builtins.print",
    "builtins.object.__str__", "builtins.object.__format__", "builtins.str.format", "builtins.str.format_map",
    "builtins.str.__mod__", "builtins.bytes.__mod__", "builtins.bytearray.__mod__",
    "torch.Tensor.__str__", "torch.Tensor.__repr__", "torch.Tensor.__format__",
})
_TEXT_DUNDERS = frozenset({"__str__", "__repr__", "__format__"})  # on a tensor
_TEXT_METHODS = frozenset({"format", "format_map", "__mod__"})  # of a format string, given tensors
_TYPE_TESTS = frozenset({"builtins.isinstance", "builtins.issubclass"})  # `isinstance(x, str)` converts nothing


def torch_call_allowed(qual: str) -> bool:
    """Whether calling `qual` (a torch name) is allocation, a view, a move, metadata or a launch helper."""
    if qual in STREAM_CALLS:
        return True  # reported under stream_creation
    if "()" in qual:
        return _call_on_result_allowed(qual)
    if qual in TORCH_ALLOWED_CALLS:
        return True
    parts = qual.split(".")
    if qual.startswith("torch.Tensor.") and len(parts) == 3:
        return parts[2] in TENSOR_ALLOWED_METHODS
    if qual.startswith("torch.nn.Module.") and len(parts) == 4:
        return parts[3] in NN_MODULE_OK_METHODS
    return False


def _call_on_result_allowed(qual: str) -> bool:
    base, _, rest = qual.partition("()")
    method = rest.lstrip(".").split(".")[0].split("(")[0]
    if base in OP_WRAPPERS:  # the candidate's own operator: its implementation is checked where it is defined
        return True
    if base in TORCH_ALLOWED_CALLS:
        return method in TENSOR_ALLOWED_METHODS if TORCH_ALLOWED_CALLS[base] else True
    if is_nn_module_instance(qual):
        return bool(method) and method in NN_MODULE_OK_METHODS
    return bool(method)  # methods of other torch objects (events, ...); calling the object itself is not


def torch_value_is_compute(qual: str) -> bool:
    """Whether mentioning `qual` (without calling it) hands a PyTorch compute function around."""
    if not qual.startswith("torch.") or "()" in qual or qual in TORCH_NAMESPACES:
        return False
    last = qual.rsplit(".", 1)[-1]
    if last in TORCH_CONSTANTS or last[:1].isupper() or last.startswith("__"):
        return False
    if qual.startswith("torch.ops.") and qual.count(".") == 2:
        return False
    return not torch_call_allowed(qual)


class ForwardChecker:
    """Reports PyTorch compute and swallowed kernel failures in functions that run during forward."""

    def __init__(
        self, info: ModuleInfo, resolver: Resolver, graph: CallGraph, tensors: TensorFacts, report: Reporter,
    ) -> None:
        self.info, self.r, self.graph, self.tensors, self.report = info, resolver, graph, tensors, report
        self._loops = 0  # loops and comprehensions around the node being visited
        # Triton calls these with a launch's real arguments: there, any value may be a tensor
        self._hook_code = graph.reach(graph.launch_hooks)
        self._in_hook = False

    def run(self) -> None:
        for func in self.graph.forward_functions():
            body = [func.node.body] if isinstance(func.node, ast.Lambda) else func.node.body
            self._in_hook = func.node in self._hook_code
            for stmt in body:
                self._visit(stmt, func.scope)
        self._in_hook = False
        for expr, scope in self.graph.deferred_exprs:  # kept off the path: they run when forward advances them
            self._visit(expr, scope)
        for func in self.info.funcs.values():
            if func.dsl:
                self._check_device_code(func)
        self._check_root_attributes()

    def _check_root_attributes(self) -> None:
        """`forward = torch.softmax` (or set later on the class): the entry point itself is PyTorch."""
        for cls in self.graph.models:
            for name in ROOT_METHODS:
                for val in self.r.class_attr(cls, name):
                    if val.kind == "ref" and val.name.startswith("torch") and not torch_call_allowed(val.name):
                        self._flag(cls, f"`{cls.name}.{name}` is {val.name.replace('()', '(...)')}, which "
                                        "computes in PyTorch")

    def _flag(self, node: ast.AST, message: str) -> None:
        self.report.add("torch_compute", node, message)

    # --- traversal ----------------------------------------------------------------------------
    def _visit(self, node: ast.AST, scope: Scope) -> None:
        if isinstance(node, _NESTED):  # what runs at the statement: a class body, decorators, defaults, bases
            for part in header(node):
                self._visit(part, self.info.scope_at(part, scope))
            return
        if isinstance(node, _LOOPS):
            self._loops += 1
            try:
                self._visit_children(node, scope)
            finally:
                self._loops -= 1
            return
        self._visit_children(node, scope)

    def _visit_children(self, node: ast.AST, scope: Scope) -> None:
        if isinstance(node, ast.Call):
            self._check_call(node, scope)
            for child in self._call_children(node):
                self._visit(child, scope)
            return
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            if self._check_value(node, scope):
                return
        self._check_operators(node, scope)
        for read in self.info.pattern_reads.get(node, []) if isinstance(node, ast.Match) else []:
            self._visit(read, scope)  # `case C(attr=m)` reads the subject's attribute
        if isinstance(node, (ast.Try, ast.TryStar)):
            self._check_try(node, scope)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            self._check_suppress(node, scope)
        for child in ast.iter_child_nodes(node):
            self._visit(child, scope)

    @staticmethod
    def _call_children(call: ast.Call) -> list[ast.AST]:
        func = call.func
        head: list[ast.AST] = [] if isinstance(func, ast.Name) else [func.value] if isinstance(
            func, ast.Attribute) else [func]
        return [*head, *call.args, *call.keywords]

    # --- values and calls ---------------------------------------------------------------------
    def _check_value(self, node: ast.Name | ast.Attribute, scope: Scope) -> bool:
        refs = [v.name for v in self.r.resolve(node, scope) if v.kind == "ref"]
        for qual in refs:
            if torch_value_is_compute(qual):
                self._flag(node, f"`{short(node)}`{_also(node, qual)} hands a PyTorch function around in the "
                                 "forward path, where it would compute in PyTorch")
        if isinstance(node, ast.Attribute) and node.attr in TENSOR_COMPUTE_METHODS:
            if self.tensors.is_tensor(node.value, scope):
                self._flag(node, f"`{short(node)}` is a tensor method that computes in PyTorch")
        host_read = isinstance(node, ast.Attribute) and (node.attr in _VALUE_HOST_READS or (
            node.attr in _HOST_READS | _TEXT_DUNDERS and self.tensors.is_tensor(node.value, scope)))
        if host_read and not isinstance(node.value, _LITERALS):
            self._flag(node, f"`{short(node)}` takes a method that reads values on the host as a value in the forward "
                             "path, where calling it later is host compute")
        return bool(refs)

    def _check_call(self, call: ast.Call, scope: Scope) -> None:
        access = self.r.attr_access(call.func, scope)
        built = " (attribute name built from strings)" if access and access[2] else ""
        if self._converts_to_text(call, access, scope):
            self._flag(call, f"`{short(call.func)}(...)`{built} turns a tensor into text, which reads its values on "
                             "the host in the forward path (host compute); format shapes and dtypes, not tensors")
            return
        if access is not None and self._in_hook and access[1] in _HOST_READS | {"__array__"} and not isinstance(
                access[0], _LITERALS):
            self._flag(call, f"`{short(call.func)}(...)` reads values on the host in a function Triton calls with "
                             "the launch's tensors")
            return
        if access is not None and self._loops and access[1] in _HOST_READS and not isinstance(access[0], _LITERALS):
            self._flag(call, f"`{short(call.func)}(...)` in a loop reads tensor values one by one, computing on the "
                             "host in the forward path")
            return
        if access is not None and access[1] in TENSOR_HOST_BYTES_METHODS and not isinstance(access[0], _LITERALS):
            self._flag(call, f"`{short(call.func)}(...)` hands a tensor's raw memory to Python in the forward path, "
                             "where computing from it is host compute")
            return
        if access is not None and self.tensors.is_tensor(access[0], scope):
            if access[1] not in TENSOR_ALLOWED_METHODS and access[1] not in _CONTAINER_METHODS:
                self._flag(call, f"`{short(call.func)}(...)` calls the tensor method .{access[1]}(){built}, "
                                 "which computes in PyTorch in the forward path")
            return
        vals = self.r.resolve(call.func, scope)
        for val in vals:
            if val.kind == "ref":
                self._check_ref_call(val.name, call, scope, built)
        opaque = all(v.kind == "ref" and v.name.startswith("builtins.") for v in vals)  # or nothing known
        if opaque and access is not None and access[1] in TENSOR_COMPUTE_METHODS:
            if not isinstance(access[0], _LITERALS):
                self._flag(call, f"`{short(call.func)}(...)` calls .{access[1]}(){built}, a PyTorch tensor "
                                 "operation, in the forward path")

    def _converts_to_text(self, call: ast.Call, access: tuple[ast.expr, str, bool] | None, scope: Scope) -> bool:
        """str/repr/format/ascii/print of a tensor, x.__str__()/__repr__()/__format__(), "...".format(x),
        format_map and __mod__ given tensors, or a converter handed to a call with tensors (map(str, x))."""
        if access is not None and access[1] in _TEXT_DUNDERS and self.tensors.is_tensor(access[0], scope):
            return True
        args = [*call.args, *[k.value for k in call.keywords]]
        if not any(self._holds_tensors(a, scope, 2) for a in args):
            return False
        if access is not None and access[1] in _TEXT_METHODS:
            return True
        quals = {v.name for v in self.r.resolve(call.func, scope) if v.kind == "ref"}
        if quals & _TEXT_CALLS:
            return True
        return not quals & _TYPE_TESTS and any(self._is_text_converter(a, scope) for a in args)

    def _is_text_converter(self, node: ast.AST, scope: Scope) -> bool:
        """A function that turns what it is given into text, handed around as a value."""
        if isinstance(node, ast.Attribute) and node.attr in _TEXT_DUNDERS | _TEXT_METHODS:
            return True
        return any(v.kind == "ref" and v.name in _TEXT_CALLS for v in self.r.resolve(node, scope))

    def _check_ref_call(self, qual: str, call: ast.Call, scope: Scope, built: str) -> None:
        root, _, rest = qual.partition(".")
        label = f"`{short(call.func)}(...)`{_also(call.func, qual)}{built}"
        if root == "torch" and not torch_call_allowed(qual):
            self._flag(call, f"{label} runs PyTorch code in the forward path")
        elif root == "numpy" and self._tensor_args(call, scope):
            self._flag(call, f"{label} computes on tensors with NumPy in the forward path")
        elif root == "numpy" and self._in_hook and any(not isinstance(a, _LITERALS) for a in call.args):
            self._flag(call, f"{label} computes with NumPy in a function Triton calls with the launch's tensors "
                             "(at every launch, outside the kernel)")
        elif root in ("math", "cmath", "statistics") and self._tensor_args(call, scope):
            self._flag(call, f"{label} computes on tensor values on the host in the forward path")
        elif root == "builtins" and rest in HOST_BYTES_BUILTINS and any(
                not isinstance(a, _LITERALS) for a in call.args):
            self._flag(call, f"{label} reads memory as host bytes in the forward path, where computing from them "
                             "is host compute")
        elif root == "builtins" and rest in BUILTIN_TENSOR_COMPUTE and self._tensor_args(call, scope):
            self._flag(call, f"{label} on tensors computes in PyTorch in the forward path")
        elif root == "operator" and rest not in _OPERATOR_NEUTRAL and (
            rest in OPERATOR_ALWAYS or self._tensor_args(call, scope)
        ):
            self._flag(call, f"{label} on tensors computes in PyTorch in the forward path")
        elif root == "einops" and rest in _EINOPS_COMPUTE and self._tensor_args(call, scope):
            self._flag(call, f"{label} computes on tensors in PyTorch in the forward path")
        elif qual in _APPLIERS and self._applies_arithmetic(qual, call, scope):
            self._flag(call, f"{label} applies an arithmetic operator to tensors, which computes in PyTorch in "
                             "the forward path")

    def _applies_arithmetic(self, qual: str, call: ast.Call, scope: Scope) -> bool:
        """reduce / map / accumulate / starmap handed one of `operator`'s arithmetic functions (accumulate: its
        default, addition) and tensors, or literal lists or tuples holding them, to apply it to."""
        at = 1 if qual == "itertools.accumulate" else 0
        func = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "func"), None)
        data = [a for i, a in enumerate(call.args) if i != at]
        if func is None:
            arithmetic = qual == "itertools.accumulate"
        else:
            arithmetic = any(v.kind == "ref" and v.name.startswith("operator.") and
                             v.name.partition(".")[2] not in _OPERATOR_NEUTRAL for v in self.r.resolve(func, scope))
        return arithmetic and any(self._holds_tensors(a, scope, 2) for a in data)

    def _holds_tensors(self, node: ast.AST, scope: Scope, depth: int) -> bool:
        if isinstance(node, ast.Starred):
            node = node.value
        if self.tensors.is_tensor(node, scope):
            return True
        if depth and isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return any(self._holds_tensors(e, scope, depth - 1) for e in node.elts)
        if depth and isinstance(node, ast.Dict):
            return any(self._holds_tensors(v, scope, depth - 1) for v in node.values)
        return False

    def _tensor_args(self, call: ast.Call, scope: Scope) -> bool:
        values = [*call.args, *[k.value for k in call.keywords]]
        return any(self.tensors.is_tensor(v, scope) for v in values)

    # --- operators ----------------------------------------------------------------------------
    def _check_operators(self, node: ast.AST, scope: Scope) -> None:
        is_tensor = self.tensors.is_tensor
        if isinstance(node, ast.FormattedValue) and self._holds_tensors(node.value, scope, 2):
            self._flag(node, f"the f-string field `{{{short(node.value)}}}` turns a tensor into text, which reads its "
                             "values on the host in the forward path (host compute)")
        elif isinstance(node, ast.BinOp) and self._percent_formats_tensors(node, scope):
            self._flag(node, f"`{short(node)}` formats a tensor into text with %, which reads its values on the "
                             "host in the forward path (host compute)")
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                self._flag(node, f"`{short(node)}` multiplies matrices in PyTorch in the forward path")
            elif _sequence_op(node):
                pass  # (t,) + (None,) * 7 builds a tuple
            elif is_tensor(node.left, scope) or is_tensor(node.right, scope):
                self._flag(node, f"tensor arithmetic `{short(node)}` runs in PyTorch in the forward path")
        elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
            if is_tensor(node.operand, scope):
                self._flag(node, f"tensor arithmetic `{short(node)}` runs in PyTorch in the forward path")
        elif isinstance(node, ast.Compare) and is_tensor(node, scope):
            self._flag(node, f"tensor comparison `{short(node)}` runs in PyTorch in the forward path")
        elif isinstance(node, ast.AugAssign) and (is_tensor(node.target, scope) or is_tensor(node.value, scope)):
            self._flag(node, f"in-place tensor arithmetic `{short(node)}` runs in PyTorch in the forward path")
        elif isinstance(node, ast.Subscript) and is_tensor(node.value, scope) and self._tensor_index(node, scope):
            self._flag(node, f"`{short(node)}` indexes a tensor with a tensor (a gather/scatter in PyTorch)")

    def _percent_formats_tensors(self, node: ast.BinOp, scope: Scope) -> bool:
        """`fmt % x`, `fmt % (x, y)`, `fmt % {"k": x}`: a format string (or a tuple or dict, which only string
        formatting takes on the right of %) given tensors."""
        if not isinstance(node.op, ast.Mod) or not self._holds_tensors(node.right, scope, 2):
            return False
        if isinstance(node.right, (ast.Tuple, ast.Dict)):
            return True
        return isinstance(node.left, ast.JoinedStr) or self.r.fold(node.left, scope) is not None

    def _tensor_index(self, node: ast.Subscript, scope: Scope) -> bool:
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        return any(not isinstance(p, ast.Slice) and self.tensors.is_tensor(p, scope) for p in parts)

    # --- try / suppress -----------------------------------------------------------------------
    def _check_try(self, node: ast.Try | ast.TryStar, scope: Scope) -> None:
        if not node.handlers or all(_reraises(h) for h in node.handlers):
            return
        if self._reaches_kernel(node.body, scope):
            self.report.add("try_around_kernel", node, "a try/except wraps the kernel path; a failing kernel "
                                                       "would be hidden or replaced by other code")

    def _check_suppress(self, node: ast.With | ast.AsyncWith, scope: Scope) -> None:
        for item in node.items:
            ctx = item.context_expr
            target = ctx.func if isinstance(ctx, ast.Call) else ctx
            names = {v.name for v in self.r.resolve(target, scope) if v.kind == "ref"}
            if "contextlib.suppress" in names and self._reaches_kernel(node.body, scope):
                self.report.add("try_around_kernel", node, "contextlib.suppress wraps the kernel path; a failing "
                                                           "kernel would be hidden")

    def _reaches_kernel(self, body: list[ast.stmt], scope: Scope) -> bool:
        for stmt in body:
            for node in walk_local(stmt):
                if isinstance(node, ast.Call) and self._call_reaches_kernel(node, self.info.scope_at(node, scope)):
                    return True
        return False

    def _call_reaches_kernel(self, call: ast.Call, scope: Scope) -> bool:
        if self.graph.is_launch(call, scope):
            return True
        vals = self.r.resolve(call.func, scope)
        kernel = self.graph.kernel_funcs
        if any(v.kind == "func" and v.node in kernel for v in vals):
            return True
        if self.graph.called_objects(call, scope) & kernel:
            return True
        if isinstance(call.func, ast.Attribute) and not self.r.resolve(call.func.value, scope):
            if self.graph.methods_named(call.func.attr) & kernel:
                return True
        return not vals and isinstance(call.func, ast.Name)  # a callable passed in: could be anything

    # --- device code --------------------------------------------------------------------------
    def _check_device_code(self, func: FuncInfo) -> None:
        """Kernel code is traced as Python: PyTorch reached from it would run on the host each time."""
        triton_body = self._is_triton(func)
        for node in self.info.body_nodes(func.node):
            if triton_body and _interpreter_internal(node):
                self._flag(node, f"`{short(node)}` reaches the CPU interpreter's own values (a tensor's `handle` "
                                 "holds its NumPy array there): the GPU compiler has no such attribute")
                continue
            if not isinstance(node, ast.Call):
                continue
            scope = self.info.scope_at(node, func.scope)
            access = self.r.attr_access(node.func, scope)
            if access is not None and access[1] not in TENSOR_ALLOWED_METHODS:
                if self.tensors.is_tensor(access[0], scope):
                    self._flag(node, f"`{short(node.func)}(...)` computes on a torch tensor inside kernel code")
                    continue
            for val in self.r.resolve(node.func, scope):
                if val.kind == "ref" and val.name.startswith("torch.") and not torch_call_allowed(val.name):
                    self._flag(node, f"`{short(node.func)}(...)` calls PyTorch inside kernel code; it runs in "
                                     "PyTorch each time the kernel is traced or called")
                elif triton_body and val.kind == "ref" and val.name.startswith("numpy"):
                    self._flag(node, f"`{short(node.func)}(...)` calls NumPy inside a Triton kernel, which only the "
                                     "CPU interpreter can run")
                elif triton_body and val.kind == "func" and val.node in self.info.funcs and not (
                        self.info.funcs[val.node].dsl) and not _on_constexprs(node, func.node):
                    self._flag(node, f"`{short(node.func)}(...)` calls a plain Python function inside a Triton "
                                     "kernel: only @triton.jit functions compile for the GPU (the CPU interpreter "
                                     "would run it as Python)")

    def _is_triton(self, func: FuncInfo) -> bool:
        """Decorated by triton (jit, autotune, heuristics): its body must be Triton code; CuTe DSL bodies run
        Python at trace time by design."""
        return any(v.kind == "ref" and v.name.split(".")[0] == "triton"
                   for _, vals in self.graph.decorator_vals(func) for v in vals)


_INTERPRETER_ATTRS = frozenset({"handle"})


def _interpreter_internal(node: ast.AST) -> bool:
    """`x.handle` (or `getattr(x, "handle")`) in Triton code: under the interpreter, the NumPy array of a
    block; compiled, an IR value no kernel reads."""
    if isinstance(node, ast.Attribute):
        return node.attr in _INTERPRETER_ATTRS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr"):
        return len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in (
            _INTERPRETER_ATTRS)
    return False


def _on_constexprs(call: ast.Call, kernel: ast.AST) -> bool:
    """A helper called with compile-time values only (the kernel's `tl.constexpr` parameters, literals and
    arithmetic on them): Triton runs it while compiling, on the GPU as on CPU."""
    args = getattr(kernel, "args", None)
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs] if args is not None else []
    constexprs = {p.arg for p in params if p.annotation is not None and "constexpr" in ast.unparse(p.annotation)}
    allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load, ast.keyword)
    for arg in [*call.args, *call.keywords]:
        for n in ast.walk(arg):
            if isinstance(n, ast.Name) and n.id in constexprs:
                continue
            if not isinstance(n, allowed):
                return False
    return True


def _also(node: ast.AST, qual: str) -> str:
    text = short(node)
    shown = qual.replace("()", "(...)")
    return "" if text == qual else f" (that is {shown})"


def _sequence_op(node: ast.BinOp) -> bool:
    """Concatenating or repeating tuple/list displays, not arithmetic on their elements."""
    def display(expr: ast.expr) -> bool:
        return isinstance(expr, ast.Tuple | ast.List) or isinstance(expr, ast.BinOp) and _sequence_op(expr)
    return isinstance(node.op, ast.Add | ast.Mult) and (display(node.left) or display(node.right))


def _reraises(handler: ast.ExceptHandler) -> bool:
    return bool(handler.body) and all(isinstance(stmt, ast.Raise) for stmt in handler.body)
