"""The judge's rules on synthetic worker facts (no GPU needed): the parent decides what recorded ops mean,
what a structure mismatch is, what host traffic means, and judges the timed calls (fingerprints on fresh
draws, launches per call, the physics floor)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelagent.verifier import tensorio
from kernelagent.verifier.judge.checks import Judge
from kernelagent.verifier.measure.fresh import Fingerprinter, l2_norms
from kernelagent.verifier.protocol import CallFacts, CandidateFacts, TimingFacts, Transfers
from kernelagent.verifier.report import CATEGORY_PRIORITY

DESC = "[Tensor(4, 8):float32]"


def _trial(tid: int, seed: int) -> dict:
    return {"id": tid, "seed": seed, "set": 0, "state": 0, "dist": "native", "input_desc": DESC,
            "structure": "Tensor(4, 8):float32", "input_bytes": 128}


def _calls(**kw) -> dict[int, CallFacts]:
    base = {"launches": 1, "structure": "Tensor(4, 8):float32", "types": ["tensor"], "devices": ["cpu"]}
    return {0: CallFacts(**{**base, **kw}), 1: CallFacts(**base)}


@pytest.fixture()
def world(tmp_path: Path):
    refs, out = tmp_path / "refs", tmp_path / "out"
    refs.mkdir()
    out.mkdir()
    answers = {tid: torch.softmax(torch.randn(4, 8, generator=torch.Generator().manual_seed(tid)), -1)
               for tid in (0, 1)}
    for tid, y in answers.items():
        tensorio.save(refs / f"ref_{tid}.pt", {"native": [y], "f64": [y.double()]})
        tensorio.save(out / f"cand_{tid}.pt", {"outputs": [y.clone()]})
    meta = {"device": "cpu", "problem": {"tolerance": None}, "trials": [_trial(0, 0), _trial(1, 1)],
            "timing": {"template_trial": 0}}

    def judge(device: str = "cpu", floor: float | None = None, cand: dict[int, torch.Tensor] | None = None,
              **facts) -> str | None:
        for tid, y in (cand or {}).items():
            tensorio.save(out / f"cand_{tid}.pt", {"outputs": [y]})
        f = CandidateFacts(**{"trials": _calls(), **facts})
        findings = Judge(refs, {**meta, "device": device}, f, out, physics_floor_ms=floor).run().findings
        return min(findings, key=lambda x: CATEGORY_PRIORITY.index(x.category)).category if findings else None

    return judge, answers, refs, out


def test_honest_facts_give_no_finding(world):
    judge, *_ = world
    assert judge() is None


def test_outputs_changing_after_the_stream_finished_is_a_stream_violation(world):
    judge, *_ = world
    assert judge(trials=_calls(late_writes=True)) == "stream_violation"


def test_stale_answer_on_reused_buffers_is_caching_unless_work_was_left_running(world):
    """The reuse probe's stale answer means caching, unless outputs were still being written after the
    current stream finished (a side stream): then the probe read them early."""
    judge, answers, _, out = world
    tensorio.save(out / "probe.pt", {"outputs": [answers[0]]})  # partner 1's inputs, 0's answer
    assert judge(cache_probe={"first": 0, "partner": 1}) == "caching_detected"
    assert judge(cache_probe={"first": 0, "partner": 1, "late_writes": True}) == "stream_violation"


def test_the_parent_decides_which_ops_computed(world):
    judge, *_ = world
    assert judge(trials=_calls(ops={"aten.empty_like": 1, "aten.view": 2})) is None
    assert judge(trials=_calls(ops={"aten._softmax": 1})) == "fallback_to_reference"


def test_library_ops_whose_bodies_were_recorded_are_the_candidates_kernels(world):
    judge, *_ = world
    assert judge(trials=_calls(ops={"mylib.fused": 1}, opened=["mylib.fused"])) is None
    assert judge(trials=_calls(ops={"mylib.fused": 1})) == "fallback_to_reference"  # a body nobody saw


def test_gradient_sums_of_the_autograd_engine_are_forgiven(world):
    judge, *_ = world
    assert judge(trials=_calls(ops={"aten.add": 1}, grad_leaves=2)) is None
    assert judge(trials=_calls(ops={"aten.add": 5}, grad_leaves=2)) == "fallback_to_reference"


def test_a_different_output_structure_is_a_mismatch(world):
    judge, *_ = world
    assert judge(trials=_calls(structure="(Tensor(4, 8):float32,)")) == "mismatch"
    assert judge(trials=_calls(structure="{out: [Tensor(4, 8):float32]}")) == "mismatch"


def test_input_data_copied_to_the_host_is_host_compute_on_a_gpu(world):
    judge, *_ = world
    big = _calls(transfers=Transfers(d2h_bytes=1 << 20))
    loop = _calls(transfers=Transfers(scalar_reads=512))
    one = _calls(transfers=Transfers(scalar_reads=1))
    for t in (big, loop, one):
        for c in t.values():
            c.devices = ["cuda"]
    assert judge(device="cuda", trials=big) == "fallback_to_reference"
    assert judge(device="cuda", trials=loop) == "fallback_to_reference"
    assert judge(device="cuda", trials=one) is None


# ---------------------------------------------------------------------------------------- timed calls


def _timing(**kw) -> TimingFacts:
    cand = {"median_ms": 1.0, "mean_ms": 1.0, "samples_ms": [1.0] * 40, "host_ratio": 1.0, "host_ms_per_call": 1.0}
    return TimingFacts(**{"candidate": cand, "mode": "forward", "draws": "fresh", "calls": 40, "launches": 40, **kw})


def _prints(refs: Path, out: Path, wrong_at: set[int], missing: set[int] = frozenset()) -> None:
    """Reference and candidate fingerprints for 40 calls on random draws; calls in `wrong_at` return the
    previous call's answer (a memo)."""
    printer = Fingerprinter(seed=7, k=3, device="cpu")
    positions = [1, 5, 9, 14, 22, 30]
    outs = [torch.softmax(torch.randn(4, 8, generator=torch.Generator().manual_seed(100 + i)), -1) for i in range(40)]
    nat = torch.stack([printer([outs[p]]) for p in positions])
    f64 = torch.stack([printer([outs[p].double()]) for p in positions])
    scales = torch.tensor([l2_norms([outs[p].double()]) for p in positions], dtype=torch.float64)
    tensorio.save(refs / "checks.pt", {"positions": positions, "native": nat, "f64": f64, "scales": scales,
                                       "numel": [32]})
    calls = [i for i in range(40) if i not in missing]
    got = torch.stack([printer([outs[i - 1] if i in wrong_at else outs[i]]) for i in calls])
    tensorio.save(out / "timed_prints.pt", {"calls": calls, "prints": got})


