"""Shared helpers for the GPU benchmark scripts: environment facts and result files."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import json
import os
from pathlib import Path
from typing import Any

METHOD = ("median of CUDA-event timings (kernelagent.verifier.measure.timing.measure: warm-up, L2 flushed by a 256 MiB "
          "write before every sample, inputs rotated among 3 sets, CUDA-graph replay under 10 us)")


def environment() -> dict[str, Any]:
    import torch

    def ver(d: str) -> str | None:
        try:
            return md.version(d)
        except md.PackageNotFoundError:
            return None

    return {"date": _dt.date.today().isoformat(), "gpu": torch.cuda.get_device_name() if torch.cuda.is_available()
            else None, "torch": torch.__version__, "triton": ver("triton"), "cutlass_dsl": ver("nvidia-cutlass-dsl"),
            "liger_kernel": ver("liger-kernel"), "quack": ver("quack-kernels"), "cuda": torch.version.cuda}


def out_dir() -> Path:
    d = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_result(name: str, data: dict[str, Any]) -> Path:
    path = out_dir() / f"{name}.json"
    payload = {"benchmark": name, "environment": environment(), **data}
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path
