"""Attention on the GPU, both backends (Triton; CuTe DSL, its backward fused by default, split on request).

* Small shapes against the reference in float64: forward and gradients of q, k, v; odd lengths,
  GQA/MQA, causal with Sq < Sk and Sq > Sk (bottom-right), windows, softcap, head dims 64 and 128,
  fp16 and bf16. An error may not exceed twice the reference's own error in the input dtype (its
  noise floor) plus 1e-3 of the norm.
* Large shapes against an fp32 reference, next to PyTorch's SDPA in bf16 (ours within 1.5x its
  error), forward and gradients, MHA and GQA, causal and not.
* Every forward and backward config of the Triton autotuner forced one by one (its pick by time
  would hide a config that is wrong only where it wins), out, lse and gradients.
* Varlen (Triton), the log-sum-exp and its gradient, torch.compile (Inductor) forward+backward, the
  sdpa drop-in, and the project's verifier accepting the library entry.

Run on the H200: `source .carry/setup.sh && python3 -m pytest -q -m gpu tests/kernels/test_attention_gpu.py`
"""

from __future__ import annotations

import functools
import importlib

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

pytestmark = pytest.mark.gpu
BF16, F16 = torch.bfloat16, torch.float16


@pytest.fixture(scope="module")
def ref():
    return importlib.import_module("kernelagent.kernels.attention.reference")


def backend(name: str):
    if name == "cute":
        pytest.importorskip("cutlass")
    return importlib.import_module(f"kernelagent.kernels.attention.{name}")


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def inputs(b, sq, sk, hq, hkv, d, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
            for shape in ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, d))]


def run(fn, xs, g):
    leaves = [x.detach().clone().requires_grad_() for x in xs]
    out = fn(*leaves)
    out.backward(g)
    return [out.detach()] + [x.grad for x in leaves]


SMALL = [  # (b, sq, sk, hq, hkv, d, dtype, options)
    (1, 37, 37, 2, 2, 64, BF16, {}),
    (2, 200, 200, 4, 2, 128, BF16, {"causal": True}),
    (1, 77, 300, 4, 1, 128, F16, {"causal": True}),
    (1, 300, 77, 2, 1, 64, BF16, {"causal": True}),
    (2, 333, 333, 4, 4, 128, BF16, {"causal": True, "window": (50, -1)}),
    (1, 257, 129, 2, 2, 64, F16, {"softcap": 15.0, "scale": 0.2}),
    (1, 190, 190, 4, 2, 128, BF16, {"window": (33, 17)}),
    (1, 1, 513, 2, 2, 128, BF16, {"causal": True}),
    (3, 129, 129, 8, 8, 64, F16, {}),
]


@pytest.mark.parametrize("name", ["triton", "cute"])
@pytest.mark.parametrize("case", SMALL, ids=lambda c: f"{c[:6]}-{str(c[6])[6:]}-{sorted(c[7])}")
def test_small_shapes_against_float64(ref, name, case):
    mod = backend(name)
    *shape, dtype, opts = case
    xs = inputs(*shape, dtype)
    g = torch.randn(xs[0].shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(9)).to(dtype)
    got = run(lambda q, k, v: mod.attention(q, k, v, **opts), xs, g)
    args = (opts.get("causal", False), opts.get("scale"), opts.get("softcap"), opts.get("window"))
    low = run(lambda q, k, v: ref.attention_reference(q, k, v, *args), xs, g)
    truth = run(lambda q, k, v: ref.attention_reference(q, k, v, *args), [x.double() for x in xs], g.double())
    bad = []
    for what, a, lo, t in zip(("out", "dq", "dk", "dv"), got, low, truth, strict=True):
        err, floor = rel(a, t), rel(lo, t)
        if not (torch.isfinite(a).all() and err <= 2 * floor + 1e-3):
            bad.append(f"{what}: error {err:.2e}, floor {floor:.2e}")
    assert not bad, "; ".join(bad)


