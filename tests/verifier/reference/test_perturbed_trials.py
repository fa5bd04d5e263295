"""The reference pack's perturbed trials (alt distribution, wide, near, re-initialised parameters) change the
problem's inputs in ways its own draws never do; a reference that raises there has met inputs that break an
invariant of the problem (here: positive-definite matrices for a Cholesky factor; lengths that must sum to the
row count), so the trial is dropped with a note.
The problem's own draws raising is still the problem's error (a red-team review found varlen and Cholesky
problems unverifiable: load_error, blamed on the problem)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelagent.verifier import protocol as P
from kernelagent.verifier.reference.run import ReferenceRunner

SEGMENTS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, lengths):
        return torch.stack([part.sum(0) for part in torch.split(x, lengths.tolist())])


def get_inputs():
    return [torch.randn(64, 8), torch.tensor([4, 12, 16, 32])]


def get_init_inputs():
    return []
'''


CHOLESKY = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a):
        return torch.linalg.cholesky(a)


def get_inputs():
    m = torch.randn(4, 16, 16)
    return [m @ m.transpose(-1, -2) + 16 * torch.eye(16)]


def get_init_inputs():
    return []
'''


BUCKETIZE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, boundaries):
        return torch.bucketize(x, boundaries)


def get_inputs():
    return [torch.randn(512), torch.sort(torch.randn(64)).values]


def get_init_inputs():
    return []
'''


def _run(tmp_path: Path, source: str) -> dict:
    problem = tmp_path / "op.py"
    problem.write_text(source)
    runner = ReferenceRunner(P.ReferenceRequest(problem=str(problem), device="cpu", secret=11, seeds=3,
                                                out_dir=str(tmp_path / "ref"), cpu_max_elements=1_000_000))
    return runner.run()


def test_perturbed_inputs_keep_the_order_of_their_values(tmp_path):
    """The second distribution and the near trial change values but keep every pair's order, so sorted
    boundaries stay sorted (a review found an honest bucketize kernel, a binary search, rejected on both)."""
    meta = _run(tmp_path, BUCKETIZE)
    pack = tmp_path / "ref" / "pack"
    first = torch.load(pack / "inputs_0.pt")["inputs"]
    for dist in ("alt", "near"):
        trial = next(t for t in meta["trials"] if t["dist"] == dist)
        x, bounds = torch.load(pack / f"inputs_{trial['id']}.pt")["inputs"]
        assert bool((bounds[1:] >= bounds[:-1]).all()), dist
        assert not torch.equal(x, first[0]) or not torch.equal(bounds, first[1]), dist


def test_a_reference_that_raises_on_perturbed_inputs_loses_that_trial_only(tmp_path):
    meta = _run(tmp_path, CHOLESKY)
    kinds = [t["dist"] for t in meta["trials"]]
    assert kinds.count("native") == 2 and "alt" not in kinds  # alt redraws the matrices: not positive-definite
    assert any("alt inputs" in n and "dropped" in n for n in meta["notes"]), meta["notes"]
    meta = _run(tmp_path, SEGMENTS)  # whatever near's swaps do to the lengths, the pack is built
    assert [t["dist"] for t in meta["trials"]].count("native") == 2


def test_the_problems_own_draws_raising_is_still_an_error(tmp_path):
    broken = SEGMENTS.replace("torch.tensor([4, 12, 16, 32])", "torch.tensor([4, 12, 16, 31])")
    with pytest.raises(RuntimeError):
        _run(tmp_path, broken)
