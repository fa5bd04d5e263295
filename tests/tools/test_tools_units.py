"""The shared tool functions without workers: input checks, candidate files, shaped problems, history
lookups, guides and library search."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelagent.problem import inspect_problem, load_problem
from kernelagent.tools import bench as B
from kernelagent.tools.guides import GUIDES, guide
from kernelagent.tools.history import one, recent
from kernelagent.tools.library_search import search, show
from kernelagent.tools.verify import InputError, candidate_file, existing_file, summary
from kernelagent.verifier.report import Report
from tests.paths import PROBLEMS, SOFTMAX_PROBLEM


def test_existing_file_messages_match_the_cli(tmp_path):
    with pytest.raises(InputError, match=r"^problem file .*nope.py does not exist$"):
        existing_file(tmp_path / "nope.py", "problem file")
    with pytest.raises(InputError, match="is a folder; give the .py file"):
        existing_file(tmp_path, "candidate file")
    assert existing_file(SOFTMAX_PROBLEM, "problem file") == SOFTMAX_PROBLEM


def test_candidate_source_becomes_a_file_named_by_its_hash(tmp_path):
    a = candidate_file("x = 1\n", None, tmp_path)
    assert a.read_text() == "x = 1\n" and a.suffix == ".py"
    assert candidate_file("x = 1\n", None, tmp_path) == a
    assert candidate_file("x = 2\n", None, tmp_path) != a
    for source, path in ((None, None), ("x", str(a))):
        with pytest.raises(InputError, match="exactly one"):
            candidate_file(source, path, tmp_path)
    with pytest.raises(InputError, match="empty"):
        candidate_file("  \n", None, tmp_path)


def test_shaped_problem_redraws_tensor_inputs_at_the_given_shapes(tmp_path):
    path = B.shaped_problem(SOFTMAX_PROBLEM, [[5, 70]], tmp_path)
    assert inspect_problem(path).name == inspect_problem(SOFTMAX_PROBLEM).name
    sets = load_problem(path).input_sets()
    assert {tuple(s[0].shape) for s in sets} == {(5, 70)}
    assert all(s[0].dtype == load_problem(SOFTMAX_PROBLEM).input_sets()[0][0].dtype for s in sets)
    assert B.shaped_problem(SOFTMAX_PROBLEM, [[6, 70]], tmp_path) != path   # another content, another pack
    wrong_count = B.shaped_problem(SOFTMAX_PROBLEM, [[5, 70], [3]], tmp_path)
    with pytest.raises(Exception, match=r"2 shape\(s\) were given, but get_inputs\(\) returns 1 tensor"):
        load_problem(wrong_count).input_sets()
    for bad in ([], [[0, 3]], [[2.5]], [[]]):
        with pytest.raises(InputError, match="shapes must be"):
            B.shaped_problem(SOFTMAX_PROBLEM, bad, tmp_path)


def test_shaped_problem_keeps_integer_inputs_in_range(tmp_path):
    path = B.shaped_problem(PROBLEMS / "ops" / "cross_entropy.py", [[64, 10], [64]], tmp_path)
    logits, target = load_problem(path).input_sets()[0][:2]
    assert tuple(logits.shape) == (64, 10) and tuple(target.shape) == (64,)
    assert not target.is_floating_point() and int(target.min()) >= 0


def test_library_kernel_and_bench_result():
    ref, kernel = B.library_kernel("softmax", "triton")
    assert ref.name == "reference.py" and kernel.name == "triton.py"
    with pytest.raises(InputError, match="no library entry"):
        B.library_kernel("nope", "triton")
    ok = Report(verdict="accepted", category="ok", message="correct on 5 trials", metrics={"trials": 5})
    res = B.bench_result(ok, [[4, 8]])
    assert res["timing"] == {} and "CUDA GPU" in res["note"] and res["summary"] == "ACCEPTED: correct on 5 trials"
    timed = Report(verdict="accepted", category="ok", metrics={"candidate_ms": 0.05, "speedup_eager": 2.0})
    assert B.bench_result(timed, None)["timing"] == {"candidate_ms": 0.05, "speedup_eager": 2.0}
    bad = Report(verdict="rejected", category="mismatch", message="m", feedback="fix it")
    assert B.bench_result(bad, None)["feedback"] == "fix it" and summary(bad) == "REJECTED: mismatch: m"


class FakeStore:
    def __init__(self) -> None:
        self.rows = [{"id": "abc123", "source": "x"}, {"id": "abd456", "source": "y"}]

    def history(self, problem, limit=50):
        return self.rows[:limit]

    def attempt(self, attempt_id):
        from kernelagent.memory.store import AmbiguousIdError

        hits = [r for r in self.rows if r["id"].startswith(attempt_id)]
        if len(hits) > 1:
            raise AmbiguousIdError(f"attempt id prefix {attempt_id!r} matches several attempts")
        return hits[0] if hits else None


def test_history_lookups():
    store = FakeStore()
    assert recent(store, limit=1) == store.rows[:1]
    assert one(store, "abd")["source"] == "y"
    with pytest.raises(InputError, match="no attempt 'zzz'"):
        one(store, "zzz")
    with pytest.raises(InputError, match="matches several"):
        one(store, "ab")
    with pytest.raises(InputError, match="at least 1"):
        recent(store, limit=0)


def test_guides_are_the_agents_own_texts():
    assert guide("triton") == GUIDES["triton"].read_text()
    assert guide("cute").strip() and "ModelNew" in guide("skill")
    with pytest.raises(InputError, match="no guide 'cuda'"):
        guide("cuda")
    skill_doc = Path(__file__).resolve().parents[2] / "docs" / "agents" / "SKILL.md"
    assert skill_doc.read_text() == guide("skill")


def test_skill_explains_every_report_category():
    from kernelagent.verifier.report import CATEGORIES

    missing = [c for c in CATEGORIES if f"| `{c}` |" not in guide("skill")]
    assert missing == [], f"add these categories to kernelagent/tools/skill.md: {missing}"


def test_library_search_by_words_and_show():
    names = {e["name"] for e in search("softmax")}
    assert "softmax" in names and "rms_norm" not in names
    assert search("no such words here") == []
    assert {e["name"] for e in search(None)} >= {"softmax", "rms_norm", "cross_entropy"}
    entry = show("softmax")
    assert "class Model" in entry["reference"] and "class ModelNew" in entry["kernels"]["triton"]
    with pytest.raises(InputError, match="no library entry"):
        show("nope")
