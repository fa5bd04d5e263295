"""The resident verifier behind `kernelagent verify`: one process holding a warm `Session`, answering over a
Unix socket, so a new CLI process pays neither torch's import nor a worker's start (docs/design.md, "A
resident verifier for the command line"). Where it listens, its key, its token and its wire format are in
kernelagent.tools.daemon_wire, which its clients share.

What a peer may do, and why: the peer must be this uid (SO_PEERCRED) and every request must carry the
token the daemon wrote at start (`run/<key>.token`, 0600): candidate code runs as this same uid, and a
worker that can name the socket (Landlock does not mediate connect() on it) still cannot read the token.
A peer without it gets one refusal line per request, nothing else: no state, no verification, no stop.
What it can still cost: connections not yet past their token check are bounded (MAX_PENDING, the rest
wait in the listen backlog) and each has REQUEST_WAIT_S for its whole request line; a connection waiting
for its verification has no such limit (its client keeps it open until the report; closing it cancels).

This module's top level imports no torch (the session's imports are inside functions).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import queue
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelagent.tools.daemon_wire import (
    IDLE_S,
    MAX_REQUEST,
    RequestError,
    address,
    daemon_key,
    decode,
    fingerprint,
    log_path,
    new_token,
    options_key,
    peer_allowed,
    recv_line,
    remove_own,
    run_dir,
    running,
    send,
    socket_path,
    token_ok,
    token_path,
    validate,
    write_token,
)

MAX_PENDING = 16        # connections accepted but not yet past their token check
MAX_OPEN = 256          # connections in all (each verification holds one until its report)
REQUEST_WAIT_S = 10.0   # for a connection's whole request line (clients send it as soon as they connect)
_FULL_WAIT_S = 0.05     # between looks for room when the limits above are reached
log = logging.getLogger("kernelagent.daemon")


class Refused(RequestError):
    """A request without this daemon's token: answered with one line and nothing else."""


class _Internal(Exception):
    """An answer of kind internal that is no failure of the daemon's own (it is stopping)."""


