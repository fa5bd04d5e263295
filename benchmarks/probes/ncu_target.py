"""A target for Nsight Compute (GPU): warms one library op up (compiles, autotunes) outside the profiled
range, then runs it once between cudaProfilerStart and cudaProfilerStop, so that
`ncu --profile-from-start off` sees only the kernels of one call.

  ncu --profile-from-start off --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum \
      --csv --page details python3 benchmarks/probes/ncu_target.py OP
OP: ce          cross_entropy forward+backward, logits [8192, 128256] bf16, mean (gradient in the forward)
    attention   attention forward+backward (Triton), B2 S8192 H16 D128 bf16, non-causal
    attention-causal   the same, causal
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _ce():
    import torch

    from kernelagent.kernels.cross_entropy import triton as ce
    x = torch.randn(8192, 128256, device="cuda", dtype=torch.bfloat16).requires_grad_()
    t = torch.randint(0, 128256, (8192,), device="cuda")
    return lambda: torch.autograd.grad(ce.cross_entropy(x, t), (x,))  # no x.grad to accumulate into


def _attention(causal: bool):
    import torch

    from kernelagent.kernels.attention import triton as tri
    q, k, v = (torch.randn(2, 8192, 16, 128, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    g = torch.randn_like(q)
    return lambda: torch.autograd.grad(tri.attention(q, k, v, causal=causal), (q, k, v), g)


def main(op: str) -> None:
    import torch

    call = {"ce": _ce, "attention": lambda: _attention(False), "attention-causal": lambda: _attention(True)}[op]()
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main(sys.argv[1])
