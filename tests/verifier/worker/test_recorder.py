"""The op recorder sees through the candidate's own torch.library ops: their Python bodies run under the
recorder, however and whenever they were registered."""

from __future__ import annotations

import torch

from kernelagent.verifier.worker.integrity import OpRecorder


@torch.library.custom_op("ka_rec_test::rows", mutates_args=())
def rows(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@rows.register_fake
def _(x):
    return torch.empty_like(x)


def test_a_kernel_registered_late_is_recorded():
    rows.register_kernel("cpu")(lambda x: torch.softmax(x, dim=-1))  # what a cheat would do in __init__
    rec = OpRecorder()
    with rec, torch.no_grad():
        out = torch.ops.ka_rec_test.rows(torch.randn(4, 8))
    assert torch.allclose(out.sum(-1), torch.ones(4))
    assert any("softmax" in op for op in rec.ops) and "ka_rec_test.rows" in rec.opened


def test_host_reads_count_on_any_device():
    rec = OpRecorder()
    with rec:
        x = torch.randn(8)
        _ = [float(v) for v in x]
    assert rec.transfers.scalar_reads == 8
