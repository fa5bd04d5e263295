"""Worker processes: one request each, a hard timeout, a memory watchdog, and a pool kept warm.

Isolation must not cost start-up time: the pool holds pre-started workers (torch and triton already
imported, blocked on stdin); each serves one request and is then replaced in the background.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelagent.verifier.sandbox.spawn import (
    default_memory_limit_mb,
    group_rss_mb,
    kill_group,
    make_workdir,
    spawn_worker,
)


@dataclass
class WorkerResult:
    status: str                     # ok | timeout | crashed | oom
    result: dict[str, Any] = field(default_factory=dict)
    returncode: int | None = None
    seconds: float = 0.0
    stderr_tail: str = ""
    stdout_tail: str = ""
    workdir: str = ""
    out_dir: str = ""

    @property
    def died_how(self) -> str:
        rc = self.returncode
        if rc is None:
            return "unknown"
        if rc < 0:
            try:
                return f"killed by signal {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exited with status {rc} before reporting"


class Worker:
    """A started worker process with its own work directory."""

    def __init__(self, mode: str, root: Path | None = None, prefix: list[str] | None = None,
                 workdir: Path | None = None, extra_env: dict[str, str] | None = None):
        self.mode = mode
        self.workdir = workdir or make_workdir(root)
        # what the worker reports (result, the tensors the parent judges) goes beside the work dir, where
        # only the verifier's own code may write (see guard.install_audit_hook)
        self.out_dir = Path(f"{self.workdir}-out")
        self.out_dir.mkdir(mode=0o700, exist_ok=True)
        # under a tool (ncu, compute-sanitizer) stdin may not reach the worker: the request goes in a file
        self.request_file = self.out_dir / "request.json" if prefix else None
        if self.request_file is not None:
            extra_env = {**(extra_env or {}), "KERNELAGENT_WORKER_REQUEST": "file"}
        self.proc = spawn_worker(self.workdir, mode, prefix, extra_env)
        self.started = time.monotonic()

    def run(self, request: dict[str, Any], timeout: float, memory_limit_mb: int | None = None) -> WorkerResult:
        out_dir = Path(request.setdefault("out_dir", str(self.out_dir)))
        limit = memory_limit_mb or default_memory_limit_mb()
        t0 = time.monotonic()
        status = "ok"
        line = json.dumps(request) + "\n"
        if self.request_file is not None:
            tmp = self.request_file.with_suffix(".tmp")
            tmp.write_text(line)
            tmp.replace(self.request_file)
        try:
            if self.request_file is None:
                self.proc.stdin.write(line.encode())
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        stop = threading.Event()
        oom = threading.Event()
        watchdog = threading.Thread(target=self._watch, args=(limit, stop, oom), daemon=True)
        watchdog.start()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = "timeout"
            kill_group(self.proc)
        except BaseException:  # Ctrl-C or the caller failing: never leave a candidate running behind
            kill_group(self.proc)
            raise
        finally:
            stop.set()
        kill_group(self.proc)  # the candidate may have left children behind
        if oom.is_set():
            status = "oom"
        result_file = out_dir / "result.json"
        result: dict[str, Any] = {}
        if status == "ok" and result_file.exists():
            try:
                result = json.loads(result_file.read_text())
            except (OSError, json.JSONDecodeError):
                status = "crashed"
        elif status == "ok":
            status = "crashed"
        return WorkerResult(status=status, result=result, returncode=self.proc.returncode,
                            seconds=time.monotonic() - t0, stderr_tail=_tail(self.workdir / "stderr.log"),
                            stdout_tail=_tail(self.workdir / "stdout.log"), workdir=str(self.workdir),
                            out_dir=str(out_dir))

    def _watch(self, limit_mb: int, stop: threading.Event, oom: threading.Event) -> None:
        while not stop.wait(0.2):
            if group_rss_mb(self.proc.pid) > limit_mb:
                oom.set()
                kill_group(self.proc)
                return

    def discard(self, keep: bool = False) -> None:
        kill_group(self.proc)
        if not keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
            shutil.rmtree(self.out_dir, ignore_errors=True)


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode(errors="replace")


class WorkerPool:
    """Keeps `size` idle workers per mode; `acquire` hands one out and starts its replacement."""

    def __init__(self, size: int = 1, root: Path | None = None):
        self.size, self.root = size, root
        self._idle: dict[str, list[Worker]] = {}
        self._lock = threading.Lock()

    def warm(self, *modes: str) -> None:
        for mode in modes:
            with self._lock:
                missing = self.size - len(self._idle.setdefault(mode, []))
            for _ in range(max(0, missing)):
                # a pooled worker idles until a request comes: it may warm up Triton meanwhile
                w = Worker(mode, self.root, extra_env={"KERNELAGENT_WORKER_WARM": "1"})
                with self._lock:
                    self._idle[mode].append(w)

    def acquire(self, mode: str) -> Worker:
        with self._lock:
            idle = self._idle.setdefault(mode, [])
            worker = next((w for w in idle if w.proc.poll() is None), None)
            if worker is not None:
                idle.remove(worker)
        if worker is None:
            worker = Worker(mode, self.root)
        if self.size > 0:
            threading.Thread(target=self.warm, args=(mode,), daemon=True).start()
        return worker

    def close(self) -> None:
        with self._lock:
            workers = [w for ws in self._idle.values() for w in ws]
            self._idle.clear()
        for w in workers:
            w.discard()
