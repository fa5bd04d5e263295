"""The library's public API: drop-in functions and nn.Modules backed by kernelagent's own kernels.

    from kernelagent.ops import softmax, rms_norm, RMSNorm
    y = softmax(x)                     # like torch.softmax(x, -1), differentiable
    norm = RMSNorm(4096).cuda()        # like torch.nn.RMSNorm (same parameters: load_state_dict works)

Every function goes through a `torch.library` custom op (`torch.ops.kernelagent.*`) with a
backward, a fake implementation and a CPU implementation, so the same code runs on CUDA (Triton
or CuTe DSL kernels), on CPU (plain torch in fp32), on meta and fake tensors and under
`torch.compile(fullgraph=True)` (attention, in eager mode on its kernels, makes the same calls through an
autograd.Function instead: the dispatcher cost more host time than its launches at short sequences). The kernels
work in fp32 and return the input's dtype.

The backend is Triton unless `set_backend("cute")` or `set_backend("auto")` (CuTe DSL at the row
lengths where it measured faster, AUTO_CUTE; both need nvidia-cutlass-dsl). `attention` follows it too:
under "cute" the CuTe DSL kernels wherever they take the call, under "auto" from ATTENTION_CUTE_MIN_KEYS keys
up. The losses (`cross_entropy`, `linear_cross_entropy`, `CrossEntropyLoss`, `LinearCrossEntropyLoss`) and
attention (`attention`, `attention_varlen`, `sdpa`: Triton) are loaded from their library folders on first
use, so importing this module does not compile them.
"""

from __future__ import annotations

import importlib
import math
from types import ModuleType
from typing import Any

import torch
import torch.nn as nn
import triton

from kernelagent.kernels.layer_norm import triton as _layer_norm_triton
from kernelagent.kernels.log_softmax import triton as _log_softmax_triton
from kernelagent.kernels.rms_norm import triton as _rms_norm_triton
from kernelagent.kernels.softmax import triton as _softmax_triton

BACKENDS = ("triton", "cute", "auto")
FAMILIES = ("softmax", "log_softmax", "rms_norm", "layer_norm")
_TRITON = {"softmax": _softmax_triton, "log_softmax": _log_softmax_triton, "rms_norm": _rms_norm_triton,
           "layer_norm": _layer_norm_triton}
# "auto": the row lengths (padded to a power of two) whose forward+backward ran faster with the CuTe
# kernels than with Triton in benchmarks/rowwise_peers.py's sweep on the H200
# (benchmarks/results/2026-12-03-h200/rowwise_peers.json, 2**27 bf16 elements a width; 32K and wider
# re-measured with the st.async cluster reductions); every other length, measured or not, runs Triton.
# log_softmax, measured at 8192 only, follows softmax (same kernels' structure). The norms' CuTe backward
# holds x, dy and the weight's gradient in registers: at 262144 columns (16 CTAs of 512 threads) it runs at
# 1.79 TB/s against Triton's 2.36 (call 13-5 of that file).
AUTO_CUTE = {"softmax": frozenset({1024, 2048, 4096, 8192, 32768, 65536, 262144}),
             "log_softmax": frozenset({1024, 2048, 4096, 8192, 32768, 65536, 262144}),
             "rms_norm": frozenset({16384, 32768, 65536}), "layer_norm": frozenset({16384, 32768, 65536})}
_STATE: dict[str, Any] = {"backend": "triton", "cute": None}
# name -> (library folder, attribute); the modules live in their folder's package or its triton.py
_LAZY = {"cross_entropy": ("cross_entropy", "cross_entropy"),
           "CrossEntropyLoss": ("cross_entropy", "CrossEntropyLoss"),
           "linear_cross_entropy": ("linear_cross_entropy", "linear_cross_entropy"),
           "LinearCrossEntropyLoss": ("linear_cross_entropy", "LinearCrossEntropyLoss"),
         "attention_varlen": ("attention", "attention_varlen"), "sdpa": ("attention", "sdpa")}
