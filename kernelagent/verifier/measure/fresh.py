"""New input values for every timed call, and fingerprints of what each call returned.

Timing that reuses unchanged buffers rewards anything that remembers (memos keyed on identity, version
counters or content fingerprints, skipped stores). So call i of a timing run draws the problem's own
`get_inputs()` again under `plan.seed(i)` and copies the values into fixed buffers (outside the timed
region): the addresses stay, the values are new, and the candidate cannot predict them. Each call's
outputs are then reduced to a few random ±1 projections; the parent compares the projections of calls it
picked in secret with the reference's for the same draws (judge.timed).

Both the reference worker (baselines, check fingerprints) and the candidate worker use this module, so a
draw is the same on both sides. When `get_inputs()` is slow (it builds large inputs on the CPU), timing
uses a pool of draws picked per call from the seed; the report says so. A pool repeats inputs, so a memo
keyed on their values would hit: in pool mode about one call in FRESH_EVERY (which ones follows the secret
seeds) still gets a draw of its own, the reported figures come from those calls alone (timing.fresh_only),
and the judge compares them with the repeats' (judge.timed.remembered). Those draws, and a pool entry's
first one, are made after the previous call (`prefetch`), outside the window the spin before each timed
call covers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from kernelagent.verifier.protocol import TimingPlan
from kernelagent.verifier.rng import seed_all, seed_from_os
from kernelagent.verifier.tensorio import as_real

POOL_SIZE = 8
SLOW_DRAW_S = 0.02          # a draw slower than this switches to the pool
FRESH_EVERY = 2             # in pool mode, about one call in this many gets a draw of its own ...
FRESH_FROM = 8              # ... from this call on (the first calls warm the pool up)
_CHUNK = 1 << 20            # elements reduced at once by a fingerprint (k x 8 MiB of float64)

_perf = time.perf_counter


class DrawError(ValueError):
    """The problem's get_inputs() cannot give fresh draws of one fixed shape (the problem's fault)."""


@dataclass(frozen=True)
class DrawMode:
    """How call i gets its values: `fresh` (a new draw per call) or `pool` (one of POOL_SIZE draws)."""

    kind: str = "fresh"
    pool: int = POOL_SIZE
    fresh_every: int = 0  # pool mode: about one call in this many draws anew (0: none, packs made before)

    def is_fresh(self, plan: TimingPlan, i: int) -> bool:
        """Whether call i gets a draw no other call gets (every call in fresh mode)."""
        if self.kind == "fresh":
            return True
        return bool(self.fresh_every) and i >= FRESH_FROM and plan.seed(i) % self.fresh_every == 0

    def seed_of(self, plan: TimingPlan, i: int) -> int:
        if self.is_fresh(plan, i):
            return plan.seed(i)
        # the pool entry from bits of the seed other than those that chose "not fresh" (with fresh_every 2 the
        # low bit is 1 on every repeat: seed % pool would use only half the pool; review of 2026-12-02)
        return plan.seed(-2 - plan.seed(i) // max(1, self.fresh_every) % self.pool)

    def describe(self) -> str:
        if self.kind == "fresh":
            return "a new draw of get_inputs() per call"
        extra = f", and about one call in {self.fresh_every} a draw of its own" if self.fresh_every else ""
        return f"one of {self.pool} draws of get_inputs() per call{extra} (a draw costs too long to repeat per call)"


def draw_inputs(get_inputs: Callable[[], Any], seed: int, device: str) -> list[Any]:
    """The problem's main input set under `seed`, on `device`; the global RNG is left at a random state."""
    seed_all(seed)
    try:
        with torch.device(device):
            values = list(get_inputs())
    except Exception as e:  # noqa: BLE001 - the problem's own code failed on a new seed
        raise DrawError(f"get_inputs() raised on a fresh draw: {type(e).__name__}: {str(e)[:200]}") from e
    seed_from_os()  # the candidate must not learn `seed` from the RNG
    return [pytree.tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, x) for x in values]


def choose_mode(get_inputs: Callable[[], Any], plan: TimingPlan, device: str) -> DrawMode:
    """Fresh draws unless one costs more than SLOW_DRAW_S (measured on the second draw, after warm-up)."""
    draw_inputs(get_inputs, plan.seed(0), device)
    t = _perf()
    draw_inputs(get_inputs, plan.seed(1), device)
    if device == "cuda":
        torch.cuda.synchronize()
    return DrawMode("fresh") if _perf() - t <= SLOW_DRAW_S else DrawMode("pool", fresh_every=FRESH_EVERY)


def trainable(model: Any, names: list[str] | None = None) -> list[torch.Tensor]:
    """The parameters whose gradients a timed call fingerprints, in the same order on both sides: the
    reference's trainable ones sorted by name, and for a candidate those of the reference's `names` it has
    (a missing one leaves its fingerprint short, and the judge says so)."""
    named = dict(model.named_parameters()) if hasattr(model, "named_parameters") else {}
    if names is None:
        return [named[n] for n in sorted(named) if named[n].requires_grad]
    return [named[n] for n in names if n in named and named[n].requires_grad]


def trainable_names(model: Any) -> list[str]:
    """The names `trainable(model)` follows: what the reference tells a candidate's timing."""
    return sorted(n for n, p in model.named_parameters() if p.requires_grad)


