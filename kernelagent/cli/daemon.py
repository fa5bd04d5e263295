"""`kernelagent daemon start|stop|status|serve`, and the client side of `kernelagent verify --daemon`.

A verify handed to the resident verifier (kernelagent.tools.daemon) costs the verification alone: this process
imports neither torch nor the verifier (that import is most of a cold CLI call), sends absolute paths with the
daemon's token (read from its 0600 file; kernelagent.tools.daemon_wire), and renders the report it gets back.
Profile, sanitize and --keep always run in the CLI's own process. This module imports the server's module
only to start one in the foreground (`daemon serve`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from kernelagent.cli.common import (
    Confinement,
    ConfinementOpt,
    Device,
    DeviceOpt,
    ExitCode,
    JsonOpt,
    console,
    err,
    fail,
)
from kernelagent.tools import daemon_wire as W

START_WAIT_S = 120.0   # a daemon's start: its torch import and session (longer on a cold disk)
STOP_WAIT_S = 30.0
_MAX_REPLY = 1 << 26


class DaemonMode(StrEnum):
    auto = "auto"   # a running daemon if there is one; start one on a GPU machine
    on = "on"       # a daemon, started if need be, on any device
    off = "off"     # verify in this process


DaemonOpt = Annotated[DaemonMode, typer.Option(
    "--daemon", envvar="KERNELAGENT_DAEMON",
    help="Hand the verification to the resident verifier (`kernelagent daemon`): auto (use one that runs; start "
         "one on a GPU machine), on (start one on any device), off (verify in this process).")]
IdleOpt = Annotated[float, typer.Option(min=1, help="Exit after this many seconds with nothing to do.")]
WorkersOpt = Annotated[int | None, typer.Option(min=0, max=16, help="Warm worker processes kept ready "
                                                "(default: 2 on a GPU, 1 on the CPU).")]

app = typer.Typer(no_args_is_help=True, help="The resident verifier `kernelagent verify` hands its work to "
                  "(warm workers: a verify costs the candidate's own work). One per user, home and option set.")


@dataclass
class Served:
    report: Any   # a verifier Report
    pid: int
    stop_hint: str


# -- the client of `kernelagent verify` ------------------------------------------------------------------
def served_verify(ref: Path, kernel: Path, opts: Any, mode: DaemonMode, json_out: bool) -> Served | None:
    """The daemon's verification of `kernel`, or None to verify in this process (off; a run that needs the
    CLI's own process; no daemon and `auto` on a machine without a GPU; a daemon that would not start)."""
    if mode is DaemonMode.off or opts.keep_workdir or opts.profile or opts.sanitize:
        return None
    try:
        link = _daemon_for(opts, mode)
    except OSError as e:
        _note(f"the verifier daemon is not usable ({e})")
        return None
    if link is None:
        return None
    info = link.info
    try:
        with link.sock:
            report = _ask(link, ref, kernel, opts, json_out)
    except OSError as e:   # the daemon died mid-request (a reset connection): no silent second run here
        raise fail(f"the verifier daemon (pid {info['pid']}) failed mid-request ({type(e).__name__}; its log: "
                   f"{info.get('log')}); run again with --daemon off to verify in this process",
                   ExitCode.INTERNAL) from e
    return Served(report, int(info["pid"]), stop_hint(opts.device, opts.confinement))


@dataclass
class Link:
    """A connection to a daemon, the token its requests carry, and its ping answer."""

    sock: socket.socket
    token: str
    info: dict[str, Any]


def _daemon_for(opts: Any, mode: DaemonMode) -> Link | None:
    """A connection to the daemon serving these options, started when `mode` allows."""
    key = W.daemon_key(opts.device, opts.confinement)
    may_start = mode is DaemonMode.on or _likely_gpu(opts.device)
    if not may_start and not W.socket_path(key, create=False).exists():
        return None   # the common case on a CPU machine: nothing to look at, nothing created
    info = _running(key)
    if info is None and may_start:
        info = _start(key, opts.device, opts.confinement)
    if info is None:
        return None
    return _connect(W.socket_path(key), info)