# attention's CuTe DSL kernels take (B, S, H, D) fp16/bf16 CUDA tensors of their HEAD_DIMS (64, 128). From 4096 keys up
# they measured faster than the Triton ones in every case of benchmarks/attention_peers.py's sweep (head dims 64
# and 128, causal and not, forward and forward+backward: benchmarks/results/2026-12-04-h200/attention_peers.json);
# at 2048 the order depends on the case (causal d128 forward: Triton 347 TFLOP/s against 287), and below, both
# are bound by the host.
ATTENTION_CUTE_MIN_KEYS = 4096


class BackendError(ValueError):
    """An unknown backend, or one whose package is not installed."""


def set_backend(name: str) -> None:
    """Run the row-wise ops with 'triton' (the default), 'cute' (CuTe DSL kernels on CUDA tensors) or
    'auto' (CuTe for the CUDA row lengths in AUTO_CUTE, where it measured faster; Triton elsewhere)."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name != "triton" and _STATE["cute"] is None:
        try:
            _STATE["cute"] = {f: importlib.import_module(f"kernelagent.kernels.{f}.cute") for f in FAMILIES}
        except ImportError as e:
            raise BackendError(f"the {name} backend needs nvidia-cutlass-dsl (pip install 'kernelagent[cute]'): "
                               f"{e}") from e
    _STATE["backend"] = name


def get_backend() -> str:
    """The backend the row-wise ops use now."""
    return _STATE["backend"]


def _kernels(family: str, x: torch.Tensor) -> ModuleType:
    """The kernel module that runs `family` on x under the current backend."""
    backend = _STATE["backend"]
    width = triton.next_power_of_2(max(x.shape[-1], 1))  # as the launch tables and tilings see it
    if backend == "cute" or (backend == "auto" and x.is_cuda and width in AUTO_CUTE[family]):
        return _STATE["cute"][family]
    return _TRITON[family]


# ------------------------------------------------------------------------------------------ functions


def _over_last(fn, x: torch.Tensor, dim: int) -> torch.Tensor:
    """fn (which works on the last dimension) applied along `dim`."""
    dim = dim % x.dim() if x.dim() else 0
    if x.dim() == 0 or dim == x.dim() - 1:
        return fn(x)
    return fn(x.movedim(dim, -1)).movedim(-1, dim)


def softmax(x: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch.softmax(x, dim, dtype=dtype): fp32, fp16 or bf16, differentiable."""
    x = x if dtype is None else x.to(dtype)
    return _over_last(lambda t: _kernels("softmax", t).softmax(t), x, dim)


