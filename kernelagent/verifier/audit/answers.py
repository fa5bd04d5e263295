"""Answers a kernel could return without computing anything, built one at a time (streamed).

For each output leaf: zeros; a constant (the first draw's mean output, reused for every draw: a constant
must not depend on the inputs); an input of the output's shape (the identity); an input broadcast to the
output's shape; the first float input's mean; a parameter or buffer broadcast to the output's shape (a
learned offset that dominates); the first draw's whole output reused for later draws (a memorised answer).
An answer exists for a problem only when every output leaf has one; a non-tensor output has none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

Builder = Callable[[], list[torch.Tensor]]
MAX_PARAMETERS = 8   # parameter broadcasts tried per problem (the first that fit the output's shape)


def constants(leaves: list[Any]) -> list[float | int | bool | None]:
    """One constant per output leaf, from the first draw: the mean (floats) or the most common value."""
    out: list[float | int | bool | None] = []
    for x in leaves:
        if not isinstance(x, torch.Tensor) or not x.numel():
            out.append(None)
        elif x.is_floating_point():
            out.append(float(x.detach().mean(dtype=torch.float64)))  # no float64 copy of the output
        elif x.is_complex():
            out.append(None)
        elif x.dtype == torch.bool:
            out.append(bool(x.detach().float().mean() >= 0.5))
        else:
            out.append(int(x.detach().flatten().mode().values))
    return out


def _broadcasts(src: torch.Tensor, shape: torch.Size) -> bool:
    if src.dim() > len(shape):
        return False
    return all(a in (1, b) for a, b in zip(reversed(src.shape), reversed(shape), strict=False))


def trivial_answers(outs: list[Any], inputs: list[torch.Tensor], params: list[tuple[str, torch.Tensor]],
                    consts: list[Any], first: list[Any] | None) -> Iterator[tuple[str, Builder]]:
    """(name, builder) for every trivial answer that applies to these outputs; nothing is built until asked.
    `first` is the first draw's output (the memorised answer), None on the first draw itself."""
    if not outs or not all(isinstance(y, torch.Tensor) for y in outs):
        return
    floats = [x for x in inputs if x.is_floating_point()]
    candidates: list[tuple[str, Callable[[int, torch.Tensor], torch.Tensor | None]]] = [
        ("zeros", lambda i, y: torch.zeros_like(y)),
        ("constant", lambda i, y: None if consts[i] is None else torch.full_like(y, consts[i])),
        ("identity", lambda i, y: _same_shape(inputs, y)),
        ("input broadcast", lambda i, y: _broadcast(inputs, y)),
        ("input mean", lambda i, y: _input_mean(floats, y)),
    ]
    for name, p in params[:MAX_PARAMETERS]:
        candidates.append((f"parameter broadcast ({name})", lambda i, y, p=p: _expand(p, y)))
    if first is not None:
        candidates.append(("fixed output", lambda i, y: first[i] if isinstance(first[i], torch.Tensor) else None))
    for name, make in candidates:
        if all(_applies(make, i, y) for i, y in enumerate(outs)):
            yield name, (lambda make=make: [make(i, y) for i, y in enumerate(outs)])


def _applies(make: Callable[[int, torch.Tensor], torch.Tensor | None], i: int, y: torch.Tensor) -> bool:
    """Whether `make` has an answer for leaf `i`, decided on a meta twin so nothing is allocated."""
    return make(i, torch.empty(y.shape, dtype=y.dtype, device="meta")) is not None


def _same_shape(inputs: list[torch.Tensor], y: torch.Tensor) -> torch.Tensor | None:
    x = next((x for x in inputs if x.shape == y.shape), None)
    return None if x is None else _cast(x, y)


def _broadcast(inputs: list[torch.Tensor], y: torch.Tensor) -> torch.Tensor | None:
    x = next((x for x in inputs if x.shape != y.shape and _broadcasts(x, y.shape)), None)
    return None if x is None else _expand(x, y)


def _expand(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    if not _broadcasts(x, y.shape):
        return None
    return _cast(x, y).expand(y.shape)


def _input_mean(floats: list[torch.Tensor], y: torch.Tensor) -> torch.Tensor | None:
    if not floats or not y.is_floating_point():
        return None
    if y.device.type == "meta":
        return y
    return torch.full_like(y, float(floats[0].detach().mean(dtype=torch.float64)))


def _cast(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`x` in `y`'s dtype (a view when it already is); on a meta twin, a meta stand-in of the same shape."""
    if y.device.type == "meta":
        return torch.empty(x.shape, dtype=y.dtype, device="meta")
    return x.detach().to(device=y.device, dtype=y.dtype)
