"""Sizing a problem before it runs: inputs, parameters, outputs and one forward's peak, on the meta device.

Meta tensors have shapes and dtypes but no data, so drawing the inputs, building the model and running
the forward there costs no memory. A dispatch mode follows every tensor the forward creates and how long
it lives, which gives the most the forward holds at once. Where the problem cannot run on meta (it reads
values, or moves tensors to a named device), the inputs or the model are built for real on the CPU, and
where the forward cannot, its size is guessed from the inputs (`source` says which).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from kernelagent.problem import LoadedProblem
from kernelagent.verifier.audit.errors import problem_code
from kernelagent.verifier.estimate import Bytes, Sizes
from kernelagent.verifier.rng import seed_all

# what running a problem on meta may raise (reading values, naming a device, ops without meta kernels): the
# size then comes from the CPU or a guess; failures on the CPU are the problem's own (ProblemError)
META_ERRORS = (Exception,)


def footprint(values: Any) -> Bytes:
    """Bytes of every tensor in `values` (nested), in its dtype and with floats upcast to float64."""
    total = Bytes()
    for x in pytree.tree_leaves(values):
        if isinstance(x, torch.Tensor):
            total = total + Bytes.of(x.numel(), x.element_size(), x.is_floating_point() or x.is_complex())
    return total


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


class LivePeak(TorchDispatchMode):
    """Follows the storages the dispatched ops create and records the most alive at once (both byte kinds).
    Storages that existed before (inputs, parameters) are not counted: they are sized on their own."""

    def __init__(self, external: list[torch.Tensor]):
        super().__init__()
        self.external = {_key(t) for t in external}
        self.live: dict[int, list[int]] = {}       # storage -> [tensors alive, native bytes, f64 bytes]
        self.by_id: dict[int, weakref.ref] = {}
        self.now = [0, 0]
        self.peak = [0, 0]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out

    def _track(self, t: torch.Tensor) -> None:
        key = _key(t)
        ref = self.by_id.get(id(t))
        if key in self.external or (ref is not None and ref() is t):
            return
        self.by_id[id(t)] = weakref.ref(t)
        entry = self.live.get(key)
        if entry is None:
            nbytes = t.untyped_storage().nbytes()
            is_float = t.is_floating_point() or t.is_complex()
            wide = nbytes // max(1, t.element_size()) * max(8, t.element_size()) if is_float else nbytes
            entry = self.live[key] = [0, nbytes, wide]
            self.now = [self.now[0] + nbytes, self.now[1] + wide]
            self.peak = [max(self.peak[0], self.now[0]), max(self.peak[1], self.now[1])]
        entry[0] += 1
        weakref.finalize(t, self._drop, id(t), key)

    def _drop(self, ident: int, key: int) -> None:
        self.by_id.pop(ident, None)
        entry = self.live.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] <= 0:
            del self.live[key]
            self.now = [self.now[0] - entry[1], self.now[1] - entry[2]]


def size_problem(problem: LoadedProblem, seed: int = 0) -> tuple[Sizes, list[Any]]:
    """The problem's Sizes (largest input set) and the input sets drawn on meta (or the CPU), for the
    audit to count them. Problem errors (ProblemError) propagate: the file is at fault."""
    seed_all(seed)
    source = "meta"
    try:
        with torch.device("meta"):
            sets = problem.input_sets()
        sets = [[_to_meta(x) for x in s] for s in sets]
    except META_ERRORS:  # get_inputs() reads values or names a device: draw on the CPU
        seed_all(seed)
        sets = problem.input_sets()
        sets = [[_to_meta(x) for x in s] for s in sets]
        source = "cpu"
    largest = max(range(len(sets)), key=lambda i: footprint(sets[i]).native)
    inputs, elements = footprint(sets[largest]), _numel(sets[0])
    model, built = _meta_model(problem)
    source = source if built == "meta" else "cpu"
    state = [*model.parameters(), *model.buffers()]
    params = footprint(state)
    try:
        outputs, forward = _meta_forward(model, sets[largest], state)
    except META_ERRORS:
        outputs, forward, source = inputs, inputs + inputs, "rough"
    return Sizes(inputs=inputs, params=params, outputs=outputs, forward=forward, elements=elements,
                 source=source), sets


def _numel(values: list[Any]) -> int:
    return sum(x.numel() for x in pytree.tree_leaves(values) if isinstance(x, torch.Tensor))


def _to_meta(x: Any) -> Any:
    return pytree.tree_map(lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, x)


def _meta_model(problem: LoadedProblem) -> tuple[torch.nn.Module, str]:
    init = problem.init_inputs()
    try:
        with torch.device("meta"):
            return problem.model_cls(*init), "meta"
    except META_ERRORS:
        model = problem_code("Model(*get_init_inputs())", lambda: problem.model_cls(*init), problem.spec.path)
        return model.to("meta"), "cpu"


def _meta_forward(model: torch.nn.Module, inputs: list[Any], state: list[torch.Tensor]) -> tuple[Bytes, Bytes]:
    external = [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)] + state
    mode = LivePeak(external)
    with torch.no_grad(), mode:
        out = model(*inputs)
    leaves = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    return footprint(leaves), Bytes(mode.peak[0], mode.peak[1])
