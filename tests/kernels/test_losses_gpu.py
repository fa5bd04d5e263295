"""The fused-loss set on the GPU, both backends, against float64 (issue 19).

Cross-entropy (Triton and CuTe DSL): every option, vocabularies up to 300000 and odd ones, huge
logits, ignored rows, fp32/fp16/bf16, the gradient in new memory and in place, determinism, all rows
ignored, torch.compile with Inductor. Linear cross-entropy (Triton with its own and with cuBLAS GEMMs,
and the CuTe DSL version): against float64 over several chunks, with bias and options, and the issue's
shape for memory; the CuTe DSL GEMM alone in every operand layout. Then
the verifier on each library file (marked slow: about a minute each, CuTe compiling once per vocabulary).
Run on the H200: `source .carry/setup.sh && PYTHONPATH=$PWD python3 -m pytest -q -m gpu
tests/kernels/test_losses_gpu.py` (add `and not slow` to the -m expression to leave the verifier out).
Tolerances: tests/helpers/tolerance.py (a modest multiple of torch's own error in the same dtype).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.helpers.interp_checks import compare, load_file
from tests.helpers.tolerance import failure

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
CE_DIR = ROOT / "kernelagent" / "kernels" / "cross_entropy"
LCE_DIR = ROOT / "kernelagent" / "kernels" / "linear_cross_entropy"
HAS_CUTE = importlib.util.find_spec("cutlass") is not None

# (N, V, dtype, options, class weights, ignored every k-th row, logit scale)
CE_CASES = [
    (8, 128256, torch.bfloat16, {}, False, 7, 1.0),
    (33, 50257, torch.bfloat16, {"reduction": "none", "label_smoothing": 0.1, "z_loss": 1e-4, "softcap": 30.0},
     False, 5, 8.0),
    (64, 32000, torch.float32, {"reduction": "sum"}, False, 3, 1.0),
    (16, 1001, torch.float16, {"label_smoothing": 0.2}, True, 4, 2.0),
    (9, 777, torch.bfloat16, {"reduction": "none"}, True, 2, 1.0),
    (12, 4099, torch.float32, {"z_loss": 1e-3, "softcap": 15.0}, True, 0, 50.0),
    (7, 1000, torch.bfloat16, {}, False, 0, 1000.0),  # exp overflows fp32 a thousand times over
    # wide vocabularies (Gemma's 256000 is of this order), one with every option
    (5, 262144, torch.bfloat16, {"z_loss": 1e-4}, False, 4, 3.0),
    (3, 300000, torch.bfloat16, {"label_smoothing": 0.1, "softcap": 20.0}, True, 2, 1.0),
]


def _lib(folder: Path, backend: str):
    return load_file(folder / f"{backend}.py", f"gpu_losses_{folder.name}_{backend}")


def _lce():
    """The package's linear_cross_entropy module with the cuBLAS GEMMs registered (cublas.py)."""
    importlib.import_module("kernelagent.kernels.linear_cross_entropy.cublas")
    return importlib.import_module("kernelagent.kernels.linear_cross_entropy.triton")


def _ref_ce():
    return load_file(CE_DIR / "reference.py", "gpu_losses_ce_reference").cross_entropy_reference


def _backends() -> list[str]:
    return ["triton", "cute"] if HAS_CUTE else ["triton"]


def _ce_runs() -> list[tuple[str, int, bool]]:
    """(backend, case, inplace): Triton every case both ways; CuTe every case out of place and, in
    place, a mean and a 'none' case (each CuTe case compiles its own kernels: V is a constant there)."""
    runs = [("triton", c, i) for c in range(len(CE_CASES)) for i in (False, True)]
    if HAS_CUTE:
        runs += [("cute", c, False) for c in range(len(CE_CASES))] + [("cute", 0, True), ("cute", 4, True)]
    return runs


