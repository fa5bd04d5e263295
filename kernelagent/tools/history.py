"""Read memory for outside agents: recent attempts, and one attempt's source, verdict and feedback."""

from __future__ import annotations

from typing import Any

from kernelagent.tools.verify import InputError


def recent(store: Any, problem: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """Newest attempts first (no source); `problem` filters by name or id prefix."""
    if limit < 1:
        raise InputError("limit must be at least 1")
    return store.history(problem, limit=limit)


def one(store: Any, attempt_id: str) -> dict[str, Any]:
    """One attempt by id or unique prefix: its source, verdict, feedback and report."""
    from kernelagent.memory.store import AmbiguousIdError

    try:
        row = store.attempt(attempt_id)
    except AmbiguousIdError as e:
        raise InputError(str(e)) from e
    if row is None:
        raise InputError(f"no attempt {attempt_id!r}")
    return row