FUSED_SMALL = [SMALL[i] for i in (1, 2, 6, 8)]  # causal GQA, Sq < Sk MQA fp16, a window, head dim 64


def _fused(monkeypatch, private: bool) -> None:
    mod = backend("cute")
    tiles = mod._fused_tiles
    monkeypatch.setattr(mod, "FUSED_BACKWARD", True)
    # each schedule with the atomics it ships with (shared: pred_reds at d128; private: without, at d64)
    monkeypatch.setattr(mod, "_fused_tiles", lambda d: {**tiles(d), "private_dq": private, "pred_reds": not private})


@pytest.mark.parametrize("case", [c for c in SMALL if "softcap" not in c[7]], ids=lambda c: f"{c[:6]}-{sorted(c[7])}")
def test_split_cute_backward_small_shapes_against_float64(ref, case, monkeypatch):
    """The split CuTe backward (dK/dV, then dQ: what a softcap or torch's deterministic mode gets) on the shapes
    the fused default takes, under the same bar."""
    monkeypatch.setattr(backend("cute"), "FUSED_BACKWARD", False)
    test_small_shapes_against_float64(ref, "cute", case)


@pytest.fixture
def deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(before)


def test_cute_backward_deterministic_when_torch_asks(deterministic, monkeypatch):
    """Under torch.use_deterministic_algorithms the CuTe backward takes the split kernels (no atomics): two runs
    give bit-identical gradients and the fused kernel is never launched."""
    mod = backend("cute")
    xs = inputs(2, 1024, 1024, 8, 2, 128, BF16, seed=3)
    g = torch.randn(xs[0].shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(4)).to(BF16)
    monkeypatch.setattr(mod, "fused_backward", lambda *a, **k: pytest.fail("the fused backward ran"))
    first, second = (run(lambda q, k, v: mod.attention(q, k, v, causal=True), xs, g) for _ in range(2))
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("private", [False, True], ids=["shared_dq", "private_dq"])
@pytest.mark.parametrize("case", FUSED_SMALL, ids=lambda c: f"{c[:6]}-{str(c[6])[6:]}-{sorted(c[7])}")
def test_fused_cute_backward_small_shapes_against_float64(ref, case, private, monkeypatch):
    """The fused CuTe backward (the default, FUSED_BACKWARD), both ways of forming dQ's parts, under the same
    bar as the default backward."""
    _fused(monkeypatch, private)
    test_small_shapes_against_float64(ref, "cute", case)


@pytest.mark.parametrize("private", [False, True], ids=["shared_dq", "private_dq"])
def test_fused_cute_backward_gqa_large_and_lse_gradient(private, monkeypatch):
    """The fused backward at a large GQA causal shape against fp32 next to SDPA, and the lse's gradient."""
    _fused(monkeypatch, private)
    test_large_shapes_against_fp32_next_to_sdpa("cute", (2, 2048, 16, 4, True))
    test_lse_and_its_gradient("cute")


LARGE = [(2, 4096, 16, 16, False), (2, 4096, 16, 16, True), (2, 2048, 16, 4, True)]  # (b, s, hq, hkv, causal)


@pytest.mark.parametrize("name", ["triton", "cute"])
@pytest.mark.parametrize("case", LARGE, ids=str)
def test_large_shapes_against_fp32_next_to_sdpa(name, case):
    mod = backend(name)
    b, s, hq, hkv, causal = case
    xs = inputs(b, s, s, hq, hkv, 128, BF16, seed=1)
    g = torch.randn(xs[0].shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(2)).to(BF16)
    got = run(lambda q, k, v: mod.attention(q, k, v, causal=causal), xs, g)

    def sdpa(q, k, v):  # (B, S, H, D) in and out
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=causal, enable_gqa=hq != hkv).transpose(1, 2)

    peer = run(sdpa, xs, g)
    with sdpa_kernel(SDPBackend.MATH):
        truth = run(sdpa, [x.float() for x in xs], g.float())
    for what, a, p, t in zip(("out", "dq", "dk", "dv"), got, peer, truth, strict=True):
        err, peer_err = rel(a, t), rel(p, t)
        assert torch.isfinite(a).all() and err <= 1.5 * peer_err + 1e-3, f"{what}: {err:.2e} vs SDPA {peer_err:.2e}"


