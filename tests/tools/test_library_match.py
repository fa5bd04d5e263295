"""Library-first matching: an entry matches when its reference computes the same function."""

from __future__ import annotations

import pytest

from kernelagent.tools.library import match_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from tests.paths import PROBLEMS

HERE = PROBLEMS / "library_match"


@pytest.fixture(scope="module")
def verifier():
    with Verifier(VerifyOptions(device="cpu", seeds=1)) as v:
        yield v


def _hits(verifier, name):
    return {r["name"] for r in match_problem(HERE / name, verifier) if r["match"]}


def test_softmax_written_differently_matches(verifier):
    assert _hits(verifier, "softmax_other.py") == {"softmax"}


def test_log_softmax_matches_its_own_family_not_softmax(verifier):
    results = match_problem(HERE / "log_softmax.py", verifier)
    assert {r["name"] for r in results if r["match"]} == {"log_softmax"}
    soft = next(r for r in results if r["name"] == "softmax")
    assert "rel L2" in soft["why"] or "max abs" in soft["why"]


def test_rmsnorm_with_renamed_weight_matches(verifier):
    assert _hits(verifier, "rmsnorm_other.py") == {"rms_norm"}


def test_an_option_preset_matches_and_is_named(verifier):
    """Causal attention matches the attention entry only with its causal preset, which the result names (in SDPA's
    (B, H, S, D) layout with the layout preset too); softmax, which declares none, matches with no options."""
    hit = next(r for r in match_problem(HERE / "attention_causal.py", verifier) if r["name"] == "attention")
    assert hit["match"] and hit["options"] == {"causal": True}, hit
    sdpa = next(r for r in match_problem(HERE / "attention_sdpa.py", verifier) if r["name"] == "attention")
    assert sdpa["match"] and sdpa["options"] == {"layout": "bhsd", "causal": True}, sdpa
    softmax = next(r for r in match_problem(HERE / "softmax_other.py", verifier) if r["name"] == "softmax")
    assert softmax["match"] and softmax["options"] == {}
