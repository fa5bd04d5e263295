"""The judge's GPU-only rules, on synthetic worker facts (no GPU needed): what a wrong timed output
means, outputs still changing after the current stream finished, and no launches after timing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelagent.verifier import tensorio
from kernelagent.verifier.judge.checks import Judge
from kernelagent.verifier.report import CATEGORY_PRIORITY


def _trial(tid: int, seed: int) -> dict:
    return {"id": tid, "seed": seed, "set": 0, "input_desc": "[Tensor(4, 8):float32]", "structure": "Tensor"}


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
    meta = {"device": "cpu", "problem": {"tolerance": None}, "trials": [_trial(0, 0), _trial(1, 1)]}
    facts = {"trials": {"0": {"launches": 1}, "1": {"launches": 1}}, "timing": {"checked_trials": [0, 1]}}

    def judge(timed: dict[int, torch.Tensor] | None = None, cand: dict[int, torch.Tensor] | None = None,
              **extra) -> str | None:
        for tid, y in (cand or {}).items():
            tensorio.save(out / f"cand_{tid}.pt", {"outputs": [y]})
        for tid in (0, 1):
            y = (timed or {}).get(tid, answers[tid])
            tensorio.save(out / f"timed_{tid}.pt", {"outputs": [y]})
        f = {**facts, **extra}
        findings = Judge(refs, meta, f, out).run().findings
        return min(findings, key=lambda x: CATEGORY_PRIORITY.index(x.category)).category if findings else None

    return judge, answers


def test_honest_facts_give_no_finding(world):
    judge, _ = world
    assert judge() is None


def test_timed_output_of_other_inputs_is_caching(world):
    judge, answers = world
    assert judge(timed={1: answers[0]}) == "caching_detected"


def test_timed_output_wrong_otherwise_is_nondeterminism(world):
    judge, answers = world
    assert judge(timed={1: answers[1] * 1.05}) == "nondeterministic"


def test_a_trial_already_wrong_stays_a_mismatch(world):
    judge, answers = world
    wrong = answers[0] * 1.05
    assert judge(cand={0: wrong}, timed={0: wrong}) == "mismatch"


def test_outputs_changing_after_the_stream_finished_is_a_stream_violation(world):
    judge, _ = world
    assert judge(trials={"0": {"launches": 1, "late_writes": True}, "1": {"launches": 1}}) == "stream_violation"


def test_stale_answer_on_reused_buffers_is_caching_unless_work_was_left_running(world, tmp_path):
    """The reuse probe's stale answer means caching, unless outputs were still being written after the
    current stream finished (a side stream, run 2 of the H200 session): then the probe read them early."""
    judge, answers = world
    tensorio.save(tmp_path / "out" / "probe.pt", {"outputs": [answers[0]]})  # partner 1's inputs, 0's answer
    assert judge(cache_probe={"first": 0, "partner": 1}) == "caching_detected"
    assert judge(cache_probe={"first": 0, "partner": 1, "late_writes": True}) == "stream_violation"
    late_trial = {"0": {"launches": 1, "late_writes": True}, "1": {"launches": 1}}
    assert judge(cache_probe={"first": 0, "partner": 1}, trials=late_trial) == "stream_violation"


def test_no_launch_after_timing_is_caching(world, tmp_path):
    judge, answers = world
    tensorio.save(tmp_path / "out" / "after_0.pt", {"outputs": [answers[1]]})
    after = [{"buffers_of": 0, "values_of": 1, "launches": 0, "compute_ops": {}}]
    assert judge(timing={"checked_trials": [0, 1], "after": after}) == "caching_detected"


def _after(world_dir: Path, y: torch.Tensor) -> dict:
    tensorio.save(world_dir / "out" / "after_0.pt", {"outputs": [y]})
    return {"checked_trials": [0, 1], "after": [{"buffers_of": 0, "values_of": 1, "launches": 1, "compute_ops": {}}]}


def test_after_timing_the_old_values_answer_is_caching(world, tmp_path):
    judge, answers = world
    assert judge(timing=_after(tmp_path, answers[0])) == "caching_detected"


def test_after_timing_a_wrong_answer_of_no_input_is_nondeterminism(world, tmp_path):
    judge, answers = world
    assert judge(timing=_after(tmp_path, answers[1] * 1.05)) == "nondeterministic"


def test_after_timing_the_new_values_answer_passes(world, tmp_path):
    judge, answers = world
    assert judge(timing=_after(tmp_path, answers[1])) is None


def test_a_kernel_wrong_everywhere_is_a_mismatch_not_caching(world, tmp_path):
    judge, answers = world
    bad = {0: answers[0] * 1.05, 1: answers[1] * 1.05}
    assert judge(cand=bad, timed=bad, timing=_after(tmp_path, bad[1])) == "mismatch"