def _force(monkeypatch, tri, fwd=None, dkdv=None, dq=None) -> None:
    """Every launch takes the tuned path, with these configs (no benchmarking: one config each)."""
    import triton

    monkeypatch.setattr(tri, "TUNE_MIN", 0)
    for name, kernel, cfg in (("_FWD", tri._attn_fwd_kernel, fwd), ("_DKDV", tri._attn_dkdv_kernel, dkdv),
                              ("_DQ", tri._attn_dq_kernel, dq)):
        if cfg is not None:
            monkeypatch.setattr(tri, name, triton.autotune([cfg], key=[])(kernel))


CONFIG_CASES = [(2, 1000, 1000, 4, 2, {}), (1, 700, 900, 2, 2, {"causal": True, "window": (300, -1)}),
                (1, 384, 1024, 4, 4, {})]  # the last: whole key blocks, no mask (the forward's EVEN_K)


def _case_errors(ref, tri, tag: str, case) -> list[str]:
    """One CONFIG_CASES entry through the launchers of `tri` (their module globals, which _force
    patches): out and gradients against float64 within twice the reference's floor, lse within 1e-5."""
    b, sq, sk, hq, hkv, opts = case
    causal, window = opts.get("causal", False), opts.get("window")
    xs = inputs(b, sq, sk, hq, hkv, 128, BF16, seed=7)
    g = torch.randn(xs[0].shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(8)).to(BF16)
    args = (None, None, sq, sk, 128 ** -0.5, None, tri._window(causal, window))
    out, lse, stats = tri._fwd_launch(*xs, *args)
    got = [out, *tri._bwd_launch(g, *xs, out, stats, None, *args)]
    fn = functools.partial(ref.attention_reference, causal=causal, window=window)
    low, truth = run(fn, xs, g), run(fn, [x.double() for x in xs], g.double())
    bad = []
    for what, a, lo, t in zip(("out", "dq", "dk", "dv"), got, low, truth, strict=True):
        err, floor = rel(a, t), rel(lo, t)
        if not (torch.isfinite(a).all() and err <= 2 * floor + 1e-3):
            bad.append(f"{tag} {sorted(opts)}: {what} error {err:.2e}, floor {floor:.2e}")
    s = torch.einsum("bqhd,bkhd->bhqk", xs[0].double(), xs[1].double().repeat_interleave(hq // hkv, 2))
    keep = ref.visible(sq, sk, causal, window, device="cuda")
    l64 = torch.logsumexp((s * 128 ** -0.5).masked_fill(~keep, float("-inf")), -1)
    fin = torch.isfinite(l64)
    if not (rel(lse[fin], l64[fin]) < 1e-5 and torch.isinf(lse[~fin]).all()):
        bad.append(f"{tag} {sorted(opts)}: lse error {rel(lse[fin], l64[fin]):.2e}")
    return bad


def test_every_config_the_autotuner_may_pick(ref, monkeypatch):
    """Each forward config (warp-specialised ones too) and each config of the two backward kernels,
    forced: the autotuner picks by time, so a config that is wrong only shows where it wins (Triton 3.6
    gave the second math warpgroup of a warp-specialised forward its rows 64 too far: wrong lse,
    stats, dQ)."""
    tri = backend("triton")
    bad = []
    first_dkdv, first_dq = tri._configs(tri.BWD_TABLE)[0], tri._configs(tri.DQ_TABLE)[0]
    for cfg in tri._fwd_prune(tri._fwd_configs(), {}, BLOCK_D=128, TMA=True):
        _force(monkeypatch, tri, fwd=cfg, dkdv=first_dkdv, dq=first_dq)
        bad += [e for case in CONFIG_CASES for e in _case_errors(ref, tri, f"forward {cfg}", case)]
    for kernel, table in (("dkdv", tri.BWD_TABLE), ("dq", tri.DQ_TABLE)):
        for cfg in tri._prune(tri._configs(table), {}, BLOCK_D=128):
            forced = {"dkdv": first_dkdv, "dq": first_dq, kernel: cfg}
            _force(monkeypatch, tri, fwd=tri._fwd_configs()[0], **forced)
            bad += [e for case in CONFIG_CASES for e in _case_errors(ref, tri, f"{kernel} {cfg}", case)]
    assert not bad, "\n".join(bad)


def test_varlen_matches_each_sequence(ref):
    tri = backend("triton")
    lens_q, lens_k = [1, 100, 777, 1024, 2049], [9, 100, 700, 1500, 2049]
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(n, h, 128, generator=gen, device="cuda").to(BF16)
               for n, h in ((sum(lens_q), 8), (sum(lens_k), 2), (sum(lens_k), 2)))
    for causal in (False, True):
        xs = [t.clone().requires_grad_() for t in (q, k, v)]
        out, lse = tri.attention_varlen(*xs, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal, return_lse=True)
        (out.float().square().sum() + lse[torch.isfinite(lse)].sum()).backward()
        for i in range(len(lens_q)):
            qs, ks = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), int(cu_k[i + 1]))
            ys = [t[None].double().requires_grad_() for t in (q[qs], k[ks], v[ks])]
            o64 = ref.attention_reference(*ys, causal)
            s = torch.einsum("bqhd,bkhd->bhqk", ys[0], ys[1].repeat_interleave(4, 2)) * 128 ** -0.5
            keep = ref.visible(qs.stop - qs.start, ks.stop - ks.start, causal, device="cuda")
            l64 = torch.logsumexp(s.masked_fill(~keep, float("-inf")), -1)
            (o64.square().sum() + l64[torch.isfinite(l64)].sum()).backward()
            fin = torch.isfinite(l64[0])  # a query that sees no key: +inf from us, -inf from logsumexp
            assert rel(out[qs], o64[0]) < 1e-2 and rel(lse[:, qs][fin], l64[0][fin]) < 1e-5
            for x, y, at in zip(xs, ys, (qs, ks, ks), strict=True):
                assert rel(x.grad[at], y.grad[0]) < 2e-2, (i, causal)


