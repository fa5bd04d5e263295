"""The fused-loss set on CPU: kernelagent/kernels/{cross_entropy,linear_cross_entropy}.

Triton kernels run under the interpreter in a child process (tests/helpers/interp.py): forward and
gradients against the float64 reference for every option (reductions, class weights, ignore_index,
label smoothing, z-loss, soft-capping, in-place gradient, chunking, the TMA and masked GEMM paths),
the registered custom ops (opcheck, torch.compile) and each ModelNew against its reference.py. The
CuTe DSL kernels compile for sm_90a in another child (no GPU: launches are skipped). Tolerances:
tests/helpers/tolerance.py (a modest multiple of torch's own error in the same dtype).
The GPU counterpart is tests/kernels/test_losses_gpu.py.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.interp import run_in_interpreter
from tests.helpers.tolerance import failure

ROOT = Path(__file__).resolve().parents[2]
CE_DIR = ROOT / "kernelagent" / "kernels" / "cross_entropy"
LCE_DIR = ROOT / "kernelagent" / "kernels" / "linear_cross_entropy"

# (shape, dtype, options, class weights, ignored every k-th row, logit scale)
CE_CASES = [
    ((1, 1000), "float32", {}, False, 0, 1.0),
    ((5, 1023), "bfloat16", {"reduction": "sum"}, False, 0, 1.0),
    ((2, 3, 1025), "bfloat16", {"reduction": "none"}, False, 4, 1.0),
    ((3, 20000), "bfloat16", {}, False, 0, 1.0),
    ((8, 500), "float32", {}, False, 3, 100.0),
    ((6, 777), "float32", {"label_smoothing": 0.1}, True, 3, 1.0),
    ((6, 777), "bfloat16", {"reduction": "none", "label_smoothing": 0.2}, True, 2, 2.0),
    ((7, 999), "float32", {"reduction": "sum", "z_loss": 1e-3, "softcap": 30.0}, False, 0, 20.0),
    ((5, 640), "float16", {"label_smoothing": 0.1, "z_loss": 1e-2, "softcap": 15.0}, True, 3, 4.0),
]
INPLACE_CASES = (1, 2, 8)  # also run with inplace_backward: sum, none (per-row scale), every option
# reference.py sets each ModelNew is checked on (in the same child as the family's other checks):
# cross_entropy: none, weights + smoothing, every option, all rows ignored; linear: one row, none, softcap
MODEL_SETS = ([2, 7, 10, 11], [0, 2, 3])


# ------------------------------------------------------------------------------ child side


def _load(path: Path, name: str):
    from tests.helpers.interp_checks import load_file
    return load_file(path, name)


def _fast_dot() -> None:
    """In the child: the interpreter's tl.dot runs np.matmul with dtype=, which skips BLAS (~100x
    slower); fp32 operands go through BLAS instead (same products, fp32 accumulation)."""
    import numpy as np
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.create_dot
    if getattr(original, "fast_dot", False):
        return

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.data.dtype == np.float32 and b.data.dtype == np.float32 and d.data.dtype == np.float32:
            return interpreter.TensorHandle(np.matmul(a.data, b.data) + d.data, d.dtype.scalar)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot.fast_dot = True
    interpreter.InterpreterBuilder.create_dot = create_dot


def _rows(out, ref, ref64, **labels) -> dict:
    from tests.helpers.interp_checks import compare
    return dict(compare(out, ref, ref64), **labels)


def _ce_case(ce, ref, case: tuple, inplace: bool) -> list[dict]:
    import torch
    shape, dtype_name, options, weighted, every, scale = case
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(len(shape) + shape[-1])
    logits = (torch.randn(shape, generator=gen) * scale).to(dtype)
    target = torch.randint(0, shape[-1], shape[:-1], generator=gen)
    if every:
        target.view(-1)[::every] = -100
    weight = 0.5 + torch.rand(shape[-1], generator=gen) if weighted else None
    results = []
    for run, cast in (("ours", None), ("torch", None), ("f64", torch.float64)):
        x = logits.detach().clone().to(cast or dtype).requires_grad_()  # a copy: inplace_backward writes into it
        w = weight.to(cast) if (weight is not None and cast is not None) else weight
        if run == "ours":
            out = ce.cross_entropy(x, target, weight=w, inplace_backward=inplace, **options)
        else:
            out = ref.cross_entropy_reference(x, target, w, **options)
        g = torch.randn(out.shape, generator=torch.Generator().manual_seed(5)).to(out.dtype)
        out.backward(g)
        results.append((out.detach(), x.grad))
    (out, grad), (r, rgrad), (r64, g64) = results
    label = f"{shape} {dtype_name} {options} w={weighted} every={every} x{scale} inplace={inplace}"
    return [_rows(out, r, r64, what="out", case=label), _rows(grad, rgrad, g64, what="grad", case=label)]


def ce_checks() -> dict[str, Any]:
    """Every CE case, out of place and in place, plus the edge cases and the ops."""
    import torch
    import torch.nn.functional as F
    ce = _load(CE_DIR / "triton.py", "losses_ce_triton")
    ref = _load(CE_DIR / "reference.py", "losses_ce_reference")
    rows = [r for i, case in enumerate(CE_CASES) for inplace in (False, True) if i in INPLACE_CASES or not inplace
            for r in _ce_case(ce, ref, case, inplace)]

    x = torch.randn(4, 300, requires_grad=True)
    none_kept = ce.cross_entropy(x, torch.full((4,), -100))
    none_kept.backward()
    ignored = {"loss_is_nan": bool(torch.isnan(none_kept)), "grad_all_zero": bool((x.grad == 0).all()),
               "torch_is_nan": bool(torch.isnan(F.cross_entropy(x.detach(), torch.full((4,), -100))))}
    # exp(5000) overflows fp32 a thousand times over; the loss is (0 + log 2) / 2
    huge = ce.cross_entropy(torch.tensor([[1e4, -1e4, 0.0], [5e3, 5e3, -5e3]]), torch.tensor([0, 1]))
    x = torch.randn(3, 40)
    module = ce.CrossEntropyLoss(weight=torch.rand(40) + 0.5, label_smoothing=0.1)
    torch_module = torch.nn.CrossEntropyLoss(weight=module.weight, label_smoothing=0.1)
    t = torch.tensor([1, 2, -100])
    return {"rows": rows, "ignored": ignored, "huge": [float(huge), math.log(2.0) / 2],
            "module_close": bool(torch.allclose(module(x, t), torch_module(x, t), atol=1e-5)),
            "ops": _ce_ops(ce), "compiled": _ce_compiled(ce), "model": model_checks("cross_entropy", MODEL_SETS[0])}


def _ce_ops(ce) -> dict[str, Any]:
    import torch
    logits, target, w = torch.randn(4, 50), torch.tensor([1, -100, 49, 0]), torch.rand(50) + 0.5
    opts = (w, -100, "none", 0.1, 1e-3, 20.0)
    loss, lse, denom = torch.ops.kernelagent.cross_entropy_fwd(logits, target)
    calls = {"cross_entropy_fwd": [(logits, target), (logits, target, *opts)],
             "cross_entropy_bwd": [(logits, target, lse, denom, torch.tensor(2.0))],
             "cross_entropy_fused": [(logits, target), (logits, target, w, -100, "sum", 0.1, 1e-3, 20.0)],
             "cross_entropy_scale_": [(torch.randn(4, 50), torch.tensor(2.0))]}
    out = {}
    for name, arg_sets in calls.items():
        differentiable = name in ("cross_entropy_fwd", "cross_entropy_fused")
        utils = ("test_schema", "test_faketensor") + (("test_autograd_registration",) if differentiable else ())
        out[name] = all(v == "SUCCESS" for args in arg_sets for v in torch.library.opcheck(
            getattr(torch.ops.kernelagent, name), args, test_utils=utils).values())
    again = _load(CE_DIR / "triton.py", "losses_ce_triton_again")
    out["second_import_same"] = bool(torch.equal(again.cross_entropy(logits, target), ce.cross_entropy(logits, target)))
    out["denom"] = float(denom)
    return out


def _ce_compiled(ce) -> dict[str, bool]:
    """The public function under torch.compile (aot_eager: the interpreter cannot run Inductor's code)."""
    import torch
    import torch.nn.functional as F
    logits, target = torch.randn(4, 50), torch.tensor([1, -100, 49, 0])
    out = {}
    for inplace in (False, True):
        for reduction in ("mean", "none"):
            fn = torch.compile(lambda a, b, r=reduction, i=inplace: ce.cross_entropy(
                a * 1.0, b, reduction=r, label_smoothing=0.1, inplace_backward=i), backend="aot_eager", fullgraph=True)
            x, y = logits.clone().requires_grad_(), logits.clone().requires_grad_()
            got = fn(x, target)
            want = F.cross_entropy(y, target, reduction=reduction, label_smoothing=0.1)
            (got.sum() * 2).backward()
            (want.sum() * 2).backward()
            out[f"{reduction} inplace={inplace}"] = bool(torch.allclose(got, want, atol=1e-5)
                                                         and torch.allclose(x.grad, y.grad, atol=1e-5))
    return out


LCE_CASES = [  # rows, H, V, dtype, bias, options, chunk rows
    ((37,), 64, 300, "bfloat16", True, {"reduction": "sum"}, 16),
    ((2, 9), 64, 301, "float32", True, {"reduction": "none", "label_smoothing": 0.1, "z_loss": 1e-3}, 8),
    ((24,), 40, 259, "float32", False, {"softcap": 20.0}, 24),
    ((19,), 36, 255, "float32", True, {"reduction": "mean", "label_smoothing": 0.2}, 8),
]


def _lce_case(lce, ref, case: tuple) -> list[dict]:
    import torch
    import torch.nn.functional as F
    shape, h, v, dtype_name, has_bias, options, chunk = case
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(h + v)
    base = [torch.randn(*shape, h, generator=gen), torch.randn(v, h, generator=gen) / h**0.5]
    if has_bias:
        base.append(0.1 * torch.randn(v, generator=gen))
    target = torch.randint(0, v, shape, generator=gen)
    target.view(-1)[::4] = -100
    padded = -(-v // lce.ROW_PAD) * lce.ROW_PAD
    results = []
    for run, cast in (("ours", dtype), ("torch", dtype), ("f64", torch.float64)):
        xs = [t.detach().clone().to(dtype).to(cast).requires_grad_() for t in base]
        bias = xs[2] if has_bias else None
        if run == "ours":
            out = lce.linear_cross_entropy(xs[0], xs[1], target, bias=bias, gemm="triton",
                                           chunk_bytes=chunk * padded * xs[0].element_size(), **options)
        else:
            out = ref.cross_entropy_reference(F.linear(xs[0], xs[1], bias), target, **options)
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(out.dtype))
        results.append((out.detach(), [t.grad for t in xs]))
    (out, grads), (r, rgrads), (r64, grads64) = results
    label = f"{shape} H={h} V={v} {dtype_name} bias={has_bias} {options} chunk={chunk}"
    rows = [_rows(out, r, r64, what="out", case=label)]
    for name, a, b, c in zip(("dhidden", "dweight", "dbias"), grads, rgrads, grads64, strict=False):
        rows.append(_rows(a, b, c, what=name, case=label))
    return rows


def lce_checks() -> dict[str, Any]:
    import torch
    _fast_dot()
    lce = _load(LCE_DIR / "triton.py", "losses_lce_triton")
    ref = _load(LCE_DIR / "reference.py", "losses_lce_reference")
    rows = [r for case in LCE_CASES for r in _lce_case(lce, ref, case)]
    a, b = torch.randn(10, 36), torch.randn(36, 20)
    c = torch.empty(10, 20)
    paths = {}
    for name, aa, bb in (("plain", a, b), ("a_t", a.t().contiguous().t(), b), ("b_t", a, b.t().contiguous().t())):
        lce._matmul(aa, bb, c)
        paths[name] = float((c - a @ b).abs().max())
    d = torch.empty(10, 20)
    lce._matmul(a, b, d)
    lce._matmul(a, b, d, accumulate=True)
    paths["accumulate"] = float((d - 2 * (a @ b)).abs().max())
    return {"rows": rows, "gemm": paths, "ops": _lce_ops(lce), "compiled": _lce_compiled(lce, ref),
            "model": model_checks("linear_cross_entropy", MODEL_SETS[1])}


def _lce_ops(lce) -> dict[str, bool]:
    import torch
    h, w, b, t = torch.randn(6, 16), torch.randn(33, 16), torch.randn(33), torch.tensor([1, 2, -100, 4, 5, 32])
    calls = [("linear_cross_entropy_fwd", (h, w, t, b, None, -100, "mean", 0.1, 0.0, None, True, True, True),
              ("test_schema", "test_faketensor", "test_autograd_registration")),
             ("linear_cross_entropy_fwd", (h, w, t, None, None, -100, "none", 0.0, 1e-3, 10.0, True, True, False),
              ("test_schema", "test_faketensor", "test_autograd_registration")),
             ("linear_cross_entropy_bwd", (h, w, t, torch.randn(6), torch.randn(6), b), ("test_schema",
                                                                                         "test_faketensor"))]
    return {f"{i} {name}": all(v == "SUCCESS" for v in torch.library.opcheck(
        getattr(torch.ops.kernelagent, name), args, test_utils=utils).values())
        for i, (name, args, utils) in enumerate(calls)}


def _lce_compiled(lce, ref) -> bool:
    import torch
    import torch.nn.functional as F
    h, w, t = torch.randn(6, 16), torch.randn(33, 16), torch.tensor([1, 2, -100, 4, 5, 32])
    fn = torch.compile(lambda a, b, c: lce.linear_cross_entropy(a, b, c, label_smoothing=0.1, gemm="triton"),
                       backend="aot_eager", fullgraph=True)
    x, y = [h.clone().requires_grad_(), w.clone().requires_grad_()], [h.clone().requires_grad_(),
                                                                        w.clone().requires_grad_()]
    got = fn(x[0], x[1], t)
    want = ref.cross_entropy_reference(F.linear(y[0], y[1]), t, label_smoothing=0.1)
    (got * 3).backward()
    (want * 3).backward()
    return bool(torch.allclose(got, want, atol=1e-5) and all(torch.allclose(a.grad, b.grad, atol=1e-5)
                                                             for a, b in zip(x, y, strict=True)))


def model_checks(family: str, sets: list[int]) -> list[dict]:
    """ModelNew against the reference's Model on some of its own test inputs, with gradients."""
    import torch
    _fast_dot()
    folder = CE_DIR if family == "cross_entropy" else LCE_DIR
    lib = _load(folder / "triton.py", f"losses_{family}_lib")
    ref = _load(folder / "reference.py", f"losses_{family}_ref")
    inputs_all = ref.get_test_inputs()
    rows = []
    for index in sets:
        inputs = inputs_all[index]
        torch.manual_seed(index)
        model = ref.Model(*ref.get_init_inputs())
        new = lib.ModelNew(*ref.get_init_inputs())
        new.load_state_dict(model.state_dict())
        model64 = ref.Model(*ref.get_init_inputs()).double()
        model64.load_state_dict(model.state_dict())
        runs = []
        for m, cast in ((new, None), (model, None), (model64, torch.float64)):
            xs = [t.detach().clone().to(cast or t.dtype) if isinstance(t, torch.Tensor) and t.is_floating_point()
                  else t for t in inputs]
            x0 = xs[0].requires_grad_()
            out = m(*xs)
            out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(7)).to(out.dtype))
            runs.append((out.detach(), [x0.grad] + [p.grad for p in m.parameters()]))
        (out, grads), (r, rgrads), (r64, grads64) = runs
        rows.append(_rows(out, r, r64, what="out", case=f"{family} set {index}"))
        for k, (a, b, c) in enumerate(zip(grads, rgrads, grads64, strict=True)):
            rows.append(_rows(a, b, c, what=f"grad{k}", case=f"{family} set {index}"))
    return rows


