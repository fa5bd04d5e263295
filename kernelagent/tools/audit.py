"""Audit a problem with a warm verifier (the MCP server's): the pack it builds is the one verifies reuse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelagent.problem import ProblemError, inspect_problem
from kernelagent.tools.verify import InputError, existing_file
from kernelagent.verifier.api import ReferenceFailure, Verifier
from kernelagent.verifier.audit import advice, audit_pack


def audit_with(verifier: Verifier, problem: str | Path) -> dict[str, Any]:
    """Would zeros, a constant, the identity or the input's mean pass this problem's checks?"""
    try:
        spec = inspect_problem(existing_file(problem, "problem file"))
    except ProblemError as e:
        raise InputError(str(e)) from e
    try:
        pack = verifier.reference(spec)
    except ReferenceFailure as e:
        return {"problem": str(problem), "error": e.report.message, "degenerate": False}
    result = audit_pack(pack.dir, pack.meta, pack.refs)
    result.update(problem=str(problem), name=spec.name, advice=advice(result))
    return result