def _ce_run(fn, logits, target, weight, options, inplace, cast=None):
    x = logits.detach().clone().to(cast or logits.dtype).requires_grad_(True)
    w = weight.to(cast) if (weight is not None and cast is not None) else weight
    out = fn(x, target, w, options, inplace)
    g = torch.randn(out.shape, generator=torch.Generator(device="cuda").manual_seed(3), device="cuda")
    out.backward(g.to(out.dtype))
    return out.detach(), x.grad


def _ce_inputs(n, v, dtype, weighted, every, scale):
    gen = torch.Generator(device="cuda").manual_seed(n * 7 + v)
    logits = (torch.randn(n, v, device="cuda", generator=gen) * scale).to(dtype)
    target = torch.randint(0, v, (n,), device="cuda", generator=gen)
    if every:
        target[::every] = -100
    weight = 0.5 + torch.rand(v, device="cuda", generator=gen) if weighted else None
    return logits, target, weight


@pytest.mark.parametrize("backend,case,inplace", _ce_runs())
def test_cross_entropy_matches_float64(backend, case, inplace):
    n, v, dtype, options, weighted, every, scale = CE_CASES[case]
    lib, ref = _lib(CE_DIR, backend), _ref_ce()
    logits, target, weight = _ce_inputs(n, v, dtype, weighted, every, scale)
    ours = _ce_run(lambda x, t, w, o, i: lib.cross_entropy(x, t, weight=w, inplace_backward=i, **o), logits, target,
                   weight, options, inplace)
    torch_run = _ce_run(lambda x, t, w, o, i: ref(x, t, w, **o), logits, target, weight, options, False)
    f64 = _ce_run(lambda x, t, w, o, i: ref(x, t, w, **o), logits, target, weight, options, False, torch.float64)
    for what, k in (("loss", 0), ("grad", 1)):
        row = compare(ours[k], torch_run[k], f64[k])
        assert failure(row) is None, f"{backend} {CE_CASES[case]} {what}: {failure(row)}"


