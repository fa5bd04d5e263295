"""Local shards: one process per GPU, pinned with CUDA_VISIBLE_DEVICES before torch is imported, holding one
verifier whose workers inherit the pin; a shard serves one call at a time, so no two timing runs share a GPU."""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from kernelagent.tools.batch.options import BatchError, BatchOptions

_SHARD: dict[str, Any] = {}


def _shard_init(visible: str, options: dict[str, Any]) -> None:
    """In a shard process: pin the GPU before anything imports torch, then start one verifier."""
    os.environ["CUDA_VISIBLE_DEVICES"] = visible
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.options import VerifyOptions
    from kernelagent.verifier.sandbox.pool import WorkerPool

    opts = VerifyOptions(**options)
    verifier = Verifier(opts, pool=WorkerPool.for_options(opts, size=1))
    _SHARD["verifier"] = verifier
    multiprocessing.util.Finalize(verifier, verifier.close, exitpriority=10)


def shard_verify(problem: str, candidate: str) -> dict[str, Any]:
    """In a shard process: one verification, as a report dict."""
    return _SHARD["verifier"].verify(problem, candidate).to_dict()


def shard_prepare(problem: str) -> dict[str, Any]:
    """In a shard process: the agent's prepare step (reference pack, baselines, roofline floor)."""
    from kernelagent.tools.prepare import prepare_with

    return prepare_with(_SHARD["verifier"], problem)


class Shard:
    """One process with one verifier, pinned to one GPU (or to none); serves one call at a time."""

    def __init__(self, label: str, visible: str, options: dict[str, Any]):
        self.label, self.visible, self.options = label, visible, options
        self.active = 0
        self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_shard_init,
                                   initargs=(self.visible, self.options))

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` in the shard; a shard process that died is restarted for the next call."""
        try:
            return self._pool.submit(fn, *args).result()
        except BrokenProcessPool:
            self._pool = self._start()
            raise

    def close(self, wait: bool = True) -> None:
        """Stop the shard; `wait=False` (after Ctrl-C) does not wait for the verification in flight."""
        self._pool.shutdown(wait=wait, cancel_futures=True)


def _visible_ids() -> list[str]:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    parent = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return parent[:count] if parent else [str(i) for i in range(count)]


def shard_plan(opts: BatchOptions) -> list[tuple[str, str, str]]:
    """(label, CUDA_VISIBLE_DEVICES, device) of each shard: one per chosen GPU, else `jobs` CPU shards."""
    ids = [] if opts.device == "cpu" else _visible_ids()
    if opts.device == "cuda" and not ids:
        raise BatchError("--device cuda was asked for, but no CUDA GPU is visible")
    if not ids:
        if opts.gpus:
            raise BatchError("--gpus was given, but no CUDA GPU is visible")
        return [(f"cpu{i}", "", "cpu") for i in range(max(1, opts.jobs or 1))]
    chosen = opts.gpus if opts.gpus is not None else list(range(len(ids)))
    bad = [g for g in chosen if not 0 <= g < len(ids)]
    if bad or len(set(chosen)) != len(chosen):
        raise BatchError(f"--gpus {','.join(map(str, chosen))}: this machine shows GPUs 0..{len(ids) - 1}")
    return [(f"gpu{g}", ids[g], "cuda") for g in chosen]
