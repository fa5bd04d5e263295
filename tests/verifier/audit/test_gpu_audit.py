"""The audit on a GPU: children run there, report device memory, and the device estimate covers the peak."""

from __future__ import annotations

import pytest

from kernelagent.verifier.audit.folder import audit_folder
from kernelagent.verifier.audit.problem import audit_problem
from kernelagent.verifier.audit.settings import TOLERANCES, AuditSettings
from tests.verifier.audit.helpers import AUDIT_PROBLEMS

pytestmark = pytest.mark.gpu


def _settings(tol: str = "kernelbench") -> AuditSettings:
    return AuditSettings(device="cuda", draws=3, tolerance=TOLERANCES[tol], timeout=300.0, threads=2)


def test_a_problem_is_audited_on_the_gpu_within_its_estimate():
    result = audit_problem(AUDIT_PROBLEMS / "softmax_wide.py", settings=_settings())
    assert result["status"] == "ok" and result["degenerate"] is True, result
    mem = result["memory"]
    assert 0 < mem["peak_device_bytes"] <= mem["estimate"]["device_bytes"], mem
    ours = audit_problem(AUDIT_PROBLEMS / "softmax_wide.py", settings=_settings("ours"))
    assert ours["status"] == "ok" and ours["degenerate"] is False, ours


def test_the_audit_problems_in_parallel_on_the_gpu(tmp_path):
    doc = audit_folder(AUDIT_PROBLEMS, _settings(), jobs=4, out=tmp_path / "r.json")
    s = doc["summary"]
    assert s["by_status"] == {"ok": 10} and s["killed_for_memory"] == 0, s
    assert {f["problem"] for f in s["flagged"]} == {
        "softmax_wide.py", "softmax_width1.py", "norm_then_mean.py", "clamp_saturated.py", "offset_dominates.py",
        "max_subtract_gelu.py"}
