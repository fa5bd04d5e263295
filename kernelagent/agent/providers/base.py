"""The one small interface every LLM provider implements, and what a call reports while it runs.

Messages are provider-neutral: `[{"role": "user"|"assistant", "content": str}, ...]`, starting with a
user message; the system prompt is a list of `Block`s, those marked `cache` are worth caching.
Retries belong to the SDKs (anthropic's `max_retries`) or to tenacity (`retrying`); `RetryPolicy` holds
the numbers both read, so tests make them fast instead of sleeping.
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import tenacity

from kernelagent.agent.errors import ProviderCancelled, ProviderError


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
    thinking_chars: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RetryPolicy:
    """How long a provider keeps trying. Defaults survive a 529 storm of several minutes.

    `attempts` bounds retries of error statuses (anthropic: the SDK's `max_retries = attempts - 1`, whose
    back-off doubles from 0.5 s to 8 s, so 60 attempts wait about 7 minutes); a server's Retry-After wins.
    `stream_attempts` bounds re-sends after a reply broke off (dropped, stalled, empty or malformed).
    `stall_timeout` is the longest silence inside a streamed reply (the API sends pings meanwhile).
    """

    attempts: int = 60
    stream_attempts: int = 3
    initial_wait: float = 0.5
    max_wait: float = 8.0
    stall_timeout: float = 120.0
    request_timeout: float = 600.0   # a whole non-streamed reply
    connect_timeout: float = 10.0


RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class CallHooks:
    """The caller's side of one call: streamed text arrives here, retries are counted, Ctrl-C cancels.

    Text of an attempt that broke off stays in `partials` (it was paid for); `text()` is the current one.
    """

    def __init__(self, on_event: Callable[[dict[str, Any]], None] | None = None):
        self.on_event = on_event
        self.pieces: list[str] = []
        self.partials: list[str] = []
        self.retries = 0
        self.input_tokens = 0           # from the stream's start, when a reply breaks off
        self.cancelled = threading.Event()
        self._open: list[Any] = []
        self._lock = threading.Lock()

    def text(self) -> str:
        return "".join(self.pieces)

    def streamed(self, piece: str) -> None:
        """A piece of reply text arrived."""
        self.pieces.append(piece)
        self._emit("stream", chars=sum(map(len, self.pieces)) + sum(map(len, self.partials)))

    def retrying(self, reason: str, wait: float | None) -> None:
        """The provider will try again after `wait` seconds (None: the SDK decides)."""
        self.retries += 1
        if self.pieces:
            self.partials.append(self.text())
            self.pieces = []
        self._emit("retry", reason=reason, wait=wait, retries=self.retries)

    def check(self) -> None:
        """Raise ProviderCancelled once the caller cancelled."""
        if self.cancelled.is_set():
            raise ProviderCancelled("the call was cancelled")

    @contextmanager
    def opened(self, resource: Any) -> Iterator[Any]:
        """Track an open response so `cancel()` can close it from another thread."""
        with self._lock:
            self._open.append(resource)
        try:
            yield resource
        finally:
            with self._lock:
                if resource in self._open:
                    self._open.remove(resource)

    def cancel(self) -> None:
        """Stop the call: set the flag and close whatever response is open (best effort)."""
        self.cancelled.set()
        with self._lock:
            items = list(self._open)
        for item in items:
            try:
                hard_close(getattr(item, "response", item))
            except (OSError, RuntimeError, ValueError):  # closing a response another thread reads
                pass

    def _emit(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event({"event": event, **data})


def hard_close(response: Any) -> None:
    """Close a response another thread is blocked reading: shut its socket down (which wakes the read at
    once, where a plain close may not), then close it. The socket comes from httpcore's `network_stream`."""
    stream = (getattr(response, "extensions", None) or {}).get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        sock.shutdown(socket.SHUT_RDWR)
    response.close()


class Provider(Protocol):
    """An LLM behind one method. `max_concurrency` caps parallel calls (1 keeps replay deterministic)."""

    name: str
    model: str
    max_concurrency: int

    def complete(self, system: list[Block], messages: list[dict[str, str]], *, max_tokens: int,
                 hooks: CallHooks | None = None) -> Completion:
        ...


def retry_after_or_backoff(policy: RetryPolicy) -> Callable[[tenacity.RetryCallState], float]:
    """A tenacity wait: the error's Retry-After when it has one, else capped exponential back-off."""
    def wait(state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        after = getattr(error, "retry_after", None)
        if after is not None and after >= 0:
            return float(after)
        doubled = min(policy.max_wait, policy.initial_wait * 2 ** (state.attempt_number - 1))
        return doubled + random.uniform(0, policy.initial_wait / 2)

    return wait


def retrying(call: Callable[[], Any], *, attempts: int, policy: RetryPolicy, hooks: CallHooks,
             retry_if: Callable[[BaseException], bool]) -> Any:
    """Run `call`, trying again on errors `retry_if` accepts, at most `attempts` times (tenacity)."""
    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        hooks.retrying(str(error)[:120], state.upcoming_sleep)

    def should(error: BaseException) -> bool:
        return not hooks.cancelled.is_set() and retry_if(error)

    runner = tenacity.Retrying(stop=tenacity.stop_after_attempt(max(1, attempts)),
                               wait=retry_after_or_backoff(policy), retry=tenacity.retry_if_exception(should),
                               before_sleep=before_sleep, sleep=_sleeper(hooks), reraise=True)
    try:
        return runner(call)
    except ProviderError as error:
        if hooks.cancelled.is_set() and not isinstance(error, ProviderCancelled):
            raise ProviderCancelled("the call was cancelled") from error  # whatever the closed stream looked like
        raise


def _sleeper(hooks: CallHooks) -> Callable[[float], None]:
    """Sleep that wakes at once when the call is cancelled."""
    def sleep(seconds: float) -> None:
        if hooks.cancelled.wait(seconds):
            raise ProviderCancelled("the call was cancelled while waiting to retry")
    return sleep


def retryable(error: BaseException) -> bool:
    return isinstance(error, ProviderError) and error.retryable


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or a numeric `retry-after` header; None when absent or unreadable."""
    for key, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(key) if headers is not None else None
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            continue
    return None


def prompt_text(system: list[Block], messages: list[dict[str, str]]) -> str:
    """Everything a call sends, as one string (for replay assertions and logs)."""
    return "\n\n".join([b.text for b in system] + [m["content"] for m in messages])