# ----------------------------------------------------------------------------- parent side


def _failures(rows: list[dict]) -> list[str]:
    return [f"{r['case']} {r['what']}: {failure(r)}" for r in rows if failure(r)]


def _child(call: str) -> dict:
    code = ("from tests.helpers.interp import emit\n"
            "from tests.kernels import test_losses as t\n"
            f"emit({call})\n")
    return run_in_interpreter(code, timeout=900)


@pytest.fixture(scope="module")
def ce() -> dict:
    return _child("t.ce_checks()")


@pytest.fixture(scope="module")
def lce() -> dict:
    return _child("t.lce_checks()")


def test_cross_entropy_matches_float64_for_every_option(ce):
    rows = ce["rows"]
    assert len(rows) == 2 * (len(CE_CASES) + len(INPLACE_CASES))
    assert not _failures(rows), "\n".join(_failures(rows))


def test_cross_entropy_edge_cases(ce):
    # all rows ignored: NaN mean and a zero gradient, as torch; huge logits stay finite and exact
    assert ce["ignored"] == {"loss_is_nan": True, "grad_all_zero": True, "torch_is_nan": True}
    got, want = ce["huge"]
    assert math.isfinite(got) and abs(got - want) < 1e-3  # fp32 spacing at 5000 is 5e-4
    assert ce["module_close"]


