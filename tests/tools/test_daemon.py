"""The resident verifier behind `kernelagent verify --daemon`: its key, its request checks, its peer check,
and (on the CPU, through real CLI processes) serving verifications, cancelling on a client's disconnect, a
crash, stopping, idling out and replacing a stale socket. Every daemon a test starts is stopped, also when
the test fails."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelagent.cli import daemon as C
from kernelagent.cli.common import Confinement, Device
from kernelagent.tools import daemon as D
from kernelagent.tools import daemon_wire as W
from tests.paths import REPO, SOFTMAX_PROBLEM, softmax_case

GOOD = softmax_case("good")
CHEAT = REPO / "tests" / "corpus" / "wrong" / "static" / "alias_torch_as_t.py"   # policy_violation, no worker runs
HANG = softmax_case("hang")
WAIT = 300.0   # generous: a loaded 2-core machine imports torch in several processes at once

# run the CLI in this process's interpreter and report what it imported (the client must not import torch)
PROBE = """
import json, sys
from kernelagent.cli.app import app
sys.argv = ["kernelagent", *sys.argv[1:]]
code = 0
try:
    app()
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "torch": "torch" in sys.modules, "triton": "triton" in sys.modules}),
      file=sys.stderr)
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")}
    env.pop("KERNELAGENT_DAEMON", None)
    return {**env, "KERNELAGENT_HOME": str(home), "COLUMNS": "200"}


def ka(*args: str, home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelagent.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=_env(home))


def verify(cand: Path, *extra: str, home: Path) -> subprocess.CompletedProcess:
    return ka("verify", str(cand), "--ref", str(SOFTMAX_PROBLEM), "--device", "cpu", "--seeds", "1", *extra,
              home=home)


def status(home: Path) -> list[dict]:
    res = ka("daemon", "status", "--json", home=home)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def poll(check, limit: float = WAIT, every: float = 0.5):  # noqa: ANN001, ANN201 - a callable, its answer
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(every)
    raise AssertionError(f"still not true after {limit:.0f} s: {check}")


def stop_all(home: Path) -> None:
    """Stop every daemon of `home` (the ones this test started); kill by pid any that would not stop."""
    pids = [d["pid"] for d in status(home)] if (home / "run").is_dir() else []
    ka("daemon", "stop", "--all", home=home, timeout=120)
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def ensure_daemon(home: Path) -> dict:
    """The CPU daemon of `home`, started if an earlier test did not leave it running (a test run alone)."""
    if not status(home):
        assert ka("daemon", "start", "--device", "cpu", home=home).returncode == 0
    [d] = status(home)
    return d


