"""BACKWARD problems with several outputs: the candidate's outputs are differentiated at the positions where the
reference's are (a red-team review, 2026-12-02: an honest autograd.Function returning a float mask without
mark_non_differentiable raised 'got 2 tensors and 1 gradients'; an output the reference differentiates but the
candidate returned without a graph had its backward skipped)."""

from __future__ import annotations

import pytest

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool
from kernelagent.verifier.worker.candidate import CandidateFailure, _differentiated

PROBLEM = '''
import torch
import torch.nn as nn

BACKWARD = True


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x), {second}


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
'''

KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fwd(x_ptr, y_ptr, m_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=0.0)
    tl.store(y_ptr + offs, tl.where(x > 0, x, 0.0), mask=ok)
    if SCALE == 0.0:
        tl.store(m_ptr + offs, (x > 0).to(tl.float32), mask=ok)
    else:
        tl.store(m_ptr + offs, x * SCALE, mask=ok)


@triton.jit
def bwd(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=0.0)
    dy = tl.load(dy_ptr + offs, mask=ok, other=0.0)
    tl.store(dx_ptr + offs, tl.where(x > 0, dy, 0.0), mask=ok)


class _Op(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        y, m = torch.empty_like(x), torch.empty_like(x)
        fwd[(triton.cdiv(x.numel(), 1024),)](x, y, m, x.numel(), SCALE={scale}, BLOCK=1024)
        ctx.save_for_backward(x)
        {mark}
        return y, m

    @staticmethod
    def backward(ctx, dy, dm):
        (x,) = ctx.saved_tensors
        dx = torch.empty_like(x)
        bwd[(triton.cdiv(x.numel(), 1024),)](x, dy.contiguous(), dx, x.numel(), BLOCK=1024)
        return dx


class ModelNew(nn.Module):
    def forward(self, x):
        return _Op.apply(x)
'''


def test_outputs_are_paired_by_the_references_positions():
    import torch

    a = torch.ones(2, requires_grad=True) * 2
    b = torch.ones(2, requires_grad=True) * 3
    assert _differentiated([a, b], None) == [a, b]
    assert _differentiated([a, b], [0]) == [a]  # an extra differentiable output is left alone
    with pytest.raises(CandidateFailure, match=r"output\(s\) \[1\]"):
        _differentiated([a, b.detach()], [0, 1])


@pytest.fixture(scope="module")
def verifier():
    v = Verifier(VerifyOptions(device="cpu", timeout=60, seeds=2), pool=WorkerPool(size=1))
    yield v
    v.close()


@pytest.mark.slow
def test_a_mask_left_differentiable_is_accepted_and_a_skipped_gradient_is_not(verifier, tmp_path):
    mask_problem = tmp_path / "relu_mask.py"
    mask_problem.write_text(PROBLEM.format(second="(x > 0).float()"))
    honest = tmp_path / "honest.py"  # PyTorch's default: the mask output is differentiable (a zero gradient)
    honest.write_text(KERNEL.format(scale="0.0", mark=""))
    report = verifier.verify(mask_problem, honest)
    assert report.verdict == "accepted", report.message
    scaled_problem = tmp_path / "relu_scaled.py"
    scaled_problem.write_text(PROBLEM.format(second="0.5 * x"))
    skipping = tmp_path / "skipping.py"  # the second output comes back without a graph: its backward skipped
    skipping.write_text(KERNEL.format(scale="0.5", mark="ctx.mark_non_differentiable(m)"))
    report = verifier.verify(scaled_problem, skipping)
    assert report.verdict == "rejected" and report.category == "runtime_error", report.message
    assert "carry no autograd graph" in report.message
