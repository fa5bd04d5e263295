"""A wall-clock bound on a policy check.

The verifier runs the static policy in its own process, before any worker exists, so no worker's timeout bounds
it; `bounded(seconds)` sets a deadline for the checks made inside it, and `check()` (called where the work grows:
each resolved expression, each solver evaluation, each call-graph edge) raises PolicyTimeout once it has passed.
A context variable, so checks running in other threads keep their own deadlines.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("policy_deadline", default=None)


class PolicyTimeout(Exception):
    """The policy's deadline passed before the check finished."""


@contextlib.contextmanager
def bounded(seconds: float | None) -> Iterator[None]:
    """Checks inside end by PolicyTimeout after `seconds` (None: no bound)."""
    token = _DEADLINE.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check() -> None:
    end = _DEADLINE.get()
    if end is not None and time.monotonic() >= end:
        raise PolicyTimeout
