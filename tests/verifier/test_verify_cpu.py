"""End-to-end verification on CPU (Triton interpreter): accepted kernels and each failure category."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path

import pytest

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.report import CATEGORIES, Report
from kernelagent.verifier.sandbox.pool import WorkerPool
from tests.paths import HONEST, PROBLEMS, SOFTMAX_PROBLEM, softmax_case

ROOT = Path(__file__).resolve().parents[2]
OP = SOFTMAX_PROBLEM


@pytest.fixture(scope="module")
def verifier():
    v = Verifier(VerifyOptions(device="cpu", timeout=60, seeds=2), pool=WorkerPool(size=1))
    v.pool.warm("cpu", "aot")
    yield v
    v.close()


@contextlib.contextmanager
def changed_options(verifier: Verifier, **changes):
    """The module's verifier with other options for one verify (they are read when a verify starts): its
    reference pack and warm workers are reused instead of a new verifier building and starting its own."""
    options = verifier.options
    verifier.options = dataclasses.replace(options, **changes)
    try:
        yield verifier
    finally:
        verifier.options = options


_REPORTS: dict[str, Report] = {}


def softmax_report(verifier: Verifier, name: str) -> Report:
    """The module verifier's report on softmax_case(name), verified once: several tests read the same one."""
    if name not in _REPORTS:
        _REPORTS[name] = verifier.verify(OP, softmax_case(name))
    return _REPORTS[name]


@pytest.mark.parametrize("name, category, needle", [
    ("good", "ok", "correct on"),
    ("autotuned", "ok", "correct on"),
    ("mismatch_mask", "mismatch", "outside tolerance"),
    ("nan_output", "nan_inf", "NaN/Inf"),
    ("compile_error", "compile_error", "expp"),
    ("runtime_error", "runtime_error", "stride"),
    ("wrong_shape", "mismatch", "shape (48, 201), expected (48, 200)"),
    ("wrong_dtype", "mismatch", "dtype torch.float64, expected torch.float32"),
    ("segfault", "runtime_error", "out-of-bounds"),  # the interpreter's bounds check stops it before it crashes
    ("os_exit", "policy_violation", "_exit"),
])
def test_category(verifier, name, category, needle):
    report = softmax_report(verifier, name)
    assert report.category == category, report.message
    assert report.verdict == ("accepted" if category == "ok" else "rejected")
    assert needle in report.message or needle in report.feedback, (report.message, report.feedback)
    assert report.category in CATEGORIES


def test_accepted_report_is_complete(verifier):
    report = softmax_report(verifier, "good")
    names = [s.name for s in report.stages]
    for stage in ("load", "policy", "reference", "import", "correctness", "compile", "integrity"):
        assert stage in names, names
    assert report.metrics["trials"] == report.metrics["trials_passed"] >= 6  # 2 seeds x 3 input sets
    assert report.metrics["rel_l2"] < 1e-5
    assert report.environment["device"] == "cpu"
    assert "speed was not measured" in report.feedback
    compile_stage = report.stage("compile")
    assert compile_stage.status == "passed"
    assert any(k.get("registers") for k in compile_stage.details["kernels"])  # AOT for sm_90a ran
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.category == "ok" and again.stage("correctness").status == "passed"
    cost = report.metrics["cost_seconds"]  # where the verifier's own time went
    parts = cost["before_worker"] + cost["worker_wall"] + cost["aot"] + cost["judge"]
    assert all(v >= 0 for v in cost.values()) and cost["worker_served"] > 0 and cost["worker_import"] > 0
    assert parts <= report.metrics["verify_seconds"] + 0.05
    assert cost["worker_saving"] > 0 and cost["worker_pack_load"] > 0
    assert report.environment["warmup"]["ok"], report.environment  # a trusted kernel ran while the worker idled


def test_mismatch_feedback_locates_the_error(verifier):
    report = softmax_report(verifier, "mismatch_mask")
    fb = report.feedback
    assert "max abs error" in fb and "rel L2 error" in fb and "expected [" in fb and "got [" in fb


def test_hang_is_killed_at_the_timeout(verifier):
    # the module's verifier, whose softmax pack is built already (no reference worker that a loaded machine
    # could time out instead) and whose pooled worker has its imports done: 10 s is the candidate's alone.
    # That the hang was stopped is shown by this test returning, with the candidate blamed for its own limit
    with changed_options(verifier, timeout=10):
        report = verifier.verify(OP, softmax_case("hang"))
    assert report.category == "timeout" and report.blame == "candidate", report.message
    assert "10 s limit" in report.message


