"""Verify a candidate given as a file or as source text: the input checks and one-line messages the CLI
prints, the candidate written to a real file (Triton and CuTe DSL refuse code run through `exec`), and
the attempt recorded in memory. Shared by the CLI, the agent and the MCP server.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from kernelagent.verifier.api import Progress, Verifier
from kernelagent.verifier.judge.feedback import UNVERIFIED_HEAD
from kernelagent.verifier.report import Report


class InputError(ValueError):
    """A user's input a tool cannot use; its message is one line, the same the CLI prints (exit 2)."""


def existing_file(path: str | Path, what: str) -> Path:
    """`path` as a Path when it names a file, else InputError ("problem file X does not exist")."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"{what} {path} does not exist")
    if p.is_dir():
        raise InputError(f"{what} {path} is a folder; give the .py file")
    return p


def candidate_file(source: str | None, path: str | Path | None, workdir: Path) -> Path:
    """The candidate as a file: `path` as given, or `source` written under `workdir` (named by its hash)."""
    if (source is None) == (path is None):
        raise InputError("give the candidate as source text or as a file path (exactly one of the two)")
    if path is not None:
        return existing_file(path, "candidate file")
    if not source.strip():
        raise InputError("the candidate source is empty")
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / f"candidate_{hashlib.sha256(source.encode()).hexdigest()[:16]}.py"
    target.write_text(source)
    return target


def verify_file(verifier: Verifier, problem: str | Path, candidate: Path, progress: Progress | None = None
                ) -> Report:
    """One verification; a device the machine lacks (and other option errors) become InputError."""
    problem = existing_file(problem, "problem file")
    try:
        return verifier.verify(problem, candidate, progress)
    except ValueError as e:
        raise InputError(str(e)) from e


def summary(report: Report) -> str:
    """One line: the verdict, its category and the message, as the CLI's panel title says it."""
    if report.accepted:
        head = "ACCEPTED"
    else:
        head = UNVERIFIED_HEAD if report.unverified else f"REJECTED: {report.category}"
    return f"{head}: {report.message}" if report.message else head


def record(store: Any, problem: str | Path, candidate: Path, report: Report) -> str | None:
    """Write the attempt to memory (no run: an outside agent's verification); its id, or None when the
    problem file cannot be read back."""
    from kernelagent.problem import ProblemError, inspect_problem

    try:
        spec = inspect_problem(problem)
    except ProblemError:
        return None
    pid = store.upsert_problem(name=spec.name, source=spec.source)
    return store.record_attempt(run_id=None, problem_id=pid, source=candidate.read_text(), report=report)
