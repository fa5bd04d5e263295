"""Anthropic Messages API through the official SDK: prompt caching, streaming, extended thinking.

Error statuses (429, 5xx, 529 overloaded) are retried by the SDK itself (`max_retries`, Retry-After
honoured); a reply that breaks off after it started (dropped, stalled, empty, not an event stream) is
re-sent with tenacity. The events are read one by one, so a broken stream is seen, never a traceback.
"""

from __future__ import annotations

import threading
from typing import Any

import anthropic
import httpx2

from kernelagent.agent.errors import ModelUnavailable, ProviderAuthError, ProviderCancelled, ProviderError, ReplyBroken
from kernelagent.agent.providers.base import (
    RETRY_STATUSES,
    Block,
    CallHooks,
    Completion,
    RetryPolicy,
    parse_retry_after,
    retrying,
)
from kernelagent.agent.providers.prices import Price, cost_usd

CACHE = {"type": "ephemeral"}
MODEL_CHECK_RETRIES = 2


def has_credentials(client: anthropic.Anthropic) -> bool:
    """True when the SDK found an API key, an auth token or a credentials profile."""
    return bool(client.api_key or client.auth_token or client.credentials)


def system_param(system: list[Block]) -> list[dict[str, Any]]:
    """System blocks as text blocks; a cache breakpoint after each block marked `cache` (at most 3)."""
    marked = [i for i, b in enumerate(system) if b.cache][-3:]
    return [{"type": "text", "text": b.text, **({"cache_control": CACHE} if i in marked else {})}
            for i, b in enumerate(system)]


def messages_param(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Messages as content blocks; the first user message (the problem, shared by all branches) is cached."""
    out = []
    for i, m in enumerate(messages):
        block: dict[str, Any] = {"type": "text", "text": m["content"]}
        if i == 0:
            block["cache_control"] = CACHE
        out.append({"role": m["role"], "content": [block]})
    return out


def _wrap(error: anthropic.APIError) -> ProviderError:
    """The SDK's final error (its own retries are spent) as a ProviderError."""
    if isinstance(error, anthropic.APIStatusError):
        status = error.status_code
        if status in (401, 403):
            return ProviderAuthError(f"Anthropic refused the credentials ({status}): {error.message}",
                                     status=status)
        return ProviderError(f"Anthropic API error {status}: {error.message}", status=status,
                             retryable=status in RETRY_STATUSES,
                             retry_after=parse_retry_after(error.response.headers))
    if isinstance(error, anthropic.APITimeoutError):
        return ProviderError("Anthropic API did not answer in time", retryable=True)
    return ProviderError(f"Anthropic API unreachable: {error}", retryable=True)


class _Reply:
    """A streamed reply put together event by event."""

    def __init__(self, model: str):
        self.model, self.text_parts, self.thinking_chars = model, [], 0
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.started = self.finished = False

    def add(self, event: Any, hooks: CallHooks) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.started, self.model = True, event.message.model or self.model
            self._usage(event.message.usage)
            hooks.input_tokens = self.usage.get("input_tokens", 0)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                self.text_parts.append(delta.text)
                hooks.streamed(delta.text)
            elif delta.type == "thinking_delta":
                self.thinking_chars += len(delta.thinking)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._usage(event.usage)
        elif kind == "message_stop":
            self.finished = True

    def _usage(self, usage: Any) -> None:
        for key, attr in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                          ("cache_read_tokens", "cache_read_input_tokens"),
                          ("cache_write_tokens", "cache_creation_input_tokens")):
            value = getattr(usage, attr, None)
            if value is not None:
                self.usage[key] = value


