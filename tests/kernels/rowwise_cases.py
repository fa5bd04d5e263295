"""Cases for the row-wise library kernels (softmax, log_softmax, rms_norm, rms_norm_add, layer_norm):
inputs, the torch reference, and a check that compares one implementation's outputs and gradients
with the reference run in float64 (`rel`, `peak`) and in the problem's own dtype (`floor`, the
noise torch itself makes). Used in the interpreter child (Triton on CPU) and on the GPU (both
backends); tests/helpers/tolerance.py decides pass or fail from the rows.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from tests.helpers.interp_checks import compare

OPS = ("softmax", "log_softmax", "rms_norm", "rms_norm_add", "layer_norm")
EPS = {"rms_norm": 1e-6, "rms_norm_add": 1e-6, "layer_norm": 1e-5}


def reference(op: str) -> Callable[..., Any]:
    """torch's own computation of `op` on (x, *params)."""
    eps = EPS.get(op)
    return {
        "softmax": lambda x: torch.softmax(x, -1),
        "log_softmax": lambda x: torch.log_softmax(x, -1),
        "rms_norm": lambda x, w=None: F.rms_norm(x, x.shape[-1:], w, eps),
        "rms_norm_add": lambda x, r, w=None: (F.rms_norm(x + r, x.shape[-1:], w, eps), x + r),
        "layer_norm": lambda x, w=None, b=None: F.layer_norm(x, x.shape[-1:], w, b, eps),
    }[op]


def ours(module: Any, op: str) -> Callable[..., Any]:
    """The library function of `op` in a kernel module (triton.py or cute.py), with the test's eps."""
    eps = EPS.get(op)
    return {
        "softmax": lambda x: module.softmax(x),
        "log_softmax": lambda x: module.log_softmax(x),
        "rms_norm": lambda x, w=None: module.rms_norm(x, w, eps),
        "rms_norm_add": lambda x, r, w=None: module.rms_norm_add(x, r, w, eps),
        "layer_norm": lambda x, w=None, b=None: module.layer_norm(x, w, b, eps),
    }[op]


def inputs(op: str, shape: tuple[int, ...], variant: str = "", seed: int = 0) -> list[torch.Tensor | None]:
    """fp32 inputs of `op` for an x of `shape`. Variants: 'no_weight', 'no_bias', 'offset' (x + 30:
    a one-pass variance cancels), 'large' (x * 40: softmax near one-hot), 'strided' (see _run)."""
    gen = torch.Generator().manual_seed(seed)
    n = shape[-1]
    x = torch.randn(shape, generator=gen)
    x = x + 30.0 if variant == "offset" else x * 40.0 if variant == "large" else x
    w = None if variant == "no_weight" else 1.0 + 0.1 * torch.randn(n, generator=gen)
    b = None if variant in ("no_bias", "no_weight") else 0.1 * torch.randn(n, generator=gen)
    if op in ("softmax", "log_softmax"):
        return [x]
    if op == "rms_norm":
        return [x, w]
    if op == "rms_norm_add":
        return [x, torch.randn(shape, generator=gen), w]
    return [x, w, b]


PAD = 37  # strided inputs: x is columns [5, 5 + n) of a tensor n + PAD wide (its row stride is not n)


def _leaf(t: torch.Tensor, dtype: torch.dtype, device: str, strided: bool) -> tuple[torch.Tensor, Any]:
    """(the input, a function giving its gradient after backward)."""
    if not strided:
        leaf = t.detach().to(dtype).to(device).clone().requires_grad_()
        return leaf, lambda: leaf.grad
    n = t.shape[-1]
    wide = torch.zeros(*t.shape[:-1], n + PAD, dtype=dtype, device=device)
    wide[..., 5:5 + n] = t.detach().to(dtype).to(device)
    wide.requires_grad_()
    return wide[..., 5:5 + n], lambda: wide.grad[..., 5:5 + n]


def _run(fn: Callable[..., Any], xs: list[torch.Tensor | None], dtype: torch.dtype, device: str, seed: int,
         strided: bool) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """Outputs and input gradients of fn, inputs rounded to `dtype` and run in `dtype` (float64: the
    truth, from the same rounded values)."""
    leaves = [None if t is None else _leaf(t, dtype, device, strided and i == 0) for i, t in enumerate(xs)]
    out = fn(*[None if lf is None else lf[0] for lf in leaves])
    outs = list(out) if isinstance(out, tuple) else [out]
    gen = torch.Generator().manual_seed(seed + 1)
    loss = sum((o.float() * torch.randn(o.shape, generator=gen).to(o.dtype).to(device).float()).sum() for o in outs)
    loss.backward()
    return [o.detach() for o in outs], [None if lf is None else lf[1]() for lf in leaves]


