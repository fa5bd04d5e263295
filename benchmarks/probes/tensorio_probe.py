"""How fast can a 128 MiB output cross from the worker's GPU to a file in /dev/shm and back to the
parent's GPU? The way tensorio does it now (device -> shared mmap of the file; private mmap -> device)
against a pinned staging buffer (device -> pinned -> file; file -> pinned -> device).
Run: `python benchmarks/tensorio_probe.py` on the GPU; prints milliseconds per 128 MiB, median of 5.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from kernelagent.verifier import tensorio

MIB = 1 << 20


def ms(fn, reps: int = 5) -> float:
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e3)
    return round(statistics.median(out), 1)


def main() -> None:
    d = Path(tempfile.mkdtemp(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None))
    x = torch.randn(4096, 8192, device="cuda")
    flat = x.reshape(-1)
    stage = torch.empty(64 * MIB, dtype=torch.uint8, pin_memory=True)
    stage_np = stage.numpy()
    raw = d / "x.raw"

    def write_mmap():
        tensorio.save(d / "a.pt", {"outputs": [x]})

    def read_mmap():
        tensorio.load(d / "a.pt", device="cuda")

    def write_pinned():
        b = flat.view(torch.uint8)
        with open(raw, "wb") as f:
            for s in range(0, b.numel(), stage.numel()):
                n = min(stage.numel(), b.numel() - s)
                stage[:n].copy_(b[s:s + n])
                f.write(stage_np[:n].data)

    def read_pinned():
        out = torch.empty(flat.numel() * 4, dtype=torch.uint8, device="cuda")
        with open(raw, "rb", buffering=0) as f:
            for s in range(0, out.numel(), stage.numel()):
                n = min(stage.numel(), out.numel() - s)
                f.readinto(stage_np[:n].data)
                out[s:s + n].copy_(stage[:n])

    def write_pinned_into_mmap():
        b = flat.view(torch.uint8)
        raw.unlink(missing_ok=True)
        dst = torch.from_file(str(raw), shared=True, size=b.numel(), dtype=torch.uint8)
        for s in range(0, b.numel(), stage.numel()):
            n = min(stage.numel(), b.numel() - s)
            stage[:n].copy_(b[s:s + n])
            dst[s:s + n].copy_(stage[:n])

    print({"torch_threads": torch.get_num_threads(),
           "write mmap (now)": ms(write_mmap), "read mmap (now)": ms(read_mmap),
           "write pinned+file": ms(write_pinned), "read file+pinned": ms(read_pinned),
           "write pinned+mmap": ms(write_pinned_into_mmap), "d2h pageable": ms(lambda: flat.cpu()),
           "d2h pinned 64MiB x2": ms(lambda: [stage.copy_(flat.view(torch.uint8)[i * 64 * MIB:(i + 1) * 64 * MIB])
                                              for i in range(2)])}, flush=True)


if __name__ == "__main__":
    main()