@pytest.mark.parametrize("name", ["triton", "cute"])
def test_lse_and_its_gradient(name):
    mod = backend(name)
    xs = inputs(2, 300, 300, 4, 2, 128, BF16, seed=4)
    ys = [x.clone().requires_grad_() for x in xs]
    out, lse = mod.attention(*ys, causal=True, return_lse=True)
    gl = torch.randn_like(lse)
    (lse * gl).sum().backward()
    zs = [x.double().requires_grad_() for x in xs]
    s = torch.einsum("bqhd,bkhd->bhqk", zs[0], zs[1].repeat_interleave(2, 2)) * 128 ** -0.5
    keep = torch.ones(300, 300, dtype=torch.bool, device="cuda").tril()
    l64 = torch.logsumexp(s.masked_fill(~keep, float("-inf")), -1)
    (l64 * gl.double()).sum().backward()
    assert lse.shape == (2, 4, 300) and rel(lse, l64) < 1e-5
    for a, b in zip(ys[:2], zs[:2], strict=True):
        assert rel(a.grad, b.grad) < 2e-2
    assert zs[2].grad is None and not ys[2].grad.any()  # lse does not depend on v


@pytest.mark.parametrize("causal", [False, True])
def test_cute_forward_dense_and_strided_calls_agree(ref, causal):
    """The CuTe forward takes row-major q, k, v by base pointer and sizes and any others as DLPack tensors:
    both launch the same kernel, so q, k, v sliced out of one packed (B, S, 3, H, D) tensor (strided) and their
    contiguous copies (dense) give identical out, lse and statistics, and both match float64."""
    ac = backend("cute")
    gen = torch.Generator(device="cuda").manual_seed(9)
    packed = torch.randn(2, 333, 3, 4, 128, generator=gen, device="cuda").to(BF16)
    strided = packed.unbind(2)
    dense = [t.contiguous() for t in strided]
    assert not strided[0].is_contiguous() and dense[0].is_contiguous()
    window = (None, 0) if causal else (None, None)
    got = [ac.attention_forward(*xs, 128 ** -0.5, None, window) for xs in (strided, dense)]
    for a, b in zip(*got, strict=True):
        assert torch.equal(a, b)
    truth = ref.attention_reference(*[t.double() for t in dense], causal=causal)
    assert rel(got[1][0], truth) < 1e-2


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_backward_dense_and_strided_calls_agree(causal, d):
    """The fused backward kernel launched by base pointers and sizes (row-major inputs) and by DLPack tensors
    (what strided inputs take), on the same inputs: dK and dV identical, dQ's accumulator equal up to the
    order its fp32 parts are added in, and the whole backward on strided inputs next to the one on dense."""
    ac = backend("cute")
    gen = torch.Generator(device="cuda").manual_seed(10)
    packed = torch.randn(2, 333, 3, 4, d, generator=gen, device="cuda").to(BF16)
    q, k, v = (t.contiguous() for t in packed.unbind(2))
    do = torch.randn(q.shape, generator=gen, device="cuda").to(BF16)
    window = (None, 0) if causal else (None, None)
    out, _, stats = ac.attention_forward(q, k, v, d ** -0.5, None, window)
    tab = ac._stats_table(do, out, stats, None)
    got = []
    for dense in (True, False):
        dk, dv, bufs = torch.empty_like(k), torch.empty_like(v), ac.fused_buffers(q, tab)
        ac.fused_kernel(q, k, v, do, tab, dk, dv, *bufs, d ** -0.5, window, dense=dense)
        got.append((dk, dv, bufs))
    (dk1, dv1, b1), (dk2, dv2, b2) = got
    assert torch.equal(dk1, dk2) and torch.equal(dv1, dv2) and torch.equal(b1[2], b2[2])
    assert rel(b1[0], b2[0]) < 1e-6 and rel(b1[1], b2[1]) < 1e-4  # row sums: sums that cancel, any order
    strided = packed.unbind(2)
    both = [ac.attention_backward(do, *xs, out, stats, None, d ** -0.5, None, window) for xs in (strided, (q, k, v))]
    assert rel(both[0][0], both[1][0]) < 5e-3  # dQ: parts added in the order they arrive, then rounded to bf16
    assert torch.equal(both[0][1], both[1][1]) and torch.equal(both[0][2], both[1][2])


