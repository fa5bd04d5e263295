"""The namespace launcher: the command runs as PID 2 of its own user, pid, mount, IPC, UTS and network
namespaces under a trusted PID 1; everything it starts dies with it (also after it undid its own death
signal); its exit status and fatal signal reach the parent unchanged; strict refuses to run without the
namespaces."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from kernelagent.verifier.sandbox import confine
from kernelagent.verifier.sandbox.spawn import NSINIT

LAUNCH = [sys.executable, "-I", "-S", str(NSINIT)]

pytestmark = pytest.mark.skipif("user" not in confine.probe().get("namespaces", []),
                                reason="this machine cannot create user namespaces")


def _run(flags: list[str], script: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*LAUNCH, *flags, "--", sys.executable, "-I", "-S", "-c", script],
                          capture_output=True, text=True, timeout=60, **kw)


def _alive_with(marker: str) -> list[int]:
    """Processes anywhere on the machine whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_command_runs_under_a_trusted_pid_1_in_fresh_namespaces_with_only_its_own_processes_visible():
    script = ("import json, os; print(json.dumps([os.getpid(), os.getppid(), "
              "sorted(p for p in os.listdir('/proc') if p.isdigit()), open('/proc/self/uid_map').read().split(), "
              "os.environ['KERNELAGENT_SANDBOX_NS'], os.environ['KERNELAGENT_SANDBOX_PROC']]))")
    out = _run([], script)
    assert out.returncode == 0, out.stderr
    pid, ppid, procs, uid_map, spaces, proc = json.loads(out.stdout)
    assert (pid, ppid) == (2, 1)             # PID 2: PID 1 is the launcher's trusted init, not the command
    assert procs == ["1", "2"]               # a private /proc: no other process of the machine is visible
    assert uid_map == ["0", str(os.getuid()), "1"]   # one uid mapped: root inside is us outside
    assert spaces == "user,pid,mount,ipc,uts,net" and proc == "private"


def test_a_setsid_double_forked_child_dies_with_the_command():
    marker = f"ka-orphan-{uuid.uuid4().hex}"
    script = ("import os, subprocess, sys\n"
              f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', '{marker}'], "
              "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
              "print('started', flush=True)\n")
    out = _run([], script)
    assert out.returncode == 0 and "started" in out.stdout, out.stderr
    deadline = time.monotonic() + 30
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with(marker) == []
    # control: the same script without the launcher leaves the child running
    plain = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0
    left = _alive_with(marker)
    assert left, "the control should leave its setsid child behind"
    for pid in left:
        os.kill(pid, signal.SIGKILL)


def test_exit_status_and_fatal_signal_reach_the_parent():
    assert _run([], "import sys; sys.exit(7)").returncode == 7
    crash = _run([], "import ctypes; ctypes.string_at(0)")
    assert crash.returncode == -signal.SIGSEGV


def _left_after_killing_the_launcher(cmd: list[str], marker: str, settle: float = 0.0) -> list[int]:
    """Start `cmd` (its command line holding `marker`) under the launcher, kill the launcher alone (not its
    group, as the parent does on a timeout) and return what still runs with the marker (killed afterwards)."""
    proc = subprocess.Popen([*LAUNCH, "--", *cmd])
    try:
        deadline = time.monotonic() + 20
        while not _alive_with(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(settle)
        assert _alive_with(marker), "the command did not start"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 30
        while _alive_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        return _alive_with(marker)
    finally:
        for pid in _alive_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_killing_the_launcher_kills_the_command():
    marker = f"ka-pdeath-{uuid.uuid4().hex}"
    assert _left_after_killing_the_launcher([sys.executable, "-c", "import time; time.sleep(120)", marker],
                                            marker) == []


def test_killing_the_launchers_parent_kills_the_command():
    """kernelagent killed with SIGKILL cannot clean up: the launcher sees its parent gone and takes the
    namespace down (a worker waiting for a delivery that never comes once lived on for ten minutes)."""
    marker = f"ka-orphan-{uuid.uuid4().hex}"
    parent = ("import subprocess, sys, time\n"
              f"subprocess.Popen({[*LAUNCH, '--', sys.executable, '-c', 'import time; time.sleep(120)', marker]!r},"
              " start_new_session=True)\n"
              "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", parent])
    try:
        deadline = time.monotonic() + 30
        while len(_alive_with(marker)) < 3 and time.monotonic() < deadline:  # launcher, PID 1, command
            time.sleep(0.05)
        assert _alive_with(marker), "the command never started"
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 30
        while _alive_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with(marker) == []
    finally:
        proc.kill()
        for pid in _alive_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_loopback_is_up_only_when_asked():
    script = "print('lo', __import__('os').environ['KERNELAGENT_SANDBOX_LO'])"
    assert _run([], script).stdout.split()[1] == "down"
    assert _run(["--lo"], script).stdout.split()[1] == "up"


def _sh(flags: list[str], script: str) -> subprocess.CompletedProcess:
    """A shell from /bin inside the launcher: unlike this interpreter (in a venv that may live in /tmp), it
    never makes the launcher keep the host's /tmp."""
    return subprocess.run([*LAUNCH, *flags, "--", "/bin/sh", "-c", script], capture_output=True, text=True,
                          timeout=60)


def test_private_tmp_hides_the_hosts_and_keeps_nothing():
    name = f"/tmp/ka-nsinit-{uuid.uuid4().hex}"
    out = _sh([], f'echo x > {name}; echo "$KERNELAGENT_SANDBOX_TMP"')
    assert out.stdout.strip() == "private", out.stderr
    assert not os.path.exists(name)
    kept = _sh(["--keep", "/tmp/somewhere"], 'echo "$KERNELAGENT_SANDBOX_TMP"')
    assert kept.stdout.startswith("host")  # a work dir under /tmp must stay visible


