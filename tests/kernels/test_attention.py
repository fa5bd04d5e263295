"""The attention library entry (kernelagent/kernels/attention) without a GPU.

* The ops' CPU implementation (plain torch) through the public API: forward, gradients, the
  log-sum-exp and its gradient, varlen, sdpa, opcheck, torch.compile, meta tensors, input errors.
* The Triton kernels under the CPU interpreter (one child process, ~1 min): ModelNew against the
  float64 reference on reference.py's small test sets, varlen, the plain-pointer path (a head dim
  TMA cannot take), the warp-specialised single-loop forward, dlse (with dO, and alone); errors
  judged against the reference's own error in the problem dtype (its noise floor).
* The GPU configurations compiled for sm_90a (no GPU needed): TMA, wgmma, the TMA reduce-add of dQ,
  warp specialisation (and the rows its second math partition gets, in the TTGIR), and no register
  spills in the configs the autotuner starts from; and the interpreter's variant (UPCAST), which the
  verifier compiles for sm_90 on CPU.
Numerics on the H200: tests/kernels/test_attention_gpu.py.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.helpers.interp import run_in_interpreter
from tests.helpers.interp_checks import load_file

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "kernelagent" / "kernels" / "attention"


@pytest.fixture(scope="module")
def tri():
    return load_file(FOLDER / "triton.py", "lib_attention_triton")


@pytest.fixture(scope="module")
def ref():
    return load_file(FOLDER / "reference.py", "lib_attention_reference")


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def qkv(b, sq, sk, hq, hkv, d, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=gen).to(dtype) for shape in ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, d))]


def grads(fn, inputs, g):
    xs = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*xs)
    out.backward(g)
    return out.detach(), [x.grad for x in xs]


# -------------------------------------------------------------------------- CPU implementation

CPU_CASES = [  # (b, sq, sk, hq, hkv, d, options)
    (2, 9, 9, 2, 2, 16, {}),
    (1, 7, 13, 4, 2, 8, {"causal": True}),
    (1, 13, 7, 4, 1, 8, {"causal": True}),  # Sq > Sk: the first queries see no key
    (2, 11, 11, 2, 1, 8, {"window": (3, 2)}),
    (1, 10, 12, 2, 2, 8, {"softcap": 2.0, "scale": 0.7}),
    (1, 12, 12, 2, 2, 8, {"causal": True, "window": (4, -1)}),
]


@pytest.mark.parametrize("case", CPU_CASES, ids=lambda c: f"{c[:6]}-{sorted(c[6])}")
def test_cpu_path_matches_reference_forward_and_gradients(tri, ref, case):
    *shape, opts = case
    inputs = qkv(*shape)
    g = torch.randn(shape[0], shape[1], shape[3], shape[5], generator=torch.Generator().manual_seed(3))
    out, gs = grads(lambda q, k, v: tri.attention(q, k, v, **opts), inputs, g)
    window = opts.get("window")
    r_out, r_gs = grads(lambda q, k, v: ref.attention_reference(q, k, v, opts.get("causal", False), opts.get("scale"),
                                                                opts.get("softcap"), window),
                        [t.double() for t in inputs], g.double())
    assert rel(out, r_out) < 1e-5
    for a, b in zip(gs, r_gs, strict=True):
        assert rel(a, b) < 1e-5
    if shape[1] > shape[2] and opts.get("causal"):  # queries that see no key: zeros, and no NaN anywhere
        assert out[:, : shape[1] - shape[2]].abs().max() == 0
        assert all(torch.isfinite(x).all() for x in gs)


def test_reference_sdpa_layout_is_sdpa(tri, ref):
    """The reference with layout "bhsd" (q, k, v and the output in SDPA's (B, H, S, D); what ModelNew takes too,
    checked against float64 with gradients in the interpreter rows, set 8) is F.scaled_dot_product_attention,
    GQA and causal included; ModelNew refuses an unknown layout before any kernel runs."""
    q, k, v = (t.transpose(1, 2).contiguous().double() for t in qkv(1, 20, 20, 4, 2, 16))
    want = ref.Model()(q, k, v, True, layout="bhsd")
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert want.shape == q.shape and rel(want, sdpa) < 1e-12
    assert ref.get_test_inputs()[8][-1] == "bhsd"
    with pytest.raises(tri.AttentionError, match="layout"):
        tri.ModelNew()(q, k, v, layout="bsdh")


def test_lse_is_logsumexp_and_differentiable(tri):
    q, k, v = qkv(1, 6, 8, 2, 2, 8, dtype=torch.float64)
    xs = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = tri.attention(*xs, causal=True, return_lse=True)
    s = torch.einsum("bqhd,bkhd->bhqk", xs[0], xs[1]) * 8 ** -0.5
    keep = torch.arange(8)[None, :] <= torch.arange(6)[:, None] + 2
    want = torch.logsumexp(s.masked_fill(~keep, float("-inf")), -1)
    assert lse.shape == (1, 2, 6) and lse.dtype == torch.float32
    assert torch.allclose(lse.double(), want, atol=1e-5)
    (lse.sum() + out.sum()).backward()
    ys = [t.clone().requires_grad_() for t in (q, k, v)]
    s2 = torch.einsum("bqhd,bkhd->bhqk", ys[0], ys[1]) * 8 ** -0.5
    p = torch.softmax(s2.masked_fill(~keep, float("-inf")), -1)
    (torch.logsumexp(s2.masked_fill(~keep, float("-inf")), -1).sum()
     + torch.einsum("bhqk,bkhd->bqhd", p, ys[2]).sum()).backward()
    for a, b in zip(xs, ys, strict=True):
        assert rel(a.grad, b.grad) < 1e-5


def test_lse_alone_carries_a_gradient(tri):
    """Only lse in the loss (the op's dout is None): dq, dk as logsumexp's; dv zero where logsumexp
    has none (the GPU test read v.grad of the float64 reference: None)."""
    q, k, v = qkv(1, 7, 9, 4, 2, 8, dtype=torch.float64, seed=4)
    xs = [t.clone().requires_grad_() for t in (q, k, v)]
    _, lse = tri.attention(*xs, causal=True, return_lse=True)
    gl = torch.randn(lse.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    (lse * gl).sum().backward()
    ys = [t.clone().requires_grad_() for t in (q, k)]
    s = torch.einsum("bqhd,bkhd->bhqk", ys[0], ys[1].repeat_interleave(2, 2)) * 8 ** -0.5
    keep = torch.arange(9)[None, :] <= torch.arange(7)[:, None] + 2
    (torch.logsumexp(s.masked_fill(~keep, float("-inf")), -1) * gl).sum().backward()
    assert rel(xs[0].grad, ys[0].grad) < 1e-5 and rel(xs[1].grad, ys[1].grad) < 1e-5
    assert xs[2].grad is not None and not xs[2].grad.any()


def test_varlen_matches_each_sequence_alone(tri):
    lens_q, lens_k = [3, 8, 1], [5, 8, 4]
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(sum(lens_q), 4, 8, generator=gen)
    k = torch.randn(sum(lens_k), 2, 8, generator=gen)
    v = torch.randn(sum(lens_k), 2, 8, generator=gen)
    cu_q = torch.tensor([0, 3, 11, 12], dtype=torch.int32)
    cu_k = torch.tensor([0, 5, 13, 17], dtype=torch.int32)
    xs = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = tri.attention_varlen(*xs, cu_q, cu_k, 8, 8, causal=True, return_lse=True)
    out.square().sum().backward()
    assert out.shape == q.shape and lse.shape == (4, 12)
    for b in range(3):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        ys = [t[None].clone().requires_grad_() for t in (q[qs], k[ks], v[ks])]
        o1, l1 = tri.attention(*ys, causal=True, return_lse=True)
        o1.square().sum().backward()
        assert rel(out[qs], o1[0]) < 1e-6 and rel(lse[:, qs], l1[0]) < 1e-6
        for x, y, at in zip(xs, ys, (qs, ks, ks), strict=True):
            assert rel(x.grad[at], y.grad[0]) < 1e-5


def test_sdpa_drop_in_follows_torch_conventions(tri):
    gen = torch.Generator().manual_seed(2)
    for sq, sk, causal, gqa in ((7, 7, True, False), (5, 9, True, False), (9, 5, True, False), (6, 6, False, True)):
        q = torch.randn(2, 4, sq, 8, generator=gen)
        k = torch.randn(2, 2 if gqa else 4, sk, 8, generator=gen)
        v = torch.randn(2, 2 if gqa else 4, sk, 8, generator=gen)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa, scale=0.3)
        got = tri.sdpa(q, k, v, is_causal=causal, enable_gqa=gqa, scale=0.3)
        rows = ~torch.isnan(want)  # torch gives NaN for a row that sees nothing; we give zeros
        assert got.shape == want.shape and torch.allclose(got[rows], want[rows], atol=1e-5)


def test_sdpa_refuses_what_does_not_fit_and_can_fall_back(tri):
    q = torch.randn(1, 2, 5, 8)
    mask = torch.ones(5, 5, dtype=torch.bool)
    with pytest.raises(tri.SDPAUnsupported, match="attn_mask"):
        tri.sdpa(q, q, q, attn_mask=mask)
    with pytest.raises(tri.SDPAUnsupported, match="dropout"):
        tri.sdpa(q, q, q, dropout_p=0.1)
    with pytest.raises(tri.SDPAUnsupported, match="enable_gqa"):
        tri.sdpa(q, q[:, :1], q[:, :1])
    got = tri.sdpa(q, q, q, attn_mask=mask.tril(), fallback=True)
    assert torch.allclose(got, F.scaled_dot_product_attention(q, q, q, attn_mask=mask.tril()))


def test_custom_ops_pass_opcheck(tri):
    q, k, v = qkv(1, 5, 6, 2, 1, 8)
    args = (q, k, v, None, None, 5, 6, 0.4, None, None, 0)
    res = torch.library.opcheck(torch.ops.kernelagent.attention_fwd, args)
    assert set(res.values()) == {"SUCCESS"}, res
    out, lse, stats = torch.ops.kernelagent.attention_fwd(*args)
    assert stats.shape == (2, *lse.shape)
    bargs = (torch.randn_like(out), q, k, v, out, lse, stats, torch.randn_like(lse), None, None, 5, 6, 0.4, 2.0, 1,
             None)
    res = torch.library.opcheck(torch.ops.kernelagent.attention_bwd, bargs, test_utils=("test_schema",
                                                                                        "test_faketensor"))
    assert set(res.values()) == {"SUCCESS"}, res


def test_torch_compile_fullgraph_forward_and_backward(tri):
    q, k, v = qkv(2, 6, 6, 4, 2, 8)

    def block(q, k, v):
        return tri.attention(q, k, v, causal=True).square().sum()

    xs = [t.clone().requires_grad_() for t in (q, k, v)]
    torch.compile(block, fullgraph=True, backend="aot_eager")(*xs).backward()
    ys = [t.clone().requires_grad_() for t in (q, k, v)]
    block(*ys).backward()
    for a, b in zip(xs, ys, strict=True):
        assert torch.allclose(a.grad, b.grad, atol=1e-6)


def test_meta_tensors_give_shapes(tri):
    q = torch.empty(2, 7, 4, 64, device="meta", dtype=torch.bfloat16)
    k = torch.empty(2, 9, 2, 64, device="meta", dtype=torch.bfloat16)
    out, lse = tri.attention(q, k, k, causal=True, return_lse=True)
    assert out.shape == q.shape and lse.shape == (2, 4, 7) and lse.dtype == torch.float32


def test_bad_inputs_raise_attention_error(tri):
    """By class name: the op's checks run in whichever copy of triton.py registered torch.ops.kernelagent first
    (the package's, when another test imported it; this test loads the file again)."""
    q, k, v = qkv(1, 4, 4, 3, 2, 8)
    for args, match in (((q, k, v), "multiple"), ((q[0], k[0], v[0]), "must be"),
                        ((q[:, :, :2], k.half(), v), "share")):
        with pytest.raises(ValueError, match=match) as caught:
            tri.attention(*args)
        assert caught.type.__name__ == "AttentionError"


# ------------------------------------------------------------------ Triton under the interpreter


def interp_cases() -> list[dict]:
    """Runs in the interpreter child: error rows of the kernels against float64, with the floor."""
    import tests.kernels.test_attention as me

    tri = load_file(FOLDER / "triton.py", "lib_attention_triton")
    ref = load_file(FOLDER / "reference.py", "lib_attention_reference")
    rows = []
    for index, inputs in enumerate(ref.get_test_inputs()[:-1]):  # all but the large set for the GPU
        rows += me._model_rows(tri, ref, index, inputs)
    rows += me._varlen_rows(tri)
    rows += me._path_rows(tri)
    rows += me._lse_only_rows(tri)
    rows += me._wide_rows(tri, ref)
    rows += me._offset_key_rows(tri)
    return rows


def _judge(name: str, got, low, truth) -> dict:
    return {"case": name, "err": rel(got, truth), "floor": rel(low, truth)}


def _judge_lse(name: str, got, truth) -> dict:
    """lse against float64 where finite; +inf (a query that sees no key) must sit at the same places."""
    fin = torch.isfinite(truth)
    same = bool(torch.equal(torch.isinf(got), ~fin)) and bool((got[~fin] > 0).all())
    return {"case": name, "err": rel(got[fin], truth[fin]) if same else float("inf"), "floor": 0.0}


def _model_rows(tri, ref, index, inputs) -> list[dict]:
    q, k, v, *opts = inputs
    g = torch.randn(q.shape, generator=torch.Generator().manual_seed(index)).to(q.dtype)
    out, gs = _fwd_bwd(tri.ModelNew(), q, k, v, opts, g)
    low, low_gs = _fwd_bwd(ref.Model(), q, k, v, opts, g)
    t64, t_gs = _fwd_bwd(ref.Model(), q.double(), k.double(), v.double(), opts, g.double())
    rows = [_judge(f"set{index} out", out, low, t64)]
    rows += [_judge(f"set{index} d{n}", a, b, c) for n, a, b, c in zip("qkv", gs, low_gs, t_gs, strict=True)]
    return rows


def _fwd_bwd(model, q, k, v, opts, g):
    xs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = model(*xs, *opts)
    out.backward(g)
    return out.detach(), [x.grad for x in xs]


def _cpu_truth(tri, q, k, v, g, cu, options, gl=None):
    """(out, lse, dq, dk, dv) by the CPU math in float64 (the truth) and in fp32 on the same inputs
    (rounded to the inputs' dtype by the caller: the floor a low-precision result cannot beat)."""
    scale, softcap, window = options
    res = []
    for dtype in (torch.float64, torch.float32):
        qq, kk, vv, gg = (t.to(dtype) for t in (q, k, v, g))
        out, lse, _ = tri.attention_cpu(qq, kk, vv, cu[0], cu[1], scale, softcap, window)
        res.append((out, lse, *tri.attention_cpu_backward(gg, qq, kk, vv, out, lse, gl, cu[0], cu[1], scale,
                                                          softcap, window)))
    return res


def _varlen_rows(tri) -> list[dict]:
    cu_q = torch.tensor([0, 5, 22, 55], dtype=torch.int32)
    cu_k = torch.tensor([0, 9, 26, 46], dtype=torch.int32)
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(n, h, 64, generator=gen).bfloat16() for n, h in ((55, 4), (46, 2), (46, 2)))
    xs = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = tri.attention_varlen(*xs, cu_q, cu_k, 33, 20, causal=True, return_lse=True)
    g = torch.randn(out.shape, generator=gen).bfloat16()
    out.backward(g)
    (t_out, t_lse, *t_gs), (f_out, _, *f_gs) = _cpu_truth(tri, q, k, v, g, (cu_q, cu_k), (0.125, None, (None, 0)))
    rows = [_judge("varlen out", out, f_out.to(q.dtype), t_out), _judge_lse("varlen lse", lse, t_lse)]
    rows += [_judge(f"varlen d{n}", x.grad, f.to(q.dtype), t) for n, x, f, t in zip("qkv", xs, f_gs, t_gs, strict=True)]
    return rows


def _path_rows(tri) -> list[dict]:
    """The plain-pointer path (head dim 36: rows of 72 bytes, no TMA), the warp-specialised single loop with
    a window, softcap and a gradient through the log-sum-exp, then whole key blocks (EVEN_K: 128 keys, no
    key-length mask) with fewer queries than keys, causal in the single loop and a window in the three, and more
    queries than keys (the first see none), causal in the single loop. The "ws" cases take the forward's
    warp-specialised loop (the interpreter does not specialise warps but runs that code)."""
    rows = []
    gen = torch.Generator().manual_seed(6)
    for name, shape, kw, ws in (("pointer", (23, 30, 2, 1, 36), {"causal": True}, False),
                                ("ws", (40, 40, 2, 2, 64), {"causal": True, "window": (9, -1), "softcap": 5.0}, True),
                                ("even ws", (100, 128, 2, 1, 64), {"causal": True}, True),
                                ("even ws, queries that see no key", (150, 128, 2, 1, 64), {"causal": True}, True),
                                ("even", (100, 128, 2, 1, 64), {"window": (20, 5)}, False)):
        sq, sk, hq, hkv, d = shape
        q = torch.randn(1, sq, hq, d, generator=gen).half()
        k, v = (torch.randn(1, sk, hkv, d, generator=gen).half() for _ in range(2))
        tri.INTERP_FWD["WS"] = ws
        xs = [t.clone().requires_grad_() for t in (q, k, v)]
        out, lse = tri.attention(*xs, return_lse=True, **kw)
        g, gl = torch.randn(out.shape, generator=gen).half(), torch.randn(lse.shape, generator=gen)
        torch.autograd.backward([out, lse], [g, gl])
        tri.INTERP_FWD["WS"] = False
        window = tri._window(kw.get("causal", False), kw.get("window"))
        options = (d ** -0.5, kw.get("softcap"), window)
        (t_out, t_lse, *t_gs), (f_out, _, *f_gs) = _cpu_truth(tri, q, k, v, g, (None, None), options, gl=gl)
        rows += [_judge(f"{name} out", out, f_out.half(), t_out), _judge_lse(f"{name} lse", lse, t_lse)]
        rows += [_judge(f"{name} d{n}", x.grad, f.half(), t) for n, x, f, t in zip("qkv", xs, f_gs, t_gs,
                                                                                     strict=True)]
        rows.append({"case": f"{name} tma", "err": float(tri._tma_ok(q, k, v)), "floor": float(name != "pointer")})
        assert tri._even_keys(False, sk) == name.startswith("even"), name
    return rows


def _lse_only_rows(tri) -> list[dict]:
    """A loss of lse alone: the backward gets no dO (zeros) and dlse; dV is exactly zero then."""
    gen = torch.Generator().manual_seed(8)
    q = torch.randn(1, 40, 4, 64, generator=gen).bfloat16()
    k, v = (torch.randn(1, 40, 2, 64, generator=gen).bfloat16() for _ in range(2))
    xs = [t.clone().requires_grad_() for t in (q, k, v)]
    _, lse = tri.attention(*xs, causal=True, return_lse=True)
    gl = torch.randn(lse.shape, generator=gen)
    (lse * gl).sum().backward()
    options = (64 ** -0.5, None, (None, 0))
    (_, _, *t_gs), (_, _, *f_gs) = _cpu_truth(tri, q, k, v, torch.zeros_like(q), (None, None), options, gl=gl)
    rows = [_judge(f"lse-only d{n}", x.grad, f.bfloat16(), t)
            for n, x, f, t in zip("qk", xs[:2], f_gs[:2], t_gs[:2], strict=True)]
    rows.append({"case": "lse-only dv", "ok": not xs[2].grad.any(), "message": "dV must be exactly zero"})
    return rows


def _offset_key_rows(tri) -> list[dict]:
    """Keys far from 0 where rows attend them, causal GQA: a large mean (60, 300; a loss of the output
    alone and one of output and lse), a step (+300 for the second half), a drift (0 to 60 along the
    sequence). dQ is centred per row on the row's best-scoring key (the row sum of dS is dlse), so its
    error stays at the bf16 level: 0.2-0.3 % when written, where the kernel centred on the sequence's
    mean key had 0.3 % (means), 48 % (step) and 2.1 % (drift), and the single kernel before it, which
    took out the rounding of dS only, 15 % and 70 % (means, output alone), 51 % and 2.3 %."""
    rows = []
    gen = torch.Generator().manual_seed(9)
    shifts = [(f"key mean {m:.0f}{' +lse' if lse else ''}", lambda n, m=m: torch.full((n,), m), lse)
              for m in (60.0, 300.0) for lse in (False, True)]
    shifts += [("key step 300", lambda n: torch.where(torch.arange(n) >= n // 2, 300.0, 0.0), False),
               ("key drift 0-60", lambda n: torch.linspace(0, 60, n), False)]
    for name, shift, with_lse in shifts:
        q = torch.randn(1, 45, 4, 32, generator=gen).bfloat16()
        k = (torch.randn(1, 45, 2, 32, generator=gen) + shift(45)[None, :, None, None]).bfloat16()
        v = torch.randn(1, 45, 2, 32, generator=gen).bfloat16()
        xs = [t.clone().requires_grad_() for t in (q, k, v)]
        out, lse = tri.attention(*xs, causal=True, return_lse=True)
        g = torch.randn(out.shape, generator=gen).bfloat16()
        gl = torch.randn(lse.shape, generator=gen) if with_lse else None
        torch.autograd.backward([out, lse] if with_lse else [out], [g, gl] if with_lse else [g])
        (_, _, *t_gs), _ = _cpu_truth(tri, q, k, v, g, (None, None), (32 ** -0.5, None, (None, 0)), gl=gl)
        for n, x, t in zip("qk", xs[:2], t_gs[:2], strict=True):
            err = rel(x.grad, t)
            rows.append({"case": f"{name} d{n}", "ok": err < 0.02,
                         "message": f"relative L2 error {err:.2e} (limit 2e-2)"})
    return rows


def _wide_rows(tri, ref) -> list[dict]:
    """The verifier's wide trial (inputs x40 + 60: scores near 3e4, a nearly one-hot softmax, K with a
    large mean) judged by the verifier's own element-wise rule: it caught dQ's rounding of dS times
    mean(K), and P recomputed from an lse rounded at that magnitude."""
    from kernelagent.verifier.judge.compare import compare_leaf

    rows = []
    gen = torch.Generator().manual_seed(7)
    for causal in (False, True):
        q, k, v = ((torch.randn(1, 37, 2, 64, generator=gen, dtype=torch.float64) * 40 + 60).bfloat16()
                   for _ in range(3))
        g = torch.randn(1, 37, 2, 64, generator=gen).bfloat16()
        got = _fwd_bwd(tri.ModelNew(), q, k, v, [causal], g)
        low = _fwd_bwd(ref.Model(), q, k, v, [causal], g)
        truth = _fwd_bwd(ref.Model(), q.double(), k.double(), v.double(), [causal], g.double())
        for name, a, b, c in zip(("out", "dq", "dk", "dv"), [got[0], *got[1]], [low[0], *low[1]],
                                 [truth[0], *truth[1]], strict=True):
            res = compare_leaf(name, a, b, c, None)
            rows.append({"case": f"wide causal={causal} {name}", "ok": res.ok, "message": res.summary()})
    return rows


def judged_seeds(sets: tuple[int, ...] = (1, 4), seeds: range = range(1000, 1012)) -> list[str]:
    """Runs in the interpreter child: the verifier's judge (compare_leaf, default tolerance) on the kernels'
    output and gradients over many seeds of the small sets; the failures' summaries. Before the judge's rule
    for leaves as accurate as the reference (2026-12-02), set 4 (fp16) failed on 4 of these 12 seeds and set 1
    (bf16, GQA, causal) on one."""
    from kernelagent.verifier.judge.compare import compare_leaf

    tri = load_file(FOLDER / "triton.py", "lib_attention_triton")
    ref = load_file(FOLDER / "reference.py", "lib_attention_reference")
    bad = []
    for index in sets:
        for seed in seeds:
            torch.manual_seed(seed)
            q, k, v, *opts = ref.get_test_inputs()[index]
            g = torch.randn(q.shape).to(q.dtype)
            got, gs = _fwd_bwd(tri.ModelNew(), q, k, v, opts, g)
            low, low_gs = _fwd_bwd(ref.Model(), q, k, v, opts, g)
            t64, t_gs = _fwd_bwd(ref.Model(), q.double(), k.double(), v.double(), opts, g.double())
            for name, a, b, c in zip(("out", "dq", "dk", "dv"), [got, *gs], [low, *low_gs], [t64, *t_gs], strict=True):
                res = compare_leaf(name, a, b, c, None)
                if not res.ok:
                    bad.append(f"set {index} seed {seed}: {res.summary()}")
    return bad


def sink_errors() -> dict:
    """Runs in the interpreter child: one outlier key (+500 in every dimension at position 0, as an
    attention sink), causal, bf16, a loss on the output: dQ's relative L2 error against float64, the
    bf16 reference's, and whether the verifier's judge passes dQ. Centred on the sequence's mean key
    (which the outlier drags to ~8), dQ was off by 2.4e-2 and failed the judge; centred per row, 3.4e-3
    (the bf16 reference 4.6e-3)."""
    from kernelagent.verifier.judge.compare import compare_leaf

    tri = load_file(FOLDER / "triton.py", "lib_attention_triton")
    ref = load_file(FOLDER / "reference.py", "lib_attention_reference")
    gen = torch.Generator().manual_seed(0)
    q, k, v, g = (torch.randn(1, 64, h, 32, generator=gen, dtype=torch.float64) for h in (2, 1, 1, 2))
    k[:, 0] += 500.0
    q, k, v, g = (t.bfloat16() for t in (q, k, v, g))
    got = _fwd_bwd(tri.ModelNew(), q, k, v, [True], g)[1][0]
    low = _fwd_bwd(ref.Model(), q, k, v, [True], g)[1][0]
    truth = _fwd_bwd(ref.Model(), q.double(), k.double(), v.double(), [True], g.double())[1][0]
    return {"err": rel(got, truth), "ref_err": rel(low, truth), "judged": compare_leaf("dq", got, low, truth, None).ok}


@pytest.mark.slow
def test_an_outlier_key_does_not_cost_dq_its_accuracy():
    code = ("from tests.helpers.interp import emit\nimport tests.kernels.test_attention as t\n"
            "emit(t.sink_errors())\n")
    res = run_in_interpreter(code, timeout=300)
    assert res["err"] <= 2.0 * res["ref_err"] and res["judged"], res


@pytest.mark.slow
def test_the_verifier_judge_accepts_the_kernels_over_many_seeds():
    code = ("from tests.helpers.interp import emit\nimport tests.kernels.test_attention as t\n"
            "emit({'bad': t.judged_seeds()})\n")
    bad = run_in_interpreter(code, timeout=600)["bad"]
    assert not bad, "\n".join(bad)


@pytest.fixture(scope="module")
def interp_rows() -> list[dict]:
    code = ("from tests.helpers.interp import emit\nimport tests.kernels.test_attention as t\n"
            "emit({'rows': t.interp_cases()})\n")
    return run_in_interpreter(code, timeout=900)["rows"]


@pytest.mark.slow
def test_interpreter_kernels_match_float64_within_the_reference_floor(interp_rows):
    assert len(interp_rows) >= 8 * 4 + 5 + 12 + 8
    bad = []
    for r in interp_rows:
        if "ok" in r:
            if not r["ok"]:
                bad.append(f"{r['case']}: {r['message']}")
            continue
        if r["case"].endswith("tma"):
            if r["err"] != r["floor"]:
                bad.append(f"{r['case']}: TMA path taken {bool(r['err'])}, expected {bool(r['floor'])}")
            continue
        # lse has no low-precision twin: fp32 math against float64
        limit = 1e-5 if r["case"].endswith("lse") else 2.0 * r["floor"] + 1e-3
        if not r["err"] <= limit:
            bad.append(f"{r['case']}: error {r['err']:.2e} > {limit:.2e} (floor {r['floor']:.2e})")
    assert not bad, "\n".join(bad)
    assert any(r["case"] == "varlen lse" for r in interp_rows)


# ----------------------------------------------------------------------- sm_90a compile (no GPU)

POINTERS = {"Q", "K", "V", "Out", "DO", "DK", "DV", "DQ"}
FLOAT_PTRS = {"LSE", "STATS", "DELTA", "KMEAN", "DLSE"}
FLOATS = {"qk_scale", "cap_scale", "cap_log2", "sm_scale"}


def _compile_sm90(fn, constexprs: dict, warps: int, stages: int, ir: list | None = None) -> dict:
    """Compile a kernel for sm_90a as the autotuner would launch it (16-byte divisible pointers and
    strides); registers / spills from cuobjdump, and what the PTX holds (the TTGIR appended to `ir`)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            sig[name] = "constexpr"
            continue
        sig[name] = ("*bf16" if name in POINTERS else "*fp32" if name in FLOAT_PTRS else "*i32"
                     if name.startswith("CU_") else "fp32" if name in FLOATS else "i32")
        if sig[name].startswith("*") or re.fullmatch(r"s[a-z]*_[bsh]", name):
            attrs[(i,)] = [["tt.divisibility", 16]]
    ck = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
                        target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    cubin = Path(os.environ.get("TMPDIR", "/tmp")) / f"ka_attention_{os.getpid()}.cubin"
    cubin.write_bytes(ck.asm["cubin"])
    usage = subprocess.run([str(tool), "--dump-resource-usage", "-sass", str(cubin)], capture_output=True,
                           text=True).stdout  # one call: the resource line and the SASS listing
    cubin.unlink()
    regs, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
    ptx = ck.asm["ptx"]
    if ir is not None:
        ir.append(ck.asm["ttgir"])
    return {"regs": int(regs), "stack": int(stack), "wgmma": "wgmma.mma_async" in ptx, "warps": ck.metadata.num_warps,
            "sass": len(re.findall(r"^\s+/\*[0-9a-f]{4,6}\*/", usage, re.M)),
            "tma_load": "cp.async.bulk.tensor" in ptx, "tma_reduce": "cp.reduce.async.bulk.tensor" in ptx,
            "setmaxnreg": "setmaxnreg" in ptx, "shared": ck.metadata.shared}


FWD_BASE = {"HEAD_D": 128, "BLOCK_D": 128, "VARLEN": False, "HAS_LEFT": False, "HAS_RIGHT": True, "SOFTCAP": False,
            "TMA": True, "UPCAST": False, "REVERSE": True, "EVEN_K": False, "MAX_D": 256}


def _rows_shifted_twice(ttgir: str) -> tuple[set[int], list[str]]:
    """(the row offsets of the warp-specialised partitions, i.e. starts of their sliced tl.aranges;
    the lines that splat a scalar already shifted by such an offset). Triton 3.6 builds a partition's
    rows m0 + tl.arange(0, 128) as splat(m0 + 64) + [64, 128): rows 128..191 (see triton.py)."""
    consts = {m[1]: int(m[2]) for m in re.finditer(r"(%\w+) = arith\.constant (?:\{[^}]*\} )?(-?\d+) : i32", ttgir)}
    starts = {int(m[1]) for m in re.finditer(r"tt\.make_range \{[^}]*start = (\d+) : i32", ttgir)} - {0}
    shifted = {m[1] for m in re.finditer(r"(%\w+) = arith\.addi %\w+, (%\w+)", ttgir) if consts.get(m[2]) in starts}
    bad = [ln.strip()[:200] for ln in ttgir.splitlines()
           if (m := re.search(r"tt\.splat (%\w+)", ln)) and m[1] in shifted]
    return starts, bad


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [(128, 128, 8, 2, False, False, True), (128, 128, 4, 2, True, False, True),
                                 (128, 128, 4, 2, True, True, False), (128, 128, 4, 2, True, True, True)],
                         ids=["plain", "warp-specialised", "ws-even-keys", "ws-causal-even-keys"])
def test_forward_compiles_for_sm90a_without_spills(tri, cfg):
    bm, bn, warps, stages, ws, even, causal = cfg
    ir: list[str] = []
    cex = dict(FWD_BASE, BLOCK_M=bm, BLOCK_N=bn, WS=ws, EVEN_K=even, HAS_RIGHT=causal, REVERSE=causal)
    facts = _compile_sm90(tri._attn_fwd_kernel, cex, warps, stages, ir)
    assert facts["stack"] == 0 and facts["wgmma"] and facts["tma_load"], facts
    assert facts["shared"] <= 227 * 1024, facts
    if ws:  # a producer partition next to the math warps, registers moved between them
        assert facts["warps"] > warps and facts["setmaxnreg"], facts
        # two math partitions of 64 rows; the second's causal mask and lse/stats rows start at m0 + 64
        starts, bad = _rows_shifted_twice(ir[0])
        assert starts == {64} and not bad, "rows offset twice in a warp-specialised partition:\n" + "\n".join(bad)


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True], ids=["no-mask", "causal"])
def test_even_keys_take_the_masks_out_of_the_warp_specialised_loop(tri, causal):
    """With EVEN_K the warp-specialised forward (one loop for every key block) compiles without the key-length
    mask (non-causal: without any mask), so to fewer instructions, still partitioned and without spills."""
    base = dict(FWD_BASE, BLOCK_M=128, BLOCK_N=128, WS=True, HAS_RIGHT=causal, REVERSE=causal)
    masked, even = (_compile_sm90(tri._attn_fwd_kernel, dict(base, EVEN_K=e), 4, 2) for e in (False, True))
    assert even["warps"] > 4 and even["stack"] == 0 and masked["sass"] > 0, (masked, even)
    assert even["sass"] < masked["sass"], (masked, even)


def test_even_keys_fit_every_forward_and_dq_tile(tri):
    """EVEN_K drops the forward's and the dQ kernel's key-length masks when the key length is a multiple of 128:
    every key tile they may take (tuned, untuned, the interpreter's) must divide 128, or a partial block
    would go unmasked."""
    tiles = {c.kwargs["BLOCK_N"] for c in tri._fwd_configs()} | {t[1] for t in tri.FWD_DEFAULT.values()}
    tiles |= {c[1] for c in tri.DQ_TABLE} | {t[1] for t in tri.DQ_DEFAULT.values()}
    tiles |= {tri.INTERP_FWD["BLOCK_N"], tri.INTERP_BWD["BLOCK_N"]}
    assert tiles and all(128 % n == 0 for n in tiles), tiles
    assert tri._even_keys(False, 1024) and not tri._even_keys(False, 1000)
    assert not tri._even_keys(False, 192)  # a multiple of 64 but not of 128
    assert not tri._even_keys(True, 1024)  # varlen: lengths per sequence


def test_warp_specialised_forward_configs_need_tma(tri):
    """Triton 3.6's warp specialisation fails (RuntimeError) on pointer loads: pruned without TMA."""
    configs = tri._fwd_configs()
    with_tma = tri._fwd_prune(configs, {}, BLOCK_D=128, TMA=True)
    without = tri._fwd_prune(configs, {}, BLOCK_D=128, TMA=False)
    assert any(c.kwargs["WS"] for c in with_tma) and without
    assert not any(c.kwargs["WS"] for c in without) and set(map(str, without)) < set(map(str, with_tma))


BWD_BASE = {k: v for k, v in FWD_BASE.items() if k not in ("REVERSE", "EVEN_K", "WS")}


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["dkdv", "dq"])
def test_backward_kernels_compile_for_sm90a_without_spills(tri, kernel):
    """Every head-dim-128 tile of the two backward tables, causal and not: wgmma and TMA loads, within
    the shared memory an SM has, no spill but up to 72 bytes in dK/dV's causal branch (64 at 64x64
    with 4 warps when written); more means a real regression."""
    fn, table = (tri._attn_dkdv_kernel, tri.BWD_TABLE) if kernel == "dkdv" else (tri._attn_dq_kernel, tri.DQ_TABLE)
    extra = {} if kernel == "dkdv" else {"REVERSE": True, "HAS_DLSE": False, "EVEN_K": False}
    for bm, bn, warps, stages, max_d in table:
        if max_d != 128:
            continue
        for causal in (True, False):
            cex = dict(BWD_BASE, HAS_RIGHT=causal, BLOCK_M=bm, BLOCK_N=bn, MAX_D=max_d, **extra)
            facts = _compile_sm90(fn, cex, warps, stages)
            allowed = 72 if causal and kernel == "dkdv" else 0
            assert facts["stack"] <= allowed and facts["wgmma"] and facts["tma_load"], (bm, bn, warps, stages, facts)
            assert facts["shared"] <= 227 * 1024, (bm, bn, warps, stages, facts)


INTERP_VARIANT = {"HEAD_D": 64, "BLOCK_D": 64, "VARLEN": False, "HAS_LEFT": True, "HAS_RIGHT": True, "SOFTCAP": True,
                  "TMA": True, "UPCAST": True}


@pytest.mark.parametrize("kernel", ["fwd", "dq", "dkdv"])
def test_interpreter_variant_compiles_for_sm90(tri, kernel):
    """What the CPU interpreter runs (UPCAST on the interpreter's tiles) the verifier compiles for sm_90 on CPU,
    and refuses the kernel if that fails (fp64 tl.dot products did, in Triton 3.6). One variant a kernel (a
    window, causal, softcap: every branch with a dot); its score product is fp32 at IEEE precision, not TF32."""
    fn, tiles, extra = {"fwd": (tri._attn_fwd_kernel, tri.INTERP_FWD, {"REVERSE": True, "EVEN_K": False}),
                        "dq": (tri._attn_dq_kernel, tri.INTERP_BWD, {"REVERSE": True, "HAS_DLSE": True,
                                                                     "EVEN_K": False}),
                        "dkdv": (tri._attn_dkdv_kernel, tri.INTERP_BWD, {})}[kernel]
    ir: list[str] = []
    _compile_sm90(fn, dict(INTERP_VARIANT, **tiles, **extra), 4, 3, ir)
    dots = [ln for ln in ir[0].splitlines() if "tt.dot " in ln]
    assert dots and not any("f64" in ln for ln in dots), dots
    assert any("inputPrecision" not in ln for ln in dots), "no dot at IEEE precision (the scores):\n" + "\n".join(dots)
    assert tiles["BLOCK_M"] == tri.INTERP_FWD["BLOCK_M"] and tiles["BLOCK_N"] == tri.INTERP_FWD["BLOCK_N"]


# ------------------------------------------------------------------------ the card and the benchmark


def test_card_lists_what_the_files_define_and_claims_no_figure():
    """The card's backends, public API and ops exist in the files; no measured figure without the
    results file it came from (card.md says so)."""
    import ast
    import json

    card = json.loads((FOLDER / "card.json").read_text())
    assert set(card["backends"]) == {p.stem for p in FOLDER.glob("*.py") if p.stem in ("triton", "cute")}
    for fname, sigs in card["public_api"].items():
        source = (FOLDER / fname).read_text()
        defined = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert {"ModelNew"} | {s.split("(")[0] for s in sigs} <= defined, fname
    registered = set()
    for fname in ("triton.py", "cute.py"):
        registered |= {f"kernelagent::{n}" for n in re.findall(r'_register\("(\w+)"', (FOLDER / fname).read_text())}
    assert set(card["ops"]) == registered
    assert card["verified"] == [] or all(r.get("date") and r.get("gpu") for r in card["verified"])
    for row in card["measured"]:
        assert (ROOT / row["source"]).is_file() and row["source"].startswith("benchmarks/results/"), row
    if not card["measured"]:
        assert "Not measured yet against the peers" in (FOLDER / "card.md").read_text()


def test_benchmark_flop_convention_shapes_and_plot(tmp_path):
    import importlib.util

    import benchmarks.attention_peers as bench

    assert bench.flops(2, 8192, 16, 128, False, "fwd") == 4 * 2 * 16 * 8192 * 8192 * 128
    assert bench.flops(2, 8192, 16, 128, True, "fwd") * 2 == bench.flops(2, 8192, 16, 128, False, "fwd")
    assert bench.flops(1, 512, 4, 64, True, "fwd+bwd") == 3.5 * bench.flops(1, 512, 4, 64, True, "fwd")
    assert bench.shapes(True) == [(2, 8192, 16, 128, False), (2, 8192, 16, 128, True)]
    sweep = bench.shapes(False)[2:]
    assert len(sweep) == 2 * len(bench.SWEEP_S) * 2 - 2  # the headline's two shapes are not repeated
    assert all(b * s == bench.TOKENS and h * d == bench.HIDDEN for b, s, h, d, _ in sweep)
    if importlib.util.find_spec("flash_attn") is None:  # a missing peer is a reason, not a crash
        assert bench.implementations(("fa4",))["fa4"].startswith("not importable")
    rows = [{"impl": impl, "b": bench.TOKENS // s, "s": s, "h": 16, "d": 128, "causal": False, "mode": "fwd",
             "tflops": t} for impl, t in (("triton", 300.0), ("cudnn", 500.0)) for s in (512, 4096)]
    png = bench.plot({"rows": rows}, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