class Daemon:
    """A listening socket, one thread per connection, one session Job per verification."""

    def __init__(self, session: Any, key: str, idle: float = IDLE_S, confinement: str = "auto", options: str = ""):
        self.session, self.key, self.idle, self.confinement = session, key, idle, confinement
        self.options = options         # its options_key: `daemon stop` finds it by this once the code changed
        self.path = socket_path(key)
        self.started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.verifications = 0
        self.refused = 0
        self.stop = threading.Event()
        self._token = new_token()      # in memory and in its 0600 file only: never logged, never answered
        self._jobs: dict[int, dict[str, Any]] = {}
        self._open = 0                 # connections being served
        self._pending = 0              # of which not yet past their token check
        self._last = time.monotonic()  # the last verify received or finished
        self._lock = threading.Lock()
        self._code = fingerprint()
        self._inodes: dict[Path, int] = {}

    # -- the socket's life --
    def publish(self) -> socket.socket:
        """Write the token, then listen on `<key>.sock`: bound under a temporary name (mode 0600 before anyone
        can connect), then renamed over the path, which replaces a stale socket left by a daemon that died.
        The token comes first, so a client that finds the socket finds its token."""
        token = token_path(self.path)
        self._inodes[token] = write_token(token, self._token)
        tmp = self.path.with_name(f".{self.key}.{os.getpid()}.sock")
        tmp.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with address(tmp) as addr:
            listener.bind(addr)
        tmp.chmod(0o600)
        listener.listen(16)
        os.replace(tmp, self.path)
        self._inodes[self.path] = self.path.stat().st_ino
        return listener

    def unpublish(self) -> None:
        """Remove our socket and token files (not ones a newer daemon put in their place)."""
        for path in (self.path, token_path(self.path)):
            remove_own(path, self._inodes.get(path))

    def serve(self, listener: socket.socket) -> str:
        """Accept until stopped or idle; the reason it ended."""
        listener.settimeout(0.5)
        threads: list[threading.Thread] = []
        reason = "stopped"
        while not self.stop.is_set():
            if self.idle_for() >= self.idle:
                reason = f"idle for {self.idle:g} s"
                break
            conn = self._accept(listener)
            if conn is not None:
                threads = [t for t in threads if t.is_alive()] + [self._spawn(conn)]
        self.unpublish()  # no new client finds us; those already queued are answered
        threads += self._drain(listener)
        if self.stop.is_set():
            self._cancel_all()
        for t in threads:
            t.join(30)
        return reason

    def _accept(self, listener: socket.socket) -> socket.socket | None:
        """The next connection, or None; none while the limits are reached (a peer that opens connections
        and sends nothing fills MAX_PENDING, not the daemon's threads; they wait in the listen backlog)."""
        if not self._room():
            time.sleep(_FULL_WAIT_S)
            return None
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            return None
        except OSError as e:   # out of descriptors, say: the requests running finish, then it passes
            log.warning("accept failed: %s", e)
            time.sleep(1.0)
            return None
        return conn

    def _room(self) -> bool:
        with self._lock:
            return self._pending < MAX_PENDING and self._open < MAX_OPEN

    def _drain(self, listener: socket.socket) -> list[threading.Thread]:
        listener.setblocking(False)
        threads = []
        while True:
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, OSError):
                return threads
            threads.append(self._spawn(conn))

    def _spawn(self, conn: socket.socket) -> threading.Thread:
        with self._lock:
            self._open += 1
            self._pending += 1
        t = threading.Thread(target=self._connection, args=(conn,), daemon=True)
        t.start()
        return t

    def idle_for(self, connections: bool = True) -> float:
        """Seconds with nothing to do: no verification running and, with `connections`, none open (a client
        connected but not yet heard keeps the daemon up, for REQUEST_WAIT_S at most); a ping does not count
        as something to do."""
        with self._lock:
            busy = self._jobs or (connections and self._open)
            return 0.0 if busy else time.monotonic() - self._last

    # -- one connection --
    def _connection(self, conn: socket.socket) -> None:
        pending = 1
        try:
            with conn:
                request = self._answering(conn, lambda: self._request(conn))
                with self._lock:
                    self._pending, pending = self._pending - 1, 0
                if request is not None:
                    self._answering(conn, lambda: self._dispatch(conn, request))
        finally:
            with self._lock:
                self._open -= 1
                self._pending -= pending

    def _request(self, conn: socket.socket) -> dict[str, Any] | None:
        """The connection's request, once its peer is this user and it carries the token; None when the peer
        closed or sent nothing in time (no answer: nobody may be listening). Refused otherwise."""
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if not peer_allowed(creds):
            self._refusal(f"a connection from uid {struct.unpack('3i', creds)[1]}")
            raise Refused("refused: this daemon serves its own user only")
        try:
            line = recv_line(conn, MAX_REQUEST, time.monotonic() + REQUEST_WAIT_S)
        except TimeoutError:
            return None
        conn.settimeout(None)
        if not line:
            return None
        request = decode(line)
        if not token_ok(request.pop("token", None), self._token):
            self._refusal(f"a request without the token from pid {struct.unpack('3i', creds)[0]}")
            raise Refused(f"refused: the request does not carry this daemon's token ({token_path(self.path)})")
        return request

    def _refusal(self, what: str) -> None:
        """Log a refusal: the 1st, 2nd, 4th, 8th, ... (a peer flooding the socket does not fill the log)."""
        with self._lock:
            self.refused += 1
            n = self.refused
        if n & (n - 1) == 0:
            log.warning("refused %s (%d refusal(s) so far)", what, n)

    def _answering(self, conn: socket.socket, step: Callable[[], Any]) -> Any:
        """Run one step of a connection; what it raises becomes the one error line its client gets."""
        try:
            return step()
        except RequestError as e:
            _reply_error(conn, str(e), "input")
        except _Internal as e:
            _reply_error(conn, str(e), "internal")
        except OSError as e:  # the client went away
            log.info("connection ended: %s", e)
        except Exception as e:  # noqa: BLE001 - the daemon answers and lives on; the log keeps the traceback
            log.error("request failed:\n%s", traceback.format_exc())
            _reply_error(conn, f"the verifier daemon failed: {type(e).__name__}: {str(e)[:300]}", "internal")
        return None

    def _dispatch(self, conn: socket.socket, request: dict[str, Any]) -> None:
        op = request.get("op")
        if op == "ping":
            send(conn, self.ping())
        elif op == "stop":
            log.info("stop asked")
            send(conn, {"stopping": True, "pid": os.getpid()})
            self.stop.set()
        elif op == "verify":
            self._verify(conn, validate(request))
        else:
            raise RequestError(f"unknown op {op!r} (verify, ping or stop)")

    def ping(self) -> dict[str, Any]:
        """The daemon's state: what `status` shows, and what a client checks before it sends work."""
        from kernelagent import __version__

        with self._lock:
            jobs = [{"stage": j["stage"], "problem": j["problem"], "candidate": j["candidate"],
                     "workers": [w.proc.pid for w in list(j["job"].workers) if w.proc.poll() is None]}
                    for j in self._jobs.values()]
        idle = round(self.idle_for(connections=False), 1)
        return {"version": __version__, "pid": os.getpid(), "device": self.session.device, "key": self.key,
                "started": self.started, "verifications": self.verifications, "refused": self.refused,
                "idle_s": idle, "idle_limit_s": self.idle, "fingerprint": self._code, "options_key": self.options,
                "confinement": self.confinement, "python": sys.executable, "jobs": jobs,
                "log": str(log_path(self.key))}

    # -- one verification --
    def _verify(self, conn: socket.socket, req: dict[str, Any]) -> None:
        from kernelagent.tools.session import Job

        job, progress, box = Job(), queue.SimpleQueue(), {}
        entry = {"job": job, "stage": "queued", "problem": req["problem"], "candidate": req["candidate"]}

        def say(msg: str) -> None:
            entry["stage"] = msg
            progress.put(msg)

        def work() -> None:
            try:
                box["report"] = job.run(lambda: self._run(req, say))
            except BaseException as e:  # noqa: BLE001 - handed to the connection's thread
                box["error"] = e

        thread = threading.Thread(target=work, daemon=True)
        # a stop sets its flag, then cancels the jobs it finds here: a job is registered before that, or refused
        with self._lock:
            if self.stop.is_set():
                raise _Internal("the verifier daemon is stopping; run the command again")
            self._jobs[id(job)], self._last = entry, time.monotonic()
        log.info("verify %s against %s", req["candidate"], req["problem"])
        thread.start()
        try:
            gone = _relay(conn, thread, progress)
            if gone:
                log.info("the client went away: job cancelled")
                job.cancel()
            thread.join()
        finally:
            with self._lock:
                self._jobs.pop(id(job), None)
                self._last = time.monotonic()
        if gone:
            return
        if job.cancelled.is_set():   # stopped meanwhile: what its killed workers left is no verdict
            box = {"error": _cancelled()}
        elif "report" in box:
            with self._lock:
                self.verifications += 1
        self._reply(conn, box)

    def _run(self, req: dict[str, Any], say: Callable[[str], None]) -> Any:
        from kernelagent.tools.verify import verify_file

        verifier = self.session.verifier(seeds=req["seeds"], timing=req["timing"], timeout=req["timeout"],
                                         cache=req["cache"])
        report = verify_file(verifier, req["problem"], Path(req["candidate"]), say)
        log.info("%s: %s (%.1f s)", req["candidate"], report.category, report.metrics.get("verify_seconds", 0.0))
        return report

    def _reply(self, conn: socket.socket, box: dict[str, Any]) -> None:
        from kernelagent.tools.session import Cancelled
        from kernelagent.tools.verify import InputError
        from kernelagent.verifier.sandbox.confine import ConfinementError

        error = box.get("error")
        if error is None:
            return send(conn, {"report": box["report"].to_dict()})
        if isinstance(error, ConfinementError):
            return send(conn, {"error": f"{error} (--confinement strict refuses to run without it)", "kind": "input"})
        if isinstance(error, InputError):
            return send(conn, {"error": str(error), "kind": "input"})
        if isinstance(error, Cancelled):
            return send(conn, {"error": "the verifier daemon was stopped while verifying", "kind": "internal"})
        log.error("verification failed:\n%s", "".join(traceback.format_exception(error)))
        return send(conn, {"error": f"the verifier daemon failed: {type(error).__name__}: {str(error)[:300]}",
                           "kind": "internal"})

    def _cancel_all(self) -> None:
        with self._lock:
            jobs = [j["job"] for j in self._jobs.values()]
        for job in jobs:
            job.cancel()


