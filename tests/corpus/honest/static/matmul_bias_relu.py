"""relu(x @ W^T + b) with a tiled tl.dot GEMM and the bias and ReLU fused in the epilogue."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_relu_kernel(
    a_ptr, w_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_wk, stride_wn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :] * stride_ak,
            mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0,
        )
        w = tl.load(
            w_ptr + (k0 + rk)[:, None] * stride_wk + rn[None, :] * stride_wn,
            mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0,
        )
        acc += tl.dot(a, w)
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    acc = tl.maximum(acc + bias[None, :], 0.0)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # weight preparation runs once, in PyTorch
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x.contiguous()
        M, K = a.shape
        N = self.weight.shape[0]
        w_t = self.weight.t()  # (K, N) view, no copy
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        block_m, block_n, block_k = 64, 64, 32
        grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
        _linear_relu_kernel[grid](
            a, w_t, self.bias, c, M, N, K,
            a.stride(0), a.stride(1), w_t.stride(0), w_t.stride(1), c.stride(0), c.stride(1),
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        )
        return c
