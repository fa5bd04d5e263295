"""The audit itself, run inside the audit child: which trivial answers pass, and what moves the output.

The model is built with the problem's own initialisation under a fixed seed (as KernelBench builds it);
each input set is drawn `draws` times under other seeds. The output's variation is measured three ways
on the main set: new inputs with the same parameters, new parameters (the problem's own init under another
seed) with the same inputs, and both. A trivial answer passes when it passes on every draw. Only the main
set (get_inputs) decides the verdict; a degenerate get_test_inputs set is a note.
At most one draw's inputs, the first draw's output, the current output (and its float64 twin) and one
answer are held at once.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree

from kernelagent.problem import LoadedProblem, ProblemError
from kernelagent.verifier import tensorio
from kernelagent.verifier.audit.answers import constants, trivial_answers
from kernelagent.verifier.audit.compare import Reference, passes, rel_l2
from kernelagent.verifier.audit.errors import OutOfMemory, problem_code
from kernelagent.verifier.audit.settings import AuditSettings
from kernelagent.verifier.rng import seed_all

MIN_VARIATION = 1e-3   # relative L2 change of the output between input draws below which it is "constant"
FORWARD_SEED = 4321    # the RNG state every forward starts from (dropout draws the same mask for each draw)


@dataclass
class SetResult:
    set: int
    inputs: str
    passing: list[str]
    variation_inputs: float | None
    finite: bool = True
    variation_parameters: float | None = None
    variation_both: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def degenerate(self) -> bool:
        low = self.variation_inputs is not None and self.variation_inputs < MIN_VARIATION
        return bool(self.passing) or low

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.set, "inputs": self.inputs, "degenerate": self.degenerate,
                "trivial_answers_that_pass": self.passing, "variation_inputs": self.variation_inputs,
                "finite": self.finite}


class Auditor:
    """Holds the problem, the model under its own init, and (for `ours`) its float64 twin."""

    def __init__(self, problem: LoadedProblem, settings: AuditSettings):
        self.problem, self.s = problem, settings
        self.path = problem.spec.path
        self.device = settings.device
        self.ours = settings.tolerance.kind == "ours"
        self.init = problem.init_inputs()
        self.model = self.build(settings.seed + 1)
        self.params = [(n, t.detach()) for n, t in [*self.model.named_parameters(), *self.model.named_buffers()]
                       if t.is_floating_point()]
        self.m64: torch.nn.Module | None = None
        self.f64_failed = False
        self.notes: list[str] = []

    # -- running the problem -----------------------------------------------------------------------
    def build(self, seed: int) -> torch.nn.Module:
        seed_all(seed)

        def make() -> torch.nn.Module:
            with torch.device(self.device):
                return self.problem.model_cls(*self.init).to(self.device)
        return problem_code("Model(*get_init_inputs())", make, self.path)

    def draw(self, s: int, k: int) -> list[Any]:
        seed_all(self.s.seed + 101 * (k + 1))

        def one_set() -> list[Any]:
            # only the function that makes set `s` runs (the sets' form was checked when sizing)
            with torch.device(self.device):
                if s == 0:
                    return list(self.problem.module.get_inputs())
                return list(self.problem.module.get_test_inputs()[s - 1])
        return tensorio.move(problem_code("drawing the inputs", one_set, self.path), self.device)

    def forward(self, model: torch.nn.Module, inputs: list[Any]) -> list[Any]:
        ins = tensorio.clone_leaves(inputs)
        seed_all(FORWARD_SEED)

        def run() -> Any:
            with torch.no_grad():
                return model(*ins)
        leaves, _ = tensorio.flatten(problem_code("the forward", run, self.path))
        return [x.detach() if isinstance(x, torch.Tensor) else x for x in leaves]

    def forward64(self, inputs: list[Any]) -> list[Any] | None:
        """The reference in float64 on upcast inputs; None (with a note) where the device cannot."""
        if self.f64_failed:
            return None
        try:
            if self.m64 is None:
                self.m64 = copy.deepcopy(self.model).to(torch.float64)
            return self.forward(self.m64, _upcast(inputs))
        except torch.OutOfMemoryError as e:
            raise OutOfMemory(f"out of GPU memory in the float64 reference: {str(e).splitlines()[0][:300]}") from e
        except (ProblemError, RuntimeError, NotImplementedError, TypeError) as e:
            self.f64_failed, self.m64 = True, None
            self.notes.append(f"float64 reference unavailable ({str(e)[:200]}); compared with the reference in its "
                              "own dtype")
            return None

    # -- one input set -----------------------------------------------------------------------------
    def audit_set(self, s: int) -> SetResult:
        passing: dict[str, bool] = {}
        first: list[Any] | None = None
        consts: list[Any] = []
        variation: list[float] = []
        desc, finite = "", True
        for k in range(self.s.draws):
            x = self.draw(s, k)
            desc = desc or tensorio.describe(x)
            y = self.forward(self.model, x)
            finite = finite and _finite(y)
            y64 = (self.forward64(x) if self.ours else None) or [None] * len(y)
            refs = [Reference(a, b) for a, b in zip(y, y64, strict=True)]
            if first is None:
                first, consts = y, constants(y)
            else:
                v = _leaves_rel(y, first)
                if v is not None:
                    variation.append(v)
            self._judge(passing, refs, y, x, consts, first if k else None, k)
            del x, y, y64, refs
        res = SetResult(s, desc, sorted(n for n, ok in passing.items() if ok), min(variation, default=None), finite)
        if s == 0 and first is not None:
            self._parameter_variation(res, first)
        return res

    def _judge(self, passing: dict[str, bool], refs: list[Reference], y: list[Any], x: list[Any],
               consts: list[Any], first: list[Any] | None, k: int) -> None:
        """Stream the trivial answers for one draw: build one, compare, drop it."""
        tensors = [t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]
        seen = set()
        problem_tol = self.problem.spec.tolerance
        for name, build in trivial_answers(y, tensors, self.params, consts, first):
            seen.add(name)
            if k and name not in passing and name != "fixed output":
                passing[name] = False  # it did not apply on an earlier draw
            if passing.get(name, True) is False:
                continue
            answer = build()
            passing[name] = all(passes(r, a, self.s.tolerance, problem_tol) for r, a in zip(refs, answer, strict=True))
            del answer
        for name in passing:
            if name not in seen:
                passing[name] = False

    def _parameter_variation(self, res: SetResult, first: list[Any]) -> None:
        """The output under the problem's own init with another seed: same inputs, then new inputs too."""
        if not self.params:
            res.notes.append("the model has no float parameters: only the inputs vary the output")
            return
        other = self.build(self.s.seed + 2)
        res.variation_parameters = _leaves_rel(self.forward(other, self.draw(0, 0)), first)
        if self.s.draws > 1:
            res.variation_both = _leaves_rel(self.forward(other, self.draw(0, 1)), first)
        del other


