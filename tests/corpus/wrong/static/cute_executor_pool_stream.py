# expect: introspection
# The CuTe DSL side stream of cute_side_stream_beside_spin.py without the CUDA bindings: a torch pool stream
# (non-blocking) from `type(torch.cuda.current_stream())()`, wrapped in cuda.CUstream with a non-constant
# handle, and launched through `compiled.to(0)(...)` (JitExecutor.__call__) or a direct call of the @cute.jit
# function, neither of which passes the patched JitCompiledFunction.__call__ that tells the recorder its
# stream; joined with a torch.cuda.Event (red-team review 2). The launch is still counted.
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def _relu_when_fresh(gX: cute.Tensor, gY: cute.Tensor, gPrev: cute.Tensor):
    # as in cute_side_stream_beside_spin.py: poll until gX differs from gPrev (the refresh landed), then
    # y = relu(x), prev = x
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 256 + tidx
    if i < cute.size(gX):
        v = gX[i]
        gY[i] = v if v > 0 else v * 0
        gPrev[i] = v


@cute.jit
def _launch(mX: cute.Tensor, mY: cute.Tensor, mPrev: cute.Tensor, stream: cuda.CUstream):
    n = cute.size(mX)
    _relu_when_fresh(mX, mY, mPrev).launch(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = type(torch.cuda.current_stream())()    # torch's stream pool: cudaStreamNonBlocking
        self.done = torch.cuda.Event()
        self.prev = None
        self.run = None

    def forward(self, x):
        y = torch.empty_like(x)
        if self.prev is None:
            self.prev = torch.empty_like(x)
        args = (from_dlpack(x.view(-1)), from_dlpack(y.view(-1)), from_dlpack(self.prev.view(-1)))
        side = cuda.CUstream(self.side.cuda_stream)         # not a constant: no raw-handle finding
        if self.run is None:
            self.run = cute.compile(_launch, *args, side).to(0)  # a JitExecutor
        self.run(*args, side)                                # counted; its stream never reaches note_stream
        self.done.record(self.side)
        torch.cuda.current_stream().wait_event(self.done)
        return y