def test_timed_calls_with_the_right_answers_pass(world):
    judge, _, refs, out = world
    _prints(refs, out, wrong_at=set())
    assert judge(timing=_timing()) is None


def test_a_timed_call_answering_other_inputs_is_a_timing_violation(world):
    judge, _, refs, out = world
    _prints(refs, out, wrong_at={14})
    assert judge(timing=_timing()) == "timing_violation"


def test_unchecked_wrong_calls_are_not_seen_but_missing_fingerprints_are(world):
    judge, _, refs, out = world
    _prints(refs, out, wrong_at={15})  # not a checked position
    assert judge(timing=_timing()) is None
    _prints(refs, out, wrong_at=set(), missing={9})
    assert judge(timing=_timing()) == "timing_violation"


def test_calls_that_launch_nothing_while_timed_are_a_timing_violation(world):
    judge, _, refs, out = world
    _prints(refs, out, wrong_at=set())
    assert judge(timing=_timing(launches=14)) == "timing_violation"


def test_a_time_below_the_physics_floor_is_rejected(world):
    judge, _, refs, out = world
    _prints(refs, out, wrong_at=set())
    assert judge(timing=_timing(), floor=2.0) == "timing_violation"
    assert judge(timing=_timing(), floor=1.1) is None  # within the margin


