"""Candidate worker: imports the untrusted candidate, runs it on the trials, times it, records the facts.

Everything this process learns is reported back as data (outputs as tensors, records as counts); the
parent compares against the reference and decides. Order matters: the candidate is imported and its
constructor runs (under a seed from the OS, unrelated to the trials') BEFORE any trial input exists in
this process — the parent links the inputs into the read-only `-in` folder only once the worker says
the model is built. The functions used to record facts were bound before the candidate was imported,
and their identities are checked again afterwards.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from kernelagent.problem import ProblemError, load_module, load_problem
from kernelagent.verifier import protocol as P
from kernelagent.verifier import tensorio
from kernelagent.verifier.protocol import CallFacts, CandidateFacts, CandidateRequest, Delivery, TimingFacts
from kernelagent.verifier.rng import seed_from_os
from kernelagent.verifier.tensorio import grads_dict
from kernelagent.verifier.worker import dispatch_guard, guard, integrity, interp_bounds, interp_calls, model_state
from kernelagent.verifier.worker.errors import classify_exception, passes_through
from kernelagent.verifier.worker.integrity import (
    LaunchCounter,
    OpRecorder,
    os_thread_count,
    python_threads,
)
from kernelagent.verifier.worker.outputs import OutputError, check_outputs

_HEAVY_MODULES = ("torch._dynamo", "torch._inductor", "cutlass")
DELIVERY_WAIT_S = 600.0
TURN_WAIT_S = 7200.0  # the parent bounds the wait for a timing turn itself (its limit, extended by the queue)

_perf = time.perf_counter
_sleep = time.sleep
_equal = torch.equal
_device_synchronize = torch.cuda.synchronize
_isnan = torch.isnan



def _differentiated(leaves: list[Any], positions: list[int] | None) -> list[Any]:
    """The candidate's outputs to differentiate: at the reference's differentiable positions when known (an
    extra output the candidate leaves differentiable, such as a mask without mark_non_differentiable, is not
    paired with another output's gradient; an output the reference differentiates may not come back
    detached, which would skip its backward), else every output that carries a graph."""
    if positions is None:
        return [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]
    flat = [i for i in positions if i >= len(leaves) or not (isinstance(leaves[i], torch.Tensor)
                                                            and leaves[i].requires_grad)]
    if flat:
        raise CandidateFailure("runtime_error", f"output(s) {flat} carry no autograd graph where the reference's "
                               "do (BACKWARD = True): return them from a torch.autograd.Function whose backward "
                               "computes their gradient")
    return [leaves[i] for i in positions]

class CandidateFailure(Exception):
    """A failure blamed on the candidate, with its category (see report.CATEGORIES)."""

    def __init__(self, category: str, message: str, detail: str = ""):
        super().__init__(message)
        self.category, self.message, self.detail = category, message, detail


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if _equal(a, b):
            return True
        if a.is_floating_point():
            return bool((((a == b) | (_isnan(a) & _isnan(b)))).all())
        return False
    return True


def _inputs_unchanged(now: list[Any], pristine: list[Any]) -> list[int]:
    """Indices of input leaves whose contents changed."""
    a, b = pytree.tree_leaves(now), pytree.tree_leaves(pristine)
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not _same(x, y)]


class CandidateRunner:
    def __init__(self, req: CandidateRequest, state: guard.GuardState):
        self.req, self.guard = req, state
        self.device = req.device
        self.inbox = Path(req.in_dir)
        self.out = Path(req.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.meta = json.loads((self.inbox / P.META_FILE).read_text())
        self.facts = CandidateFacts()
        self.launches = LaunchCounter()
        self.backward = bool(self.meta.get("backward"))
        self.delivery: Delivery | None = None
        self._exit = contextlib.ExitStack()

    # -- setup (before the candidate exists in this process) ----------------------------------------
    def _load_init(self) -> None:
        t = _perf()
        init = tensorio.load(self.inbox / P.INIT_FILE, self.device)
        self.init_inputs, self.states = init["init_inputs"], init["states"]
        self.facts.io["load_seconds"] = round(_perf() - t, 4)

    @property
    def compile_only(self) -> bool:
        """CuTe DSL without a GPU: compile everything the forward launches, run nothing, compare nothing."""
        return self.device == "cpu" and self.req.backend == "cute"

    def prepare(self) -> None:
        self._load_init()
        interpreter = self.device == "cpu"
        if self.device == "cuda":
            integrity.use_cuda()  # the recorders check that every op and launch stays on the caller's stream
        self.launches.install_triton(interpreter)
        integrity.count_host_reads()
        if interpreter:
            interp_bounds.install()  # a kernel's pointers are host addresses there: keep them in its tensors
            interp_bounds.seal_handles()  # and its blocks' values are NumPy arrays: only Triton reads them
            interp_bounds.guard_conversions()  # nor converts them, beside the kernel's own code
            interp_calls.watch()  # and no Python but the kernel's and Triton's runs while it is interpreted
        # CuTe DSL's hooks import cutlass (seconds): only for candidates that may use it; a file detected
        # as Triton that reaches CuTe DSL anyway goes uncounted there, which can only reject it
        self.facts.cute_hooks = self.req.backend != "triton" and self.launches.install_cute()
        if self.compile_only and self.facts.cute_hooks:
            from kernelagent.verifier.cute import support as cute_support
            # entered before the snapshot: it swaps torch's stream getters for null streams itself
            self._exit.enter_context(cute_support.compile_only_mode(self.launches.stats))
        self.threads_before = (os_thread_count(), python_threads())
        self.snap = guard.snapshot()
        self.dispatch_snap = dispatch_guard.snapshot()
        self.tls_changed = False  # a dispatch guard seen alive around a call (_check_tls)
        self.heavy_before = {m for m in _HEAVY_MODULES if m in sys.modules}

    # -- stages ------------------------------------------------------------------------------------
    def stage(self, name: str, fn: Any) -> Any:
        t0 = _perf()
        try:
            result = fn()
        except CandidateFailure as f:
            self._record(name, "failed", t0, f.message, {"category": f.category, "detail": f.detail})
            raise
        except BaseException as e:  # noqa: BLE001 - re-raised unless the candidate's own code raised it
            f = self._own_failure(e, f"{name}: the candidate's code raised")
            self._record(name, "failed", t0, f.message, {"category": f.category, "detail": f.detail})
            raise f from e
        self._record(name, "passed", t0)
        return result

    def _own_failure(self, e: BaseException, what: str) -> CandidateFailure:
        """`e` as the candidate's failure when its traceback runs through the candidate's file (a harness call
        that reached an override of the candidate's); anything else is re-raised as the verifier's."""
        if isinstance(e, CandidateFailure):
            return e
        if not passes_through(e, self.req.candidate):
            raise e
        return _failure(e, self.req.candidate, what)

    def _record(self, name: str, status: str, t0: float, message: str = "", details: dict | None = None) -> None:
        self.facts.stages[name] = {"status": status, "seconds": round(_perf() - t0, 4), "message": message,
                                   "details": details or {}}
        (self.out / "progress.json").write_text(json.dumps(self.facts.stages, default=str))

    def load_candidate(self) -> None:
        self.guard.candidate_file = str(Path(self.req.candidate).resolve())
        self.guard.active = True
        try:
            with guard.hidden_modules():
                module = load_module(self.req.candidate, "kernelagent_candidate", "candidate")
        except ProblemError as e:
            raise CandidateFailure(*_load_category(e)) from e
        cls = getattr(module, "ModelNew", None)
        if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            raise CandidateFailure("load_error", "ModelNew is not an nn.Module subclass")
        # a seed from the OS: nothing the constructor can see derives from the trials' secret
        seed_from_os()
        try:
            with torch.device(self.device), guard.hidden_modules():
                self.model = cls(*self.init_inputs).to(self.device)
        except BaseException as e:  # noqa: BLE001 - the candidate's constructor failed (SystemExit included)
            raise _failure(e, self.req.candidate, "ModelNew(*get_init_inputs()) raised") from e
        self.load_state(0, report=True)

    def receive_trials(self, upfront: bool = False) -> None:
        """Say the model is built, then wait for the parent to link the trial inputs into `-in` (a tool run
        gets them `upfront`, before it starts)."""
        early = sorted(p.name for p in self.inbox.iterdir()
                       if p.name != P.META_FILE and not p.name.startswith(P.INIT_FILE))  # init.pt and its side files
        # only a marker the candidate wrote itself (C-level writers pass the audit hook) brings them this early
        if early and not upfront:
            raise CandidateFailure("policy_violation", "the trial inputs were delivered while the model was being "
                                   f"built ({', '.join(early[:3])} already there): the candidate wrote the "
                                   "verifier's own `constructed` marker")
        (self.out / P.CONSTRUCTED_FILE).write_text("1")
        path = self.inbox / P.DELIVERY_FILE
        deadline = _perf() + DELIVERY_WAIT_S
        while not path.exists():
            if _perf() > deadline:
                raise RuntimeError("the parent never delivered the trial inputs")
            _sleep(0.002)
        self.delivery = P.decode_delivery(path.read_text())
        t = _perf()
        self.trials = {tid: tensorio.load(self.inbox / P.inputs_file(tid), self.device)
                       for tid in self.delivery.trial_ids}
        self.facts.io["load_seconds"] = round(self.facts.io.get("load_seconds", 0.0) + _perf() - t, 4)

    def load_state(self, idx: int, report: bool = False) -> None:
        """Copy the reference's weights of state `idx` into the model's parameters and buffers of the same
        name and shape. The model's tensors are read from nn.Module's own storage (model_state), never through
        a method it could override; whatever raises here is the model's doing, so the candidate's failure."""
        src = self.states[idx]
        try:
            own = model_state.state_tensors(self.model)
            matched = {k: v for k, v in src.items() if k in own and own[k].shape == v.shape}
            with torch.no_grad():
                for k, v in matched.items():
                    own[k].copy_(v)
        except BaseException as e:  # noqa: BLE001 - the model's storage or tensors raised, SystemExit included
            raise _failure(e, self.req.candidate, "copying the reference's weights into the model raised") from e
        if report:
            self.facts.params = {"missing_in_candidate": sorted(set(src) - set(matched)),
                                 "extra_in_candidate": sorted(set(own) - set(src))}

    def call_saved(self, data: dict[str, Any], poison: str | None) -> dict[str, Any]:
        """call() on a trial's saved inputs (with its upstream gradients and their output positions)."""
        return self.call(data["inputs"], data.get("grad_outputs"), poison, data.get("grad_positions"))

    def call(self, inputs: list[Any], grad_outputs: list[Any] | None, poison: str | None,
             positions: list[int] | None = None) -> dict[str, Any]:
        """One forward (and backward) on fresh buffers; returns outputs and the records' findings. `positions`:
        the output leaves the reference differentiates (grad_outputs go to those, in order)."""
        ins = tensorio.clone_leaves(inputs)
        pristine = tensorio.clone_leaves(inputs)
        rec = OpRecorder(poison=poison)
        rec.watch_inputs(pytree.tree_leaves(ins))
        before = self.launches.snapshot()
        cute_before = self.launches.stats["cute_launches"]
        grads = None
        self._check_tls()
        try:
            # no cyclic collection from the call until the outputs are frozen: a generator's `finally` or a
            # finaliser of the candidate's run by the collector right after the recorder stops could write
            # the outputs unrecorded (red team, 2026-12-03: named, not built)
            with guard.hidden_modules(), _no_collection():
                if self.backward:
                    grads, leaves, structure = self._forward_backward(ins, grad_outputs, rec, positions)
                else:
                    with torch.no_grad(), rec:
                        out = self.model(*ins)
                        leaves, structure = check_outputs(out)
                late = self.sync_outputs(leaves, grads)
                aliases = _aliases(leaves, ins)
                # CuTe DSL launches are not seen with their arguments: no copy finding for them
                copied = rec.copied_outputs(leaves) if self.launches.stats["cute_launches"] == cute_before else []
                # what forward returned, as it was when it returned: work deferred to later (a finaliser that
                # runs when the inputs are freed, a callback) must not reach what is judged
                leaves, grads = _frozen(leaves), pytree.tree_map(_frozen_one, grads)
        except OutputError as e:
            raise CandidateFailure("mismatch", str(e)) from e
        except CandidateFailure:
            raise
        except BaseException as e:  # noqa: BLE001 - anything candidate code raises, SystemExit included
            raise _failure(e, self.req.candidate, "forward raised") from e
        self._check_tls()
        facts = CallFacts(launches=self.launches.snapshot() - before, ops=dict(rec.ops), opened=sorted(rec.opened),
                          transfers=rec.transfers,
                          mutated=_inputs_unchanged(ins, pristine), types=["tensor" for _ in leaves],
                          structure=structure, aliases=aliases, devices=_devices(leaves),
                          late_writes=late, grad_leaves=getattr(self, "_grad_leaves", 0) if self.backward else 0,
                          copied=copied)
        return {"leaves": leaves, "grads": grads, "facts": facts}

    def _forward_backward(self, ins: list[Any], grad_outputs: list[Any] | None, rec: OpRecorder,
                          positions: list[int] | None = None) -> tuple[dict[str, Any], list[Any], str]:
        diff = _require_grad(ins)
        with rec:
            out = self.model(*ins)
            leaves, structure = check_outputs(out)
            outs = _differentiated(leaves, positions)
            if not outs:
                raise CandidateFailure(
                    "runtime_error", "the problem checks gradients (BACKWARD = True) but the outputs carry no "
                    "autograd graph: wrap the kernels in a torch.autograd.Function whose backward launches "
                    "your backward kernel(s)")
            named = [(n, p) for n, p in model_state.named_parameters(self.model) if p.requires_grad]
            forward_adds = _adds(rec.ops)
            raw = torch.autograd.grad(outs, diff + [p for _, p in named], (grad_outputs or [])[:len(outs)],
                                      allow_unused=True)
        # how many sums the autograd engine may have done: one a leaf at most, and only in the backward (an add
        # dispatched by forward is the candidate's, whatever the count); leaves that received a gradient and
        # that the reference differentiates too (parameters of its own, unused or named otherwise, bought a
        # candidate room for the engine to sum a weight's gradient over rows: red team, 2026-12-03)
        ref_params = set(self.meta.get("param_names") or ())
        got = [g is not None for g in raw[:len(diff)]]
        got += [g is not None and n in ref_params for (n, _), g in zip(named, raw[len(diff):], strict=True)]
        self._grad_leaves = min(sum(got), _adds(rec.ops) - forward_adds)
        return grads_dict(raw, diff, named), leaves, structure

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.current_stream().synchronize()

    def sync_outputs(self, leaves: list[Any], grads: dict[str, Any] | None) -> bool:
        """Wait for the current stream, as the caller would; then say whether the outputs still changed
        once the whole device was idle (work left running on another stream, never joined)."""
        self.sync()
        if self.device != "cuda":
            return False
        tensors = [x for x in [*leaves, *pytree.tree_leaves(grads or {})]
                   if isinstance(x, torch.Tensor) and x.is_cuda and x.layout == torch.strided]
        try:
            early = [_bits(x) for x in tensors]  # copied while any unjoined work may still be writing
            _device_synchronize()
            return any(not _equal(e, _bits(x)) for e, x in zip(early, tensors, strict=True))
        except (RuntimeError, TypeError) as e:  # the check's own trouble (memory, odd tensors) is not the candidate's
            _device_synchronize()
            self.facts.notes.append(f"output-readiness check skipped: {type(e).__name__}: {str(e)[:120]}")
            return False

    def correctness(self) -> None:
        for trial in self.meta["trials"]:
            data = self.trials[trial["id"]]
            self.load_state(data["state"])
            t = _perf()
            res = self.call_saved(data, "nan")
            if "first_call_seconds" not in self.facts.io:  # the first call compiles the kernels
                self.facts.io["first_call_seconds"] = round(_perf() - t, 4)
            self.save(f"cand_{trial['id']}", res)
            if _has_nan(res["leaves"]):  # unwritten or computed NaN? a run with a finite poison tells
                again = self.call_saved(data, "sentinel")
                self.save(f"sentinel_{trial['id']}", again)
                self.facts.probe_calls[f"sentinel_{trial['id']}"] = again["facts"]
            self.facts.trials[trial["id"]] = res["facts"]
        self.load_state(0)

    def probes(self) -> None:
        """Determinism, unwritten memory (sentinel poison) and input-keyed caching probes on trial 0."""
        first = self.meta["trials"][0]
        data = self.trials[first["id"]]
        self.load_state(data["state"])
        for name, poison in (("repeat", "nan"), ("sentinel", "sentinel")):
            res = self.call_saved(data, poison)
            self.save(name, res)
            self.facts.probe_calls[name] = res["facts"]
        partner = next((t for t in self.meta["trials"] if t["id"] != first["id"] and t["state"] == first["state"]
                        and t["input_desc"] == first["input_desc"]), None)
        if partner is not None:
            self.facts.cache_probe = {"first": first["id"], "partner": partner["id"]}
            self.save("probe", self._reuse_buffers(data, self.trials[partner["id"]]))
        self.facts.threads = {"os_before": self.threads_before[0], "os_after": os_thread_count(),
                              "python_before": self.threads_before[1], "python_after": python_threads()}
        self.load_state(0)

    def _reuse_buffers(self, first: dict[str, Any], partner: dict[str, Any]) -> dict[str, Any]:
        """Two calls on the same buffers, the partner trial's values copied in between: both recorded and
        judged like any other call (an unrecorded call is one where anything goes)."""
        bufs = tensorio.clone_leaves(first["inputs"])
        if self.backward:  # called as the trials are: no call may be told from them by autograd's state
            _require_grad(bufs)
        try:
            with torch.enable_grad() if self.backward else torch.no_grad(), guard.hidden_modules():
                self.facts.probe_calls["reuse_first"], _ = self._recorded(bufs)
                self.sync()
                for dst, src in zip(pytree.tree_leaves(bufs), pytree.tree_leaves(partner["inputs"]), strict=True):
                    if isinstance(dst, torch.Tensor):  # through .data: the same object, pointer AND version
                        dst.data.copy_(src)            # counter, only the values change
                self.facts.probe_calls["reuse_second"], leaves = self._recorded(bufs)
            # the outputs as they end up: work left on another stream must not pass for a cached answer
            self.facts.cache_probe["late_writes"] = self.sync_outputs(leaves, None)
        except OutputError as e:
            raise CandidateFailure("mismatch", str(e)) from e
        except BaseException as e:  # noqa: BLE001 - SystemExit included
            raise _failure(e, self.req.candidate, "forward raised on reused input buffers") from e
        return {"leaves": leaves, "grads": None}

    def _recorded(self, bufs: list[Any]) -> tuple[CallFacts, list[Any]]:
        """One forward on `bufs` as they are (no clone), under a recorder: its facts and output leaves."""
        rec = OpRecorder(poison="nan")  # fresh allocations hold what the trials' hold: no call told apart by them
        rec.watch_inputs(pytree.tree_leaves(bufs))
        before = self.launches.snapshot()
        with rec:
            leaves, structure = check_outputs(self.model(*bufs))
        facts = CallFacts(launches=self.launches.snapshot() - before, ops=dict(rec.ops), opened=sorted(rec.opened),
                          transfers=rec.transfers, types=["tensor" for _ in leaves], structure=structure,
                          devices=_devices(leaves))
        return facts, leaves

    def save(self, name: str, res: dict[str, Any]) -> None:
        t = _perf()
        try:
            tensorio.save(self.out / f"{name}.pt", {"outputs": res["leaves"], "grads": res.get("grads")})
        except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:  # tensors with no values to read
            raise CandidateFailure("mismatch", f"the outputs or gradients forward produced cannot be read: "
                                   f"{type(e).__name__}: {str(e)[:200]}") from e
        io = self.facts.io
        io["save_seconds"] = round(io["save_seconds"] + _perf() - t, 4)
        io["saved"] += 1

    def _check_tls(self) -> None:
        """A dispatch guard alive around a call (built in the constructor, or left by the call before)."""
        if dispatch_guard.tls_keys() != self.dispatch_snap.tls:
            self.tls_changed = True

    def integrity_after(self) -> None:
        self.facts.patched = guard.changed_since(self.snap) + dispatch_guard.changed_since(self.dispatch_snap)
        if self.tls_changed and dispatch_guard.TLS_CHANGE not in self.facts.patched:
            self.facts.patched.append(dispatch_guard.TLS_CHANGE)
        # what the candidate's run pulled in that the worker does not import up front (cost, not blame)
        self.facts.late_imports = sorted(m for m in _HEAVY_MODULES if m in sys.modules and m not in self.heavy_before)
        self.facts.launch_stats = {"total": self.launches.total, "kernels": self.launches.kernels()}
        self.facts.blocked = list(self.guard.blocked)

    def compile_check(self) -> None:
        """The CPU path for CuTe DSL: one forward in compile-only mode, launches recorded and skipped."""
        first = self.meta["trials"][0]
        data = self.trials[first["id"]]
        self.call_saved(data, None)
        self._compile_outcome()

    def _compile_outcome(self) -> None:
        from kernelagent.verifier.cute import support as cute_support

        outcome, note = cute_support.compile_only_outcome(self.launches.stats)
        self.facts.compile_only = {"outcome": outcome, "note": note}

    def timing(self) -> None:
        """Every timed call on a new draw of get_inputs(), fingerprinted; the parent checks some in secret."""
        from kernelagent.verifier.measure.fresh import DrawError, DrawMode
        from kernelagent.verifier.worker.timed import time_candidate

        plan, spec = self.delivery.plan if self.delivery else None, self.meta.get("timing") or {}
        if plan is None or not spec:
            self.facts.timing = timing_facts_error("no timing plan was delivered", self.backward)
            return
        problem = load_problem_for_draws(self.inbox)
        self.load_state(0)
        template = self.trials[spec["template_trial"]]["inputs"]
        eager = (self.meta.get("baseline") or {}).get("eager") or {}
        use_graph = None if not eager.get("method") else eager["method"] == "cuda_graph"
        mode = DrawMode(**spec["draws"])
        try:
            self.facts.timing = time_candidate(self.model, problem.module.get_inputs, template, plan, mode,
                                               self.device, self.backward, self.launches, self.out, use_graph,
                                               ref_params=spec.get("trainable"))
        except DrawError as e:  # the problem's inputs, not the candidate: timing is skipped and the report says why
            self.facts.timing = timing_facts_error(str(e), self.backward)
        except OutputError as e:
            raise CandidateFailure("mismatch", f"while timed: {e}") from e
        except BaseException as e:  # noqa: BLE001 - SystemExit included
            raise _failure(e, self.req.candidate, "forward raised while timed") from e

    def wait_for_timing_turn(self) -> None:
        """Checks share the GPU with other workers' checks; timing has it alone. Say so once this worker's
        own GPU work is finished, then wait for the parent's word in the read-only `-in` folder."""
        try:
            torch.cuda.synchronize()
        except BaseException as e:  # noqa: BLE001 - the candidate's own GPU work failed (a sticky fault)
            raise _failure(e, self.req.candidate, "the GPU work forward left behind failed") from e
        t = _perf()
        (self.out / P.TIMING_WANTED_FILE).write_text("1")
        turn, deadline = self.inbox / P.TIMING_TURN_FILE, t + TURN_WAIT_S
        while not turn.exists():
            if _perf() > deadline:
                raise RuntimeError("the parent never gave this worker its turn to be timed")
            _sleep(0.002)
        self.facts.io["timing_wait_seconds"] = round(_perf() - t, 4)

    def compile_facts(self) -> None:
        from kernelagent.verifier.worker.compile_facts import collect

        self.facts.compile = collect(self.device, self.launches.stats)

    # -- driver --------------------------------------------------------------------------------------
    def run(self) -> CandidateFacts:
        try:
            self.prepare()
            self.stage("load", self.load_candidate)
            self.receive_trials()
            if self.compile_only:
                self.stage("compile_check", self.compile_check)
                self.compile_facts()
                self.integrity_after()
                return self.facts
            self.stage("correctness", self.correctness)
            self.stage("probes", self.probes)
            self.compile_facts()
            self.integrity_after()
            if self.req.timing and self.device == "cuda" and not self.facts.patched:
                if self.req.timing_turn:
                    self.wait_for_timing_turn()
                self.stage("timing", self.timing)
                self.integrity_after()
        except BaseException as e:  # noqa: BLE001 - re-raised unless it is the candidate's
            f = self._own_failure(e, "the candidate's code raised")
            self.facts.failure = {"category": f.category, "message": f.message, "detail": f.detail}
            if self.compile_only and self.facts.compile_only is None:  # what compiled before the failure
                self._compile_outcome()
            self._salvage()
        return self.facts

    def _salvage(self) -> None:
        try:
            self.compile_facts()
            self.integrity_after()
        except Exception as e:  # noqa: BLE001 - best effort after a failure
            self.facts.notes.append(f"could not collect facts after the failure: {type(e).__name__}")


def run_single(req: CandidateRequest, state: guard.GuardState) -> dict[str, Any]:
    """One warm-up forward, then one inside the NVTX range that profilers are pointed at. Tool runs get
    their inputs up front (the parent links them before the worker starts)."""
    from kernelagent.verifier.measure.profiling import NVTX_RANGE

    runner = CandidateRunner(req, state)
    runner.prepare()
    runner.load_candidate()
    runner.receive_trials(upfront=True)
    trials = runner.meta["trials"]
    main = [t for t in trials if t.get("set") == 0 and t.get("state") == 0 and t.get("dist") == "native"]
    tid = (main or trials)[0]["id"] if req.main_set else trials[0]["id"]
    data = runner.trials[tid]
    runner.load_state(data["state"])
    runner.call_saved(data, None)
    marked = runner.device == "cuda"  # the NVTX range exists for ncu; without a GPU there is none
    if marked:
        torch.cuda.nvtx.range_push(NVTX_RANGE)
    res = runner.call_saved(data, None)
    if marked:
        torch.cuda.nvtx.range_pop()
    return {"trial": tid, "launches": res["facts"].launches}


def load_problem_for_draws(inbox: Path) -> Any:
    """The problem module, for fresh draws of its inputs (linked into `-in` after the constructor ran)."""
    return load_problem(inbox / P.PROBLEM_FILE, "kernelagent_problem_draws")


def timing_facts_error(message: str, backward: bool) -> TimingFacts:
    return TimingFacts(candidate={}, mode="forward+backward" if backward else "forward", draws="", error=message)


_BITS_SAMPLE = 64 * 2**20


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A copy of the raw bytes (NaN == NaN bitwise), queued on the current stream; beyond 64 MiB an
    evenly strided sample (late writes land all over an output, not in one spot)."""
    raw = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)
    if raw.numel() > _BITS_SAMPLE:
        raw = raw[:: raw.numel() // _BITS_SAMPLE]
    return raw.clone()


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic garbage collector off (as it was before, after)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _frozen_one(x: Any) -> Any:
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def _frozen(leaves: list[Any]) -> list[Any]:
    return [_frozen_one(x) for x in leaves]


def _has_nan(leaves: list[Any]) -> bool:  # after save(): every leaf is a readable dense tensor
    return any(isinstance(x, torch.Tensor) and x.is_floating_point() and bool(_isnan(x).any()) for x in leaves)


def _devices(leaves: list[Any]) -> list[str]:
    return [x.device.type if isinstance(x, torch.Tensor) else "" for x in leaves]


def _aliases(outputs: list[Any], inputs: list[Any]) -> bool:
    ptrs = {x.untyped_storage().data_ptr() for x in pytree.tree_leaves(inputs)
            if isinstance(x, torch.Tensor) and x.numel()}
    return any(type(o) is torch.Tensor and o.numel() and o.untyped_storage().data_ptr() in ptrs for o in outputs)


def _load_category(e: ProblemError) -> tuple[str, str]:
    cause = e.__cause__
    if cause is not None:
        try:
            category, message = classify_exception(cause, str(e.path or ""))
        except Exception:  # noqa: BLE001 - the file's exception could not be rendered: a load error all the same
            category, message = "load_error", ""
        if category == "compile_error":
            return category, message
    return "load_error", str(e)


def _require_grad(inputs: Any) -> list[torch.Tensor]:
    """The floating tensors among the inputs' leaves, set to require gradients (as a BACKWARD trial's are)."""
    diff = [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    for t in diff:
        t.requires_grad_(True)
    return diff


def _adds(ops: Any) -> int:
    """The additions a record holds (what the autograd engine's gradient sums dispatch)."""
    return int(ops.get("aten.add", 0)) + int(ops.get("aten.add_", 0))


def _failure(e: BaseException, candidate_path: str, what: str) -> CandidateFailure:
    """The candidate's exception as its failure. Rendering it runs the candidate's code (`__str__`, the
    DSL's error hooks): whatever that does, the failure stays the candidate's, never the verifier's."""
    try:
        category, message = classify_exception(e, candidate_path)
    except Exception:  # noqa: BLE001 - RecursionError included
        category, message = "runtime_error", "an exception whose message could not be rendered"
    try:
        detail = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-6000:]
    except Exception:  # noqa: BLE001
        detail = ""
    return CandidateFailure(category, f"{what}: {message}", detail)
