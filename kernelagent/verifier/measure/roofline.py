"""Roofline: the work a problem must do (FLOPs, minimum bytes) and the floor it implies on a GPU.

FLOPs of matrix ops come from `torch.utils.flop_counter` on the reference; ops it does not count
(pointwise, reductions, softmax, norms) are charged one FLOP per element they read or write, on the
CUDA cores. Minimum bytes = every input, parameter and output touched once. Ceilings (copy bandwidth,
matmul rates per dtype) are measured by `kernelagent doctor --measure` and cached per GPU.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

# Conservative datasheet-derived fallbacks for an H200 SXM when nothing has been measured.
FALLBACK_CEILINGS = {"copy_gbps": 4270.0, "bf16_tflops": 700.0, "fp16_tflops": 700.0, "tf32_tflops": 350.0,
                     "fp32_tflops": 51.0, "fp64_tflops": 51.0, "source": "fallback (not measured)"}
_MATMUL_CEILING = {torch.bfloat16: "bf16_tflops", torch.float16: "fp16_tflops", torch.float32: "fp32_tflops",
                   torch.float64: "fp64_tflops"}
_VIEWS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "squeeze", "unsqueeze",
          "slice", "select", "as_strided", "detach", "alias", "empty", "empty_like", "clone", "copy_",
          "_to_copy", "zeros", "ones", "full", "fill_", "zero_", "new_empty", "empty_strided", "split",
          "unbind", "lift_fresh", "_local_scalar_dense", "sym_size", "sym_stride", "size", "stride"}


def _nbytes(values: Any) -> int:
    return sum(x.numel() * x.element_size() for x in pytree.tree_leaves(values) if isinstance(x, torch.Tensor))


class _ElementCounter(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # no lazy torch._dynamo import on the first dispatch
        return False

    def __init__(self, skip: set[str]):
        super().__init__()
        self.skip = skip
        self.elements = 0
        self.dtypes: set[torch.dtype] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        base = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else ""
        if base not in _VIEWS and base not in self.skip:
            reads = sum(x.numel() for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor))
            writes = sum(x.numel() for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor))
            self.elements += max(reads, writes)
        for x in pytree.tree_leaves(args):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                self.dtypes.add(x.dtype)
        return out


def count_work(model: torch.nn.Module, inputs: list[Any], outputs: Any) -> dict[str, Any]:
    """FLOPs (matrix and other) and minimum bytes of one forward call of the reference."""
    from torch.utils.flop_counter import FlopCounterMode

    ins = [pytree.tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, x) for x in inputs]
    counter = FlopCounterMode(display=False)
    try:
        with torch.no_grad(), counter:
            model(*ins)
        per_op = {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
        mm_flops = int(counter.get_total_flops())
    except Exception as e:  # noqa: BLE001 - FLOP counting is best effort, never fatal
        per_op, mm_flops = {"error": str(e)[:200]}, 0
    counted = {str(k).split(".")[-1] for k in per_op}
    elem = _ElementCounter(skip=counted | {"mm", "bmm", "addmm", "convolution", "baddbmm"})
    with torch.no_grad(), elem:
        model(*[pytree.tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, x)
                for x in inputs])
    params = [p for p in model.parameters()] + [b for b in model.buffers()]
    dtypes = sorted({str(d).removeprefix("torch.") for d in elem.dtypes})
    return {"matmul_flops": mm_flops, "other_flops": int(elem.elements), "flops_by_op": per_op,
            "min_bytes": _nbytes(inputs) + _nbytes(outputs) + _nbytes(params), "dtypes": dtypes,
            "input_bytes": _nbytes(inputs), "output_bytes": _nbytes(outputs), "param_bytes": _nbytes(params)}


# What an output may leave in the H200's 60 MiB L2 without reaching DRAM before the end event.
L2_BYTES = 50 * 2**20


def physics_floor_ms(work: dict[str, Any], ceilings: dict[str, Any]) -> float:
    """A time no honest call can beat: its inputs come from DRAM (L2 is flushed before each call), outputs
    beyond what L2 can hold go back to DRAM, and matrix FLOPs run at most at the fastest dense rate the GPU
    has (whatever dtype). Below judge.checks.PHYSICS_MARGIN of this, work was skipped."""
    bw = float(ceilings.get("copy_gbps") or FALLBACK_CEILINGS["copy_gbps"])
    peak = max(float(ceilings.get(k) or FALLBACK_CEILINGS[k]) for k in ("bf16_tflops", "fp16_tflops"))
    moved = work.get("input_bytes", 0) + max(0, work.get("output_bytes", 0) - L2_BYTES)
    memory = moved / (bw * 1e9) * 1e3
    matmul = work.get("matmul_flops", 0) / (1.25 * peak * 1e12) * 1e3
    return max(memory, matmul)


def floor_ms(work: dict[str, Any], ceilings: dict[str, Any]) -> dict[str, Any]:
    """Time floors for memory, matrix FLOPs and other FLOPs; the largest binds."""
    dtypes = work.get("dtypes") or ["float32"]
    mm_key = next((_MATMUL_CEILING[getattr(torch, d)] for d in ("bfloat16", "float16", "float32", "float64")
                   if d in dtypes), "fp32_tflops")
    bw = float(ceilings.get("copy_gbps") or FALLBACK_CEILINGS["copy_gbps"])
    mm_rate = float(ceilings.get(mm_key) or FALLBACK_CEILINGS[mm_key])
    fp32_rate = float(ceilings.get("fp32_tflops") or FALLBACK_CEILINGS["fp32_tflops"])
    floors = {
        "memory": work.get("min_bytes", 0) / (bw * 1e9) * 1e3,
        "matmul": work.get("matmul_flops", 0) / (mm_rate * 1e12) * 1e3,
        "other": work.get("other_flops", 0) / (fp32_rate * 1e12) * 1e3,
    }
    bound = max(floors, key=floors.get)
    return {"floors_ms": floors, "bound": bound, "floor_ms": floors[bound], "matmul_ceiling": mm_key,
            "ceilings_source": ceilings.get("source", "measured")}


def percent_of_limit(time_ms: float, floor: dict[str, Any]) -> float | None:
    if not time_ms or time_ms <= 0 or not floor.get("floor_ms"):
        return None
    return 100.0 * floor["floor_ms"] / time_ms
