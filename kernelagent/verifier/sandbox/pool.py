"""Worker processes: one request each, a hard timeout, a memory watchdog, and a pool kept warm.

Isolation must not cost start-up time: the pool holds pre-started workers (torch and triton already
imported, blocked on stdin); each serves one request and is then replaced in the background.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelagent.verifier.estimate import oom_kill_count
from kernelagent.verifier.protocol import (
    CONSTRUCTED_FILE,
    GPU_TURN_FILE,
    IMPORTED_FILE,
    TIMING_TURN_FILE,
    TIMING_WANTED_FILE,
    Request,
    encode,
)
from kernelagent.verifier.sandbox import confine, limits, untrusted
from kernelagent.verifier.sandbox.remove import remove_tree
from kernelagent.verifier.sandbox.spawn import (
    default_memory_limit_mb,
    kill_group,
    make_workdir,
    spawn_worker,
)

if TYPE_CHECKING:
    from kernelagent.verifier.options import VerifyOptions


RESULT_MAX_BYTES = 64 << 20  # a worker's result.json: facts and messages, never tensors


class _Queueing:
    """Seconds spent waiting in line (so far, the current wait included)."""

    def __init__(self) -> None:
        self._done, self._since = 0.0, None

    def __enter__(self) -> None:
        self._since = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self._done += time.monotonic() - self._since
        self._since = None

    def seconds(self) -> float:
        since = self._since
        return self._done + (time.monotonic() - since if since is not None else 0.0)

    def waiting(self) -> bool:
        return self._since is not None


def _waited(proc: subprocess.Popen, left: float) -> bool:
    """Whether `proc` ended within min(left, 1 s); TimeoutExpired once `left` is spent (the caller works
    `left` out anew every round, so time added meanwhile counts)."""
    if left <= 0:
        raise subprocess.TimeoutExpired(proc.args, 0)
    try:
        proc.wait(timeout=min(left, 1.0))
    except subprocess.TimeoutExpired:
        return False
    return True


@dataclass
class WorkerResult:
    status: str                     # ok | timeout | gpu_busy | crashed | oom | forged
    result: dict[str, Any] = field(default_factory=dict)
    returncode: int | None = None
    seconds: float = 0.0
    stderr_tail: str = ""
    stdout_tail: str = ""
    workdir: str = ""
    out_dir: str = ""
    limits: dict[str, Any] = field(default_factory=dict)   # memory limit and its basis, peaks, why stopped
    confinement: dict[str, Any] = field(default_factory=dict)  # what the worker applied, read before the request

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
                 workdir: Path | None = None, extra_env: dict[str, str] | None = None,
                 confinement: str = "auto", tripwires: bool = True):
        self.mode = mode
        # confinement: "auto" | "strict" (ConfinementError, naming the layer, when the machine lacks one) |
        # "off" (tests only); a worker under a tool (ncu, compute-sanitizer) gets the tool profile
        self.settings = confine.Settings(level=confinement, tripwires=tripwires,
                                         profile=confine.PROFILES["tool" if prefix else "candidate"])
        if confinement == "strict":
            confine.require(self.settings.profile)
        self.workdir = workdir or make_workdir(root)
        # what the worker reports (result, the tensors the parent judges) goes beside the work dir, where
        # only the verifier's own code may write (see guard.install_audit_hook)
        self.out_dir = Path(f"{self.workdir}-out")
        self.out_dir.mkdir(mode=0o700, exist_ok=True)
        # what the worker may read besides its own folders: the parent links files in when their time comes
        # (a candidate's trial inputs only once its constructor ran)
        self.in_dir = Path(f"{self.workdir}-in")
        self.in_dir.mkdir(mode=0o700, exist_ok=True)
        # under a tool (ncu, compute-sanitizer) stdin may not reach the worker: the request goes in a file
        self.request_file = self.out_dir / "request.json" if prefix else None
        if self.request_file is not None:
            extra_env = {**(extra_env or {}), "KERNELAGENT_WORKER_REQUEST": "file"}
        self.proc, self._stdout, self._stderr = spawn_worker(self.workdir, mode, prefix, extra_env, self.settings)
        self.started = time.monotonic()

    def wait_ready(self, limit: float = 120.0) -> bool:
        """Wait until the worker has imported torch and made its CUDA context (its `ready` file)."""
        return self.wait_file("ready", limit)

    def wait_file(self, name: str, limit: float = 120.0) -> bool:
        """Wait until the worker has written `name` in its folder (False if it died or time ran out)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and self.proc.poll() is None:
            if (self.workdir / name).exists():
                return True
            time.sleep(0.01)
        return False

    def link(self, name: str, source: str | Path) -> Path:
        """Put `source` in the worker's read-only `-in` folder as `name` (a hard link where the file system
        allows, else a copy) and return the path the worker sees."""
        dst = self.in_dir / name
        source = Path(source)
        # a tensor file's large tensors live in raw side files beside it (tensorio): they go along
        for src in [source, *sorted(source.parent.glob(source.name + ".*.raw"))]:
            target = self.in_dir / (name + src.name[len(source.name):])
            target.unlink(missing_ok=True)
            try:
                os.link(src, target)
            except OSError:
                shutil.copyfile(src, target)
        return dst

    def run(self, request: Request, timeout: float, memory_limit_mb: int | None = None,
            on_constructed: Callable[[], None] | None = None,
            on_timing: Callable[[], None] | None = None) -> WorkerResult:
        """Send one request (a protocol dataclass) and wait for the worker to finish; `on_constructed` runs
        once when a candidate worker says its model is built (it delivers the trial inputs); `on_timing`,
        once it says it wants to be timed, after that (it returns when the GPU is the worker's alone, and
        the worker is then told so)."""
        out_dir = Path(request.out_dir)
        limit = memory_limit_mb or default_memory_limit_mb()
        t0 = time.monotonic()
        status = "ok"
        nonce = secrets.token_hex(16)  # the worker echoes it: a result without it is not the worker's
        line = json.dumps({**json.loads(encode(request)), "nonce": nonce}) + "\n"
        walls = self._walls(timeout)
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
        kills_before = oom_kill_count()
        meter = {"memory_limit_mb": limit, "basis": "set by the caller" if memory_limit_mb else limits.LIMIT_BASIS}
        watchdog = threading.Thread(target=self._watch, args=(limit, stop, oom, meter), daemon=True)
        watchdog.start()
        delivered = threading.Event()
        if on_constructed is not None:
            threading.Thread(target=self._await_marker, daemon=True,
                             args=(out_dir / CONSTRUCTED_FILE, on_constructed, stop, None, delivered)).start()
        queue = _Queueing()  # time waiting for a timing turn does not count against `timeout` (up to `timeout`)
        if on_timing is not None:
            threading.Thread(target=self._await_marker, daemon=True,
                             args=(out_dir / TIMING_WANTED_FILE, self._turn(on_timing, queue, stop), stop, delivered)
                             ).start()
        try:
            while not _waited(self.proc, timeout + min(queue.seconds(), timeout) - (time.monotonic() - t0)):
                pass
        except subprocess.TimeoutExpired:
            status = "gpu_busy" if queue.waiting() else "timeout"  # the wait for a turn was not the candidate's
            kill_group(self.proc)
        except BaseException:  # Ctrl-C or the caller failing: never leave a candidate running behind
            kill_group(self.proc)
            raise
        finally:
            stop.set()
        kill_group(self.proc)  # the candidate may have left children behind
        watchdog.join(60)  # its last scan, of what the worker left
        if oom.is_set() or _killed_by_the_kernel(self.proc.returncode, status, kills_before):
            status = "oom"
        result_file = out_dir / "result.json"
        result: dict[str, Any] = {}
        if status == "ok" and result_file.exists():
            try:
                result = json.loads(untrusted.read_bytes(result_file, RESULT_MAX_BYTES))
            except (OSError, ValueError):  # a link, a FIFO, too large, not JSON
                status = "crashed"
            else:
                # under a tool (compute-sanitizer exits with its own code) only the nonce is checked
                status = _genuine(result, nonce, self.proc.returncode if self.request_file is None else 0)
        elif status == "ok":
            status = "crashed"
        return WorkerResult(status=status, result=result, returncode=self.proc.returncode,
                            seconds=time.monotonic() - t0, stderr_tail=self._tail(self._stderr),
                            stdout_tail=self._tail(self._stdout), workdir=str(self.workdir),
                            out_dir=str(out_dir), limits=meter, confinement=walls)

    def _walls(self, timeout: float) -> dict[str, Any]:
        """The confinement the worker reported in its `ready` file, read before the request is sent (no
        candidate code has run in it yet, so the report is the worker's own)."""
        if not self.wait_ready(timeout):
            return {}
        try:
            walls = json.loads((self.workdir / "ready").read_text())
        except (OSError, json.JSONDecodeError):
            return {}
        return walls if isinstance(walls, dict) else {}

    @staticmethod
    def _await_marker(marker: Path, callback: Callable[[], None], stop: threading.Event,
                      after: threading.Event | None = None, then: threading.Event | None = None) -> None:
        """Run `callback` once `marker` exists (looked for only once `after` is set), then set `then`. A marker
        the candidate writes early changes nothing: the trial inputs are checked for on arrival, and a
        timing turn asked for before the inputs were delivered is not given before."""
        while not stop.wait(0.002):
            if (after is None or after.is_set()) and marker.exists():
                callback()
                if then is not None:
                    then.set()
                return

    def _turn(self, on_timing: Callable[[], None], queue: _Queueing, stop: threading.Event) -> Callable[[], None]:
        def give() -> None:
            with queue:
                on_timing()
            if stop.is_set():
                return  # the run ended while this waited: its folders may be gone
            try:
                (self.in_dir / TIMING_TURN_FILE).write_text("")
            except OSError:
                pass
        return give

    def _watch(self, limit_mb: int, stop: threading.Event, oom: threading.Event, note: dict[str, Any]) -> None:
        """Stop the worker when its processes' memory plus its files in RAM-backed scratch pass the limit,
        or when it keeps more files than a scan should walk; `note` records peaks and the reason."""
        meter = limits.MemoryMeter([self.workdir, self.out_dir])
        while True:
            # once the worker is gone, one last full scan: on a busy machine scans are spaced out, and what a
            # worker filled between the last one and its end must not pass unseen
            last = stop.wait(0.2)
            try:
                rss, files = meter.sample(self.proc.pid, force=last)
                reason = f"{rss:.0f} MiB resident + {files:.0f} MiB of files > {limit_mb} MiB" \
                    if rss + files > limit_mb else ""
            except (limits.TooManyFiles, limits.DiskFull, limits.Unmeasurable) as e:
                reason = str(e)
            note.update(peak_rss_mb=round(meter.peak_rss_mb), peak_files_mb=round(meter.peak_files_mb))
            if reason:
                note["stopped"] = reason
                oom.set()
                kill_group(self.proc)
                return
            if last:
                return

    def _tail(self, stream: limits.OutputTail) -> str:
        stream.wait(2.0)  # every process that held the pipe is gone: the drain ends at once
        return stream.text()

    def discard(self, keep: bool = False) -> None:
        kill_group(self.proc)
        if not keep:
            for folder in (self.workdir, self.out_dir, self.in_dir):
                remove_tree(folder)  # however deep the candidate nested it