def test_cute_eager_path_matches_the_custom_op(monkeypatch):
    """`attention` in eager mode on the GPU runs the CuTe kernels without the op dispatcher
    (_EagerAttention): out and lse identical to the custom op's, gradients through both (dq summed in a
    varying order by the fused backward: to 1e-3), and the op itself not called."""
    ac = backend("cute")
    xs = inputs(2, 300, 300, 4, 2, 128, BF16, seed=6)
    g = torch.randn_like(xs[0])
    gl = torch.randn(2, 4, 300, device="cuda")

    def grads(call):
        ys = [x.clone().requires_grad_() for x in xs]
        out, lse = call(*ys)
        ((out.float() * g).sum() + (lse * gl).sum()).backward()
        return out.detach(), lse.detach(), [y.grad for y in ys]

    op = grads(lambda q, k, v: ac.attention_cute_fwd(q, k, v, 128 ** -0.5, None, None, 0)[:2])
    calls = []
    real = ac.attention_cute_fwd
    monkeypatch.setattr(torch.ops.kernelagent, "attention_cute_fwd",
                        lambda *a, **kw: calls.append(a) or real(*a, **kw), raising=False)
    eager = grads(lambda q, k, v: ac.attention(q, k, v, causal=True, return_lse=True))
    assert not calls, "eager attention on the GPU went through the op dispatcher"
    assert torch.equal(eager[0], op[0]) and torch.equal(eager[1], op[1])
    for a, b in zip(eager[2], op[2], strict=True):
        assert rel(a, b) < 1e-3