def _cancelled() -> Exception:
    from kernelagent.tools.session import Cancelled

    return Cancelled("cancelled")


def _reply_error(conn: socket.socket, message: str, kind: str) -> None:
    try:
        send(conn, {"error": message.splitlines()[0] if message else kind, "kind": kind})
    except OSError:
        pass


def _relay(conn: socket.socket, thread: threading.Thread, progress: queue.SimpleQueue) -> bool:
    """Send progress while `thread` verifies; True as soon as the client closed its end (the job is then
    cancelled). A client keeps its end open until it has the report; what it sends meanwhile is dropped."""
    while thread.is_alive():
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable:
            try:
                if not conn.recv(4096):
                    return True
            except OSError:
                return True
        if not _flush(conn, progress):
            return True
    return not _flush(conn, progress)


def _flush(conn: socket.socket, progress: queue.SimpleQueue) -> bool:
    try:
        while True:
            send(conn, {"progress": progress.get_nowait()})
    except queue.Empty:
        return True
    except OSError:
        return False


# -- the process -----------------------------------------------------------------------------------------
def _prune(folder: Path, keep: str, days: float = 7.0) -> None:
    """Logs and lock files of daemons of older code pile up (each edit of the package is a new key): drop
    week-old ones (a client touches its lock file when it takes it); and token files whose daemon is gone
    (killed: it could not remove its own), once a minute old (a daemon writes its token just before its
    socket)."""
    now = time.time()
    old = [*folder.glob("daemon-*.log"), *folder.glob("*.lock")]
    orphans = [t for t in folder.glob("*.token") if not t.with_suffix(".sock").exists()]
    for f, age in [*((f, days * 86400) for f in old), *((t, 60.0) for t in orphans)]:
        try:
            if keep not in f.name and f.stat().st_mtime < now - age:
                f.unlink()
        except OSError:
            pass


