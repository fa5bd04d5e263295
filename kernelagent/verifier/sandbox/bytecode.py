"""Compiled bytecode for what every worker imports, written once by a trusted process.

Workers never write bytecode (PYTHONDONTWRITEBYTECODE; confined, they cannot write beside the sources at
all). Where the installed packages ship no `.pyc` files (the lent H200 image), every worker compiled
torch's sources again: `import torch, triton` took 4.4–5.2 s there, 2.1–2.4 s with bytecode
(`benchmarks/probes/import_pyc.py`, 2026-12-01). So the parent, when it starts verifying, checks that
the modules a worker imports first have bytecode, and if not starts one child — no candidate code in
it, bytecode writes on — that imports them. Python writes each `.pyc` beside its source (atomically,
tagged with the source's size and time, so a stale one is never used) where that folder is writable;
a read-only installation stays as it was. Workers, confined or not, only read them.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path

# what a worker imports on start (worker.main._warm_imports), in one line for the child
_IMPORTS = ("import torch, triton; import triton.compiler, triton.runtime.driver; "
            "import kernelagent.verifier.worker.main, kernelagent.verifier.worker.candidate")
_ENV_KEPT = ("PATH", "PYTHONPATH", "HOME", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "TMPDIR")
_SENTINELS = ("torch", "triton", "kernelagent.verifier.worker.candidate")
_STARTED: list[threading.Thread] = []


def missing() -> list[str]:
    """The sentinel modules whose bytecode is absent (or whose source cannot be found)."""
    out = []
    for name in _SENTINELS:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = getattr(spec, "origin", None)
        if not origin or not origin.endswith(".py"):
            continue
        if not os.path.exists(importlib.util.cache_from_source(origin)):
            out.append(name)
    return out


def compile_now(timeout: float = 300.0) -> bool:
    """Import what a worker imports in a child with bytecode writes on; True when it ran to the end."""
    # what finding the packages needs, nothing else (no keys, nothing of the caller's): it only imports
    env = {k: os.environ[k] for k in _ENV_KEPT if k in os.environ}
    env["CUDA_VISIBLE_DEVICES"] = ""  # imports only: no GPU context
    pkg_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run([sys.executable, "-c", _IMPORTS], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def warm_in_background() -> threading.Thread | None:
    """Start `compile_now` in a thread when bytecode is missing (once per process); None when not needed.
    KERNELAGENT_BYTECODE=0 turns it off."""
    if os.environ.get("KERNELAGENT_BYTECODE", "1") == "0" or _STARTED or not missing():
        return None
    thread = threading.Thread(target=compile_now, name="kernelagent-bytecode", daemon=True)
    _STARTED.append(thread)
    thread.start()
    return thread
