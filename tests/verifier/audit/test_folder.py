"""Auditing a folder: every problem file found (natural order), several children at once, the results file
written as each finishes, a resumed run that audits only what is missing or changed."""

from __future__ import annotations

import json
import shutil

from kernelagent.verifier.audit import problem as audit_problem_mod
from kernelagent.verifier.audit.folder import audit_folder, discover
from kernelagent.verifier.audit.settings import AuditSettings
from tests.verifier.audit.helpers import AUDIT_PROBLEMS, inprocess_audit_one

SETTINGS = AuditSettings(device="cpu", draws=2, timeout=300.0, threads=1)


def _tree(tmp_path):
    root = tmp_path / "bench"
    (root / "level1").mkdir(parents=True)
    (root / "level2").mkdir()
    shutil.copy(AUDIT_PROBLEMS / "clamp_in_range.py", root / "level1" / "2_clamp.py")
    shutil.copy(AUDIT_PROBLEMS / "softmax_width1.py", root / "level1" / "10_softmax.py")
    (root / "level2" / "1_broken.py").write_text("class Model(:\n\ndef get_inputs():\n    return []\n")
    (root / "level2" / "helper.py").write_text("X = 1\n")               # not a problem: skipped
    (root / "level2" / "__init__.py").write_text("")
    return root


def test_discover_finds_problems_in_natural_order(tmp_path):
    root = _tree(tmp_path)
    assert [str(p.relative_to(root)) for p in discover(root)] == [
        "level1/2_clamp.py", "level1/10_softmax.py", "level2/1_broken.py"]


def test_a_folder_is_audited_in_parallel_children_and_summarised(tmp_path):
    root = _tree(tmp_path)
    out = tmp_path / "results.json"
    events = []
    doc = audit_folder(root, SETTINGS, jobs=2, out=out, progress=lambda e, i: events.append(e))
    s = doc["summary"]
    assert s["problems"] == 3 and s["by_status"] == {"ok": 2, "error": 1} and s["killed_for_memory"] == 0
    assert [f["problem"] for f in s["flagged"]] == ["level1/10_softmax.py"]
    assert "constant" in s["flagged"][0]["trivial_answers_that_pass"]
    assert [f["problem"] for f in s["not_audited"]] == ["level2/1_broken.py"]
    assert events.count("done") == 3 and events[0] == "start"
    saved = json.loads(out.read_text())
    assert set(saved["problems"]) == {"level1/2_clamp.py", "level1/10_softmax.py", "level2/1_broken.py"}
    assert saved["settings"]["tolerance"]["name"] == "ours"


def test_a_resumed_run_audits_only_what_is_missing_or_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(audit_problem_mod, "audit_one", inprocess_audit_one)
    root = _tree(tmp_path)
    out = tmp_path / "results.json"
    audit_folder(root, SETTINGS, out=out)
    starts = []
    again = audit_folder(root, SETTINGS, out=out, progress=lambda e, i: starts.append(i) if e == "start" else None)
    assert starts[0]["todo"] == 0 and again["summary"]["problems"] == 3
    (root / "level1" / "2_clamp.py").write_text((AUDIT_PROBLEMS / "clamp_saturated.py").read_text())
    starts.clear()
    changed = audit_folder(root, SETTINGS, out=out, progress=lambda e, i: starts.append(i) if e == "start" else None)
    assert starts[0]["todo"] == 1
    assert {f["problem"] for f in changed["summary"]["flagged"]} == {"level1/2_clamp.py", "level1/10_softmax.py"}
    other = AuditSettings(device="cpu", draws=3, timeout=300.0, threads=1)
    starts.clear()
    audit_folder(root, other, out=out, progress=lambda e, i: starts.append(i) if e == "start" else None)
    assert starts[0]["todo"] == 3   # other settings: everything is audited again