def hanging_client(home: Path) -> subprocess.Popen:
    """A CLI verify whose candidate never returns from forward (it runs until cancelled or killed)."""
    return subprocess.Popen([sys.executable, "-m", "kernelagent.cli", "verify", str(HANG), "--ref",
                             str(SOFTMAX_PROBLEM), "--device", "cpu", "--seeds", "1", "--daemon", "on", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=_env(home))


def candidate_running(home: Path) -> list[dict] | None:
    """The daemon's jobs once the first one runs its candidate in a live worker."""
    jobs = [j for d in status(home) for j in d["jobs"]]
    return jobs if jobs and jobs[0]["stage"] == "running the candidate" and jobs[0]["workers"] else None


@pytest.fixture(scope="module")
def daemon_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("daemonhome")
    try:
        yield home
    finally:
        stop_all(home)


# -- units -----------------------------------------------------------------------------------------------
def test_peer_check_refuses_another_uid():
    me = os.getuid()
    assert W.peer_allowed(struct.pack("3i", 4321, me, 0))
    assert not W.peer_allowed(struct.pack("3i", 4321, me + 1, 0))
    assert not W.peer_allowed(struct.pack("3i", 4321, 0, 0), uid=1000)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert W.peer(a) == (os.getpid(), me)


def test_requests_are_validated(tmp_path):
    ok = W.validate({"op": "verify", "problem": str(SOFTMAX_PROBLEM), "candidate": str(GOOD)})
    assert ok["seeds"] == 3 and ok["timing"] is True and ok["timeout"] == 300.0 and ok["cache"] is True
    assert W.validate({"op": "verify", "problem": str(SOFTMAX_PROBLEM), "candidate": str(GOOD), "timeout": 5})[
        "timeout"] == 5.0
    bad = {
        "must be an absolute path": {"problem": "problems/corpus/softmax_cases.py"},
        "does not exist": {"candidate": str(tmp_path / "nope.py")},
        "not a file": {"candidate": str(tmp_path)},
        "'seeds' must be a int": {"seeds": "3"},
        "'seeds' must be a int, got True": {"seeds": True},
        "'timing' must be a bool": {"timing": 1},
        "'timeout' must be a float": {"timeout": "soon"},
        "at least 1": {"seeds": 0},
        "must be positive": {"timeout": -1},
        "unknown field": {"shell": "rm -rf"},
    }
    for needle, change in bad.items():
        with pytest.raises(W.RequestError, match=re.escape(needle)):
            W.validate({"op": "verify", "problem": str(SOFTMAX_PROBLEM), "candidate": str(GOOD), **change})
    with pytest.raises(W.RequestError, match="not JSON"):
        W.decode(b"{nope")


def test_key_follows_code_environment_and_options(tmp_path, monkeypatch):
    env = {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0"}
    key = W.daemon_key("auto", "auto", env)
    assert key == W.daemon_key("auto", "auto", {**env, "ANTHROPIC_API_KEY": "sk-1", "KERNELAGENT_DAEMON": "on"})
    assert key != W.daemon_key("cpu", "auto", env) != W.daemon_key("auto", "strict", env)
    assert key != W.daemon_key("auto", "auto", {**env, "CUDA_VISIBLE_DEVICES": "1"})
    assert key != W.daemon_key("auto", "auto", {**env, "KERNELAGENT_SCRATCH": "/scratch"})
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(W, "_PKG", pkg)
    before = W.daemon_key("auto", "auto", env)
    (pkg / "a.py").write_text("x = 22\n")   # an edit (or an upgrade) of the package: another daemon
    assert W.daemon_key("auto", "auto", env) != before


def _in_process_daemon(key: str, options: str) -> tuple[D.Daemon, threading.Thread]:
    """A daemon served by a thread of this process (its session a stand-in: it verifies nothing)."""
    daemon = D.Daemon(SimpleNamespace(device="cpu"), key, options=options)
    listener = daemon.publish()

    def serve() -> None:
        with listener:
            daemon.serve(listener)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return daemon, thread


def test_stop_finds_the_daemon_of_older_code_that_serves_these_options(monkeypatch, tmp_path, capsys):
    """The package edited while a daemon runs (other work in the same tree) changes the key `daemon stop`
    computes: the daemon, maybe verifying for a client that waits on it, must still be the one it stops."""
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path))
    cpu = _in_process_daemon(W.daemon_key("cpu", "auto"), W.options_key("cpu", "auto"))
    gpu = _in_process_daemon(W.daemon_key("cuda", "auto"), W.options_key("cuda", "auto"))
    try:
        monkeypatch.setattr(W, "fingerprint", lambda: "edited")   # the source changed since they started
        assert not W.socket_path(W.daemon_key("cpu", "auto")).exists()
        monkeypatch.setattr(C, "_alive", lambda pid: False)   # their pid is this process's
        C.stop(device=Device.cpu, confinement=Confinement.auto, all_=False, json_out=True)
        assert json.loads(capsys.readouterr().out) == {"stopped": [os.getpid()]}
        cpu[1].join(10)
        assert not cpu[1].is_alive() and not cpu[0].path.exists()
        assert gpu[1].is_alive() and gpu[0].path.exists()   # other options: not this stop's
    finally:
        for daemon, thread in (cpu, gpu):
            daemon.stop.set()
            thread.join(10)


def test_a_verify_meeting_a_stop_is_refused_not_left_running(monkeypatch, tmp_path):
    """A stop that lands while a verify request is checked, before its job is registered where the stop
    cancels jobs, must not leave that job running on (uncancelled, its worker outliving the stop)."""
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path))
    daemon = D.Daemon(SimpleNamespace(device="cpu"), "0123456789abcdef")
    ran = []
    monkeypatch.setattr(daemon, "_run", lambda req, say: ran.append(req))

    def stop_lands(request):  # noqa: ANN001, ANN202 - validate's stand-in
        daemon.stop.set()       # what a stop request does; serve() then cancels the jobs it finds
        daemon._cancel_all()
        return W.validate(request)

    monkeypatch.setattr(D, "validate", stop_lands)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b, pytest.raises(D._Internal, match="stopping"):
        daemon._dispatch(a, {"op": "verify", "problem": str(SOFTMAX_PROBLEM), "candidate": str(GOOD)})
    assert ran == [] and daemon._jobs == {}


