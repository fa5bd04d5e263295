"""Shared by the audit tests: the problems of each degenerate class, and an in-process audit."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from kernelagent.problem import load_problem
from kernelagent.verifier.audit.probe import run_audit
from kernelagent.verifier.audit.settings import TOLERANCES, AuditSettings
from tests.paths import PROBLEMS

AUDIT_PROBLEMS = PROBLEMS / "audit"


def audit_here(path: Path, tolerance: str = "ours", draws: int = 2) -> dict[str, Any]:
    """The child's audit run in this process (no child start): the probe's result for one problem."""
    problem = load_problem(path)
    settings = AuditSettings(device="cpu", draws=draws, tolerance=TOLERANCES[tolerance])
    return run_audit(problem, settings, len(problem.input_sets()))


def inprocess_audit_one(path: Path, settings: AuditSettings, budget: Any) -> dict[str, Any]:
    """A stand-in for runner.audit_one that runs the probe in this process (for CLI tests)."""
    problem = load_problem(path)
    result = run_audit(problem, settings, len(problem.input_sets()))
    return {**result, "status": "ok", "problem": str(path), "name": problem.spec.name,
            "sha256": problem.spec.sha256}


_TEMPLATE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    return [{inputs}]
{extra}
'''


def write_problem(folder: Path, name: str, body: str, inputs: str, extra: str = "") -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(_TEMPLATE.format(body=body, inputs=inputs, extra=extra)))
    return path
