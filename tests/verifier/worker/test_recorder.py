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


def test_outputs_that_are_pytorchs_copies_of_the_inputs_are_named():
    """x.t().contiguous() returned beside a decoy kernel: the copy holds input data no kernel was given."""
    from kernelagent.verifier.worker.integrity import OpRecorder, mark_launched

    x = torch.randn(4, 3)
    rec = OpRecorder()
    rec.watch_inputs([x])
    with rec:
        transposed = x.t().contiguous()               # a copy of the input, never given to a kernel
        cast = x.to(torch.float64)                    # so is a cast
        into = torch.empty(4, 3)
        into.copy_(x)                                 # and a copy into a fresh buffer
        staged = x.clone()
        mark_launched([staged], {})                   # a kernel got it: its contents are the kernel's
        again = staged.clone()                        # a copy of the kernel's buffer, not of the input
        fresh = torch.empty(3, 4)
    leaves = [transposed, cast, into, staged, again, fresh, x.view(12)]
    assert rec.copied_outputs(leaves) == [0, 1, 2]


def test_a_copy_moved_by_resize_stays_a_copy():
    """resize_ grows a tensor by reallocating its storage without a copy op: the copy's tag goes with it (red team,
    2026-12-05: x.t().contiguous() grown by resize_ and sliced back was accepted as the kernel's output)."""
    from kernelagent.verifier.worker.integrity import OpRecorder

    x = torch.randn(64, 48)
    rec = OpRecorder()
    rec.watch_inputs([x])
    with rec:
        y = x.t().contiguous()
        before = y.untyped_storage().data_ptr()
        y.resize_(x.numel() + 4096)
        out = y[: x.numel()].view(48, 64)
    assert out.untyped_storage().data_ptr() != before  # the storage did move
    assert rec.copied_outputs([out]) == [0]


def test_copies_made_inside_a_library_op_body_count_too():
    from kernelagent.verifier.worker.integrity import OpRecorder

    x = torch.randn(5)
    rec = OpRecorder()
    rec.watch_inputs([x])
    inner = OpRecorder()
    inner.inputs, inner.sources, inner.copies = rec.inputs, rec.sources, rec.copies
    with inner:
        y = x.clone()
    assert rec.copied_outputs([y]) == [0]


def test_a_cute_call_on_a_stream_other_than_the_callers_is_work_on_a_foreign_stream():
    """A CuTe DSL launch takes its stream as an argument, which no launch hook sees: every CUstream handed to
    a compiled function is told to the recorder (red-team review, 2026-12-02: a CuTe kernel on a non-blocking
    stream of the candidate's own computed beside the timing spin, unseen)."""
    import types

    from kernelagent.verifier.cute import support as cs
    from kernelagent.verifier.protocol import Transfers
    from kernelagent.verifier.worker import integrity as I

    class CUstream(int):  # the bindings' type is recognised by its name
        pass

    rec = types.SimpleNamespace(stream=7, transfers=Transfers())
    saved = (cs._HOOKS.on_stream, cs._HOOKS.stats)
    I._active.append(rec)
    try:
        cs._HOOKS.on_stream, cs._HOOKS.stats = I.note_stream, {"cute_streams": []}
        cs._record_streams((CUstream(7),), {})
        assert rec.transfers.foreign_streams == 0  # the caller's stream
        cs._record_streams((1,), {"stream": CUstream(9)})
        assert rec.transfers.foreign_streams == 1
    finally:
        I._active.remove(rec)
        cs._HOOKS.on_stream, cs._HOOKS.stats = saved