class AnthropicProvider:
    """Claude through `anthropic.Anthropic`; honours ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL."""

    name = "anthropic"

    def __init__(self, model: str, *, client: anthropic.Anthropic, stream: bool = True,
                 retry: RetryPolicy | None = None, thinking_budget: int | None = None,
                 price: Price | None = None, max_concurrency: int = 8):
        self.model, self.client, self.stream = model, client, stream
        self.retry = retry or RetryPolicy()
        self.thinking_budget, self.price = thinking_budget, price
        self.max_concurrency = max_concurrency
        self._local = threading.local()

    # -- start-up check ----------------------------------------------------------------------------------
    def check_model(self) -> None:
        """Raise ModelUnavailable (naming the usable ids) when the key cannot use `self.model`."""
        try:
            models = list(self.client.with_options(max_retries=MODEL_CHECK_RETRIES).models.list(limit=1000))
        except anthropic.NotFoundError:
            return  # a gateway without the models endpoint: the first call will tell
        except anthropic.APIError as error:
            raise _wrap(error) from error
        usable = [m.id for m in models if getattr(m, "lifecycle", "active") != "retired"]
        if not any(self.model == m or m.startswith(self.model + "-") for m in usable):
            raise ModelUnavailable(f"model {self.model!r} is not available to this API key; it can use: "
                                   f"{', '.join(usable) or 'no models'} (choose one with --model)")

    # -- one reply -----------------------------------------------------------------------------------------
    def complete(self, system: list[Block], messages: list[dict[str, str]], *, max_tokens: int,
                 hooks: CallHooks | None = None) -> Completion:
        """One reply, with tokens and dollars counted; ProviderError when it finally fails."""
        hooks = hooks or CallHooks()
        self._local.hooks = hooks
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens,
                                  "system": system_param(system), "messages": messages_param(messages)}
        if self.thinking_budget:
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        once = self._stream_once if self.stream else self._create_once
        return retrying(lambda: once(kwargs, hooks), attempts=self.retry.stream_attempts, policy=self.retry,
                        hooks=hooks, retry_if=lambda e: isinstance(e, ReplyBroken))

    def on_response(self, response: httpx2.Response) -> None:
        """httpx event hook: an error status the SDK will retry shows up in the live view."""
        hooks = getattr(self._local, "hooks", None)
        if hooks is not None and response.status_code in RETRY_STATUSES:
            hooks.retrying(f"HTTP {response.status_code}", parse_retry_after(response.headers))

    def _create_once(self, kwargs: dict[str, Any], hooks: CallHooks) -> Completion:
        hooks.check()
        try:
            message = self.client.messages.create(**kwargs)
        except anthropic.APIError as error:
            raise _wrap(error) from error
        if not isinstance(message, anthropic.types.Message):
            raise ReplyBroken("the API answered 200 with a body that is not a message")
        text = "".join(b.text for b in message.content if b.type == "text")
        reply = _Reply(message.model or self.model)
        reply._usage(message.usage)
        reply.stop_reason, reply.text_parts = message.stop_reason, [text]
        return self._completion(reply)

    def _stream_once(self, kwargs: dict[str, Any], hooks: CallHooks) -> Completion:
        hooks.check()
        try:
            stream = self.client.messages.create(**kwargs, stream=True)
        except anthropic.APIError as error:
            raise _wrap(error) from error
        reply = _Reply(self.model)
        with hooks.opened(stream), stream:
            try:
                for event in stream:
                    hooks.check()
                    reply.add(event, hooks)
            except (httpx2.TransportError, httpx2.StreamError, anthropic.APIError, ValueError) as error:
                if hooks.cancelled.is_set():
                    raise ProviderCancelled("the call was cancelled") from error
                raise ReplyBroken(f"the reply broke off: {type(error).__name__}: {str(error)[:200]}") from error
        if not reply.finished:
            hooks.check()
            what = "was empty or not an event stream" if not reply.started else "ended before message_stop"
            raise ReplyBroken(f"the streamed reply {what}")
        return self._completion(reply)

    def _completion(self, reply: _Reply) -> Completion:
        tokens = {k: reply.usage.get(k, 0) or 0 for k in
                  ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")}
        return Completion(text="".join(reply.text_parts), **tokens,
                          cost_usd=cost_usd(self.model, **tokens, price=self.price),
                          raw_stop_reason=reply.stop_reason, model=reply.model or self.model,
                          thinking_chars=reply.thinking_chars)


def make_anthropic(model: str, base_url: str | None, *, api_key: str | None = None, stream: bool = True,
                   retry: RetryPolicy | None = None, thinking_budget: int | None = None,
                   price: Price | None = None) -> AnthropicProvider | str:
    """The provider, or why the SDK found no usable credentials (the caller explains how to add them)."""
    retry = retry or RetryPolicy()
    read = retry.stall_timeout if stream else retry.request_timeout
    timeout = httpx2.Timeout(read, connect=retry.connect_timeout)
    holder: list[AnthropicProvider] = []
    http = anthropic.DefaultHttpxClient(timeout=timeout, event_hooks={
        "response": [lambda r: holder[0].on_response(r) if holder else None]})
    kwargs: dict[str, Any] = {"base_url": base_url, "max_retries": max(0, retry.attempts - 1), "timeout": timeout,
                              "http_client": http}
    if api_key:
        kwargs["api_key"] = api_key
    try:
        client = anthropic.Anthropic(**kwargs)
    except anthropic.AnthropicError as error:  # e.g. a broken profile under ANTHROPIC_CONFIG_DIR
        return f"The Anthropic SDK could not load credentials: {error}"
    if not has_credentials(client):
        return "No LLM provider is configured: ANTHROPIC_API_KEY is not set."
    holder.append(AnthropicProvider(model, client=client, stream=stream, retry=retry,
                                    thinking_budget=thinking_budget, price=price))
    return holder[0]
