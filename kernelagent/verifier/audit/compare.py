"""Does a trivial answer pass, under a tolerance, without ever holding more than a chunk of temporaries.

`allclose` is KernelBench's check: |ref - answer| <= atol + rtol * |answer| on every element, NaN never
close, against the reference in its own dtype. `ours` is the verifier's judge (judge.compare._compare_float)
computed chunk by chunk: the same element-wise bound and relative-L2 band around the float64 reference and
its noise floor, with global figures (RMS, norms) gathered in a first pass. A test holds the two to the same
verdicts. Both walk the output in chunks of at most COMPARE_CHUNK elements (views, no copies).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from kernelagent.verifier.audit.settings import Tolerance
from kernelagent.verifier.estimate import COMPARE_CHUNK
from kernelagent.verifier.judge.compare import ELEM_FLOOR_MULT, FLOOR_MULT, defaults_for
from kernelagent.verifier.tensorio import as_real


def chunks(shape: tuple[int, ...], limit: int = COMPARE_CHUNK) -> Iterator[tuple[Any, ...]]:
    """Index tuples that cover a tensor of `shape`, each selecting at most `limit` elements (when the last
    dimension alone is larger, it is sliced too)."""
    total = math.prod(shape)
    if total <= limit or not shape:
        yield ()
        return
    inner = math.prod(shape[1:])
    if inner <= limit:
        step = max(1, limit // max(1, inner))
        for i in range(0, shape[0], step):
            yield (slice(i, i + step),)
        return
    if len(shape) == 1:
        for i in range(0, shape[0], limit):
            yield (slice(i, i + limit),)
        return
    for i in range(shape[0]):
        for sub in chunks(tuple(shape[1:]), limit):
            yield (i, *sub)


def _wide(t: torch.Tensor) -> torch.Tensor:
    return as_real(t).to(torch.float64)


def exact_equal(ref: torch.Tensor, ans: torch.Tensor) -> bool:
    return all(bool((ref[i] == ans[i]).all()) for i in chunks(tuple(ref.shape)))


def allclose(ref: torch.Tensor, ans: torch.Tensor, atol: float, rtol: float) -> bool:
    """torch.allclose(ref, ans, atol, rtol) chunk by chunk (KernelBench's order: rtol scales |ans|)."""
    if tuple(ans.shape) != tuple(ref.shape):
        return False
    if ref.dtype == torch.bool or ans.dtype == torch.bool:
        return exact_equal(ref, ans)
    return all(bool(torch.isclose(ref[i], ans[i].to(ref.dtype), rtol=rtol, atol=atol).all())
               for i in chunks(tuple(ref.shape)))


@dataclass
class Reference:
    """One output leaf of one trial: the reference in its own dtype and (for `ours`) in float64."""

    native: Any
    f64: Any = None
    _stats: dict[str, float] | None = None

    @property
    def truth(self) -> torch.Tensor:
        return self.f64 if isinstance(self.f64, torch.Tensor) else self.native

    def stats(self) -> dict[str, float]:
        """Global figures of the judge's rule: the truth's norm and RMS over finite elements, the noise floor's
        norm, whether non-finite elements exist. Computed once per trial, shared by every answer."""
        if self._stats is None:
            t2 = f2 = 0.0
            n = 0
            special = False
            for i in chunks(tuple(self.native.shape)):
                t, nv = _wide(self.truth[i]), _wide(self.native[i])
                fin = torch.isfinite(t)
                special = special or not bool(fin.all())
                t, nv = t[fin], nv[fin]
                n += t.numel()
                t2 += float(t.pow(2).sum())
                f2 += float((nv - t).pow(2).sum())
            self._stats = {"t2": t2, "floor2": f2, "n": n, "special": float(special)}
        return self._stats


def passes(ref: Reference, ans: Any, tol: Tolerance, problem_tol: dict[str, float] | None) -> bool:
    """Whether `ans` passes as this output leaf under `tol` (for `ours`, with the problem's TOLERANCE)."""
    native = ref.native
    if not isinstance(native, torch.Tensor) or not isinstance(ans, torch.Tensor):
        return False
    if tuple(ans.shape) != tuple(native.shape) or ans.dtype != native.dtype:
        return False
    if tol.kind == "allclose":
        return allclose(native, ans, tol.atol, tol.rtol)
    if not (native.is_floating_point() or native.is_complex()):
        return exact_equal(native, ans)
    return _ours(ref, ans, problem_tol)


def _ours(ref: Reference, ans: torch.Tensor, problem_tol: dict[str, float] | None) -> bool:
    st = ref.stats()
    d = defaults_for(ref.native.dtype)
    norm_t = math.sqrt(st["t2"])
    scale = max(1.0, math.sqrt(st["t2"] / st["n"])) if st["n"] else 1.0
    err2 = 0.0
    for i in chunks(tuple(ref.native.shape)):
        t, c, nv = _wide(ref.truth[i]), _wide(ans[i]), _wide(ref.native[i])
        fin = torch.isfinite(t)
        if bool((fin & ~torch.isfinite(c)).any()):
            return False
        if st["special"]:
            s = ~fin
            same = (c[s] == t[s]) | (torch.isnan(c[s]) & torch.isnan(t[s]))
            if not bool(same.all()):
                return False
        t, c, nv = t[fin], c[fin], nv[fin]
        diff = (c - t).abs()
        if problem_tol:
            bound = problem_tol.get("atol", 0.0) + problem_tol.get("rtol", 0.0) * t.abs()
        else:
            bound = d["atol"] * scale + d["rtol"] * t.abs() + ELEM_FLOOR_MULT * (nv - t).abs()
        if bool((diff > bound).any()):
            return False
        err2 += float(diff.pow(2).sum())
    if problem_tol or st["n"] == 0:
        return True
    rel = lambda num2: math.sqrt(num2) / norm_t if norm_t > 0 else math.sqrt(num2)  # noqa: E731
    floor_l2 = rel(st["floor2"])
    allowed = max(min(d["l2_cap"], max(d["l2_min"], FLOOR_MULT * floor_l2)), 2.0 * floor_l2)
    return rel(err2) <= allowed


def rel_l2(a: Any, b: Any) -> float | None:
    """‖a − b‖ / ‖b‖ (‖a − b‖ when b is zero) in float64, chunk by chunk; None for non-tensors or other shapes."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
        return None
    num = den = 0.0
    for i in chunks(tuple(b.shape)):
        x, y = _wide(a[i]), _wide(b[i])
        num += float((x - y).pow(2).sum())
        den += float(y.pow(2).sum())
    return math.sqrt(num) / math.sqrt(den) if den > 0 else math.sqrt(num)
