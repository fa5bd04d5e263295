"""`kernelagent doctor`: what this machine has (GPU, versions, profilers, API keys), its ceilings, and where
kernelagent keeps its database, config, reference cache and libraries."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import shutil
import subprocess
from typing import Any

KEY_NAMES = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELAGENT_MODEL")


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _driver() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def collect(measure: bool = False) -> dict[str, Any]:
    """Facts about this machine; with `measure`, also measure and cache the GPU's ceilings."""
    import torch

    from kernelagent.verifier.measure.ceilings import cache_path, load_ceilings, measure_ceilings, save_ceilings

    cuda = torch.cuda.is_available()
    gpu = torch.cuda.get_device_name() if cuda else None
    from kernelagent import __version__

    info: dict[str, Any] = {
        "kernelagent": __version__, "python": platform.python_version(), "torch": torch.__version__,
        "triton": _version("triton"),
        "cutlass_dsl": _version("nvidia-cutlass-dsl"), "cuda_available": cuda, "gpu": gpu,
        "capability": "sm_{}{}".format(*torch.cuda.get_device_capability()) if cuda else None,
        "cuda": torch.version.cuda, "driver": _driver(),
        "ncu": shutil.which("ncu"), "compute_sanitizer": shutil.which("compute-sanitizer"),
        "api_keys": {k: (k in os.environ) for k in KEY_NAMES},
        "mode": "GPU" if cuda else "CPU: Triton candidates run under the interpreter, CuTe DSL compile-only",
    }
    if measure and cuda:
        ceilings = measure_ceilings()
        info["ceilings_file"] = str(save_ceilings(gpu, ceilings))
    info["ceilings"] = load_ceilings(gpu) if cuda else None
    info.setdefault("ceilings_file", str(cache_path()))
    info["paths"] = paths()
    info["cache"] = cache_summary()
    return info


def paths() -> dict[str, str]:
    """Where kernelagent keeps things: home, database, config, reference cache, both library shelves, scratch."""
    from kernelagent.agent.config import CONFIG_FILE
    from kernelagent.kernels import LIBRARY_ROOT
    from kernelagent.memory.store import DB_NAME
    from kernelagent.verifier.refcache import cache_root, home
    from kernelagent.verifier.sandbox.spawn import scratch_base

    base = home()
    return {"home": str(base), "database": str(base / DB_NAME), "config": str(base / CONFIG_FILE),
            "cache": str(cache_root()), "library": str(LIBRARY_ROOT), "user_library": str(base / "library"),
            "scratch": str(scratch_base())}


def cache_summary() -> dict[str, Any]:
    """How full the reference cache is (or why its settings are unusable)."""
    from kernelagent.verifier.refcache import RefCache

    try:
        info = RefCache().info()
    except ValueError as e:
        return {"error": str(e)}
    return {k: info[k] for k in ("entries", "bytes", "max_bytes", "max_age_hours")}
