"""What the resident verifier and its clients share: where a daemon listens, which daemon a verification may
go to, the token that proves a request comes from its user, and the JSON-lines wire (docs/design.md, "A
resident verifier for the command line"). The server is kernelagent.tools.daemon.

Addressing: `$KERNELAGENT_HOME/run/<key>.sock` (folder 0700, socket 0600) and its token `<key>.token` (0600).
The key hashes what makes two verifications alike: kernelagent's version and a fingerprint of its source
files, the interpreter and the installed torch, triton and CuTe DSL, the device and confinement asked for,
and the environment the verifier and its workers read (CUDA_VISIBLE_DEVICES among it). A client only
talks to the daemon of its own key, so one running older code is never used; it idles out. Its options key
(`options_key`: the key's fields but kernelagent's version, its source and the libraries) is the same for a
daemon of older code that served the same options: `daemon stop` stops those too, since one may still be
running a verification (an edit of the package while it verifies changes the key under its client). Peers of
another uid are refused (SO_PEERCRED), both ways.

Why a token as well: candidate code runs as this same uid, so the uid check passes for it, and Landlock
(ABI <= 7) does not mediate connect() on a path-named socket. A request counts only with the token, which
the daemon writes where a confined worker cannot read (its home is outside the worker's Landlock grants
and hidden from its mount namespace).

Wire: JSON lines, every request with `"token"`. `{"op":"verify","problem":ABS,"candidate":ABS,"seeds":3,
"timing":true,"timeout":300.0,"cache":true}` gets `{"progress":"..."}` lines, then `{"report":{...}}` or
`{"error":"one line","kind":"input"|"internal"}`; `{"op":"ping"}` gets the daemon's state; `{"op":"stop"}`
stops it. A verify runs as a session Job; the client closing its socket cancels it.

The client (kernelagent.cli.daemon) imports this module and must never import torch: only the standard
library and torch-free kernelagent modules are imported here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import stat
import struct
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelagent.verifier.refcache import home
from kernelagent.verifier.sandbox.spawn import _ALLOWED_EXACT, _ALLOWED_PREFIXES, _SECRET_MARKERS

IDLE_S = 600.0          # a daemon with nothing to do for this long exits
MAX_REQUEST = 1 << 16   # bytes in one request line
_TOKEN_BYTES = 32       # secrets.token_hex(32): 64 hex digits
_PKG = Path(__file__).resolve().parents[1]
# what the verifier and its workers read from the environment besides the workers' allowlist
_KEY_ENV_PREFIXES = ("KERNELAGENT_", "TRITON_", "CUTE_DSL_", "TORCH_", "PYTORCH_")
_KEY_ENV_IGNORED = {"KERNELAGENT_DAEMON", "KERNELAGENT_HOME", "TERM"}
_VERIFY_FIELDS = {"op": str, "problem": str, "candidate": str, "seeds": int, "timing": bool, "timeout": float,
                  "cache": bool}


class RequestError(ValueError):
    """A request the daemon will not run; its message is one line for the user."""


class Unsafe(OSError):
    """The run folder is not this user's alone: no daemon is used or started."""


# -- addressing ------------------------------------------------------------------------------------------
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
    """The daemon a verification with these options may be sent to (no secret: anyone who knows the
    machine can compute it, which is why requests carry a token)."""
    from kernelagent import __version__

    fields = {"version": __version__, "code": fingerprint(), "libraries": _library_versions(),
              "options": options_key(device, confinement, env)}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def options_key(device: str, confinement: str, env: dict[str, str] | None = None) -> str:
    """What a daemon's key hashes besides the code it runs (kernelagent's version and source, the libraries):
    shared by the daemons serving these options before and after an edit or an upgrade of the package. A
    daemon answers it in its ping, so that `daemon stop` finds one of older code that still runs a verification
    (its key, recomputed after the edit, names another socket)."""
    env = dict(os.environ if env is None else env)
    fields = {"python": sys.executable, "device": device, "confinement": confinement,
              "visible": env.get("CUDA_VISIBLE_DEVICES"), "env": _key_env(env)}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def socket_path(key: str, create: bool = True) -> Path:
    return run_dir(create) / f"{key}.sock"