def _setup_log(key: str) -> Path:
    path = log_path(key)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    handler = logging.StreamHandler(os.fdopen(fd, "a", buffering=1))
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return path


def serve(key: str | None = None, device: str = "auto", confinement: str = "auto", idle: float = IDLE_S,
          workers: int = 2, announce: Callable[[str], None] | None = None) -> int:
    """Run a daemon in this process until it is stopped or idle; 0, or 1 when one already serves `key`.
    Raises what a session cannot start with (ValueError: no GPU for --device cuda; ConfinementError)."""
    options = options_key(device, confinement)   # as its clients compute it, from the environment they gave it
    from kernelagent import __version__
    from kernelagent.tools.session import Session

    key = key or daemon_key(device, confinement)
    _setup_log(key)
    _prune(run_dir(), key)
    path = socket_path(key)
    other = running(path)
    if other is not None:
        log.info("not started: pid %s already serves %s", other["pid"], path)
        return 1
    log.info("starting: kernelagent %s, key %s, device %s, confinement %s, %s", __version__, key, device,
             confinement, sys.executable)
    session = Session(device=device, pool_size=workers, confinement=confinement)
    daemon = Daemon(session, key, idle, confinement, options)
    stop = daemon.stop.set
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop())
    try:
        listener = daemon.publish()
        threading.Thread(target=session.warm, daemon=True).start()
        log.info("serving on %s", path)
        if announce is not None:
            announce(f"serving on {path} (pid {os.getpid()}, log {log_path(key)})")
        with listener:
            reason = daemon.serve(listener)
        log.info("exiting: %s, %d verification(s), %d refusal(s)", reason, daemon.verifications, daemon.refused)
    finally:
        daemon.unpublish()
        session.close()
    return 0
