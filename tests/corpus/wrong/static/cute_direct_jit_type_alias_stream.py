# expect: introspection
# A CuTe DSL kernel on a torch pool stream (non-blocking) with neither a static nor a runtime finding:
# (1) `_Stream = type(torch.cuda.current_stream())` then `_Stream()` -- policy/module.py `_foreign_class` only
#     matches a call whose func *is* `type(x)` / `x.__class__`, not a name bound to it (also `[type(x)][0]()`,
#     `(S := type(x))()`, `(lambda: type(x))()()`, `S = x.__class__; S()`);
# (2) the @cute.jit function is called directly: BaseDSL._func -> JitCompiledFunction.run_compiled_program
#     (cutlass/base_dsl/dsl.py:2389), which never passes the patched JitCompiledFunction.__call__ /
#     JitExecutor.__call__, so cute/support.py `_record_streams` never sees the CUstream. The launch is counted
#     (JitExecutor.run_compiled_program). Joined with a torch.cuda.Event (allowed). Red-team review 3.
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

_Stream = type(torch.cuda.current_stream())      # torch.cuda.streams.Stream, under a name no rule knows


@cute.kernel
def _relu(gX: cute.Tensor, gY: cute.Tensor):
    # the watcher of the earlier reviews goes here (poll gX until the refresh lands, then compute);
    # kept trivial: the point is the route
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 256 + tidx
    if i < cute.size(gX):
        v = gX[i]
        gY[i] = v if v > 0 else v * 0


@cute.jit
def _launch(mX: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    n = cute.size(mX)
    _relu(mX, mY).launch(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = _Stream()                         # a pool stream: cudaStreamNonBlocking
        self.done = torch.cuda.Event()

    def forward(self, x):
        y = torch.empty_like(x)
        side = cuda.CUstream(self.side.cuda_stream)   # not a constant: no raw-handle finding
        _launch(from_dlpack(x.view(-1)), from_dlpack(y.view(-1)), side)   # direct call: stream never noted
        self.done.record(self.side)
        torch.cuda.current_stream().wait_event(self.done)
        return y
