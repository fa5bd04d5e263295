"""A long-lived verification session (the MCP server's): one warm worker pool for its lifetime, one
Verifier per set of options on that pool, GPU work gated, and cancellable jobs.

Timed runs on one GPU disturb each other, and so does any other work on it. The session's GPU gate is a
readers-writer lock on a lock file that other kernelagent sessions on this machine take too: a timed
run holds it alone (exclusive), checks share it. A candidate's worker checks under the shared lock,
then asks for its timing turn; the parent trades the shared lock for the exclusive one and tells the
worker to go on (protocol.TIMING_WANTED_FILE / TIMING_TURN_FILE). So several candidates are checked at
once while their timings run one after another, each with the GPU to itself. A reference run that
times the baselines holds the exclusive lock throughout. Runs that time nothing take no lock.

What a candidate can do to this: ask for its turn early (it then checks alone, slower for it), or leave
work running on the GPU while another worker is timed (that worker's time is disturbed; its own is
measured alone). Neither makes its own figure better.

A job is one tool call running in a thread; cancelling it kills the worker processes it was handed
(the verification then ends at once) and refuses it new ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from kernelagent.verifier.api import Verifier, resolve_device
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.protocol import CandidateRequest, Role
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
    """A readers-writer lock on the GPU, across threads and processes: `held()` alone (timing), `held(shared=
    True)` beside other holders of the shared lock (checks). Every holder opens the lock files anew, so
    threads of one process exclude each other like processes do (flock works per open file). Writers come
    first: every taker passes through a second, exclusive "turnstile" lock, which a waiting writer keeps
    until it has the GPU, so new checks queue behind a timing that waits (flock alone would let a stream
    of checks keep it waiting for ever)."""

    def __init__(self, path: Path | None = None):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "none"
        self.path = path or _lock_dir() / f"gpu-{visible}.lock"
        self.turnstile = self.path.with_name(self.path.name + ".turnstile")

    @staticmethod
    def needed(mode: str, request: Any) -> bool:
        """A timed GPU run."""
        get = request.get if isinstance(request, dict) else lambda k, d=None: getattr(request, k, d)
        return mode == "cuda" and str(get("role")) in _TIMED_ROLES and bool(get("timing"))

    def take(self, shared: bool = False, give_up: Callable[[], bool] | None = None) -> int:
        """An open descriptor holding the lock, or -1 once `give_up()` says so while waiting (a run that ended
        or a job cancelled meanwhile); give it back with `give`."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        door = os.open(self.turnstile, os.O_RDWR | os.O_CREAT, 0o600)
        fd = -1
        try:
            if not _flock(door, fcntl.LOCK_EX, give_up):
                return -1
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            if not _flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, give_up):
                os.close(fd)
                return -1
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        finally:
            os.close(door)  # closing the descriptor lets the next taker through
        return fd

    @staticmethod
    def give(fd: int) -> None:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextlib.contextmanager
    def held(self, shared: bool = False, give_up: Callable[[], bool] | None = None) -> Iterator[None]:
        fd = self.take(shared, give_up)
        if fd < 0:
            raise Cancelled("cancelled while waiting for the GPU")
        try:
            yield
        finally:
            self.give(fd)


def _flock(fd: int, how: int, give_up: Callable[[], bool] | None) -> bool:
    """Take a flock; with `give_up`, by polling, so that a waiter can stop waiting."""
    if give_up is None:
        fcntl.flock(fd, how)
        return True
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if give_up():
                return False
            time.sleep(0.005)