def test_cross_entropy_ops_are_registered_and_traceable(ce):
    ops = ce["ops"]
    names = ("cross_entropy_fwd", "cross_entropy_bwd", "cross_entropy_fused", "cross_entropy_scale_")
    assert [n for n in names if ops[n] is not True] == []
    assert ops["second_import_same"] and ops["denom"] == 3.0  # one of four targets is -100
    assert ce["compiled"] == {f"{r} inplace={i}": True for i in (False, True) for r in ("mean", "none")}


def test_linear_cross_entropy_matches_float64(lce):
    rows = lce["rows"]
    assert len(rows) == sum(2 + case[4] + 1 for case in LCE_CASES)  # out, dhidden, dweight (+ dbias)
    assert not _failures(rows), "\n".join(_failures(rows))


def test_gemm_paths(lce):
    # TMA-shaped (16-byte rows) and masked paths, transposed operands, and accumulation into C
    assert all(err < 1e-4 for err in lce["gemm"].values()), lce["gemm"]


def test_linear_cross_entropy_ops(lce):
    assert all(lce["ops"].values()), lce["ops"]
    assert lce["compiled"]


@pytest.mark.parametrize("family", ["cross_entropy", "linear_cross_entropy"])
def test_model_new_matches_reference(family, request):
    rows = request.getfixturevalue("ce" if family == "cross_entropy" else "lce")["model"]
    sets = MODEL_SETS[family != "cross_entropy"]
    assert len(rows) >= 2 * len(sets)
    assert not _failures(rows), "\n".join(_failures(rows))


