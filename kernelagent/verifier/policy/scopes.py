"""The candidate module as the policy sees it: scopes, name bindings, functions and classes.

One pass over the AST records, for every scope, which expressions each name may be bound to
(flow-insensitive: every assignment counts), so later passes can ask what a name stands for.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

# A binding is ("val", Val) | ("expr", expr, Scope) | ("param", FuncInfo, name).
Binding = tuple[Any, ...]

_CONTAINER_ADDERS = frozenset({"append", "extend", "add", "insert", "setdefault", "update", "appendleft"})
_ATTR_REGISTRARS = frozenset({"register_buffer", "register_parameter", "__setattr__"})


@dataclass(frozen=True)
class Val:
    """What an expression may stand for: an outside name (`ref`) or one of the candidate's objects."""

    kind: str  # ref | func | class | inst | self | super
    name: str = ""  # qualified name of a ref; "q()" marks the result of calling q
    node: Any = None  # the FunctionDef/Lambda/ClassDef behind func, class, inst, self, super


@dataclass(eq=False)
class Scope:
    """A module, function, lambda or class body, with the bindings made in it."""

    node: ast.AST
    kind: str  # module | function | lambda | class
    parent: Scope | None
    cls: ast.ClassDef | None = None  # the class a method belongs to
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    global_names: set[str] = field(default_factory=set)
    nonlocal_names: set[str] = field(default_factory=set)

    def bind(self, name: str, item: Binding) -> None:
        self.bindings.setdefault(name, []).append(item)


@dataclass(eq=False)
class FuncInfo:
    """A function, method or lambda defined in the candidate."""

    node: ast.AST
    scope: Scope
    name: str
    cls: ast.ClassDef | None
    kind: str  # function | method | static | classmethod | lambda
    params: list[str]
    vararg: str | None
    kwonly: list[str]
    dsl: bool = False  # decorated by triton or cutlass: device code, launched rather than run


@dataclass(eq=False)
class ClassInfo:
    """A class defined in the candidate, with attributes set on its instances or on it from outside."""

    node: ast.ClassDef
    scope: Scope
    attrs: dict[str, list[Binding]] = field(default_factory=dict)


@dataclass(eq=False)
class ModuleInfo:
    """Everything the builder recorded about one candidate source."""

    tree: ast.Module
    scope: Scope
    funcs: dict[ast.AST, FuncInfo] = field(default_factory=dict)
    classes: dict[ast.AST, ClassInfo] = field(default_factory=dict)
    scopes: dict[ast.AST, Scope] = field(default_factory=dict)
    attr_assigns: list[tuple[ast.expr, str, ast.expr, Scope]] = field(default_factory=list)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    nodes: list[tuple[ast.AST, Scope]] = field(default_factory=list)  # every node, with the scope it runs in
    calls: list[tuple[ast.Call, Scope]] = field(default_factory=list)
    container_adds: list[tuple[ast.expr, ast.expr, Scope]] = field(default_factory=list)
    # `case C(attr=...)` reads `subject.attr`: the reads, made into attribute nodes, per match statement
    pattern_reads: dict[ast.Match, list[ast.Attribute]] = field(default_factory=dict)
    _body: dict[ast.AST, list[ast.AST]] = field(default_factory=dict)
    _scope_of: dict[int, Scope] = field(default_factory=dict)

    def body_nodes(self, func: ast.AST) -> list[ast.AST]:
        """Nodes that run when a function runs (see `own_nodes`)."""
        if func not in self._body:
            self._body[func] = own_nodes(func)
        return self._body[func]

    def scope_at(self, node: ast.AST, default: Scope) -> Scope:
        """The scope `node` runs in: a class body's own scope for its statements, else `default`."""
        if not self._scope_of:
            self._scope_of = {id(n): s for n, s in self.nodes}
        return self._scope_of.get(id(node), default)


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def header(node: ast.AST) -> list[ast.AST]:
    """What runs when a nested `def`, `lambda` or `class` statement runs: decorators, defaults, annotations,
    bases and keywords, and a class's body (its methods' bodies run later, when they are called)."""
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords, *node.body]
    args: ast.arguments = node.args  # type: ignore[attr-defined]
    out: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
        out += [*node.decorator_list, *(a.annotation for a in params if a.annotation), *filter(None, [node.returns])]
    return out


