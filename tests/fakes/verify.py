"""A fake verify function that judges a candidate by a marker comment in its source.

    # FAKE: compile_error          rejected, a compiler error in the feedback
    # FAKE: mismatch               rejected, a mismatch summary in the feedback
    # FAKE: ok speedup=1.7         accepted and timed on a (fake) GPU
    # FAKE: ok                     accepted on CPU: no timing
    # FAKE: compile_only           unverified: compiled for sm_90a, never run (CuTe DSL on a machine without a GPU)
    # FAKE: policy_violation       rejected, a policy finding
    # FAKE: cute_error             rejected, a CuTe DSL error that arrives twice, the second copy coloured
    # FAKE: traceback              rejected, a traceback naming the candidate file by its full path
    # FAKE: ... lang=cute          written in CuTe DSL: rejected when options.backend asks for the other language
    # FAKE: ... sleep=30           sleeps once (while $FAKE_VERIFY_SLEEP_MARKER does not exist; it creates it)

Each finished verification appends the candidate's sha256 to $FAKE_VERIFY_LOG when that is set.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from kernelagent.verifier.judge.feedback import build_feedback
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.report import Report, Stage, rejected, verdict_of

COMPILER_ERROR = ("triton.compiler.errors.CompilationError: at 14:12:\n"
                  "    acc += tl.dot(a, b)\n            ^\nAssertionError: First input shape (16, 8) and "
                  "second input shape (16, 16) are not compatible for matmul")
POLICY = "line 9 [torch_compute]: torch.relu computes in the forward path; write the kernel in Triton"
CUTE_ERROR = ("cutlass.base_dsl.common.DSLRuntimeError: NameError: name 'tile' is not defined\n"
              "  at line 14 of your kernel: cute.copy(tile, dst)")
MISMATCH = ("output 0 differs from the reference on input set 2 (shape (33, 1000), float32): max abs error "
            "0.25 at [7, 511], max rel error 0.5, 12.5% of elements outside atol=1e-05 rtol=1e-05")


def directive(source: str) -> dict[str, str]:
    """The words after `# FAKE:` as a dict: {'ok': '', 'speedup': '1.7', ...}."""
    for line in source.splitlines():
        if line.strip().startswith("# FAKE:"):
            words = line.split(":", 1)[1].split()
            return dict((w.split("=", 1) + [""])[:2] for w in words)
    return {"load_error": ""}


def _maybe_sleep(d: dict[str, str]) -> None:
    marker = os.environ.get("FAKE_VERIFY_SLEEP_MARKER")
    if "sleep" in d and marker and not Path(marker).exists():
        Path(marker).write_text("sleeping")
        time.sleep(float(d["sleep"]))


def _log(source: str) -> None:
    log = os.environ.get("FAKE_VERIFY_LOG")
    if log:
        with open(log, "a") as f:
            f.write(hashlib.sha256(source.encode()).hexdigest() + "\n")


def fake_verify(problem_path: str, candidate_path: str, options: VerifyOptions) -> Report:
    source = Path(candidate_path).read_text()
    d = directive(source)
    _maybe_sleep(d)
    report = _judge(d, str(Path(candidate_path).resolve()), options.backend if options else None)
    _log(source)
    return report


def _judge(d: dict[str, str], path: str = "", backend: str | None = None) -> Report:
    stages = [Stage("load", "passed", 0.01)]
    lang = d.get("lang", "triton")
    if backend and lang != backend:
        return rejected("policy_violation", f"the file is {lang}, but this run asks for {backend}", stages=stages,
                        feedback=f"backend: the candidate uses {lang}; write it in {backend}")
    if "policy_violation" in d:
        return rejected("policy_violation", POLICY, stages=stages, feedback=POLICY)
    if "cute_error" in d:
        coloured = "\x1b[91m" + CUTE_ERROR.replace("\n", "\x1b[0m\n\x1b[91m") + "\x1b[0m"
        return rejected("compile_error", "the CuTe DSL kernel failed to compile", stages=stages,
                        feedback=CUTE_ERROR + "\n" + coloured)
    if "traceback" in d:
        tb = f'Traceback (most recent call last):\n  File "{path}", line 9, in forward\nRuntimeError: boom'
        return rejected("runtime_error", f"forward raised RuntimeError ({path})", stages=stages, feedback=tb)
    if "compile_error" in d:
        return rejected("compile_error", "the Triton kernel failed to compile", stages=stages,
                        feedback=COMPILER_ERROR, environment={"device": "cuda"})
    if "mismatch" in d:
        return rejected("mismatch", "output 0 differs from the reference", stages=stages, feedback=MISMATCH,
                        environment={"device": "cuda"})
    if "compile_only" in d:
        report = Report(verdict=verdict_of("compile_only"), category="compile_only", stages=stages,
                        message="compiled for sm_90a; correctness NOT run (no GPU)", metrics={"compile_only": True},
                        environment={"device": "cpu"})
        report.feedback = build_feedback(report, notes=["correctness was NOT run without a GPU"])
        return report
    if "ok" not in d:
        return rejected("load_error", "no FAKE directive", stages=stages, feedback="no directive")
    if "speedup" not in d:
        return Report(verdict="accepted", category="ok", message="correct (CPU, not timed)", stages=stages,
                      feedback="correct on every trial; timing skipped on CPU", environment={"device": "cpu"})
    s = float(d["speedup"])
    metrics = {"candidate_ms": round(1.0 / s, 6), "eager_ms": 1.0, "compile_ms": 0.8,
               "speedup_eager": s, "speedup_compile": round(0.8 * s, 6), "roofline_pct": 40.0 * s,
               "roofline_bound": "memory"}
    return Report(verdict="accepted", category="ok", message=f"correct, {s:.2f}x over eager", stages=stages,
                  feedback=f"correct; {1.0 / s:.3f} ms vs eager 1.000 ms ({s:.2f}x)", metrics=metrics,
                  environment={"device": "cuda", "gpu": "FAKE H200"})
