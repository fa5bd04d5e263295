"""Reference worker: builds the trials (inputs, parameters) and the reference outputs for a problem.

Runs in its own process, which never imports candidate code: the candidate cannot read, patch or
free the reference's outputs. Writes a *pack*: `init.pt`, `inputs_<t>.pt` (what the candidate gets)
and `ref/ref_<t>.pt` (what only the parent reads), plus `meta.json`.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from kernelagent.problem import LoadedProblem, load_problem, problem_error
from kernelagent.verifier import tensorio
from kernelagent.verifier.measure.roofline import count_work
from kernelagent.verifier.protocol import ReferenceRequest
from kernelagent.verifier.rng import seed_all
from kernelagent.verifier.tensorio import grads_dict
from kernelagent.verifier.worker.integrity import OpRecorder


def _bytes(values: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in pytree.tree_leaves(values) if isinstance(x, torch.Tensor))


def _numel(values: list[Any]) -> int:
    leaves = pytree.tree_leaves(values)
    return sum(x.numel() for x in leaves if isinstance(x, torch.Tensor))


def _alt_distribution(values: list[Any], gen: torch.Generator) -> list[Any]:
    """Same shapes and dtypes, other values: mean + std * randn (abs() where the original was >= 0), placed
    in the order of the original values, so that equal values stay equal and the order of every pair is
    kept (a sorted tensor stays sorted, a two-valued mask two-valued): a kernel may rely on what the
    problem's draws keep, such as sorted boundaries for a binary search."""
    def redraw(x: Any) -> Any:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 2:
            return x
        xf = x.double()
        mean, std = float(xf.mean()), float(xf.std())
        if not math.isfinite(std) or std == 0.0:
            return x
        distinct, where = torch.unique(xf.reshape(-1), sorted=True, return_inverse=True)
        draw = mean + std * torch.randn(distinct.numel(), generator=gen, dtype=torch.float64)
        if float(xf.min()) >= 0:
            draw = draw.abs()
        return draw.sort().values.to(x.device)[where].reshape(x.shape).to(x.dtype)
    return [pytree.tree_map(redraw, v) for v in values]


def _state_buffers(model: torch.nn.Module, drawn: frozenset[str]) -> list[torch.Tensor]:
    """The floating buffers the model's state carries (persistent: what load_state_dict hands the candidate) whose
    values the constructor drew at random (`drawn`: they differ between two builds)."""
    kept = model.state_dict(keep_vars=True)
    return [b for n, b in model.named_buffers() if n in kept and n in drawn and b.is_floating_point() and b.numel()]


def _drawn_buffers(model: torch.nn.Module, other: torch.nn.Module) -> frozenset[str]:
    """Names of the buffers that differ between two builds of the model under different seeds: state drawn at
    random (running statistics), not tables the constructor computes (masks, positional tables), which a kernel
    may compute itself instead of reading."""
    theirs = dict(other.named_buffers())
    return frozenset(n for n, b in model.named_buffers()
                     if n in theirs and (b.shape != theirs[n].shape or not torch.equal(b, theirs[n].to(b.device))))


def _reinit_params(model: torch.nn.Module, gen: torch.Generator, drawn: frozenset[str] = frozenset()) -> None:
    """Fresh random values for float parameters, at the scale of the originals (ones become ~N(1, 0.1)); floating
    buffers drawn at random (`_drawn_buffers`) scaled element by element by factors in [0.5, 1.5], which keeps
    their signs and zeros: a kernel that keeps the first call's buffers fails the later seeds (red team,
    2026-12-05: batch norm's random running statistics cloned at the first call were accepted). Tables the
    constructor computes stay as they are (a causal mask used as a product, a positional table: red team)."""
    with torch.no_grad():
        for b in _state_buffers(model, drawn):
            factor = 0.5 + torch.rand(b.shape, generator=gen, dtype=torch.float64)
            b.copy_((b.double() * factor.to(b.device)).to(b.dtype))
        for p in model.parameters():
            if not p.is_floating_point():
                continue
            pf = p.double()
            mean = float(pf.mean())
            std = float(pf.std()) if p.numel() > 1 else 0.0
            scale = max(std if math.isfinite(std) else 0.0, 0.1 * abs(mean), 0.05)
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.device)
            p.copy_((mean + scale * noise).to(p.dtype))


