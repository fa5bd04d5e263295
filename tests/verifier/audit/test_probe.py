"""The audit's verdicts on small problems of each degenerate class and their healthy twins, under our
tolerance and KernelBench's; what varies the output; edge-case sets are notes, not verdicts."""

from __future__ import annotations

import pytest

from tests.paths import EXAMPLES, PROBLEMS
from tests.verifier.audit.helpers import AUDIT_PROBLEMS, audit_here, write_problem

# name -> tolerance -> (degenerate, answers that must pass, answers that must not)
EXPECTED = {
    "softmax_wide": {"ours": (False, set(), {"zeros", "constant"}),
                     "kernelbench": (True, {"zeros", "constant"}, {"identity"})},
    "softmax_narrow": {"ours": (False, set(), {"zeros", "constant"}),
                       "kernelbench": (False, set(), {"zeros", "constant"})},
    "softmax_width1": {"ours": (True, {"constant"}, {"zeros"}), "kernelbench": (True, {"constant"}, {"zeros"})},
    "norm_then_mean": {"ours": (True, {"zeros"}, set()), "kernelbench": (True, {"zeros"}, set())},
    "norm_then_scale": {"ours": (False, set(), {"zeros", "constant"}),
                        "kernelbench": (False, set(), {"zeros", "constant"})},
    "clamp_saturated": {"ours": (True, {"constant"}, {"zeros", "identity"}),
                        "kernelbench": (True, {"constant"}, {"zeros", "identity"})},
    "clamp_in_range": {"ours": (False, set(), {"zeros", "identity"}),
                       "kernelbench": (False, set(), {"zeros", "identity"})},
    "offset_dominates": {"ours": (True, {"parameter broadcast (bias)", "fixed output"}, {"zeros", "constant"}),
                         "kernelbench": (True, {"parameter broadcast (bias)"}, {"zeros"})},
    "offset_small": {"ours": (False, set(), {"parameter broadcast (bias)", "identity"}),
                     "kernelbench": (False, set(), {"parameter broadcast (bias)"})},
    "max_subtract_gelu": {"ours": (True, {"zeros"}, set()), "kernelbench": (True, {"zeros"}, set())},
}
CASES = [(name, tol) for name in sorted(EXPECTED) for tol in ("ours", "kernelbench")]


def test_every_problem_file_has_an_expectation():
    assert {p.stem for p in AUDIT_PROBLEMS.glob("*.py")} == set(EXPECTED)


@pytest.mark.parametrize(("name", "tol"), CASES)
def test_degenerate_classes_and_healthy_twins(name: str, tol: str):
    degenerate, must_pass, must_fail = EXPECTED[name][tol]
    result = audit_here(AUDIT_PROBLEMS / f"{name}.py", tol)
    passing = set(result["trivial_answers_that_pass"])
    assert result["degenerate"] is degenerate, result
    assert must_pass <= passing, result
    assert not (must_fail & passing), result
    assert result["tolerance"]["name"] == tol


def test_variation_is_split_between_inputs_and_parameters():
    """A dominating learned offset: new inputs barely move the output, the problem's own init under another
    seed moves it a lot (the figure the old audit reported mixed the two)."""
    var = audit_here(AUDIT_PROBLEMS / "offset_dominates.py")["variation"]
    assert var["inputs"] < 1e-4 and var["parameters"] > 0.1 and var["both"] > 0.1
    healthy = audit_here(AUDIT_PROBLEMS / "offset_small.py")["variation"]
    assert healthy["inputs"] > 0.5 and 0.01 < healthy["parameters"] < healthy["inputs"]


def test_a_model_without_parameters_reports_no_parameter_variation():
    result = audit_here(AUDIT_PROBLEMS / "clamp_in_range.py")
    assert result["variation"]["parameters"] is None
    assert any("no float parameters" in n for n in result["notes"])


def test_a_degenerate_test_set_is_a_note_not_a_verdict():
    result = audit_here(AUDIT_PROBLEMS / "softmax_narrow.py")
    assert result["degenerate"] is False and result["main"]["degenerate"] is False
    width1 = [s for s in result["sets"] if s["inputs"] == "[Tensor(7, 1):float32]"]
    assert width1 and width1[0]["degenerate"] and "constant" in width1[0]["trivial_answers_that_pass"]
    assert any("test input set 1" in n and "not a verdict" in n for n in result["notes"])


def test_the_softmax_example_is_not_degenerate():
    """Issue 22: its [7, 1] test set made the whole example 'degenerate'."""
    result = audit_here(EXAMPLES / "softmax" / "op.py", "kernelbench")
    assert result["degenerate"] is False
    assert any("[Tensor(7, 1):float32]" in n for n in result["notes"])


# ------------------------------------------------------------------- cases the first audit covered


@pytest.mark.parametrize(("body", "inputs", "extra", "degenerate", "passing"), [
    ("torch.softmax(x, dim=-1)", "torch.randn(8, 64)", "", False, set()),
    ("(x - x.mean()) * 1e-9", "torch.randn(8, 64)", 'TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}', True, {"zeros"}),
    ("(x - x.mean()) * 1e-9", "torch.randn(8, 64)", "", False, set()),
    ("torch.relu(x)", "torch.rand(8, 64)", "", True, {"identity"}),
    ("torch.softmax(x, dim=-1).mean(dim=-1)", "torch.randn(8, 64)", "", True, {"constant"}),
])
def test_small_cases_under_our_tolerance(tmp_path, body, inputs, extra, degenerate, passing):
    result = audit_here(write_problem(tmp_path, "case", body, inputs, extra))
    assert result["degenerate"] is degenerate, result
    assert passing <= set(result["trivial_answers_that_pass"]), result
    if not degenerate:
        assert result["variation"]["inputs"] > 1e-3


@pytest.mark.parametrize("name", ["argmax_dim", "mse_loss", "cross_entropy"])
def test_integer_and_scalar_outputs_are_not_flagged(name):
    """An integer output is not 'passed' by itself, and a 0-dim loss is not its own constant."""
    assert audit_here(PROBLEMS / "ops" / f"{name}.py")["degenerate"] is False