def test_failures_are_reported():
    # the tolerance check flags a wrong value and accepts a right one (so the tests above can fail)
    row = {"case": "x", "what": "out", "dtype": "torch.float32", "ref_dtype": "torch.float32", "shape": [2],
           "ref_shape": [2], "nan": False, "rel": 3e-4, "peak": 1e-5, "floor": 1e-7, "floor_peak": 1e-7}
    assert _failures([row]) and not _failures([dict(row, rel=1e-7)])


# ------------------------------------------------------------------------------ plain Python


def test_reference_adds_z_loss_and_softcap_as_documented():
    import torch
    import torch.nn.functional as F

    from tests.helpers.interp_checks import load_file
    ref = load_file(CE_DIR / "reference.py", "losses_ref_plain")
    x, t = torch.randn(5, 30, dtype=torch.float64), torch.tensor([1, 2, -100, 4, 29])
    capped = 7.0 * torch.tanh(x / 7.0)
    lse = torch.logsumexp(capped, -1)
    kept = t != -100
    want = F.cross_entropy(capped, t) + 1e-2 * (lse[kept] ** 2).mean()
    got = ref.cross_entropy_reference(x, t, None, "mean", 0.0, 1e-2, 7.0)
    assert torch.allclose(got, want)


def test_chunk_rows_follow_the_memory_budget():
    from tests.helpers.interp_checks import load_file
    lce = load_file(LCE_DIR / "triton.py", "losses_lce_plain")
    assert lce._chunk_rows(4096, 128256, 2, 512 << 20) == 2048  # the shape: two chunks
    assert lce._chunk_rows(100, 128256, 2, 512 << 20) == 100
    assert lce._chunk_rows(4096, 128256, 2, 1) == 1


