"""Who may use the resident verifier: a request counts only with the daemon's token (its 0600 file beside the
socket), connections that send nothing are bounded and dropped, and a candidate that reaches the socket from
inside its sandbox can neither stop the daemon nor have it verify anything (docs/verification.md, "the
verifier daemon"). The first tests run a daemon in this process with a stand-in session; the last runs real
processes on the CPU."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelagent.tools import daemon as S
from kernelagent.tools import daemon_wire as W
from tests.paths import REPO, SOFTMAX_PROBLEM, softmax_case

GOOD = softmax_case("good")
CHEAT = REPO / "tests" / "corpus" / "wrong" / "static" / "alias_torch_as_t.py"   # policy_violation, no worker runs
KEY = "0123456789abcdef"


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A daemon in this process whose verifications take `box.sleep` seconds and record their requests."""
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path))
    daemon = S.Daemon(SimpleNamespace(device="cpu"), KEY, idle=300)
    box = SimpleNamespace(daemon=daemon, runs=[], sleep=0.0)

    def run(req, say):  # noqa: ANN001, ANN202 - Daemon._run's signature
        box.runs.append(req)
        say("running the candidate")
        time.sleep(box.sleep)
        return SimpleNamespace(to_dict=lambda: {"verdict": "accepted"})

    daemon._run = run
    listener = daemon.publish()
    box.token = W.read_token(W.token_path(daemon.path))
    box.thread = threading.Thread(target=daemon.serve, args=(listener,), daemon=True)
    box.thread.start()
    try:
        yield box
    finally:
        daemon.stop.set()
        box.thread.join(60)
        listener.close()


def ask(path: Path, message: dict, timeout: float = 10.0) -> dict | None:
    """Send one request line and return the last line answered (progress lines skipped); None if none."""
    with W.connect(path, timeout) as sock:
        W.send(sock, message)
        last = None
        with sock.makefile("rb") as lines:
            for raw in lines:
                last = json.loads(raw)
                if "progress" not in last:
                    break
        return last


def verify_request(**extra: object) -> dict:
    return {"op": "verify", "problem": str(SOFTMAX_PROBLEM), "candidate": str(GOOD), **extra}


# -- the token -------------------------------------------------------------------------------------------
def test_requests_without_the_token_are_refused(served):
    path, daemon = served.daemon.path, served.daemon
    for token in (None, "", "0" * 64, served.token[:-1], served.token.upper(), 12345, ["x"]):
        extra = {} if token is None else {"token": token}
        for message in ({"op": "ping"}, verify_request(), {"op": "stop"}, {"op": "nonsense"}):
            answer = ask(path, {**message, **extra})
            assert answer["kind"] == "input" and answer["error"].startswith("refused:"), (message, token, answer)
            assert "pid" not in answer and "report" not in answer
    assert not daemon.stop.is_set() and served.runs == [] and daemon.refused == 7 * 4
    pong = ask(path, {"op": "ping", "token": served.token})
    assert pong["pid"] == os.getpid() and pong["refused"] == 28 and served.token not in json.dumps(pong)
    assert ask(path, verify_request(token=served.token)) == {"report": {"verdict": "accepted"}}
    assert len(served.runs) == 1 and "token" not in served.runs[0]   # taken off before the request is checked
    assert ask(path, {"op": "stop", "token": served.token})["stopping"] is True
    served.thread.join(30)
    assert not served.thread.is_alive()


def test_the_token_file_is_private_and_goes_with_its_daemon(served):
    token = W.token_path(served.daemon.path)
    st = token.lstat()
    assert token.name == f"{KEY}.token" and st.st_mode & 0o777 == 0o600 and st.st_uid == os.getuid()
    assert re.fullmatch(r"[0-9a-f]{64}\n", token.read_text()) and served.token == token.read_text().strip()
    assert not list(token.parent.glob(".*"))   # the temporary names it was written under are gone
    assert ask(served.daemon.path, {"op": "stop", "token": served.token})["stopping"] is True
    served.thread.join(30)
    assert not token.exists() and not served.daemon.path.exists()


