"""Resource bounds the parent keeps on a worker: a tail of its output, its memory (processes and the
files it keeps in RAM-backed scratch), and the default memory limit.

The parent never holds more than a tail of what a worker prints: its stdout and stderr are pipes that a
thread drains into a small ring buffer (a candidate printing gigabytes costs the parent CPU, not memory).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

TAIL_BYTES = 64 * 1024      # kept of each stream
MAX_FILES = 20_000          # files a worker may keep in its dirs: more is not an honest kernel, and scans cost
AVAILABLE_SHARE = 0.75      # the default memory limit, as a share of the memory available when a request starts


class OutputTail:
    """Drains a pipe in a daemon thread, keeping only its last TAIL_BYTES and the total count."""

    def __init__(self, fd: int, name: str):
        self.fd, self.total = fd, 0
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name=f"worker-{name}", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 16):
                with self._lock:
                    self.total += len(chunk)
                    self._buf += chunk
                    if len(self._buf) > 2 * TAIL_BYTES:
                        del self._buf[:-TAIL_BYTES]
        except OSError:
            pass
        finally:
            os.close(self.fd)

    def wait(self, timeout: float) -> None:
        """Let the drain reach end-of-file (every writer gone), for at most `timeout` seconds."""
        self._thread.join(timeout)

    def text(self, limit: int = 4000) -> str:
        with self._lock:
            data = bytes(self._buf[-limit:])
        return data.decode(errors="replace")


# ----------------------------------------------------------------------------------------------- memory


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, pgrp) for every process this one can see."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if len(fields) > 2:
            table[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return table


def worker_pids(root: int) -> list[int]:
    """The worker's processes: `root`'s descendants (in a pid namespace, every process the worker
    started, since orphans go to its PID 1) and anything still in `root`'s process group."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, []))
    found |= {pid for pid, (_, pgrp) in table.items() if pgrp == root}
    return sorted(p for p in found if p in table)


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def ram_backed(path: Path) -> bool:
    """Whether `path` lives on tmpfs / ramfs (its files are memory)."""
    best, fstype = "", ""
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                mnt = parts[1].replace("\\040", " ")
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, fstype = mnt, parts[2]
    except OSError:
        return False
    return fstype in ("tmpfs", "ramfs")


class Unmeasurable(RuntimeError):
    """A worker's folders hold something the memory scan cannot reach: it is stopped, not trusted."""


class TooManyFiles(Exception):
    """A worker keeps more than MAX_FILES files in its dirs."""


def dir_bytes(roots: list[Path], max_files: int = MAX_FILES) -> int:
    """Bytes allocated under `roots` (st_blocks, so sparse files count what they hold); raises
    TooManyFiles past `max_files` entries, which also bounds the cost of one scan."""
    total, seen, todo = 0, 0, [str(r) for r in roots]
    while todo:
        try:
            it = os.scandir(todo.pop())
        except OSError as e:
            _unless_gone(e)
            continue
        with it:
            for entry in it:
                seen += 1
                if seen > max_files:
                    raise TooManyFiles(f"more than {max_files} files in its work dirs")
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as e:
                    _unless_gone(e)
                    continue
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
    return total


def _unless_gone(err: OSError) -> None:
    """A folder the scan cannot enter (nested past PATH_MAX, made unreadable) would hide what it holds: the
    worker is stopped rather than trusted."""
    if err.errno in (errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.ELOOP):
        raise Unmeasurable(f"its work dirs hold files that cannot be measured ({err.strerror})")
    # anything else (the entry vanished, this process is short of descriptors) is measured at the next scan


# Files a worker may keep when its scratch is on disk (a small /dev/shm sends scratch to the temp dir): the
# outputs of the largest problems the estimator admits fit well below it.
DISK_LIMIT_MB = int(os.environ.get("KERNELAGENT_WORKER_DISK_MB", 16384))


class DiskFull(RuntimeError):
    """A worker wrote more files on disk than DISK_LIMIT_MB."""


class MemoryMeter:
    """Memory a worker holds: the resident memory of its processes, plus what its files hold when they
    sit in RAM-backed scratch. File scans are spaced so that they take at most a tenth of the time."""

    def __init__(self, dirs: list[Path]):
        ram = [ram_backed(d.parent if not d.exists() else d) for d in dirs]
        self.dirs = [d for d, r in zip(dirs, ram, strict=True) if r]
        self.disk_dirs = [d for d, r in zip(dirs, ram, strict=True) if not r]
        self.files_bytes = self.disk_bytes = 0
        self._next_scan = 0.0
        self.peak_rss_mb = self.peak_files_mb = 0.0

    def sample(self, root: int, force: bool = False) -> tuple[float, float]:
        """(RSS MiB, files MiB) now (`force`: scan the files even if the last scan was recent); raises
        TooManyFiles, and DiskFull past DISK_LIMIT_MB on disk."""
        pids = worker_pids(root)
        rss = sum(rss_kib(p) for p in pids) / 1024
        now = time.monotonic()
        if force or now >= self._next_scan:
            self.files_bytes = (dir_bytes(self.dirs) if self.dirs else 0) + held_by_descriptors(pids)
            self.disk_bytes = dir_bytes(self.disk_dirs) if self.disk_dirs else 0
            self._next_scan = now + 10 * (time.monotonic() - now)
        if self.disk_bytes / 2**20 > DISK_LIMIT_MB:
            raise DiskFull(f"{self.disk_bytes / 2**20:.0f} MiB of files on disk > {DISK_LIMIT_MB} MiB")
        files = self.files_bytes / 2**20
        self.peak_rss_mb, self.peak_files_mb = max(self.peak_rss_mb, rss), max(self.peak_files_mb, files)
        return rss, files


def held_by_descriptors(pids: list[int]) -> int:
    """Bytes in files the processes hold open but no folder shows: memfds and unlinked files (in RAM when
    they sit in tmpfs, as a worker's scratch and private /tmp do). Counted once per file."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                target = os.readlink(path)
                if target.startswith("/memfd:") or target.endswith(" (deleted)"):
                    st = os.stat(path)
                    seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
            except OSError:
                continue
    return sum(seen.values())


def available_mb() -> int:
    """MemAvailable (what can be used without swapping), in MiB; total memory where it is not reported."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20)
    except (ValueError, OSError):
        return 16384


def default_memory_limit_mb() -> int:
    """3/4 of the memory *available* now (not of the machine's total, which other work may hold)."""
    return int(available_mb() * AVAILABLE_SHARE)


LIMIT_BASIS = f"{int(AVAILABLE_SHARE * 100)}% of available memory"
