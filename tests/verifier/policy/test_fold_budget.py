"""Folding names to strings stays linear in the file and bounded: names bound twice, each to the one
below added to itself, doubled the work a level (red team, 2026-12-03: 13 levels held `verify` 4 minutes
past its timeout, 20 would have taken hours). Work is counted in folds, not seconds."""

from __future__ import annotations

import ast

from kernelagent.verifier.policy.check import check_policy
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import build_module


def _chain(levels: int, self_bound: bool = False) -> str:
    lines = ["import torch", "a0 = 'x'", "a0 = 'y'"]
    for i in range(1, levels):
        lines += [f"a{i} = a{i - 1} + a{i - 1}"] * 2
        if self_bound:  # a cycle at every level: answers cut by the cycle guard are not memoised
            lines.append(f"a{i} = a{i} + 'z'")
    lines.append(f"t = getattr(torch, a{levels - 1}, None)")
    return "\n".join(lines) + "\n"


def _resolver(source: str) -> Resolver:
    return Resolver(build_module(ast.parse(source)))


def _fold_last(resolver: Resolver, levels: int):
    info = resolver.info
    last = next(n for n in ast.walk(info.tree) if isinstance(n, ast.Name) and n.id == f"a{levels - 1}"
                and isinstance(n.ctx, ast.Load))
    return resolver.fold(last, info.scope)


def test_each_binding_is_folded_once():
    resolver = _resolver(_chain(12))
    assert _fold_last(resolver, 12) is None  # 'x' or 'y': not one string
    assert not resolver.fold_exhausted
    assert resolver._fold_work < 200, resolver._fold_work  # 2 bindings a level, each folded once


def test_cycles_at_every_level_run_out_of_budget_and_are_reported():
    resolver = _resolver(_chain(40, self_bound=True))
    assert _fold_last(resolver, 40) is None
    assert resolver.fold_exhausted and resolver.too_deep
    result = check_policy(_chain(40, self_bound=True), "k.py")
    assert any(f.rule == "dynamic_attr" for f in result.findings), result.findings