def test_a_program_in_a_tmp_venv_still_starts(tmp_path_factory):
    """A virtual environment under /tmp (a CI checkout there, say): the launcher keeps the program's folder."""
    home = Path(tempfile.mkdtemp(prefix="ka-venv-", dir="/tmp"))
    try:
        (home / "bin").mkdir()
        prog = home / "bin" / "hello"
        prog.write_text('#!/bin/sh\necho "started $KERNELAGENT_SANDBOX_TMP"\n')
        prog.chmod(0o755)
        out = subprocess.run([*LAUNCH, "--", str(prog)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.startswith("started host"), out.stderr
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_strict_refuses_without_namespaces_and_auto_runs_without_them():
    """Namespaces taken away by a seccomp filter (unshare refused): strict exits with the layer named."""
    deny = ("import os, sys; sys.path.insert(0, %r); from kernelagent.verifier.sandbox import confine, seccomp; "
            "seccomp.install(confine.PROFILES['tool']); os.execv(sys.argv[1], sys.argv[1:])")
    repo = str(NSINIT.resolve().parents[3])
    base = [sys.executable, "-c", deny % repo, *LAUNCH]
    strict = subprocess.run([*base, "--strict", "--", "true"], capture_output=True, text=True, timeout=60)
    assert strict.returncode == 71
    assert "strict confinement refused" in strict.stderr and "user namespace" in strict.stderr
    auto = subprocess.run([*base, "--", "sh", "-c", 'echo "[$KERNELAGENT_SANDBOX_NS]"'], capture_output=True,
                          text=True, timeout=60)
    assert auto.returncode == 0 and auto.stdout.strip() == "[]", auto.stderr


def test_private_run_hides_host_daemons_sockets():
    """Tool runs may open sockets, and Landlock does not cover connecting to a unix socket by path: their
    /run is an empty one of their own."""
    out = _run(["--private-run"], "import os; print(os.listdir('/run'), os.environ['KERNELAGENT_SANDBOX_RUN'])")
    assert out.stdout.strip() == "[] private", out.stderr
    assert os.listdir("/run"), "the host's /run is untouched"


def test_a_command_that_undoes_its_death_signal_and_leaves_the_group_still_dies_with_the_launcher():
    """The command clears PR_SET_PDEATHSIG and calls setsid (out of the group the parent kills): as PID 1 it
    kept the whole namespace alive after the launcher was killed; under a trusted PID 1 nothing survives."""
    marker = f"ka-survivor-{uuid.uuid4().hex}"
    script = ("import ctypes, os, time\n"
              "ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"
              "os.setsid()\n"
              "time.sleep(120)\n")
    cmd = [sys.executable, "-I", "-S", "-c", script, marker]
    assert _left_after_killing_the_launcher(cmd, marker, settle=0.5) == []  # settle: it clears and leaves first


def test_sysv_shared_memory_is_private_to_the_sandbox():
    """An IPC namespace of its own: segments the command makes are gone with it and the host's are not listed."""
    script = ("import ctypes\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "print(libc.shmget(0x5b5b0001, 4096, 0o1666))\n"
              "print(open('/proc/sysvipc/shm').read().count('\\n'))\n")
    out = _run([], script)
    assert out.returncode == 0, out.stderr
    made, rows = out.stdout.split()
    assert int(made) >= 0 and int(rows) == 2  # its own segment and the header: nothing of the host's
    host = Path("/proc/sysvipc/shm").read_text()
    assert "5b5b0001" not in host.lower() and str(0x5B5B0001) not in host


def test_a_readonly_folder_keeps_its_files_modes_and_times(tmp_path: Path):
    """Files the parent hard-links in (the pack, the user's problem) cannot be chmod-ed, touched or added to
    from inside: Landlock does not cover attribute changes, a read-only bind does."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "problem.py").write_text("x = 1\n")
    before = os.stat(inputs / "problem.py")
    script = (f"import os\nfor f in (lambda: os.chmod('{inputs}/problem.py', 0o6777), "
              f"lambda: os.utime('{inputs}/problem.py', (0, 0)), lambda: open('{inputs}/new', 'w')):\n"
              "    try:\n        f()\n        print('changed')\n    except OSError as e:\n        print(e.errno)\n"
              f"print(open('{inputs}/problem.py').read().strip(), os.environ['KERNELAGENT_SANDBOX_INPUTS'])\n")
    out = _run(["--readonly", str(inputs)], script)
    assert out.returncode == 0, out.stderr
    assert "changed" not in out.stdout and "x = 1 read-only" in out.stdout
    after = os.stat(inputs / "problem.py")
    assert (after.st_mode, after.st_mtime) == (before.st_mode, before.st_mtime)
    assert sorted(os.listdir(inputs)) == ["problem.py"]


def test_pid_1_whose_launcher_died_before_its_death_signal_was_set_exits(tmp_path):
    """The launcher killed between fork and PID 1's prctl(PR_SET_PDEATHSIG): no signal would ever come, and PID 1
    went on to run the command under no one (CI, loaded: two processes left). PID 1 reads EOF on a pipe only the
    launcher holds and exits before running anything."""
    from kernelagent.verifier.sandbox import nsinit

    marker = tmp_path / "ran"
    pid = os.fork()
    if pid == 0:  # stands in for PID 1 after the fork, its launcher already gone (the write end closed)
        life_read, life_write = os.pipe()
        os.close(life_write)
        try:
            nsinit._child(["/bin/sh", "-c", f"touch {marker}"], [], {}, {}, None, life_read)
        finally:
            os._exit(3)  # not reached when _child exits as it should
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGKILL and not marker.exists()