class WorkerPool:
    """Keeps `size` idle workers per mode; `acquire` hands one out and starts its replacement."""

    def __init__(self, size: int = 1, root: Path | None = None, confinement: str = "auto", tripwires: bool = True):
        self.size, self.root = size, root
        self._gpu = threading.Lock()  # held while a worker times on the GPU, and while a GPU worker starts
        self.sandbox = {"confinement": confinement, "tripwires": tripwires}  # every worker's (VerifyOptions)
        self._idle: dict[str, list[Worker]] = {}
        self._lock = threading.Lock()
        self._warming: list[threading.Thread] = []
        self._closed = False

    @classmethod
    def for_options(cls, options: VerifyOptions, size: int = 1, root: Path | None = None) -> WorkerPool:
        """A pool whose workers are confined as `options` (a VerifyOptions) asks."""
        return cls(size, root, confinement=options.confinement, tripwires=options.tripwires)

    def warm(self, *modes: str) -> None:
        for mode in modes:
            with self._lock:
                missing = self.size - len(self._idle.setdefault(mode, []))
            for _ in range(max(0, missing)):
                # a pooled worker idles until a request comes: it may warm up Triton meanwhile; on a GPU it
                # makes its CUDA context and warms up only while no timing runs (gpu_quiet); its imports (seconds)
                # run meanwhile, outside the lock, so a verify waits for a second at most, not a whole start
                w = self._start(mode)
                with self._lock:
                    closed = self._closed
                    if not closed:
                        self._idle.setdefault(mode, []).append(w)
                if closed:  # closed while this one started: it must not outlive the pool
                    w.discard()
                    return

    def _spawn(self, mode: str, gpu_turn: bool = False) -> Worker:
        """A pooled worker: it warms up while idle and, with `gpu_turn`, touches the GPU only when told."""
        env = {"KERNELAGENT_WORKER_WARM": "1", **({"KERNELAGENT_WORKER_GPU_TURN": "1"} if gpu_turn else {})}
        return Worker(mode, self.root, extra_env=env, **self.sandbox)

    def _start(self, mode: str) -> Worker:
        if mode != "cuda":
            return self._spawn(mode)
        w = self._spawn(mode, gpu_turn=True)
        if not w.wait_file(IMPORTED_FILE) and w.proc.poll() is not None:  # it died starting: acquire() passes it
            return w                                                        # over (a slow one still gets its turn)
        with self.gpu_quiet():
            (w.workdir / GPU_TURN_FILE).write_text("")
            w.wait_ready()
        return w

    def prestart(self, mode: str) -> None:
        """Start one worker now, idle in the pool: its imports run while the caller does its own (a CLI
        verify starts its candidate worker before the parent has imported torch)."""
        w = self._spawn(mode)
        with self._lock:
            self._idle.setdefault(mode, []).append(w)

    def acquire(self, mode: str) -> Worker:
        with self._lock:
            idle = self._idle.setdefault(mode, [])
            worker = next((w for w in idle if w.proc.poll() is None), None)
            if worker is not None:
                idle.remove(worker)
        if worker is None:
            worker = Worker(mode, self.root, **self.sandbox)
        if self.size > 0 and mode != "cuda":
            self._warm_in_background(mode)
        # a GPU worker's replacement is started by refill() once the GPU is quiet: a new process making its
        # CUDA context and warming its compiler while another worker times a kernel disturbs the timing
        return worker

    def gpu_quiet(self) -> Any:
        """Held while a GPU worker starts (makes its CUDA context, warms its compiler): never while a worker
        of this pool runs timed (`run_quiet`)."""
        return self._gpu

    def run_quiet(self) -> Any:
        """Held around a worker run that times on the GPU: one at a time per pool, and no GPU worker
        starts meanwhile (a pool whose workers take a GPU gate themselves has nothing to hold here)."""
        return self._gpu

    def refill(self, mode: str) -> None:
        """Start the replacements of `mode`'s workers handed out if they wait for a quiet GPU (call when no
        timing is running); other modes were replaced when handed out."""
        if self.size > 0 and mode == "cuda":
            self._warm_in_background(mode)

    def _warm_in_background(self, mode: str) -> None:
        thread = threading.Thread(target=self.warm, args=(mode,), daemon=True)
        with self._lock:
            self._warming = [t for t in self._warming if t.is_alive()] + [thread]
        thread.start()

    def settle(self, limit: float = 120.0) -> None:
        """Wait until the replacements being started are idle in the pool (or `limit` seconds passed)."""
        deadline = time.monotonic() + limit
        with self._lock:
            threads = list(self._warming)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Discard the idle workers, and any whose start is under way (no worker outlives its pool)."""
        with self._lock:
            self._closed = True
            workers = [w for ws in self._idle.values() for w in ws]
            self._idle.clear()
        for w in workers:
            w.discard()
        self.settle()


def _killed_by_the_kernel(returncode: int | None, status: str, kills_before: int | None) -> bool:
    """A SIGKILL nobody here sent, while the cgroup's OOM-kill count rose: the kernel's OOM killer."""
    if status != "ok" or returncode != -9 or kills_before is None:
        return False
    after = oom_kill_count()
    return after is not None and after > kills_before


def _genuine(result: Any, nonce: str, returncode: int | None) -> str:
    """"ok" for a result the worker wrote and exited after; "forged" for one it did not write (no nonce,
    not an object) or after which it did not exit cleanly (the candidate wrote it and ended the process)."""
    if not isinstance(result, dict) or result.get("nonce") != nonce:
        return "forged"
    return "ok" if returncode == 0 else "crashed"
