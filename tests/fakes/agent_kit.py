"""Helpers shared by the agent tests: provider kinds under test, candidate files, replies, a problem."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kernelagent.agent.config import DEFAULT_MODELS
from kernelagent.agent.deps import Deps
from kernelagent.agent.providers import make_provider
from kernelagent.agent.providers.base import RetryPolicy
from tests.fakes import anthropic_server, openai_server

ROOT = Path(__file__).resolve().parents[2]
ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
            "ANTHROPIC_CONFIG_DIR", "ANTHROPIC_IDENTITY_TOKEN", "ANTHROPIC_IDENTITY_TOKEN_FILE",
            "ANTHROPIC_FEDERATION_RULE_ID", "ANTHROPIC_ORGANIZATION_ID",
            "OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELAGENT_PROVIDER", "KERNELAGENT_MODEL",
            "KERNELAGENT_BASE_URL", "KERNELAGENT_REPLAY_SCRIPT")
# Fast numbers for the stand-in servers (which send retry-after-ms: 1): the same code paths, no sleeping.
FAST_RETRY = RetryPolicy(attempts=4, stream_attempts=3, initial_wait=0.001, max_wait=0.01, stall_timeout=0.5,
                         request_timeout=5.0, connect_timeout=2.0)

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 1000)]


def get_init_inputs():
    return []
'''


def kernel(directive: str, tag: str = "") -> str:
    """A candidate file judged by the fake verifier's `# FAKE:` directive."""
    return textwrap.dedent(f'''\
        # FAKE: {directive}
        import torch
        import triton
        import triton.language as tl


        class ModelNew(torch.nn.Module):
            def forward(self, x):  # {tag or directive}
                return x
        ''')


def reply(source: str, note: str = "Here is the kernel.") -> str:
    return f"{note}\n\n```python\n{source}```\n"


@dataclass
class LLM:
    """One provider kind under test: its fake server class and how to reach it."""

    kind: str
    stream: bool

    @property
    def server_cls(self) -> Any:
        return anthropic_server.FakeAnthropic if self.kind == "anthropic" else openai_server.FakeOpenAI

    @property
    def fakes(self) -> Any:
        return anthropic_server if self.kind == "anthropic" else openai_server

    @property
    def model(self) -> str:
        return DEFAULT_MODELS["anthropic"] if self.kind == "anthropic" else "gpt-4o-mini"

    def env(self, url: str) -> dict[str, str]:
        """Variables that point the provider at the fake server (the real SDK reads ANTHROPIC_*)."""
        if self.kind == "anthropic":
            return {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "dummy-key"}
        return {"OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "dummy-key"}

    def provider(self, url: str, monkeypatch: pytest.MonkeyPatch, retry: RetryPolicy = FAST_RETRY) -> Any:
        for k, v in self.env(url).items():
            monkeypatch.setenv(k, v)
        return make_provider(self.kind, self.model, stream=self.stream, retry=retry)


LLMS = [LLM("anthropic", True), LLM("anthropic", False), LLM("openai", True), LLM("openai", False)]


def fake_deps(provider: Any, options: Any, store: Any) -> tuple[Deps, Any]:
    """Stand-in for `kernelagent.tools.optimize.agent_deps`: the fake verifier, no reference run."""
    from tests.fakes.verify import fake_verify

    return Deps(provider=provider, verify_fn=fake_verify, store=store, verify_options=options), lambda: None
