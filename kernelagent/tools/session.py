"""A long-lived verification session (the MCP server's): one warm worker pool for its lifetime, one
Verifier per set of options on that pool, timed GPU runs serialised, and cancellable jobs.

Timed runs on one GPU disturb each other, so a worker run that times (the reference's baselines, a
candidate's timing) holds the session's GPU gate: a thread lock, plus a lock file that other kernelagent
processes on this machine take too. Correctness-only runs go in parallel.

A job is one tool call running in a thread; cancelling it kills the worker processes it was handed
(the verification then ends at once) and refuses it new ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from kernelagent.verifier.api import Verifier, resolve_device
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.refcache import home
from kernelagent.verifier.sandbox.pool import Worker, WorkerPool
from kernelagent.verifier.sandbox.remove import remove_tree
from kernelagent.verifier.sandbox.spawn import kill_group

T = TypeVar("T")
_TIMED_ROLES = {"reference", "candidate", "single"}


class Cancelled(Exception):
    """The job was cancelled; its workers were killed."""


class Job:
    """One tool call: the workers it was handed, and whether it was cancelled."""

    def __init__(self) -> None:
        self.workers: list[Worker] = []
        self.cancelled = threading.Event()
        self._lock = threading.Lock()

    def add(self, worker: Worker) -> None:
        with self._lock:
            self.workers.append(worker)
        if self.cancelled.is_set():
            kill_group(worker.proc)
            raise Cancelled("cancelled")

    def cancel(self) -> None:
        """Stop the job now: its running workers die (their process groups are killed)."""
        self.cancelled.set()
        with self._lock:
            workers = list(self.workers)
        for w in workers:
            kill_group(w.proc)

    def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` in this thread as this job (the pool hands its workers to the job)."""
        _current.job = self
        try:
            return fn()
        finally:
            _current.job = None


_current = threading.local()


def current_job() -> Job | None:
    return getattr(_current, "job", None)


class GpuGate:
    """Serialises timed GPU runs: one at a time in this process (a lock) and on this machine (a lock file)."""

    def __init__(self, path: Path | None = None):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "none"
        self.path = path or home() / "locks" / f"gpu-{visible}.lock"
        self._lock = threading.Lock()

    @staticmethod
    def needed(mode: str, request: Any) -> bool:
        """A timed GPU run, unless the worker takes the lock itself around its timing (`gpu_lock`)."""
        get = request.get if isinstance(request, dict) else lambda k, d=None: getattr(request, k, d)
        return mode == "cuda" and str(get("role")) in _TIMED_ROLES and bool(get("timing")) and not get("gpu_lock")

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)


class GatedWorker:
    """A pool worker whose timed GPU runs hold the gate; everything else is the worker's own."""

    def __init__(self, worker: Worker, gate: GpuGate):
        self._worker, self._gate = worker, gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._worker, name)

    def run(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not self._gate.needed(self._worker.mode, request):
            return self._worker.run(request, *args, **kwargs)
        with self._gate.held():
            return self._worker.run(request, *args, **kwargs)


class SessionPool(WorkerPool):
    """The warm pool, handing each worker to the calling job and gating its timed runs."""

    def __init__(self, size: int, gate: GpuGate):
        super().__init__(size=size)
        self.gate = gate

    def acquire(self, mode: str) -> Worker:
        job = current_job()
        if job is not None and job.cancelled.is_set():
            raise Cancelled("cancelled")
        worker = super().acquire(mode)
        if job is not None:
            job.add(worker)
        return GatedWorker(worker, self.gate)  # type: ignore[return-value] - same interface


def _preload() -> None:
    """Import what verifications import lazily, once, here: concurrent first imports of torch from
    several threads fail ("cannot initialize type ... already defined")."""
    import torch  # noqa: F401

    import kernelagent.verifier.audit  # noqa: F401
    import kernelagent.verifier.judge.verdict  # noqa: F401


class Session:
    """Warm verifiers for a server's lifetime; `verifier(...)` returns one per distinct set of options."""

    def __init__(self, device: str = "auto", pool_size: int = 2, gate: GpuGate | None = None):
        _preload()
        self.device = resolve_device(device)
        self.pool = SessionPool(pool_size, gate or GpuGate())
        self.workdir = Path(tempfile.mkdtemp(prefix="kernelagent-session-"))
        self._verifiers: dict[tuple, Verifier] = {}
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Start the pool's workers now (imports paid before the first call)."""
        self.pool.warm(self.device, *(("aot",) if self.device == "cpu" else ()))

    def verifier(self, seeds: int = 3, timing: bool = True, timeout: float = 300.0, profile: bool = False,
                 sanitize: bool = False) -> Verifier:
        if seeds < 1:
            raise ValueError("seeds must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        key = (seeds, timing, timeout, profile, sanitize)
        with self._lock:
            if key not in self._verifiers:
                opts = VerifyOptions(device=self.device, seeds=seeds, timing=timing, timeout=timeout,
                                     profile=profile, sanitize=sanitize)
                self._verifiers[key] = Verifier(opts, pool=self.pool)
            return self._verifiers[key]

    def close(self) -> None:
        with self._lock:
            verifiers = list(self._verifiers.values())
            self._verifiers.clear()
        for v in verifiers:
            v.close()
        self.pool.close()
        remove_tree(self.workdir)