def _upcast(values: list[Any]) -> list[Any]:
    def up(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.detach().to(torch.float64)
        if isinstance(x, torch.Tensor) and x.is_complex():
            return x.detach().to(torch.complex128)
        return x
    return [pytree.tree_map(up, v) for v in values]


def _finite(leaves: list[Any]) -> bool:
    return all(bool(torch.isfinite(x).all()) for x in leaves
               if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()))


def _leaves_rel(a: list[Any], b: list[Any]) -> float | None:
    """The smallest relative change over the output leaves (the least varying output is the weak one)."""
    values = [rel_l2(x, y) for x, y in zip(a, b, strict=False)]
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return min(finite) if finite else None


def run_audit(problem: LoadedProblem, settings: AuditSettings, n_sets: int) -> dict[str, Any]:
    """Audit every input set; the verdict is the main set's."""
    auditor = Auditor(problem, settings)
    main = auditor.audit_set(0)
    others = [auditor.audit_set(s) for s in range(1, n_sets)]
    notes = auditor.notes + main.notes
    for o in others:
        if o.degenerate:
            why = ", ".join(o.passing) + " pass" if o.passing else f"output varies by only {o.variation_inputs:.1e}"
            notes.append(f"test input set {o.set} ({o.inputs}) is degenerate ({why}): an edge case, not a verdict")
    if not main.finite:
        notes.append("the reference output has NaN/Inf on the main inputs")
    return {
        "degenerate": main.degenerate, "trivial_answers_that_pass": main.passing,
        "variation": {"inputs": main.variation_inputs, "parameters": main.variation_parameters,
                      "both": main.variation_both},
        "output_variation_across_seeds": main.variation_inputs, "main": main.to_dict(),
        "sets": [o.to_dict() for o in others], "notes": notes, "trials": settings.draws * n_sets,
        "tolerance": {**settings.tolerance.__dict__, "description": settings.tolerance.describe()},
    }
