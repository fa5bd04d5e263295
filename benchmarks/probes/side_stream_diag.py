"""What the timing method sees of work left on an unjoined side stream (diagnostic, GPU only).

Loads tests/corpus/wrong/dynamic/side_stream.py directly (no sandbox) and prints: whether work is still
pending when forward returns, and measure()'s median, host ratio and host time per call, next to an
honest launch of the same kernel. Run: `python benchmarks/side_stream_diag.py`.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import torch

from kernelagent.verifier.measure.timing import measure

ROOT = Path(__file__).resolve().parents[2]


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    mod = load(ROOT / "tests/corpus/wrong/dynamic/side_stream.py")
    model = mod.ModelNew().cuda()
    x = torch.randn(4096, 4096, device="cuda")
    model(x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    y = model(x)
    host_us = (time.perf_counter() - t) * 1e6
    pending = {"current_idle": torch.cuda.current_stream().query(), "side_idle": model.side.query(),
               "forward_host_us": host_us}
    torch.cuda.synchronize()
    pending["correct"] = bool(torch.equal(y, torch.relu(x)))
    cheat = measure([lambda: model(x)]).to_dict(keep_samples=False)
    out = torch.empty_like(x)

    def honest():
        n = x.numel()
        mod._relu[((n + 1023) // 1024,)](x, out, n, BLOCK=1024, PASSES=8)
    fair = measure([honest]).to_dict(keep_samples=False)
    print(json.dumps({"pending": pending, "cheat": cheat, "honest": fair}, indent=1, default=str))


if __name__ == "__main__":
    main()
