"""Does memcheck see a read just past a tensor? The unmasked read of
tests/corpus/wrong/softmax/oob_read.py, standalone, under compute-sanitizer memcheck with the caching
allocator off, with and without `--padding` (allocations otherwise sit back to back).
Run: `python benchmarks/sanitizer_probe.py` on the GPU; prints each run's summary and first finding.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = r"""
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("cand", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
x = torch.randn(48, 200, device="cuda")
y = mod.ModelNew()(x); torch.cuda.synchronize()
print("ran", bool(torch.isfinite(y).all()))
"""


def run(padding: int | None) -> dict[str, object]:
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return {"error": "compute-sanitizer not on PATH"}
    log = Path(tempfile.mkdtemp()) / "log.txt"
    cmd = [exe, "--tool", "memcheck", *(["--padding", str(padding)] if padding else []), "--log-file", str(log),
           sys.executable, "-c", CHILD, str(ROOT / "tests/corpus/wrong/softmax/oob_read.py")]
    env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    text = log.read_text(errors="replace") if log.exists() else ""
    lines = [ln.strip("= ").strip() for ln in text.splitlines()]
    return {"padding": padding, "rc": out.returncode, "stdout": out.stdout.strip()[-200:],
            "summary": next((ln for ln in reversed(lines) if "SUMMARY" in ln), ""),
            "first_finding": next((ln for ln in lines if ln.startswith("Invalid")), ""),
            "detail": [ln for ln in lines if "bytes after" in ln or "out of bounds" in ln][:2]}


def main() -> None:
    exe = shutil.which("compute-sanitizer")
    if exe:
        help_text = subprocess.run([exe, "--help"], capture_output=True, text=True).stdout
        print("padding help:", [ln.strip() for ln in help_text.splitlines() if "padding" in ln.lower()], flush=True)
        print(subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()[-200:], flush=True)
    for padding in (None, 1 << 20):
        print(run(padding), flush=True)


if __name__ == "__main__":
    main()