def test_bad_arguments_raise_typed_errors():
    import torch

    from tests.helpers.interp_checks import load_file
    ce = load_file(CE_DIR / "triton.py", "losses_ce_plain")
    lce = load_file(LCE_DIR / "triton.py", "losses_lce_plain2")
    with pytest.raises(ValueError, match="reduction"):
        ce.cross_entropy(torch.randn(2, 5), torch.tensor([1, 2]), reduction="avg")
    with pytest.raises(TypeError, match="target"):
        ce.cross_entropy(torch.randn(2, 5), torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="leading shape"):
        ce.cross_entropy(torch.randn(2, 5), torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="gemm"):
        lce.linear_cross_entropy(torch.randn(2, 4), torch.randn(5, 4), torch.tensor([1, 2]), gemm="cutlass")


def test_cpu_path_is_plain_torch_and_matches():
    """Outside the interpreter, CPU tensors take the custom ops' torch implementation: same values and
    gradients as the reference, through opcheck, on meta tensors, for both families."""
    import torch
    import torch.nn.functional as F

    from tests.helpers.interp_checks import load_file
    ce = load_file(CE_DIR / "triton.py", "losses_ce_cpu")
    lce = load_file(LCE_DIR / "triton.py", "losses_lce_cpu")
    ref = load_file(CE_DIR / "reference.py", "losses_ce_cpu_ref")
    assert not ce.INTERPRETING and not lce.INTERPRETING
    x, t, w = torch.randn(6, 40, dtype=torch.float64), torch.tensor([1, -100, 3, 39, 0, 7]), torch.rand(40) + 0.5
    for options in ({}, {"reduction": "none", "label_smoothing": 0.1, "z_loss": 1e-2, "softcap": 5.0},
                    {"reduction": "sum", "label_smoothing": 0.2}):
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        got = ce.cross_entropy(a.float(), t, weight=w, **options)
        want = ref.cross_entropy_reference(b, t, w.double(), **options)
        g = torch.randn(got.shape, dtype=torch.float64)
        got.backward(g.float())
        want.backward(g)
        assert torch.allclose(got.double(), want, atol=1e-5) and torch.allclose(a.grad, b.grad, atol=1e-5), options
    h, wt, bias = torch.randn(5, 8), torch.randn(40, 8), torch.randn(40)
    hs = [h.clone().requires_grad_() for _ in range(2)]
    ws = [wt.clone().requires_grad_() for _ in range(2)]
    got = lce.linear_cross_entropy(hs[0], ws[0], t[:5], bias=bias, label_smoothing=0.1)
    want = F.cross_entropy(F.linear(hs[1], ws[1], bias), t[:5], label_smoothing=0.1)
    (got * 2).backward()
    (want * 2).backward()
    assert torch.allclose(got, want, atol=1e-5)
    assert torch.allclose(hs[0].grad, hs[1].grad, atol=1e-5) and torch.allclose(ws[0].grad, ws[1].grad, atol=1e-5)
    results = [torch.library.opcheck(torch.ops.kernelagent.cross_entropy_fused, (x.float(), t, w)),
               torch.library.opcheck(torch.ops.kernelagent.linear_cross_entropy_fwd,
                                     (h, wt, t[:5], bias, None, -100, "none", 0.0, 1e-3, None, True, True, True))]
    assert all(v == "SUCCESS" for r in results for v in r.values()), results
    meta = ce.cross_entropy(torch.empty(3, 7, 50, device="meta"), torch.empty(3, 7, dtype=torch.int64, device="meta"),
                            reduction="none")
    assert meta.shape == (3, 7) and meta.device.type == "meta"


# ---------------------------------------------------------------------------------- CuTe DSL

CUTE_CHILD = '''
import json, sys
from kernelagent.verifier.cute import support as cs
stats = {}
cs.install_hooks(stats)
import torch
from tests.helpers.interp_checks import load_file
failed = []
with cs.compile_only_mode(stats):
    ce = load_file(sys.argv[1], "losses_ce_cute")
    for shape, dtype, kw, weighted, inplace in json.loads(sys.argv[2]):
        x = torch.randn(shape, dtype=getattr(torch, dtype)).requires_grad_()
        t = torch.randint(0, shape[-1], shape[:-1])
        w = torch.rand(shape[-1]) if weighted else None
        try:
            out = ce.cross_entropy(x, t, weight=w, inplace_backward=inplace, **kw)
            out.backward(torch.ones_like(out))
        except Exception as e:
            failed.append([shape, dtype, kw, cs.classify_exception(e, sys.argv[1])[1][:2000]])
print("JSON:" + json.dumps({"failed": failed, "compiles": stats.get("cute_compiles", []),
                            "skipped": stats.get("cute_launches_skipped", 0)}, default=str))
'''

