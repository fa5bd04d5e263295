"""Hardware ceilings measured once per GPU (copy bandwidth, matmul rates) and cached as JSON.

`kernelagent doctor --measure` fills the cache; the roofline stage reads it and falls back to
datasheet-derived figures (labelled as such) when nothing was measured.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from kernelagent.verifier.measure.roofline import FALLBACK_CEILINGS


def cache_path() -> Path:
    home = Path(os.environ.get("KERNELAGENT_HOME") or Path.home() / ".kernelagent")
    return home / "ceilings.json"


def load_ceilings(gpu: str | None) -> dict[str, Any]:
    """Measured ceilings for this GPU name, else the fallback table."""
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        data = {}
    return data.get(gpu or "", FALLBACK_CEILINGS)


def save_ceilings(gpu: str, ceilings: dict[str, Any]) -> Path:
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[gpu] = ceilings
    path.write_text(json.dumps(data, indent=2))
    return path


def _copy_gbps(nbytes: int) -> float:
    import torch

    from kernelagent.verifier.measure.timing import measure

    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    copy = measure([lambda: dst.copy_(src)], rep_ms=300)
    return 2 * nbytes / (copy.median_ms * 1e-3) / 1e9


def measure_ceilings() -> dict[str, Any]:
    """Measure on the current GPU: d2d copy of 2 GiB (bytes read + written) and dense matmul rates."""
    import torch

    from kernelagent.verifier.measure.timing import measure

    out: dict[str, Any] = {"copy_gbps": _copy_gbps(2**31)}
    for key, dtype, size, tf32 in (("bf16_tflops", torch.bfloat16, 8192, False),
                                   ("fp16_tflops", torch.float16, 8192, False),
                                   ("tf32_tflops", torch.float32, 8192, True),
                                   ("fp32_tflops", torch.float32, 4096, False),
                                   ("fp64_tflops", torch.float64, 4096, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        t = measure([lambda a=a, b=b: a @ b], rep_ms=300)
        out[key] = 2 * size**3 / (t.median_ms * 1e-3) / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False
    out.update(source="measured", gpu=torch.cuda.get_device_name(),
               date=_dt.date.today().isoformat(), torch=torch.__version__,
               method="median of event-timed runs, L2 flushed; copy counts bytes read + written")
    return out
