"""Reference packs kept across processes, so a repeated `verify` pays only for the candidate's own work.

A pack (meta.json, init.pt, inputs_*.pt, the reference outputs and the baselines inside the meta) is
stored under `$KERNELAGENT_HOME/cache/refs/<key>/`, the key hashing everything the pack depends on:
the problem's content, the seeds policy, the device, GPU, driver, library versions, the source of the
code that builds packs, and PACK_FORMAT. The secret seed the pack was drawn from is kept in the entry,
which workers never see ($KERNELAGENT_HOME is closed to them). Entries are written to a temporary
folder and renamed into place (readers never see half a pack); a lock file per key lets one process
build while the others wait; the total size is bounded, least recently used entries go first; an entry
serves for a day at most (its inputs and timing plan are then drawn anew).

On use, an entry is copied into the verifier's own scratch folder, never used in place: the candidate
must read its inputs from a folder it may open, and the shared copy must stay out of its reach.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import functools
import hashlib
import importlib.metadata as md
import json
import os
import platform
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACK_FORMAT = 1               # bump when the layout of a pack or of a cache entry changes
DEFAULT_MAX_GB = 4.0          # KERNELAGENT_CACHE_MAX_GB
DEFAULT_MAX_AGE_HOURS = 24.0  # KERNELAGENT_CACHE_MAX_AGE_HOURS: then the trials are drawn anew
STALE_TEMP_SECONDS = 3600     # a temporary folder this old belongs to a writer that died
_PKG = Path(__file__).resolve().parents[1]
# the code whose behaviour shapes a pack: a change to any of these files invalidates every entry
_PACK_CODE = ("verifier/reference", "verifier/tensorio.py", "verifier/measure/timing.py",
              "verifier/measure/fresh.py", "verifier/measure/roofline.py", "verifier/worker/integrity.py",
              "verifier/worker/timed.py", "verifier/worker/outputs.py", "verifier/protocol.py",
              "problem")  # timed.py, fresh.py, outputs.py and protocol.py time and fingerprint the baselines


def home() -> Path:
    env = os.environ.get("KERNELAGENT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".kernelagent"


def cache_root() -> Path:
    """Where the packs live: $KERNELAGENT_HOME/cache/refs."""
    return home() / "cache" / "refs"


def _env_number(name: str, default: float, unit: str) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be a number of {unit}, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {raw!r}")
    return value


def max_bytes() -> int:
    """The size bound: $KERNELAGENT_CACHE_MAX_GB gigabytes (default 4)."""
    return int(_env_number("KERNELAGENT_CACHE_MAX_GB", DEFAULT_MAX_GB, "gigabytes") * 1e9)


def max_age() -> float:
    """Seconds an entry serves before its trials are drawn anew ($KERNELAGENT_CACHE_MAX_AGE_HOURS, default 24):
    the same inputs and timing plan must not serve an agent for ever, or it could learn them."""
    return _env_number("KERNELAGENT_CACHE_MAX_AGE_HOURS", DEFAULT_MAX_AGE_HOURS, "hours") * 3600.0


# -- the key ------------------------------------------------------------------------------------------
@functools.cache
def code_digest() -> str:
    """Hash of the source files that build packs (see _PACK_CODE)."""
    h = hashlib.sha256()
    for rel in _PACK_CODE:
        p = _PKG / rel
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(_PKG).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return ""


def _gpu_facts() -> tuple[str, str]:
    """GPU models and driver version, read without creating a CUDA context in this process."""
    names = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        with contextlib.suppress(OSError):
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    names.append(line.split(":", 1)[1].strip())
    driver = ""
    with contextlib.suppress(OSError):
        text = Path("/proc/driver/nvidia/version").read_text()
        driver = next((w for w in text.split() if w[:1].isdigit() and "." in w), "")
    if names and driver:
        return ",".join(names), driver
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ",".join(names) or "unknown", driver or "unknown"
    rows = [r.split(",") for r in out.stdout.strip().splitlines() if "," in r]
    return ",".join(r[0].strip() for r in rows) or "unknown", (rows[0][1].strip() if rows else "unknown")


@functools.cache
def machine_facts(device: str) -> dict[str, str]:
    """What the pack depends on besides the problem and the options, computed once per process."""
    facts = {"python": platform.python_version(), "torch": _version("torch"), "triton": _version("triton"),
             "cutlass_dsl": _version("nvidia-cutlass-dsl"), "code": code_digest()}
    if device == "cuda":
        gpu, driver = _gpu_facts()
        facts.update(gpu=gpu, driver=driver, visible=os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    return facts


def key_fields(problem_sha256: str, device: str, seeds: int, cpu_max_elements: int, timing: bool
               ) -> dict[str, Any]:
    """Everything a pack depends on, as the cache entry records it (timing adds trials on the GPU only)."""
    return {"problem": problem_sha256, "device": device, "seeds": seeds, "cpu_max_elements": cpu_max_elements,
            "timing": bool(timing) and device == "cuda", "format": PACK_FORMAT, **machine_facts(device)}


def key_of(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


# -- entries ------------------------------------------------------------------------------------------
@dataclass
class Hit:
    """A pack restored from the cache into the verifier's scratch folder."""

    meta: dict[str, Any]
    environment: dict[str, Any]
    secret: int
    seconds: float          # restoring it
    build_seconds: float    # building it, when it was built
    created: str


