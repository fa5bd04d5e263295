"""A target for Nsight Compute (GPU): warms one library op up (compiles, autotunes) outside the profiled
range, then runs it once between cudaProfilerStart and cudaProfilerStop, so that
`ncu --profile-from-start off` sees only the kernels of one call.

  ncu --profile-from-start off --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum \
      --csv --page details python3 benchmarks/probes/ncu_target.py OP
OP: ce          cross_entropy forward+backward, logits [8192, 128256] bf16, mean (gradient in the forward)
    attention   attention forward+backward (Triton), B2 S8192 H16 D128 bf16, non-causal
    attention-causal   the same, causal
    lce         linear_cross_entropy forward+backward, M = H = 4096, V = 128256 bf16, mean, cuBLAS GEMMs
    lce-triton  the same with our Triton GEMMs
    lce-cute    the same, the CuTe DSL version
    attention-cute[-causal]   attention forward+backward, the CuTe DSL kernels, B2 S8192 H16 D128 bf16
    attention-fa4      the same shape through FlashAttention-4 (flash_attn.cute, from .carry), non-causal
    softmax-wide-{cute,triton,quack}   softmax forward, bf16 [2048, 65536] then [512, 262144] (two kernels)
For the GEMMs, profile with `--clock-control none` (ncu otherwise locks the clocks at base, and the H200's
tensor-core throughput is bound by its clock under power capping) and add the tensor-pipe and clock metrics.
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


def _attention(causal: bool, backend: str = "triton"):
    import importlib

    import torch

    mod = importlib.import_module(f"kernelagent.kernels.attention.{backend}")
    q, k, v = (torch.randn(2, 8192, 16, 128, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    g = torch.randn_like(q)
    return lambda: torch.autograd.grad(mod.attention(q, k, v, causal=causal), (q, k, v), g)


def _attention_fa4():
    import torch
    from flash_attn.cute import flash_attn_func

    q, k, v = (torch.randn(2, 8192, 16, 128, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    g = torch.randn_like(q)

    def call():
        out = flash_attn_func(q, k, v, causal=False)
        return torch.autograd.grad(out[0] if isinstance(out, tuple) else out, (q, k, v), g)
    return call


def _lce(backend: str):
    import torch

    if backend == "cute":
        from kernelagent.kernels.linear_cross_entropy import cute as lce
        run = lce.linear_cross_entropy
    else:
        from kernelagent.kernels.linear_cross_entropy import cublas, triton  # noqa: F401 - registers "cublas"
        run = lambda h, w, t: triton.linear_cross_entropy(h, w, t, gemm=backend)  # noqa: E731
    h = (torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) * 0.5).requires_grad_()
    w = (torch.randn(128256, 4096, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_()
    t = torch.randint(0, 128256, (4096,), device="cuda")
    return lambda: torch.autograd.grad(run(h, w, t), (h, w))


def _softmax_wide(impl: str):
    import torch

    if impl == "quack":
        from quack.softmax import softmax as fn
    else:
        import importlib
        fn = importlib.import_module(f"kernelagent.kernels.softmax.{impl}").softmax_forward
    xs = [torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for m, n in ((2048, 65536), (512, 262144))]
    return lambda: [fn(x) for x in xs]


def main(op: str) -> None:
    import torch

    call = {"ce": _ce, "attention": lambda: _attention(False), "attention-causal": lambda: _attention(True),
            "lce": lambda: _lce("cublas"), "lce-triton": lambda: _lce("triton"), "lce-cute": lambda: _lce("cute"),
            "attention-cute": lambda: _attention(False, "cute"),
            "attention-cute-causal": lambda: _attention(True, "cute"), "attention-fa4": _attention_fa4,
            **{f"softmax-wide-{i}": (lambda i=i: _softmax_wide(i)) for i in ("cute", "triton", "quack")}}[op]()
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main(sys.argv[1])
