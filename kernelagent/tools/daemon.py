"""The resident verifier behind `kernelagent verify`: one process holding a warm `Session`, answering over a
Unix socket, so a new CLI process pays neither torch's import nor a worker's start (docs/design.md, "A
resident verifier for the command line").

Addressing: `$KERNELAGENT_HOME/run/<key>.sock` (folder 0700, socket 0600). The key hashes what makes two
verifications alike: kernelagent's version and a fingerprint of its source files, the interpreter and the
installed torch, triton and CuTe DSL, the device and confinement asked for, and the environment the
verifier and its workers read (CUDA_VISIBLE_DEVICES among it). A client only talks to the daemon of its
own key, so one running older code is never used; it idles out. Peers of another uid are refused
(SO_PEERCRED), both ways.

Wire: JSON lines. `{"op":"verify","problem":ABS,"candidate":ABS,"seeds":3,"timing":true,"timeout":300.0,
"cache":true}` gets `{"progress":"..."}` lines, then `{"report":{...}}` or `{"error":"one line","kind":
"input"|"internal"}`; `{"op":"ping"}` gets the daemon's state; `{"op":"stop"}` stops it. A verify runs as a
session Job; the client closing its socket cancels it (its workers are killed).

The client (kernelagent.cli.daemon) imports this module and must never import torch: its top level imports
the standard library and torch-free kernelagent modules only; the server's imports are inside functions.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelagent.verifier.refcache import home
from kernelagent.verifier.sandbox.spawn import _ALLOWED_EXACT, _ALLOWED_PREFIXES, _SECRET_MARKERS

IDLE_S = 600.0          # a daemon with nothing to do for this long exits
MAX_REQUEST = 1 << 16   # bytes in one request line
_PKG = Path(__file__).resolve().parents[1]
# what the verifier and its workers read from the environment besides the workers' allowlist
_KEY_ENV_PREFIXES = ("KERNELAGENT_", "TRITON_", "CUTE_DSL_", "TORCH_", "PYTORCH_")
_KEY_ENV_IGNORED = {"KERNELAGENT_DAEMON", "KERNELAGENT_HOME", "TERM"}
_VERIFY_FIELDS = {"op": str, "problem": str, "candidate": str, "seeds": int, "timing": bool, "timeout": float,
                  "cache": bool}
log = logging.getLogger("kernelagent.daemon")


class RequestError(ValueError):
    """A request the daemon will not run; its message is one line for the user."""


class Unsafe(OSError):
    """The run folder is not this user's alone: no daemon is used or started."""


# -- addressing (the client's too) -----------------------------------------------------------------------
def run_dir(create: bool = True) -> Path:
    """`$KERNELAGENT_HOME/run`, created 0700; Unsafe when another user owns it (its sockets could be theirs).
    Without `create`, only the path (looking for a socket must leave no folder behind)."""
    path = home() / "run"
    if not create:
        return path
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise Unsafe(f"{path} belongs to another user")
    if st.st_mode & 0o077:
        path.chmod(0o700)
    return path


def fingerprint() -> str:
    """Sizes and times of the package's source files: a daemon started before an edit or an upgrade is not
    used (reading names and stat()s of ~200 files costs a few milliseconds; hashing them would cost more)."""
    h = hashlib.sha256()
    for f in sorted(_PKG.rglob("*.py")):
        st = f.stat()
        h.update(f"{f.relative_to(_PKG)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _library_versions() -> dict[str, str]:
    """Versions of what the workers import, read from the installed metadata (an upgrade of torch under a
    running daemon must not be served by it; importing them to ask is what the client must never do)."""
    import importlib.metadata as md

    found = {}
    for name in ("torch", "triton", "nvidia-cutlass-dsl"):
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            found[name] = ""
    return found


def _secret_name(name: str) -> bool:
    return any(m in name.upper() for m in _SECRET_MARKERS)


def _key_env(env: dict[str, str]) -> dict[str, str]:
    """The environment a verification depends on (secret-looking names left out: only a hash is kept, but a
    key that changes with a token would start daemons for nothing)."""
    wanted = (lambda k: k in _ALLOWED_EXACT or k.startswith(_ALLOWED_PREFIXES + _KEY_ENV_PREFIXES))
    return {k: v for k, v in sorted(env.items())
            if wanted(k) and k not in _KEY_ENV_IGNORED and not _secret_name(k)}


def daemon_key(device: str, confinement: str, env: dict[str, str] | None = None) -> str:
    """The daemon a verification with these options may be sent to."""
    from kernelagent import __version__

    env = dict(os.environ if env is None else env)
    fields = {"version": __version__, "code": fingerprint(), "python": sys.executable,
              "libraries": _library_versions(), "device": device,
              "confinement": confinement, "visible": env.get("CUDA_VISIBLE_DEVICES"), "env": _key_env(env)}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def socket_path(key: str, create: bool = True) -> Path:
    return run_dir(create) / f"{key}.sock"


def lock_path(key: str) -> Path:
    return run_dir() / f"{key}.lock"


def log_path(key: str) -> Path:
    return run_dir() / f"daemon-{key}.log"


def daemon_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The daemon's environment: the client's without secret-looking variables (a process that lives for
    minutes has no use for API keys; each client scrubs its own secrets from the report it gets back)."""
    return {k: v for k, v in (os.environ if env is None else env).items() if not _secret_name(k)}


@contextmanager
def address(path: Path) -> Iterator[str]:
    """An address for bind/connect: the path itself, or, past the 107 bytes a socket address holds, the
    same file through /proc/self/fd of its open folder."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def peer(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def peer_allowed(creds: bytes, uid: int | None = None) -> bool:
    """Whether SO_PEERCRED bytes name a process of this user (the socket's mode says so too; this holds
    when a folder's mode was changed behind our back)."""
    _pid, peer_uid, _gid = struct.unpack("3i", creds)
    return peer_uid == (os.getuid() if uid is None else uid)


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message, default=str).encode() + b"\n")


