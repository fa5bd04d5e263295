"""The first prompt is true on every machine (tools/prepare.py), and the offline path says what it checked
and records itself in memory (tools/optimize.py through `kernelagent optimize`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kernelagent.agent.feedback import first_prompt
from kernelagent.cli.app import app
from kernelagent.memory import open_store
from kernelagent.problem import ProblemError, sha256_text
from kernelagent.tools import prepare as prep
from kernelagent.verifier.api import ReferenceFailure
from kernelagent.verifier.report import Report, Stage, rejected

SKIP_NOTE = ("on CPU, input set(s) [0] skipped: over 1,048,576 elements, too large for the Triton interpreter "
             "(sizes [33554432]); they run on the GPU")
WORK = {"matmul_flops": 0, "other_flops": 4096, "min_bytes": 8192}


@dataclass
class FakePack:
    meta: dict[str, Any]
    environment: dict[str, Any]
    dir: Path = Path("/nowhere")
    refs: Path = Path("/nowhere")


@dataclass
class FakeVerifier:
    pack: FakePack | None = None
    failure: Report | None = None
    seen: list = field(default_factory=list)

    def reference(self, spec: Any) -> FakePack:
        if self.failure is not None:
            raise ReferenceFailure(self.failure)
        return self.pack


def _trial(i: int, s: int, desc: str, **kw: Any) -> dict[str, Any]:
    return {"id": i, "set": s, "seed": 0, "input_desc": desc, **kw}


@pytest.fixture
def audit(monkeypatch):
    verdict = {"degenerate": False, "trivial_answers_that_pass": [], "output_variation_across_seeds": 0.5}
    monkeypatch.setattr(prep, "audit_pack", lambda *a: dict(verdict))
    monkeypatch.setattr(prep, "floor_ms", lambda work, ceilings: {"floor_ms": 0.01, "bound": "memory",
                                                                    "floors_ms": {"memory": 0.01, "matmul": 0.0}})
    monkeypatch.setattr(prep, "load_ceilings", lambda gpu: {})
    return verdict


def test_on_cpu_the_prompt_says_what_was_skipped_and_gives_no_timings(problem, audit):
    meta = {"trials": [_trial(0, 1, "[Tensor(33, 1000):float32]"), _trial(1, 2, "[Tensor(7, 1):float32]")],
            "notes": [SKIP_NOTE], "work": WORK, "baseline": {"eager": {"median_ms": 9.0}}}
    out = prep.prepare_with(FakeVerifier(FakePack(meta, {"device": "cpu"})), str(problem))
    text = out["text"]
    assert "Main inputs (get_inputs): not run on this machine" in text and f"Note: {SKIP_NOTE}" in text
    assert "set 1: [Tensor(33, 1000):float32]; set 2: [Tensor(7, 1):float32]" in text
    assert "Work on input set 1 (the main inputs were not run here)" in text
    assert prep.CPU_LINE in text and "PyTorch" not in text and "Roofline" not in text and "9.000" not in text
    assert "degenerate" not in text and out["baseline"] == {} and out["roofline"] == {}


def test_on_a_gpu_the_prompt_gives_the_main_inputs_timings_and_roofline(problem, audit):
    meta = {"trials": [_trial(0, 0, "[Tensor(4096, 8192):float32]"), _trial(1, 1, "[Tensor(7, 1):float32]"),
                       _trial(2, 0, "[Tensor(4096, 8192):float32]", timing=True)],
            "notes": [], "work": WORK, "baseline": {"eager": {"median_ms": 1.5}, "compile": {"median_ms": 1.2}}}
    audit["degenerate"] = True
    out = prep.prepare_with(FakeVerifier(FakePack(meta, {"device": "cuda", "gpu": "NVIDIA H200"})), str(problem))
    text = out["text"]
    assert "Main inputs (get_inputs): [Tensor(4096, 8192):float32]" in text and "Work on the main inputs" in text
    assert "GPU: NVIDIA H200" in text and "PyTorch eager on the main inputs: 1.500 ms" in text
    assert "Roofline floor: 10.0 us (memory-bound" in text
    assert "the audit finds the problem degenerate on the main inputs" in text
    prompt = first_prompt({"name": "relu", "source": "SRC"}, "triton", out, [], [])
    assert "## The problem on the machine that verifies it" in prompt and "NVIDIA H200" in prompt


def test_a_reference_that_cannot_run_is_the_users_problem(problem):
    failure = rejected("load_error", "op.py line 7: forward raised ValueError", blame="problem")
    with pytest.raises(ProblemError, match="line 7: forward raised ValueError"):
        prep.prepare_with(FakeVerifier(failure=failure), str(problem))


class OfflineVerifier:
    """Stands in for the real Verifier in the offline path: one library kernel, accepted on CPU."""

    def __init__(self, options: Any):
        self.options = options

    def __enter__(self) -> OfflineVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def verify(self, problem: Any, candidate: Any) -> Report:
        stages = [Stage("reference", "passed", 0.1, details={"trials": 4, "notes": [SKIP_NOTE]})]
        digest = sha256_text(Path(candidate).read_text())  # as the real report names what it verified
        return Report(verdict="accepted", category="ok", message="correct (CPU, not timed)", stages=stages,
                      candidate={"path": str(candidate), "sha256": digest, "backend": "triton"}, metrics={"trials": 4},
                      environment={"device": "cpu"})


class SwappedVerifier(OfflineVerifier):
    """Reports another file's digest: what a kernel file changed while it was verified looks like."""

    def verify(self, problem: Any, candidate: Any) -> Report:
        report = super().verify(problem, candidate)
        report.candidate["sha256"] = "0" * 64
        return report


