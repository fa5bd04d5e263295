"""Typed errors of the agent: provider failures, missing configuration, runs that cannot resume.

`SetupError` and its subclasses are the user's to fix (the CLI exits 2 with one line); `RunFailed`
means the run stopped on an error and can be resumed (exit 3); `RunInterrupted` is Ctrl-C (exit 130).
"""

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


class ReplyBroken(ProviderError):
    """A reply broke off after the request was accepted: dropped, stalled, empty or not what the API sends.

    Retried by re-sending the request; the text that had arrived is kept by the caller (it was paid for).
    """

    def __init__(self, message: str):
        super().__init__(message, retryable=True)


class ProviderCancelled(ProviderError):
    """The caller cancelled the call (Ctrl-C); what had arrived is kept by the caller."""


class SetupError(AgentError):
    """Something the user must fix before any paid call: a price, a model name, a missing extra."""


class ProviderNotConfigured(SetupError):
    """No usable provider: the message says exactly which variables and flags to set."""


class UnknownPrice(SetupError):
    """The model has no known price, so a dollar budget could not be kept; --price-in/--price-out fix it."""


class ModelUnavailable(SetupError):
    """The provider does not offer the requested model; the message names those it does offer."""


class MissingExtra(SetupError):
    """The requested backend needs a package that is not installed (e.g. `cute` without nvidia-cutlass-dsl)."""


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
