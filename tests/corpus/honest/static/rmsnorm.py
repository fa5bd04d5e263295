"""RMSNorm with a learned weight: fp32 statistics, one program per row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * stride_y + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        assert self.weight.shape[0] == n_cols, "weight size must match the last dimension"
        x2 = x.view(-1, n_cols) if x.is_contiguous() else x.reshape(-1, n_cols).contiguous()
        y = torch.empty_like(x2)
        block = max(triton.next_power_of_2(n_cols), 16)
        grid = (x2.shape[0],)
        _rmsnorm_kernel[grid](
            x2, self.weight, y, x2.stride(0), y.stride(0), n_cols, self.eps, BLOCK=block,
        )
        return y.view(x.shape)
