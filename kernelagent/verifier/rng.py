"""Seeding the global random generators the problem's `get_inputs` draws from, in one place.

`torch.manual_seed` also seeds every other backend torch knows (XPU, MTIA, MPS, custom devices); for each
one not initialised it queues the call with a formatted stack trace. That costs about a millisecond per
seed, and a timed call draws new inputs under a new seed every time: on a small kernel it was most of
the host time of the timing stage (H200, 2026-12-02: 2.2 of 3.6 ms per call). Only the CPU and CUDA
generators matter here; they end in the same states as under `torch.manual_seed`, so the values drawn
are the same. (Before CUDA is initialised torch still queues the CUDA seeding with a stack trace, once per
seed; every worker initialises CUDA before it draws.)

Captured at import, before any candidate code runs in the process.
"""

from __future__ import annotations

import os

import torch

_cpu = torch.default_generator
_cuda_available = torch.cuda.is_available
_cuda_seed_all = torch.cuda.manual_seed_all  # direct once CUDA is initialised, else queued for its start


def seed_all(seed: int) -> None:
    """The CPU and every CUDA device's default generator to `seed`, as `torch.manual_seed` leaves them."""
    seed = int(seed)
    if _cuda_available():
        _cuda_seed_all(seed)
    _cpu.manual_seed(seed)


def seed_from_os() -> None:
    """A seed nobody chose: what runs next cannot learn an earlier seed from the generators' state."""
    seed_all(int.from_bytes(os.urandom(7), "little"))