# (scale, offset) tried in turn for the wide trial: the first whose reference stays finite is kept; each is
# multiplied by a secret factor in [WIDE_DRAW, 1], and the inputs are a draw of their own (WIDE_SEED), not the
# first trial's: an exact affine image of the first trial was recognised and answered from that trial's output
# (red team, 2026-12-05)
WIDE_STEPS = ((40.0, 60.0), (10.0, 20.0), (4.0, 8.0))
WIDE_DRAW = 0.75
WIDE_SEED = 50_021  # added to the secret; no trial's seed (101 (k + 1)) reaches it


def _widened(values: list[Any], scale: float, offset: float) -> list[Any]:
    """Floating inputs times `scale` plus `offset` (integers, indices and masks unchanged)."""
    def widen(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return (x.double() * scale + offset).to(x.dtype)
        return x
    return [pytree.tree_map(widen, v) for v in values]


NEAR_CHANGES = 16


def _nudged(x: Any, gen: torch.Generator) -> Any:
    """A copy of `x` with up to NEAR_CHANGES elements changed, each to a value between its own and the next larger
    value of the tensor, and only where its value occurs once: the order of every pair is kept (a sorted
    tensor stays sorted), so only a cache keyed on sampled content can tell. A tensor with no such
    element (every value repeated) gets elements copied from other positions instead."""
    if not isinstance(x, torch.Tensor) or x.numel() < 2 or x.dtype == torch.bool:
        return x
    flat = x.detach().reshape(-1).clone()
    n = flat.numel()
    distinct, counts = torch.unique(flat, sorted=True, return_counts=True)
    pos = torch.randint(n, (4 * NEAR_CHANGES,), generator=gen).to(flat.device)
    vals = flat[pos]
    at = torch.searchsorted(distinct, vals)
    nxt = distinct[(at + 1).clamp(max=distinct.numel() - 1)]
    if flat.is_floating_point():
        mid = ((vals.double() + nxt.double()) / 2).to(flat.dtype)
    else:
        mid = vals + (nxt - vals) // 2
    ok = (counts[at] == 1) & (at + 1 < distinct.numel()) & (mid > vals) & (mid < nxt)
    if bool(ok.any()):
        chosen = ok.nonzero().flatten()[:NEAR_CHANGES]
        flat[pos[chosen]] = mid[chosen]
    else:
        dst = torch.randint(n, (min(NEAR_CHANGES, n),), generator=gen).to(flat.device)
        src = torch.randint(n, (dst.numel(),), generator=gen).to(flat.device)
        flat[dst] = flat[src].clone()
    return flat.view(x.shape)


def _swapped(x: Any, gen: torch.Generator) -> Any:
    """A copy of a floating tensor with its NEAR_CHANGES largest values exchanged with values at random positions:
    the near trial's changes keep every pair's order and are too small to move an output past the judge's
    tolerance, so a cache keyed on sampled content passed it (red team, 2026-12-05: softmax, and argmax, whose
    answer a kept order cannot change). Here the outputs that depend on the largest values move. Sorted tensors
    and those of two values or fewer (masks) are left alone: their order or values are what the problem keeps."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 4:
        return x
    flat = x.detach().reshape(-1).clone()
    ordered = bool((flat[1:] >= flat[:-1]).all()) or bool((flat[1:] <= flat[:-1]).all())
    if ordered or torch.unique(flat).numel() <= 2:
        return x
    k = min(NEAR_CHANGES, flat.numel() // 2)
    top = torch.topk(flat.double(), k).indices
    other = torch.randint(flat.numel(), (k,), generator=gen).to(flat.device)
    high, low = flat[top].clone(), flat[other].clone()
    flat[other] = high
    flat[top] = low
    return flat.view(x.shape)


def _upcast(values: list[Any]) -> list[Any]:
    def up(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if x.is_floating_point():
                return x.detach().to(torch.float64)
            if x.is_complex():
                return x.detach().to(torch.complex128)
        return x
    return [pytree.tree_map(up, v) for v in values]


def _finite(leaves: list[Any]) -> bool:
    return all(bool(torch.isfinite(x).all()) for x in leaves
               if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()))


def _float_tensors(values: list[Any]) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(values) if isinstance(x, torch.Tensor) and x.is_floating_point()]


class ReferenceRunner:
    """Produces the pack for one problem on one device."""

    def __init__(self, req: ReferenceRequest):
        self.req = req
        self.device = req.device
        self.secret = int(req.secret)
        # the worker writes only in its own folders: the pack (what candidates get) and the reference outputs
        # (what only the parent reads) are moved into the verifier's scratch by the parent afterwards
        self.pack = Path(req.out_dir) / "pack"
        self.ref_dir = Path(req.out_dir) / "ref"
        self.pack.mkdir(parents=True, exist_ok=True)
        self.ref_dir.mkdir(parents=True, exist_ok=True)
        self.problem: LoadedProblem = load_problem(req.problem)
        self.backward = bool(self.problem.spec.backward)
        self.notes: list[str] = []
        self._kept: list[int] = []
        self.last_aliases = False

    # -- building blocks -------------------------------------------------------------------------
    def build_model(self, init_inputs: list[Any]) -> torch.nn.Module:
        seed_all(self.secret + 1)
        with torch.device(self.device):
            model = self.problem.model_cls(*init_inputs)
        return model.to(self.device)

    def _random_buffers(self, model: torch.nn.Module, init_inputs: list[Any]) -> frozenset[str]:
        """The model's randomly drawn buffers (_drawn_buffers), from a second build under another seed; none when
        the model has no floating buffer (no second build) or cannot be built again."""
        if not any(b.is_floating_point() for b in model.buffers()):
            return frozenset()
        seed_all(self.secret + 2)
        try:
            with torch.device(self.device):
                other = self.problem.model_cls(*init_inputs)
        except Exception:  # noqa: BLE001 - the problem's constructor; the first build succeeded
            return frozenset()
        return _drawn_buffers(model, other)

    def input_sets(self, k: int) -> list[list[Any]]:
        seed_all(self.secret + 101 * (k + 1))
        with torch.device(self.device):
            sets = self.problem.input_sets()
        return [tensorio.move(s, self.device) for s in sets]

    def forward(self, model: torch.nn.Module, inputs: list[Any], grad_outputs: list[Any] | None
                ) -> tuple[list[Any], list[Any] | None, str]:
        ins = tensorio.clone_leaves(inputs)
        if not self.backward:
            with torch.no_grad():
                out = model(*ins)
            leaves, structure = tensorio.flatten(out)
            self.last_aliases = _aliases(leaves, ins)
            return leaves, None, structure
        req_grad = _float_tensors(ins)
        for t in req_grad:
            t.requires_grad_(True)
        out = model(*ins)
        leaves, structure = tensorio.flatten(out)
        self.last_aliases = _aliases(leaves, ins)
        diff = [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        gos = grad_outputs if grad_outputs is not None else []
        grads = torch.autograd.grad(diff, req_grad + [p for _, p in named], gos[:len(diff)], allow_unused=True)
        detached = [x.detach() if isinstance(x, torch.Tensor) else x for x in leaves]
        return detached, grads_dict(grads, req_grad, named), structure

    def grad_outputs_for(self, model: torch.nn.Module, inputs: list[Any], gen: torch.Generator
                         ) -> tuple[list[Any], list[int]]:
        """(upstream gradients for the reference's differentiable output leaves, those leaves' positions)."""
        ins = tensorio.clone_leaves(inputs)
        for t in _float_tensors(ins):
            t.requires_grad_(True)
        out = model(*ins)
        leaves, _ = tensorio.flatten(out)
        at = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor) and x.requires_grad]
        return [torch.randn(leaves[i].shape, generator=gen, dtype=torch.float64).to(leaves[i].device, leaves[i].dtype)
                for i in at], at

    def reference64(self, model: torch.nn.Module, inputs: list[Any], gos: list[Any] | None
                    ) -> tuple[list[Any] | None, list[Any] | None, str]:
        """The reference in float64 on upcast inputs; on CPU if the device lacks float64 kernels."""
        for device in dict.fromkeys([self.device, "cpu"]):
            try:
                m64 = copy.deepcopy(model).to(device=device, dtype=torch.float64)
                ins = tensorio.move(_upcast(inputs), device)
                g64 = tensorio.move(_upcast(gos), device) if gos is not None else None
                leaves, grads, _ = self.forward(m64, ins, g64)
                return leaves, grads, device  # tensorio.save copies them off the device
            except (RuntimeError, NotImplementedError, TypeError) as e:
                last = e
        self.notes.append(f"float64 reference unavailable ({type(last).__name__}: {str(last)[:160]}); "
                          "compared against the reference in its own dtype")
        return None, None, ""

    # -- the pack ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        seed_all(self.secret)
        init_inputs = self.problem.init_inputs()
        model = self.build_model(init_inputs)
        state0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
        drawn = self._random_buffers(model, init_inputs)
        has_state = any(p.is_floating_point() for p in model.parameters()) or bool(_state_buffers(model, drawn))
        n_seeds = max(1, int(self.req.seeds))
        states, trials = [state0], []
        cap = self.req.cpu_max_elements if self.device == "cpu" else None
        for k in range(n_seeds):
            dist = "alt" if n_seeds >= 3 and k == n_seeds - 1 else "native"
            gen = torch.Generator().manual_seed(self.secret + 7919 * (k + 1))
            state_idx = 0
            if k >= 1 and has_state:
                _reinit_params(model, gen, drawn)
                states.append({kk: v.detach().clone() for kk, v in model.state_dict().items()})
                state_idx = len(states) - 1
            sets = self.input_sets(k)
            keep = self._within_cap(sets, cap) if k == 0 else self._kept
            self._kept = keep
            if k == 0:  # what every input set looks like, checked here or not (the agent's first prompt)
                self.sets = [{"set": i, "inputs": tensorio.describe(s), "elements": _numel(s),
                              "checked": i in keep} for i, s in enumerate(sets)]
            for s_idx in keep:
                inputs = sets[s_idx]
                if dist == "alt":
                    inputs = _alt_distribution(inputs, gen)
                model.load_state_dict(states[state_idx])
                trial = self._perturbed(len(trials), model, inputs, s_idx, k, dist, state_idx, gen)
                if trial is None and state_idx:
                    model.load_state_dict(state0)
                    trial = self._perturbed(len(trials), model, inputs, s_idx, k, dist, 0, gen)
                if trial is not None:
                    trials.append(trial)
            model.load_state_dict(state0)
        for extra in (self._wide_trial, self._near_trial, self._swap_trial):
            trial = extra(model, len(trials), trials)
            if trial is not None:
                trials.append(trial)
        tensorio.save(self.pack / "init.pt", {"init_inputs": init_inputs, "states": states})
        meta = {"trials": trials, "notes": self.notes, "backward": self.backward,
                "problem": {"path": self.problem.spec.path, "name": self.problem.spec.name,
                            "sha256": self.problem.spec.sha256, "tolerance": self.problem.spec.tolerance},
                "param_names": [n for n, _ in model.named_parameters()], "sets": getattr(self, "sets", []),
                **self._profile(model, trials)}
        (self.pack / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
        return meta

    def _wide_trial(self, model: torch.nn.Module, t: int, trials: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The first kept input set again at a large scale and offset, where the reference stays finite in
        its own dtype: unsafe numerics (no max subtraction, an unstable log-sum-exp, a variance without
        centring) fail here while randn's scale hides them."""
        first = next((x for x in trials if x["seed"] == 0 and x["state"] == 0), None)
        if first is None:
            return None
        seed_all(self.secret + WIDE_SEED)
        with torch.device(self.device):
            base = tensorio.move(self.problem.input_sets()[first["set"]], self.device)
        if not _float_tensors(base):
            return None
        gen = torch.Generator().manual_seed(self.secret + 31337)
        draw = WIDE_DRAW + (1 - WIDE_DRAW) * float(torch.rand((), generator=gen, dtype=torch.float64))
        for scale, offset in ((round(a * draw, 3), round(b * draw, 3)) for a, b in WIDE_STEPS):
            trial = self._perturbed(t, model, _widened(base, scale, offset), first["set"], 0, "wide", 0, gen)
            if trial is not None:
                trial["wide"] = {"scale": scale, "offset": offset}
                return trial
        self.notes.append("no large-scale input set kept the reference finite; unsafe numerics were checked "
                          "at the problem's own scale only")
        return None

    def _first_native(self, trials: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Any]] | None:
        """The first trial with the problem's own inputs and first parameters, and those inputs (the near and
        swap trials change them)."""
        first = next((x for x in trials if x["seed"] == 0 and x["state"] == 0 and x["dist"] == "native"), None)
        if first is None:
            return None
        return first, tensorio.load(self.pack / f"inputs_{first['id']}.pt", self.device)["inputs"]

    def _near_trial(self, model: torch.nn.Module, t: int, trials: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The first trial's inputs with a handful of elements changed: a cache keyed on sampled content (or
        on a partial hash) sees the same inputs and returns the first trial's answer, wrong where they differ."""
        found = self._first_native(trials)
        if found is None:
            return None
        first, base = found
        gen = torch.Generator().manual_seed(self.secret + 4241)
        inputs = [pytree.tree_map(lambda v: _nudged(v, gen), x) for x in base]
        return self._perturbed(t, model, inputs, first["set"], 0, "near", 0, gen)

    def _swap_trial(self, model: torch.nn.Module, t: int, trials: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The first trial's inputs with their largest values exchanged with others (_swapped): the near trial's
        purpose, with changes large enough to move the outputs."""
        found = self._first_native(trials)
        if found is None:
            return None
        first, base = found
        gen = torch.Generator().manual_seed(self.secret + 6007)
        inputs = [pytree.tree_map(lambda v: _swapped(v, gen), x) for x in base]
        if all(a is b for a, b in zip(pytree.tree_leaves(inputs), pytree.tree_leaves(base), strict=True)):
            return None  # nothing to exchange (no floating input, or only sorted ones and masks)
        return self._perturbed(t, model, inputs, first["set"], 0, "swap", 0, gen)

    def _within_cap(self, sets: list[list[Any]], cap: int | None) -> list[int]:
        if not cap:
            return list(range(len(sets)))
        sizes = [_numel(s) for s in sets]
        keep = [i for i, n in enumerate(sizes) if n <= cap]
        if not keep:
            keep = [min(range(len(sets)), key=sizes.__getitem__)]
        skipped = [i for i in range(len(sets)) if i not in keep]
        if skipped:
            self.notes.append(
                f"on CPU, input set(s) {skipped} skipped: over {cap:,} elements, too large for the Triton "
                f"interpreter (sizes {[sizes[i] for i in skipped]}); they run on the GPU")
        return keep

    def _perturbed(self, t: int, model: torch.nn.Module, inputs: list[Any], s_idx: int, k: int, dist: str,
                   state_idx: int, gen: torch.Generator) -> dict[str, Any] | None:
        """_trial, where the verifier changed the problem's inputs (dist alt, wide or near) or its parameters:
        a reference that raises there met inputs that break what the problem's own draws keep (sorted values,
        lengths that sum to a size, positive-definite matrices), so the trial is dropped with a note rather
        than the problem blamed. The problem's own draws (dist native, first parameters) still raise."""
        if dist == "native" and not state_idx:
            return self._trial(t, model, inputs, s_idx, k, dist, state_idx, gen)
        try:
            return self._trial(t, model, inputs, s_idx, k, dist, state_idx, gen)
        except Exception as e:  # noqa: BLE001 - the problem's code on inputs the verifier made
            self.notes.append(f"trial seed {k} set {s_idx} ({dist} inputs"
                              f"{', re-initialised parameters' if state_idx else ''}): the reference raised "
                              f"{type(e).__name__}: {str(e)[:120]}; dropped (the change broke an invariant of the "
                              "problem's inputs)")
            return None

    def _trial(self, t: int, model: torch.nn.Module, inputs: list[Any], s_idx: int, k: int, dist: str,
               state_idx: int, gen: torch.Generator) -> dict[str, Any] | None:
        gos, positions = self.grad_outputs_for(model, inputs, gen) if self.backward else (None, None)
        native, grads, structure = self.forward(model, inputs, gos)
        aliases = self.last_aliases
        if not _finite(native) and (state_idx or dist in ("alt", "wide", "near", "swap")):
            if dist not in ("wide", "near", "swap"):
                self.notes.append(f"trial seed {k} set {s_idx}: reference not finite with "
                                  f"{'re-initialised parameters' if state_idx else 'the second distribution'}; dropped")
            return None
        f64, grads64, where64 = self.reference64(model, inputs, gos)
        tensorio.save(self.pack / f"inputs_{t}.pt", {"inputs": inputs, "state": state_idx, "grad_outputs": gos,
                                                     "grad_positions": positions})
        # save copies the outputs off the device itself
        tensorio.save(self.ref_dir / f"ref_{t}.pt", {"native": native, "f64": f64, "grads_native": grads,
                                                     "grads_f64": grads64})
        return {"id": t, "seed": k, "set": s_idx, "dist": dist, "state": state_idx, "structure": structure,
                "input_desc": tensorio.describe(inputs), "f64_device": where64,
                "tensor_args": _tensor_args(inputs),
                "aliases_input": aliases, "input_bytes": _bytes(inputs)}

    def _profile(self, model: torch.nn.Module, trials: list[dict[str, Any]]) -> dict[str, Any]:
        """Aten op signature, FLOPs and bytes of the main input set."""
        if not trials:
            return {"op_signature": [], "work": {}}
        first = trials[0]
        data = tensorio.load(self.pack / f"inputs_{first['id']}.pt", self.device)
        ins = tensorio.clone_leaves(data["inputs"])
        rec = OpRecorder()
        with torch.no_grad(), rec:
            out = model(*ins)
        work = count_work(model, data["inputs"], out)
        return {"op_signature": sorted(rec.ops), "work": work}