def _offline_run(problem, tmp_path, monkeypatch, verifier: type) -> tuple[Any, Path]:
    """`kernelagent optimize` with no provider, one library entry "relu" matching, verified by `verifier`."""
    from kernelagent.tools import library

    kernel = tmp_path / "lib_triton.py"
    kernel.write_text("# the library kernel\n")

    class Entry:
        name, backends = "relu", {"triton": kernel}

    monkeypatch.setattr("kernelagent.verifier.api.Verifier", verifier)
    monkeypatch.setattr(library, "match_problem", lambda p, v: [{"name": "relu", "match": True}])
    monkeypatch.setattr(library, "get_entry", lambda name: Entry())
    out = tmp_path / "out.py"
    return CliRunner().invoke(app, ["optimize", str(problem), "--out", str(out)]), out


def test_the_offline_path_writes_only_what_it_verified(home, problem, tmp_path, monkeypatch):
    res, out = _offline_run(problem, tmp_path, monkeypatch, SwappedVerifier)
    assert "changed while it was verified: not written" in res.stdout, res.stdout
    assert not out.exists()


def test_the_offline_path_says_what_it_did_not_check_and_records_itself(home, problem, tmp_path, monkeypatch):
    res, out = _offline_run(problem, tmp_path, monkeypatch, OfflineVerifier)
    assert res.exit_code == 0, res.stderr
    assert f"not checked: {SKIP_NOTE}" in res.stdout
    assert "not checked: speed was not measured (no GPU here)" in res.stdout
    assert "checked: verified the library kernel relu on your problem: accepted over 4 trials" in res.stdout
    assert out.read_text() == "# the library kernel\n"
    with open_store(home) as store:
        [run] = store.runs()
        assert (run["provider"], run["status"]) == ("offline", "accepted") and run["finished"]
        [attempt] = store.attempts_for_run(run["id"])
        assert attempt["verdict"] == "accepted" and attempt["source"] == "# the library kernel\n"
        assert [row["id"] for row in store.history()] == [attempt["id"]]


class OfflineCuteVerifier(OfflineVerifier):
    """The offline path's verifier on a machine without a GPU, for a CuTe DSL library kernel: compiled, not run."""

    def verify(self, problem: Any, candidate: Any) -> Report:
        return Report(verdict="unverified", category="compile_only",
                      message="compiled for sm_90a; correctness NOT run (no GPU)",
                      candidate={"path": str(candidate), "backend": "cute"}, metrics={"compile_only": True},
                      environment={"device": "cpu"})


def test_the_offline_path_neither_accepts_nor_writes_a_kernel_it_could_only_compile(home, problem, tmp_path,
                                                                                     monkeypatch):
    from kernelagent.tools import library

    kernel = tmp_path / "lib_cute.py"
    kernel.write_text("# the library's CuTe kernel\n")

    class Entry:
        name, backends = "relu", {"cute": kernel}

    monkeypatch.setattr("kernelagent.verifier.api.Verifier", OfflineCuteVerifier)
    monkeypatch.setattr(library, "match_problem", lambda p, v: [{"name": "relu", "match": True}])
    monkeypatch.setattr(library, "get_entry", lambda name: Entry())
    out = tmp_path / "out.py"
    res = CliRunner().invoke(app, ["optimize", str(problem), "--backend", "cute", "--out", str(out), "--json"])
    assert res.exit_code == 4, res.stderr
    doc = json.loads(res.stdout)
    assert doc["accepted"] is False and doc["unverified"] is True and doc["out_path"] is None and not out.exists()
    assert any("compiled, but not run (no GPU): not verified, not written" in c for c in doc["checked"])
    with open_store(home) as store:
        [run] = store.runs()
        assert run["status"] == "unverified" and run["best_attempt_id"] is None
