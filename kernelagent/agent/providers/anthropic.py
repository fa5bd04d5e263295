"""Anthropic Messages API through the official SDK: prompt caching, streaming, our own retry loop.

The SDK's own retries are off (max_retries=0) so that one policy, with Retry-After honoured, covers
429, 5xx and 529 overloaded the same way for every provider.
"""

from __future__ import annotations

from typing import Any

import anthropic

from kernelagent.agent.errors import ProviderAuthError, ProviderError
from kernelagent.agent.providers.base import Block, Completion, RetryPolicy, parse_retry_after, with_retries
from kernelagent.agent.providers.prices import cost_usd

CACHE = {"type": "ephemeral"}


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
    if isinstance(error, anthropic.APIStatusError):
        status = error.status_code
        if status in (401, 403):
            return ProviderAuthError(f"Anthropic refused the credentials ({status}): {error.message}",
                                     status=status)
        retryable = status in (408, 409, 429) or status >= 500
        return ProviderError(f"Anthropic API error {status}: {error.message}", status=status,
                             retryable=retryable,
                             retry_after=parse_retry_after(error.response.headers.get("retry-after")))
    return ProviderError(f"Anthropic API unreachable: {error}", retryable=True)


class AnthropicProvider:
    """Claude through `anthropic.Anthropic`; honours ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL."""

    name = "anthropic"

    def __init__(self, model: str, *, client: anthropic.Anthropic, stream: bool = True,
                 retry: RetryPolicy | None = None, max_concurrency: int = 8):
        self.model, self.client, self.stream = model, client, stream
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency

    def complete(self, system: list[Block], messages: list[dict[str, str]], *, max_tokens: int) -> Completion:
        """One reply, with tokens and dollars counted."""
        kwargs = {"model": self.model, "max_tokens": max_tokens, "system": system_param(system),
                  "messages": messages_param(messages)}
        message = with_retries(lambda: self._call(kwargs), self.retry)
        return self._completion(message)

    def _call(self, kwargs: dict[str, Any]) -> Any:
        try:
            if self.stream:
                with self.client.messages.stream(**kwargs) as stream:
                    return stream.get_final_message()
            return self.client.messages.create(**kwargs)
        except anthropic.APIError as error:
            raise _wrap(error) from error

    def _completion(self, message: Any) -> Completion:
        text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        u = message.usage
        tokens = {"input_tokens": u.input_tokens or 0, "output_tokens": u.output_tokens or 0,
                  "cache_read_tokens": getattr(u, "cache_read_input_tokens", None) or 0,
                  "cache_write_tokens": getattr(u, "cache_creation_input_tokens", None) or 0}
        return Completion(text=text, **tokens, cost_usd=cost_usd(self.model, **tokens),
                          raw_stop_reason=message.stop_reason, model=message.model or self.model)


def make_anthropic(model: str, base_url: str | None, *, api_key: str | None = None, stream: bool = True,
                   retry: RetryPolicy | None = None, timeout: float = 600.0) -> AnthropicProvider | str:
    """The provider, or why the SDK found no usable credentials (the caller explains how to add them)."""
    kwargs: dict[str, Any] = {"base_url": base_url, "max_retries": 0, "timeout": timeout}
    if api_key:
        kwargs["api_key"] = api_key
    try:
        client = anthropic.Anthropic(**kwargs)
    except anthropic.AnthropicError as error:  # e.g. a broken profile under ANTHROPIC_CONFIG_DIR
        return f"The Anthropic SDK could not load credentials: {error}"
    if not has_credentials(client):
        return "No LLM provider is configured: ANTHROPIC_API_KEY is not set."
    return AnthropicProvider(model, client=client, stream=stream, retry=retry)
