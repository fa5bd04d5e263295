"""Functions the candidate hands to library code, which calls them later, where the policy would not
see them run: bodies registered for its torch.library operators (kernels, fakes, autograd formulas,
in any form: decorators, `op.register_kernel(dev)(fn)`, `Library(...).impl(name, fn, key)`), and
callbacks given to other libraries (Triton's autotune/heuristics hooks, dataclass default factories,
`defaultdict` factories, ...), which run while forward launches or builds objects.
"""

from __future__ import annotations

import ast

from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import ModuleInfo, Scope

# Method names that register a function for an operator, whatever object they are called on.
REGISTRARS = frozenset({
    "register_autograd", "register_kernel", "register_fake", "register_vmap", "register_torch_dispatch",
    "register_autocast", "impl", "impl_abstract", "fallback", "_register_fake", "_register_torch_dispatch_rule",
    "_impl_with_aoti_compile",
})
# Outside callables that call what they are given at once (or hand it back): not callbacks.
_IMMEDIATE_ROOTS = frozenset({"builtins", "itertools", "operator", "math"})
_IMMEDIATE = frozenset({
    "functools.partial", "functools.cache", "functools.lru_cache", "functools.wraps", "functools.reduce",
    "functools.cached_property", "functools.update_wrapper",
    # run what they are given before returning, or only hold modules and parameters made by the caller
    "torch.nn.Module.apply", "torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential",
    "torch.nn.ParameterList", "torch.nn.ParameterDict",
})
_DEFINERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class Handed:
    """`registered`: functions given to torch.library; `hooks`: functions given to other library code."""

    def __init__(self, info: ModuleInfo, resolver: Resolver) -> None:
        self.info, self.r = info, resolver
        self.registered: set[ast.AST] = set()
        self.hooks: set[ast.AST] = set()
        self.launch_hooks: set[ast.AST] = set()  # given to Triton: called with a launch's real arguments
        for call, scope in info.calls:
            if self.is_registration(call, scope):
                self.registered |= self.funcs_in([*call.args, *call.keywords], scope)
            elif self._is_callback_taker(call, scope):
                funcs = self.funcs_in([*call.args, *call.keywords], scope)
                self.hooks |= funcs
                if any(v.name.split(".")[0] == "triton" for v in self.r.resolve(call.func, scope)):
                    self.launch_hooks |= funcs
        self._decorated()
        self._stored_outside()
        self.hooks -= self.registered

    def is_registration(self, call: ast.Call, scope: Scope) -> bool:
        """`torch.library.*(...)`, `<op>.register_kernel(...)`, `lib.impl(...)`, and such calls' results called
        again (`op.register_kernel("cpu")(fn)`)."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in REGISTRARS:
            return True
        if isinstance(func, ast.Call) and self.is_registration(func, scope):
            return True
        return any(v.kind == "ref" and v.name.startswith("torch.library.") for v in self.r.resolve(func, scope))

    def _is_callback_taker(self, call: ast.Call, scope: Scope) -> bool:
        vals = self.r.resolve(call.func, scope)
        if not vals or any(v.kind != "ref" for v in vals):
            return False  # the candidate's own code (followed as calls) or unknown
        return not all(v.name in _IMMEDIATE or v.name.split(".")[0] in _IMMEDIATE_ROOTS for v in vals)

    def _decorated(self) -> None:
        for node, func in self.info.funcs.items():
            owner = self.info.classes.get(func.cls) if func.cls is not None else None
            scope = owner.scope if owner is not None else func.scope.parent or self.info.scope
            for dec in getattr(node, "decorator_list", []):
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Attribute) and target.attr in REGISTRARS or (
                    isinstance(dec, ast.Call) and self.is_registration(dec, scope)
                ):
                    self.registered.add(node)
                elif any(v.kind == "ref" and v.name.startswith("torch.library.") and "()" in v.name
                         for v in self.r.resolve(target, scope)):
                    self.registered.add(node)  # @op.register_fake, @lib.impl(...)-made decorators

    def _stored_outside(self) -> None:
        """`cfg.pre_hook = fn` on a library object: the library calls it."""
        for base, _attr, value, scope in self.info.attr_assigns:
            vals = self.r.resolve(base, scope)
            if vals and all(v.kind == "ref" for v in vals):
                self.hooks |= self.funcs_in([value], scope)

    def funcs_in(self, exprs: list[ast.AST], scope: Scope) -> set[ast.AST]:
        """The candidate's functions and lambdas that argument expressions carry (in containers, partials,
        keyword values, ...), not the ones they call on the spot."""
        out: set[ast.AST] = set()
        stack = list(exprs)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Lambda):
                out.add(node)
                continue
            if isinstance(node, _DEFINERS):
                continue
            if isinstance(node, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
                out |= {v.node for v in self.r.resolve(node, scope) if v.kind == "func"}
            if isinstance(node, ast.Call):
                stack.extend([*node.args, *node.keywords])
            else:
                stack.extend(ast.iter_child_nodes(node))
        return {n for n in out if n in self.info.funcs and not self.info.funcs[n].dsl}
