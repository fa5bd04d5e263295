"""The timed calls are held to the correctness trials' precision, estimated from their fingerprints.

Red-team review 4 (2026-12-02): a candidate exact whenever its whole output is compared and on bf16 tensor
cores in the timed calls (which it told apart by the poison the checked calls' fresh allocations hold) passed
the per-projection test, whose allowance is the rounding of a whole output; its timed outputs had a rel L2
error of 2.4e-3 where the trials allow 1e-5. Here the reference worker's code makes the check fingerprints on
the CPU and `time_model` makes the candidate's, on tests.helpers.FakeGPU's clock."""

from __future__ import annotations

from pathlib import Path

import torch

from kernelagent.verifier import protocol as P
from kernelagent.verifier import tensorio
from kernelagent.verifier.judge.timed import check_prints, precision_held, tolerance_for
from kernelagent.verifier.measure.fresh import DrawMode
from kernelagent.verifier.reference import baseline
from kernelagent.verifier.reference.run import ReferenceRunner
from kernelagent.verifier.worker.timed import stack_prints, time_model
from tests.helpers.fakegpu import FakeGPU

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return a @ b

def get_inputs():
    return [torch.randn(48, 96), torch.randn(96, 40)]

def get_init_inputs():
    return []
'''


class Exact(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a.T.contiguous().T @ b)  # fp32, another memory order: honest rounding differences


class Bf16WhenTimed(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a.bfloat16() @ b.bfloat16()).float()


def _judged(tmp_path: Path, monkeypatch, model: torch.nn.Module, tolerance: dict | None = None) -> tuple[str, bool]:
    problem = tmp_path / "mm.py"
    problem.write_text(PROBLEM + (f"\nTOLERANCE = {tolerance!r}\n" if tolerance else ""))
    out = tmp_path / "ref"
    runner = ReferenceRunner(P.ReferenceRequest(problem=str(problem), device="cpu", secret=7, seeds=2,
                                                out_dir=str(out), cpu_max_elements=1_000_000))
    meta = runner.run()
    plan = P.TimingPlan.new()
    checks = P.CheckPlan.new(P.GUARANTEED_CALLS, P.CHECKED_SPAN - P.GUARANTEED_CALLS)
    meta["timing"] = {"draws": {"kind": "fresh", "pool": 8}, "template_trial": 0}
    baseline.check_prints(runner, meta, plan, checks)
    ref = tensorio.load(out / "ref" / "checks.pt", "cpu")
    template = tensorio.load(out / "pack" / "inputs_0.pt", "cpu")["inputs"]
    FakeGPU(monkeypatch)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    _, calls = time_model(model, runner.problem.module.get_inputs, template, plan, DrawMode("fresh"), "cpu", False,
                          fingerprints=True, use_graph=False)
    cand = stack_prints(calls.prints)
    rel, atol = tolerance_for([torch.float32], tolerance)
    return precision_held(cand, ref, tolerance), check_prints(cand, ref, rel, atol).ok


def test_lower_precision_in_the_timed_calls_is_caught(tmp_path, monkeypatch):
    found, per_projection_ok = _judged(tmp_path, monkeypatch, Bf16WhenTimed())
    assert per_projection_ok  # what let it through before
    assert "computed less precisely than the checked ones" in found, found


def test_honest_rounding_differences_pass(tmp_path, monkeypatch):
    found, per_projection_ok = _judged(tmp_path, monkeypatch, Exact())
    assert per_projection_ok and found == "", found


def test_a_problem_with_its_own_tolerance_is_held_to_what_that_tolerance_allows(tmp_path, monkeypatch):
    """Red-team review 5: the check was skipped where the problem sets TOLERANCE, and the same cheat passed
    there; the band is then the element-wise bound's L2 size, atol·√n + rtol·‖y‖."""
    tol = {"atol": 1e-4, "rtol": 1e-4}
    found, per_projection_ok = _judged(tmp_path, monkeypatch, Bf16WhenTimed(), tol)
    assert per_projection_ok and "computed less precisely" in found, found
    (tmp_path / "honest").mkdir()
    found, _ = _judged(tmp_path / "honest", monkeypatch, Exact(), tol)
    assert found == "", found
