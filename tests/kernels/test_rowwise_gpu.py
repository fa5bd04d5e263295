"""The row-wise library kernels on a CUDA GPU, both backends (Triton, CuTe DSL): every op x dtype x
row width from 1 to 262144 (odd ones too), forward and backward, against torch in float64 with the
tolerance rule of tests/helpers/tolerance.py; the variants (no weight / bias, strided rows, large
offsets); bitwise-deterministic weight gradients; the ops under torch.compile with Inductor.

Run on the H200: `source .carry/setup.sh && python3 -m pytest -q -m gpu tests/kernels/test_rowwise_gpu.py`
"""

from __future__ import annotations

import importlib

import pytest
import torch

from tests.kernels.rowwise_cases import FAMILY_OF, GPU_VARIANTS, OPS, check, failures, gpu_shape, ours

pytestmark = pytest.mark.gpu
BACKENDS = ["triton", pytest.param("cute", marks=pytest.mark.cute)]
WIDTHS = (1, 3, 127, 1023, 8192, 20000, 32769, 65536, 262144)
FP16_WIDTHS = (1023, 8192, 65536)


def _module(op: str, backend: str):
    return importlib.import_module(f"kernelagent.kernels.{FAMILY_OF[op]}.{backend}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
def test_every_width_matches_float64(backend, op, dtype):
    fn = ours(_module(op, backend), op)
    rows = []
    for width in (FP16_WIDTHS if dtype == torch.float16 else WIDTHS):
        rows += check(op, fn, gpu_shape(width), dtype, device="cuda")
    assert not failures(rows), "\n".join(failures(rows))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("op", "variant"), GPU_VARIANTS)
def test_variants_match_float64(backend, op, variant):
    fn = ours(_module(op, backend), op)
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for width in (1000, 8193, 40000):
            rows += check(op, fn, gpu_shape(width), dtype, variant, device="cuda")
    assert not failures(rows), "\n".join(failures(rows))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("width", [4096, 40000])
def test_weight_gradients_are_deterministic(backend, width):
    x = torch.randn(1000, width, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(width, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(width, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)
    rms, ln = _module("rms_norm", backend), _module("layer_norm", backend)
    runs = []
    for _ in range(2):
        w.grad = b.grad = None
        rms.rms_norm(x, w, 1e-6).backward(dy)
        ln.layer_norm(x, w, b, 1e-5).backward(dy)
        runs.append((w.grad.clone(), b.grad.clone()))
    assert all(torch.equal(a, c) for a, c in zip(runs[0], runs[1], strict=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ops_under_inductor(backend):
    from kernelagent import ops

    ops.set_backend(backend)
    try:
        norm = ops.RMSNorm(4096, eps=1e-6).cuda().to(torch.bfloat16)

        def block(x, r):
            h, s = ops.rms_norm_add(x, r, norm.weight, 1e-6)
            return ops.softmax(h.float(), -1).to(x.dtype) + ops.layer_norm(s), s

        x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        r = torch.randn_like(x)
        out, s = torch.compile(block, fullgraph=True)(x, r)
        (out.float().sum() + s.float().sum()).backward()
        ref_h = torch.nn.functional.rms_norm((x + r).float(), (4096,), norm.weight.float(), 1e-6)
        ref = torch.softmax(ref_h, -1) + torch.nn.functional.layer_norm((x + r).float(), (4096,))
        assert (out.float() - ref).abs().max() < 5e-2 and torch.isfinite(x.grad).all()
    finally:
        ops.set_backend("triton")
