"""Judging a candidate from the facts its worker reported and the reference pack (parent process).

Each check turns into a stage entry and, when it fails, a category; when several fail the most
specific category wins (report.CATEGORY_PRIORITY).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelagent.verifier import tensorio
from kernelagent.verifier.judge.compare import (
    LeafResult,
    TrialResult,
    compare_outputs,
    looks_like_reduced_precision,
)
from kernelagent.verifier.judge.timed import (
    bimodal,
    busy_flush,
    check_prints,
    describe_wrong,
    host_bound,
    precision_held,
    remembered,
    tolerance_for,
)
from kernelagent.verifier.oprules import compute_ops, host_compute, poison_value
from kernelagent.verifier.protocol import CallFacts, CandidateFacts, Transfers
from kernelagent.verifier.sandbox import untrusted

HOST_RATIO_LIMIT = 1.5   # host time over event time beyond which work was hidden from the events
HOST_GAP_MS = 0.05       # ... and by at least this much per call (launch overhead on tiny kernels)
PHYSICS_MARGIN = 0.8     # a time below this share of measure.roofline.physics_floor_ms is impossible
# the fix every caching finding suggests
_CACHE_FIX = "compute from the input values on every call; never cache results by pointer or shape"


@dataclass
class Finding:
    category: str
    message: str
    stage: str
    detail: str = ""


@dataclass
class Judgement:
    findings: list[Finding] = field(default_factory=list)
    trials: list[TrialResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    def add(self, category: str, message: str, stage: str, detail: str = "") -> None:
        self.findings.append(Finding(category, message, stage, detail))

    def failed(self, stage: str) -> list[Finding]:
        return [f for f in self.findings if f.stage == stage]


class Judge:
    def __init__(self, ref_dir: Path, meta: dict[str, Any], facts: CandidateFacts, out_dir: Path,
                 cpu_compile_only: bool = False, physics_floor_ms: float | None = None, uses_dot: bool = True):
        self.refs, self.meta, self.facts, self.out = ref_dir, meta, facts, out_dir
        # compare where the tensors were made: on a GPU machine the float64 comparisons of large outputs
        # are milliseconds there and seconds on the host
        self.device = "cuda" if meta.get("device") == "cuda" else "cpu"
        self.load_device = "cuda" if self.device == "cuda" and torch.cuda.is_available() else "cpu"
        self.tolerance = meta["problem"].get("tolerance")
        self.trials = {t["id"]: t for t in meta["trials"]}
        self.j = Judgement()
        self.cpu_compile_only = cpu_compile_only
        self.physics_floor_ms = physics_floor_ms
        self.uses_dot = uses_dot
        self._refs: dict[int, dict[str, Any]] = {}

    def ref(self, trial_id: int) -> dict[str, Any]:
        # loaded once per trial: each check compares against it, and on the GPU a main trial's reference
        # (native + float64) is hundreds of MB
        if trial_id in self._refs:
            return self._refs[trial_id]
        ref = self._load(self.refs / f"ref_{trial_id}.pt")
        if self.trials.get(trial_id, {}).get("timing") or trial_id == self.meta["trials"][0]["id"]:
            self._refs[trial_id] = ref  # the timing trials and the first: the probes compare against them again
        return ref

    def cand(self, name: str) -> dict[str, Any] | None:
        """The candidate's saved outputs; None when missing. A record or a raw file beside it that is not a
        plain file (a link would be followed by this process, a FIFO would block it, a folder does not
        load) is a finding: only the candidate's code makes such a thing where the worker writes."""
        path = self.out / f"{name}.pt"
        if not os.path.lexists(path):
            return None
        try:
            untrusted.plain_file(path)
            for raw in path.parent.glob(path.name + ".*.raw"):
                untrusted.plain_file(raw)
        except (OSError, ValueError) as e:
            return self._forged(name, f"it, or a file beside it, is not a plain file ({type(e).__name__})")
        try:
            data = self._load(path)
        except (MemoryError, OSError, torch.cuda.OutOfMemoryError):
            raise  # this process's own trouble (memory, disk), not the file's: an internal error, not blame
        except Exception as e:  # noqa: BLE001 - whatever a forged file makes the loader raise (RecursionError too)
            return self._forged(name, f"it does not load ({type(e).__name__})")
        if not _as_written(name, data):
            return self._forged(name, f"it holds a {type(data).__name__} that is not the worker's record")
        return data

    def _forged(self, name: str, why: str) -> None:
        self.j.add("policy_violation", f"the saved outputs `{name}` are not what the worker wrote: {why}; only the "
                   "candidate's own code could have written the file", "integrity",
                   "return your outputs from forward; never write files")
        return None

    def _load(self, path: Path) -> Any:
        t = time.perf_counter()
        data = tensorio.load(path, self.load_device)
        m = self.j.metrics
        m["judge_load_seconds"] = round(m.get("judge_load_seconds", 0.0) + time.perf_counter() - t, 4)
        return data

    # -- integrity facts that need no comparison ---------------------------------------------------
    def runtime_integrity(self) -> None:
        f = self.facts
        if f.patched:
            names = ", ".join(f.patched[:6])
            self.j.add("policy_violation", f"the candidate replaced {names} at run time", "integrity",
                       "never reassign attributes of torch, triton or the standard library")
        if f.blocked:
            self.j.add("policy_violation", f"the sandbox refused: {'; '.join(sorted(set(f.blocked))[:4])}",
                       "integrity", "kernels must not touch files, the network, other processes or the interpreter")
        extra = sorted(set(f.threads.get("python_after", [])) - set(f.threads.get("python_before", [])))
        if extra:
            self.j.add("policy_violation", f"the candidate left Python threads running: {', '.join(extra[:4])}",
                       "integrity", "do all work in the forward call, on the caller's thread")
        for tid, t in f.trials.items():
            self._trial_facts(int(tid), t)
        self._skipped_after_working()
        first = self.meta["trials"][0]["id"] if self.meta.get("trials") else -1
        for name, t in f.probe_calls.items():  # held to the same rules as the trials, on their trials' inputs
            # the caching probe's second call: no launch there is the cache the probe looks for, and says so
            again = name == "reuse_second"
            self._trial_facts(_probe_trial(name, first), t, launch_rule=not again)
            first_call = f.probe_calls.get("reuse_first")
            if again and t.launches == 0 and first_call is not None and first_call.launches:
                self.j.add("caching_detected", "called again on the same input buffers holding new values, forward "
                           "launched no kernel: it returned a remembered answer", "integrity", _CACHE_FIX)

    def _skipped_after_working(self) -> None:
        """A call that launched nothing after an earlier call on inputs of the same shapes launched: the answer
        was remembered (a cache keyed on an address the allocator handed out again, for one). The trials come
        first, then the probes, which re-run a trial's inputs (the determinism probe's copy of trial 0's inputs
        landed at a cached address in one CI run, and only no_kernel_launched was said); the caching probe's
        second call has its own rule below."""
        if self.cpu_compile_only:
            return
        first = self.meta["trials"][0]["id"] if self.meta.get("trials") else -1
        calls = [(int(tid), t) for tid, t in self.facts.trials.items()] + \
                [(_probe_trial(name, first), t) for name, t in self.facts.probe_calls.items() if name != "reuse_second"]
        worked: set[str] = set()
        for tid, t in calls:
            desc = self.trials.get(tid, {}).get("input_desc")
            if t.launches:
                worked.add(desc)
            elif desc is not None and desc in worked:
                self.j.add("caching_detected", "forward launched no kernel on a call whose inputs have the shapes of "
                           "an earlier call's, where it did launch: it returned a remembered answer", "integrity",
                           _CACHE_FIX)
                return

    def _computed(self, ops: dict[str, int], grad_leaves: int = 0, opened: list[str] | tuple = ()) -> dict[str, int]:
        """The recorded ops that computed; library ops whose Python bodies the recorder ran (and recorded
        like forward) are the candidate's kernels, and the autograd engine's sums are not the candidate's."""
        return {k: v for k, v in compute_ops(ops, grad_leaves).items() if k not in set(opened)}

    def _host_compute(self, t: CallFacts | Any, trial: dict[str, Any]) -> str:
        """On every device: data read on the host (on a GPU, copied there first) means host compute."""
        tr = t.transfers
        return host_compute(tr.d2h_bytes + tr.host_read_bytes, tr.scalar_reads, int(trial.get("input_bytes") or 0))

    def _trial_facts(self, tid: int, t: CallFacts, launch_rule: bool = True) -> None:
        trial = self.trials.get(tid, {})
        if t.mutated:
            self.j.add("input_mutation", f"input value(s) {t.mutated} were modified by forward "
                       f"(trial with inputs {trial.get('input_desc', '')})", "integrity",
                       "write results into new tensors, never into the inputs")
        if t.aliases and not trial.get("aliases_input"):
            self.j.add("input_mutation", "an output shares storage with an input", "integrity",
                       "allocate the outputs with torch.empty* and write them in your kernel")
        shape = _skeleton(t.structure)
        if trial.get("structure") and shape != _skeleton(trial["structure"]):
            self.j.add("mismatch", f"forward returned {_clip(t.structure)} where the reference returns "
                       f"{_clip(trial['structure'])}", "correctness", "return exactly what the reference returns")
        computed = self._computed(t.ops, t.grad_leaves, t.opened)
        if computed:
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(computed.items())[:8])
            self.j.add("fallback_to_reference", f"forward dispatched PyTorch compute ops: {ops}", "integrity",
                       "compute everything in your own kernels; only allocation, views and copies are allowed")
        if t.copied and t.launches:  # with no launch at all, no_kernel_launched says it better
            self.j.add("fallback_to_reference", f"output(s) {t.copied} are PyTorch's copies of the input data (clone, "
                       "contiguous, to), never handed to a kernel of yours: PyTorch produced them", "integrity",
                       "write every output in your own kernel; copies are for preparing a kernel's inputs")
        host = self._host_compute(t, trial)
        if host:
            self.j.add("fallback_to_reference", f"{host}: forward read the data on the host, where no kernel "
                       "of yours computes", "integrity",
                       "compute on the GPU in your own kernels; do not copy inputs to the CPU")
        if launch_rule and t.launches == 0 and not self.cpu_compile_only:
            self.j.add("no_kernel_launched", "forward launched none of the candidate's own kernels", "integrity",
                       "forward must launch your Triton / CuTe DSL kernel on every call")
        if t.late_writes:
            self._late_writes("")
        if t.transfers.foreign_streams:
            self._foreign_streams(t.transfers.foreign_streams, "")
        wrong_dev = [d for d in t.devices if d and d != self.meta.get("device", d)]
        if wrong_dev:
            self.j.add("mismatch", f"outputs on device {wrong_dev[0]}, expected {self.meta.get('device')}",
                       "correctness")

    # -- comparisons -------------------------------------------------------------------------------
    def correctness(self) -> None:
        missing = [tid for tid in self.trials if not (self.out / f"cand_{tid}.pt").exists()]
        if missing or not self.trials:  # every trial must have been run and saved: facts alone prove nothing
            self.j.add("runtime_error", f"no outputs were saved for trial(s) {missing[:6]}: the candidate's "
                       "process did not run every trial", "correctness")
        for tid in self.trials:
            got = self.cand(f"cand_{tid}")
            if got is None:
                continue
            res = compare_outputs(self.trials[tid], got["outputs"], self.ref(tid), self.tolerance, got.get("grads"))
            self.j.trials.append(res)
        if len(self.j.trials) < len(self.trials) and not self.j.findings:  # an accepted verdict compares them all
            self.j.add("runtime_error", f"the outputs of {len(self.trials) - len(self.j.trials)} trial(s) could not "
                       "be compared", "correctness")
        unjudged = [r for r in self.j.trials if not r.ok and self._swap_not_cached(r)]
        if unjudged:  # neither passed nor failed
            self.j.notes.append("the trial with the first trial's largest values exchanged with others failed, but "
                                "its output is no other trial's answer: not judged (the exchange may break what "
                                "the problem's inputs keep, such as sorted rows)")
            self.j.trials = [r for r in self.j.trials if not any(r is u for u in unjudged)]
        failing = [r for r in self.j.trials if not r.ok]
        if failing:
            self._classify_failure(failing[0])

    def _swap_not_cached(self, res: TrialResult) -> bool:
        """The swap trial exchanges values a problem may keep in place (rows sorted for a search, a symmetric
        matrix; red team, 2026-12-05): a wrong output there counts only when it is another trial's answer (a
        cache keyed on sampled content), and is otherwise noted, never a mismatch."""
        return res.trial.get("dist") == "swap" and not (res.structure_ok and self._answer_of_other_trial(res.trial))

    def _classify_failure(self, res: TrialResult) -> None:
        trial = res.trial
        where = f"trial seed {trial['seed']}, input set {trial['set']} {trial.get('input_desc', '')}{_dist(trial)}"
        if not res.structure_ok:
            self.j.add("mismatch", f"{res.structure_msg} ({where})", "correctness")
            return
        leaf = res.worst
        assert leaf is not None
        if leaf.kind == "nan_inf":
            category = "stale_memory" if self._unwritten(res, leaf) else "nan_inf"
            msg = leaf.message if category == "nan_inf" else (
                f"{leaf.name}: elements never written by the kernel ({leaf.message.split(' where')[0]})")
            self.j.add(category, f"{msg} ({where})", "correctness", leaf.rows)
            return
        stale = self._answer_of_other_trial(trial)
        if stale is not None:
            self.j.add("caching_detected", f"{leaf.name} is the answer for other inputs (those of trial seed "
                       f"{stale['seed']}, set {stale['set']}) ({where})", "correctness",
                       "compute from the input values on every call; never cache results by pointer, shape or count")
            return
        hint = looks_like_reduced_precision(leaf, _dtype_of(self.ref(trial["id"])), self.uses_dot)
        detail = "\n".join(x for x in (leaf.rows, hint) if x)
        self.j.add("mismatch", f"{leaf.name}: {leaf.message} ({where})", "correctness", detail)

    def _answer_of_other_trial(self, trial: dict[str, Any], outputs: list[Any] | None = None) -> dict[str, Any] | None:
        """A wrong output (by default the trial's correctness output) that matches another same-shaped
        trial's reference was remembered, not computed."""
        if outputs is None:
            got = self.cand(f"cand_{trial['id']}")
            if got is None:
                return None
            outputs = got["outputs"]
        for other in self.meta["trials"]:
            if other["id"] != trial["id"] and other.get("input_desc") == trial.get("input_desc") and \
                    self._is_answer_of(other, outputs):
                return other
        return None

    def _is_answer_of(self, trial: dict[str, Any], outputs: list[Any]) -> bool:
        return compare_outputs(trial, outputs, self.ref(trial["id"]), self.tolerance).ok

    def _unwritten(self, res: TrialResult, leaf: LeafResult) -> bool:
        """NaN where the reference is finite: were those elements just our poison, never written?"""
        sentinel = self.cand(f"sentinel_{res.trial['id']}")
        if sentinel is None and res.trial["id"] == self.meta["trials"][0]["id"]:
            sentinel = self.cand("sentinel")
        if sentinel is None or leaf.nan_mask is None:
            return False
        try:
            idx = ["output"] + [f"output {i}" for i in range(64)]
            pos = idx.index(leaf.name) - (1 if leaf.name != "output" else 0)
            out = sentinel["outputs"][max(pos, 0)]
        except (ValueError, IndexError):
            return False
        if not isinstance(out, torch.Tensor) or out.shape != leaf.nan_mask.shape:
            return False
        marker = poison_value(out.dtype, sentinel=True)
        at = out.to(torch.float64)[leaf.nan_mask]
        return bool(at.numel()) and bool((at == float(torch.tensor(marker, dtype=out.dtype))).float().mean() > 0.9)

    def determinism(self) -> None:
        first = self.meta["trials"][0]
        a, b = self.cand(f"cand_{first['id']}"), self.cand("repeat")
        if a is None or b is None:
            return
        ref = self.ref(first["id"])
        ra = compare_outputs(first, a["outputs"], ref, self.tolerance, a.get("grads"))
        rb = compare_outputs(first, b["outputs"], ref, self.tolerance, b.get("grads"))
        # the two runs judged against each other: a race shows even when both are wrong
        rab = compare_outputs(first, b["outputs"], {"native": a["outputs"]}, self.tolerance)
        if ra.ok != rb.ok or (not ra.ok and not rab.ok):
            leaf = (rb if ra.ok else rab).worst
            self.j.add("nondeterministic", f"a second run on the same inputs gave a different result: "
                       f"{leaf.summary() if leaf else ''}", "integrity",
                       "look for races: missing barriers, unmasked reads of memory nothing wrote, atomics")

    def caching(self) -> None:
        probe_info = self.facts.cache_probe
        probe = self.cand("probe")
        if not probe_info or probe is None:
            return
        if probe_info.get("late_writes") and not self._late_in_trials():
            self._late_writes(" (on reused input buffers)")
        if probe_info.get("late_writes") or self._late_in_trials():
            return  # unjoined work explains a stale answer here: stream_violation says so, not caching
        partner = self.trials[probe_info["partner"]]
        res = compare_outputs(partner, probe["outputs"], self.ref(partner["id"]), self.tolerance)
        if not res.ok and all(r.ok for r in self.j.trials):
            self.j.add("caching_detected", "new values written into the same input buffers did not change the "
                       "output as they should", "integrity", _CACHE_FIX)

    def timed_outputs(self) -> None:
        """The timed calls: right answers on their fresh draws, kernels launched, nothing computed by
        PyTorch or on the host, no work hidden on another stream, no time below physics."""
        timing = self.facts.timing
        if timing is None or timing.error or self._late_in_trials():
            return  # outputs written after the caller's stream finished: stream_violation says so already
        if all(r.ok for r in self.j.trials):  # a kernel already wrong says nothing new when timed
            self._timed_prints()
        per_call = max((t.grad_leaves for t in self.facts.trials.values()), default=0)
        computed = self._computed(timing.ops, per_call * max(timing.calls, 1), timing.opened)
        if computed:
            self.j.add("fallback_to_reference", "while timed, forward dispatched PyTorch compute ops: "
                       + ", ".join(sorted(computed)[:6]), "timing")
        main = self.trials.get((self.meta.get("timing") or {}).get("template_trial", -1), {})
        host = self._host_compute(_per_call(timing), main)
        if host:
            self.j.add("fallback_to_reference", f"while timed, {host}", "timing")
        if timing.launches is not None and timing.calls and timing.launches < timing.calls:
            self.j.add("timing_violation", f"while timed, {timing.calls - timing.launches} of {timing.calls} calls "
                       "launched no kernel: they returned answers without computing them", "timing",
                       "launch your kernel on every call; never reuse results between calls")
        if timing.transfers.foreign_streams:
            self._foreign_streams(timing.transfers.foreign_streams, " while timed")
        self._stream_check(timing.candidate)
        busy = busy_flush(timing.candidate, (self.meta.get("baseline") or {}).get("eager") or {})
        if busy:
            self.j.add("stream_violation", busy, "timing", "launch on torch.cuda.current_stream() only, and leave "
                       "nothing running on the GPU when forward returns")
        self._remembered(timing.candidate)
        self._physics(timing.candidate)

    def _remembered(self, cand: dict[str, Any]) -> None:
        found = remembered(cand)
        if found:
            self.j.add("timing_violation", found, "timing",
                       "compute every call from its input values; never cache results between calls")

    def _foreign_streams(self, n: int, when: str) -> None:
        self.j.add("stream_violation", f"{n} op(s) or kernel launch(es){when} ran on another stream, not the caller's "
                   "(torch.cuda.current_stream()): work there escapes the timing events", "integrity",
                   "launch everything on torch.cuda.current_stream(); do not switch streams in forward")

    def _timed_prints(self) -> None:
        path = self.refs / "checks.pt"
        cand = self.cand("timed_prints")
        if not path.exists():
            return
        if cand is None:
            self.j.add("timing_violation", "the timed calls left no fingerprints of their outputs", "timing")
            return
        ref = self._load(path)
        dtypes = [x.dtype for x in (self.ref(self.meta["trials"][0]["id"]).get("native") or [])
                  if isinstance(x, torch.Tensor)]
        rel, atol = tolerance_for(dtypes, self.tolerance)
        verdict = check_prints(cand, ref, rel, atol)
        self.j.metrics["timed_calls_checked"] = verdict.checked
        if not verdict.ok:
            self.j.add("timing_violation", describe_wrong(verdict), "timing",
                       "compute every call from its input values; never cache, skip or defer work between calls")
        else:
            loose = precision_held(cand, ref, self.tolerance)
            if loose:
                self.j.add("timing_violation", loose, "timing",
                           "compute every call at the precision the checked calls show; the timed calls are "
                           "checked too")

    def _stream_check(self, cand: dict[str, Any]) -> None:
        ratio, med, host_ms = cand.get("host_ratio"), cand.get("median_ms"), cand.get("host_ms_per_call")
        if ratio and med and ratio > HOST_RATIO_LIMIT and host_ms and host_ms - med > HOST_GAP_MS:
            self.j.add("stream_violation", f"device work took {ratio:.1f}x the time the timing events saw: "
                       "work ran on another stream", "timing", "launch on torch.cuda.current_stream()")

    def _physics(self, cand: dict[str, Any]) -> None:
        floor = self.physics_floor_ms
        times = [x for x in (cand.get("median_ms"), cand.get("mean_ms")) if x]
        if floor and times and min(times) < PHYSICS_MARGIN * floor:
            self.j.add("timing_violation", f"the timed calls took {min(times):.4f} ms, below the {floor:.4f} ms the "
                       "GPU needs at least to read the inputs and write the outputs of one call: work was skipped",
                       "timing", "compute every call in full; a time faster than the hardware is not a speedup")
        self.j.notes += [n for n in (bimodal(cand.get("samples_ms") or []), host_bound(cand)) if n]

    def _late_in_trials(self) -> bool:
        return any(t.late_writes for t in self.facts.trials.values())

    def _late_writes(self, where: str) -> None:
        self.j.add("stream_violation", "the outputs were still changing after forward returned and the current "
                   f"stream had finished{where}: work ran on another stream and was never joined", "integrity",
                   "launch on torch.cuda.current_stream(), or make it wait for your stream before returning")

    def run(self) -> Judgement:
        self.runtime_integrity()
        self.correctness()
        self.determinism()
        self.caching()
        self.timed_outputs()
        ok_trials = [r for r in self.j.trials if r.ok]
        worst = [leaf for r in self.j.trials for leaf in r.leaves if leaf.kind in ("ok", "mismatch") and leaf.judged]
        if worst:
            self.j.metrics["max_abs_err"] = max(leaf.max_abs for leaf in worst)
            self.j.metrics["rel_l2"] = max(leaf.rel_l2 for leaf in worst)
        self.j.metrics["trials"] = len(self.j.trials)
        self.j.metrics["trials_passed"] = len(ok_trials)
        self._refs.clear()
        if self.load_device == "cuda":
            torch.cuda.empty_cache()  # the next candidate's worker needs the memory more than our cache
        return self.j