@pytest.mark.parametrize("backend", _backends())
def test_cross_entropy_is_deterministic_and_handles_all_ignored(backend):
    lib = _lib(CE_DIR, backend)
    logits, target, _ = _ce_inputs(256, 32000, torch.bfloat16, False, 3, 1.0)
    runs = [_ce_run(lambda x, t, w, o, i: lib.cross_entropy(x, t), logits, target, None, {}, False) for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    x = logits.detach().clone().requires_grad_(True)
    loss = lib.cross_entropy(x, torch.full_like(target, -100))
    loss.backward()
    assert torch.isnan(loss) and bool((x.grad == 0).all())  # as F.cross_entropy


@pytest.mark.parametrize("backend", _backends())
def test_cross_entropy_fused_rows_at_scale(backend):
    # the fused forward over many long rows (the gradient's second sweep re-reading them from L2 while
    # other rows stream past): the gradient right, in place too, and the same bits twice
    lib = _lib(CE_DIR, backend)
    logits, target, _ = _ce_inputs(2048, 128256, torch.bfloat16, False, 9, 4.0)
    ref = _ce_run(lambda x, t, w, o, i: F.cross_entropy(x.float(), t, reduction="sum"), logits, target, None, {},
                  False)
    runs = [_ce_run(lambda x, t, w, o, i: lib.cross_entropy(x, t, reduction="sum", inplace_backward=i), logits,
                    target, None, {}, inplace) for inplace in (False, True, False)]
    for out, grad in runs:
        assert abs(float(out) - float(ref[0])) < 1e-2 * abs(float(ref[0]))
        assert float((grad.float() - ref[1]).norm() / ref[1].norm()) < 1e-2
    assert torch.equal(runs[0][0], runs[2][0]) and torch.equal(runs[0][1], runs[2][1])


def test_cross_entropy_under_inductor():
    lib = _lib(CE_DIR, "triton")
    logits, target, _ = _ce_inputs(64, 32000, torch.bfloat16, False, 3, 1.0)
    # inplace_backward is ignored under compile (the functional op runs): one compile covers both
    fn = torch.compile(lambda a, b: lib.cross_entropy(a * 2.0, b, label_smoothing=0.1, inplace_backward=True))
    x, y = logits.detach().clone().requires_grad_(True), logits.detach().clone().requires_grad_(True)
    got = fn(x, target)
    want = F.cross_entropy(y.float() * 2.0, target, label_smoothing=0.1)
    got.backward()
    want.backward()
    assert torch.allclose(got.float(), want, rtol=1e-2, atol=1e-2)
    assert float((x.grad.float() - y.grad).norm() / y.grad.norm()) < 1e-2


# ------------------------------------------------------------------------------ linear CE

# (rows, H, V, dtype, bias, options, chunk rows)
LCE_CASES = [
    (1000, 512, 32003, torch.bfloat16, True, {}, 384),
    (333, 256, 5001, torch.bfloat16, False, {"reduction": "sum", "label_smoothing": 0.1, "z_loss": 1e-4}, 128),
    (200, 128, 3001, torch.bfloat16, True, {"reduction": "none", "softcap": 20.0}, 64),
    (150, 98, 2003, torch.float32, True, {"label_smoothing": 0.05}, 64),  # 98 * 4 bytes: not 16-byte aligned, masked
    (150, 98, 2003, torch.bfloat16, True, {"label_smoothing": 0.05}, 64),  # 196-byte rows: copied to aligned ones
    (90, 64, 1001, torch.float16, False, {"reduction": "mean", "z_loss": 1e-3}, 32),
]
GEMMS = ["triton", "cublas", "cute"]


def _lce_cute():
    return importlib.import_module("kernelagent.kernels.linear_cross_entropy.cute")


def _lce_run(lib, base, target, options, gemm, chunk, cast):
    xs = [t.detach().clone().to(cast).requires_grad_(True) for t in base]
    bias = xs[2] if len(xs) > 2 else None
    if lib is None:
        out = _ref_ce()(F.linear(xs[0], xs[1], bias), target, **options)
    else:
        padded = -(-xs[1].shape[0] // lib.ROW_PAD) * lib.ROW_PAD
        extra = {} if gemm == "cute" else {"gemm": gemm}
        out = lib.linear_cross_entropy(xs[0], xs[1], target, bias=bias,
                                       chunk_bytes=chunk * padded * xs[0].element_size(), **extra, **options)
    g = torch.randn(out.shape, generator=torch.Generator(device="cuda").manual_seed(5), device="cuda")
    out.backward(g.to(out.dtype))
    return [out.detach()] + [t.grad for t in xs]


@pytest.mark.parametrize("gemm", GEMMS)
@pytest.mark.parametrize("case", range(len(LCE_CASES)))
def test_linear_cross_entropy_matches_float64(gemm, case):
    n, h, v, dtype, has_bias, options, chunk = LCE_CASES[case]
    if gemm == "cute" and (not HAS_CUTE or dtype == torch.float32):
        pytest.skip("the CuTe DSL version takes fp16/bf16 (and needs nvidia-cutlass-dsl)")
    lib = _lce_cute() if gemm == "cute" else _lce()
    gen = torch.Generator(device="cuda").manual_seed(n + v)
    base = [torch.randn(n, h, device="cuda", generator=gen).to(dtype),
            (torch.randn(v, h, device="cuda", generator=gen) / h**0.5).to(dtype)]
    if has_bias:
        base.append((0.1 * torch.randn(v, device="cuda", generator=gen)).to(dtype))
    target = torch.randint(0, v, (n,), device="cuda", generator=gen)
    target[::6] = -100
    ours = _lce_run(lib, base, target, options, gemm, chunk, dtype)
    torch_run = _lce_run(None, base, target, options, gemm, chunk, dtype)
    f64 = _lce_run(None, base, target, options, gemm, chunk, torch.float64)
    for what, a, b, c in zip(("loss", "dhidden", "dweight", "dbias"), ours, torch_run, f64, strict=False):
        row = compare(a, b, c)
        assert failure(row) is None, f"{gemm} {LCE_CASES[case]} {what}: {failure(row)}"


@pytest.mark.parametrize("gemm", GEMMS)
def test_linear_cross_entropy_memory_at_the_issue_shape(gemm):
    if gemm == "cute" and not HAS_CUTE:
        pytest.skip("needs nvidia-cutlass-dsl")
    lib = _lce_cute() if gemm == "cute" else _lce()
    m, h, v = 4096, 4096, 128256
    hidden = torch.randn(m, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weight = (torch.randn(v, h, device="cuda") / h**0.5).to(torch.bfloat16).requires_grad_(True)
    target = torch.randint(0, v, (m,), device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss = lib.linear_cross_entropy(hidden, weight, target, **({} if gemm == "cute" else {"gemm": gemm}))
    loss.backward()
    torch.cuda.synchronize()
    grads = (hidden.grad.numel() + weight.grad.numel()) * 2
    extra_gib = (torch.cuda.max_memory_allocated() - before - grads) / 2**30
    assert extra_gib <= 1.5, f"{extra_gib:.2f} GiB beyond inputs and gradients"
    with torch.no_grad():
        ref = F.cross_entropy(F.linear(hidden, weight).float(), target)  # the full logits, once, for the value
    assert abs(float(loss) - float(ref)) <= 1e-2 * abs(float(ref))


# (M, N, K, A stored transposed, B stored transposed, bias, accumulate): edges of every tile size,
# each operand K-major or not (the three products of the chunk loop), K past one and several k tiles
GEMM_CASES = [(300, 1001, 64, False, True, True, False), (130, 70, 1001, False, False, False, False),
              (1001, 72, 300, True, False, False, True), (257, 513, 40, True, True, True, True),
              (2048, 4096, 512, False, True, False, False)]


@pytest.mark.parametrize("case", GEMM_CASES)
def test_cute_gemm_matches_fp32_in_every_layout(case):
    """kernelagent's CuTe DSL GEMM (linear_cross_entropy/cute.py) against the same product in fp32."""
    if not HAS_CUTE:
        pytest.skip("needs nvidia-cutlass-dsl")
    lib = _lce_cute()
    m, n, k, a_t, b_t, has_bias, accumulate = case
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)

    def stored(rows, cols, transposed):  # a logical [rows, cols] operand, its storage padded to 16 bytes
        shape = (cols, rows) if transposed else (rows, cols)
        buf = torch.randn(shape[0], -(-shape[1] // 8) * 8, device="cuda", generator=gen).to(torch.bfloat16)
        x = buf[:, : shape[1]]
        return x.t() if transposed else x
    a, b = stored(m, k, a_t), stored(k, n, b_t)
    bias = torch.randn(n, device="cuda", generator=gen).to(torch.bfloat16) if has_bias else None
    c = torch.randn(m, n, device="cuda", generator=gen).to(torch.bfloat16)
    expected = a.float() @ b.float() + (bias.float() if has_bias else 0.0) + (c.float() if accumulate else 0.0)
    lib.matmul(a, b, c, bias, accumulate)
    err = (c.float() - expected).abs().max().item()
    assert err <= 2e-2 * expected.abs().max().item(), (case, err)


# ------------------------------------------------------------------------------ the verifier


@pytest.mark.slow
@pytest.mark.parametrize("family,backend", [("cross_entropy", "triton"), ("cross_entropy", "cute"),
                                            ("linear_cross_entropy", "triton"), ("linear_cross_entropy", "cute")])
def test_library_files_pass_the_verifier(family, backend):
    if backend == "cute" and not HAS_CUTE:
        pytest.skip("needs nvidia-cutlass-dsl (source .carry/setup.sh)")
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.options import VerifyOptions
    from kernelagent.verifier.sandbox.pool import WorkerPool
    folder = ROOT / "kernelagent" / "kernels" / family
    options = VerifyOptions(device="cuda", timeout=300, seeds=1, timing=False)
    with Verifier(options, pool=WorkerPool(size=1)) as v:
        report = v.verify(folder / "reference.py", folder / f"{backend}.py")
    assert report.accepted, f"{report.category}: {report.message}\n{report.feedback[:3000]}"
