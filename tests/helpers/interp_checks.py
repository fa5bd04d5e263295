"""Numerical checks of the example and library kernels, meant to run in an interpreter child
(see interp.py): each function returns JSON-able rows, and the parent test decides pass/fail.

Every output is compared with the reference run in float64 on upcast inputs (`rel`: norm-wise
relative error; `peak`: largest element error over the largest reference magnitude) and with the
reference run in the same dtype (`floor`, `floor_peak`: its own errors against float64).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_file(path: Path, name: str) -> ModuleType:
    """Import a .py file by path, as the verifier does with problem and candidate files."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cast(inputs: list[Any], dtype: torch.dtype) -> list[Any]:
    return [t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]


def _errors(out: torch.Tensor, ref64: torch.Tensor) -> dict[str, float]:
    diff = (out.double() - ref64).abs()
    scale = ref64.abs().max().clamp_min(1e-30)
    return {"rel": float(diff.norm() / ref64.norm().clamp_min(1e-30)), "peak": float(diff.max() / scale)}


def compare(out: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor) -> dict[str, Any]:
    """Error figures of `out` (and of the same-dtype reference `ref`) against `ref64`."""
    row = {"dtype": str(out.dtype), "ref_dtype": str(ref.dtype), "shape": list(out.shape),
           "ref_shape": list(ref.shape), "nan": bool(torch.isnan(out.float()).any())}
    if row["shape"] == row["ref_shape"]:
        row.update(_errors(out, ref64))
        floor = _errors(ref, ref64)
        row.update(floor=floor["rel"], floor_peak=floor["peak"])
    return row


# ------------------------------------------------------------------------------------- examples


def check_example(name: str, kernel_file: str = "kernel.py", dtypes: tuple[str, ...] = ("float32", "bfloat16")):
    """ModelNew of examples/<name>/<kernel_file> against Model on every get_test_inputs() set."""
    folder = ROOT / "examples" / name
    op = load_file(folder / "op.py", f"example_{name}_op")
    kn = load_file(folder / kernel_file, f"example_{name}_{Path(kernel_file).stem}")
    rows = []
    for dtype_name in dtypes:
        dtype = DTYPES[dtype_name]
        for index, inputs in enumerate(op.get_test_inputs()):
            torch.manual_seed(index)
            model = op.Model(*op.get_init_inputs()).to(dtype)
            new = kn.ModelNew(*op.get_init_inputs()).to(dtype)
            new.load_state_dict(model.state_dict())
            inputs = _cast(inputs, dtype)
            before = [t.clone() for t in inputs]
            start = time.perf_counter()
            with torch.no_grad():
                out = new(*inputs)
                again = new(*inputs)
                seconds = time.perf_counter() - start
                ref = model(*inputs)
                ref64 = model.double()(*_cast(inputs, torch.float64))
            row = compare(out, ref, ref64)
            row.update(set=index, dtype_name=dtype_name, seconds=round(seconds, 3),
                       deterministic=bool(torch.equal(out, again)),
                       inputs_unchanged=all(torch.equal(a, b) for a, b in zip(before, inputs, strict=True)))
            rows.append(row)
    return rows


def check_example_model_wide(width: int = 20000) -> list[dict[str, Any]]:
    """The RMSNorm example's column loop: hidden sizes are fixed by the weight, so build a wide one."""
    folder = ROOT / "examples" / "rms_norm"
    op = load_file(folder / "op.py", "example_rms_wide_op")
    kn = load_file(folder / "kernel.py", "example_rms_wide_kernel")
    torch.manual_seed(0)
    model = op.Model(width).float()
    new = kn.ModelNew(width).float()
    new.load_state_dict(model.state_dict())
    x = torch.randn(3, width)
    with torch.no_grad():
        row = compare(new(x), model(x), model.double()(x.double()))
    return [dict(row, dtype_name="float32", set="wide")]


# -------------------------------------------------------------------------------------- library


def _lib(family: str) -> tuple[ModuleType, ModuleType]:
    folder = ROOT / "kernelagent" / "kernels" / family
    return (load_file(folder / "triton.py", f"lib_{family}_triton"),
            load_file(folder / "reference.py", f"lib_{family}_reference"))


def _fwd_bwd(fn, inputs: list[Any], grad_of: tuple[int, ...], problem: torch.dtype, run: torch.dtype):
    """Output and gradients of fn for inputs and a fixed output gradient, both first rounded to the
    problem's dtype, then run in `run` (the problem's dtype, or float64 for the truth)."""
    leaves = [t.detach().to(problem).to(run).requires_grad_(i in grad_of) if t.is_floating_point() else t
              for i, t in enumerate(inputs)]
    out = fn(*leaves)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(problem).to(run)
    out.backward(g)
    return out.detach(), [leaves[i].grad for i in grad_of]


def _check_fn(family: str, fn, ref_fn, inputs: list[Any], grad_of: tuple[int, ...], dtype_name: str,
              label: str) -> list[dict[str, Any]]:
    dtype = DTYPES[dtype_name]
    out, grads = _fwd_bwd(fn, inputs, grad_of, dtype, dtype)
    ref, ref_grads = _fwd_bwd(ref_fn, inputs, grad_of, dtype, dtype)
    ref64, grads64 = _fwd_bwd(ref_fn, inputs, grad_of, dtype, torch.float64)
    rows = [dict(compare(out, ref, ref64), family=family, what="out", case=label, dtype_name=dtype_name)]
    for i, g, rg, g64 in zip(grad_of, grads, ref_grads, grads64, strict=True):
        rows.append(dict(compare(g, rg, g64), family=family, what=f"grad{i}", case=label, dtype_name=dtype_name))
    return rows


