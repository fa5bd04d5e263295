"""Fixtures of the agent tests: an isolated home without provider variables, a problem file, `llm`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.agent_kit import ENV_VARS, LLM, LLMS, PROBLEM


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private KERNELAGENT_HOME and no provider variables from the outside."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # no SDK profile from ~/.config/anthropic
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    path = tmp_path / "relu" / "op.py"
    path.parent.mkdir()
    path.write_text(PROBLEM.lstrip())
    return path


@pytest.fixture(params=LLMS, ids=lambda x: f"{x.kind}-{'stream' if x.stream else 'json'}")
def llm(request: pytest.FixtureRequest) -> LLM:
    return request.param
