"""Timing integrity: candidates written against the timing code (tests/corpus/wrong/timing/) are rejected,
or — where the trick never pays once every call sees new values (`# expect: harmless`) — accepted at no more
than the honest kernel's speed; honest kernels (tests/corpus/honest/timing/) are accepted and timed like
`triton.testing.do_bench` on fresh inputs. GPU only: run on the H200.

Header of a file: `# expect: CAT|CAT...` (any of them), `harmless`, or `ok`; `# problem: NAME`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelagent.problem import load_module
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool
from tests.paths import HONEST, PROBLEMS, WRONG

CHEATS = sorted((WRONG / "timing").glob("*.py"))
GOOD = sorted((HONEST / "timing").glob("*.py"))


def header(path: Path, key: str) -> str:
    match = re.search(rf"^# {key}: ?(.*)$", path.read_text(), re.MULTILINE)
    assert match is not None, f"{path.name}: no '# {key}:' line"
    return match.group(1).strip()


def problem_of(path: Path) -> Path:
    return PROBLEMS / "corpus" / f"{header(path, 'problem')}.py"


def test_the_corpus_covers_every_class():
    names = {p.stem for p in CHEATS}
    for needed in ("memo_identity", "memo_version", "memo_sampled", "memo_item_hash", "rotation", "cadence_host",
                   "cadence_gpu_clock", "poison_observer", "hook_observer", "uneven_work", "skip_store",
                   "no_max_subtraction", "capture_skip"):
        assert needed in names, needed
    assert {p.stem for p in GOOD} >= {"plain", "workspace_three_launches", "persistent", "autotuned", "plain_small"}


@pytest.fixture(scope="module")
def gpu():
    opts = VerifyOptions(device="cuda", timeout=300, seeds=2, static_policy=False)
    with Verifier(opts, pool=WorkerPool(size=1)) as v:
        yield v


_REPORTS: dict[str, object] = {}


def report(gpu, path: Path):
    if path.stem not in _REPORTS:
        _REPORTS[path.stem] = gpu.verify(problem_of(path), path)
    return _REPORTS[path.stem]


@pytest.mark.gpu
@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_honest_kernel_is_accepted_and_timed(gpu, path: Path):
    rep = report(gpu, path)
    assert rep.verdict == "accepted", f"{path.stem}: {rep.category}: {rep.message}"
    assert rep.metrics.get("candidate_ms") and rep.metrics.get("timed_calls_checked", 0) >= 12
    assert rep.metrics.get("roofline_pct") is not None


@pytest.mark.gpu
@pytest.mark.parametrize("path", [p for p in CHEATS if header(p, "expect") != "harmless"], ids=lambda p: p.stem)
def test_timing_cheat_is_rejected(gpu, path: Path):
    rep = report(gpu, path)
    allowed = header(path, "expect").split("|")
    assert rep.verdict == "rejected", f"{path.stem} accepted: {rep.metrics.get('speedup_eager')}x eager"
    assert rep.category in allowed, f"{path.stem}: {rep.category}: {rep.message}"


@pytest.mark.gpu
@pytest.mark.parametrize("path", [p for p in CHEATS if header(p, "expect") == "harmless"], ids=lambda p: p.stem)
def test_a_trick_that_never_pays_gains_nothing(gpu, path: Path):
    rep = report(gpu, path)
    honest = report(gpu, HONEST / "timing" / "plain.py")
    if rep.verdict == "rejected":
        return  # rejecting it is fine too
    assert rep.metrics["candidate_ms"] >= 0.9 * honest.metrics["candidate_ms"], (
        f"{path.stem}: {rep.metrics['candidate_ms']:.4f} ms against the honest {honest.metrics['candidate_ms']:.4f}")


def _do_bench_fresh(path: Path, shape: tuple[int, int]) -> float:
    """triton.testing.do_bench's median on a rotation of 16 distinct input sets (fresh enough for an
    honest kernel: none of them is in L2, do_bench flushes it)."""
    import torch
    import triton

    model = load_module(path, f"bench_{path.stem}", "candidate").ModelNew().cuda()
    xs = [torch.randn(*shape, device="cuda") for _ in range(16)]
    state = {"i": 0}

    def call() -> None:
        state["i"] += 1
        model(xs[state["i"] % len(xs)])

    call()
    return float(triton.testing.do_bench(call, warmup=50, rep=400, return_mode="median"))


@pytest.mark.gpu
@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_timing_agrees_with_do_bench_on_fresh_inputs(gpu, path: Path):
    """Within 5 % of do_bench; for kernels of a few microseconds no more than do_bench, whose back-to-back calls
    are bound by their launches there (ours hides the launch behind a spin, or replays a captured graph)."""
    rep = report(gpu, path)
    ours = rep.metrics["candidate_ms"]
    shape = tuple(load_module(problem_of(path), f"problem_{path.stem}").get_inputs()[0].shape)
    with gpu.pool.gpu_quiet():  # no pooled worker starting on the GPU meanwhile
        theirs = _do_bench_fresh(path, shape)
    floor = rep.metrics.get("roofline_floor_ms") or 0.0
    assert ours >= 0.9 * floor, f"{path.stem}: {ours:.4f} ms, under the memory's floor {floor:.4f} ms"
    if theirs < 0.02:
        assert ours <= theirs * 1.05, f"{path.stem}: ours {ours:.4f} ms ({rep.metrics.get('timing_method')}), " \
                                      f"do_bench {theirs:.4f} ms"
        return
    assert abs(ours - theirs) / theirs < 0.05, f"{path.stem}: ours {ours:.4f} ms, do_bench {theirs:.4f} ms"



# Caught before any timing (the correctness trials and probes run on CPU too): new values in the same
# buffers with the version counter untouched, a near-duplicate input, a large-scale input set.
# (memo_sampled is GPU only: on CPU-sized sets its 256 samples cover every element, a full-content key)
CPU_CAUGHT = ("memo_identity", "memo_version", "no_max_subtraction")


@pytest.fixture(scope="module")
def cpu():
    opts = VerifyOptions(device="cpu", timeout=120, seeds=1, static_policy=False)
    with Verifier(opts, pool=WorkerPool(size=1)) as v:
        yield v


@pytest.mark.parametrize("name", CPU_CAUGHT)
def test_caught_without_a_gpu(cpu, name: str):
    path = WRONG / "timing" / f"{name}.py"
    rep = cpu.verify(problem_of(path), path)
    assert rep.verdict == "rejected", f"{name} accepted on CPU: {rep.message}"
    assert rep.category in header(path, "expect").split("|") + ["mismatch"], f"{name}: {rep.category}: {rep.message}"
