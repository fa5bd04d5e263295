"""A stand-in OpenAI-compatible server: POST /v1/chat/completions (JSON and SSE) and GET /v1/models.

Scripted failures (stall, drop, malformed, empty, error statuses) are described in http_fake.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from tests.fakes.http_fake import ScriptedServer, Step, chunks, send_json, start_sse

MODEL = "fake-coder"


def _usage(r: Step) -> dict:
    prompt = r["input_tokens"] + r["cache_read"]
    return {"prompt_tokens": prompt, "completion_tokens": r["output_tokens"],
            "total_tokens": prompt + r["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": r["cache_read"]}}


def _data(h: BaseHTTPRequestHandler, payload: dict | str) -> None:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    h.wfile.write(f"data: {text}\n\n".encode())
    h.wfile.flush()


def _error(status: int) -> dict:
    return {"error": {"message": "fake failure", "code": status}}


class FakeOpenAI(ScriptedServer):
    models: tuple[str, ...] = (MODEL, "gpt-4o-mini")

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict) -> None:
        if path.rstrip("/").endswith("/models"):
            return send_json(h, 200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})
        if not path.startswith("/v1/chat/completions"):
            return send_json(h, 404, {"error": {"message": path}})
        step = self.take(body)
        if step is None:
            return send_json(h, 400, {"error": {"message": "script exhausted"}})
        if self.failure(h, step, _error):
            return
        finish = step["stop_reason"] or "stop"
        if not body.get("stream"):
            return send_json(h, 200, {
                "id": f"chatcmpl-{self.served}", "object": "chat.completion", "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": step["text"]},
                             "finish_reason": finish}], "usage": _usage(step)})
        self._stream(h, body, step, finish)

    def _stream(self, h: BaseHTTPRequestHandler, body: dict, step: Step, finish: str) -> None:
        start_sse(h)
        base = {"id": f"chatcmpl-{self.served}", "object": "chat.completion.chunk", "model": body.get("model")}
        for sent, piece in enumerate(chunks(step["text"]), 1):
            _data(h, {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
            self.streaming.set()
            if self.interrupt(h, step, sent):
                return
            self.wait(step)
        _data(h, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            _data(h, {**base, "choices": [], "usage": _usage(step)})
        _data(h, "[DONE]")


def prompt_of(body: dict) -> str:
    return "\n".join(m["content"] for m in body.get("messages", []))


def last_user_text(body: dict) -> str:
    return body["messages"][-1]["content"]
