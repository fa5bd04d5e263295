"""The audit's chunked comparisons give the verdicts of the verifier's judge and of torch.allclose, and the
chunks cover every element exactly once."""

from __future__ import annotations

import math

import pytest
import torch

from kernelagent.verifier.audit import compare
from kernelagent.verifier.audit.compare import Reference, chunks, passes, rel_l2
from kernelagent.verifier.audit.settings import TOLERANCES, Tolerance
from kernelagent.verifier.judge.compare import compare_leaf


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4), (1, 40), (5, 1, 9)])
@pytest.mark.parametrize("limit", [1, 4, 7, 1000])
def test_chunks_cover_every_element_once(shape, limit):
    seen = torch.zeros(shape, dtype=torch.int64)
    for idx in chunks(shape, limit):
        view = seen[idx]
        assert view.numel() <= max(limit, 1) or view.dim() == 0
        view += 1  # views: writes land in `seen`
    assert bool((seen == 1).all())


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, dict | None]]:
    g = torch.Generator().manual_seed(0)
    t = torch.randn(6, 33, generator=g, dtype=torch.float64)
    nat = t.float()
    cases = [("exact", t, nat, nat.clone(), None),
             ("zeros", t, nat, torch.zeros_like(nat), None),
             ("tiny error", t, nat, (t + 1e-7 * torch.randn(6, 33, generator=g, dtype=torch.float64)).float(), None),
             ("fp16 rounding", t, nat, nat.half().float(), None),
             ("one bad element", t, nat, nat.clone().index_put_((torch.tensor([2]), torch.tensor([5])),
                                                              torch.tensor(9.0)), None),
             ("nan", t, nat, nat.clone().index_put_((torch.tensor([0]), torch.tensor([0])),
                                                   torch.tensor(float("nan"))), None),
             ("with TOLERANCE", t, nat, (nat + 5e-3), {"atol": 1e-2, "rtol": 1e-2}),
             ("outside TOLERANCE", t, nat, (nat + 5e-2), {"atol": 1e-2, "rtol": 1e-2})]
    noise = torch.randn(4, 9, generator=g, dtype=torch.float64) * 1e-17  # a mean after a normalisation
    cases.append(("noise floor", noise, (noise + 1e-8).float(), torch.zeros(4, 9), None))
    inf = t.clone()
    inf[1, 1] = float("inf")
    cases.append(("inf matched", inf, inf.float(), inf.float(), None))
    cases.append(("inf missed", inf, inf.float(), torch.zeros(6, 33), None))
    return cases


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
@pytest.mark.parametrize("limit", [5, 1 << 22])
def test_ours_matches_the_judge(case, limit, monkeypatch):
    _, f64, native, answer, tol = case
    monkeypatch.setattr(compare.chunks, "__defaults__", (limit,))
    judge = compare_leaf("output", answer, native, f64, tol).ok
    assert passes(Reference(native, f64), answer, TOLERANCES["ours"], tol) is judge


@pytest.mark.parametrize("atol,rtol", [(1e-2, 1e-2), (1e-4, 1e-4), (0.0, 0.5)])
def test_allclose_matches_torch(atol, rtol):
    g = torch.Generator().manual_seed(1)
    ref = torch.randn(5, 17, generator=g) * 1e-2
    for ans in (torch.zeros_like(ref), ref * 1.01, ref + 3e-3, torch.full_like(ref, float("nan"))):
        tol = Tolerance("custom", "allclose", atol, rtol)
        assert passes(Reference(ref), ans, tol, None) is torch.allclose(ref, ans, atol=atol, rtol=rtol)


def test_wrong_shape_or_dtype_never_passes():
    ref = torch.zeros(4, 4)
    for tol in TOLERANCES.values():
        assert not passes(Reference(ref), torch.zeros(4, 5), tol, None)
        assert not passes(Reference(ref), torch.zeros(4, 4, dtype=torch.float64), tol, None)


def test_integers_compare_exactly():
    ref = torch.arange(12).reshape(3, 4)
    assert passes(Reference(ref), ref.clone(), TOLERANCES["ours"], None)
    assert not passes(Reference(ref), torch.zeros_like(ref), TOLERANCES["ours"], None)


def test_rel_l2():
    a, b = torch.tensor([3.0, 4.0]), torch.tensor([0.0, 0.0])
    assert rel_l2(a, b) == pytest.approx(5.0)  # zero reference: the plain norm
    assert rel_l2(b, a) == pytest.approx(1.0)
    assert rel_l2(a, torch.zeros(3)) is None
    big = torch.randn(10, 10, dtype=torch.float64)
    assert rel_l2(big * 1.5, big) == pytest.approx(0.5)
    assert math.isclose(rel_l2(big, big), 0.0)
