"""GPU verification: the same failure categories as on CPU, timing, and cheats only a GPU shows.

Run on the H200: `pytest -m gpu tests/gpu`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool
from tests.paths import SOFTMAX_PROBLEM, WRONG, softmax_case

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
CHEATS = WRONG / "gpu"


@pytest.fixture(scope="module")
def gpu_verifier():
    v = Verifier(VerifyOptions(device="cuda", timeout=120, seeds=2), pool=WorkerPool(size=1))
    yield v
    v.close()


@pytest.fixture(scope="module")
def gpu_dynamic_only():
    v = Verifier(VerifyOptions(device="cuda", timeout=120, seeds=2, static_policy=False), pool=WorkerPool(size=1))
    yield v
    v.close()


@pytest.mark.parametrize("name, category", [
    ("good", "ok"), ("mismatch_mask", "mismatch"), ("nan_output", "nan_inf"), ("compile_error", "compile_error"),
    ("runtime_error", "runtime_error"), ("wrong_shape", "mismatch"), ("segfault", "runtime_error"),
])
def test_categories_on_gpu(gpu_verifier, name, category):
    report = gpu_verifier.verify(SOFTMAX_PROBLEM, softmax_case(name))
    assert report.category == category, report.message


def test_accepted_kernel_is_timed(gpu_verifier):
    report = gpu_verifier.verify(SOFTMAX_PROBLEM, softmax_case("good"))
    m = report.metrics
    assert report.accepted
    assert m["candidate_ms"] > 0 and m["eager_ms"] > 0
    lo, hi = m["speedup_eager_ci"]
    assert lo <= m["speedup_eager"] <= hi
    assert m["roofline_pct"] is not None and 0 < m["roofline_pct"] <= 100
    assert report.environment["gpu"]
    assert any(k.get("registers") for k in report.stage("compile").details["kernels"])


@pytest.mark.parametrize("entry", ["rms_norm", "softmax"])
def test_library_kernel_with_a_backward_is_accepted_and_timed(gpu_verifier, entry):
    """Forward+backward timing: the upstream gradients are the verifier's own ops, and the weight's
    gradient is fingerprinted on both sides (both rejected every shipped kernel in the 2026-12-02 batch)."""
    folder = ROOT / "kernelagent" / "kernels" / entry
    report = gpu_verifier.verify(folder / "reference.py", folder / "triton.py")
    assert report.accepted, report.message
    assert report.metrics["candidate_ms"] > 0


def test_side_stream_is_caught(gpu_dynamic_only):
    report = gpu_dynamic_only.verify(SOFTMAX_PROBLEM, CHEATS / "side_stream.py")
    assert report.category == "stream_violation", report.message


def test_side_stream_is_a_policy_violation(gpu_verifier):
    report = gpu_verifier.verify(SOFTMAX_PROBLEM, CHEATS / "side_stream.py")
    assert report.category == "policy_violation"


def test_pointer_cache_is_caught(gpu_verifier):
    report = gpu_verifier.verify(SOFTMAX_PROBLEM, CHEATS / "pointer_cache.py")
    assert report.category in ("caching_detected", "mismatch"), report.message
    assert not report.accepted


def test_timing_matches_do_bench():
    import torch
    import triton.testing

    from kernelagent.verifier.measure.timing import measure

    x = torch.randn(8192, 8192, device="cuda")
    fn = lambda: torch.softmax(x, -1)  # noqa: E731
    ours = measure([fn]).median_ms
    theirs = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
    assert abs(ours - theirs) / theirs < 0.03, (ours, theirs)


def test_profile_covers_every_kernel_launch():
    opts = VerifyOptions(device="cuda", timeout=40, seeds=1, profile=True)
    with Verifier(opts, pool=WorkerPool(size=1)) as v:
        report = v.verify(SOFTMAX_PROBLEM, softmax_case("two_kernels"))
    stage = report.stage("profile")
    assert stage is not None and stage.status == "passed", (stage and stage.message, report.message)
    kernels = stage.details["kernels"]
    names = {k["kernel"] for k in kernels}
    assert any("row_stats" in n for n in names) and any("normalise" in n for n in names), names
    assert all(k.get("duration_ns", 0) > 0 for k in kernels)
    assert any(isinstance(k.get("dram_pct"), float) for k in kernels)
    assert "Nsight Compute" in report.feedback


def test_sanitize_passes_a_clean_kernel_and_rejects_an_out_of_bounds_read():
    opts = VerifyOptions(device="cuda", timeout=40, seeds=1, sanitize=True, timing=False)
    with Verifier(opts, pool=WorkerPool(size=1)) as v:
        clean = v.verify(SOFTMAX_PROBLEM, softmax_case("good"))
        oob = v.verify(SOFTMAX_PROBLEM, softmax_case("oob_read"))
    both = {name: (r.category, r.message, st.message, st.details) if (st := r.stage("sanitize")) else
            (r.category, r.message) for name, r in (("clean", clean), ("oob", oob))}
    print(both)  # the whole of both stages in the log, whichever assertion fails
    assert clean.accepted and clean.stage("sanitize").status == "passed", both
    assert all(r["errors"] == 0 and r["launches"] for r in clean.stage("sanitize").details.values())
    assert not oob.accepted and oob.category == "runtime_error", (oob.category, oob.message,
                                                                   oob.stage("sanitize").details)
    assert "memcheck" in oob.message
