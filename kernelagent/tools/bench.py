"""Time a candidate (or a library kernel) on a problem, optionally at other input shapes.

Timing is the verifier's own (the kernel must pass every check first; speed of a wrong kernel is
meaningless): `bench` verifies with timing on and returns the timing figures. Other shapes come from a
derived problem file: the original source plus a `get_inputs()` that redraws each tensor input at the
shape asked for, with the same dtype and the value range of the original (mean and spread for floats,
min..max for integers). Constructor arguments stay those of `get_init_inputs()`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from kernelagent.problem import inspect_problem
from kernelagent.tools.verify import InputError, existing_file, summary
from kernelagent.verifier.report import Report

TIMING_KEYS = ("candidate_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_eager_ci", "speedup_compile",
               "speedup_compile_ci", "faster_than_eager", "faster_than_compile", "roofline_pct", "roofline_bound",
               "roofline_floor_ms", "timing_method", "timed_calls")

_OVERRIDE = '''

# --- kernelagent bench: get_inputs() redrawn at the shapes asked for --------------------------------
import torch as _ka_torch

_KA_SHAPES = {shapes!r}
_ka_base_get_inputs = get_inputs


def _ka_like(x, shape):
    if x.is_floating_point():
        xf = x.double()
        mean = float(xf.mean()) if x.numel() else 0.0
        std = float(xf.std()) if x.numel() > 1 else 1.0
        return (mean + std * _ka_torch.randn(shape, dtype=_ka_torch.float64)).to(x.dtype)
    if x.dtype == _ka_torch.bool:
        return _ka_torch.rand(shape) < 0.5
    lo, hi = (int(x.min()), int(x.max())) if x.numel() else (0, 1)
    return _ka_torch.randint(lo, hi + 1, shape, dtype=x.dtype)


def get_inputs():
    base = list(_ka_base_get_inputs())
    at = [i for i, x in enumerate(base) if isinstance(x, _ka_torch.Tensor)]
    if len(at) != len(_KA_SHAPES):
        raise ValueError(f"{{len(_KA_SHAPES)}} shape(s) were given, but get_inputs() returns {{len(at)}} tensor(s)")
    for i, shape in zip(at, _KA_SHAPES):
        base[i] = _ka_like(base[i], shape)
    return base


def get_test_inputs():
    return [get_inputs()]
'''


def shaped_problem(problem: str | Path, shapes: list[list[int]], workdir: Path) -> Path:
    """A problem file like `problem` whose tensor inputs have `shapes` (one per tensor, in order)."""
    if not shapes or any(not s or any(not isinstance(d, int) or d < 1 for d in s) for s in shapes):
        raise InputError("shapes must be a list of shapes, one per tensor input, each a list of positive integers")
    spec = inspect_problem(existing_file(problem, "problem file"))
    text = spec.source.rstrip("\n") + "\n" + _OVERRIDE.format(shapes=[list(s) for s in shapes])
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    target = workdir / f"bench-{digest}" / f"{spec.name}.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def library_kernel(name: str, backend: str) -> tuple[Path, Path]:
    """A library entry's reference problem and its kernel file for `backend`."""
    from kernelagent.kernels import LibraryError, get_entry

    try:
        entry = get_entry(name)
    except LibraryError as e:
        raise InputError(str(e)) from e
    if backend not in entry.backends:
        raise InputError(f"{entry.name} has no {backend} kernel (it has: {', '.join(sorted(entry.backends))})")
    return entry.reference_path, entry.backends[backend]


def bench_result(report: Report, shapes: list[list[int]] | None) -> dict[str, Any]:
    """The timing figures of a verification, and why there are none when there are none."""
    m = report.metrics
    out: dict[str, Any] = {"verdict": report.verdict, "category": report.category, "summary": summary(report),
                           "problem": report.problem, "candidate": report.candidate, "shapes": shapes,
                           "environment": report.environment,
                           "timing": {k: m[k] for k in TIMING_KEYS if m.get(k) is not None}}
    if report.unverified:
        out["note"] = "the kernel compiled but could not be run without a GPU: neither verified nor timed"
        out["feedback"] = report.feedback
    elif not report.accepted:
        out["note"] = "the kernel was rejected, so it was not timed; see feedback"
        out["feedback"] = report.feedback
    elif not out["timing"].get("candidate_ms"):
        out["note"] = "speed is measured on a CUDA GPU only; this server runs on the CPU"
    return out
