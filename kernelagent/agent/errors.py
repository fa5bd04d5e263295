"""Typed errors of the agent: provider failures, missing configuration, runs that cannot resume."""

from __future__ import annotations


class AgentError(Exception):
    """Base class of every error the agent raises on purpose."""


class ProviderError(AgentError):
    """An LLM call failed for good (after retries, or with an error that retrying cannot fix)."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False,
                 retry_after: float | None = None):
        super().__init__(message)
        self.status, self.retryable, self.retry_after = status, retryable, retry_after


class ProviderAuthError(ProviderError):
    """The provider refused the credentials (401/403)."""


class ProviderNotConfigured(AgentError):
    """No usable provider: the message says exactly which variables and flags to set."""


class ReplayError(ProviderError):
    """A replay script ran out of lines or a prompt did not contain what the script expected."""


class RunNotFound(AgentError):
    """`--resume RUN_ID` named a run with no checkpoint."""


class RunFailed(AgentError):
    """The loop stopped on an error; the run can be resumed with its id."""

    def __init__(self, message: str, *, run_id: str):
        super().__init__(message)
        self.run_id = run_id


class RunInterrupted(RunFailed):
    """The user interrupted the loop (Ctrl-C); the run can be resumed with its id."""
