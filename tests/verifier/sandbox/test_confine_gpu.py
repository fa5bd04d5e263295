"""Confinement on a GPU: CUDA, Triton and CuTe DSL work inside the walls, and so do ncu and
compute-sanitizer started by the namespace launcher. Run on the H200: `pytest -m gpu tests/verifier/sandbox`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[3]
OP = ROOT / "examples/softmax/op.py"


def _verify(kernel: str, **extra) -> object:
    with Verifier(VerifyOptions(device="cuda", seeds=2, timeout=300, **extra),
                  pool=WorkerPool(size=0, confinement="strict")) as v:
        return v.verify(OP, ROOT / kernel)


def test_triton_candidate_is_accepted_inside_strict_walls():
    report = _verify("examples/softmax/kernel.py")
    assert report.accepted, report.message
    walls = report.environment["confinement"]
    assert walls["level"] == "strict" and walls["landlock"].startswith("fs"), walls
    assert walls["namespaces"] == ["user", "pid", "mount", "ipc", "uts", "net"]
    assert report.metrics.get("candidate_ms"), "timed inside the walls"
    assert any(k.startswith("speedup_") for k in report.metrics), "baselines (eager, torch.compile) timed too"


@pytest.mark.cute
def test_cute_candidate_is_accepted_inside_strict_walls():
    report = _verify("examples/softmax/kernel_cute.py")
    assert report.accepted, report.message
    assert report.environment["confinement"]["level"] == "strict"


@pytest.mark.skipif(not (shutil.which("ncu") and shutil.which("compute-sanitizer")),
                    reason="ncu or compute-sanitizer not on PATH")
def test_profile_and_sanitize_run_under_the_launcher():
    report = _verify("examples/softmax/kernel.py", profile=True, sanitize=True)
    assert report.accepted, report.message
    profile, sanitize = report.stage("profile"), report.stage("sanitize")
    assert profile is not None and profile.status == "passed", profile
    assert sanitize is not None and sanitize.status == "passed", sanitize
