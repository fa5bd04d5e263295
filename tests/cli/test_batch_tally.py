"""The batch command's tally, summary table and exit code with kernels that compiled but could not be run
(verdict `unverified`: CuTe DSL on a machine without a GPU), kept apart from the accepted and the failed."""

from __future__ import annotations

import io

from rich.console import Console

from kernelagent.cli.batch import BatchView, batch_exit, summary_view
from kernelagent.cli.common import ExitCode
from kernelagent.memory import batches as B


def _item(problem: str, cand: str, verdict: str | None, category: str, status: str = "done") -> dict:
    return {"problem_id": problem, "problem": problem, "problem_path": f"/p/{problem}.py", "candidate_path": cand,
            "status": status, "verdict": verdict, "category": category, "attempt_id": f"{problem}-{cand}",
            "speedup_eager": None, "speedup_compile": None}


ACCEPTED, UNVERIFIED = ("accepted", "ok"), ("unverified", "compile_only")


def _summary(*groups: tuple[str, tuple[str, str]]) -> dict:
    return B.summarize([_item(p, f"k{i}", *v) for i, (p, v) in enumerate(groups)])


def test_the_live_tally_has_an_unverified_bucket():
    out = io.StringIO()
    view = BatchView(Console(file=out, width=120, color_system=None))
    for verdict in ("accepted", "unverified", "unverified", "rejected"):
        view({"event": "done", "shard": "cpu", "verdict": verdict})
    assert view.tally == {"accepted": 1, "unverified": 2, "rejected": 1}
    assert "1 ok" in view._tally() and "2 not verified (no GPU)" in view._tally() and "1 failed" in view._tally()


def test_exit_code_4_when_the_rest_only_compiled():
    assert batch_exit(_summary(("a", ACCEPTED), ("b", ACCEPTED))) == ExitCode.OK
    assert batch_exit(_summary(("a", ACCEPTED), ("b", UNVERIFIED))) == ExitCode.UNVERIFIED
    assert batch_exit(_summary(("a", UNVERIFIED), ("b", ("rejected", "mismatch")))) == ExitCode.REJECTED
    assert batch_exit(B.summarize([_item("a", "", None, "", status=B.NO_CANDIDATE)])) == ExitCode.REJECTED


def test_the_summary_table_says_not_verified():
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(summary_view(_summary(("a", ACCEPTED), ("b", UNVERIFIED))))
    text = out.getvalue()
    assert "correct: 1 (50.0%); compiled but not verified (no GPU): 1" in text
    assert "not verified (no GPU)" in text.split("KernelBench summary")[1]


def test_the_html_report_marks_unverified_apart():
    from kernelagent.report.page import _correct, _verdict

    row = {"verdict": "unverified", "category": "compile_only"}
    assert _verdict(row) == '<span class="unverified">compiled, not verified (no GPU)</span>'
    assert _verdict({"verdict": "rejected", "category": "mismatch"}) == '<span class="rejected">mismatch</span>'
    [problem] = _summary(("b", UNVERIFIED))["per_problem"]
    assert "not verified (no GPU)" in _correct(problem) and _correct({**problem, "unverified": 0}) == "no"