CUTE_CASES = [  # every kernel and every option flag, 128-bit and scalar vectors, wide vocabularies
    [[4, 128256], "bfloat16", {}, False, True],
    [[2, 3, 1001], "float16", {"reduction": "none", "label_smoothing": 0.1, "z_loss": 1e-3, "softcap": 30.0}, True,
     False],
    [[2, 262144], "bfloat16", {"reduction": "sum", "z_loss": 1e-3}, False, False],
    [[2, 300000], "bfloat16", {"label_smoothing": 0.1}, True, False],
]


@pytest.mark.cute
def test_cute_cross_entropy_compiles_for_sm90a_without_spills():
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a",  # the parent's path too: where CuTe DSL was unpacked
               PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    proc = subprocess.run([sys.executable, "-c", CUTE_CHILD, str(CE_DIR / "cute.py"), json.dumps(CUTE_CASES)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("JSON:")]
    assert lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][5:])
    assert not result["failed"], result["failed"]
    kernels = {c["kernel"].split("_tensor")[0] for c in result["compiles"]}
    assert {"kernel_cutlass__setup_kernel", "kernel_cutlass__ce_kernel", "kernel_cutlass__reduce_kernel",
            "kernel_cutlass__scale_kernel"} <= kernels, kernels
    assert all(c["target"] == "sm_90a" and not c["spills"] for c in result["compiles"]), result["compiles"]
    assert result["skipped"] >= 3 * len(CUTE_CASES)  # setup, rows and reduce or scale each time


LCE_CUTE_CHILD = '''
import json, sys
from kernelagent.verifier.cute import support as cs
stats = {}
cs.install_hooks(stats)
import torch
from tests.helpers.interp_checks import load_file
failed = []
with cs.compile_only_mode(stats):
    lce = load_file(sys.argv[1], "losses_lce_cute")
    # the three operand layouts of the chunk loop, each with and without pairs of columns (C's row stride)
    for m, n, k, a_t, b_t, bias, acc, c_cols in json.loads(sys.argv[2]):
        a = torch.randn(k, m).t() if a_t else torch.randn(m, k)
        b = torch.randn(n, k).t() if b_t else torch.randn(k, n)
        c = torch.empty(m, c_cols)[:, :n]
        try:
            lce.matmul(a.bfloat16(), b.bfloat16(), c.bfloat16(), torch.randn(n).bfloat16() if bias else None, acc)
        except Exception as e:
            failed.append([m, n, k, cs.classify_exception(e, sys.argv[1])[1][:2000]])
    model = lce.ModelNew(33, 1001)  # 66-byte rows: copied to aligned ones
    h = torch.randn(2, 37, 33, dtype=torch.bfloat16, requires_grad=True)
    t = torch.randint(0, 1001, (2, 37))
    for options in (["mean"], ["none", 0.1, 1e-3, 30.0], ["sum", 0.0, 0.0, None, 7]):
        try:
            model(h, t, *options).sum().backward()
        except Exception as e:
            failed.append([options, cs.classify_exception(e, sys.argv[1])[1][:2000]])
print("JSON:" + json.dumps({"failed": failed, "compiles": stats.get("cute_compiles", []),
                            "skipped": stats.get("cute_launches_skipped", 0)}, default=str))
'''
LCE_GEMM_CASES = [[300, 1001, 64, False, True, True, False, 1024], [130, 70, 1001, False, False, False, False, 70],
                  [1001, 72, 300, True, False, False, True, 72], [129, 33, 40, True, True, False, True, 33]]
SHARED_BEGIN, SHARED_END = "# ==== shared row kernels:", "# ==== end of the shared row kernels ===="


def test_lce_cute_shares_the_cross_entropy_row_kernels():
    """linear_cross_entropy/cute.py carries cross_entropy/cute.py's kernels unchanged (it must stand alone)."""
    blocks = []
    for folder in (CE_DIR, LCE_DIR):
        text = (folder / "cute.py").read_text()
        blocks.append(text[text.index(SHARED_BEGIN):text.index(SHARED_END)])
    assert "def _ce_kernel(" in blocks[0] and "def _setup_kernel(" in blocks[0]
    assert blocks[0] == blocks[1], "the shared row-kernel block differs between the two cute.py files"


@pytest.mark.cute
@pytest.mark.slow
def test_cute_linear_cross_entropy_compiles_for_sm90a_without_spills():
    """The CuTe DSL GEMM in every operand layout (edges, bias, accumulate, with and without paired
    columns) and ModelNew's forward and backward (mean, none with every option, sum with all rows
    ignored) compile for sm_90a with no GPU; launches recorded and skipped."""
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    proc = subprocess.run([sys.executable, "-c", LCE_CUTE_CHILD, str(LCE_DIR / "cute.py"), json.dumps(LCE_GEMM_CASES)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("JSON:")]
    assert lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][5:])
    assert not result["failed"], result["failed"]
    kernels = {c["kernel"].split("_tensor")[0].split("_object")[0] for c in result["compiles"]}
    assert {"kernel_cutlass__setup_kernel", "kernel_cutlass__ce_kernel", "kernel_cutlass__colsum_kernel",
            "kernel_cutlass__reduce_kernel"} <= kernels, kernels
    gemms = [c for c in result["compiles"] if "GemmSm90" in c["kernel"]]
    assert len(gemms) >= len(LCE_GEMM_CASES), kernels
    assert all(c["target"] == "sm_90a" and not c["spills"] for c in result["compiles"]), result["compiles"]
    assert result["skipped"] >= len(LCE_GEMM_CASES) + 3 * 4  # GEMMs, then setup, GEMM and rows per call at least


