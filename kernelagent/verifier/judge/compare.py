"""Comparing a candidate's outputs with the reference, in the parent process.

The reference runs in float64 on upcast inputs (the truth) and in the problem's own dtype (the noise
floor: its own error against float64). A candidate may err by a modest multiple of that floor, and
never by more than the per-dtype defaults unless the problem sets TOLERANCE; fp16 arithmetic in an
fp32 problem therefore fails even where a loose absolute tolerance would have let it through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelagent.verifier.tensorio import as_real

# atol (scaled by max(1, rms of the reference)), rtol, and the band for the relative L2 error.
DTYPE_DEFAULTS: dict[torch.dtype, dict[str, float]] = {
    torch.float64: {"atol": 1e-9, "rtol": 1e-7, "l2_min": 1e-10, "l2_cap": 1e-8},
    torch.float32: {"atol": 1e-5, "rtol": 1e-4, "l2_min": 1e-5, "l2_cap": 1e-4},
    torch.float16: {"atol": 1e-3, "rtol": 1e-2, "l2_min": 1e-3, "l2_cap": 5e-3},
    torch.bfloat16: {"atol": 1e-2, "rtol": 2e-2, "l2_min": 8e-3, "l2_cap": 2e-2},
}
FLOOR_MULT = 4.0        # a candidate may err up to this multiple of the reference's own error (L2)
ELEM_FLOOR_MULT = 4.0   # ... and, element-wise, of the reference's own error at that element
WORST_MULT = 2.0        # or, no less accurate than the reference in L2, this multiple of its worst element error
RESCUE_MAX_FRAC = 0.005  # ... for at most this fraction of the leaf's elements,
RESCUE_ATOL_MULT = 8.0   # ... each off by at most this multiple of the dtype's atol at the leaf's scale
SIZE_REL_MULT = 8.0      # 16-bit outputs: error relative to each element's size, in RMS, within this multiple of
SIZE_REL_DTYPES = (torch.float16, torch.bfloat16)  # the reference's (or the dtype's rtol): _small_elements_hold
# A reference whose own error (rel L2, native dtype against float64) reaches this is about as far from the
# truth as zeros are: on such inputs the leaf is not judged (any bound that lets the reference pass lets a
# constant pass too); it must still be finite. Attention's gradients of q and k on the scaled-and-shifted
# trial (scores in the tens of thousands) had a bf16 reference at rel L2 900 to 2.7e5 (red-team review 4).
UNINFORMATIVE_FLOOR = 0.5


@dataclass
class LeafResult:
    name: str
    ok: bool
    kind: str = "ok"            # ok | mismatch | nan_inf | shape | dtype | type | missing
    message: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    rel_l2: float = 0.0
    allowed_l2: float | None = None
    floor_l2: float | None = None
    frac_bad: float = 0.0
    worst_index: list[int] = field(default_factory=list)
    rows: str = ""
    nan_mask: Any = None         # positions where the candidate is non-finite and the reference is not
    judged: bool = True          # False where the inputs were too ill-conditioned to judge this leaf

    def summary(self) -> str:
        if self.ok and self.message:
            return f"{self.name}: ok, {self.message}"
        if self.ok:
            return f"{self.name}: ok (rel L2 {self.rel_l2:.2e}, max abs {self.max_abs:.2e})"
        return f"{self.name}: {self.message}"


def defaults_for(dtype: torch.dtype) -> dict[str, float]:
    return DTYPE_DEFAULTS.get(dtype, DTYPE_DEFAULTS[torch.float32])


def allowed_rel_l2(dtype: torch.dtype, floor_l2: float) -> float:
    """The relative L2 error a leaf of `dtype` may have when the reference in that dtype errs by `floor_l2`:
    a modest multiple of that floor within the dtype's band, never less than twice the floor."""
    d = defaults_for(dtype)
    return max(min(d["l2_cap"], max(d["l2_min"], FLOOR_MULT * floor_l2)), 2.0 * floor_l2)


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    denom = float(b.norm())
    num = float((a - b).norm())
    return num / denom if denom > 0 else num


