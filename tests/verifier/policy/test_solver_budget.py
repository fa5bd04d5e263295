"""The solver behind name resolution and tensor tracking stays linear on cycles and bounded always: names
bound twice, each to the one below, closed into a cycle, were recomputed on every request (provisional
values inside an unfinished cycle were never kept) and doubled the work a level (red team, 2026-12-03:
18 levels held the policy check 30 s, 32 never ended). Work is counted in evaluations, not seconds."""

from __future__ import annotations

import pytest

from kernelagent.verifier.policy import fixpoint
from kernelagent.verifier.policy.check import check_policy
from kernelagent.verifier.policy.fixpoint import KeyedSolver

_TRIPWIRE = 20_000  # evaluations; the unfixed solver passes it at 12 levels, the fixed one needs ~10 a level


class _Tripped(Exception):
    pass


@pytest.fixture
def evaluations(monkeypatch) -> list[int]:
    """Counts `compute` calls of every solver (old and new alike) and stops a run-away check early."""
    count = [0]
    evaluate = KeyedSolver._evaluate

    def counted(self, key, compute):
        def compute_counted():
            count[0] += 1
            if count[0] > _TRIPWIRE:
                raise _Tripped(count[0])
            return compute()
        return evaluate(self, key, compute_counted)

    monkeypatch.setattr(KeyedSolver, "_evaluate", counted)
    return count


def _module_cycle(levels: int) -> str:
    """The red team's file: `a{n} = torch`, each `a{i} = a{i+1}` twice, then `a{n} = a0`."""
    lines = ["import torch", "import torch.nn as nn", f"a{levels} = torch"]
    for i in range(levels - 1, -1, -1):
        lines += [f"a{i} = a{i + 1}"] * 2
    lines += [f"a{levels} = a0", "class ModelNew(nn.Module):", "    def forward(self, x):",
              "        return a0.empty_like(x)"]
    return "\n".join(lines) + "\n"


def _forward_cycle(levels: int) -> str:
    """The same inside forward, through the tensor tracker: is `a0` a tensor?"""
    body = [f"a{levels} = x"]
    for i in range(levels - 1, -1, -1):
        body += [f"a{i} = a{i + 1}"] * 2
    body += [f"a{levels} = a0", "return a0.sum().item()"]
    return "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" + "".join(
        f"        {line}\n" for line in body)


@pytest.mark.parametrize("levels", [18, 32])
def test_a_cycle_of_doubled_names_is_resolved_in_linear_work(levels, evaluations):
    result = check_policy(_module_cycle(levels), "k.py")
    assert evaluations[0] < 15 * levels, evaluations[0]
    assert result.ok, result.summary()  # a0 is torch: torch.empty_like is allocation, allowed


@pytest.mark.parametrize("levels", [18, 32])
def test_a_cycle_of_doubled_tensors_is_tracked_in_linear_work(levels, evaluations):
    result = check_policy(_forward_cycle(levels), "k.py")
    assert evaluations[0] < 15 * levels, evaluations[0]
    assert any(f.rule == "torch_compute" and ".item()" in f.snippet for f in result.findings), result.summary()


def test_past_the_budget_the_file_is_reported_as_too_indirect(monkeypatch):
    monkeypatch.setattr(fixpoint, "MAX_WORK", 40)
    result = check_policy(_module_cycle(18), "k.py")
    assert any(f.rule == "dynamic_attr" and "too many" in f.message for f in result.findings), result.summary()


def _tree_compute(solver: KeyedSolver[frozenset[str]], key: str, depth: int) -> frozenset[str]:
    """Each key asks for two distinct children: 2**depth keys, no sharing for a memo to find."""
    if depth == 0:
        return frozenset({key})
    return frozenset().union(*(solver.get(key + c, lambda c=c: _tree_compute(solver, key + c, depth - 1))
                               for c in "lr"))


def test_the_budget_bounds_work_that_no_memo_can_share():
    solver: KeyedSolver[frozenset[str]] = KeyedSolver(frozenset(), max_depth=100, max_work=500)
    solver.get("", lambda: _tree_compute(solver, "", 16))
    assert solver.work <= 500 and solver.exhausted and solver.too_deep


def test_a_provisional_value_is_not_reused_after_its_cycle_went_round():
    """`b` read `a` while `a` was unfinished; once `a` knows more, `b` is recomputed, not reused."""
    solver: KeyedSolver[frozenset[str]] = KeyedSolver(frozenset())

    def a() -> frozenset[str]:
        return frozenset({"a"}) | solver.get("b", b) | solver.get("c", c)

    def b() -> frozenset[str]:
        return solver.get("a", a)

    def c() -> frozenset[str]:
        return solver.get("b", b) | frozenset({"c"})

    assert solver.get("a", a) == {"a", "c"}
    assert solver.get("b", b) == {"a", "c"} and solver.get("c", c) == {"a", "c"}