def log_softmax(x: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch.log_softmax(x, dim, dtype=dtype): fp32, fp16 or bf16, differentiable."""
    x = x if dtype is None else x.to(dtype)
    return _over_last(lambda t: _kernels("log_softmax", t).log_softmax(t), x, dim)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None) -> torch.Tensor:
    """F.rms_norm(x, x.shape[-1:], weight, eps) over the last dimension (eps None: as torch, fp32 epsilon);
    output in x's dtype, differentiable in x and weight."""
    return _kernels("rms_norm", x).rms_norm(x, weight, eps)


def rms_norm_add(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
                 eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual, weight, eps), x + residual), fused: the pre-norm residual pattern
    `h = x + residual; out = norm(h)` in one pass. Differentiable in x, residual and weight."""
    return _kernels("rms_norm", x).rms_norm_add(x, residual, weight, eps)


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    """F.layer_norm(x, x.shape[-1:], weight, bias, eps) over the last dimension; output in x's dtype,
    differentiable in x, weight and bias."""
    return _kernels("layer_norm", x).layer_norm(x, weight, bias, eps)


# -------------------------------------------------------------------------------------------- modules


def _flatten_last(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    if tuple(x.shape[x.dim() - len(shape):]) != shape:
        raise ValueError(f"expected an input ending in {list(shape)}, got {list(x.shape)}")
    return x.reshape(*x.shape[:x.dim() - len(shape)], math.prod(shape))


def _as_shape(normalized_shape: int | list[int] | tuple[int, ...] | torch.Size) -> tuple[int, ...]:
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


class RMSNorm(nn.Module):
    """Drop-in torch.nn.RMSNorm: the same arguments, a `weight` initialised to ones (none without
    elementwise_affine); normalises the last len(normalized_shape) dimensions."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: torch.dtype | None = None):
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight.reshape(-1) if self.weight is not None else None
        return rms_norm(_flatten_last(x, self.normalized_shape), w, self.eps).view(x.shape)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LayerNorm(nn.Module):
    """Drop-in torch.nn.LayerNorm: the same arguments, `weight` ones and `bias` zeros (none without
    elementwise_affine / bias); normalises the last len(normalized_shape) dimensions."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: torch.dtype | None = None):
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
            if bias:
                self.bias = nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight.reshape(-1) if self.weight is not None else None
        b = self.bias.reshape(-1) if self.bias is not None else None
        return layer_norm(_flatten_last(x, self.normalized_shape), w, b, self.eps).view(x.shape)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


def _legacy_dim(ndim: int) -> int:
    """torch's choice when Softmax(dim=None): dimension 0 for 0-, 1- and 3-D inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(nn.Module):
    """Drop-in torch.nn.Softmax(dim)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x, self.dim if self.dim is not None else _legacy_dim(x.dim()))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(nn.Module):
    """Drop-in torch.nn.LogSoftmax(dim)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return log_softmax(x, self.dim if self.dim is not None else _legacy_dim(x.dim()))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


# ----------------------------------------------------------------------------------- losses, attention


def _attention_kernels(q: torch.Tensor, k: torch.Tensor) -> ModuleType:
    """The attention module (kernels/attention/triton.py or cute.py) for this call under the current backend."""
    backend = _STATE["backend"]
    if backend != "triton" and q.is_cuda and q.dim() == 4 and k.dim() == 4:
        cute = importlib.import_module("kernelagent.kernels.attention.cute")
        fits = q.dtype in (torch.float16, torch.bfloat16) and q.shape[-1] in cute.HEAD_DIMS
        if fits and (backend == "cute" or k.shape[1] >= ATTENTION_CUTE_MIN_KEYS):
            return cute
    return importlib.import_module("kernelagent.kernels.attention.triton")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None,
              softcap: float | None = None, window: tuple[int, int] | None = None, return_lse: bool = False):
    """softmax(q k^T * scale) v for q (B, Sq, Hq, D), k, v (B, Sk, Hkv, D), differentiable (and lse with
    return_lse): the library's attention (kernels/attention/card.md), by the Triton kernels or, as the
    backend says, the CuTe DSL ones (same contract: bottom-right causal, window, softcap, GQA/MQA)."""
    return _attention_kernels(q, k).attention(q, k, v, causal=causal, scale=scale, softcap=softcap, window=window,
                                              return_lse=return_lse)


def __getattr__(name: str) -> Any:
    """The losses and attention, imported from their library folders on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'kernelagent.ops' has no attribute {name!r}")
    family, attr = _LAZY[name]
    for module_name in (f"kernelagent.kernels.{family}", f"kernelagent.kernels.{family}.triton"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, attr):
            return getattr(module, attr)
    raise AttributeError(f"kernelagent.ops.{name} is not available: kernelagent/kernels/{family}/ does not "
                         f"provide {attr} yet")


__all__ = ["BACKENDS", "BackendError", "LayerNorm", "LogSoftmax", "RMSNorm", "Softmax", "attention", "get_backend",
           "layer_norm", "log_softmax", "rms_norm", "rms_norm_add", "set_backend", "softmax", *_LAZY]
