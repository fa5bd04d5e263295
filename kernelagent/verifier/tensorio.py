"""Moving values between the verifier's processes: flatten outputs into leaves, save and load safely.

Files are written with torch.save and read with `weights_only=True`, so a file a candidate forged can
hold tensors and plain values but never code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

Leaf = Any  # torch.Tensor | int | float | bool | complex | None | str

_save = torch.save  # captured before any candidate is imported (see worker.py)
_load = torch.load


def flatten(obj: Any) -> tuple[list[Leaf], str]:
    """Flatten nested tuples/lists/dicts into leaves plus a printable structure description."""
    leaves, spec = pytree.tree_flatten(obj)
    return list(leaves), describe(obj)


def describe(obj: Any) -> str:
    if isinstance(obj, torch.Tensor):
        return f"Tensor{tuple(obj.shape)}:{str(obj.dtype).removeprefix('torch.')}"
    if isinstance(obj, (list, tuple)):
        inner = ", ".join(describe(o) for o in obj)
        return f"({inner},)" if isinstance(obj, tuple) and len(obj) == 1 else (
            f"({inner})" if isinstance(obj, tuple) else f"[{inner}]")
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in obj.items()) + "}"
    return type(obj).__name__


def to_cpu(leaves: list[Leaf]) -> list[Leaf]:
    """Detach and copy tensors to host memory (keeping dtype, shape and strides' contents)."""
    out: list[Leaf] = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            out.append(x.detach().to("cpu", copy=True))
        else:
            out.append(x)
    return out


def save(path: str | Path, payload: dict[str, Any]) -> None:
    _save(payload, str(path))


def load(path: str | Path, device: str | None = None) -> dict[str, Any]:
    return _load(str(path), map_location=device or "cpu", weights_only=True)


def grads_dict(grads: Any, req_grad: list[torch.Tensor], named: list[tuple[str, Any]]) -> dict[str, Any]:
    """Gradients keyed the same way on both sides: inputs by position, parameters by name."""
    grads = list(grads)
    n = len(req_grad)
    return {"inputs": grads[:n], "params": {name: g for (name, _), g in zip(named, grads[n:], strict=True)}}


def grads_to_cpu(grads: dict[str, Any] | None) -> dict[str, Any] | None:
    if grads is None:
        return None
    return {"inputs": to_cpu(grads["inputs"]),
            "params": dict(zip(grads["params"], to_cpu(list(grads["params"].values())), strict=True))}


def clone_leaves(values: list[Any]) -> list[Any]:
    """Deep-copy tensors (keeping requires_grad off) and pass other values through."""
    return [pytree.tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, x)
            for x in values]


def move(values: list[Any], device: str) -> list[Any]:
    return [pytree.tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, x) for x in values]