def with_zeros(grads: Any, wrt: list[torch.Tensor]) -> list[torch.Tensor]:
    """Gradients with None (an unused input or parameter) as zeros, so both sides fingerprint one tensor per
    input and parameter, whichever side left one unused."""
    return [g if isinstance(g, torch.Tensor) else torch.zeros_like(w) for g, w in zip(grads, wrt, strict=True)]


def grad_outputs_for(outputs: list[Any], seed: int) -> list[torch.Tensor]:
    """Random upstream gradients for the differentiable outputs of a call (same on both sides), drawn in
    each output's own dtype (one write of its size)."""
    gen = None
    out = []
    for x in outputs:
        if isinstance(x, torch.Tensor) and x.requires_grad:
            if gen is None:
                gen = torch.Generator(device=x.device).manual_seed(seed ^ 0x5DEECE66D)
            out.append(torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype))
    return out


class Refresher:
    """Copies the values of draw i into fixed input buffers (one buffer set per slot)."""

    def __init__(self, get_inputs: Callable[[], Any], plan: TimingPlan, mode: DrawMode, device: str,
                 template: list[Any]):
        self.get_inputs, self.plan, self.mode, self.device = get_inputs, plan, mode, device
        self.template = template
        self.buffers: list[list[Any]] = []  # one buffer set per slot, made when the slot is first filled
        self._pool: dict[int, list[Any]] = {}
        self._ahead: tuple[int, list[Any]] | None = None  # (call, values) drawn ahead for a call of its own

    def values(self, i: int) -> list[Any]:
        if self._ahead is not None and self._ahead[0] == i:
            ahead, self._ahead = self._ahead[1], None
            return ahead
        return self._draw(i)

    def _draw(self, i: int) -> list[Any]:
        """Call i's values: a pool entry (drawn on its first use) or a draw of the call's own."""
        seed = self.mode.seed_of(self.plan, i)
        if self.mode.is_fresh(self.plan, i):
            return draw_inputs(self.get_inputs, seed, self.device)
        if seed not in self._pool:
            self._pool[seed] = draw_inputs(self.get_inputs, seed, self.device)
        return self._pool[seed]

    def prefetch(self, i: int) -> None:
        """In pool mode, make call i's draw now if it has none yet (a pool entry's first use, or a call of
        its own), so that its cost falls after the previous call, not between a spin and the call it
        covers. Fresh mode draws in `fill`, as before: a draw there is fast by definition."""
        if self.mode.kind != "pool" or (self._ahead is not None and self._ahead[0] == i):
            return
        values = self._draw(i)
        if self.mode.is_fresh(self.plan, i):
            self._ahead = (i, values)

    def fill(self, i: int, slot: int = 0) -> list[Any]:
        """Draw i's values into slot `slot`'s buffers; returns those buffers."""
        while len(self.buffers) <= slot:
            self.buffers.append([pytree.tree_map(_own_copy, x) for x in self.template])
        bufs = self.buffers[slot]
        new = self.values(i)
        dst, src = pytree.tree_leaves(bufs), pytree.tree_leaves(new)
        if len(dst) != len(src):
            raise DrawError("get_inputs() returned a different structure on another draw")
        with torch.no_grad():
            for d, s in zip(dst, src, strict=True):
                if isinstance(d, torch.Tensor):
                    if d.shape != s.shape or d.dtype != s.dtype:
                        raise DrawError(f"get_inputs() drew a {tuple(s.shape)} {s.dtype} tensor where an earlier "
                                         f"draw had {tuple(d.shape)} {d.dtype}: timing needs fixed shapes")
                    d.copy_(s)
        return bufs


def _own_copy(v: Any) -> Any:
    return v.detach().clone() if isinstance(v, torch.Tensor) else v


class Fingerprinter:
    """`k` random ±1 projections of every tensor leaf, in float64, queued on the current stream."""

    def __init__(self, seed: int, k: int, device: str):
        self.seed, self.k, self.device = seed, k, device
        self._masks: dict[tuple[int, int], torch.Tensor] = {}

    def _mask(self, leaf: int, n: int) -> torch.Tensor:
        key = (leaf, n)
        if key not in self._masks:
            gen = torch.Generator(device=self.device).manual_seed((self.seed + 7919 * leaf) % 2**62)
            bits = torch.randint(0, 2, (self.k, n), generator=gen, device=self.device, dtype=torch.int8)
            self._masks[key] = bits * 2 - 1
        return self._masks[key]

    def __call__(self, leaves: list[Any]) -> torch.Tensor:
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        out = torch.zeros((len(tensors), self.k), dtype=torch.float64, device=self.device)
        for li, t in enumerate(tensors):
            flat = as_real(t.detach()).reshape(-1)
            signs = self._mask(li, flat.numel())
            for start in range(0, flat.numel(), _CHUNK):
                part = flat[start:start + _CHUNK].to(torch.float64)
                out[li] += signs[:, start:start + _CHUNK].to(torch.float64) @ part
        return out


def l2_norms(leaves: list[Any]) -> list[float]:
    """The float64 L2 norm of each tensor leaf (scales for the fingerprint tolerance), complex as real pairs
    (as the fingerprints see them)."""
    return [float(torch.linalg.vector_norm(as_real(x.detach()).reshape(-1).to(torch.float64)))
            for x in leaves if isinstance(x, torch.Tensor)]
