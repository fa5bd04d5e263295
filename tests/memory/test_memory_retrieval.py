"""Retrieval: similar accepted kernels ranked by signature overlap, and lessons from recurring failures."""

from __future__ import annotations

import pytest

from kernelagent.memory.retrieval import LESSON_MAX, change_summary, jaccard, lessons, similar_accepted

SOFTMAX_SIG = ["aten._softmax.default", "aten.mul.Tensor"]


def _problem(store, name: str, sig: list[str]) -> str:
    return store.upsert_problem(name=name, source=f"# {name}\nx = '{name}'\n", op_signature=sig)


def _accepted(store, report, pid: str, backend: str = "triton", speedup: float = 1.5, run_id=None) -> str:
    return store.record_attempt(run_id=run_id, problem_id=pid, source=f"kernel for {pid[:6]} {speedup}\n",
                                report=report(backend=backend, speedup=speedup))


def test_jaccard():
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert jaccard([], []) == 0.0 and jaccard(["a"], ["a"]) == 1.0


def test_overlapping_signature_ranks_first_and_disjoint_is_left_out(store, report):
    exact = _problem(store, "softmax", SOFTMAX_SIG)
    partial = _problem(store, "scaled_softmax", [*SOFTMAX_SIG, "aten.add.Tensor", "aten.div.Tensor"])
    disjoint = _problem(store, "matmul", ["aten.mm.default"])
    _accepted(store, report, partial, speedup=9.0)  # faster, but less similar
    _accepted(store, report, disjoint, speedup=20.0)
    _accepted(store, report, exact, speedup=1.2)
    found = similar_accepted(store, SOFTMAX_SIG, backend="triton")
    assert [r["problem"] for r in found] == ["softmax", "scaled_softmax"]
    assert found[0]["overlap"] == 1.0 and found[1]["overlap"] == 0.5
    assert found[0]["source"].startswith("kernel for") and found[1]["speedup"] == 9.0


def test_same_backend_preferred_then_speedup(store, report):
    a = _problem(store, "softmax_a", SOFTMAX_SIG)
    b = _problem(store, "softmax_b", SOFTMAX_SIG)
    _accepted(store, report, a, backend="triton", speedup=5.0)
    _accepted(store, report, b, backend="cute", speedup=1.1)
    _accepted(store, report, b, backend="triton", speedup=2.0)
    cute_first = similar_accepted(store, SOFTMAX_SIG, backend="cute", limit=5)
    assert [(r["problem"], r["backend"]) for r in cute_first] == [
        ("softmax_b", "cute"), ("softmax_a", "triton"), ("softmax_b", "triton")]
    by_speed = similar_accepted(store, SOFTMAX_SIG, backend="triton", limit=2)
    assert [r["speedup"] for r in by_speed] == [5.0, 2.0]


def test_best_attempt_per_problem_and_exclusion(store, report):
    pid = _problem(store, "softmax", SOFTMAX_SIG)
    other = _problem(store, "softmax2", SOFTMAX_SIG)
    _accepted(store, report, pid, speedup=1.1)
    best = _accepted(store, report, pid, speedup=3.0)
    store.record_attempt(run_id=None, problem_id=pid, source="wrong\n",
                         report=report("rejected", "mismatch"))
    _accepted(store, report, other, speedup=1.0)
    found = similar_accepted(store, SOFTMAX_SIG)
    assert [r["attempt_id"] for r in found][:1] == [best] and len(found) == 2
    without = lambda ex: [r["problem"] for r in similar_accepted(store, SOFTMAX_SIG, exclude_problem=ex)]
    assert without("softmax") == ["softmax2"] and without(other) == ["softmax"]


def _fail(store, report, pid, rid, turn, category, feedback, parent=None, backend="triton", source=None):
    return store.record_attempt(run_id=rid, problem_id=pid, turn=turn, parent_id=parent,
                                source=source or f"bad {turn}\n",
                                report=report("rejected", category, backend=backend, feedback=feedback))


