"""Any OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp, OpenAI) over plain httpx.

`base_url` is the API root including `/v1` (http://localhost:8000/v1). With no model given, the first
model the server lists under /models is used, which is what a one-model local server wants.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from kernelagent.agent.errors import ProviderAuthError, ProviderError
from kernelagent.agent.providers.base import Block, Completion, RetryPolicy, parse_retry_after, with_retries
from kernelagent.agent.providers.prices import cost_usd

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
                         retryable=status in (408, 409, 429) or status >= 500,
                         retry_after=parse_retry_after(response.headers.get("retry-after")))


def _sse_data(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON payloads of an SSE stream, up to `data: [DONE]`."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        if data:
            yield json.loads(data)


def _usage(usage: dict[str, Any] | None) -> dict[str, int]:
    usage = usage or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {"input_tokens": max(0, (usage.get("prompt_tokens") or 0) - cached),
            "output_tokens": usage.get("completion_tokens") or 0, "cache_read_tokens": cached}


class OpenAIProvider:
    """Chat completions over httpx, streamed (with usage) or as one JSON reply."""

    name = "openai"

    def __init__(self, model: str | None, base_url: str, *, api_key: str | None = None, stream: bool = True,
                 retry: RetryPolicy | None = None, timeout: float = 600.0, max_concurrency: int = 8):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self.model, self.stream = model or "", stream
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency

    def complete(self, system: list[Block], messages: list[dict[str, str]], *, max_tokens: int) -> Completion:
        """One reply, with tokens and dollars counted."""
        if not self.model:
            self.model = with_retries(self._first_model, self.retry)
        body: dict[str, Any] = {"model": self.model, "messages": chat_messages(system, messages),
                                "max_tokens": max_tokens, "stream": self.stream}
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        text, usage, stop = with_retries(lambda: self._call(body), self.retry)
        tokens = _usage(usage)
        return Completion(text=text, **tokens, cost_usd=cost_usd(self.model, **tokens),
                          raw_stop_reason=stop, model=self.model)

    def _call(self, body: dict[str, Any]) -> tuple[str, dict | None, str | None]:
        try:
            if not self.stream:
                response = self.client.post("/chat/completions", json=body)
                if response.status_code != 200:
                    raise _status_error(response)
                data = response.json()
                choice = data["choices"][0]
                return choice["message"].get("content") or "", data.get("usage"), choice.get("finish_reason")
            with self.client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code != 200:
                    response.read()
                    raise _status_error(response)
                return self._read_stream(response)
        except httpx.TransportError as error:
            raise ProviderError(f"chat completions server unreachable: {error}", retryable=True) from error
        except (KeyError, IndexError, ValueError) as error:
            raise ProviderError(f"chat completions reply not understood: {error!r}") from error

    @staticmethod
    def _read_stream(response: httpx.Response) -> tuple[str, dict | None, str | None]:
        parts, usage, stop = [], None, None
        for chunk in _sse_data(response.iter_lines()):
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                parts.append((choice.get("delta") or {}).get("content") or "")
                stop = choice.get("finish_reason") or stop
        return "".join(parts), usage, stop

    def _first_model(self) -> str:
        try:
            response = self.client.get("/models")
        except httpx.TransportError as error:
            raise ProviderError(f"chat completions server unreachable: {error}", retryable=True) from error
        if response.status_code != 200:
            raise _status_error(response)
        models = response.json().get("data") or []
        if not models:
            raise ProviderError("the server lists no models; pass --model NAME")
        return models[0]["id"]
