"""The OS walls a worker raises around itself (Landlock + seccomp, in nsinit's namespaces), tried from a
child process the way candidate code would: what must be refused is, what running needs still works.
No torch here: each child is a bare Python that applies `confine.apply` and then tries things."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kernelagent.verifier.sandbox import confine, landlock, seccomp
from kernelagent.verifier.sandbox.spawn import NSINIT

REPO = NSINIT.resolve().parents[3]
FOUND = confine.probe()
pytestmark = pytest.mark.skipif(not (FOUND.get("landlock_abi") and FOUND.get("seccomp")
                                     and "user" in FOUND.get("namespaces", [])),
                                reason="needs Landlock, seccomp and user namespaces")

# the child: apply the walls, then run each attempt and report "ok ..." or "denied ..."
CHILD = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from kernelagent.verifier.sandbox import confine
work = Path(sys.argv[1])
settings = confine.Settings(level={level!r}, profile=confine.PROFILES[{profile!r}])
report = confine.apply(work, settings)
results = {{}}
for name, code in json.loads(sys.argv[2]).items():
    try:
        value = eval(code)
        results[name] = "ok " + repr(value)[:80]
    except Exception as e:
        results[name] = f"denied {{type(e).__name__}}: {{e}}"[:200]
print(json.dumps({{"report": report, "results": results}}))
"""


@pytest.fixture
def dirs(tmp_path_factory):
    """A worker's three dirs in RAM-backed scratch, a fake home with a key, a fake $KERNELAGENT_HOME, and a
    host folder outside everything (not in /tmp, which the sandbox replaces with its own)."""
    base = Path(os.environ.get("KA_TEST_SHM", "/dev/shm")) / f"ka-confine-test-{uuid.uuid4().hex[:8]}"
    work = base / "scratch" / "ka-worker-1"
    for d in (work, Path(f"{work}-out"), Path(f"{work}-in")):
        d.mkdir(parents=True)
    (Path(f"{work}-in") / "inputs.pt").write_text("inputs")
    (base / "scratch" / "packs").mkdir()
    (base / "scratch" / "packs" / "ref.pt").write_text("the answers")
    home = base / "home"
    (home / ".anthropic").mkdir(parents=True)
    (home / ".anthropic" / "api_key").write_text("sk-ant-planted")
    (home / "notes.txt").write_text("private notes")
    ka_home = base / "kahome"
    ka_home.mkdir()
    (ka_home / "kernelagent.db").write_text("database")
    outside = Path("/var/tmp") / f"ka-confine-outside-{uuid.uuid4().hex[:8]}"
    outside.mkdir()
    env = {"KERNELAGENT_SANDBOX_HOME": str(home),
           "KERNELAGENT_SANDBOX_SECRET": os.pathsep.join([str(ka_home), str(base / "scratch")])}
    yield {"work": work, "base": base, "home": home, "ka_home": ka_home, "outside": outside, "env": env}
    import shutil
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(outside, ignore_errors=True)


def _child(dirs: dict, attempts: dict[str, str], level: str = "auto", profile: str = "candidate",
           launcher: list[str] | None = None) -> dict:
    code = CHILD.format(repo=str(REPO), level=level, profile=profile)
    launch = [sys.executable, "-I", "-S", str(NSINIT), *(launcher or []), "--"] if launcher is not None else []
    env = {**os.environ, **dirs["env"]}
    out = subprocess.run([*launch, sys.executable, "-c", code, str(dirs["work"]), json.dumps(attempts)],
                         capture_output=True, text=True, timeout=120, env=env, cwd=str(dirs["work"]))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _ok(results: dict, name: str) -> bool:
    return results[name].startswith("ok")


