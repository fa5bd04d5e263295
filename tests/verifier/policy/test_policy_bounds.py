"""The static policy runs in the verifier's own process, before any worker exists, so nothing but itself bounds
its time (red team, 2026-12-05: 30,000 one-line functions and 60,000 attribute reads on an unknown object held
`verify --timeout 30` 145 s). Three bounds: no quadratic step (CPython's `get_symbols` scans a table's children
for each name; the call graph scanned every function for each unknown attribute), a deadline from --timeout, and a
largest candidate file. Work is counted, never timed."""

from __future__ import annotations

import ast
import symtable
import textwrap
from pathlib import Path

import pytest

from kernelagent.problem import MAX_CANDIDATE_BYTES, ProblemError, inspect_candidate
from kernelagent.verifier.policy import free_names
from kernelagent.verifier.policy.check import check_policy
from kernelagent.verifier.policy.graph import CallGraph
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import build_module
from tests.paths import HONEST

ROOT = Path(__file__).resolve().parents[3]
SOURCES = [ROOT / "kernelagent/kernels/attention/triton.py", ROOT / "kernelagent/kernels/softmax/triton.py",
           *sorted((HONEST / "static").glob("*.py"))[:12]]
GOOD = HONEST / "softmax" / "autotuned.py"


def _many_methods(n: int) -> str:
    """n classes with a method `m{i}` each, and a function reading n attributes of an unknown object."""
    classes = "".join(f"class C{i}:\n    def m{i}(self):\n        return {i}\n" for i in range(n))
    reads = "".join(f"    x.m{i}\n" for i in range(n))
    return f"{classes}def g(x):\n{reads}    return x\n"


def _facts(sym: symtable.Symbol) -> tuple:
    return (sym.get_name(), sym.is_referenced(), sym.is_global(), sym.is_declared_global(), sym.is_assigned(),
            sym.is_imported(), sym.is_namespace())


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_symbols_without_the_scan_are_cpythons(path):
    """free_names' own symbol listing answers every question it asks as CPython's get_symbols does, in every
    table (module, classes, functions, comprehensions)."""
    source = path.read_text()
    tables = free_names._tables(symtable.symtable(source, str(path), "exec"))
    assert len(tables) > 3
    for table in tables:
        ours = sorted(map(_facts, free_names._symbols(table)))
        assert ours == sorted(map(_facts, table.get_symbols())), table.get_name()


def test_undefined_globals_never_take_the_quadratic_listing(monkeypatch):
    def scan(self):
        raise AssertionError("get_symbols scans every child table for each name")
    monkeypatch.setattr(symtable.SymbolTable, "get_symbols", scan)
    source = textwrap.dedent("""
        import torch

        def f():
            return torch.ones(1) + np.zeros(1)

        class A:
            def g(self):
                return f
    """)
    tree = ast.parse(source)
    assert set(free_names.undefined_globals(tree, source)) == {"np"}


def test_methods_by_name_are_indexed_once(monkeypatch):
    """methods_named gives what a scan of the file's functions gives, and the graph walks the functions a constant
    number of times however many unknown attributes are read."""
    info = build_module(ast.parse(_many_methods(40)))
    walks = [0]

    class Counted(dict):
        def values(self):
            walks[0] += 1
            return super().values()

    info.funcs = Counted(info.funcs)
    graph = CallGraph(info, Resolver(info))
    for name in [f"m{i}" for i in range(40)] + ["missing", "g"]:
        scan = {f.node for f in info.funcs.values() if f.cls is not None and f.node.name == name}
        assert graph.methods_named(name) == scan
    walks[0] -= 42  # the scans just made
    assert walks[0] <= 5, walks[0]


def test_policy_refuses_a_file_past_its_time_limit():
    source = GOOD.read_text()
    assert check_policy(source, "k.py").ok and check_policy(source, "k.py", time_limit=600).ok
    late = check_policy(source, "k.py", time_limit=0)
    assert not late.ok and [f.rule for f in late.violations] == ["syntax"]
    assert "--timeout" in late.violations[0].message


def test_policy_deadline_is_per_check():
    """A check that ran out does not leave its deadline behind for the next one."""
    source = GOOD.read_text()
    assert not check_policy(source, "k.py", time_limit=0).ok
    assert check_policy(source, "k.py").ok


def test_candidate_over_the_size_limit_is_refused(tmp_path):
    source = GOOD.read_text()
    big = tmp_path / "kernel.py"
    big.write_text(source + "#" * (MAX_CANDIDATE_BYTES - len(source.encode()) + 1) + "\n")
    with pytest.raises(ProblemError, match="KiB"):
        inspect_candidate(big)
    fits = tmp_path / "fits.py"
    fits.write_text(source + textwrap.dedent("""
        # padding
    """) + "#" * (MAX_CANDIDATE_BYTES - len(source.encode()) - 20) + "\n")
    assert inspect_candidate(fits).source.endswith("#\n")