def _rows(got: torch.Tensor, exp: torch.Tensor, idx: list[int], n: int = 6) -> str:
    """A few values around the worst element, expected vs got."""
    if got.dim() == 0:
        return f"expected {exp.item():.6g}, got {got.item():.6g}"
    row_exp, row_got = exp, got
    for i in idx[:-1]:
        row_exp, row_got = row_exp[i], row_got[i]
    j = idx[-1]
    lo = max(0, j - n // 2)
    hi = min(row_exp.shape[0], lo + n)
    where = "".join(f"[{i}]" for i in idx[:-1]) + f"[{lo}:{hi}]"
    fmt = lambda t: ", ".join(f"{float(v):.5g}" for v in t[lo:hi])  # noqa: E731
    return f"at {where}: expected [{fmt(row_exp)}] got [{fmt(row_got)}]"


def compare_leaf(name: str, got: Any, native: Any, f64: Any, tolerance: dict[str, float] | None,
                 stressed: bool = False) -> LeafResult:
    """Compare one output leaf (tensor or scalar) against the reference. `stressed`: the verifier's own
    scaled-and-shifted inputs (the trial's `dist` is "wide"), where the reference in its own dtype may be far
    off; only there is a leaf judged against what that reference achieves, or not at all (see below)."""
    if not isinstance(native, torch.Tensor):
        return _compare_scalar(name, got, native, f64)
    if not isinstance(got, torch.Tensor):
        return LeafResult(name, False, "type", f"expected a tensor, got {type(got).__name__}")
    if tuple(got.shape) != tuple(native.shape):
        return LeafResult(name, False, "shape", f"shape {tuple(got.shape)}, expected {tuple(native.shape)}")
    if got.dtype != native.dtype:
        return LeafResult(name, False, "dtype", f"dtype {got.dtype}, expected {native.dtype}")
    if isinstance(f64, torch.Tensor) and tuple(f64.shape) != tuple(native.shape):
        f64 = None  # the float64 run took another path (a mask or a bit view of its own dtype): no truth
    if not (native.is_floating_point() or native.is_complex()):
        # exact, against the reference in its dtype or the float64 run: an index taken after a reduction may
        # differ from the low-precision reference where the kernel computed more precisely (a near tie)
        same = got == native
        if isinstance(f64, torch.Tensor) and not f64.is_floating_point():  # same shape: checked above
            same |= got == f64.to(got.device)
        bad = int((~same).sum())
        ok = bad == 0
        return LeafResult(name, ok, "ok" if ok else "mismatch",
                          "" if ok else f"{bad} of {native.numel()} elements differ from both the reference in its "
                          "dtype and the float64 reference (exact match required)",
                          frac_bad=bad / max(1, native.numel()))
    return _compare_float(name, got, native, f64 if isinstance(f64, torch.Tensor) else None, tolerance, stressed)


def _compare_scalar(name: str, got: Any, exp: Any, f64: Any = None) -> LeafResult:
    """A Python scalar: equal (a float within rel 1e-6 of the reference), or a float no further from the
    float64 reference's than twice the reference in its dtype is (a sum that cancels is as inaccurate in
    the reference as in an honest kernel that adds in another order)."""
    if isinstance(got, torch.Tensor) or type(got) is not type(exp):
        return LeafResult(name, False, "type", f"expected {type(exp).__name__} {exp!r}, got {type(got).__name__}")
    if isinstance(exp, float):
        ok = math.isclose(got, exp, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(got) and math.isnan(exp))
        if not ok and isinstance(f64, float) and math.isfinite(f64) and math.isfinite(got):
            ok = abs(got - f64) <= max(2.0 * abs(exp - f64), 1e-6 * abs(f64))
    else:
        ok = got == exp
    return LeafResult(name, ok, "ok" if ok else "mismatch", "" if ok else f"expected {exp!r}, got {got!r}")


def _compare_float(name: str, got: torch.Tensor, native: torch.Tensor, f64: torch.Tensor | None,
                   tolerance: dict[str, float] | None, stressed: bool = False) -> LeafResult:
    truth = as_real(f64 if f64 is not None else native).to(torch.float64)
    cand = as_real(got).to(torch.float64)
    nat = as_real(native).to(torch.float64)
    ref_finite = torch.isfinite(truth)
    over = ref_finite & _past_range(truth, native.dtype)
    cand_finite = torch.isfinite(cand)
    nan_mask = ref_finite & ~over & ~cand_finite
    if bool(nan_mask.any()):
        n = int(nan_mask.sum())
        idx = _unravel(int(nan_mask.flatten().nonzero()[0]), truth.shape)
        return LeafResult(name, False, "nan_inf", f"{n} of {truth.numel()} elements are NaN/Inf where the "
                          f"reference is finite (first at {idx})", worst_index=idx, nan_mask=nan_mask,
                          frac_bad=n / max(1, truth.numel()))
    special = ~ref_finite
    if bool(special.any()):
        same = (cand[special] == truth[special]) | (torch.isnan(cand[special]) & torch.isnan(truth[special]))
        if not bool(same.all()):
            return LeafResult(name, False, "mismatch", "the reference's NaN/Inf elements are not matched")
    if bool(over.any()) and not _saturated(cand[over], truth[over], native.dtype):
        return LeafResult(name, False, "mismatch", f"{int(over.sum())} element(s) whose true value is past "
                          f"{native.dtype}'s range are neither that dtype's largest value nor Inf of the same sign")
    keep = ref_finite & ~over  # judged element by element below
    t, c, nv = truth[keep], cand[keep], nat[keep]
    if t.numel() == 0:
        return LeafResult(name, True)
    diff = (c - t).abs()
    # the reference's own error, over the elements where it stayed finite (an Inf of the reference where
    # the truth fits the dtype would otherwise make its error, and so every allowance, infinite)
    nat_finite = torch.isfinite(nv)
    floor_elem = torch.where(nat_finite, (nv - t).abs(), torch.zeros_like(t))
    floor_l2 = rel_l2(nv[nat_finite], t[nat_finite]) if bool(nat_finite.any()) else 0.0
    base = None
    if tolerance:
        bound = tolerance.get("atol", 0.0) + tolerance.get("rtol", 0.0) * t.abs()
        allowed_l2 = None
    else:
        d = defaults_for(native.dtype)
        scale = max(1.0, float(t.pow(2).mean().sqrt()))
        base = d["atol"] * scale + d["rtol"] * t.abs()
        bound = base + ELEM_FLOOR_MULT * floor_elem
        allowed_l2 = allowed_rel_l2(native.dtype, floor_l2)
    bad = diff > bound
    err_l2 = rel_l2(c, t)
    max_abs = float(diff.max())
    rel = diff / t.abs().clamp_min(1e-12)
    worst_flat = int(diff.argmax())
    idx = _finite_index(keep, worst_flat)
    res = LeafResult(name, True, max_abs=max_abs, max_rel=float(rel.max()), rel_l2=err_l2,
                     allowed_l2=allowed_l2, floor_l2=None if tolerance else floor_l2,
                     frac_bad=float(bad.double().mean()), worst_index=idx)
    if stressed and res.floor_l2 is not None and res.floor_l2 >= UNINFORMATIVE_FLOOR:
        res.judged = False
        res.message = (f"not judged on these inputs: the reference in its own dtype errs by {res.floor_l2:.3g} in rel "
                       "L2 here, no closer to the truth than a constant (the inputs are too ill-conditioned "
                       "for this output)")
        return res
    l2_bad = allowed_l2 is not None and err_l2 > allowed_l2
    if base is not None and not stressed and native.dtype in SIZE_REL_DTYPES:
        size_msg, at = _small_elements_hold(diff, floor_elem, t.abs() + d["atol"] * scale, d["rtol"])
        if size_msg:  # the rows shown around the element worst off for its size
            at_idx = _finite_index(keep, at)
            res.ok, res.kind, res.message, res.worst_index = False, "mismatch", size_msg, at_idx
            res.rows = _rows(as_real(got).to(torch.float64), truth, at_idx) if truth.dim() <= 4 else ""
            return res
    if bool(bad.any()) and base is not None and _within_reference_error(
            diff, floor_elem, t.abs(), d["atol"] * scale, bad, err_l2, res.floor_l2, d["l2_cap"]):
        res.message = ("within the reference's own error: no larger L2 error than the reference's, no element "
                       "further from the truth than twice its worst, few elements outside their bound and a "
                       "size-relative error within a few times the reference's")
        return res
    if stressed and bool(bad.any()) and not l2_bad and base is not None and _no_worse_than_native(
            diff, floor_elem, base, err_l2, res.floor_l2, d["l2_cap"]):
        res.message = ("no less accurate than the reference in its own dtype (which errs more in L2 and at as many "
                       "elements): elements outside the tolerance follow the input's conditioning, not the kernel")
        return res
    if bool(bad.any()) or l2_bad:
        res.ok, res.kind = False, "mismatch"
        res.rows = _rows(as_real(got).to(torch.float64), truth, idx) if truth.dim() <= 4 else ""
        parts = [f"max abs error {max_abs:.3g} at {idx}", f"rel L2 error {err_l2:.3g}"
                 + (f" (allowed {allowed_l2:.2g})" if allowed_l2 is not None else ""),
                 f"{res.frac_bad:.2%} of elements outside tolerance"]
        res.message = "; ".join(parts)
    return res


def _within_reference_error(diff: torch.Tensor, floor_elem: torch.Tensor, magnitude: torch.Tensor, atol: float,
                            bad: torch.Tensor, err_l2: float, floor_l2: float | None, l2_cap: float) -> bool:
    """The reference's error at one element is a single draw: an accurate kernel errs at other elements than the
    reference does. FlashAttention's dQ (the row-sum of dO * O taken from the rounded O) errs by ~1e-3 in the
    rows where a one-hot softmax makes dQ tiny; the fp16 reference, its softmax backward self-consistent, is
    exact there and twice as far off overall. On the library's fp16 attention problem that rejected the kernel
    in one trial of three (H200, 2026-12-02; 34 of 100 seeds under the CPU interpreter). A leaf with elements
    outside their own bound passes when the candidate is no less accurate than the reference in both norms:
    no element off by more than twice the reference's worst error anywhere in the leaf, and no larger L2 error
    (FlashAttention's own tests hold outputs and gradients to twice the low-precision reference's worst error).
    The worst error of millions of elements is an extreme draw: the kernel's dQ on the library's bf16 GQA
    problem (2 x 1000 x 8 x 128, causal) reached 0.73 of the reference's worst on the CPU and 0.0138, past
    it, in one trial on the H200, with half the reference's L2 error.
    Both norms are set by the largest elements, so two more bounds keep large elements from paying for small
    ones (red-team review 8: zeroing every output of exp(x @ W) under 1.0, half a bf16 tensor, passed): at most
    RESCUE_MAX_FRAC of the elements outside their own bound, each off by at most RESCUE_ATOL_MULT times the
    dtype's atol at the leaf's scale (review 10: one row of 128 scaled by 0.9 passed on that exp output; 0.2 %
    of its elements were outside their bound, off by up to 24), and the error relative to each element's size
    (|truth| + the dtype's scaled atol) within ELEM_FLOOR_MULT times the reference's in L2. The library's
    attention over 800 interpreter trials: at most 0.26 % of elements, and 2.35 times the reference's relative
    error (dQ of 0.014 where the truth is 7e-4); the review's cheats: 18 % and more, 120 times and more.
    Only where the reference keeps within its dtype's L2 band (red-team review 9: a bf16 scan written as a loop,
    its reference 3.5 times past the band from drift at late steps, let a kernel zero its first eight steps,
    where the reference is exact; a reference that far off leaves the candidate to the element-wise rule)."""
    if floor_l2 is None or not math.isfinite(floor_l2) or floor_l2 > l2_cap or err_l2 > floor_l2:
        return False
    if float(diff.max()) > WORST_MULT * float(floor_elem.max()):
        return False
    if float(bad.double().mean()) > RESCUE_MAX_FRAC or float(diff[bad].max()) > RESCUE_ATOL_MULT * atol:
        return False
    size = magnitude + atol
    return float((diff / size).norm()) <= ELEM_FLOOR_MULT * float((floor_elem / size).norm())


def _small_elements_hold(diff: torch.Tensor, floor_elem: torch.Tensor, size: torch.Tensor,
                         rtol: float) -> tuple[str, int]:
    """The element bound's absolute term scales with the leaf's RMS, so on a heavy-tailed output (exp(x @ W) in
    bf16, RMS 55) it covers every small element whole: zeroing each output under 0.25, a quarter of the tensor,
    passed the element rule and the L2 band (red-team review 8). Each element's error relative to its size
    (|truth| + that absolute term), in RMS over the leaf, must stay within SIZE_REL_MULT times the reference's
    in its own dtype, or within the dtype's rtol. Measured on honest 16-bit kernels emulated on the CPU (split-K
    and fused matmuls, online softmax, cross-entropy, norms, scans, blocked sums, FlashAttention forward and
    backward with P, dS and delta in the native dtype, causal and peaked): the closest, fp16 FlashAttention dQ
    on peaked scores, at 1/4.7 of the bound. Not for fp32, where the element rule's absolute term is small and
    a few ulps where the truth is near zero make this statistic noisy (FlashAttention's causal dQ, whose first
    row is exactly zero, failed it), and not on the stressed trials (a candidate passes every trial, and the
    plain ones carry this check).
    The reference's own figure comes from its finite elements (a NaN or Inf of the reference in its dtype, where
    the truth is finite, says nothing of the other elements). Returns the reason it fails and the flat index of
    the element worst off for its size, or ('', -1)."""
    rel = diff / size
    got = float(torch.linalg.vector_norm(rel)) / rel.numel() ** 0.5
    finite = torch.isfinite(floor_elem)
    kept = int(finite.sum())
    ref = float(torch.linalg.vector_norm(floor_elem[finite] / size[finite])) / kept ** 0.5 if kept else 0.0
    allowed = max(SIZE_REL_MULT * ref, rtol)
    if got <= allowed:
        return "", -1
    return (f"error relative to each element's size {got:.3g} in RMS, allowed {allowed:.3g} ({SIZE_REL_MULT:g}x "
            f"the reference's own {ref:.3g}, or the dtype's rtol): elements are off by more than their own size "
            "allows"), int(rel.argmax())


def _no_worse_than_native(diff: torch.Tensor, floor_elem: torch.Tensor, base: torch.Tensor, err_l2: float,
                          floor_l2: float | None, l2_cap: float) -> bool:
    """On ill-conditioned inputs (attention's gradients on scores in the tens of thousands, where the softmax
    is one-hot and the winner flips with the last bit) the reference in the problem's own dtype is itself far
    off, at other elements than an accurate kernel: the element-wise floor, taken where the reference happened
    to be right, cannot cover them. Only on the verifier's stressed inputs, and only where the reference fails
    the dtype's own L2 tolerance (but is closer to the truth than a constant), a candidate
    is held to what the reference achieves: no larger L2 error, and no more elements outside the dtype's
    tolerance. Anywhere else this admits nothing the element-wise check refused."""
    if floor_l2 is None or floor_l2 <= l2_cap or err_l2 > floor_l2:
        return False
    native_out = int((floor_elem > base).sum())
    return native_out > 0 and int((diff > base).sum()) <= native_out


def _past_range(truth: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where a finite true value is too large for `dtype` (the reference in that dtype holds Inf there)."""
    if not dtype.is_floating_point or dtype == torch.float64:
        return torch.zeros_like(truth, dtype=torch.bool)
    return truth.abs() > torch.finfo(dtype).max


def _saturated(cand: torch.Tensor, truth: torch.Tensor, dtype: torch.dtype) -> bool:
    """A candidate's elements where the truth is past `dtype`'s range: its largest value or Inf, same sign."""
    return bool(((cand.abs() >= torch.finfo(dtype).max) & (torch.sign(cand) == torch.sign(truth))).all())


def _finite_index(compared: torch.Tensor, k: int) -> list[int]:
    """The index in the leaf of the k-th compared element (`compared`: the mask of the elements judged)."""
    return _unravel(int(compared.flatten().nonzero().flatten()[k]), compared.shape)


def _unravel(flat: int, shape: torch.Size) -> list[int]:
    idx = []
    for dim in reversed(list(shape)):
        idx.append(flat % dim if dim else 0)
        flat //= max(dim, 1)
    return list(reversed(idx))


@dataclass
class TrialResult:
    trial: dict[str, Any]
    leaves: list[LeafResult]
    structure_ok: bool = True
    structure_msg: str = ""

    @property
    def ok(self) -> bool:
        return self.structure_ok and all(leaf.ok for leaf in self.leaves)

    @property
    def worst(self) -> LeafResult | None:
        bad = [leaf for leaf in self.leaves if not leaf.ok]
        return bad[0] if bad else max(self.leaves, key=lambda r: r.rel_l2, default=None)


def compare_outputs(trial: dict[str, Any], got: list[Any], ref: dict[str, Any], tolerance: dict[str, float] | None,
                    got_grads: dict[str, Any] | None = None) -> TrialResult:
    """Compare every output leaf (and gradient, when the problem has BACKWARD) of one trial."""
    native, f64 = ref["native"], ref.get("f64")
    if len(got) != len(native):
        return TrialResult(trial, [], False, f"returned {len(got)} output value(s), expected {len(native)} "
                                             f"({trial.get('structure', '')})")
    names = ["output"] if len(native) == 1 else [f"output {i}" for i in range(len(native))]
    stressed = trial.get("dist") == "wide"
    leaves = [compare_leaf(n, g, r, f64[i] if f64 else None, tolerance, stressed)
              for i, (n, g, r) in enumerate(zip(names, got, native, strict=True))]
    if ref.get("grads_native") is not None and got_grads is not None:
        leaves += _compare_grads(ref, got_grads, tolerance, stressed)
    return TrialResult(trial, leaves)


def _compare_grads(ref: dict[str, Any], got: dict[str, Any], tolerance: dict[str, float] | None,
                   stressed: bool = False) -> list[LeafResult]:
    out = []
    rn, r64 = ref["grads_native"], ref.get("grads_f64") or {"inputs": [], "params": {}}
    for i, g in enumerate(rn["inputs"]):
        if g is None:
            continue
        cand = got["inputs"][i] if i < len(got["inputs"]) else None
        if cand is None:
            out.append(LeafResult(f"grad of input {i}", False, "missing", "no gradient reached this input"))
            continue
        f = r64["inputs"][i] if i < len(r64["inputs"]) else None
        out.append(compare_leaf(f"grad of input {i}", cand, g, f, tolerance, stressed))
    for name, g in rn["params"].items():
        if g is None:
            continue
        cand = got["params"].get(name)
        if cand is None:
            out.append(LeafResult(f"grad of {name}", False, "missing", f"no gradient for parameter {name}"))
            continue
        out.append(compare_leaf(f"grad of {name}", cand, g, r64["params"].get(name), tolerance, stressed))
    return out


def looks_like_reduced_precision(result: LeafResult, dtype: torch.dtype, uses_dot: bool = True) -> str:
    """A hint when an fp32 output's error has the size of fp16/bf16/tf32 rounding (the tl.dot advice only
    for kernels that call tl.dot)."""
    if dtype != torch.float32 or result.ok or result.kind != "mismatch":
        return ""
    if result.frac_bad < 0.01:  # rounding spreads over most elements; a few bad ones are a logic bug
        return ""
    if 1e-4 < result.rel_l2 < 3e-3:
        dot = " (tl.dot: input_precision='ieee')" if uses_dot else ""
        return f"the error has the size of fp16/tf32 rounding: keep fp32 arithmetic{dot}"
    if 3e-3 <= result.rel_l2 < 3e-2:
        return "the error has the size of bf16 rounding: keep fp32 arithmetic"
    return ""