def test_files_reads_writes_and_exec(dirs):
    w, o = dirs["work"], dirs["outside"]
    attempts = {
        "key": f"open({str(dirs['home'] / '.anthropic' / 'api_key')!r}).read()",
        "home_file": f"open({str(dirs['home'] / 'notes.txt')!r}).read()",
        "ka_home": f"open({str(dirs['ka_home'] / 'kernelagent.db')!r}).read()",
        "pack": f"open({str(dirs['base'] / 'scratch' / 'packs' / 'ref.pt')!r}).read()",
        "list_scratch": f"os.listdir({str(dirs['base'] / 'scratch')!r})",
        "shadow": "open('/etc/shadow').read()",
        "root_home": "os.listdir('/root')",
        "write_outside": f"open({str(o / 'x')!r}, 'w').write('x')",
        "native_write_outside": f"__import__('ctypes').CDLL(None).creat({str(o / 'y').encode()!r}, 0o644)",
        "write_dev_shm": "open('/dev/shm/ka-confine-x', 'w').write('x')",
        "shell_write_outside": f"__import__('subprocess').run(['sh', '-c', 'echo x > {o}/z'], capture_output=True)"
                               ".stderr",
        "passwd": "open('/etc/passwd').read()[:4]",
        "stdlib_import": "__import__('decimal').Decimal(1)",
        "own_package": "__import__('kernelagent.verifier.sandbox.limits').__name__",
        "kernels_listing": f"os.listdir({str(REPO / 'kernelagent' / 'kernels')!r}) and 'listed'",
        "kernels_read": f"open({str(REPO / 'kernelagent' / 'kernels' / '__init__.py')!r}).read()",
        "work_write": f"open({str(w / 'a.txt')!r}, 'w').write('x')",
        "work_rename_across": f"(os.makedirs({str(w / 'd')!r}), open({str(w / 'd' / 'f')!r}, 'w').close(), "
                              f"os.replace({str(w / 'd' / 'f')!r}, {str(w / 'f')!r}))",
        "out_write": f"open('{w}-out/result.json', 'w').write('x')",
        "in_read": f"open('{w}-in/inputs.pt').read()",
        "in_write": f"open('{w}-in/inputs.pt', 'w').write('forged')",
        "link_work_to_out": f"os.link({str(w / 'a.txt')!r}, '{w}-out/a.txt')",
        "move_out_to_work": f"os.replace('{w}-out/result.json', {str(w / 'r.json')!r})",
        "exec_in_work": f"(open({str(w / 's.sh')!r}, 'w').write('#!/bin/sh\\necho hi'), os.chmod({str(w / 's.sh')!r}, "
                        f"0o755), __import__('subprocess').run([{str(w / 's.sh')!r}]).returncode)",
        "run_system_program": "__import__('subprocess').run(['sh', '-c', 'echo fine'], capture_output=True)"
                              ".stdout.decode().strip()",
    }
    found = _child(dirs, attempts, launcher=[])
    r = found["results"]
    refused = ["key", "home_file", "ka_home", "pack", "list_scratch", "shadow", "root_home", "write_outside",
               "write_dev_shm", "kernels_read", "in_write", "link_work_to_out", "move_out_to_work", "exec_in_work"]
    allowed = ["passwd", "stdlib_import", "own_package", "kernels_listing", "work_write", "work_rename_across",
               "out_write", "in_read", "run_system_program"]
    assert [n for n in refused if _ok(r, n)] == [], r
    assert [n for n in allowed if not _ok(r, n)] == [], r
    assert r["native_write_outside"] == "ok -1" and "Permission denied" in r["shell_write_outside"]
    assert list(dirs["outside"].iterdir()) == []
    assert not os.path.exists("/dev/shm/ka-confine-x")
    assert found["report"]["level"] == "strict" and found["report"]["landlock"] == "fs,tcp,signal,abstract-unix"


def test_network_sockets_tracing_and_new_namespaces(dirs):
    attempts = {
        "socket": "__import__('socket').socket()",
        "socketpair": "len(__import__('socket').socketpair())",
        "ptrace_traceme": "__import__('ctypes').CDLL(None, use_errno=True).syscall(101, 0, 0, 0, 0)",
        "new_user_ns": "__import__('subprocess').run(['unshare', '-U', 'true'], capture_output=True).returncode",
        "thread_write_outside": (
            f"(lambda t: (t.start(), t.join()))(__import__('threading').Thread(target=lambda: "
            f"open({str(dirs['outside'] / 'thread')!r}, 'w').write('x')))"),
    }
    r = _child(dirs, attempts, launcher=[])["results"]
    assert r["socket"].startswith("denied PermissionError")
    assert _ok(r, "socketpair")                   # a connected pair reaches nobody: allowed
    assert r["ptrace_traceme"] == "ok -1"         # refused by seccomp
    assert r["new_user_ns"] != "ok 0"             # clone/unshare with namespace flags refused
    assert not (dirs["outside"] / "thread").exists()  # threads started after the walls are inside them