def _likely_gpu(device: str) -> bool:
    """A GPU is visible here and may be used (`auto` starts a daemon only then: never on a CPU machine, not
    even for --device cuda, which fails in this process with its own message)."""
    from kernelagent.verifier.api import likely_device  # no torch: a look for the driver's device files

    return device != "cpu" and likely_device("auto") == "cuda"


def _note(message: str) -> None:
    err.print(f"note: {message}; verifying in this process (--daemon off skips the daemon)", highlight=False)


def _running(key: str) -> dict[str, Any] | None:
    path = W.socket_path(key, create=False)
    info = W.running(path) if path.exists() else None
    return info if info is not None and info.get("key") == key else None


def _connect(path: Path, info: dict[str, Any]) -> Link | None:
    """A connection to the daemon on `path`, checked to be this user's process, with its token; None (and a
    note) when it is gone or its token cannot be read."""
    token = W.read_token(W.token_path(path))
    if token is None:
        _note(f"the verifier daemon's token {W.token_path(path)} cannot be read")
        return None
    try:
        return Link(W.connect(path), token, info)
    except (ConnectionRefusedError, FileNotFoundError):
        _note("the verifier daemon went away")
    except PermissionError as e:
        _note(str(e))
    return None


def _ask(link: Link, ref: Path, kernel: Path, opts: Any, json_out: bool) -> Any:
    """Send the request, show its progress, and return the report (as the CLI's own process would have made
    it: the user's paths as given, this process's secrets scrubbed); an error reply is the CLI's error."""
    problem, candidate = ref.expanduser().absolute(), kernel.expanduser().absolute()
    W.request(link.sock, link.token, {"op": "verify", "problem": str(problem), "candidate": str(candidate),
                                      "seeds": opts.seeds, "timing": opts.timing, "timeout": opts.timeout,
                                      "cache": opts.cache})
    status = contextlib.nullcontext() if json_out else console.status("verifying ...")
    with status as shown, link.sock.makefile("rb") as lines:
        for raw in lines:
            msg = _decode(raw)
            if "progress" in msg and shown is not None:
                shown.update(str(msg["progress"]))
            elif "report" in msg:
                return _report(msg["report"], {str(problem): str(ref), str(candidate): str(kernel)})
            elif "error" in msg:
                code = ExitCode.INPUT if msg.get("kind") == "input" else ExitCode.INTERNAL
                raise fail(str(msg["error"]).splitlines()[0] if msg["error"] else "the verifier daemon failed", code)
    info = link.info
    raise fail(f"the verifier daemon (pid {info['pid']}) ended without an answer (its log: {info.get('log')}); "
               "run again with --daemon off to verify in this process", ExitCode.INTERNAL)


def _decode(raw: bytes) -> dict[str, Any]:
    from kernelagent.verifier.sandbox.spawn import redact, secret_values

    text = raw.decode("utf-8", "replace")
    found = secret_values()
    try:
        msg = json.loads(redact(text, found) if found else text)
    except json.JSONDecodeError:
        msg = None
    if not isinstance(msg, dict):
        raise fail("the verifier daemon sent something that is not a reply; run again with --daemon off",
                   ExitCode.INTERNAL)
    return msg


def _report(data: dict[str, Any], shown: dict[str, str]) -> Any:
    from kernelagent.verifier.report import Report

    return Report.from_dict(_as_given(data, {k: v for k, v in shown.items() if k != v}))


