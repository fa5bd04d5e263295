"""A scripted HTTP server on 127.0.0.1 (random port) in a thread: the shared core of the fake LLM servers.

Replies come from a list (in order) or a function of the request body. `failures` is a queue of HTTP
statuses answered, one per request, before scripted replies resume (to test retries).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]


def normalise(reply: str | Reply) -> Reply:
    """A reply dict with every field: text, token counts, stop reason."""
    base = {"text": "", "input_tokens": 100, "output_tokens": 50, "cache_read": 0, "cache_write": 0,
            "stop_reason": None}
    return {**base, **({"text": reply} if isinstance(reply, str) else reply)}


class ScriptedServer:
    """Base class: subclasses implement `handle(handler, path, body)`."""

    def __init__(self, replies: list[str | Reply] | Callable[[dict], str | Reply], *,
                 failures: list[int] | tuple[int, ...] = ()):
        self._replies = replies if callable(replies) else deque(replies)
        self.failures = deque(failures)
        self.requests: list[dict[str, Any]] = []   # every POST body, failed ones included
        self.served = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- script ------------------------------------------------------------------------------

    def take(self, body: dict) -> tuple[int | None, Reply | None]:
        """(failure status, None) or (None, reply) or (None, None) when the script is spent."""
        with self._lock:
            self.requests.append(body)
            if self.failures:
                return self.failures.popleft(), None
            if callable(self._replies):
                self.served += 1
                return None, normalise(self._replies(body))
            if not self._replies:
                return None, None
            self.served += 1
            return None, normalise(self._replies.popleft())

    # -- server ------------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict) -> None:
        raise NotImplementedError

    def start(self) -> ScriptedServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                size = int(self.headers.get("content-length") or 0)
                fake.handle(self, self.path, json.loads(self.rfile.read(size) or b"{}"))

            def do_GET(self) -> None:  # noqa: N802
                fake.handle(self, self.path, {})

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def send_json(h: BaseHTTPRequestHandler, status: int, payload: dict, headers: dict | None = None) -> None:
    data = json.dumps(payload).encode()
    h.send_response(status)
    h.send_header("content-type", "application/json")
    h.send_header("content-length", str(len(data)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


def start_sse(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("content-type", "text/event-stream")
    h.send_header("cache-control", "no-cache")
    h.send_header("connection", "close")
    h.end_headers()


def chunks(text: str, n: int = 3) -> list[str]:
    """`text` in about `n` pieces (at least one), to exercise delta accumulation."""
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]