@pytest.mark.slow
def test_lce_cute_file_passes_the_static_policy():
    from kernelagent.verifier.policy.check import check_policy

    result = check_policy((LCE_DIR / "cute.py").read_text(), "cute.py")
    assert result.ok, "\n".join(f"{f.line}: {f.rule}: {f.snippet} ({f.message})" for f in result.findings)


# ------------------------------------------------------------------- sm_90a AOT of the GPU configs
# The interpreter runs the CPU configurations only; these are the ones the H200 runs.


def _aot(fn, types: dict[str, str], constexprs: dict[str, Any], warps: int, stages: int = 3,
         divisible: tuple[str, ...] = ()) -> dict[str, Any]:
    """Compile a @triton.jit kernel for sm_90a without a GPU; PTX text and ptxas's spill bytes.
    `divisible`: arguments the GPU JIT would see as multiples of 16 (pointers, V = 128256, strides)."""
    import re
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource
    signature = dict(types) | dict.fromkeys(constexprs, "constexpr")
    attrs = {(i,): CUDABackend.parse_attr("D") for i, p in enumerate(fn.params) if p.name in divisible}
    ck = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                        target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    ptx = ck.asm["ptx"]
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "k.ptx").write_text(ptx)
        log = subprocess.run([str(ptxas), "-v", "-arch=sm_90a", str(Path(d) / "k.ptx"), "-o", str(Path(d) / "k.o")],
                             capture_output=True, text=True, timeout=300)
    spills = [int(a) + int(b) for a, b in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                                                     log.stdout + log.stderr)]
    return {"ptx": ptx, "spills": max(spills, default=0), "ptxas_rc": log.returncode}


def _gemm_types(dtype: str) -> dict[str, str]:
    return {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{dtype}", "bias_ptr": f"*{dtype}",
            **dict.fromkeys(("M", "N", "K", "stride_a", "stride_b", "stride_c"), "i32")}


@pytest.mark.slow
@pytest.mark.parametrize("a_t,b_t,accumulate,bias", [(False, True, False, True), (False, False, False, False),
                                                     (True, False, True, False)])
def test_gemm_gpu_config_compiles_to_wgmma_and_tma(a_t, b_t, accumulate, bias):
    # the three GEMMs of a chunk: logits = h @ W.T (+ bias), dh = G @ W, dW += G.T @ h
    from tests.helpers.interp_checks import load_file
    lce = load_file(LCE_DIR / "triton.py", "losses_lce_aot")
    bm, bn, bk, group, warps, stages = lce.GEMM_CONFIGS[(2, True)]
    res = _aot(lce._gemm_kernel, _gemm_types("bf16"),
               {"A_T": a_t, "B_T": b_t, "ACCUMULATE": accumulate, "HAS_BIAS": bias, "TMA": True, "UPCAST": False,
                "IEEE": False, "BM": bm, "BN": bn, "BK": bk, "GROUP_M": group, "NUM_PROGRAMS": 132}, warps, stages)
    assert res["ptxas_rc"] == 0 and res["spills"] == 0
    assert "wgmma.mma_async" in res["ptx"] and "cp.async.bulk.tensor" in res["ptx"]


@pytest.mark.slow
def test_gemm_masked_and_fp32_configs_compile():
    from tests.helpers.interp_checks import load_file
    lce = load_file(LCE_DIR / "triton.py", "losses_lce_aot2")
    for dtype, elem, tma in (("bf16", 2, False), ("fp32", 4, True), ("fp32", 4, False)):
        bm, bn, bk, group, warps, stages = lce.GEMM_CONFIGS[(elem, tma)]
        for a_t, b_t, accumulate in ((True, False, True), (False, True, False), (False, False, False)):
            res = _aot(lce._gemm_kernel, _gemm_types(dtype),
                       {"A_T": a_t, "B_T": b_t, "ACCUMULATE": accumulate, "HAS_BIAS": True, "TMA": tma,
                        "UPCAST": False, "IEEE": dtype == "fp32", "BM": bm, "BN": bn, "BK": bk, "GROUP_M": group,
                        "NUM_PROGRAMS": 132}, warps, stages)
            assert res["ptxas_rc"] == 0 and res["spills"] == 0, (dtype, tma, a_t, b_t, res["spills"])


def _row_kernel_types(names: list[str], dtype: str) -> dict[str, str]:
    ptr = {"logits_ptr": f"*{dtype}", "grad_ptr": f"*{dtype}", "target_ptr": "*i64", "weight_ptr": "*fp32"}
    floats = ("eps", "z", "cap")
    return {n: ptr.get(n, "*fp32") if n.endswith("_ptr") else ("fp32" if n in floats else "i32") for n in names}