SOFTMAX_SHAPES = [(1, 1000), (5, 1023), (2, 3, 513), (3, 17000), (1, 40000)]
RMS_SHAPES = [(1, 1000), (5, 1023), (2, 3, 513), (9, 300), (3, 9000), (2, 20000)]
CE_CASES = [(1, 1000, 1.0), (5, 1023, 1.0), (5, 1025, 1.0), (3, 20000, 1.0), (4, 500, 40.0), (16, 3000, 1.0)]


def _ce_inputs(n: int, v: int, scale: float, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, v, (n,), generator=gen)
    if n >= 8:
        targets[::3] = -100
    return [torch.randn(n, v, generator=gen) * scale, targets]


def check_library_functions(dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> list[dict[str, Any]]:
    """softmax, rms_norm and cross_entropy (forward and backward) against torch autograd."""
    sm, _ = _lib("softmax")
    rn, _ = _lib("rms_norm")
    ce, _ = _lib("cross_entropy")
    rows = []
    for dtype_name in dtypes:
        for shape in SOFTMAX_SHAPES:
            x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
            rows += _check_fn("softmax", sm.softmax, lambda t: torch.softmax(t, -1), [x], (0,), dtype_name,
                              str(shape))
        for shape in RMS_SHAPES:
            gen = torch.Generator().manual_seed(0)
            x, w = torch.randn(shape, generator=gen), 1.0 + 0.1 * torch.randn(shape[-1], generator=gen)
            rows += _check_fn("rms_norm", lambda t, u: rn.rms_norm(t, u, 1e-6),
                              lambda t, u: F.rms_norm(t, u.shape, u, 1e-6), [x, w], (0, 1), dtype_name, str(shape))
        for n, v, scale in CE_CASES:
            rows += _check_fn("cross_entropy", ce.cross_entropy, F.cross_entropy, _ce_inputs(n, v, scale, 0), (0,),
                              dtype_name, f"({n}, {v}) x{scale}")
    return rows


def check_library_models() -> list[dict[str, Any]]:
    """Each family's ModelNew against its reference Model on the reference's own test inputs,
    forward and backward (inputs and parameters), in the reference's dtypes."""
    rows = []
    for family in ("softmax", "rms_norm", "cross_entropy"):
        lib, ref = _lib(family)
        for index, inputs in enumerate(ref.get_test_inputs()):
            torch.manual_seed(index)
            model = ref.Model(*ref.get_init_inputs())
            new = lib.ModelNew(*ref.get_init_inputs())
            new.load_state_dict(model.state_dict())
            model64 = ref.Model(*ref.get_init_inputs()).double()
            model64.load_state_dict(model.state_dict())
            results = []
            for m, cast in ((new, None), (model, None), (model64, torch.float64)):
                xs = [t.detach().clone() for t in (inputs if cast is None else _cast(inputs, cast))]
                xs = [t.requires_grad_() if t.is_floating_point() else t for t in xs]
                out = m(*xs)
                g = torch.randn(out.shape, generator=torch.Generator().manual_seed(7)).to(out.dtype)
                out.backward(g)
                grads = [t.grad for t in xs if t.is_floating_point()] + [p.grad for p in m.parameters()]
                results.append((out.detach(), grads))
            (out, grads), (r, rgrads), (r64, grads64) = results
            rows.append(dict(compare(out, r, r64), family=family, what="out", set=index))
            for k, (a, b, c) in enumerate(zip(grads, rgrads, grads64, strict=True)):
                rows.append(dict(compare(a, b, c), family=family, what=f"grad{k}", set=index))
    return rows


def check_custom_ops() -> dict[str, Any]:
    """The registered ops exist, pass torch.library.opcheck (schema, fake tensors), survive a second
    import of the same file, and trace under torch.compile (eager backend)."""
    sm, _ = _lib("softmax")
    rn, _ = _lib("rms_norm")
    ce, _ = _lib("cross_entropy")
    x = torch.randn(3, 100)
    w = torch.randn(100)
    logits, targets = torch.randn(4, 50), torch.tensor([1, -100, 49, 0])
    y, rstd = torch.ops.kernelagent.rms_norm_fwd(x, w, 1e-6)
    loss, lse, count = torch.ops.kernelagent.cross_entropy_fwd(logits, targets)
    calls = {
        "softmax_fwd": (x,),
        "softmax_bwd": (torch.softmax(x, -1), torch.randn(3, 100)),
        "rms_norm_fwd": (x, w, 1e-6),
        "rms_norm_bwd": (x, w, torch.randn(3, 100), rstd),
        "cross_entropy_fwd": (logits, targets),
        "cross_entropy_bwd": (logits, targets, lse, count, torch.tensor(1.0)),
    }
    opcheck = {}
    for name, args in calls.items():
        res = torch.library.opcheck(getattr(torch.ops.kernelagent, name), args,
                                    test_utils=("test_schema", "test_faketensor"))
        opcheck[name] = all(v == "SUCCESS" for v in res.values())
    again = load_file(ROOT / "kernelagent" / "kernels" / "softmax" / "triton.py", "lib_softmax_triton_again")
    second_import_ok = bool(torch.allclose(again.softmax(x), torch.softmax(x, -1), atol=1e-6))
    compiled = torch.compile(sm.softmax, backend="eager", fullgraph=True)
    compiled_ok = bool(torch.allclose(compiled(x), torch.softmax(x, -1), atol=1e-6))
    return {"opcheck": opcheck, "second_import_ok": second_import_ok, "compiled_ok": compiled_ok,
            "ce_loss_dtype": str(loss.dtype), "ce_count": float(count), "rms_rstd_shape": list(rstd.shape),
            "rms_y_close": bool(torch.allclose(y, F.rms_norm(x, (100,), w, 1e-6), atol=1e-5))}
