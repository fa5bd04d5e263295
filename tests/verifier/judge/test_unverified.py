"""The verdict `unverified` (category `compile_only`): a kernel compiled for sm_90a that could not be run without
a GPU is neither accepted nor rejected, and every way a report is read (exit code, panel, one-line summary,
feedback, bench result, JSON schema) says so. The decoy that made this a verdict of its own (a Triton kernel
writing zeros beside a no-op CuTe kernel) is verified on CPU in tests/corpus (cute_triton_zeros_no_gpu) and
through the CLI in tests/cli/test_cli.py."""

from __future__ import annotations

import io
import json

from rich.console import Console

from kernelagent.cli.common import EXIT_CODES_HELP, ExitCode, exit_for_report, exit_for_verdicts
from kernelagent.cli.render import render_report
from kernelagent.tools.bench import bench_result
from kernelagent.tools.verify import summary
from kernelagent.verifier import schema
from kernelagent.verifier.judge import verdict as V
from kernelagent.verifier.protocol import CandidateFacts
from kernelagent.verifier.report import CATEGORIES, VERDICTS, Report, Stage, verdict_of


def _compile_only_report() -> Report:
    """What the judge makes of a CuTe forward that reached a compiled launch and skipped it (no GPU)."""
    facts = CandidateFacts(compile_only={"outcome": "ok", "note": ""})
    stages = [Stage("compile", "passed", 0.0, "", {"kernels": []})]
    kernels = [{"kernel": "kernel_cutlass__nothing", "registers": 4, "spills": 0}]
    return V._cute_compile_only(Report(environment={"device": "cpu"}), stages, facts, [], kernels)


def test_each_category_has_one_verdict_and_only_compile_only_is_unverified():
    verdicts = {c: verdict_of(c) for c in CATEGORIES}
    assert set(verdicts.values()) == set(VERDICTS)
    assert [c for c, v in verdicts.items() if v == "accepted"] == ["ok"]
    assert [c for c, v in verdicts.items() if v == "unverified"] == ["compile_only"]


def test_the_judge_gives_compile_only_the_verdict_unverified_never_accepted():
    report = _compile_only_report()
    assert (report.verdict, report.category) == ("unverified", "compile_only")
    assert not report.accepted and report.unverified and report.metrics["compile_only"] is True
    assert report.stage("correctness").status == "skipped"
    assert report.feedback.startswith("COMPILED, NOT VERIFIED (no GPU): compiled for sm_90a; correctness NOT run")
    assert "ACCEPTED" not in report.feedback and "kernel_cutlass__nothing" in report.feedback


def test_a_forward_that_reached_no_launch_is_still_rejected():
    facts = CandidateFacts(compile_only={"outcome": "none", "note": "forward reached no launch"})
    report = V._cute_compile_only(Report(), [], facts, [], [])
    assert (report.verdict, report.category) == ("rejected", "no_kernel_launched")


def test_a_worker_failure_can_never_carry_a_passing_category(tmp_path):
    """The failure the candidate worker reports names a category; one that is not a rejection (`ok`,
    `compile_only`) becomes a runtime error instead of the verdict it names."""
    from types import SimpleNamespace

    from kernelagent.verifier.options import VerifyOptions
    from kernelagent.verifier.sandbox.pool import WorkerResult

    pack = SimpleNamespace(meta={"device": "cpu"}, environment={})
    cspec = SimpleNamespace(backend="triton", source="")
    for claimed in ("ok", "compile_only", "made_up", "mismatch"):
        facts = CandidateFacts(failure={"category": claimed, "message": "forward raised", "detail": ""})
        res = WorkerResult("ok", {"facts": facts.to_dict()}, out_dir=str(tmp_path))
        report = V.decide(Report(), [], res, None, pack, cspec, tmp_path / "kernel.py", VerifyOptions(device="cpu"))
        expect = "mismatch" if claimed == "mismatch" else "runtime_error"
        assert (report.verdict, report.category) == ("rejected", expect), claimed


def test_exit_codes_keep_unverified_apart():
    unverified, accepted = _compile_only_report(), Report(verdict="accepted", category="ok")
    rejected = Report(verdict="rejected", category="mismatch")
    assert [exit_for_report(r) for r in (accepted, unverified, rejected)] == [0, 4, 1]
    assert ExitCode.UNVERIFIED == 4 and "4 compiled but not verified" in EXIT_CODES_HELP
    assert exit_for_verdicts(["accepted", "unverified"]) == ExitCode.UNVERIFIED
    assert exit_for_verdicts(["accepted", "unverified", "rejected"]) == ExitCode.REJECTED
    assert exit_for_verdicts(["accepted", "accepted"]) == ExitCode.OK


def test_every_reading_of_the_report_says_not_verified():
    report = _compile_only_report()
    assert summary(report).startswith("COMPILED, NOT VERIFIED (no GPU): ")
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(render_report(report))
    assert "COMPILED, NOT VERIFIED (no GPU)" in out.getvalue() and "ACCEPTED" not in out.getvalue()
    bench = bench_result(report, None)
    assert bench["verdict"] == "unverified" and "neither verified nor timed" in bench["note"]
    doc = json.loads(json.dumps(report.to_dict(), default=str))
    assert doc["verdict"] == "unverified" and Report.from_dict(doc).unverified


def test_the_json_schema_lists_the_new_verdict():
    committed = json.loads(schema.SCHEMA_FILE.read_text())
    assert committed["properties"]["verdict"]["enum"] == list(VERDICTS) == ["accepted", "unverified", "rejected"]
    assert "compile_only" in committed["properties"]["category"]["enum"]
    assert committed["x-verdicts"]["unverified"] == VERDICTS["unverified"]
