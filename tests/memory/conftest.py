"""Fixtures for the memory tests: a fresh store in a temp folder and a verifier-report factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelagent.memory import Store, open_store
from kernelagent.verifier.report import Report, Stage


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with open_store(tmp_path / "home") as s:
        yield s


def make_report(verdict: str = "accepted", category: str = "ok", *, backend: str = "triton",
                speedup: float | None = 1.5, feedback: str = "", gpu: str = "NVIDIA H200") -> Report:
    """A report shaped like the verifier's, with the metrics memory reads."""
    metrics = {}
    if verdict == "accepted":
        metrics = {"candidate_ms": 0.2, "eager_ms": 0.2 * speedup, "compile_ms": 0.25,
                   "speedup_eager": speedup, "speedup_compile": 0.25 / 0.2, "speedup_eager_ci": [1.4, 1.6],
                   "roofline_pct": 71.5, "roofline_bound": "memory", "registers": 40, "spills": 0}
    return Report(
        verdict=verdict, category=category, message=f"{category} message", feedback=feedback,
        problem={"path": "op.py", "name": "op", "sha256": "0" * 64},
        candidate={"path": "kernel.py", "sha256": "1" * 64, "backend": backend},
        stages=[Stage("load", "passed", 0.1), Stage("correctness", "passed", 2.5)],
        metrics=metrics, environment={"gpu": gpu, "torch": "2.13", "triton": "3.6.0", "python": "3.11"},
    )


@pytest.fixture
def report():
    return make_report
