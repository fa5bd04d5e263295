"""Parent side of one audit: start the child, admit it when its memory estimate fits, watch it, report.

The child sizes the problem first and waits; the shared `Budget` lets it run once its estimate fits next
to the audits already running (a problem larger than the whole machine is refused with its size, the
estimate and what is free). A watchdog samples the child's process group and stops it past a limit
derived from its estimate; a child the kernel killed (SIGKILL we did not send) is reported as `oom` when
the cgroup's OOM-kill count rose or the child was near the memory it was given.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from kernelagent.verifier.audit.settings import AuditSettings
from kernelagent.verifier.estimate import (
    GB,
    HOST_HEADROOM,
    MB,
    Estimate,
    Machine,
    Sizes,
    fmt_bytes,
    memory_refusal,
    oom_kill_count,
    read_machine,
)
from kernelagent.verifier.sandbox.remove import remove_tree
from kernelagent.verifier.sandbox.spawn import group_rss_mb, kill_group, make_workdir, scrubbed_env

WATCH_INTERVAL = 0.25
LIMIT_FACTOR = 2.0          # a child may use up to this multiple of its host estimate (plus LIMIT_SLACK)
LIMIT_SLACK = 4 * GB
EVENT_STATUSES = ("ok", "error", "oom", "internal")
_LIVE: set[Child] = set()   # children running now, for kill_all
_LIVE_LOCK = threading.Lock()


class Budget:
    """Host and device memory shared by the audits that run at once (bytes)."""

    def __init__(self, machine: Machine | None = None):
        self.machine = machine or read_machine("cpu")
        self.host = int(self.machine.host_available * HOST_HEADROOM)
        self.device: int | None = None
        self.used_host = self.used_device = self.running = 0
        self._cond = threading.Condition()

    def admit(self, est: Estimate, sizes: Sizes, device_total: int | None, device_free: int | None) -> str | None:
        """Block until `est` fits beside the running audits; a refusal when it never would."""
        with self._cond:
            if device_total and self.device is None:
                self.device = int((device_free or device_total) * HOST_HEADROOM)
                self.machine = Machine(self.machine.host_available, self.machine.host_total,
                                       self.machine.shm_available, device_total, device_free)
        refusal = memory_refusal(est, self.machine, "auditing this problem", sizes)
        if refusal:
            return refusal
        with self._cond:
            while self.running and not self._fits(est):
                self._cond.wait()
            self.used_host += est.host
            self.used_device += est.device
            self.running += 1
        return None

    def _fits(self, est: Estimate) -> bool:
        dev_ok = self.device is None or self.used_device + est.device <= self.device
        return self.used_host + est.host <= self.host and dev_ok

    def release(self, est: Estimate) -> None:
        with self._cond:
            self.used_host -= est.host
            self.used_device -= est.device
            self.running -= 1
            self._cond.notify_all()

    def child_limit(self, est: Estimate) -> int:
        """The most host memory one child may use before the watchdog stops it (bytes)."""
        own = max(est.host * LIMIT_FACTOR, est.host + LIMIT_SLACK)
        return int(min(self.machine.host_available * HOST_HEADROOM, own))


class Child:
    """One audit child process: its protocol lines in a queue, its memory watched."""

    def __init__(self, settings: AuditSettings, limit: int):
        self.workdir = make_workdir()
        mode = "cuda" if settings.device == "cuda" else "cpu"
        extra = {"KERNELAGENT_AUDIT_PARENT": str(os.getpid())}
        if settings.threads:
            extra["OMP_NUM_THREADS"] = str(settings.threads)
        env = scrubbed_env(self.workdir, mode, extra)
        self._stderr = open(self.workdir / "stderr.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelagent.verifier.audit.child"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     cwd=str(self.workdir), env=env, start_new_session=True, close_fds=True)
        self.limit, self.peak, self.killed_for, self.timed_out = limit, 0, "", 0.0
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stop = threading.Event()
        with _LIVE_LOCK:
            _LIVE.add(self)
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        threading.Thread(target=self._watch, daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            try:
                self.messages.put(json.loads(line))
            except json.JSONDecodeError:
                continue
        self.messages.put(None)

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL):
            rss = int(group_rss_mb(self.proc.pid) * MB)
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.killed_for = f"it used {fmt_bytes(rss)}, over its limit of {fmt_bytes(self.limit)}"
                kill_group(self.proc)
                return

    def send(self, line: str) -> None:
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def expect(self, timeout: float) -> dict[str, Any] | None:
        """The next protocol message; None when the child died or `timeout` passed (then it is killed)."""
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            self.timed_out = timeout
            kill_group(self.proc)
            return None

    def close(self) -> None:
        self._stop.set()
        kill_group(self.proc)
        with _LIVE_LOCK:
            _LIVE.discard(self)
        self._stderr.close()
        remove_tree(self.workdir)

    def stderr_tail(self, limit: int = 1500) -> str:
        try:
            return (self.workdir / "stderr.log").read_bytes()[-limit:].decode(errors="replace")
        except OSError:
            return ""


def kill_all() -> None:
    """Stop every audit child running now (Ctrl-C in a folder audit: nothing is left behind)."""
    with _LIVE_LOCK:
        children = list(_LIVE)
    for child in children:
        child.killed_for = child.killed_for or "interrupted"
        kill_group(child.proc)


def audit_one(path: Path, settings: AuditSettings, budget: Budget) -> dict[str, Any]:
    """Audit one problem file in a child; always returns a result dict with a `status`."""
    t0 = time.monotonic()
    kills_before = oom_kill_count()
    child = Child(settings, limit=int(budget.machine.host_available * HOST_HEADROOM))
    try:
        child.send(json.dumps({"problem": str(path.resolve()), "settings": settings.to_dict()}))
        first = child.expect(settings.timeout)
        if first is None or first.get("event") != "sized":
            result = _final(first, child, kills_before)
        else:
            result = _admitted(first, child, settings, budget, kills_before)
    finally:
        child.close()
    result.update(problem=str(path), wall_seconds=round(time.monotonic() - t0, 2),
                  peak_rss_bytes_seen=child.peak)
    return result


def _admitted(sized: dict[str, Any], child: Child, settings: AuditSettings, budget: Budget,
              kills_before: int | None) -> dict[str, Any]:
    est = Estimate(sized["estimate"]["host_bytes"], sized["estimate"]["device_bytes"], sized["estimate"]["parts"])
    sizes = Sizes.from_dict(sized["sizes"])
    refusal = budget.admit(est, sizes, sized.get("device_total"), sized.get("device_free"))
    if refusal:
        child.send("stop")
        return {"status": "refused", "error": refusal, "memory": {"estimate": est.to_dict(), "sizes": sized["sizes"]}}
    try:
        child.limit = budget.child_limit(est)
        child.send("go")
        result = _final(child.expect(settings.timeout), child, kills_before)
    finally:
        budget.release(est)
    result.setdefault("memory", {"estimate": est.to_dict(), "sizes": sized["sizes"]})
    return result


def _final(msg: dict[str, Any] | None, child: Child, kills_before: int | None) -> dict[str, Any]:
    """The child's result, or what its death means (timeout, memory, crash)."""
    if msg is not None and msg.get("event") == "result" and msg.get("status") in EVENT_STATUSES:
        return {k: v for k, v in msg.items() if k != "event"}
    child.proc.wait(timeout=30)
    rc = child.proc.returncode
    if child.timed_out:
        return {"status": "timeout", "error": f"the audit ran past its {child.timed_out:.0f} s limit"}
    if child.killed_for:
        return {"status": "oom", "error": f"stopped by the memory watchdog: {child.killed_for}"}
    kills_after = oom_kill_count()
    if rc == -signal.SIGKILL:
        rose = kills_before is not None and kills_after is not None and kills_after > kills_before
        near = child.peak > 0.8 * child.limit
        if rose or near or kills_after is None:
            how = "the cgroup's OOM-kill count rose" if rose else f"peak seen {fmt_bytes(child.peak)}"
            return {"status": "oom", "error": f"killed by the kernel's OOM killer ({how})"}
    tail = child.stderr_tail()
    return {"status": "crashed", "error": f"the audit child died ({_died_how(rc)}) before reporting",
            "stderr_tail": tail}


def _died_how(rc: int | None) -> str:
    if rc is None:
        return "unknown"
    if rc < 0:
        try:
            return f"killed by signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"
