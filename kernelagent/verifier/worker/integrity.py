"""Dynamic integrity probes used inside the workers: aten ops dispatched, poisoned allocations,
kernel launches counted, threads counted.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Aten ops a candidate's forward may dispatch: allocation, views and layout, copies and dtype/device
# moves, metadata, initialisation fills. Anything else computes, and means PyTorch did the work.
ALLOCATION_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
ALLOWED_OPS = ALLOCATION_OPS | {
    "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
    "fill_", "zero_", "fill", "arange", "scalar_tensor", "lift_fresh", "lift_fresh_copy",
    "view", "_unsafe_view", "reshape", "as_strided", "as_strided_", "t", "transpose", "permute", "expand",
    "squeeze", "unsqueeze", "slice", "select", "split", "split_with_sizes", "chunk", "unbind", "narrow",
    "flatten", "unflatten", "alias", "detach", "detach_", "view_as_real", "view_as_complex", "unfold",
    "numpy_T", "movedim", "_reshape_alias", "diagonal", "view_as", "expand_as", "contiguous",
    "clone", "copy_", "_to_copy", "to", "_copy_from", "_copy_from_and_resize", "resize_",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "dim", "is_contiguous",
    "_local_scalar_dense", "item", "is_same_size", "record_stream", "set_", "_has_compatible_shallow_copy_type",
}
_INT_POISON = {torch.int8: 127, torch.uint8: 255, torch.int16: 32767, torch.int32: 2**31 - 1,
               torch.int64: 2**63 - 1, torch.bool: True}


def op_name(func: Any) -> str:
    packet = getattr(func, "overloadpacket", None)
    ns = getattr(func, "namespace", "aten")
    return f"{ns}.{packet.__name__}" if packet is not None else str(func)


def is_allowed(name: str) -> bool:
    ns, _, base = name.partition(".")
    return ns in ("aten", "prim") and base in ALLOWED_OPS


def poison_value(dtype: torch.dtype, sentinel: bool) -> float | int | bool:
    if dtype.is_floating_point or dtype.is_complex:
        return -3.25e3 if sentinel else float("nan")
    return _INT_POISON.get(dtype, 0) if not sentinel else 77


class OpRecorder(TorchDispatchMode):
    """Records every aten op dispatched; optionally fills fresh allocations with a poison value.

    With poison `"nan"` uninitialised memory reads back as NaN (max int for integers); with
    `"sentinel"` as a distinctive finite value, so unwritten output elements can be located.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # else torch wraps __torch_dispatch__ in dynamo's disable decorator, whose first call imports
        # torch._dynamo (seconds on a cold worker) while the candidate runs
        return False

    def __init__(self, poison: str | None = None):
        super().__init__()
        self.poison = poison
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        name = op_name(func)
        self.ops[name] += 1
        if self.poison and name.partition(".")[2] in ALLOCATION_OPS and isinstance(out, torch.Tensor):
            if out.numel():
                out.fill_(poison_value(out.dtype, self.poison == "sentinel"))
        return out

    def op_names(self) -> set[str]:
        return set(self.ops)

    def compute_ops(self) -> dict[str, int]:
        return {k: v for k, v in self.ops.items() if not is_allowed(k)}


class LaunchCounter:
    """Counts kernel launches of the candidate's own kernels (Triton on GPU or interpreter, CuTe DSL)."""

    def __init__(self) -> None:
        self.stats: dict[str, Any] = {"triton_launches": 0, "triton_kernels": Counter(), "cute_launches": 0,
                                      "cute_kernels": Counter(), "interpreter_launches": []}

    @property
    def total(self) -> int:
        return int(self.stats["triton_launches"]) + int(self.stats["cute_launches"])

    def snapshot(self) -> int:
        return self.total

    def kernels(self) -> dict[str, int]:
        return dict(self.stats["triton_kernels"]) | dict(self.stats["cute_kernels"])

    def install_triton(self, interpreter: bool) -> None:
        import triton

        if interpreter:
            from triton.runtime.interpreter import InterpretedFunction

            from kernelagent.verifier.worker.compile_facts import describe_launch

            original = InterpretedFunction.run
            counter = self

            def run(fn_self, *args, grid, warmup, **kwargs):  # noqa: ANN001
                if not warmup:
                    counter.stats["triton_launches"] += 1
                    counter.stats["triton_kernels"][fn_self.fn.__name__] += 1
                    if len(counter.stats["interpreter_launches"]) < 256:
                        counter.stats["interpreter_launches"].append(describe_launch(fn_self, args, kwargs))
                return original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)

            InterpretedFunction.run = run
            return

        def enter(metadata: Any) -> None:
            self.stats["triton_launches"] += 1
            data = getattr(metadata, "data", None)  # triton's LazyDict keeps the launch name in .data
            name = data.get("name", "?") if isinstance(data, dict) else "?"
            self.stats["triton_kernels"][str(name)] += 1

        triton.knobs.runtime.launch_enter_hook.add(enter)
        self._triton_hook = enter

    def remove_triton_hook(self) -> None:
        """Timing must not pay for a Python callback per launch."""
        hook = getattr(self, "_triton_hook", None)
        if hook is not None:
            import triton
            triton.knobs.runtime.launch_enter_hook.remove(hook)

    def install_cute(self) -> bool:
        try:
            from kernelagent.verifier.cute import support as cute_support
        except ImportError:
            return False
        try:
            cute_support.install_hooks(self.stats)
        except Exception as e:  # noqa: BLE001 - launches then go uncounted; the report says so
            self.stats["cute_hook_error"] = f"{type(e).__name__}: {e}"[:200]
            return False
        return True


def os_thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def python_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate())
