"""Problem audit: degenerate problems (the output is ~0, constant or the identity for the inputs drawn)
are flagged with the trivial answers that would pass; a healthy problem is not; the CLI's exit codes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelagent.cli import app
from kernelagent.verifier.audit import audit_problem
from kernelagent.verifier.options import VerifyOptions
from tests.paths import PROBLEMS as PROBLEM_HOME

_TEMPLATE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
{extra}
'''

PROBLEMS = {
    # softmax of signed rows: trivial answers fail and the output follows the inputs.
    "healthy_softmax": ("torch.softmax(x, dim=-1)", "torch.randn(8, 64)", ""),
    # output ~1e-9 and a loose absolute tolerance: zeros (and any constant near 0) pass.
    "tiny_with_atol": ("(x - x.mean()) * 1e-9", "torch.randn(8, 64)", 'TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}'),
    # the same op under the default per-dtype rule: the relative L2 check rejects zeros, so not degenerate.
    "tiny_default_tolerance": ("(x - x.mean()) * 1e-9", "torch.randn(8, 64)", ""),
    # relu of non-negative inputs is the identity.
    "relu_of_rand": ("torch.relu(x)", "torch.rand(8, 64)", ""),
    # each row of a softmax sums to one, so its mean is 1/64 whatever the input.
    "mean_of_softmax": ("torch.softmax(x, dim=-1).mean(dim=-1)", "torch.randn(8, 64)", ""),
}

# name -> (degenerate, trivial answers that must pass, trivial answers that must not)
EXPECTED = {
    "healthy_softmax": (False, set(), {"zeros", "constant", "identity", "input mean"}),
    "tiny_with_atol": (True, {"zeros", "constant"}, {"identity"}),
    "tiny_default_tolerance": (False, set(), {"zeros", "constant", "identity"}),
    "relu_of_rand": (True, {"identity"}, {"zeros", "constant"}),
    "mean_of_softmax": (True, {"constant"}, {"zeros"}),
}


def write_problem(folder: Path, name: str) -> Path:
    body, inputs, extra = PROBLEMS[name]
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(_TEMPLATE.format(body=body, inputs=inputs, extra=extra)))
    return path


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_audit_flags_degenerate_problems(name: str, tmp_path: Path):
    degenerate, must_pass, must_fail = EXPECTED[name]
    result = audit_problem(write_problem(tmp_path, name), VerifyOptions(device="cpu", seeds=2, timeout=120))
    assert "error" not in result, result
    passing = set(result["trivial_answers_that_pass"])
    assert result["degenerate"] is degenerate, result
    assert must_pass <= passing, result
    assert not (must_fail & passing), result
    assert result["trials"] >= 2
    if degenerate:
        assert result["advice"] and "not degenerate" not in result["advice"]
    else:
        assert result["output_variation_across_seeds"] > 1e-3


def test_constant_output_is_reported_as_not_varying(tmp_path: Path):
    result = audit_problem(write_problem(tmp_path, "mean_of_softmax"), VerifyOptions(device="cpu", seeds=2))
    assert result["output_variation_across_seeds"] < 1e-6
    assert "across seeds" in result["advice"]


def test_audit_reports_a_broken_file(tmp_path: Path):
    bad = tmp_path / "op.py"
    bad.write_text("import torch\n\nclass Model(:\n")
    result = audit_problem(bad, VerifyOptions(device="cpu"))
    assert result["error"] and result["degenerate"] is False


# ---------------------------------------------------------------------------------------------- CLI


def _cli(*args: str):
    return CliRunner().invoke(app, ["audit", *args, "--json", "--device", "cpu", "--seeds", "2"])


def test_cli_exit_codes(tmp_path: Path):
    healthy = _cli(str(write_problem(tmp_path, "healthy_softmax")))
    assert healthy.exit_code == 0, healthy.output
    assert json.loads(healthy.stdout)["degenerate"] is False

    degenerate = _cli(str(write_problem(tmp_path, "relu_of_rand")))
    assert degenerate.exit_code == 1, degenerate.output
    assert json.loads(degenerate.stdout)["trivial_answers_that_pass"] == ["identity"]

    bad = tmp_path / "broken.py"
    bad.write_text("def get_inputs(:\n")
    broken = _cli(str(bad))
    assert broken.exit_code == 2, broken.output
    assert "error" in json.loads(broken.stdout)
    missing = _cli(str(tmp_path / "does_not_exist.py"))
    assert missing.exit_code == 2, missing.output


@pytest.mark.parametrize("name", ["argmax_dim", "mse_loss", "cross_entropy"])
def test_integer_and_scalar_outputs_are_not_flagged(name):
    """An integer output is not 'passed' by itself, and a 0-dim loss is not its own constant."""
    from kernelagent.verifier.audit import audit_problem
    from kernelagent.verifier.options import VerifyOptions

    root = PROBLEM_HOME / "ops"
    result = audit_problem(root / f"{name}.py", VerifyOptions(device="cpu", timing=False))
    assert result["degenerate"] is False, result
