"""One audit in its child process: the result, the oom_score_adj that makes the child (not the parent) the
OOM killer's pick, problem errors with their line, refusals up front, the memory watchdog, and a kernel
OOM kill reported as such; the shared budget admits audits while their estimates fit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kernelagent.verifier.audit import problem as audit_problem_mod
from kernelagent.verifier.audit import runner
from kernelagent.verifier.audit.problem import audit_problem
from kernelagent.verifier.audit.runner import Budget
from kernelagent.verifier.audit.settings import AuditSettings
from kernelagent.verifier.estimate import GB, MB, Bytes, Estimate, Machine, Sizes
from tests.verifier.audit.helpers import AUDIT_PROBLEMS, write_problem

SETTINGS = AuditSettings(device="cpu", draws=2, timeout=300.0, threads=1)
ROOT = Path(__file__).resolve().parents[3]


def test_an_audit_runs_in_a_child_that_the_oom_killer_picks_first():
    ballast = bytearray(1 << 30)  # a large parent: its peak must not be counted as the child's
    ballast[::4096] = b"x" * len(ballast[::4096])
    result = audit_problem(AUDIT_PROBLEMS / "softmax_width1.py", settings=SETTINGS)
    del ballast
    assert result["status"] == "ok", result
    assert result["degenerate"] is True and "constant" in result["trivial_answers_that_pass"]
    assert result["oom_score_adj"] == 1000
    mem = result["memory"]
    assert mem["sizes"]["source"] == "meta"
    assert 0 < mem["peak_host_bytes"] <= 2 * mem["estimate"]["host_bytes"]
    assert result["reasons"] and result["advice"]


def test_a_problem_whose_forward_raises_is_its_own_error(tmp_path):
    path = write_problem(tmp_path, "raises", "x @ torch.ones(3, 3)", "torch.randn(4, 5)")
    result = audit_problem(path, settings=SETTINGS)
    assert result["status"] == "error" and result["degenerate"] is False
    assert "line 8" in result["error"] and "RuntimeError" in result["error"], result["error"]


def test_a_broken_file_is_reported_without_a_child(tmp_path):
    bad = tmp_path / "op.py"
    bad.write_text("import torch\n\nclass Model(:\n")
    result = audit_problem(bad, settings=SETTINGS)
    assert result["status"] == "error" and "syntax error" in result["error"] and result["degenerate"] is False


def test_a_problem_too_large_for_the_machine_is_refused_up_front(tmp_path, monkeypatch):
    tiny = Machine(host_available=256 * MB, host_total=512 * MB)
    monkeypatch.setattr(audit_problem_mod, "read_machine", lambda device="cpu": tiny)
    path = write_problem(tmp_path, "big", "x * 2", "torch.randn(4096, 4096)")
    result = audit_problem(path, settings=SETTINGS)
    assert result["status"] == "refused" and result["degenerate"] is False
    assert "inputs 64.0 MB" in result["error"] and "256.0 MB free" in result["error"], result["error"]


GREEDY = '''

HOLD = []


def grab():
    import time
    for _ in range(48):                      # up to 3 GB, 64 MB at a time: the watchdog stops it first
        HOLD.append(bytearray(64 << 20))
    time.sleep(600)                          # never reached in a passing run: the child is killed above
'''


def test_the_watchdog_stops_a_child_over_its_limit(tmp_path):
    path = write_problem(tmp_path, "greedy", "x", "(grab(), torch.randn(4, 4))[1]", GREEDY)
    budget = Budget(Machine(host_available=int(1.2 * GB), host_total=4 * GB))
    result = audit_problem(path, settings=SETTINGS, budget=budget)
    assert result["status"] == "oom", result
    assert "watchdog" in result["error"] and result["degenerate"] is False


class _DeadChild:
    def __init__(self, rc: int, peak: int, limit: int):
        self.proc = type("P", (), {"returncode": rc, "wait": lambda self, timeout=None: rc})()
        self.peak, self.limit, self.killed_for, self.timed_out = peak, limit, "", 0.0

    def stderr_tail(self) -> str:
        return "some output"


def test_a_kernel_oom_kill_is_reported_as_memory(monkeypatch):
    monkeypatch.setattr(runner, "oom_kill_count", lambda: 3)
    killed = runner._final(None, _DeadChild(-signal.SIGKILL, peak=10, limit=100), kills_before=2)
    assert killed["status"] == "oom" and "OOM killer" in killed["error"]
    crashed = runner._final(None, _DeadChild(-signal.SIGSEGV, peak=10, limit=100), kills_before=3)
    assert crashed["status"] == "crashed" and "SIGSEGV" in crashed["error"]


def _est(host: int) -> Estimate:
    return Estimate(host=host)


def test_the_budget_admits_audits_while_they_fit():
    budget = Budget(Machine(host_available=10 * GB, host_total=16 * GB))
    sizes = Sizes(inputs=Bytes(1, 2))
    assert budget.admit(_est(5 * GB), sizes, None, None) is None
    admitted = threading.Event()
    waiter = threading.Thread(target=lambda: (budget.admit(_est(5 * GB), sizes, None, None), admitted.set()))
    waiter.start()
    waiter.join(timeout=0.5)
    assert not admitted.is_set()        # 5 + 5 GB is over 90% of 10 GB: it waits for the first
    budget.release(_est(5 * GB))
    waiter.join(timeout=60)
    assert admitted.is_set() and budget.running == 1
    refusal = budget.admit(_est(20 * GB), sizes, None, None)
    assert refusal and "free" in refusal   # larger than the whole machine: refused, not queued forever


SLEEPY = '''

def nap():
    import os
    import time
    marker = os.environ.get("KERNELAGENT_TEST_NAPPING")
    if marker:
        open(marker, "w").close()
    time.sleep(600)                          # a problem that hangs while it is sized
'''


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except OSError:
        return True


def test_a_child_dies_with_the_process_that_started_it(tmp_path):
    """A folder audit killed outright (no cleanup) leaves no child running: they die with their parent."""
    path = write_problem(tmp_path, "sleepy", "x", "(nap(), torch.randn(2))[1]", SLEEPY)
    code = ("import json, os, time\n"
            "from kernelagent.verifier.audit import runner\n"
            "from kernelagent.verifier.audit.settings import AuditSettings\n"
            "s = AuditSettings()\n"
            "c = runner.Child(s, limit=1 << 40)\n"
            f"c.send(json.dumps({{'problem': {str(path)!r}, 'settings': s.to_dict()}}))\n"
            "print(c.proc.pid, flush=True)\n"
            "while not os.path.exists(os.environ['KERNELAGENT_TEST_NAPPING']):\n"
            "    time.sleep(0.05)\n"
            "os._exit(0)\n")   # the child is busy in the problem's code, not reading its stdin
    env = {**os.environ, "KERNELAGENT_TEST_NAPPING": str(tmp_path / "napping")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=env)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 120
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = not _gone(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the audit child outlived its parent"


def test_kill_all_stops_running_children(tmp_path):
    path = write_problem(tmp_path, "sleepy", "x", "(nap(), torch.randn(2))[1]", SLEEPY)
    child = runner.Child(SETTINGS, limit=1 << 40)
    try:
        child.send(json.dumps({"problem": str(path), "settings": SETTINGS.to_dict()}))
        runner.kill_all()
        assert child.proc.wait(timeout=60) == -signal.SIGKILL
        assert child.killed_for == "interrupted"
    finally:
        child.close()
    assert child not in runner._LIVE
