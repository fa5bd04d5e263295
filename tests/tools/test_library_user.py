"""The user's shelf without running the verifier: where a kernel to add comes from (file, attempt, run),
drift between a card and a re-verification, recording rows into cards, and the agent's library search."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import kernelagent.tools.library as lib
from kernelagent.kernels import LibraryError, get_entry, list_entries, user_root
from kernelagent.memory import open_store
from kernelagent.verifier.report import Report
from tests.memory.conftest import make_report
from tests.paths import HONEST, PROBLEMS

RELU = PROBLEMS / "corpus" / "relu.py"


def _user_entry(name: str = "mine", signature: list[str] | None = None, verified: list | None = None) -> Path:
    folder = user_root() / name
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text(RELU.read_text())
    (folder / "triton.py").write_text((HONEST / "dynamic" / "relu_view.py").read_text())
    card = {"name": name, "family": name, "backends": ["triton"], "signature": signature or ["aten::relu"],
            "verified": verified or []}
    (folder / "card.json").write_text(json.dumps(card))
    return folder


def test_user_shelf_lives_in_the_home_and_is_searched():
    assert user_root() == Path(os.environ["KERNELAGENT_HOME"]) / "library"
    _user_entry(signature=["aten::relu", "aten::clamp"])
    entry = get_entry("mine")
    assert entry.origin == "user" and entry in list_entries()
    examples = lib.examples_for(["aten.relu.default"], "triton")
    assert examples[0]["problem"] == "library:mine" and "ModelNew" in examples[0]["source"]


def test_kernel_to_add_from_an_attempt_or_a_run(tmp_path):
    with open_store() as store:
        pid = store.upsert_problem(name="relu", source=RELU.read_text())
        rid = store.start_run(problem_id=pid, provider="p", model="m", backend="triton", budget={})
        bad = store.record_attempt(run_id=rid, problem_id=pid, source="bad", report=make_report("rejected", "mismatch"))
        slow = store.record_attempt(run_id=rid, problem_id=pid, source="slow", report=make_report(speedup=1.1))
        fast = store.record_attempt(run_id=rid, problem_id=pid, source="fast", report=make_report(speedup=2.0))
        by_attempt = lib.resolve_kernel(slow[:6], None, store)
        assert by_attempt.source == "slow" and by_attempt.origin == {"from": "attempt", "attempt_id": slow,
                                                                     "run_id": rid}
        assert by_attempt.reference.name == "relu.py" and by_attempt.reference.read_text() == RELU.read_text()
        by_run = lib.resolve_kernel(rid[:6], RELU, store)
        assert (by_run.source, by_run.reference, by_run.origin["attempt_id"]) == ("fast", RELU, fast)
        with pytest.raises(LibraryError, match="not accepted"):
            lib.resolve_kernel(bad, None, store)
        with pytest.raises(LibraryError, match="neither a file"):
            lib.resolve_kernel("ffffffffffff", None, store)


def _report(verdict: str = "accepted", ms: float | None = 0.2, gpu: str = "NVIDIA H200", torch: str = "2.13"):
    metrics = {"candidate_ms": ms} if ms else {}
    return Report(verdict=verdict, category="ok" if verdict == "accepted" else "mismatch", message="differs",
                  metrics=metrics, environment={"gpu": gpu, "torch": torch, "triton": "3.6.0"})


def test_drift_flags_lost_verdicts_and_slower_kernels_on_the_same_gpu():
    card = {"verified": [{"backend": "triton", "gpu": "NVIDIA H200", "torch": "2.11", "candidate_ms": 0.2,
                          "date": "2026-11-30"}]}
    assert lib.drift(card, "triton", _report(ms=0.21)) == []
    [slower] = lib.drift(card, "triton", _report(ms=0.3))
    assert "1.50x slower" in slower and "torch 2.11 -> 2.13" in slower
    [lost] = lib.drift(card, "triton", _report("rejected"))
    assert "was accepted 2026-11-30" in lost and "mismatch" in lost
    assert lib.drift(card, "triton", _report(ms=0.9, gpu="NVIDIA A100")) == []  # another GPU: not comparable
    assert lib.drift({"verified": []}, "triton", _report("rejected")) == []
    assert lib.drift(card, "cute", _report("rejected")) == []


def test_record_fills_a_user_card_and_replaces_its_own_row():
    folder = _user_entry()
    row = lib.verified_row(_report(), "triton")
    assert row["gpu"] == "NVIDIA H200" and row["candidate_ms"] == 0.2 and row["date"]
    assert lib.record([{"name": "mine", "row": row}, {"name": "mine", "row": None}]) == ["mine"]
    assert lib.record([{"name": "mine", "row": {**row, "candidate_ms": 0.19}}]) == ["mine"]
    card = json.loads((folder / "card.json").read_text())
    assert [r["candidate_ms"] for r in card["verified"]] == [0.19]
    assert "0.19" in (folder / "card.md").read_text()


def test_the_installed_package_is_never_written(monkeypatch):
    shipped = get_entry("softmax")
    assert shipped.origin == "shipped"
    monkeypatch.setattr(lib, "LIBRARY_ROOT", Path("/usr/lib/python3/site-packages/kernelagent/kernels"))
    assert not lib.writable(shipped)
    with pytest.raises(LibraryError, match="never written"):
        lib.record([{"name": "softmax", "row": {"backend": "triton"}}])


def test_remove_only_touches_the_users_entries():
    folder = _user_entry("gone")
    assert lib.remove_entry("gone") == folder and not folder.exists()
    with pytest.raises(LibraryError, match="ships with kernelagent"):
        lib.remove_entry("softmax")
    with pytest.raises(LibraryError, match="no library entry"):
        lib.remove_entry("never_there")


def test_verify_from_a_saved_run_records_into_the_card(tmp_path):
    from typer.testing import CliRunner

    from kernelagent.cli.app import app

    folder = _user_entry()
    saved = tmp_path / "h200.json"
    row = lib.verified_row(_report(), "triton")
    saved.write_text(json.dumps([{"name": "mine", "origin": "user", "backend": "triton", "verdict": "accepted",
                                  "category": "ok", "message": "", "metrics": {"candidate_ms": 0.2}, "row": row,
                                  "drift": []}]))
    res = CliRunner().invoke(app, ["library", "verify", "mine", "--from", str(saved), "--record"])
    assert res.exit_code == 0, res.output
    assert json.loads((folder / "card.json").read_text())["verified"] == [row]
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert CliRunner().invoke(app, ["library", "verify", "--from", str(bad)]).exit_code == 2


def test_a_compiled_but_unverified_kernel_is_no_drift_and_never_recorded(tmp_path):
    """CuTe DSL verified without a GPU: compiled, never run. Not a lost verdict (no drift), no card row, never
    recorded (nor a row from before the verdict existed, `accepted` with metrics.compile_only); `library
    verify` exits 4, not 0 (accepted) nor 1 (rejected)."""
    from typer.testing import CliRunner

    from kernelagent.cli.app import app

    card = {"verified": [{"backend": "cute", "gpu": "NVIDIA H200", "candidate_ms": 0.2, "date": "2026-11-30"}]}
    unverified = Report(verdict="unverified", category="compile_only", message="compiled for sm_90a; correctness "
                        "NOT run (no GPU)", metrics={"compile_only": True}, environment={"device": "cpu"})
    assert lib.drift(card, "cute", unverified) == []
    folder = _user_entry()
    row = lib.verify_result(get_entry("mine"), "triton", unverified)
    assert row["verdict"] == "unverified" and row["row"] is None and row["drift"] == []
    legacy = {**row, "verdict": "accepted", "row": lib.verified_row(unverified, "triton")}
    forged = {**legacy, "verdict": "unverified", "metrics": {}}
    assert not lib.recordable(legacy) and not lib.recordable(forged) and lib.record([legacy, forged]) == []
    saved = tmp_path / "cpu.json"
    saved.write_text(json.dumps([row]))
    res = CliRunner().invoke(app, ["library", "verify", "mine", "--from", str(saved), "--record"])
    assert res.exit_code == 4, res.output
    text = " ".join(res.output.split())
    assert "compiled but could not be run without a GPU" in text and "recorded in the cards" not in text
    assert json.loads((folder / "card.json").read_text())["verified"] == []