def test_compute_while_timed_is_fallback(world):
    judge, _, refs, out = world
    _prints(refs, out, wrong_at=set())
    assert judge(timing=_timing(ops={"aten._softmax": 40})) == "fallback_to_reference"


def test_a_kernel_wrong_everywhere_is_a_mismatch(world):
    judge, answers, refs, out = world
    _prints(refs, out, wrong_at=set(range(40)))
    bad = {0: answers[0] * 1.05, 1: answers[1] * 1.05}
    assert judge(cand=bad, timing=_timing()) == "mismatch"


def test_work_on_a_stream_other_than_the_callers_is_a_stream_violation(world):
    """Work queued on a private stream can run before the timing's start event opens (beside the input
    refresh, the flush, the spin), even when it is joined: any op or launch off the caller's stream."""
    judge, _, refs, out = world
    assert judge(trials=_calls(transfers=Transfers(foreign_streams=2))) == "stream_violation"
    _prints(refs, out, wrong_at=set())
    assert judge(timing=_timing()) is None
    assert judge(timing=_timing(transfers=Transfers(foreign_streams=1))) == "stream_violation"


def test_an_output_that_is_pytorchs_copy_of_the_input_is_fallback(world):
    judge, *_ = world
    assert judge(trials=_calls(copied=[0])) == "fallback_to_reference"
    assert judge(trials=_calls(copied=[0], launches=0)) == "no_kernel_launched"


def test_a_launch_slower_than_the_gpu_is_noted_not_rejected(world, tmp_path):
    """The spin before each timed call hides the host's launch time; the judge says when it exceeded the GPU's."""
    _, _, refs, out = world
    _prints(refs, out, wrong_at=set())
    meta = {"device": "cpu", "problem": {"tolerance": None}, "trials": [_trial(0, 0), _trial(1, 1)],
            "timing": {"template_trial": 0}}

    def notes(**cand) -> list[str]:
        timing = _timing()
        timing.candidate.update({"method": "events", **cand})
        j = Judge(refs, meta, CandidateFacts(trials=_calls(), timing=timing), out).run()
        assert not j.findings, j.findings
        return [n for n in j.notes if "host time" in n]

    assert notes(launch_host_ms=2.5) and "2.500 ms of host time" in notes(launch_host_ms=2.5)[0]
    assert notes(launch_host_ms=0.9) == []            # the GPU took longer than the launch
    assert notes(launch_host_ms=None) == []           # nothing measured
    assert notes(launch_host_ms=2.5, method="cuda_graph") == []  # a graph replay has no per-call launch


def test_no_launch_after_launching_on_inputs_of_the_same_shapes_is_caching(world):
    """A memo keyed on the input's address hits when the allocator hands that address out again to a later
    trial: the trial launches nothing and returns the old answer (cache_data_ptr, one CI run)."""
    judge = world[0]
    base = {"structure": "Tensor(4, 8):float32", "types": ["tensor"], "devices": ["cpu"]}
    assert judge(trials={0: CallFacts(launches=1, **base), 1: CallFacts(launches=0, **base)}) == "caching_detected"
    # nothing launched first: no remembered answer to return, the call simply launched nothing
    assert judge(trials={0: CallFacts(launches=0, **base), 1: CallFacts(launches=1, **base)}) == "no_kernel_launched"


def test_a_flush_slowed_by_the_candidate_is_a_stream_violation(world):
    """Work on a stream of the candidate's own, left running between calls, can compute from the new inputs
    while L2 is flushed, before the start event (red-team review, 2026-12-02): if it takes the GPU for that,
    the flush grows beyond the flush before the reference's calls."""
    judge, _, refs, out = world
    _prints(refs, out, wrong_at=set())
    eager = {"flush_ms": [0.08] * 40}

    def verdict(windows: list[float]) -> str | None:
        timing = _timing()
        timing.candidate["flush_ms"] = windows
        f = CandidateFacts(trials=_calls(), timing=timing)
        findings = Judge(refs, {"device": "cpu", "problem": {"tolerance": None},
                                "trials": [_trial(0, 0), _trial(1, 1)], "timing": {"template_trial": 0},
                                "baseline": {"eager": eager}}, f, out).run().findings
        return min(findings, key=lambda x: CATEGORY_PRIORITY.index(x.category)).category if findings else None

    assert verdict([0.08] * 40) is None
    assert verdict([0.16] * 30 + [0.08] * 10) is None    # within 1.5x + 0.05 ms: a workspace's dirty L2 lines
    assert verdict([0.6] * 20 + [0.08] * 20) == "stream_violation"
    assert verdict([0.6] * 5 + [0.08] * 35) is None      # a few slow windows: noise, not a pattern


