"""The one small interface every LLM provider implements, and the retry loop they share.

Messages are provider-neutral: `[{"role": "user"|"assistant", "content": str}, ...]`, starting with a
user message; the system prompt is a list of `Block`s, those marked `cache` are worth caching.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar

from kernelagent.agent.errors import ProviderError

T = TypeVar("T")


@dataclass(frozen=True)
class Block:
    """One piece of the system prompt; `cache=True` asks the provider to cache everything up to here."""

    text: str
    cache: bool = False


@dataclass
class Completion:
    """One reply and what it cost. `input_tokens` counts uncached input only."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    raw_stop_reason: str | None = None
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Provider(Protocol):
    """An LLM behind one method. `max_concurrency` caps parallel calls (1 keeps replay deterministic)."""

    name: str
    model: str
    max_concurrency: int

    def complete(self, system: list[Block], messages: list[dict[str, str]], *, max_tokens: int) -> Completion:
        ...


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter; a server's Retry-After wins when it is given."""

    retries: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_delay, max(0.0, retry_after))
        return min(self.max_delay, self.base_delay * 2**attempt) * (0.5 + random.random() / 2)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (numeric form only); None when absent or unreadable."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def with_retries(call: Callable[[], T], policy: RetryPolicy,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `call`, retrying a `ProviderError` marked retryable (429, 5xx, overloaded, connection)."""
    for attempt in range(policy.retries + 1):
        try:
            return call()
        except ProviderError as error:
            if not error.retryable or attempt == policy.retries:
                raise
            sleep(policy.delay(attempt, error.retry_after))
    raise AssertionError("unreachable")


def prompt_text(system: list[Block], messages: list[dict[str, str]]) -> str:
    """Everything a call sends, as one string (for replay assertions and logs)."""
    return "\n\n".join([b.text for b in system] + [m["content"] for m in messages])
