"""`kernelagent audit FILE|DIR`: exit codes, --json, the tolerance options, the folder summary and table.
The audit itself runs in this process here (runner.audit_one is replaced); test_runner covers the child."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from kernelagent.cli import app
from kernelagent.verifier.audit import problem as audit_problem_mod
from tests.verifier.audit.helpers import AUDIT_PROBLEMS, inprocess_audit_one


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    monkeypatch.setattr(audit_problem_mod, "audit_one", inprocess_audit_one)


def _run(*args: str):
    return CliRunner().invoke(app, ["audit", *args, "--device", "cpu", "--seeds", "2"])


def test_exit_codes_and_json(tmp_path):
    healthy = _run(str(AUDIT_PROBLEMS / "clamp_in_range.py"), "--json")
    assert healthy.exit_code == 0, healthy.output
    assert json.loads(healthy.stdout)["degenerate"] is False
    flagged = _run(str(AUDIT_PROBLEMS / "softmax_width1.py"), "--json")
    assert flagged.exit_code == 1, flagged.output
    doc = json.loads(flagged.stdout)
    assert "constant" in doc["trivial_answers_that_pass"] and doc["variation"]["inputs"] == 0.0
    bad = tmp_path / "broken.py"
    bad.write_text("def get_inputs(:\n")
    broken = _run(str(bad), "--json")
    assert broken.exit_code == 2 and json.loads(broken.stdout)["status"] == "error"
    missing = _run(str(tmp_path / "nope.py"))
    text = " ".join(missing.output.split())
    assert missing.exit_code == 2 and "does not exist" in text and "Traceback" not in text
    assert _run(str(bad), "--seeds", "1").exit_code == 2


def test_the_tolerance_decides_what_passes():
    wide = str(AUDIT_PROBLEMS / "softmax_wide.py")
    ours = _run(wide, "--json")
    assert ours.exit_code == 0 and json.loads(ours.stdout)["tolerance"]["name"] == "ours"
    kb = _run(wide, "--json", "--tolerance", "kernelbench")
    assert kb.exit_code == 1 and "zeros" in json.loads(kb.stdout)["trivial_answers_that_pass"]
    explicit = _run(wide, "--json", "--atol", "1e-2")
    doc = json.loads(explicit.stdout)
    assert explicit.exit_code == 1 and doc["tolerance"]["name"] == "custom" and doc["tolerance"]["atol"] == 1e-2
    assert _run(wide, "--atol", "-1").exit_code == 2


def test_human_output_for_one_problem():
    res = _run(str(AUDIT_PROBLEMS / "offset_dominates.py"))
    assert res.exit_code == 1
    out = " ".join(res.output.split())
    assert "degenerate yes (main inputs)" in out and "parameter broadcast (bias)" in out
    assert "new inputs" in out and "new parameters" in out


def test_a_folder(tmp_path):
    root = tmp_path / "level1"
    root.mkdir()
    for name in ("clamp_in_range", "softmax_width1"):
        shutil.copy(AUDIT_PROBLEMS / f"{name}.py", root / f"{name}.py")
    out = tmp_path / "r.json"
    res = _run(str(root), "--json", "--out", str(out))
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["degenerate"] == 1 and json.loads(out.read_text())["summary"]["problems"] == 2
    human = _run(str(root), "--out", str(out))
    text = " ".join(human.output.split())
    assert human.exit_code == 1 and "degenerate (main inputs)" in text and "softmax_width1.py" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    none = _run(str(empty))
    assert none.exit_code == 2 and "no problem files" in " ".join(none.output.split())