def _aliases(outputs: list[Any], inputs: list[Any]) -> bool:
    ptrs = {x.untyped_storage().data_ptr() for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)}
    return any(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in ptrs for o in outputs)


def run_reference(req: ReferenceRequest) -> dict[str, Any]:
    runner = ReferenceRunner(req)
    try:
        meta = runner.run()
    except Exception as e:  # noqa: BLE001 - blame the problem when its own code raised
        err = problem_error(e, runner.problem.spec.path, "the reference (Model.forward or get_inputs)")
        if err is None:
            raise
        raise err from e
    if req.timing and runner.device == "cuda" and req.plan is not None:
        from kernelagent.verifier.reference.baseline import check_prints, time_baselines, timing_spec

        meta["timing"] = timing_spec(runner, meta, req.plan)
        meta["baseline"] = time_baselines(runner, meta, req.plan)
        if req.checks is not None:
            check_prints(runner, meta, req.plan, req.checks)
        (runner.pack / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    return meta


def _tensor_args(inputs: list[Any]) -> list[int]:
    """Positions of forward's arguments that hold a tensor (alone or in a container): the static policy
    takes those parameters for tensors whatever the candidate annotates them as."""
    return [i for i, v in enumerate(inputs) if any(isinstance(x, torch.Tensor) for x in tensorio.flatten(v)[0])]
