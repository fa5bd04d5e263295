"""Seeding for draws (kernelagent.verifier.rng): the same values as torch.manual_seed, without its per-seed
stack trace for every backend that is not initialised (about a millisecond per timed call)."""

from __future__ import annotations

import traceback

import pytest
import torch

from kernelagent.verifier import rng
from kernelagent.verifier.measure.fresh import draw_inputs


def _draw() -> list[torch.Tensor]:
    return [torch.randn(7), torch.randint(0, 100, (5,)), torch.rand(3, dtype=torch.float64)]


@pytest.mark.parametrize("seed", [0, 1, 2**62 + 5, 123456789])
def test_seed_all_draws_what_torch_manual_seed_draws(seed):
    torch.manual_seed(seed)
    want = _draw()
    rng.seed_all(seed)
    got = _draw()
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a, b)


def test_seeding_formats_no_stack(monkeypatch):
    """Where CUDA exists it is initialised first, as in every worker (before that, torch queues the CUDA seeding
    with a stack trace for the initialisation: review of 2026-12-02)."""
    if torch.cuda.is_available():
        torch.cuda.init()

    def refuse(*a, **k):
        raise AssertionError("a stack was formatted while seeding")

    monkeypatch.setattr(traceback, "format_stack", refuse)
    rng.seed_all(5)
    draw_inputs(lambda: [torch.randn(4)], 9, "cpu")
    with pytest.raises(AssertionError):  # what torch.manual_seed does on a machine without XPU or MTIA
        torch.manual_seed(5)


def test_seed_from_os_leaves_no_earlier_seed():
    rng.seed_all(11)
    a = torch.randn(4)
    rng.seed_all(11)
    rng.seed_from_os()
    assert not torch.equal(a, torch.randn(4))


@pytest.mark.gpu
def test_seed_all_seeds_cuda_as_torch_manual_seed():
    torch.manual_seed(3)
    want = torch.randn(16, device="cuda")
    rng.seed_all(3)
    assert torch.equal(want, torch.randn(16, device="cuda"))


def test_the_verifier_seeds_only_through_rng():
    """One place for seeding: a `torch.manual_seed` call anywhere in the verifier brings back its cost (a
    stack trace per uninitialised backend on every draw) and a second way of seeding that could drift."""
    import ast
    from pathlib import Path

    root = Path(rng.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            # torch.Generator(...).manual_seed(...) seeds a generator of its own: fine anywhere
            if isinstance(node, ast.Attribute) and node.attr in ("manual_seed", "manual_seed_all") \
                    and not isinstance(node.value, ast.Call) and ast.unparse(node).startswith("torch."):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found and all(f.startswith("rng.py:") for f in found), found
