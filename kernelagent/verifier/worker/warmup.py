"""Trusted work a pooled worker does while it waits for a candidate, so the candidate's clock does not
pay for it: Triton's driver helpers (built with the C compiler on first use, into the worker's own
cache), the compiler pipeline (MLIR, LLVM, ptxas) and the launcher of the commonest signature
(pointer, pointer, int32), plus the candidate runner's own modules.

On a GPU the work comes in two parts. `compile_ahead` runs before the worker's GPU turn: compiling
the kernel and building its launcher are host work (the C compiler, ptxas), so they need not wait
while another worker times a kernel. `warm` runs in the turn: it makes the CUDA context, loads the
compiled kernel and launches it once (the compile found in the cache).

Everything lands in the worker's private cache directory; nothing is shared between workers, so a
candidate cannot plant a compiled object that another one would load.
"""

from __future__ import annotations

import ctypes
import time

import torch
import triton
import triton.language as tl

_N = 100  # the launch's element count: the compile ahead specialises on the same value


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def compile_ahead() -> dict[str, object]:
    """Compile the warm-up kernel and build its launcher without touching the GPU (before the GPU turn).

    The placeholder tensors carry only a dtype (their address 0 is aligned as a real allocation is), so
    the compile is the one the launch in `warm` asks for and finds in the kernel's cache. Triton asks torch
    for the device, its capability and the current stream, and torch's CUDA start-up makes the context;
    here the driver answers instead (device 0, which the launch uses too, and no stream, which a compile
    does not need). Reports whether a CUDA context existed afterwards: it must not."""
    t = time.perf_counter()
    from triton.runtime import driver

    cap = _capability()
    if cap is None:
        return {"ok": False, "error": "no CUDA driver", "context": None}
    active = driver.active
    saved = (active.get_current_device, active.get_current_stream, active.get_device_capability)
    active.get_current_device, active.get_current_stream = (lambda: 0), (lambda device=None: 0)
    active.get_device_capability = lambda device=None: cap
    try:
        kernel = _copy.warmup(torch.float32, torch.float32, _N, BLOCK=128, grid=(1,))
        active.launcher_cls(kernel.src, kernel.metadata)  # the C launcher, into the worker's cache
    finally:
        active.get_current_device, active.get_current_stream, active.get_device_capability = saved
    return {"ok": True, "seconds": round(time.perf_counter() - t, 3), "context": primary_context_active()}


def warm(device: str) -> dict[str, object]:
    """Compile and launch one tiny kernel on `device`; returns what it did and how long it took."""
    t = time.perf_counter()
    import kernelagent.verifier.worker.candidate  # noqa: F401 - the runner and the checks it imports

    x = torch.arange(_N, dtype=torch.float32, device=device)
    y = torch.empty_like(x)
    _copy[(1,)](x, y, x.numel(), BLOCK=128)
    if device == "cuda":
        torch.cuda.synchronize()
    ok = bool(torch.equal(x, y))
    return {"ok": ok, "seconds": round(time.perf_counter() - t, 3)}


def _libcuda() -> ctypes.CDLL | None:
    """The CUDA driver library, initialised (no context is made), or None where it is absent."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    return cuda if cuda.cuInit(0) == 0 else None


def _capability(device: int = 0) -> tuple[int, int] | None:
    """The device's compute capability, from the driver (torch would make a context to say it)."""
    cuda = _libcuda()
    major, minor = ctypes.c_int(), ctypes.c_int()
    if cuda is None or cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, device) or \
            cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, device):  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
        return None
    return major.value, minor.value


def primary_context_active(device: int = 0) -> bool | None:
    """Whether the driver holds an active primary context on `device` (None where libcuda is absent)."""
    cuda = _libcuda()
    flags, active = ctypes.c_uint(), ctypes.c_int()
    if cuda is None or cuda.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(active)):
        return None
    return bool(active.value)
