"""Any OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp, OpenAI) over httpx.

`base_url` is the API root including `/v1` (http://localhost:8000/v1). With no model given, the first
model the server lists under /models is used, which is what a one-model local server wants.
Retries are tenacity's: error statuses and unreachable servers with back-off (Retry-After honoured),
then a re-send when a reply breaks off (dropped, stalled, empty, not JSON or SSE).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from kernelagent.agent.errors import ModelUnavailable, ProviderAuthError, ProviderCancelled, ProviderError, ReplyBroken
from kernelagent.agent.providers.base import (
    RETRY_STATUSES,
    Block,
    CallHooks,
    Completion,
    RetryPolicy,
    parse_retry_after,
    retryable,
    retrying,
)
from kernelagent.agent.providers.prices import Price, cost_usd

OPENAI_URL = "https://api.openai.com/v1"


def chat_messages(system: list[Block], messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """One system message (the blocks joined), then the conversation unchanged."""
    head = [{"role": "system", "content": "\n\n".join(b.text for b in system)}] if system else []
    return head + [{"role": m["role"], "content": m["content"]} for m in messages]


def _status_error(response: httpx.Response) -> ProviderError:
    status = response.status_code
    detail = response.text[:500]
    if status in (401, 403):
        return ProviderAuthError(f"the server refused the credentials ({status}): {detail}", status=status)
    return ProviderError(f"chat completions error {status}: {detail}", status=status,
                         retryable=status in RETRY_STATUSES or status >= 500,
                         retry_after=parse_retry_after(response.headers))


def _sse_data(lines: Iterator[str]) -> Iterator[dict[str, Any] | None]:
    """The JSON payloads of an SSE stream; None for `data: [DONE]`. ReplyBroken for a line that is not JSON."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            yield None
            return
        if data:
            try:
                payload = json.loads(data)
            except ValueError as error:
                raise ReplyBroken(f"the reply stream held a line that is not JSON: {data[:80]!r}") from error
            if isinstance(payload, dict) and payload.get("error"):
                raise ReplyBroken(f"the server reported an error inside the stream: {str(payload['error'])[:200]}")
            yield payload


def _usage(usage: dict[str, Any] | None) -> dict[str, int]:
    usage = usage or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {"input_tokens": max(0, (usage.get("prompt_tokens") or 0) - cached),
            "output_tokens": usage.get("completion_tokens") or 0, "cache_read_tokens": cached}