def recv_line(sock: socket.socket, limit: int) -> bytes:
    """One line (without its newline); b"" when the peer closed first; RequestError past `limit` bytes."""
    buf = b""
    while b"\n" not in buf:
        if len(buf) > limit:
            raise RequestError(f"a line longer than {limit} bytes")
        chunk = sock.recv(65536)
        if not chunk:
            return b""
        buf += chunk
    return buf.split(b"\n", 1)[0]


# -- the request -----------------------------------------------------------------------------------------
def validate(request: Any) -> dict[str, Any]:
    """A verify request with every field of the right type, its files absolute paths of existing files."""
    if not isinstance(request, dict):
        raise RequestError("a request is a JSON object")
    unknown = sorted(set(request) - set(_VERIFY_FIELDS))
    if unknown:
        raise RequestError(f"unknown field(s) in the request: {', '.join(unknown)}")
    req = {"seeds": 3, "timing": True, "timeout": 300.0, "cache": True, **request}
    for name, kind in _VERIFY_FIELDS.items():
        value = req.get(name)
        ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise RequestError(f"request field {name!r} must be a {kind.__name__}, got {value!r}"[:200])
    for name, what in (("problem", "problem file"), ("candidate", "candidate file")):
        p = Path(req[name])
        if not p.is_absolute():
            raise RequestError(f"the {what} must be an absolute path, got {req[name]!r}")
        if not p.exists():
            raise RequestError(f"{what} {p} does not exist")
        if not p.is_file():
            raise RequestError(f"{what} {p} is not a file; give the .py file")
    if req["seeds"] < 1:
        raise RequestError("--seeds must be at least 1")
    if not 0 < req["timeout"] <= 86400:
        raise RequestError("--timeout must be positive (at most a day)")
    return {**req, "timeout": float(req["timeout"])}