def test_a_probe_that_launches_nothing_on_a_trials_inputs_is_caching(world):
    """The determinism probe re-runs trial 0 on a copy of its inputs: a memo keyed on the address returns the
    old answer there when the copy lands where trial 0's did (cache_data_ptr, a CI run)."""
    judge = world[0]
    base = {"structure": "Tensor(4, 8):float32", "types": ["tensor"], "devices": ["cpu"]}
    trials = {0: CallFacts(launches=1, **base), 1: CallFacts(launches=1, **base)}
    assert judge(trials=trials, probe_calls={"repeat": CallFacts(launches=0, **base)}) == "caching_detected"
    assert judge(trials=trials, probe_calls={"repeat": CallFacts(launches=1, **base)}) is None


@pytest.mark.parametrize("where", ["raw", "record"])
def test_a_folder_where_the_worker_writes_a_record_is_a_finding(world, where):
    # red-team review (2026-12-03): folders named like a record's raw side files made the judge skip
    # every record and accept a wrong answer, 'correct on 0 trials'
    judge, _, _, out = world
    wrong = {tid: torch.zeros(4, 8) for tid in (0, 1)}
    judge(cand=wrong)  # the zeros written as the records
    for tid in (0, 1):
        if where == "raw":
            (out / f"cand_{tid}.pt.0.raw").mkdir()
        else:
            (out / f"cand_{tid}.pt").unlink()
            (out / f"cand_{tid}.pt").mkdir()
    assert judge() == "policy_violation"


def test_the_engine_sum_allowance_covers_add_and_add_together():
    # one allowance for both spellings: an aten.add_ in the backward no longer also pays for an aten.add in
    # forward (red-team review of the fixes, 2026-12-03)
    from kernelagent.verifier.oprules import compute_ops

    assert compute_ops({"aten.add": 1, "aten.add_": 1}, 1) == {"aten.add_": 1}
    assert compute_ops({"aten.add": 2}, 1) == {"aten.add": 1}
    assert compute_ops({"aten.add": 1, "aten.add_": 1}, 2) == {}
    assert compute_ops({"aten.mul": 1, "aten.add_": 1}, 3) == {"aten.mul": 1}


def test_a_worker_error_raised_through_the_candidate_is_the_candidates(tmp_path):
    """The worker reports an exception in its own steps as `internal` (the verifier's fault) unless it passed
    through the candidate's file (a __deepcopy__ or __repr__ of the candidate's run by a verifier step): then
    it is `candidate`, a runtime error blamed on the candidate (red team, 2026-12-03)."""
    from types import SimpleNamespace

    from kernelagent.verifier.judge import verdict as V
    from kernelagent.verifier.options import VerifyOptions
    from kernelagent.verifier.report import Report
    from kernelagent.verifier.sandbox.pool import WorkerResult

    pack = SimpleNamespace(meta={"device": "cpu"}, environment={})
    cspec = SimpleNamespace(backend="triton", source="")
    seen = {}
    for kind in ("internal", "candidate"):
        err = {"kind": kind, "type": "RuntimeError", "message": "boom", "traceback": ""}
        res = WorkerResult("ok", {"error": err}, out_dir=str(tmp_path))
        report = V.decide(Report(), [], res, None, pack, cspec, tmp_path / "kernel.py", VerifyOptions(device="cpu"))
        seen[kind] = (report.category, report.blame)
    assert seen == {"internal": ("internal_error", "verifier"), "candidate": ("runtime_error", "candidate")}