@dataclass
class EntryInfo:
    key: str
    bytes: int
    used: float
    created: str = ""
    problem: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    build_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        used = _dt.datetime.fromtimestamp(self.used, _dt.UTC).isoformat(timespec="seconds")
        return {"key": self.key, "problem": self.problem, "bytes": self.bytes, "created": self.created,
                "last_used": used, "build_seconds": self.build_seconds, "device": self.fields.get("device"),
                "gpu": self.fields.get("gpu"), "torch": self.fields.get("torch"), "seeds": self.fields.get("seeds"),
                "timing": self.fields.get("timing")}


class RefCache:
    """The packs under one root; every method is safe to call from several processes at once."""

    def __init__(self, root: Path | None = None, limit: int | None = None, age: float | None = None):
        self.root = root or cache_root()
        self.limit = max_bytes() if limit is None else limit
        self.age = max_age() if age is None else age

    def entry_dir(self, key: str) -> Path:
        return self.root / key

    # reading
    def restore(self, key: str, pack_dir: Path, ref_dir: Path) -> Hit | None:
        """Copy entry `key` into pack_dir and ref_dir; None when absent, unreadable or incomplete."""
        t0 = time.perf_counter()
        entry = self.entry_dir(key)
        try:
            doc = json.loads((entry / "entry.json").read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            doc = None
        if not _valid(entry, doc) or time.time() - float(doc.get("created_ts") or 0.0) > self.age:
            self.remove(key)  # corrupt, truncated or too old: drop it, the caller rebuilds and stores it again
            return None
        try:
            _fresh_dir(pack_dir)
            _fresh_dir(ref_dir)
            for rel in doc["files"]:
                shutil.copyfile(entry / rel, (pack_dir if rel.startswith("pack/") else ref_dir) / Path(rel).name)
            (entry / "used").touch()
        except OSError:
            return None   # evicted while we copied, or the scratch folder is full: the caller builds
        return Hit(meta=doc["meta"], environment=doc["environment"], secret=int(doc["secret"]),
                   seconds=round(time.perf_counter() - t0, 3), build_seconds=float(doc.get("build_seconds", 0.0)),
                   created=str(doc.get("created", "")))

    # writing
    def publish(self, key: str, fields: dict[str, Any], pack_dir: Path, ref_dir: Path, meta: dict[str, Any],
                environment: dict[str, Any], secret: int, build_seconds: float) -> bool:
        """Store a pack as entry `key` (atomically); False when it is over the size bound."""
        files = {f"pack/{p.name}": p for p in sorted(pack_dir.iterdir()) if p.is_file()}
        files.update({f"ref/{p.name}": p for p in sorted(ref_dir.iterdir()) if p.is_file()})
        total = sum(p.stat().st_size for p in files.values())
        if total > self.limit:
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".tmp-{key}-{secrets.token_hex(4)}"
        try:
            for sub in ("pack", "ref"):
                (tmp / sub).mkdir(parents=True)
            for rel, src in files.items():
                shutil.copyfile(src, tmp / rel)
            doc = {"format": PACK_FORMAT, "key": key, "fields": fields, "secret": secret,
                   "meta": {k: v for k, v in meta.items() if k != "cache"}, "environment": environment,
                   "build_seconds": round(build_seconds, 3), "bytes": total,
                   "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "created_ts": time.time(),
                   "files": {rel: p.stat().st_size for rel, p in files.items()}}
            (tmp / "entry.json").write_text(json.dumps(doc, default=str))
            (tmp / "used").touch()
            os.rename(tmp, self.entry_dir(key))
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return True   # another process stored the same pack first
            raise
        self.evict(keep=key)
        return True

    def remove(self, key: str) -> int:
        """Drop one entry (renamed away first, so a reader never sees it half deleted); bytes freed."""
        src = self.entry_dir(key)
        size = _du(src)
        trash = self.root / f".trash-{key}-{secrets.token_hex(4)}"
        try:
            os.rename(src, trash)
        except OSError:
            return 0
        shutil.rmtree(trash, ignore_errors=True)
        return size

    def evict(self, keep: str | None = None) -> list[str]:
        """Remove least recently used entries until the total fits the bound; the removed keys."""
        self._sweep_temps()
        entries = sorted(self.entries(), key=lambda e: e.used)
        total = sum(e.bytes for e in entries)
        removed = []
        for e in entries:
            if total <= self.limit:
                break
            if e.key != keep and self.remove(e.key):
                total -= e.bytes
                removed.append(e.key)
        return removed

    def clear(self) -> tuple[int, int]:
        """Remove every entry; (entries, bytes) removed."""
        entries = self.entries()
        freed = sum(self.remove(e.key) for e in entries)
        self._sweep_temps(max_age=0.0)
        return len(entries), freed

    # listing
    def entries(self) -> list[EntryInfo]:
        if not self.root.is_dir():
            return []
        out = []
        for d in self.root.iterdir():
            if d.name.startswith(".") or not d.is_dir():
                continue
            try:
                doc = json.loads((d / "entry.json").read_text())
                used = (d / "used").stat().st_mtime
            except (OSError, ValueError):
                continue
            out.append(EntryInfo(key=d.name, bytes=int(doc.get("bytes") or _du(d)), used=used,
                                 created=str(doc.get("created", "")), fields=doc.get("fields") or {},
                                 problem=str((doc.get("meta") or {}).get("problem", {}).get("name", "")),
                                 build_seconds=float(doc.get("build_seconds") or 0.0)))
        return out

    def info(self) -> dict[str, Any]:
        entries = sorted(self.entries(), key=lambda e: -e.used)
        return {"root": str(self.root), "entries": len(entries), "bytes": sum(e.bytes for e in entries),
                "max_bytes": self.limit, "max_age_hours": round(self.age / 3600.0, 3), "format": PACK_FORMAT,
                "list": [e.to_dict() for e in entries]}

    def _sweep_temps(self, max_age: float = STALE_TEMP_SECONDS) -> None:
        if not self.root.is_dir():
            return
        now = time.time()
        for d in self.root.glob(".t*"):
            with contextlib.suppress(OSError):
                if d.name.startswith((".tmp-", ".trash-")) and now - d.stat().st_mtime >= max_age:
                    shutil.rmtree(d, ignore_errors=True)

    # locking
    @contextlib.contextmanager
    def build_lock(self, key: str, wait: float) -> Iterator[bool]:
        """Hold the builder's lock for `key` (waiting at most `wait` seconds); yields whether it was taken."""
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        fd = os.open(locks / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        got = False
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    got = True
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.05)
            yield got
        finally:
            if got:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _valid(entry: Path, doc: Any) -> bool:
    """An entry of this format whose files are all there, each of the size recorded."""
    if not isinstance(doc, dict) or doc.get("format") != PACK_FORMAT or not isinstance(doc.get("meta"), dict) \
            or not isinstance(doc.get("secret"), int) or not isinstance(doc.get("files"), dict):
        return False
    try:
        return all((entry / rel).stat().st_size == size for rel, size in doc["files"].items())
    except OSError:
        return False


def _fresh_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


# -- what Verifier.reference uses -------------------------------------------------------------------
class Slot:
    """One verifier's view of one key: restore a hit, or (holding the build lock) publish a fresh pack."""

    def __init__(self, cache: RefCache | None, key: str, fields: dict[str, Any], stack: contextlib.ExitStack,
                 wait: float):
        self.cache, self.key, self.fields, self._stack, self._wait = cache, key, fields, stack, wait
        self.note: dict[str, Any] = {"hit": False, "key": key[:12], "stored": False}

    def restore(self, pack_dir: Path, ref_dir: Path) -> Hit | None:
        """A hit, else None; on a miss the build lock is held until the slot closes, so that other
        processes wait for this build instead of repeating it."""
        if self.cache is None:
            self.note["disabled"] = True
            return None
        hit = self.cache.restore(self.key, pack_dir, ref_dir)
        if hit is None:
            if not self._stack.enter_context(self.cache.build_lock(self.key, self._wait)):
                self.note["lock"] = "not taken in time; building without it"
            hit = self.cache.restore(self.key, pack_dir, ref_dir)  # built while we waited?
        if hit is not None:
            self.note.update(hit=True, built=hit.created, build_seconds=hit.build_seconds,
                             restore_seconds=hit.seconds)
        return hit

    def publish(self, pack_dir: Path, ref_dir: Path, meta: dict[str, Any], environment: dict[str, Any],
                secret: int, build_seconds: float) -> None:
        if self.cache is None:
            return
        try:
            self.note["stored"] = self.cache.publish(self.key, self.fields, pack_dir, ref_dir, meta, environment,
                                                     secret, build_seconds)
        except OSError as e:  # a full or read-only disk must not fail the verification
            self.note["error"] = f"{type(e).__name__}: {e}"


@contextlib.contextmanager
def slot(key: str, fields: dict[str, Any], enabled: bool, wait: float) -> Iterator[Slot]:
    with contextlib.ExitStack() as stack:
        yield Slot(RefCache() if enabled else None, key, fields, stack, wait)


_memo_locks: dict[tuple[str, str], threading.Lock] = {}
_memo_guard = threading.Lock()


def memo_lock(scope: str, key: str) -> threading.Lock:
    """One lock per (verifier, key): threads verifying the same problem wait for one pack, not build two."""
    with _memo_guard:
        return _memo_locks.setdefault((scope, key), threading.Lock())