def _probe_trial(name: str, first: int) -> int:
    """The trial whose inputs a probe call ran on: `sentinel_<id>` re-runs trial <id>; the others trial 0."""
    head, _, tid = name.partition("_")
    return int(tid) if head == "sentinel" and tid.isdigit() else first


def _as_written(name: str, data: Any) -> bool:
    """Whether a loaded output file has the form the worker writes (anything else was forged)."""
    if not isinstance(data, dict):
        return False
    if name == "timed_prints":
        return isinstance(data.get("calls"), list) and isinstance(data.get("prints"), torch.Tensor | None)
    return isinstance(data.get("outputs"), list) and isinstance(data.get("grads"), dict | None)


def _per_call(timing: Any) -> Any:
    """The timed calls' host traffic per call (the rules are per call; the record sums every call)."""
    from types import SimpleNamespace

    n = max(int(timing.calls or 0), 1)
    per = Transfers(d2h_bytes=timing.transfers.d2h_bytes // n, scalar_reads=timing.transfers.scalar_reads // n,
                    host_read_bytes=timing.transfers.host_read_bytes // n)
    return SimpleNamespace(transfers=per)


def _dist(trial: dict[str, Any]) -> str:
    """How a trial's inputs differ from the problem's own draw, for messages."""
    if trial.get("dist") == "wide":
        w = trial.get("wide") or {}
        return (f", inputs scaled by {w.get('scale', '?'):g} and shifted by {w.get('offset', '?'):g} (the reference "
                "stays finite there: keep the arithmetic stable, e.g. subtract the row maximum before exp)")
    if trial.get("dist") == "alt":
        return ", a second input distribution"
    if trial.get("dist") == "near":
        return ", the first trial's inputs with a few elements changed"
    if trial.get("dist") == "swap":
        return ", the first trial's inputs with their largest values exchanged with others"
    return ""


def _skeleton(structure: str) -> str:
    """A structure description without shapes and dtypes (those are compared leaf by leaf). The shape is
    digits, commas and spaces only, so a failed match stops where that ends: with `[^)]*` a dict key of
    "Tensor(" repeated and no `)` made every attempt scan to the end (quadratic: 95 s at 60 000, red-team
    review)."""
    return re.sub(r"Tensor\([\d, ]*\):\w+", "Tensor", structure)


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _dtype_of(ref: dict[str, Any]) -> torch.dtype:
    outs = ref.get("native") or []
    first = next((x for x in outs if isinstance(x, torch.Tensor)), None)
    return first.dtype if first is not None else torch.float32