def walk_local(node: ast.AST) -> list[ast.AST]:
    """`node` and what runs with it: not the bodies of nested functions and lambdas (only their `header`)."""
    out: list[ast.AST] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(header(current) if isinstance(current, _NESTED) else ast.iter_child_nodes(current))
    return out


def own_nodes(func: ast.AST) -> list[ast.AST]:
    """Nodes that run when a function runs (a lambda's expression): its body, with the headers and class
    bodies of what it defines, not the bodies of nested functions."""
    if isinstance(func, ast.Lambda):
        return walk_local(func.body)
    return [n for stmt in getattr(func, "body", []) for n in walk_local(stmt)]


_CONTAINER_TYPES = frozenset({"list", "dict", "set", "tuple", "defaultdict", "deque", "OrderedDict", "Counter"})


def is_container(expr: ast.AST) -> bool:
    """A list/dict/set display, comprehension or constructor call."""
    if isinstance(expr, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(expr, ast.Call):
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in _CONTAINER_TYPES
    return False


def _is_main_guard(test: ast.expr) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def literal_str(node: ast.AST) -> str | None:
    """A string written as a literal (or literals joined by +); None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = literal_str(node.left), literal_str(node.right)
        return None if left is None or right is None else left + right
    return None


def _method_kind(node: ast.AST, cls: ast.ClassDef | None) -> str:
    if isinstance(node, ast.Lambda):
        return "lambda"
    if cls is None:
        return "function"
    names = set()
    for dec in node.decorator_list:  # type: ignore[attr-defined]
        if isinstance(dec, ast.Name):
            names.add(dec.id)
        elif isinstance(dec, ast.Attribute):
            names.add(dec.attr)
    if "staticmethod" in names:
        return "static"
    return "classmethod" if "classmethod" in names else "method"


class _Builder(ast.NodeVisitor):
    """Walks the module once, creating scopes and recording bindings."""

    def __init__(self, tree: ast.Module) -> None:
        self.scope = Scope(tree, "module", None)
        self.info = ModuleInfo(tree=tree, scope=self.scope)
        self.info.scopes[tree] = self.scope
        self._path: list[ast.AST] = []
        # `if __name__ == "__main__":` blocks are skipped unless the file rebinds __name__.
        self.skip_main = not any(
            isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load) for n in ast.walk(tree)
        )

    def visit(self, node: ast.AST) -> None:
        if self._path:
            self.info.parents[node] = self._path[-1]
        self.info.nodes.append((node, self.scope))
        self._path.append(node)
        try:
            super().visit(node)
        finally:
            self._path.pop()

    # --- scopes -------------------------------------------------------------------------------
    def _outer(self) -> Scope:
        scope = self.scope
        while scope.kind == "class" and scope.parent is not None:
            scope = scope.parent
        return scope

    def _enter(self, scope: Scope, body: list[ast.AST]) -> None:
        prev, self.scope = self.scope, scope
        for stmt in body:
            self.visit(stmt)
        self.scope = prev

    def _bind(self, name: str, item: Binding) -> None:
        if name in self.scope.global_names:
            self.info.scope.bind(name, item)
        elif name in self.scope.nonlocal_names:
            self._enclosing_binder(name).bind(name, item)
        else:
            self.scope.bind(name, item)

    def _enclosing_binder(self, name: str) -> Scope:
        """The enclosing function scope a `nonlocal` name belongs to."""
        scope = self.scope.parent
        while scope is not None and (scope.kind == "class" or name not in scope.bindings) and scope.parent:
            scope = scope.parent
        return scope if scope is not None else self.scope

    def _bind_existing(self, name: str, item: Binding) -> None:
        scope: Scope | None = self.scope
        while scope is not None:
            if name in scope.bindings and scope.kind != "class":
                scope.bind(name, item)
                return
            scope = scope.parent
        self._bind(name, item)

    # --- definitions --------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._bind(node.name, ("val", Val("func", node=node)))
        for dec in node.decorator_list:
            self.visit(dec)
        self._visit_signature(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        cls = self.scope.node if self.scope.kind == "class" else None
        label = f"{cls.name}.{node.name}" if isinstance(cls, ast.ClassDef) else node.name
        info = self._add_func(node, label, cls)  # type: ignore[arg-type]
        self._enter(info.scope, node.body)  # type: ignore[arg-type]

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_signature(node.args)
        info = self._add_func(node, f"<lambda line {node.lineno}>", None)
        self._enter(info.scope, [node.body])

    def _visit_signature(self, args: ast.arguments) -> None:
        annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.annotation]
        for expr in [*args.defaults, *[d for d in args.kw_defaults if d is not None], *annotations]:
            self.visit(expr)

    def _add_func(self, node: ast.AST, label: str, cls: ast.ClassDef | None) -> FuncInfo:
        scope = Scope(node, "lambda" if isinstance(node, ast.Lambda) else "function", self._outer(), cls=cls)
        args: ast.arguments = node.args  # type: ignore[attr-defined]
        params = [a.arg for a in (*args.posonlyargs, *args.args)]
        info = FuncInfo(
            node=node, scope=scope, name=label, cls=cls, kind=_method_kind(node, cls), params=params,
            vararg=args.vararg.arg if args.vararg else None, kwonly=[a.arg for a in args.kwonlyargs],
        )
        self.info.funcs[node] = info
        self.info.scopes[node] = scope
        self._bind_params(info, args)
        return info

    def _bind_params(self, info: FuncInfo, args: ast.arguments) -> None:
        scope, outer = info.scope, self.scope
        for i, name in enumerate(info.params):
            if i == 0 and info.kind == "method":
                scope.bind(name, ("val", Val("self", node=info.cls)))
            elif i == 0 and info.kind == "classmethod":
                scope.bind(name, ("val", Val("class", node=info.cls)))
            else:
                scope.bind(name, ("param", info, name))
        first_default = len(info.params) - len(args.defaults)
        for name, default in zip(info.params[first_default:], args.defaults, strict=True):
            scope.bind(name, ("expr", default, outer))
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            scope.bind(arg.arg, ("param", info, arg.arg))
            if default is not None:
                scope.bind(arg.arg, ("expr", default, outer))
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                scope.bind(extra.arg, ("param", info, extra.arg))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._bind(node.name, ("val", Val("class", node=node)))
        for expr in [*node.bases, *[k.value for k in node.keywords], *node.decorator_list]:
            self.visit(expr)
        scope = Scope(node, "class", self.scope)
        self.info.scopes[node] = scope
        self.info.classes[node] = ClassInfo(node=node, scope=scope)
        self._enter(scope, node.body)  # type: ignore[arg-type]

    # --- bindings -----------------------------------------------------------------------------
    def _bind_target(self, target: ast.AST, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, ("expr", value, self.scope))
        elif isinstance(target, (ast.Tuple, ast.List)):
            self._bind_sequence(target, value)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, value)
        elif isinstance(target, ast.Attribute):
            self.info.attr_assigns.append((target.value, target.attr, value, self.scope))
        elif isinstance(target, ast.Subscript):
            self._bind_into_container(target.value, value)

    def _bind_sequence(self, target: ast.Tuple | ast.List, value: ast.expr) -> None:
        plain = not any(isinstance(e, ast.Starred) for e in target.elts)
        if (
            plain and isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            and not any(isinstance(e, ast.Starred) for e in value.elts)
        ):
            for elt, val in zip(target.elts, value.elts, strict=True):
                self._bind_target(elt, val)
        else:
            for elt in target.elts:
                self._bind_target(elt, value)

    def _bind_into_container(self, container: ast.expr, value: ast.expr) -> None:
        """`c[k] = v`, `c.append(v)`: v flows into c, if c turns out to be a list/dict/set."""
        self.info.container_adds.append((container, value, self.scope))

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind_target(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._bind_target(node.target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._bind_target(node.target, node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind_target(node.target, node.value)
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._bind_loop_target(node.target, node.iter)
        self.generic_visit(node)

    def _bind_loop_target(self, target: ast.AST, iterable: ast.expr) -> None:
        """`for name, t in (("weight", w), ("bias", b))`: each name gets its position in the rows of a literal
        (a shape's name is not the tensor beside it); otherwise each may be any part of the iterable."""
        rows = iterable.elts if isinstance(iterable, (ast.Tuple, ast.List, ast.Set)) else None
        if isinstance(target, (ast.Tuple, ast.List)) and rows and all(
                isinstance(row, (ast.Tuple, ast.List)) and len(row.elts) == len(target.elts) for row in rows):
            for row in rows:
                self._bind_sequence(target, row)
            return
        self._bind_target(target, iterable)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self._bind_target(item.optional_vars, item.context_expr)
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def visit_Match(self, node: ast.Match) -> None:
        """`case m:`, `case [m, *rest]`, `case {"k": m}`: every captured name may be (part of) the subject;
        `case C(attr=m)` reads `subject.attr`, which is bound and checked as that attribute read."""
        for case in node.cases:
            self._bind_pattern(case.pattern, node.subject, node)
        self.generic_visit(node)

    def _bind_pattern(self, pattern: ast.AST, subject: ast.expr, match: ast.Match) -> None:
        if isinstance(pattern, ast.MatchClass):
            for attr, sub in zip(pattern.kwd_attrs, pattern.kwd_patterns, strict=True):
                read = ast.copy_location(ast.Attribute(value=subject, attr=attr, ctx=ast.Load()), sub)
                self.info.nodes.append((read, self.scope))  # checked like any attribute read in the source
                self.info.pattern_reads.setdefault(match, []).append(read)
                self._bind_pattern(sub, read, match)
            for sub in pattern.patterns:  # positional: the subject itself for builtins (module.py checks others)
                self._bind_pattern(sub, subject, match)
            return
        name = pattern.name if isinstance(pattern, ast.MatchAs | ast.MatchStar) else None
        name = pattern.rest if isinstance(pattern, ast.MatchMapping) else name
        if name:
            self._bind(name, ("expr", subject, self.scope))
        for child in ast.iter_child_nodes(pattern):
            if isinstance(child, ast.pattern):
                self._bind_pattern(child, subject, match)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self._bind_loop_target(node.target, node.iter)
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        if self.scope.kind == "module" and self.skip_main and _is_main_guard(node.test):
            for stmt in node.orelse:  # the body never runs when the file is imported
                self.visit(stmt)
            return
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.global_names.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.scope.nonlocal_names.update(node.names)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self._bind(alias.asname, ("val", Val("ref", alias.name)))
            else:
                root = alias.name.split(".")[0]
                self._bind(root, ("val", Val("ref", root)))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                continue
            qual = f"{base}.{alias.name}" if base and not base.endswith(".") else base + alias.name
            self._bind(alias.asname or alias.name, ("val", Val("ref", qual)))

    def visit_Call(self, node: ast.Call) -> None:
        self.info.calls.append((node, self.scope))
        func = node.func
        if isinstance(func, ast.Attribute) and node.args:
            if func.attr in _CONTAINER_ADDERS:
                self._bind_into_container(func.value, node.args[-1])
            elif func.attr in _ATTR_REGISTRARS and len(node.args) >= 2:
                self._register_attr(func, node)
        if isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) == 3:
            name = literal_str(node.args[1])
            if name is not None:
                self.info.attr_assigns.append((node.args[0], name, node.args[2], self.scope))
        self.generic_visit(node)

    def _register_attr(self, func: ast.Attribute, node: ast.Call) -> None:
        args = node.args
        if func.attr == "__setattr__" and len(args) == 3:  # object.__setattr__(self, "x", v)
            target, name, value = args[0], literal_str(args[1]), args[2]
        else:
            target, name, value = func.value, literal_str(args[0]), args[1]
        if name is not None:
            self.info.attr_assigns.append((target, name, value, self.scope))


def build_module(tree: ast.Module) -> ModuleInfo:
    """Scopes, bindings, functions and classes of a parsed candidate."""
    builder = _Builder(tree)
    builder.visit(tree)
    return builder.info
