"""Trusted work a pooled worker does while it waits for a candidate, so the candidate's clock does not
pay for it: Triton's driver helpers (built with the C compiler on first use, into the worker's own
cache), the compiler pipeline (MLIR, LLVM, ptxas) and the launcher of the commonest signature
(pointer, pointer, int32), plus the candidate runner's own modules.

Everything lands in the worker's private cache directory; nothing is shared between workers, so a
candidate cannot plant a compiled object that another one would load.
"""

from __future__ import annotations

import time

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def warm(device: str) -> dict[str, object]:
    """Compile and launch one tiny kernel on `device`; returns what it did and how long it took."""
    t = time.perf_counter()
    import kernelagent.verifier.worker.candidate  # noqa: F401 - the runner and the checks it imports

    x = torch.arange(100, dtype=torch.float32, device=device)
    y = torch.empty_like(x)
    _copy[(1,)](x, y, x.numel(), BLOCK=128)
    if device == "cuda":
        torch.cuda.synchronize()
    ok = bool(torch.equal(x, y))
    return {"ok": ok, "seconds": round(time.perf_counter() - t, 3)}
