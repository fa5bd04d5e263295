"""A stand-in Anthropic Messages API (POST /v1/messages, JSON and SSE; GET /v1/models) for the real SDK.

    with FakeAnthropic(["reply 1", {"text": "reply 2", "output_tokens": 9}], failures=[529]) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.url

Scripted failures (stall, drop, malformed, empty, error statuses) are described in http_fake.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from tests.fakes.http_fake import ScriptedServer, Step, chunks, send_json, start_sse

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
               500: "api_error", 529: "overloaded_error"}
MODELS = ("claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5")


def _usage(r: Step) -> dict:
    return {"input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"],
            "cache_read_input_tokens": r["cache_read"], "cache_creation_input_tokens": r["cache_write"]}


def message(r: Step, model: str, n: int) -> dict:
    return {"id": f"msg_fake{n}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": r["text"]}], "stop_reason": r["stop_reason"] or "end_turn",
            "stop_sequence": None, "usage": _usage(r)}


def _error(status: int) -> dict:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": "fake"}}


def _event(h: BaseHTTPRequestHandler, name: str, data: dict) -> None:
    h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    h.wfile.flush()


def model_list(models: tuple[str, ...]) -> dict:
    data = [{"type": "model", "id": m, "display_name": m, "created_at": "2026-01-01T00:00:00Z",
             "lifecycle": "active"} for m in models]
    return {"data": data, "has_more": False, "first_id": models[0] if models else None,
            "last_id": models[-1] if models else None}


class FakeAnthropic(ScriptedServer):
    models: tuple[str, ...] = MODELS

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict) -> None:
        if path.startswith("/v1/models"):
            return send_json(h, 200, model_list(self.models))
        if not path.startswith("/v1/messages"):
            return send_json(h, 404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        step = self.take(body)
        if step is None:
            err = {"type": "error", "error": {"type": "invalid_request_error", "message": "script exhausted"}}
            return send_json(h, 400, err)
        if self.failure(h, step, _error):
            return
        msg = message(step, body.get("model", "fake"), self.served)
        if not body.get("stream"):
            return send_json(h, 200, msg)
        self._stream(h, msg, step)

    def _stream(self, h: BaseHTTPRequestHandler, msg: dict, step: Step) -> None:
        start_sse(h)
        head = {**msg, "content": [], "stop_reason": None, "usage": {**_usage(step), "output_tokens": 1}}
        _event(h, "message_start", {"type": "message_start", "message": head})
        _event(h, "content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})
        _event(h, "ping", {"type": "ping"})
        for sent, piece in enumerate(chunks(step["text"]), 1):
            _event(h, "content_block_delta", {"type": "content_block_delta", "index": 0,
                                              "delta": {"type": "text_delta", "text": piece}})
            self.streaming.set()
            if self.interrupt(h, step, sent):
                return
            self.wait(step)
        _event(h, "content_block_stop", {"type": "content_block_stop", "index": 0})
        _event(h, "message_delta", {"type": "message_delta",
                                    "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                                    "usage": {"output_tokens": step["output_tokens"]}})
        _event(h, "message_stop", {"type": "message_stop"})


def prompt_of(body: dict) -> str:
    """All text a recorded request carried (system and messages)."""
    system = body.get("system") or []
    parts = [system] if isinstance(system, str) else [b.get("text", "") for b in system]
    for m in body.get("messages", []):
        content = m["content"]
        parts += [content] if isinstance(content, str) else [b.get("text", "") for b in content]
    return "\n".join(parts)


def last_user_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
