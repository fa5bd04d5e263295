"""A scripted HTTP server on 127.0.0.1 (random port) in a thread: the shared core of the stand-in LLM servers.

The script is a list of steps, one per POST, in order (or a function of the request body). A step is a
reply (a string, or a dict with `text`, token counts, `stop_reason`, `delay` between chunks) or a
scripted failure:

    {"fail": 529, "retry_after": "0.05"}        an error status (retry-after-ms: 1 unless retry_after is given)
    {"stall": 5.0, "after_chunks": 1}           stream some chunks, then go silent (the client times out)
    {"drop": True, "after_chunks": 2}           stream some chunks, then cut the connection
    {"malformed": True}                         200 with an HTML body, neither JSON nor an event stream
    {"empty": True}                             200 event stream that closes with no event
    {"text": "...", "hold": 30, "after_chunks": 1}   stream a little, then wait (for Ctrl-C tests)

`failures=[529, 429]` puts failure steps before the script. Every POST body is kept in `requests`,
every GET path in `gets`; `streaming` is set once a reply has started streaming.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any]
FAILURE_KEYS = ("fail", "stall", "drop", "malformed", "empty")


def normalise(step: str | Step) -> Step:
    """A step dict with every reply field filled in."""
    base = {"text": "", "input_tokens": 100, "output_tokens": 50, "cache_read": 0, "cache_write": 0,
            "stop_reason": None, "delay": 0.0}
    return {**base, **({"text": step} if isinstance(step, str) else step)}


class ScriptedServer:
    """Base class: subclasses implement `handle(handler, path, body)` and the wire format of a step."""

    def __init__(self, replies: list[str | Step] | Callable[[dict], str | Step], *,
                 failures: list[int] | tuple[int, ...] = ()):
        self._replies = replies if callable(replies) else deque(replies)
        self.failures = deque({"fail": s} for s in failures)
        self.requests: list[dict[str, Any]] = []   # every POST body, failed ones included
        self.gets: list[str] = []
        self.served = 0
        self.streaming = threading.Event()
        self.release = threading.Event()           # ends every `hold` and `stall` at once (on stop)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- script ------------------------------------------------------------------------------

    def take(self, body: dict) -> Step | None:
        """The next step for this request, or None when the script is spent."""
        with self._lock:
            self.requests.append(body)
            if self.failures:
                return normalise(self.failures.popleft())
            if callable(self._replies):
                self.served += 1
                return normalise(self._replies(body))
            if not self._replies:
                return None
            self.served += 1
            return normalise(self._replies.popleft())

    def extend(self, steps: list[str | Step]) -> None:
        with self._lock:
            assert not callable(self._replies)
            self._replies.extend(steps)

    # -- server ------------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict) -> None:
        raise NotImplementedError

    def start(self) -> ScriptedServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                size = int(self.headers.get("content-length") or 0)
                try:
                    fake.handle(self, self.path, json.loads(self.rfile.read(size) or b"{}"))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a cancelled or timed-out call)

            def do_GET(self) -> None:  # noqa: N802
                fake.gets.append(self.path)
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
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- shared step behaviour ---------------------------------------------------------------------

    def failure(self, h: BaseHTTPRequestHandler, step: Step, error_body: Callable[[int], dict]) -> bool:
        """Answer a failure step before any streaming; True when the step was one."""
        if "fail" in step:
            status = int(step["fail"])
            headers = {"retry-after": str(step["retry_after"])} if "retry_after" in step else {"retry-after-ms": "1"}
            send_json(h, status, error_body(status), headers)
            return True
        if step.get("malformed"):
            send_raw(h, 200, b"<html><body>502 Bad Gateway (a proxy page)</body></html>", "text/html")
            return True
        if step.get("empty"):
            start_sse(h)
            return True
        return False

    def interrupt(self, h: BaseHTTPRequestHandler, step: Step, sent: int) -> bool:
        """After `sent` chunks: stall, drop or hold as the step says; True when the reply must end here."""
        if sent < int(step.get("after_chunks", 1)):
            return False
        if "stall" in step or "hold" in step:
            self.release.wait(float(step.get("stall", step.get("hold", 0))))
            return True
        if step.get("drop"):
            h.connection.shutdown(socket.SHUT_RDWR)
            return True
        return False

    def wait(self, step: Step) -> None:
        if step.get("delay"):
            self.release.wait(float(step["delay"]))


def send_raw(h: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str,
             headers: dict | None = None) -> None:
    h.send_response(status)
    h.send_header("content-type", content_type)
    h.send_header("content-length", str(len(data)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


def send_json(h: BaseHTTPRequestHandler, status: int, payload: dict, headers: dict | None = None) -> None:
    send_raw(h, status, json.dumps(payload).encode(), "application/json", headers)


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