def test_a_newer_daemons_token_is_left_in_place(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path))
    old = S.Daemon(SimpleNamespace(device="cpu"), KEY)
    with old.publish():
        new = S.Daemon(SimpleNamespace(device="cpu"), KEY)
        with new.publish():   # a daemon started in its place (the old one's token file was lost, say)
            old.unpublish()
            assert W.read_token(W.token_path(new.path)) == new._token and new.path.is_socket()
            new.unpublish()
    assert not list((tmp_path / "run").iterdir())


def test_a_token_file_anyone_else_could_have_written_is_not_used(tmp_path):
    real = tmp_path / "real.token"
    W.write_token(real, "a" * 64)
    assert W.read_token(real) == "a" * 64
    link = tmp_path / "link.token"
    link.symlink_to(real)
    assert W.read_token(link) is None
    real.chmod(0o644)
    assert W.read_token(real) is None
    assert W.read_token(tmp_path / "missing.token") is None
    assert W.token_ok("a" * 64, "a" * 64) and not W.token_ok(None, "a" * 64) and not W.token_ok(b"a" * 64, "a" * 64)


# -- bounds ----------------------------------------------------------------------------------------------
def test_a_silent_connection_is_dropped_but_a_verification_is_waited_for(served, monkeypatch):
    monkeypatch.setattr(S, "REQUEST_WAIT_S", 0.5)
    with W.connect(served.daemon.path, 10) as idle:
        t0 = time.monotonic()
        assert idle.recv(100) == b""   # closed by the daemon, with no answer
        assert 0.3 < time.monotonic() - t0 < 5
    with W.connect(served.daemon.path, 10) as trickle:   # a byte now and then does not keep it either
        t0 = time.monotonic()
        with pytest.raises(OSError):
            for _ in range(20):
                trickle.sendall(b" ")
                time.sleep(0.2)
        assert time.monotonic() - t0 < 3
    served.sleep = 2.0   # four times the wait for a request: a verification is waited for, however long
    assert ask(served.daemon.path, verify_request(token=served.token), timeout=30) == {
        "report": {"verdict": "accepted"}}


def test_connections_that_send_nothing_are_bounded(served):
    path = served.daemon.path
    threads = threading.active_count()
    silent = [W.connect(path, 10) for _ in range(S.MAX_PENDING)]
    try:
        time.sleep(1.0)
        late = W.connect(path, 1.5)   # waits in the listen backlog: no thread, no answer yet
        with late:
            W.request(late, served.token, {"op": "ping"})
            with pytest.raises(TimeoutError):
                late.recv(100)
            assert threading.active_count() <= threads + S.MAX_PENDING
            silent.pop().close()   # room for one: the waiting client is served
            late.settimeout(10)
            assert json.loads(W.recv_line(late, 1 << 20))["pid"] == os.getpid()
    finally:
        for sock in silent:
            sock.close()


def test_an_overlong_request_line_is_refused(served):
    with W.connect(served.daemon.path, 10) as sock:
        try:
            sock.sendall(b"x" * (W.MAX_REQUEST + 70000))
        except OSError:
            pass   # the daemon answered and closed before all of it went
        answer = json.loads(W.recv_line(sock, 1 << 20))
    assert answer["kind"] == "input" and "longer than" in answer["error"]