def _as_given(value: Any, paths: dict[str, str]) -> Any:
    """`value` with the absolute paths sent to the daemon written as the user gave them (the report then
    reads as the CLI's own process would have written it)."""
    if not paths:
        return value
    if isinstance(value, str):
        for absolute, given in paths.items():
            value = value.replace(absolute, given)
        return value
    if isinstance(value, dict):
        return {k: _as_given(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_given(v, paths) for v in value]
    return value


def stop_hint(device: str, confinement: str) -> str:
    """The command that stops the daemon serving these options."""
    extra = "".join(f" --{name} {value}" for name, value in (("device", device), ("confinement", confinement))
                    if value != "auto")
    return f"kernelagent daemon stop{extra}"


# -- starting one ----------------------------------------------------------------------------------------
def _start(key: str, device: str, confinement: str, idle: float = W.IDLE_S, workers: int | None = None,
           quiet: bool = False) -> dict[str, Any] | None:
    """Start the daemon for `key` and wait until it answers; None (with a note) when it does not come up.
    A lock file makes concurrent clients start one daemon between them."""
    fd = os.open(W.lock_path(key), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.utime(fd)   # in use: not pruned as an old key's
        info = _running(key)
        if info is not None:
            return info   # another client started it while we waited for the lock
        proc = _spawn(key, device, confinement, idle, workers)
        line = "starting the verifier daemon (first call builds the reference) ..."
        if quiet or not err.is_terminal:
            if not quiet:
                err.print(line, highlight=False)   # a log or a pipe gets the line once, not a spinner
            return _wait_up(key, proc)
        with err.status(line):
            return _wait_up(key, proc)
    finally:
        os.close(fd)


def _spawn(key: str, device: str, confinement: str, idle: float, workers: int | None) -> subprocess.Popen:
    """`kernelagent daemon serve` in its own session, detached from this terminal, writing to its log. Its
    working folder is the one holding this package, so `-m kernelagent.cli` finds the same code."""
    if workers is None:
        workers = 2 if _likely_gpu(device) else 1   # on the CPU the interpreter's run dwarfs a worker's start
    cmd = [sys.executable, "-m", "kernelagent.cli", "daemon", "serve", "--key", key, "--device", device,
           "--confinement", confinement, "--idle", str(idle), "--workers", str(workers)]
    log = os.open(W.log_path(key), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                cwd=str(Path(W.__file__).resolve().parents[2]), env=W.daemon_env())
    finally:
        os.close(log)


def _wait_up(key: str, proc: subprocess.Popen) -> dict[str, Any] | None:
    log, deadline = W.log_path(key), time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        info = _running(key)
        if info is not None:
            return info
        if proc.poll() is not None:
            _note(f"the verifier daemon did not start (exit {proc.returncode}; its log: {log})")
            return None
        time.sleep(0.1)
    _note(f"the verifier daemon did not come up within {START_WAIT_S:.0f} s (its log: {log})")
    return None


# -- the commands ----------------------------------------------------------------------------------------
@app.command()
def serve(device: DeviceOpt = Device.auto, confinement: ConfinementOpt = Confinement.auto, idle: IdleOpt = W.IDLE_S,
          workers: WorkersOpt = None,
          key: Annotated[str | None, typer.Option(hidden=True, help="The key its clients computed.")] = None,
          ) -> None:
    """Run the daemon in the foreground (`start` runs this in the background)."""
    from kernelagent.tools import daemon as D
    from kernelagent.verifier.sandbox.confine import ConfinementError

    if workers is None:
        workers = 2 if _likely_gpu(device.value) else 1
    try:
        code = D.serve(key, device.value, confinement.value, idle, workers,
                       announce=lambda line: err.print(line, highlight=False))
    except (ValueError, ConfinementError) as e:   # --device cuda without a GPU; strict confinement missing a layer
        raise fail(str(e)) from e
    if code:
        err.print("a verifier daemon already serves these options (`kernelagent daemon status`)")
    raise typer.Exit(code)


@app.command()
def start(device: DeviceOpt = Device.auto, confinement: ConfinementOpt = Confinement.auto, idle: IdleOpt = W.IDLE_S,
          workers: WorkersOpt = None, json_out: JsonOpt = False) -> None:
    """Start the daemon for these options in the background (a verify with --daemon auto or on then uses it)."""
    key = W.daemon_key(device.value, confinement.value)
    info = _running(key) or _start(key, device.value, confinement.value, idle, workers, quiet=json_out)
    if info is None:
        raise fail(f"the verifier daemon did not start (its log: {W.log_path(key)})", ExitCode.INTERNAL)
    if json_out:
        print(json.dumps(info, indent=2))
    else:
        console.print(f"verifier daemon pid {info['pid']} on {info['device']}, {W.socket_path(key)}; "
                      f"stop it with `{stop_hint(device.value, confinement.value)}`", highlight=False)


@app.command()
def stop(device: DeviceOpt = Device.auto, confinement: ConfinementOpt = Confinement.auto,
         all_: Annotated[bool, typer.Option("--all", help="Every daemon of this home.")] = False,
         json_out: JsonOpt = False) -> None:
    """Stop the daemon serving these options, and any of older code that served them (or every one); running
    verifications are cancelled."""
    stopped = [pid for pid in (_stop_one(p, info) for p, info in _serving(device.value, confinement.value, all_))
               if pid is not None]
    if json_out:
        print(json.dumps({"stopped": stopped}))
    elif stopped:
        console.print(f"stopped {', '.join(f'pid {p}' for p in stopped)}")
    else:
        console.print("no verifier daemon was running" + ("" if all_ else " for these options"))


def _serving(device: str, confinement: str, all_: bool) -> list[tuple[Path, dict[str, Any]]]:
    """The daemons of this home (socket, ping answer) that serve these options: the one of their key, and those
    of older code that answer their options key (an edit or an upgrade of the package changes the key, also
    under a daemon that still verifies for a client, which this key would no longer find); every one with
    `all_`."""
    current = W.socket_path(W.daemon_key(device, confinement))
    wanted = W.options_key(device, confinement)
    found = [(p, W.running(p)) for p in _sockets()]
    return [(p, info) for p, info in found
            if info is not None and (all_ or p == current or info.get("options_key") == wanted)]


def _stop_one(path: Path, info: dict[str, Any]) -> int | None:
    """Ask the daemon on `path` (whose ping answered `info`) to stop and wait until its socket is gone; its pid,
    or None if it could not be asked."""
    link = _connect(path, info)
    if link is None:
        return None
    with link.sock:
        W.request(link.sock, link.token, {"op": "stop"})
        W.recv_line(link.sock, 1 << 16)
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline and (path.exists() or _alive(int(info["pid"]))):
        time.sleep(0.1)
    return int(info["pid"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    return True


@app.command()
def status(json_out: JsonOpt = False) -> None:
    """The daemons of this home (sockets nobody listens on any more are removed)."""
    from kernelagent import __version__

    code = W.fingerprint()
    daemons = []
    for path in _sockets():
        info = W.running(path)
        if info is not None:
            current = info.get("version") == __version__ and info.get("fingerprint") == code
            daemons.append({**info, "socket": str(path), "current": current})
    if json_out:
        print(json.dumps(daemons, indent=2))
        return
    if not daemons:
        console.print(f"no verifier daemon runs for {W.run_dir().parent}")
        return
    console.print(_table(daemons))


def _table(daemons: list[dict[str, Any]]) -> Table:
    table = Table(box=None)
    for col in ("pid", "device", "verifications", "running", "idle", "code", "key"):
        table.add_column(col)
    for d in daemons:
        walls = "" if d.get("confinement") == "auto" else f" ({d.get('confinement')})"
        table.add_row(str(d["pid"]), f"{d['device']}{walls}", str(d["verifications"]), str(len(d.get("jobs") or [])),
                      f"{d['idle_s']:.0f} s", "current" if d["current"] else "outdated (idles out)", str(d["key"]))
    return table


def _sockets() -> list[Path]:
    return sorted(p for p in W.run_dir().glob("*.sock") if not p.name.startswith("."))