def _lock_dir() -> Path:
    """Where the gate's lock files live: a local RAM-backed folder when there is one (flock between the
    threads of one process is only sound on a local file system; a home folder may be on NFS)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm / f"kernelagent-locks-{os.getuid()}"
    return home() / "locks"


class TimingTurn:
    """One candidate run's hold on the gate: shared while it is checked, exclusive from its timing turn on,
    nothing once the run is over (also when the turn is granted late, after the worker died)."""

    def __init__(self, gate: GpuGate, cancelled: Callable[[], bool] | None = None):
        self.gate = gate
        self._lock = threading.Lock()
        self._over = False
        fd = gate.take(shared=True, give_up=cancelled)
        if fd < 0:
            raise Cancelled("cancelled while waiting for the GPU")
        self._fd: int | None = fd

    def exclusive(self) -> None:
        """Trade the shared lock for the exclusive one (called from the pool's watcher thread); gives up
        waiting once the run is over."""
        with self._lock:
            if self._over:
                return
            fd, self._fd = self._fd, None
        if fd is not None:
            self.gate.give(fd)
        fd = self.gate.take(give_up=lambda: self._over)
        if fd < 0:
            return
        with self._lock:
            if not self._over:
                self._fd, fd = fd, None
        if fd is not None:
            self.gate.give(fd)

    def end(self) -> None:
        with self._lock:
            self._over = True
            fd, self._fd = self._fd, None
        if fd is not None:
            self.gate.give(fd)


class GatedWorker:
    """A pool worker whose GPU runs hold the gate as the module says; everything else is the worker's own."""

    def __init__(self, worker: Worker, gate: GpuGate):
        self._worker, self._gate = worker, gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._worker, name)

    def run(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not self._gate.needed(self._worker.mode, request):
            return self._worker.run(request, *args, **kwargs)
        job = current_job()
        cancelled = job.cancelled.is_set if job is not None else None
        if not _checks_first(request):
            with self._gate.held(give_up=cancelled):
                return self._worker.run(request, *args, **kwargs)
        turn = TimingTurn(self._gate, cancelled)
        try:
            return self._worker.run(dataclasses.replace(request, timing_turn=True), *args,
                                    on_timing=turn.exclusive, **kwargs)
        finally:
            turn.end()


def _checks_first(request: Any) -> bool:
    """A candidate run, which checks before it times: it can share the GPU until its timing turn."""
    return isinstance(request, CandidateRequest) and request.role is Role.CANDIDATE


class SessionPool(WorkerPool):
    """The warm pool, handing each worker to the calling job and gating its timed runs."""

    def __init__(self, size: int, gate: GpuGate, confinement: str = "auto"):
        super().__init__(size=size, confinement=confinement)
        self.gate = gate

    def run_quiet(self) -> Any:
        """Nothing: the gated workers hold the gate themselves (checks shared, timing alone)."""
        return contextlib.nullcontext()

    def gpu_quiet(self) -> Any:
        """A GPU worker starting (its CUDA context, its warm-up) is GPU work like a check: the shared lock."""
        return self.gate.held(shared=True)

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

    def __init__(self, device: str = "auto", pool_size: int = 2, gate: GpuGate | None = None,
                 confinement: str = "auto"):
        _preload()
        self.device = resolve_device(device)
        self.confinement = confinement  # every worker's, as VerifyOptions.confinement (the CLI daemon's option)
        self.pool = SessionPool(pool_size, gate or GpuGate(), confinement)
        self.workdir = Path(tempfile.mkdtemp(prefix="kernelagent-session-"))
        self._verifiers: dict[tuple, Verifier] = {}
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Start the pool's workers now (imports paid before the first call)."""
        self.pool.warm(self.device, *(("aot",) if self.device == "cpu" else ()))

    def verifier(self, seeds: int = 3, timing: bool = True, timeout: float = 300.0, profile: bool = False,
                 sanitize: bool = False, cache: bool = True) -> Verifier:
        if seeds < 1:
            raise ValueError("seeds must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        key = (seeds, timing, timeout, profile, sanitize, cache)
        with self._lock:
            if key not in self._verifiers:
                opts = VerifyOptions(device=self.device, seeds=seeds, timing=timing, timeout=timeout,
                                     profile=profile, sanitize=sanitize, confinement=self.confinement,
                                     cache=cache)
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
