"""What forward returned, checked and flattened without running any of the candidate's code.

Outputs must be plain `torch.Tensor`s in plain tuples, lists and dicts (exact types, not subclasses): a
container or tensor subclass could compute while the harness iterates it, after the op recorder closed.
The structure is described here and compared with the reference's by the parent.
"""

from __future__ import annotations

from typing import Any

import torch

_SCALARS = (bool, int, float, complex, str, type(None))
MAX_LEAVES = 4096


class OutputError(ValueError):
    """The output is not plain data: the message says what was found where."""


def check_outputs(out: Any) -> tuple[list[Any], str]:
    """The leaves (tensors and plain scalars) and a structure description, or OutputError."""
    leaves: list[Any] = []
    structure = _walk(out, "output", leaves)
    return leaves, structure


def _walk(obj: Any, where: str, leaves: list[Any]) -> str:
    kind = type(obj)
    if kind is torch.Tensor:
        if obj.layout != torch.strided or obj.is_meta:  # nothing the harness could read or compare
            raise OutputError(f"{where} is a {'meta' if obj.is_meta else str(obj.layout).removeprefix('torch.')} "
                              "tensor; return dense tensors holding the values")
        leaves.append(obj)
        return f"Tensor{tuple(obj.shape)}:{str(obj.dtype).removeprefix('torch.')}"
    if any(kind is s for s in _SCALARS):
        leaves.append(obj)
        return kind.__name__
    if len(leaves) > MAX_LEAVES:
        raise OutputError(f"{where}: more than {MAX_LEAVES} output values")
    if kind is tuple or kind is list:
        inner = [_walk(x, f"{where}[{i}]", leaves) for i, x in enumerate(obj)]
        text = ", ".join(inner)
        if kind is list:
            return f"[{text}]"
        return f"({text},)" if len(inner) == 1 else f"({text})"
    if kind is dict:
        parts = []
        for key in list(dict.keys(obj)):
            if type(key) not in (str, int):
                raise OutputError(f"{where}: dict keys must be str or int, got {type(key).__name__}")
            parts.append(f"{key}: {_walk(dict.__getitem__(obj, key), f'{where}[{key!r}]', leaves)}")
        return "{" + ", ".join(parts) + "}"
    name = type.__getattribute__(kind, "__qualname__")  # no metaclass of the candidate's gets a say
    if issubclass(kind, torch.Tensor):
        raise OutputError(f"{where} is a {name} (a torch.Tensor subclass); return plain torch.Tensors")
    raise OutputError(f"{where} is a {name}; return plain torch.Tensors in tuples, lists or dicts, shaped like "
                      "the reference's output")
