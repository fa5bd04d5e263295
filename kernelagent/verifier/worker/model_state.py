"""The parameters and buffers of the candidate's model, read from nn.Module's own storage.

The harness never calls a method of the candidate's model to find its weights: `state_dict`,
`named_parameters`, `__getattr__`, state-dict hooks and `_save_to_state_dict` can all be overridden, on the
model or on any submodule, and an override that raised was once reported as the verifier's own error (red
team, 2026-12-03). Each module's instance dictionary is read through nn.Module's own `__dict__` descriptor
(bound before any candidate code exists), and its `_parameters`, `_buffers` and `_modules` through
`dict`'s own methods; a model whose storage is not plain dicts of tensors and modules is refused with
ModelStateError, which the caller blames on the candidate. What is found is what `nn.Module.state_dict`
and `named_parameters` find for a model that overrides neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

_INSTANCE_DICT = torch.nn.Module.__dict__["__dict__"]  # getset descriptor: no class of the candidate's is asked
_MODULE = torch.nn.Module
_TENSOR = torch.Tensor
MAX_MODULES = 100_000  # modules visited per walk (a graph of shared submodules can name exponentially many)


class ModelStateError(Exception):
    """The model's storage is not what nn.Module keeps (not a dict, not tensors), or is too large to walk."""


def state_tensors(model: Any) -> dict[str, torch.Tensor]:
    """What `model.state_dict(keep_vars=True)` holds for a model that overrides nothing: parameters and
    persistent buffers by dotted name, shared ones under each of their names."""
    out: dict[str, torch.Tensor] = {}
    for prefix, own in _walk(model, dedupe=False):
        for name, value in _entries(own, "_parameters", _TENSOR):
            out[prefix + name] = value
        transient = dict.get(own, "_non_persistent_buffers_set", set())
        if not issubclass(type(transient), set):
            raise ModelStateError(f"{prefix or 'the model'}: _non_persistent_buffers_set is not a set")
        for name, value in _entries(own, "_buffers", _TENSOR):
            if not set.__contains__(transient, name):
                out[prefix + name] = value
    return out


def named_parameters(model: Any) -> list[tuple[str, torch.Tensor]]:
    """What `model.named_parameters()` yields for a model that overrides nothing: each parameter once, under
    the first name it is found by."""
    seen: set[int] = set()
    out = []
    for prefix, own in _walk(model, dedupe=True):
        for name, value in _entries(own, "_parameters", _TENSOR):
            if id(value) not in seen:
                seen.add(id(value))
                out.append((prefix + name, value))
    return out


def _walk(model: Any, dedupe: bool) -> Iterator[tuple[str, dict[str, Any]]]:
    """(prefix, instance dict) of the model and its submodules, depth first as nn.Module orders them; a module
    inside itself is not entered again (state_dict would recurse for ever)."""
    if not issubclass(type(model), _MODULE):
        raise ModelStateError(f"the model is a {type(model).__name__}, not an nn.Module")
    visited: set[int] = set()
    stack: list[tuple[str, Any, frozenset[int]]] = [("", model, frozenset())]
    count = 0
    while stack:
        prefix, module, above = stack.pop()
        if id(module) in above or (dedupe and id(module) in visited):
            continue
        visited.add(id(module))
        count += 1
        if count > MAX_MODULES:
            raise ModelStateError(f"the model names more than {MAX_MODULES} submodules")
        own = _INSTANCE_DICT.__get__(module, type(module))
        if not issubclass(type(own), dict):
            raise ModelStateError(f"{prefix or 'the model'}: its __dict__ is not a dict")
        yield prefix, own
        children = list(_entries(own, "_modules", _MODULE))
        for name, child in reversed(children):
            stack.append((f"{prefix}{name}.", child, above | {id(module)}))


def _entries(own: dict[str, Any], slot: str, kind: type) -> Iterator[tuple[str, Any]]:
    """The (name, value) pairs of one of nn.Module's dicts, `None` values skipped (as nn.Module does)."""
    table = dict.get(own, slot, {})
    if not issubclass(type(table), dict):
        raise ModelStateError(f"{slot} is a {type(table).__name__}, not a dict")
    for name, value in list(dict.items(table)):
        if value is None:
            continue
        if type(name) is not str:
            raise ModelStateError(f"{slot} has a key of type {type(name).__name__}, not str")
        if not issubclass(type(value), kind):
            raise ModelStateError(f"{slot}[{name!r}] holds a {type(value).__name__}, not a {kind.__name__}")
        yield name, value