def check(op: str, impl: Callable[..., Any], shape: tuple[int, ...], dtype: torch.dtype, variant: str = "",
          device: str = "cpu", seed: int = 0) -> list[dict[str, Any]]:
    """Rows of error figures for every output and gradient of `impl` against torch."""
    xs = [None if t is None else t.to(dtype) for t in inputs(op, shape, variant, seed)]
    strided = variant == "strided"
    got, got_g = _run(impl, xs, dtype, device, seed, strided)
    ref, ref_g = _run(reference(op), xs, dtype, device, seed, strided)
    ref64, ref64_g = _run(reference(op), xs, torch.float64, device, seed, strided)
    label = {"op": op, "case": f"{tuple(shape)} {variant}".strip(), "dtype_name": str(dtype).split(".")[-1]}
    rows = [dict(compare(g, r, r64), what=f"out{i}", **label)
            for i, (g, r, r64) in enumerate(zip(got, ref, ref64, strict=True))]
    for i, (g, r, r64) in enumerate(zip(got_g, ref_g, ref64_g, strict=True)):
        if xs[i] is None:  # no such input (no weight, no bias)
            continue
        if i == 0 and op.startswith("rms_norm") and shape[-1] == 1:
            continue  # d rms_norm / dx of one element is ~eps/x^2: fp32 cancellation, no meaningful error
        row = compare(g, r, r64) if g is not None else {"dtype": "None", "ref_dtype": str(xs[i].dtype), "shape": [],
                                                        "ref_shape": list(xs[i].shape), "nan": False}
        rows.append(dict(row, what=f"grad{i}", **label))
    return rows


# (op, shape, variant, dtypes): the paths each kernel file has (several rows per program / CTA, odd
# widths, one row per program in registers, the column loops, a 3-D input, strides); each case in
# one or two dtypes to keep the interpreter's time down (the dtype changes no path there). Widths 1
# and 3 in fp32 and bf16, over several row tiles (70 rows: two forward tiles of 64 one-column rows).
F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
TINY = (F32, BF16)
INTERP_CASES = [
    ("softmax", (1, 1), "", (F32,)), ("softmax", (70, 1), "", TINY), ("softmax", (37, 3), "", TINY),
    ("softmax", (5, 1023), "", (F32, BF16)), ("softmax", (2, 3, 513), "", (F16,)),
    ("softmax", (3, 1000), "looped", (BF16,)), ("softmax", (6, 100), "strided", (F32,)),
    ("softmax", (9, 300), "large", (F32,)),
    ("log_softmax", (1, 1), "", (BF16,)), ("log_softmax", (70, 1), "", TINY), ("log_softmax", (37, 3), "", TINY),
    ("log_softmax", (5, 1023), "", (BF16,)), ("log_softmax", (3, 1000), "looped", (F32,)),
    ("log_softmax", (6, 100), "strided", (BF16,)),
    ("rms_norm", (70, 1), "", TINY), ("rms_norm", (37, 3), "", TINY), ("rms_norm", (5, 1023), "", (F32, BF16)),
    ("rms_norm", (2, 3, 513), "", (F16,)), ("rms_norm", (7, 1000), "looped", (BF16,)),
    ("rms_norm", (9, 100), "no_weight", (F32,)), ("rms_norm", (6, 100), "strided", (BF16,)),
    ("rms_norm_add", (70, 1), "", TINY), ("rms_norm_add", (37, 3), "", TINY), ("rms_norm_add", (5, 1023), "", (BF16,)),
    ("rms_norm_add", (7, 1000), "looped", (F32,)), ("rms_norm_add", (9, 100), "no_weight", (BF16,)),
    ("layer_norm", (1, 1), "", (BF16,)), ("layer_norm", (70, 1), "", TINY), ("layer_norm", (37, 3), "", TINY),
    ("layer_norm", (5, 1023), "", (F32, BF16)),
    ("layer_norm", (7, 1000), "looped", (BF16,)), ("layer_norm", (9, 100), "no_weight", (F32,)),
    ("layer_norm", (9, 100), "no_bias", (BF16,)), ("layer_norm", (5, 2000), "offset", (F32,)),
    ("layer_norm", (6, 100), "strided", (F16,)),
]

# GPU: every op x dtype x odd and power-of-two widths from 1 to 262144 (few rows: the point is the
# paths, not the bandwidth), plus the variants.
GPU_WIDTHS = (1, 3, 127, 1000, 1023, 4096, 8192, 20000, 32769, 65536, 131071, 262144)
GPU_VARIANTS = [("softmax", "large"), ("softmax", "strided"), ("log_softmax", "strided"), ("rms_norm", "no_weight"),
                ("rms_norm", "strided"), ("rms_norm_add", "no_weight"), ("layer_norm", "no_weight"),
                ("layer_norm", "no_bias"), ("layer_norm", "offset"), ("layer_norm", "strided")]


def gpu_shape(width: int) -> tuple[int, ...]:
    """A few rows: more when they are short, so multi-row tiles and partial last tiles show up."""
    rows = 3 if width > 20000 else 37 if width > 1000 else 301
    return (rows, width)


def failures(rows: list[dict[str, Any]]) -> list[str]:
    """The rows that fail the tolerance rule, one line each."""
    from tests.helpers.tolerance import failure

    return [f"{r['op']} {r['case']} {r['dtype_name']} {r['what']}: {failure(r)}" for r in rows if failure(r)]