def test_daemon_env_drops_secrets():
    env = W.daemon_env({"PATH": "/bin", "OPENAI_API_KEY": "sk-x", "GH_TOKEN": "t", "HTTPS_PROXY": "p", "HOME": "/h"})
    assert env == {"PATH": "/bin", "HOME": "/h"}


def test_stale_socket_is_removed(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path))
    path = W.socket_path("0123456789abcdef")
    _stale_socket(path)
    assert path.is_socket()
    assert W.running(path) is None
    assert not path.exists()


def _stale_socket(path: Path) -> None:
    """A socket file nobody listens on (what a killed daemon leaves)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()


def test_long_home_paths_still_get_a_socket(monkeypatch, tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("KERNELAGENT_HOME", str(deep))
    path = W.socket_path("0123456789abcdef")
    assert len(str(path)) > 108
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with server, W.address(path) as addr:
        server.bind(addr)
        server.listen(1)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with client, W.address(path) as caddr:
            client.connect(caddr)
    assert path.is_socket()


def test_auto_on_a_cpu_machine_starts_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")   # no GPU visible, whatever this machine has

    def no_spawn(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a daemon was started")

    monkeypatch.setattr(C, "_spawn", no_spawn)
    opts = SimpleNamespace(device="auto", confinement="auto", keep_workdir=False, profile=False, sanitize=False)
    for device in ("auto", "cpu", "cuda"):
        assert C.served_verify(SOFTMAX_PROBLEM, GOOD, SimpleNamespace(**{**vars(opts), "device": device}),
                               C.DaemonMode.auto, json_out=True) is None
    for local in ({"profile": True}, {"sanitize": True}, {"keep_workdir": True}):   # never served
        assert C.served_verify(SOFTMAX_PROBLEM, GOOD, SimpleNamespace(**{**vars(opts), **local}), C.DaemonMode.on,
                               json_out=True) is None
    assert C.served_verify(SOFTMAX_PROBLEM, GOOD, opts, C.DaemonMode.off, json_out=True) is None
    assert not (tmp_path / "run").exists()   # not even a folder


def test_paths_are_shown_as_given():
    data = {"problem": {"path": "/abs/op.py"}, "message": "running the problem /abs/op.py failed", "n": 3,
            "stages": [{"details": {"files": ["/abs/k.py"]}}]}
    shown = C._as_given(data, {"/abs/op.py": "op.py", "/abs/k.py": "k.py"})
    assert shown == {"problem": {"path": "op.py"}, "message": "running the problem op.py failed", "n": 3,
                     "stages": [{"details": {"files": ["k.py"]}}]}
    assert C.stop_hint("cpu", "auto") == "kernelagent daemon stop --device cpu"


# -- a real daemon, on the CPU ---------------------------------------------------------------------------
def test_daemon_serves_verifications_like_the_local_path(daemon_home):
    first = subprocess.run([sys.executable, "-c", PROBE, "verify", str(GOOD), "--ref", str(SOFTMAX_PROBLEM),
                            "--device", "cpu", "--seeds", "1", "--json", "--daemon", "on"],
                           capture_output=True, text=True, timeout=900, cwd=REPO, env=_env(daemon_home))
    probe = json.loads(first.stderr.strip().splitlines()[-1])
    assert probe["code"] == 0, first.stderr[-3000:]
    assert not probe["torch"] and not probe["triton"]   # the client imported neither
    assert json.loads(first.stdout)["verdict"] == "accepted"
    [d] = status(daemon_home)
    assert d["device"] == "cpu" and d["current"] and d["verifications"] == 1 and d["jobs"] == []
    assert Path(d["socket"]).stat().st_mode & 0o777 == 0o600
    assert (daemon_home / "run").stat().st_mode & 0o777 == 0o700
    token = W.token_path(Path(d["socket"]))
    assert token.stat().st_mode & 0o777 == 0o600 and re.fullmatch(r"[0-9a-f]{64}\n", token.read_text())
    assert "token" not in json.dumps(d) and token.read_text().strip() not in (daemon_home / "run" / (
        f"daemon-{d['key']}.log")).read_text()   # the token is in its file only

    human = verify(CHEAT, "--daemon", "on", home=daemon_home)
    assert human.returncode == 1 and "policy_violation" in human.stdout, human.stderr[-2000:]
    assert f"served by the verifier daemon (pid {d['pid']})" in human.stderr
    assert "kernelagent daemon stop --device cpu" in human.stderr
    [again] = status(daemon_home)
    assert again["pid"] == d["pid"] and again["verifications"] == 2

    served = verify(CHEAT, "--json", "--daemon", "on", home=daemon_home)
    local = verify(CHEAT, "--json", "--daemon", "off", home=daemon_home)
    assert served.returncode == local.returncode == 1
    a, b = json.loads(served.stdout), json.loads(local.stdout)
    assert a.keys() == b.keys() and a["metrics"].keys() == b["metrics"].keys()
    assert [s["name"] for s in a["stages"]] == [s["name"] for s in b["stages"]]
    for field in ("verdict", "category", "message", "feedback", "problem", "candidate", "blame"):
        assert a[field] == b[field], field
    assert status(daemon_home)[0]["verifications"] == 3
    history = json.loads(ka("history", "--json", home=daemon_home).stdout)
    assert len(history) == 4   # the client records what the daemon verified, as the local path does


def test_disconnect_cancels_the_job_and_the_daemon_serves_on(daemon_home):
    pid = ensure_daemon(daemon_home)["pid"]
    client = hanging_client(daemon_home)
    try:
        [job] = poll(lambda: candidate_running(daemon_home))
        client.send_signal(signal.SIGINT)   # Ctrl-C: the client closes its socket
        _, stderr = client.communicate(timeout=60)
        assert client.returncode == 130, stderr[-2000:]
    finally:
        if client.poll() is None:
            client.kill()
    poll(lambda: status(daemon_home)[0]["jobs"] == [])
    poll(lambda: not any(alive(w) for w in job["workers"]), limit=60)
    [d] = status(daemon_home)
    assert d["pid"] == pid and alive(pid)
    after = verify(CHEAT, "--daemon", "on", home=daemon_home)
    assert after.returncode == 1 and f"(pid {pid})" in after.stderr


def test_a_daemon_crash_is_one_error_and_no_second_run_here(daemon_home):
    pid = ensure_daemon(daemon_home)["pid"]
    client = hanging_client(daemon_home)
    try:
        [job] = poll(lambda: candidate_running(daemon_home))
        os.kill(pid, signal.SIGKILL)
        out, err = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 3 and out == ""   # no report: nothing was verified in the client's process
    assert "ended without an answer" in err and "--daemon off" in err and "Traceback" not in err
    poll(lambda: not any(alive(w) for w in job["workers"]), limit=60)   # its workers died with it
    assert status(daemon_home) == []   # its socket was left behind, found stale and removed


def test_stop_cancels_what_runs_and_removes_the_socket(daemon_home):
    d = ensure_daemon(daemon_home)
    client = hanging_client(daemon_home)
    try:
        poll(lambda: candidate_running(daemon_home))
        res = ka("daemon", "stop", "--device", "cpu", "--json", home=daemon_home)
        out, err = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
    assert res.returncode == 0 and json.loads(res.stdout) == {"stopped": [d["pid"]]}
    assert client.returncode == 3 and out == "" and "stopped while verifying" in err   # no verdict from a kill
    assert not Path(d["socket"]).exists() and not W.token_path(Path(d["socket"])).exists()
    poll(lambda: not alive(d["pid"]), limit=60)
    assert status(daemon_home) == []
    assert json.loads(ka("daemon", "stop", "--all", "--json", home=daemon_home).stdout) == {"stopped": []}


def test_an_idle_daemon_exits_and_a_stale_socket_is_replaced(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    path = run / f"{W.daemon_key('cpu', 'auto', _env(tmp_path))}.sock"
    _stale_socket(path)   # a daemon of this key was killed
    try:
        res = ka("daemon", "start", "--device", "cpu", "--idle", "2", "--json", home=tmp_path)
        assert res.returncode == 0, res.stderr[-2000:]
        info = json.loads(res.stdout)
        answer = W.running(path)   # None if it has idled out already (its socket is then gone)
        assert answer is None or answer["pid"] == info["pid"]
        poll(lambda: not alive(info["pid"]))
        assert not path.exists() and not W.token_path(path).exists()
        log = (run / f"daemon-{info['key']}.log").read_text()
        assert "exiting: idle for 2 s" in log
    finally:
        stop_all(tmp_path)