def token_path(sock: Path) -> Path:
    """The token file beside a daemon's socket (`<key>.token`)."""
    return sock.with_suffix(".token")


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


# -- the token -------------------------------------------------------------------------------------------
def new_token() -> str:
    return secrets.token_hex(_TOKEN_BYTES)


def write_token(path: Path, token: str) -> int:
    """Write `token` to `path`, 0600 from its creation and complete when it appears (written under a
    temporary name, then renamed: a client never reads half a token); the file's inode, so that its
    writer removes only its own."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.token")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, token.encode() + b"\n")
        inode = os.fstat(fd).st_ino
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return inode


def read_token(path: Path) -> str | None:
    """The token in `path`, or None when there is none that this user alone could have written (not a
    regular file of ours, readable by others, a link, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077 or st.st_size > 256:
            return None
        return os.read(fd, 256).decode("ascii", "replace").strip() or None
    finally:
        os.close(fd)


def token_ok(given: Any, expected: str) -> bool:
    """Whether a request's token is the daemon's (in constant time: the comparison leaks no prefix)."""
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())


def remove_own(path: Path, inode: int | None) -> None:
    """Remove `path` if it is still the file we made (not one a newer daemon put in its place)."""
    try:
        if inode is not None and path.stat().st_ino == inode:
            path.unlink()
    except FileNotFoundError:
        pass


# -- the peer and the wire -------------------------------------------------------------------------------
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


def recv_line(sock: socket.socket, limit: int, deadline: float | None = None) -> bytes:
    """One line (without its newline); b"" when the peer closed first; RequestError past `limit` bytes;
    TimeoutError when the whole line has not come by `deadline` (time.monotonic()), so a peer trickling a
    byte at a time holds a connection no longer than one that sends nothing."""
    buf = b""
    while b"\n" not in buf:
        if len(buf) > limit:
            raise RequestError(f"a line longer than {limit} bytes")
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no complete request line in time")
            sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            return b""
        buf += chunk
    return buf.split(b"\n", 1)[0]


def decode(line: bytes) -> dict[str, Any]:
    """A request line as a JSON object, or RequestError."""
    try:
        request = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"the request is not JSON: {e}") from e
    if not isinstance(request, dict):
        raise RequestError("a request is a JSON object")
    return request


def validate(request: Any) -> dict[str, Any]:
    """A verify request (its token already taken off) with every field of the right type, its files
    absolute paths of existing files."""
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


# -- the client's look at a daemon -----------------------------------------------------------------------
def connect(path: Path, timeout: float | None = None) -> socket.socket:
    """A connection to the socket at `path`; OSError when nobody listens (or the peer is another user's:
    PermissionError, the connection closed)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        with address(path) as addr:
            sock.connect(addr)
        if peer(sock)[1] != os.getuid():
            raise PermissionError(f"{path} is served by another user's process")
    except BaseException:
        sock.close()
        raise
    return sock


def request(sock: socket.socket, token: str, message: dict[str, Any]) -> None:
    """Send one request with the token that proves it comes from this user."""
    send(sock, {**message, "token": token})


def running(path: Path, timeout: float = 5.0) -> dict[str, Any] | None:
    """The ping answer of the daemon listening on `path`, or None (also when its token cannot be read: such a
    daemon cannot be used); a socket file nobody listens on is removed (a daemon that was killed leaves it
    behind; its token file goes with the next daemon of its key, or with pruning)."""
    token = read_token(token_path(path))
    try:
        with connect(path, timeout) as sock:
            if token is None:
                return None
            request(sock, token, {"op": "ping"})
            line = recv_line(sock, 1 << 20, time.monotonic() + timeout)
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