@pytest.mark.slow
@pytest.mark.parametrize("family", ["cross_entropy", "linear_cross_entropy"])
def test_row_kernels_gpu_configs_compile_without_spills(family):
    import re

    from tests.helpers.interp_checks import load_file
    folder = CE_DIR if family == "cross_entropy" else LCE_DIR
    lib = load_file(folder / "triton.py", f"losses_{family}_aot")
    if family == "cross_entropy":
        fn, (block, warps, _) = lib._ce_kernel, lib.CONFIGS["fused"]
        modes = [{"MODE": 1, "REDUCTION": 2}, {"MODE": 2, "REDUCTION": 0}]
    else:
        fn, (block, warps) = lib._rows_kernel, lib.CE_CONFIG
        modes = [{"MODE": 1, "MEAN": True}, {"MODE": 2, "MEAN": False}]
    names = [p.name for p in fn.params if not p.is_constexpr]
    for options in ({"HAS_WEIGHT": False, "SMOOTH": False, "HAS_Z": False, "HAS_SOFTCAP": False},
                    {"HAS_WEIGHT": True, "SMOOTH": True, "HAS_Z": True, "HAS_SOFTCAP": True}):
        for mode in modes:
            types = _row_kernel_types(names, "bf16")
            divisible = tuple(n for n in names if n.endswith("_ptr") or n in ("n_cols", "stride", "grad_stride"))
            res = _aot(fn, types, {**options, **mode, "BLOCK": block}, warps, divisible=divisible)
            assert res["ptxas_rc"] == 0 and res["spills"] == 0, (family, options, mode, res["spills"])
            # 128-bit loads, cache qualifiers allowed (ld.global.nc.v4, ld.global.L1::evict_last.L2::cache_hint.v4)
            assert re.search(r"ld\.global(\.[\w:]+)*\.v4\.", res["ptx"])


# ------------------------------------------------------------------- benchmarks/losses_peers.py cards


def _peers_result() -> dict[str, Any]:
    env = {"date": "2026-12-02", "gpu": "NVIDIA H200", "torch": "2.11", "triton": "3.6.0", "cutlass_dsl": "4.8.1"}
    ce = [("forward", "kernelagent-triton", 0.50), ("forward", "quack", 0.60),
          ("forward+backward", "kernelagent-triton", 1.30), ("forward+backward", "kernelagent-cute", 1.00),
          ("forward+backward", "liger", 2.1)]
    rows = [{"op": "cross_entropy", "mode": m, "impl": i, "median_ms": t} for m, i, t in ce]
    rows += [{"op": "cross_entropy", "mode": "forward", "impl": "liger", "error": "not importable here"},
             {"op": "cross_entropy", "sweep": "fused", "config": [1, 2, 3], "mode": "forward", "median_ms": 0.1},
             {"op": "linear_cross_entropy", "mode": "forward+backward", "impl": "kernelagent-cublas",
              "median_ms": 18.0, "peak_extra_gib": 0.6},
             {"op": "linear_cross_entropy", "mode": "forward+backward", "impl": "torch.compile", "median_ms": 19.4,
              "peak_extra_gib": 4.1}]
    return {"benchmark": "losses_peers", "environment": env, "method": "m", "rows": rows}


def test_peers_results_become_card_rows(tmp_path, monkeypatch):
    from benchmarks import losses_peers as lp
    data = _peers_result()
    ce = lp.card_rows(data, "cross_entropy", "src.json")
    assert [(r["backend"], r["mode"], r["median_ms"]) for r in ce] == [
        ("triton", "forward", 0.5), ("triton", "forward+backward", 1.3), ("cute", "forward+backward", 1.0)]
    assert ce[0]["peers_ms"] == {"quack": 0.6} and "misses" not in ce[0]  # the errored peer and the sweep are left out
    assert ce[1]["misses"].startswith("1.1 ms target by 0.200")
    [lce] = lp.card_rows(data, "linear_cross_entropy", "src.json")
    assert lce["variant"] == "cuBLAS GEMMs" and lce["peers_peak_extra_gib"] == {"torch.compile": 4.1}
    assert lce["misses"] == "17.0 ms target by 1.00 ms"  # 0.6 GiB is within the memory target
    # the cards are rewritten in place: the generated block replaced, the rest of card.md kept
    for family in ("cross_entropy", "linear_cross_entropy"):
        folder = tmp_path / "kernelagent" / "kernels" / family
        folder.mkdir(parents=True)
        (folder / "card.json").write_text(json.dumps({"name": family, "measured": []}))
        (folder / "card.md").write_text(f"# {family}\n\n{lp.BEGIN}\nold\n{lp.END}\n")
    (tmp_path / "r.json").write_text(json.dumps(data))
    monkeypatch.setattr(lp, "ROOT", tmp_path)
    assert lp.update_cards(tmp_path / "r.json") == ["cross_entropy", "linear_cross_entropy"]
    md = (tmp_path / "kernelagent" / "kernels" / "cross_entropy" / "card.md").read_text()
    assert md.startswith("# cross_entropy") and "old" not in md and lp.card_markdown(
        lp.card_rows(data, "cross_entropy", "r.json")) in md
    card = json.loads((tmp_path / "kernelagent" / "kernels" / "cross_entropy" / "card.json").read_text())
    assert card["measured"] == lp.card_rows(data, "cross_entropy", "r.json")