def test_ops_attention_follows_the_backend():
    """kernelagent.ops.attention under "auto": the CuTe DSL kernels from ATTENTION_CUTE_MIN_KEYS keys, Triton
    below; both backends' outputs and gradients agree within bf16 rounding."""
    backend("cute")
    from kernelagent import ops
    xs = inputs(1, ops.ATTENTION_CUTE_MIN_KEYS, ops.ATTENTION_CUTE_MIN_KEYS, 4, 2, 128, BF16, seed=7)
    g = torch.randn_like(xs[0])
    ops.set_backend("auto")
    try:
        assert ops._attention_kernels(*xs[:2]).__name__.endswith("attention.cute")
        assert ops._attention_kernels(xs[0][:, :64], xs[1][:, :64]).__name__.endswith("attention.triton")
        auto = run(lambda q, k, v: ops.attention(q, k, v, causal=True), xs, g)
    finally:
        ops.set_backend("triton")
    tri = run(lambda q, k, v: ops.attention(q, k, v, causal=True), xs, g)
    for a, b in zip(auto, tri, strict=True):
        assert rel(a, b) < 1e-2


@pytest.mark.parametrize("name", ["triton", "cute"])
def test_torch_compile_inductor_forward_and_backward(name):
    mod = backend(name)
    xs = inputs(2, 256, 256, 4, 2, 64, BF16, seed=5)

    def block(q, k, v):
        return (mod.attention(q * 1.5, k, v, causal=True).float().sin()).sum()

    a = [x.clone().requires_grad_() for x in xs]
    torch.compile(block, fullgraph=True)(*a).backward()
    b = [x.clone().requires_grad_() for x in xs]
    block(*b).backward()
    for x, y in zip(a, b, strict=True):
        assert rel(x.grad, y.grad) < 1e-2


def test_sdpa_drop_in():
    tri = backend("triton")
    gen = torch.Generator(device="cuda").manual_seed(6)
    for sq, sk, causal, hkv in ((300, 300, True, 8), (100, 400, True, 2), (400, 100, True, 8), (257, 257, False, 1)):
        q = torch.randn(2, 8, sq, 128, generator=gen, device="cuda").to(BF16)
        k, v = (torch.randn(2, hkv, sk, 128, generator=gen, device="cuda").to(BF16) for _ in range(2))
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv != 8)
        got = tri.sdpa(q, k, v, is_causal=causal, enable_gqa=hkv != 8)
        rows = ~torch.isnan(want)
        assert got.shape == want.shape and rel(got[rows], want[rows]) < 1e-2
    with pytest.raises(tri.SDPAUnsupported, match="fp16/bf16"):  # shapes fit (GQA allowed): only the dtype is wrong
        tri.sdpa(q.float(), k.float(), v.float(), enable_gqa=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["triton", "cute"])
def test_verifier_accepts_the_library_entry(name):
    if name == "cute":
        pytest.importorskip("cutlass")
    from kernelagent.kernels import get_entry
    from kernelagent.tools.library import verify_entry
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.options import VerifyOptions

    with Verifier(VerifyOptions(device="cuda", timeout=900, seeds=2)) as verifier:
        report = verify_entry(get_entry("attention"), name, verifier)
    assert report.verdict == "accepted", f"{report.category}: {report.message}\n{report.feedback[-3000:]}"