# -- a candidate inside the sandbox, against a real daemon -----------------------------------------------
PROBE_CANDIDATE = '''
import glob, json, os, socket
import torch
import torch.nn as nn


def _sockets():
    paths = [os.environ.get("KERNELAGENT_TEST_DAEMON_SOCK", "")]   # a key guessed right: keys are no secret
    for home in (os.environ.get("KERNELAGENT_HOME"), os.path.expanduser("~/.kernelagent"), "/root/.kernelagent",
                 *os.environ.get("KERNELAGENT_SANDBOX_SECRET", "").split(":")):
        paths += glob.glob(os.path.join(home or "/nonexistent", "run", "*.sock"))
    try:
        with open("/proc/net/unix") as f:
            paths += [ln.split()[-1] for ln in f.read().splitlines()[1:] if ln.split()[-1].endswith(".sock")]
    except OSError:
        pass
    return [p for p in dict.fromkeys(paths) if p]


def _talk(path, message):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
        s.sendall(json.dumps(message).encode() + b"\\n")
        return s.makefile("rb").readline().decode()[:200].strip()
    finally:
        s.close()


def _probe():
    notes = []
    evil = os.path.abspath("evil_problem.py")
    with open(evil, "w") as f:
        f.write("import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, x):\\n        return x\\n")
    for path in _sockets():
        token = {}
        try:
            with open(path[:-5] + ".token") as f:
                token = {"token": f.read().strip()}
            notes.append("TOKEN READ")
        except OSError as e:
            notes.append(f"token: {type(e).__name__}")
        for msg in ({"op": "ping"}, {"op": "verify", "problem": evil, "candidate": "/etc/hostname", "seeds": 1},
                    {"op": "stop"}):
            try:
                notes.append(f"{msg['op']} -> {_talk(path, {**msg, **token})}")
            except OSError as e:
                notes.append(f"{msg['op']} -> {type(e).__name__}")
    return notes


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("DAEMONPROBE " + " | ".join(_probe()))

    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''

# The candidate runs under the tool profile (ncu / compute-sanitizer runs; like any machine without seccomp,
# aarch64 among them): socket() allowed, Landlock on. Under the candidate profile seccomp refuses socket()
# itself, so the candidate would never reach the daemon and this test would show nothing.
PROBE_RUN = """
import json, os, sys
from pathlib import Path
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox import confine
from kernelagent.verifier.sandbox.pool import WorkerPool

confine.PROFILES["candidate"] = confine.PROFILES["tool"]
options = VerifyOptions(device="cpu", timeout=120, seeds=1, static_policy=False)
with Verifier(options, pool=WorkerPool(size=1, confinement="auto", tripwires=False)) as v:
    report = v.verify(Path(sys.argv[1]), Path(sys.argv[2]))
print(json.dumps({"category": report.category, "message": report.message}))
"""


def _outside_tmp() -> Path:
    """A home where the sandbox's private /tmp does not hide it (as ~/.kernelagent is not hidden)."""
    for base in ("/var/tmp", str(REPO / ".pytest_cache")):
        if os.access(base, os.W_OK):
            return Path(tempfile.mkdtemp(prefix="ka-daemon-peers-", dir=base))
    return Path(tempfile.mkdtemp(prefix="ka-daemon-peers-"))


def _cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelagent.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


def _landlock() -> bool:
    from kernelagent.verifier.sandbox import confine

    return bool(confine.probe().get("landlock_abi"))


@pytest.mark.skipif(not _landlock(), reason="the token's wall is Landlock (a worker without it may read the home)")
def test_a_confined_candidate_cannot_use_the_daemon(tmp_path):
    home = _outside_tmp()
    env = {**{k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))},
           "KERNELAGENT_HOME": str(home), "COLUMNS": "200"}
    env.pop("KERNELAGENT_DAEMON", None)
    try:
        started = _cli("daemon", "start", "--device", "cpu", "--json", env=env)
        assert started.returncode == 0, started.stderr[-2000:]
        info = json.loads(started.stdout)
        sock = home / "run" / f"{info['key']}.sock"
        cand = tmp_path / "probe.py"
        cand.write_text(PROBE_CANDIDATE)
        probe = subprocess.run([sys.executable, "-c", PROBE_RUN, str(SOFTMAX_PROBLEM), str(cand)],
                               capture_output=True, text=True, timeout=600, cwd=REPO,
                               env={**env, "KERNELAGENT_TEST_DAEMON_SOCK": str(sock)})
        assert probe.returncode == 0, probe.stderr[-3000:]
        message = json.loads(probe.stdout.strip().splitlines()[-1])["message"]
        assert "DAEMONPROBE" in message and "TOKEN READ" not in message, message
        for op in ("ping", "verify", "stop"):   # refused, or the socket could not even be named (hidden)
            assert re.search(rf'{op} -> ({{"error": "refused: |[A-Za-z]+Error\b)', message), message
        after = _cli("verify", str(CHEAT), "--ref", str(SOFTMAX_PROBLEM), "--device", "cpu", "--seeds", "1",
                     "--daemon", "on", env=env)
        assert after.returncode == 1 and f"(pid {info['pid']})" in after.stderr, after.stderr[-2000:]
        log = (home / "run" / f"daemon-{info['key']}.log").read_text()
        assert "stop asked" not in log and "evil_problem" not in log and "/etc/hostname" not in log
    finally:
        _cli("daemon", "stop", "--all", env=env, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
