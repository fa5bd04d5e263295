"""`kernelagent doctor`: what this machine has (GPU, versions, profilers, API keys) and its ceilings."""

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
    info: dict[str, Any] = {
        "python": platform.python_version(), "torch": torch.__version__, "triton": _version("triton"),
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
    return info
