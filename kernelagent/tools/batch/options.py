"""What a batch is asked to do, and the one error a batch that cannot start raises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Progress = Callable[[dict[str, Any]], None]


class BatchError(Exception):
    """A batch that cannot start: bad inputs, unknown GPUs, Ray missing or unreachable."""


@dataclass
class BatchOptions:
    mode: str = "verify"                 # verify | optimize
    device: str = "auto"                 # auto | cpu | cuda
    jobs: int | None = None              # problems in flight (default: one per shard; optimize: four)
    gpus: list[int] | None = None        # GPU indices to use (default: all visible)
    seeds: int = 3
    timeout: float = 300.0
    timing: bool = True
    backend: str = "triton"              # optimize: the kernel language
    optimize: dict[str, Any] = field(default_factory=dict)  # OptimizeConfig fields (turns, candidates, ...)
    out_dir: str | None = None           # optimize: where kernels go (default: the batch's folder in the home)
    ray: str | None = None               # Ray address, or "local"
    new: bool = False                    # start a new batch even if the same one exists
    resume: str | None = None            # continue this batch id (or prefix)

    def identity(self) -> dict[str, Any]:
        """What makes two batches the same (not how many GPUs or jobs run it)."""
        keep = {"device": self.device, "seeds": self.seeds, "timing": self.timing}
        if self.mode == "optimize":
            keep.update(backend=self.backend, optimize=self.optimize)
        return keep

    def verify_options(self, device: str) -> dict[str, Any]:
        return {"device": device, "seeds": self.seeds, "timeout": self.timeout, "timing": self.timing}
