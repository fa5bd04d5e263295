"""The Triton code torch.compile generates for a row-wise op (GPU): what our kernels are measured against.

  TORCH_LOGS=output_code python3 benchmarks/probes/inductor_code.py [rms_norm|layer_norm] [ROWS] [COLS]

Prints Inductor's generated module (with its launch configuration) on stderr, via torch's own logging.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F  # noqa: N812

OPS = {"rms_norm": lambda x, w, b: F.rms_norm(x, x.shape[-1:], w, 1e-6),
       "layer_norm": lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5)}


def main() -> None:
    op = sys.argv[1] if len(sys.argv) > 1 else "rms_norm"
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 16384
    cols = int(sys.argv[3]) if len(sys.argv) > 3 else 8192
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    fn = torch.compile(OPS[op], dynamic=False)
    fn(x, w, b)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
