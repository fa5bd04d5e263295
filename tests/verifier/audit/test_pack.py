"""The audit from a verifier's reference pack (the agent's prepare step): only the main set's plain trials
decide `degenerate`; an edge-case set gives a note."""

from __future__ import annotations

import pytest

from kernelagent.problem import inspect_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.audit import advice, audit_pack
from kernelagent.verifier.options import VerifyOptions
from tests.verifier.audit.helpers import AUDIT_PROBLEMS


@pytest.fixture(scope="module")
def verifier():
    with Verifier(VerifyOptions(device="cpu", seeds=2, timing=False, timeout=300)) as v:
        yield v


def _audit(verifier: Verifier, name: str) -> dict:
    pack = verifier.reference(inspect_problem(AUDIT_PROBLEMS / f"{name}.py"))
    return audit_pack(pack.dir, pack.meta, pack.refs)


def test_a_degenerate_edge_case_set_is_a_note(verifier):
    result = _audit(verifier, "softmax_narrow")
    assert result["degenerate"] is False and result["trivial_answers_that_pass"] == []
    assert any("(7, 1)" in n and "not a verdict" in n for n in result["notes"]), result["notes"]
    assert "not degenerate" in advice(result)


def test_a_degenerate_main_set_is_flagged(verifier):
    result = _audit(verifier, "clamp_saturated")
    assert result["degenerate"] is True and "constant" in result["trivial_answers_that_pass"]
    assert "constant" in advice(result)