# -- the server ------------------------------------------------------------------------------------------
class Daemon:
    """A listening socket, one thread per connection, one session Job per verification."""

    def __init__(self, session: Any, key: str, idle: float = IDLE_S, confinement: str = "auto"):
        self.session, self.key, self.idle, self.confinement = session, key, idle, confinement
        self.path = socket_path(key)
        self.started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.verifications = 0
        self.stop = threading.Event()
        self._jobs: dict[int, dict[str, Any]] = {}
        self._open = 0                 # connections being served
        self._last = time.monotonic()  # the last verify received or finished
        self._lock = threading.Lock()
        self._code = fingerprint()
        self._inode: int | None = None

    # -- the socket's life --
    def publish(self) -> socket.socket:
        """Listen on `<key>.sock`: bound under a temporary name (mode 0600 before anyone can connect), then
        renamed over the path, which replaces a stale socket left by a daemon that died."""
        tmp = self.path.with_name(f".{self.key}.{os.getpid()}.sock")
        tmp.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with address(tmp) as addr:
            listener.bind(addr)
        tmp.chmod(0o600)
        listener.listen(16)
        os.replace(tmp, self.path)
        self._inode = self.path.stat().st_ino
        return listener

    def unpublish(self) -> None:
        """Remove our socket file (not one a newer daemon put in its place)."""
        try:
            if self.path.stat().st_ino == self._inode:
                self.path.unlink()
        except FileNotFoundError:
            pass

    def serve(self, listener: socket.socket) -> str:
        """Accept until stopped or idle; the reason it ended."""
        listener.settimeout(0.5)
        threads: list[threading.Thread] = []
        reason = "stopped"
        while not self.stop.is_set():
            if self.idle_for() >= self.idle:
                reason = f"idle for {self.idle:g} s"
                break
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError as e:   # out of descriptors, say: the requests running finish, then it passes
                log.warning("accept failed: %s", e)
                time.sleep(1.0)
                continue
            threads = [t for t in threads if t.is_alive()] + [self._spawn(conn)]
        self.unpublish()  # no new client finds us; those already queued are answered
        threads += self._drain(listener)
        if self.stop.is_set():
            self._cancel_all()
        for t in threads:
            t.join(30)
        return reason

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
        t = threading.Thread(target=self._connection, args=(conn,), daemon=True)
        t.start()
        return t

    def idle_for(self, connections: bool = True) -> float:
        """Seconds with nothing to do: no verification running and, with `connections`, none open (a client
        connected but not yet heard keeps the daemon up); a ping does not count as something to do."""
        with self._lock:
            busy = self._jobs or (connections and self._open)
            return 0.0 if busy else time.monotonic() - self._last

    # -- one connection --
    def _connection(self, conn: socket.socket) -> None:
        try:
            with conn:
                self._answer(conn)
        finally:
            with self._lock:
                self._open -= 1

    def _answer(self, conn: socket.socket) -> None:
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            if not peer_allowed(creds):
                log.warning("refused a connection from uid %d", struct.unpack("3i", creds)[1])
                return send(conn, {"error": "refused: this daemon serves its own user only", "kind": "input"})
            conn.settimeout(30)
            line = recv_line(conn, MAX_REQUEST)
            conn.settimeout(None)
            if line:
                self._dispatch(conn, _decode(line))
        except RequestError as e:
            _reply_error(conn, str(e), "input")
        except _Internal as e:
            _reply_error(conn, str(e), "internal")
        except OSError as e:  # the client went away
            log.info("connection ended: %s", e)
        except Exception as e:  # noqa: BLE001 - the daemon answers and lives on; the log keeps the traceback
            log.error("request failed:\n%s", traceback.format_exc())
            _reply_error(conn, f"the verifier daemon failed: {type(e).__name__}: {str(e)[:300]}", "internal")

    def _dispatch(self, conn: socket.socket, request: dict[str, Any]) -> None:
        op = request.get("op")
        if op == "ping":
            send(conn, self.ping())
        elif op == "stop":
            log.info("stop asked")
            send(conn, {"stopping": True, "pid": os.getpid()})
            self.stop.set()
        elif op == "verify":
            if self.stop.is_set():
                raise _Internal("the verifier daemon is stopping; run the command again")
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
                "started": self.started, "verifications": self.verifications, "idle_s": idle,
                "idle_limit_s": self.idle, "fingerprint": self._code, "confinement": self.confinement,
                "python": sys.executable, "jobs": jobs, "log": str(log_path(self.key))}

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

        log.info("verify %s against %s", req["candidate"], req["problem"])
        thread = threading.Thread(target=work, daemon=True)
        with self._lock:
            self._jobs[id(job)], self._last = entry, time.monotonic()
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


class _Internal(Exception):
    """An answer of kind internal that is no failure of the daemon's own (it is stopping)."""


def _decode(line: bytes) -> dict[str, Any]:
    try:
        request = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"the request is not JSON: {e}") from e
    if not isinstance(request, dict):
        raise RequestError("a request is a JSON object")
    return request


def _reply_error(conn: socket.socket, message: str, kind: str) -> None:
    try:
        send(conn, {"error": message.splitlines()[0] if message else kind, "kind": kind})
    except OSError:
        pass


def _relay(conn: socket.socket, thread: threading.Thread, progress: queue.SimpleQueue) -> bool:
    """Send progress while `thread` verifies; True as soon as the client closed its end (the job is then
    cancelled). A client keeps its end open until it has the report."""
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


def running(path: Path, timeout: float = 5.0) -> dict[str, Any] | None:
    """The ping answer of the daemon listening on `path`, or None; a socket file nobody listens on is removed
    (a daemon that was killed leaves it behind)."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        with sock, address(path) as addr:
            sock.connect(addr)
            if peer(sock)[1] != os.getuid():
                return None
            send(sock, {"op": "ping"})
            line = recv_line(sock, 1 << 20)
    except (ConnectionRefusedError, FileNotFoundError):
        _remove_stale(path)
        return None
    except (OSError, RequestError):
        return None
    try:
        answer = json.loads(line) if line else None
    except json.JSONDecodeError:
        return None
    return answer if isinstance(answer, dict) and "pid" in answer else None


def _remove_stale(path: Path) -> None:
    try:
        if path.is_socket():
            path.unlink()
    except OSError:
        pass


def _prune(folder: Path, keep: str, days: float = 7.0) -> None:
    """Logs and lock files of daemons of older code pile up (each edit of the package is a new key): drop
    week-old ones (a client touches its lock file when it takes it)."""
    cutoff = time.time() - days * 86400
    for f in [*folder.glob("daemon-*.log"), *folder.glob("*.lock")]:
        try:
            if keep not in f.name and f.stat().st_mtime < cutoff:
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
    daemon = Daemon(session, key, idle, confinement)
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
        log.info("exiting: %s, %d verification(s)", reason, daemon.verifications)
    finally:
        daemon.unpublish()
        session.close()
    return 0
