"""kernelagent.ops, the public API, on CPU without the interpreter: the functions (CPU implementation:
torch in fp32) forward and backward against torch, the drop-in modules against torch's own
(parameters, init, load_state_dict), opcheck of every registered op, torch.compile(fullgraph=True),
meta tensors, input errors, the backend switch and the lazily loaded losses.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernelagent import ops
from tests.kernels.rowwise_cases import check, failures, opcheck_all, ours


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "rms_norm", "rms_norm_add", "layer_norm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_functions_match_torch_on_cpu(op, dtype):
    rows = []
    for shape, variant in (((5, 33), ""), ((2, 3, 17), ""), ((4, 40), "strided"), ((3, 9), "no_weight")):
        rows += check(op, ours(ops, op), shape, dtype, variant)
    assert len(rows) >= 8
    assert not failures(rows), "\n".join(failures(rows))


def test_every_op_passes_opcheck():
    results = opcheck_all()
    assert len(results) == 10
    for name, res in results.items():
        assert set(res.values()) == {"SUCCESS"}, f"{name}: {res}"


def test_calling_the_op_directly_has_a_backward():
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, requires_grad=True)
    y, rstd = torch.ops.kernelagent.rms_norm_fwd(x, w, 1e-6)
    y.sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    F.rms_norm(x2, (8,), w2, 1e-6).sum().backward()
    assert torch.allclose(x.grad, x2.grad, atol=1e-5) and torch.allclose(w.grad, w2.grad, atol=1e-5)
    assert rstd.shape == (4,) and rstd.dtype == torch.float32


class _Block(torch.nn.Module):
    """A pre-norm residual block using every op (what a model would do)."""

    def __init__(self, n: int):
        super().__init__()
        self.norm = ops.RMSNorm(n)
        self.ln = ops.LayerNorm(n)

    def forward(self, x, residual):
        h, s = ops.rms_norm_add(x, residual, self.norm.weight)
        return ops.softmax(self.ln(h), -1) + ops.log_softmax(s, 0), s


def test_torch_compile_fullgraph_traces_forward_and_backward():
    torch.manual_seed(0)
    block = _Block(16)
    x, r = torch.randn(6, 16, requires_grad=True), torch.randn(6, 16, requires_grad=True)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    out, s = compiled(x, r)
    (out.sum() + s.square().sum()).backward()
    grads = [x.grad, r.grad, block.norm.weight.grad, block.ln.weight.grad, block.ln.bias.grad]
    x2, r2 = x.detach().clone().requires_grad_(), r.detach().clone().requires_grad_()
    for p in block.parameters():
        p.grad = None
    out2, s2 = block(x2, r2)
    (out2.sum() + s2.square().sum()).backward()
    ref = [x2.grad, r2.grad, block.norm.weight.grad, block.ln.weight.grad, block.ln.bias.grad]
    assert torch.allclose(out, out2, atol=1e-6)
    assert all(g is not None and torch.allclose(g, h, atol=1e-5) for g, h in zip(grads, ref, strict=True))


def test_meta_tensors_give_shapes_without_computing():
    x = torch.empty(3, 7, 64, device="meta", dtype=torch.bfloat16)
    w = torch.empty(64, device="meta", dtype=torch.bfloat16)
    assert ops.softmax(x).shape == x.shape and ops.log_softmax(x, 1).device.type == "meta"
    y, s = ops.rms_norm_add(x, x, w)
    assert y.shape == s.shape == x.shape and y.dtype == torch.bfloat16
    assert ops.layer_norm(x, w, w).shape == x.shape


@pytest.mark.parametrize("normalized_shape", [16, (4, 16)])
def test_norm_modules_are_drop_in(normalized_shape):
    x = torch.randn(3, 4, 16)
    ref = torch.nn.RMSNorm(normalized_shape, eps=1e-6)
    mine = ops.RMSNorm(normalized_shape, eps=1e-6)
    assert set(mine.state_dict()) == set(ref.state_dict()) and torch.equal(mine.weight, ref.weight)
    with torch.no_grad():
        ref.weight.normal_()
    mine.load_state_dict(ref.state_dict())
    assert torch.allclose(mine(x), ref(x), atol=1e-5)
    ref_ln, mine_ln = torch.nn.LayerNorm(normalized_shape), ops.LayerNorm(normalized_shape)
    assert set(mine_ln.state_dict()) == set(ref_ln.state_dict())
    assert torch.equal(mine_ln.weight, ref_ln.weight) and torch.equal(mine_ln.bias, ref_ln.bias)
    with torch.no_grad():
        ref_ln.weight.normal_()
        ref_ln.bias.normal_()
    mine_ln.load_state_dict(ref_ln.state_dict())
    assert torch.allclose(mine_ln(x), ref_ln(x), atol=1e-5)


def test_norm_modules_without_affine_or_bias():
    x = torch.randn(5, 12)
    assert ops.RMSNorm(12, elementwise_affine=False).weight is None
    plain, ref_plain = ops.RMSNorm(12, elementwise_affine=False), torch.nn.RMSNorm(12, elementwise_affine=False)
    assert torch.allclose(plain(x), ref_plain(x), atol=1e-6)
    ln, ref = ops.LayerNorm(12, bias=False), torch.nn.LayerNorm(12, bias=False)
    assert ln.bias is None and set(ln.state_dict()) == set(ref.state_dict()) == {"weight"}
    assert torch.allclose(ln(x), ref(x), atol=1e-6)
    assert ops.LayerNorm(12, elementwise_affine=False).weight is None
    with pytest.raises(ValueError, match="ending in"):
        ops.RMSNorm(13)(x)


def test_rms_norm_default_eps_is_torchs():
    x = torch.randn(4, 8).to(torch.bfloat16) * 1e-3  # small: eps matters
    assert torch.allclose(ops.rms_norm(x).float(), F.rms_norm(x, (8,)).float(), atol=1e-2, rtol=1e-2)
    assert torch.allclose(ops.RMSNorm(8)(x).float(), torch.nn.RMSNorm(8, dtype=torch.bfloat16)(x).float(),
                          atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_softmax_modules_take_any_dim(dim):
    x = torch.randn(3, 4, 5)
    assert torch.allclose(ops.Softmax(dim)(x), torch.nn.Softmax(dim)(x), atol=1e-6)
    assert torch.allclose(ops.LogSoftmax(dim)(x), torch.nn.LogSoftmax(dim)(x), atol=1e-5)
    assert torch.allclose(ops.softmax(x, 1, dtype=torch.float64), torch.softmax(x, 1, dtype=torch.float64))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        ops.softmax(torch.arange(6).reshape(2, 3))
    with pytest.raises(ValueError, match="does not match the last dim"):
        ops.rms_norm(torch.randn(2, 8), torch.randn(7))
    with pytest.raises(ValueError, match="residual shape"):
        ops.rms_norm_add(torch.randn(2, 8), torch.randn(3, 8))
    with pytest.raises(ops.BackendError, match="unknown backend"):
        ops.set_backend("cuda")


def test_losses_and_attention_load_on_first_use():
    from kernelagent.kernels.attention import triton as attention_triton
    from kernelagent.kernels.cross_entropy import triton as ce_triton
    assert ops.cross_entropy is ce_triton.cross_entropy
    assert ops.sdpa is attention_triton.sdpa and ops.attention_varlen is attention_triton.attention_varlen
    assert {"attention", "attention_varlen", "linear_cross_entropy"} <= set(ops.__all__)
    q, k, v = (torch.randn(1, n, 2, 16) for n in (5, 7, 7))
    assert ops._attention_kernels(q, k) is attention_triton  # the default backend
    out, lse = ops.attention(q, k, v, causal=True, return_lse=True)
    want, want_lse = attention_triton.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
    with pytest.raises(AttributeError, match="no attribute"):
        ops.no_such_op  # noqa: B018


@pytest.mark.cute
def test_cute_backend_runs_the_same_api():
    ops.set_backend("cute")
    try:
        assert ops.get_backend() == "cute"
        x = torch.randn(4, 10, requires_grad=True)
        y = ops.softmax(x)  # CPU: the cute ops' torch implementation, through their own registered ops
        y.backward(torch.ones_like(y))
        assert torch.allclose(y, torch.softmax(x, -1)) and x.grad.abs().max() < 1e-6
        rows = check("layer_norm", lambda a, w, b: ops.layer_norm(a, w, b, 1e-5), (3, 9), torch.float32)
        assert not failures(rows)
        ops.set_backend("auto")  # CuTe only for CUDA rows at the lengths of AUTO_CUTE
        assert ops.get_backend() == "auto"
        assert ops._kernels("softmax", x).__name__.endswith("softmax.triton")  # a CPU tensor: never CuTe
        cases = (("softmax", 1000, "cute"), ("softmax", 16384, "triton"), ("softmax", 40000, "cute"),
                 ("softmax", 200000, "cute"), ("rms_norm", 8192, "triton"), ("rms_norm", 9000, "cute"),
                 ("rms_norm", 40000, "cute"), ("rms_norm", 262144, "triton"), ("layer_norm", 20000, "cute"),
                 ("layer_norm", 262144, "triton"))
        for family, n, backend in cases:
            probe = type("Probe", (), {"is_cuda": True, "shape": (2, n)})()  # only is_cuda and the width are read
            assert ops._kernels(family, probe).__name__.endswith(f"{family}.{backend}"), (family, n)
        assert torch.allclose(ops.softmax(x), torch.softmax(x, -1))
        _check_attention_choice()
    finally:
        ops.set_backend("triton")
    assert ops.get_backend() == "triton"


def _check_attention_choice():
    """attention under "cute" and "auto": the CuTe DSL module where it takes the call (CUDA, fp16/bf16, 4-D,
    head dim 64 or 128) and, under "auto", from ATTENTION_CUTE_MIN_KEYS keys up; Triton otherwise."""
    def probe(n, d=128, dtype=torch.bfloat16, cuda=True):  # only what the choice reads
        return type("Probe", (), {"is_cuda": cuda, "dtype": dtype, "shape": (2, n, 4, d), "dim": lambda self: 4})()
    many, few = ops.ATTENTION_CUTE_MIN_KEYS, ops.ATTENTION_CUTE_MIN_KEYS // 2
    cases = (("auto", probe(many), probe(many), "cute"), ("auto", probe(few), probe(few), "triton"),
             ("auto", probe(few), probe(many), "cute"), ("auto", probe(many, 96), probe(many, 96), "triton"),
             ("auto", probe(many, 64, torch.float16), probe(many, 64, torch.float16), "cute"),
             ("auto", probe(many, dtype=torch.float32), probe(many, dtype=torch.float32), "triton"),
             ("auto", probe(many, cuda=False), probe(many, cuda=False), "triton"),
             ("cute", probe(few), probe(few), "cute"), ("cute", probe(many, 256), probe(many, 256), "triton"))
    for backend, q, k, want in cases:
        ops.set_backend(backend)
        assert ops._attention_kernels(q, k).__name__ == f"kernelagent.kernels.attention.{want}", (backend, want)
    q, k, v = (torch.randn(1, 6, 2, 64) for _ in range(3))  # CPU tensors under "cute": the Triton module
    from kernelagent.kernels.attention import triton as attention_triton
    assert torch.equal(ops.attention(q, k, v), attention_triton.attention(q, k, v))


@pytest.mark.parametrize("backend", ["triton", "cute"])
def test_attention_rejects_a_malformed_window_by_name(backend):
    """A window that is not two ints (or None) is refused with the library's error, not a bare unpacking or
    comparison error, and not truncated to ints; well-formed ones pass through (negative or None: unbounded)."""
    import importlib

    mod = importlib.import_module(f"kernelagent.kernels.attention.{backend}")
    for bad in ((3,), (3, 4, 5), (1.5, 2), ("a", 1), (True, 2), 7):
        with pytest.raises(mod.AttentionError, match="window must be"):
            mod._window(False, bad)
    assert mod._window(False, (-1, 4)) == (None, 4)
    assert mod._window(True, [8, None]) == (8, 0)
    assert mod._window(False, None) == (None, None)


def test_attention_varlen_refuses_offsets_that_do_not_fit():
    """cu_seqlens that are not 1-D integer offsets, disagree in length, fall, point past the packed rows or
    hold a sequence longer than its max_seqlen raise AttentionError naming the problem (checked on CPU
    tensors, where it costs no device sync), instead of an IndexError deep in the launch or a silently short
    result; well-formed ones run."""
    from kernelagent.kernels.attention import triton as tri

    q, k, v = (torch.randn(10, 2, 16) for _ in range(3))
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)

    def call(cu_q=cu, cu_k=cu, max_q=6, max_k=6):
        return tri.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k)

    assert call().shape == (10, 2, 16)
    for kwargs, match in (({"cu_q": cu.float()}, "integer tensor"), ({"cu_q": cu[None]}, "integer tensor"),
                          ({"cu_q": cu[:1]}, "integer tensor"), ({"cu_k": torch.tensor([0, 10])}, "as many"),
                          ({"cu_q": torch.tensor([1, 4, 10])}, "rise from 0"),
                          ({"cu_q": torch.tensor([0, 6, 4]), "cu_k": torch.tensor([0, 4, 10])}, "rise from 0"),
                          ({"cu_k": torch.tensor([0, 4, 11])}, "rise from 0"), ({"max_q": 5}, "max_seqlen_q")):
        with pytest.raises(tri.AttentionError, match=match):
            call(**kwargs)


@pytest.mark.parametrize("backend", ["triton", "cute"])
def test_attention_refuses_a_scale_the_kernels_cannot_take(backend):
    """The kernels take each row's max over raw scores, the max of the scaled ones only for a positive scale:
    a scale that is not positive and finite, or an infinite softcap, raises AttentionError on every device
    (the CPU implementation would compute it, the CuTe kernels silently wrongly); sdpa's drop-in calls it a
    misfit, which fallback=True hands to PyTorch."""
    import importlib

    mod = importlib.import_module(f"kernelagent.kernels.attention.{backend}")
    q = torch.randn(1, 6, 2, 64)
    for scale in (0.0, -0.125, float("nan"), float("inf")):
        with pytest.raises(mod.AttentionError, match="scale must be positive"):
            mod._scale_and_cap(q, scale, None)
    with pytest.raises(mod.AttentionError, match="softcap must be finite"):
        mod._scale_and_cap(q, None, float("inf"))
    assert mod._scale_and_cap(q, None, 0.0) == (64 ** -0.5, None)
    assert mod._scale_and_cap(q, 0.5, -30) == (0.5, -30.0)
    from kernelagent.kernels.attention import triton as tri

    x = torch.randn(1, 2, 6, 64)
    with pytest.raises(tri.SDPAUnsupported, match="scale"):
        tri.sdpa(x, x, x, scale=-1.0)
    want = F.scaled_dot_product_attention(x, x, x, scale=-1.0)
    assert torch.equal(tri.sdpa(x, x, x, scale=-1.0, fallback=True), want)
    with pytest.raises(tri.AttentionError, match="scale must be positive"):
        tri.attention(q, q, q, scale=-1.0)