def test_tool_profile_keeps_loopback_tcp_and_tracing(dirs):
    """Under ncu / compute-sanitizer the injected library talks to its front end over local sockets, and ncu
    needs the host's user namespace (GPU counters); the worker is then root, and root-only calls stay refused."""
    attempts = {
        "iopl": "__import__('ctypes').CDLL(None, use_errno=True).syscall(172, 3)",
        "acct_off": "__import__('ctypes').CDLL(None, use_errno=True).syscall(163, None)",  # harmless if allowed
        "loopback_tcp": "(lambda s: (s.bind(('127.0.0.1', 0)), s.listen(), "
                        "__import__('socket').create_connection(s.getsockname(), timeout=2).close(), 'connected')[-1])"
                        "(__import__('socket').socket())",
        "ptrace_traceme": "__import__('ctypes').CDLL(None, use_errno=True).syscall(101, 0, 0, 0, 0)",
        "write_outside": f"open({str(dirs['outside'] / 'x')!r}, 'w').write('x')",
        "private_tmp": "open('/tmp/tool-file', 'w').write('x')",
    }
    tool = _child(dirs, attempts, profile="tool", launcher=["--lo", "--no-userns", "--private-run"])
    r = tool["results"]
    assert r["loopback_tcp"] == "ok 'connected'" and r["ptrace_traceme"] == "ok 0", r
    assert r["write_outside"].startswith("denied")
    # /tmp is the tool's own unless something kept lives there (this interpreter's venv, say): then it is the
    # host's, read-only
    assert _ok(r, "private_tmp") if tool["report"]["tmp"] == "private" else r["private_tmp"].startswith("denied"), r
    assert r["iopl"] == "ok -1" and r["acct_off"] == "ok -1", r
    assert tool["report"]["run"] == "private"  # no host daemon's socket to name (tests/.../test_nsinit.py)
    assert tool["report"]["namespaces"] == ["pid", "mount", "ipc", "uts", "net"]
    assert tool["report"]["level"] == "strict"
    assert tool["report"]["loopback"] == "up" and tool["report"]["landlock"] == "fs,signal"
    cand = _child(dirs, {"loopback_tcp": attempts["loopback_tcp"]}, launcher=["--lo"])["results"]
    assert cand["loopback_tcp"].startswith("denied")


def test_signals_stay_inside_the_domain(dirs):
    """Without the pid namespace the caller can be named; Landlock's signal scope still refuses it."""
    r = _child(dirs, {"kill_caller": f"os.kill({os.getpid()}, 0)", "kill_self": "os.kill(os.getpid(), 0)"},
               launcher=None)["results"]
    assert r["kill_caller"].startswith("denied PermissionError") and _ok(r, "kill_self")


def test_strict_names_the_missing_layer_and_auto_says_what_is_missing(dirs):
    code = CHILD.format(repo=str(REPO), level="strict", profile="candidate")
    out = subprocess.run([sys.executable, "-c", code.replace("confine.apply(", "confine.enter("), str(dirs["work"]),
                          "{}"], capture_output=True, text=True, timeout=60, env={**os.environ, **dirs["env"]})
    assert out.returncode == confine.EXIT_REFUSED
    assert "strict confinement refused" in out.stderr and "'user namespace'" in out.stderr
    report = _child(dirs, {}, level="auto", launcher=None)["report"]
    assert report["level"] == "partial" and report["missing"] == ["user namespace", "pid namespace",
                                                                    "mount namespace", "ipc namespace",
                                                                    "net namespace"]
    assert report["landlock"].startswith("fs") and report["seccomp"].startswith("on")


def test_off_applies_nothing(dirs):
    found = _child(dirs, {"key": f"open({str(dirs['home'] / '.anthropic' / 'api_key')!r}).read()"}, level="off",
                   launcher=None)
    assert found["report"]["level"] == "none" and found["results"]["key"] == "ok 'sk-ant-planted'"


def test_a_grant_never_covers_a_protected_or_secret_folder(tmp_path):
    (tmp_path / "opt" / "tools").mkdir(parents=True)
    (tmp_path / "opt" / "home" / "me" / "py").mkdir(parents=True)
    (tmp_path / "opt" / "home" / "me" / ".ssh").mkdir()
    (tmp_path / "opt" / "secret").mkdir()
    rules = landlock.Rules(landlock.RX, protected=[str(tmp_path / "opt" / "home" / "me")],
                          secret=[str(tmp_path / "opt" / "secret")])
    rules.grant(tmp_path / "opt", landlock.RX)
    rules.grant(tmp_path / "opt" / "home" / "me" / "py", landlock.RX)  # a Python inside the home: fine
    rules.grant(tmp_path / "opt" / "secret" / "x", landlock.RX)
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in rules.grants) == [
        "opt/home/me/py", "opt/tools"]


def test_seccomp_program_shape():
    prog = seccomp.program(seccomp.denied_syscalls(confine.PROFILES["candidate"]))
    assert prog[0] == (0x20, 0, 0, 4) and prog[-1] == (0x06, 0, 0, 0x7FFF0000)   # arch first, allow last
    denied = {k for code, _, _, k in prog if code == 0x15}
    assert {41, 101, 272, 308, 425, 435} <= denied
    tool = seccomp.denied_syscalls(confine.PROFILES["tool"])
    assert "socket" not in tool and "ptrace" not in tool and "unshare" in tool
