"""The optimisation loop: a LangGraph graph that proposes, verifies and selects kernels.

Public API (imported lazily, so `from kernelagent.agent import ProviderNotConfigured` stays cheap):
`optimize`, `OptimizeConfig`, `OptimizeResult`, `Deps`, `make_provider`, `ProviderNotConfigured`,
`extract_candidate`, `LiveView`, and the errors of `kernelagent.agent.errors`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "optimize": "run", "OptimizeResult": "run", "checkpoint_path": "run",
    "OptimizeConfig": "config", "resolve_provider": "config", "DEFAULT_MODELS": "config",
    "Deps": "deps", "make_provider": "providers", "Provider": "providers.base",
    "Completion": "providers.base", "Block": "providers.base",
    "extract_candidate": "extract", "LiveView": "progress",
    "CallHooks": "providers.base", "RetryPolicy": "providers.base",
    "AgentError": "errors", "ProviderError": "errors", "ProviderAuthError": "errors", "SetupError": "errors",
    "ProviderNotConfigured": "errors", "RunNotFound": "errors", "RunFailed": "errors", "RunInterrupted": "errors",
    "ReplayError": "errors", "UnknownPrice": "errors", "ModelUnavailable": "errors", "MissingExtra": "errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kernelagent.agent' has no attribute {name!r}")
    return getattr(importlib.import_module(f"kernelagent.agent.{_EXPORTS[name]}"), name)