def test_lessons_count_categories_and_name_the_fix(store, report):
    pid = _problem(store, "softmax", SOFTMAX_SIG)
    rid = store.start_run(problem_id=pid, provider="p", model="m", backend="triton", budget={})
    broken = "def k(x_ptr):\n    x = tl.load(x_ptr + offs)\n    return x\n"
    fixed = "def k(x_ptr):\n    # masked\n    x = tl.load(x_ptr + offs, mask=m)\n    return x\n"
    first = _fail(store, report, pid, rid, 1, "compile_error",
                  "\nCompilation failed at line 12: unknown symbol tl.foo\ntrace...", source=broken)
    store.record_attempt(run_id=rid, problem_id=pid, turn=2, parent_id=first, source=fixed,
                         report=report(backend="triton"))
    other_run = store.start_run(problem_id=pid, provider="p", model="m", backend="triton", budget={})
    _fail(store, report, pid, other_run, 1, "compile_error", "Compilation failed at line 40: unknown tl.bar")
    for turn in range(3):
        _fail(store, report, pid, other_run, turn + 2, "mismatch", f"max abs err {turn}.5 at out[0]")
    _fail(store, report, pid, other_run, 9, "timeout", "ran past 60 s")  # once: not recurring
    _fail(store, report, pid, other_run, 10, "internal_error", "verifier crashed")
    _fail(store, report, pid, other_run, 11, "internal_error", "verifier crashed")
    _fail(store, report, pid, None, 0, "compile_error", "cute only", backend="cute")

    got = lessons(store, "triton")
    assert len(got) == 2 and all(len(line) <= LESSON_MAX for line in got)
    assert got[0].startswith("mismatch (3x): max abs err")
    assert got[1].startswith("compile_error (2x, 1 fixed): Compilation failed at line")
    assert "fixed next turn by `x = tl.load(x_ptr + offs)` → `x = tl.load(x_ptr + offs, mask=m)`" in got[1]
    assert lessons(store, "triton", limit=1) == got[:1]
    assert lessons(store, "cute") == []
    assert lessons(store, "cute", min_count=1)[0].startswith("compile_error (1x)")


def test_lessons_without_lineage_use_turn_order_and_stay_short(store, report):
    pid = _problem(store, "softmax", SOFTMAX_SIG)
    rid = store.start_run(problem_id=pid, provider="p", model="m", backend="triton", budget={})
    for turn in range(3):
        _fail(store, report, pid, rid, turn, "runtime_error", "illegal memory access " + "x" * 400)
    store.record_attempt(run_id=rid, problem_id=pid, turn=5, source="bad 2\nguard = offs < n\n",
                         report=report(backend="triton"))
    (line,) = lessons(store, "triton")
    assert line.startswith("runtime_error (3x, 3 fixed): illegal memory access x")
    assert line.endswith("fixed 3 turns later by adding `guard = offs < n`") and len(line) <= LESSON_MAX


def test_compiled_but_unverified_kernels_are_neither_examples_nor_lessons(store, report):
    """CuTe DSL verified without a GPU (verdict unverified): never recalled as an accepted kernel, and not a
    failure to learn from either."""
    pid = _problem(store, "softmax", SOFTMAX_SIG)
    for turn in range(3):
        store.record_attempt(run_id=None, problem_id=pid, turn=turn, source=f"cute {turn}\n",
                             report=report("unverified", "compile_only", backend="cute"))
    assert similar_accepted(store, SOFTMAX_SIG, backend="cute") == []
    assert lessons(store, "cute", min_count=1) == []
    _fail(store, report, pid, None, 4, "compile_error", "a real failure", backend="cute")
    assert lessons(store, "cute", min_count=1) == ["compile_error (1x): a real failure"]


def test_change_summary():
    assert change_summary("a\nb\n", "a\n# note\n\nb\n") == "an unchanged source"
    assert change_summary("a\nb\nc\n", "a\nc\n") == "removing `b`"
