"""Moving values between the verifier's processes: flatten outputs into leaves, save and load safely.

Files are written with torch.save and read with `weights_only=True`, so a file a candidate forged can
hold tensors and plain values but never code. Tensors of 1 MiB and more skip the pickle: their bytes go
to a raw side file (`NAME.pt.K.raw`, copied straight from the device), the `.pt` keeps a marker with
dtype and shape, and loading maps the side file (checking its size) instead of reading and copying it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

Leaf = Any  # torch.Tensor | int | float | bool | complex | None | str

_save = torch.save  # captured before any candidate is imported (see worker.py)
_load = torch.load
_from_file = torch.from_file

RAW_MIN_BYTES = 2**20
_MARK = "__ka_raw__"
_DTYPES = {str(d).removeprefix("torch."): d for d in (  # what a raw side file may hold
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
    torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32, torch.uint64)}


def flatten(obj: Any) -> tuple[list[Leaf], str]:
    """Flatten nested tuples/lists/dicts into leaves plus a printable structure description."""
    leaves, spec = pytree.tree_flatten(obj)
    return list(leaves), describe(obj)


def as_real(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real pairs (how outputs are compared and fingerprinted); others as they are."""
    return torch.view_as_real(t) if t.is_complex() else t


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
    """Save tensors (on any device) and plain values; large tensors go to raw side files."""
    path = Path(path)
    count = [0]

    def put(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        t = x.detach()
        if type(x) is torch.Tensor and t.layout == torch.strided and t.nbytes >= RAW_MIN_BYTES \
                and _dtype_name(t.dtype) in _DTYPES:
            k, count[0] = count[0], count[0] + 1
            return _write_raw(path.with_name(f"{path.name}.{k}.raw"), t, k)
        return t.to("cpu", copy=True)

    _save(_walk(payload, put), str(path))


def _write_raw(raw: Path, t: torch.Tensor, k: int) -> dict[str, Any]:
    src = t.resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)
    raw.unlink(missing_ok=True)
    dst = _from_file(str(raw), shared=True, size=src.numel(), dtype=torch.uint8)
    if src.is_cuda:
        _copy_through_pinned(src, dst)
    else:
        dst.copy_(src)
    del dst
    return {_MARK: k, "dtype": _dtype_name(t.dtype), "shape": list(t.shape)}


STAGE_BYTES = 64 * 2**20
_stage: list[torch.Tensor] = []


def _copy_through_pinned(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Device bytes into the mapped file by way of one reused pinned buffer: a copy from the device
    straight into pageable (mapped) memory ran at about 1 GB/s on the H200, through pinned memory 128 MiB
    took 41-45 ms instead of 104-132 (benchmarks/tensorio_probe.py)."""
    if not _stage:
        _stage.append(torch.empty(STAGE_BYTES, dtype=torch.uint8, pin_memory=True))
    stage = _stage[0]
    for start in range(0, src.numel(), stage.numel()):
        n = min(stage.numel(), src.numel() - start)
        stage[:n].copy_(src[start:start + n])  # synchronous: the stage is reused right after
        dst[start:start + n].copy_(stage[:n])


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def load(path: str | Path, device: str | None = None) -> dict[str, Any]:
    path = Path(path)
    obj = _load(str(path), map_location=device or "cpu", weights_only=True)

    def get(x: Any) -> Any:
        return _read_raw(path, x, device or "cpu") if isinstance(x, dict) and _MARK in x else x

    return _walk(obj, get)


def _read_raw(path: Path, mark: dict[str, Any], device: str) -> torch.Tensor:
    k, dtype, shape = mark[_MARK], _DTYPES.get(str(mark.get("dtype"))), mark.get("shape")
    if not isinstance(k, int) or dtype is None or not isinstance(shape, list) \
            or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"{path}: malformed raw tensor marker {mark!r}")
    raw = path.with_name(f"{path.name}.{k}.raw")
    n = math.prod(shape)
    size = raw.stat().st_size
    if size != n * dtype.itemsize:
        raise ValueError(f"{raw}: {size} bytes, expected {n * dtype.itemsize}")
    t = _from_file(str(raw), shared=False, size=n, dtype=dtype).view(shape)
    return t.to(device) if device != "cpu" else t


def _walk(obj: Any, fn: Any) -> Any:
    """Apply fn to every leaf (and to marker dicts) of nested dicts, lists and tuples, keeping their types."""
    out = fn(obj)
    if out is not obj:
        return out
    if isinstance(obj, dict):
        return type(obj)((k, _walk(v, fn)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_walk(v, fn) for v in obj)
    return obj


def grads_dict(grads: Any, req_grad: list[torch.Tensor], named: list[tuple[str, Any]]) -> dict[str, Any]:
    """Gradients keyed the same way on both sides: inputs by position, parameters by name."""
    grads = list(grads)
    n = len(req_grad)
    return {"inputs": grads[:n], "params": {name: g for (name, _), g in zip(named, grads[n:], strict=True)}}


def clone_leaves(values: list[Any]) -> list[Any]:
    """Deep-copy tensors (keeping requires_grad off) and pass other values through."""
    return [pytree.tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, x)
            for x in values]


def move(values: list[Any], device: str) -> list[Any]:
    return [pytree.tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, x) for x in values]