# ------------------------------------------------------------------------ the interpreter child's checks


FAMILY_OF = {"softmax": "softmax", "log_softmax": "log_softmax", "rms_norm": "rms_norm",
             "rms_norm_add": "rms_norm", "layer_norm": "layer_norm"}


def triton_modules() -> dict[str, Any]:
    import importlib

    return {f: importlib.import_module(f"kernelagent.kernels.{f}.triton") for f in sorted(set(FAMILY_OF.values()))}


# The interpreter runs wide rows slowly: the column loops are reached at small widths by shrinking
# the launch tables ('looped' cases): rows wider than 64 then loop over 64-column blocks.
SMALL_TABLES = {"FWD_TABLE": ((64, 64, 4),), "BWD_TABLE": ((64, 16, 4, 4),), "LOOP_FWD": (64, 4),
                "LOOP_BWD": (64, 4)}


@contextlib.contextmanager
def small_tables(module: Any):
    saved = {k: getattr(module, k) for k in SMALL_TABLES}
    for k, v in SMALL_TABLES.items():
        if k == "BWD_TABLE" and len(saved[k][0]) == 3:  # softmax's backward entries have no programs per SM
            v = ((64, 16, 4),)
        if k == "LOOP_BWD" and len(saved[k]) == 3:  # the norms' looped backward: (block, warps, per SM)
            v = (64, 4, 1)
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


def interp_functions() -> list[dict[str, Any]]:
    """Every INTERP_CASES case through the public functions (and so the registered ops)."""
    mods = triton_modules()
    rows = []
    for op, shape, variant, dtypes in INTERP_CASES:
        module = mods[FAMILY_OF[op]]
        with small_tables(module) if variant == "looped" else contextlib.nullcontext():
            for dtype in dtypes:
                rows += check(op, ours(module, op), shape, dtype, variant)
    return rows


def _op_samples() -> dict[str, tuple]:
    x, r, dy = torch.randn(5, 33), torch.randn(5, 33), torch.randn(5, 33)
    w, b = torch.randn(33), torch.randn(33)
    rstd = torch.rand(5) + 0.5
    mean = torch.randn(5)
    return {
        "softmax_fwd": (x.clone().requires_grad_(),), "softmax_bwd": (torch.softmax(x, -1), dy),
        "log_softmax_fwd": (x.clone().requires_grad_(),), "log_softmax_bwd": (torch.log_softmax(x, -1), dy),
        "rms_norm_fwd": (x.clone().requires_grad_(), w.clone().requires_grad_(), 1e-6),
        "rms_norm_bwd": (x, w, dy, rstd), "rms_norm_add_fwd": (x.clone().requires_grad_(), r, w, 1e-6),
        "rms_norm_add_bwd": (x, w, dy, r, rstd),
        "layer_norm_fwd": (x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_(), 1e-5),
        "layer_norm_bwd": (x, w, b, dy, mean, rstd),
    }


def opcheck_all(names: tuple[str, ...] | None = None, prefix: str = "") -> dict[str, dict[str, str]]:
    """torch.library.opcheck (schema, autograd registration, fake tensors, AOT dispatch) of the ops."""
    out = {}
    for name, args in _op_samples().items():
        if names is None or name in names:
            op = getattr(torch.ops.kernelagent, prefix + name)
            out[prefix + name] = {k: str(v) for k, v in torch.library.opcheck(op, args).items()}
    return out


FWD_OPS = ("softmax_fwd", "log_softmax_fwd", "rms_norm_fwd", "rms_norm_add_fwd", "layer_norm_fwd")


def interp_extras() -> dict[str, Any]:
    """Each triton.py's ModelNew (the verifier's entry point: the kernels without the op dispatcher)
    against its reference.py, forward and backward, and opcheck of the forward ops (whose AOT check
    runs the backward ops too): on CPU tensors, so through the interpreted kernels."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "kernelagent" / "kernels"
    models = {}
    for family in ("softmax", "log_softmax", "rms_norm", "layer_norm"):
        spec = importlib.util.spec_from_file_location(f"ref_{family}", root / family / "reference.py")
        ref = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ref)
        new = triton_modules()[family].ModelNew(*ref.get_init_inputs())
        model = ref.Model(*ref.get_init_inputs())
        new.load_state_dict(model.state_dict())
        x = ref.get_test_inputs()[1][0]
        rows = []
        for m, cast in ((new, None), (model, None), (copy.deepcopy(model).double(), torch.float64)):
            xx = (x if cast is None else x.to(cast)).clone().requires_grad_()
            y = m(xx)
            y.backward(torch.ones_like(y))
            rows.append((y.detach(), xx.grad))
        models[family] = [dict(compare(a, b, c), what=what, op=family, case="ModelNew", dtype_name=str(x.dtype))
                          for what, a, b, c in zip(("out", "grad0"), rows[0], rows[1], rows[2], strict=True)]
    return {"models": [r for rs in models.values() for r in rs], "opcheck": opcheck_all(FWD_OPS)}