class OpenAIProvider:
    """Chat completions over httpx, streamed (with usage) or as one JSON reply."""

    name = "openai"

    def __init__(self, model: str | None, base_url: str, *, api_key: str | None = None, stream: bool = True,
                 retry: RetryPolicy | None = None, price: Price | None = None, max_concurrency: int = 8):
        self.retry = retry or RetryPolicy()
        read = self.retry.stall_timeout if stream else self.retry.request_timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                   timeout=httpx.Timeout(read, connect=self.retry.connect_timeout))
        self.model, self.stream, self.price = model or "", stream, price
        self.max_concurrency = max_concurrency

    # -- start-up check ----------------------------------------------------------------------------------
    def check_model(self) -> None:
        """Pick the server's first model when none was given; ModelUnavailable when the named one is missing."""
        listed = self._models(CallHooks())
        if not self.model:
            if not listed:
                raise ModelUnavailable("the server lists no models; pass --model NAME")
            self.model = listed[0]
        elif listed and self.model not in listed:
            raise ModelUnavailable(f"model {self.model!r} is not served here; the server offers: "
                                   f"{', '.join(listed)} (choose one with --model)")

    def _models(self, hooks: CallHooks) -> list[str]:
        def once() -> list[str]:
            response = self._send(lambda: self.client.get("/models"))
            if response.status_code == 404:
                return []
            if response.status_code != 200:
                raise _status_error(response)
            try:
                return [m["id"] for m in response.json().get("data") or []]
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                raise ProviderError(f"the server's model list is not understood: {error!r}") from error
        return retrying(once, attempts=self.retry.attempts, policy=self.retry, hooks=hooks, retry_if=retryable)

    # -- one reply -----------------------------------------------------------------------------------------
    def complete(self, system: list[Block], messages: list[dict[str, str]], *, max_tokens: int,
                 hooks: CallHooks | None = None) -> Completion:
        """One reply, with tokens and dollars counted; ProviderError when it finally fails."""
        hooks = hooks or CallHooks()
        if not self.model:
            self.check_model()
        body: dict[str, Any] = {"model": self.model, "messages": chat_messages(system, messages),
                                "max_tokens": max_tokens, "stream": self.stream}
        if self.stream:
            body["stream_options"] = {"include_usage": True}

        def request() -> tuple[str, dict | None, str | None]:
            return retrying(lambda: self._once(body, hooks), attempts=self.retry.attempts, policy=self.retry,
                            hooks=hooks, retry_if=lambda e: retryable(e) and not isinstance(e, ReplyBroken))

        text, usage, stop = retrying(request, attempts=self.retry.stream_attempts, policy=self.retry, hooks=hooks,
                                     retry_if=lambda e: isinstance(e, ReplyBroken))
        tokens = _usage(usage)
        return Completion(text=text, **tokens, cost_usd=cost_usd(self.model, **tokens, price=self.price),
                          raw_stop_reason=stop, model=self.model)

    @staticmethod
    def _send(fn: Any) -> Any:
        try:
            return fn()
        except httpx.TimeoutException as error:
            raise ProviderError(f"chat completions server did not answer in time: {error}", retryable=True) from error
        except httpx.TransportError as error:
            raise ProviderError(f"chat completions server unreachable: {error}", retryable=True) from error

    def _once(self, body: dict[str, Any], hooks: CallHooks) -> tuple[str, dict | None, str | None]:
        hooks.check()
        if not self.stream:
            response = self._send(lambda: self.client.post("/chat/completions", json=body))
            if response.status_code != 200:
                raise _status_error(response)
            return _json_reply(response)
        request = self.client.build_request("POST", "/chat/completions", json=body)
        response = self._send(lambda: self.client.send(request, stream=True))
        with hooks.opened(response):
            try:
                if response.status_code != 200:
                    response.read()
                    raise _status_error(response)
                return self._read_stream(response, hooks)
            except (httpx.TransportError, httpx.StreamError) as error:
                if hooks.cancelled.is_set():
                    raise ProviderCancelled("the call was cancelled") from error
                raise ReplyBroken(f"the reply broke off: {type(error).__name__}: {str(error)[:200]}") from error
            finally:
                response.close()

    @staticmethod
    def _read_stream(response: httpx.Response, hooks: CallHooks) -> tuple[str, dict | None, str | None]:
        if "text/event-stream" not in response.headers.get("content-type", ""):
            raise ReplyBroken(f"the server answered 200 with {response.headers.get('content-type') or 'no type'}, "
                              "not an event stream")
        parts, usage, stop, done = [], None, None, False
        for chunk in _sse_data(response.iter_lines()):
            hooks.check()
            if chunk is None:
                done = True
                break
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece:
                    parts.append(piece)
                    hooks.streamed(piece)
                stop = choice.get("finish_reason") or stop
        if not done and stop is None:
            raise ReplyBroken("the streamed reply ended before its end marker" if parts
                              else "the streamed reply was empty")
        return "".join(parts), usage, stop


def _json_reply(response: httpx.Response) -> tuple[str, dict | None, str | None]:
    """Text, usage and finish reason of a non-streamed reply; ReplyBroken when the body is not one."""
    try:
        data = response.json()
        choice = data["choices"][0]
        return choice["message"].get("content") or "", data.get("usage"), choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
        raise ReplyBroken(f"the server answered 200 with a body that is not a chat completion: "
                          f"{response.text[:80]!r}") from error
