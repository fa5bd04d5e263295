"""What the graph needs from outside, passed through LangGraph's runtime context (never globals).

`verify_fn` and `prepare_fn` are plain callables so the real verifier plugs in and tests use fakes;
`store` is `kernelagent.memory.Store` (or anything with the same methods); `progress` receives events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelagent.agent.budget import Ledger
from kernelagent.agent.config import OptimizeConfig
from kernelagent.agent.providers.base import Provider
from kernelagent.agent.providers.prices import Price
from kernelagent.agent.replies import ReplyLog
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.report import Report

VerifyFn = Callable[[str, str, VerifyOptions], Report]
PrepareFn = Callable[[str], dict[str, Any]]
RetrieveFn = Callable[[Any, dict[str, Any], str, int], dict[str, Any]]
ProgressFn = Callable[[dict[str, Any]], None]


def no_prepare(problem_path: str) -> dict[str, Any]:
    """prepare_fn when none is given: no baseline, no roofline, nothing to add to the prompt."""
    return {}


def memory_retrieve(store: Any, prepared: dict[str, Any], backend: str, limit: int) -> dict[str, Any]:
    """Accepted kernels of similar problems and failure lessons, from the memory store."""
    if store is None or limit <= 0:
        return {"examples": [], "lessons": []}
    from kernelagent.memory.retrieval import lessons, similar_accepted

    signature = prepared.get("op_signature") or []
    examples = similar_accepted(store, signature, backend, limit,
                                exclude_problem=prepared.get("problem_id")) if signature else []
    return {"examples": examples, "lessons": lessons(store, backend, limit=5)}


@dataclass
class Deps:
    """The collaborators of a run. Only `provider` and `verify_fn` are required."""

    provider: Provider
    verify_fn: VerifyFn
    store: Any = None
    prepare_fn: PrepareFn = no_prepare
    retrieve_fn: RetrieveFn = memory_retrieve
    verify_options: VerifyOptions = field(default_factory=VerifyOptions)
    progress: ProgressFn | None = None
    home: Path | None = None
    price: Price | None = None           # what calls cost; None: the provider's own reckoning, no dollar check


@dataclass
class RunContext:
    """LangGraph runtime context: the dependencies, the run's settings and where its files go."""

    deps: Deps
    config: OptimizeConfig
    workdir: Path
    ledger: Ledger | None = None         # spending, checked before each call
    replies: ReplyLog | None = None      # every paid reply of the run
    path_labels: dict[str, str] = field(default_factory=dict)  # local folders never shown to the model

    @property
    def call_max_tokens(self) -> int:
        return self.config.call_max_tokens

    def emit(self, event: str, **data: Any) -> None:
        """Send one progress event (a dict with an `event` key) to the progress callback, if any."""
        if self.deps.progress is not None:
            self.deps.progress({"event": event, **data})