def test_os_exit_is_reported_not_fatal(verifier):
    # The static policy would reject `import os`; turn it off to exercise the process boundary itself.
    with changed_options(verifier, static_policy=False):
        report = verifier.verify(OP, softmax_case("os_exit"))
    assert report.category == "runtime_error"
    assert "exited with status 3" in report.message


def test_malformed_problem_blames_the_problem(tmp_path):
    bad = tmp_path / "op.py"
    bad.write_text("import torch\n\ndef get_inputs():\n    return []\n")
    with Verifier(VerifyOptions(device="cpu", seeds=1)) as v:
        report = v.verify(bad, softmax_case("good"))
    assert report.category == "load_error" and report.blame == "problem"
    assert "missing" in report.message and "Model" in report.message


def test_candidate_without_modelnew(tmp_path):
    cand = tmp_path / "kernel.py"
    cand.write_text("import torch\n\nclass Other(torch.nn.Module):\n    pass\n")
    with Verifier(VerifyOptions(device="cpu", seeds=1)) as v:
        report = v.verify(OP, cand)
    assert report.category == "load_error" and report.blame == "candidate"
    assert "ModelNew" in report.message


def test_signature_mismatch_is_a_load_error(tmp_path):
    src = (softmax_case("good")).read_text().replace("def forward(self, x):", "def forward(self, x, y):")
    cand = tmp_path / "kernel.py"
    cand.write_text(src)
    with Verifier(VerifyOptions(device="cpu", seeds=1)) as v:
        report = v.verify(OP, cand)
    assert report.category == "load_error"
    assert "does not match Model.forward" in report.message


def test_bf16_dot_runs_like_the_gpu(verifier):
    """The interpreter multiplies bf16 storage bits unless the worker widens them (interp_fixes)."""
    report = verifier.verify(PROBLEMS / "corpus" / "matmul_bf16.py", HONEST / "matmul_bf16" / "good.py")
    assert report.category == "ok", report.message
    assert report.environment["interpreter_bf16_dot"] == "fp32"


@pytest.mark.parametrize("name", ["max_values_indices", "cumsum_dim_arg"])
def test_tuple_integer_and_int_argument_problems(verifier, name):
    """Outputs that are tuples with an integer member; a Python int passed to forward."""
    report = verifier.verify(PROBLEMS / "ops" / f"{name}.py",
                             HONEST / "shapes" / f"{name}.py")
    assert report.category == "ok", (report.message, report.feedback)


def test_candidate_that_imports_dynamo_is_accepted_and_the_late_import_is_named(verifier):
    """Workers skip torch._dynamo (seconds cold); a candidate that imports it pays for it and is not
    mistaken for one that patched torch.manual_seed (dynamo's import rewraps it)."""
    report = verifier.verify(OP, softmax_case("imports_dynamo"))
    assert report.category == "ok", (report.message, report.feedback)
    assert "torch._dynamo" in report.metrics["cost_notes"]["late_imports"]
    plain = softmax_report(verifier, "good")
    assert plain.metrics["cost_notes"]["late_imports"] == []  # the harness itself pulls nothing heavy in


def test_terminal_control_sequences_from_the_candidate_are_written_out(verifier, tmp_path):
    """A window title (OSC 0), a clipboard write (OSC 52) and a screen clear (CSI 2J) in what the candidate
    prints and raises reach the report only as visible text."""
    cand = tmp_path / "escapes.py"
    cand.write_text(
        "import sys\nimport torch.nn as nn\n\n\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n"
        "        sys.stderr.write('\\x1b]0;owned\\x07\\x1b[2J')\n"
        "        raise RuntimeError('\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07 done')\n")
    report = verifier.verify(OP, cand)
    text = json.dumps(report.to_dict())
    assert report.category == "runtime_error", report.message
    assert "\\u001b" not in text and "\\u0007" not in text  # JSON would escape a raw ESC or BEL like this
    assert "\\\\x1b]52;c;" in text  # still there to read, as text


def test_a_verifier_failure_is_a_report_not_a_traceback(monkeypatch):
    """Whatever goes wrong inside the verifier's own code, verify() returns a report (internal_error, blamed
    on the verifier): the agent and MCP clients never get an exception (red team, 2026-12-03)."""
    def broken(*_args, **_kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    with Verifier(VerifyOptions(device="cpu", seeds=1)) as v:
        monkeypatch.setattr(v, "_verify", broken)
        report = v.verify(OP, softmax_case("good"))
    assert report.category == "internal_error" and report.blame == "verifier"
    assert report.verdict == "rejected" and "RecursionError" in report.message
