"""One timing method for candidate, eager reference and torch.compile reference (GPU only).

Each call: a short wait on the GPU (below), new input values (fresh.Refresher, outside the events), flush
L2 (outside the events), record events around the call, then fingerprint its outputs (outside the
events). Warm-up first;
repetitions until a time budget or a count; median, interquartile range and mean. A host-clock
cross-check around a full device synchronise catches work hidden on other streams. Under 10 us the
calls are captured in a CUDA graph (one call per buffer slot) and replayed, each slot refilled before
every replay.

The wait: refreshing inputs and fingerprinting outputs keep the host busy between calls, so the GPU
drains its queue and would reach the start event before the host has launched the call; the events
would then time the host's launch work (and the verifier's own recorder) as if it were the kernel's.
A one-thread spin kernel, longer than the host needs to refresh the inputs and launch the call, keeps the
launch ahead of the GPU, as a deep queue does in `triton.testing.do_bench` (NVBench's blocking kernel does
the same). The spin comes before the refresh: work on another stream could run beside it, but it would see
the previous call's inputs (and the worker rejects any launch off the caller's stream it can see:
worker.integrity, and CuTe DSL launches through cute.support).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from kernelagent.verifier.protocol import CHECKED_SPAN

_perf_counter = time.perf_counter  # captured before any candidate is imported
_Event = getattr(torch.cuda, "Event", None)
_synchronize = torch.cuda.synchronize
_elapsed = _Event.elapsed_time if _Event is not None else None
_record = _Event.record if _Event is not None else None
_spin = getattr(torch.cuda, "_sleep", None)  # spin `cycles` GPU clock cycles on the current stream

GRAPH_THRESHOLD_MS = 0.010
GRAPH_SLOTS = 10         # calls per replayed graph, each with its own input buffers and draw
# Host time a measurement may spend (each call refreshes its inputs and fingerprints its outputs on the
# host: about a millisecond, far more than a small kernel takes): warm-up and repetitions stop at
# whichever limit comes first, GPU time or host time, after their minimum counts
WARMUP_HOST_S = 0.1
REPS_HOST_S = 0.4
L2_FLUSH_BYTES = 256 * 2**20
SPIN_MAX_MS = 25.0       # past this host time per call, the rest of the launch shows in the call's time
SPIN_MARGIN = 1.5        # spin this many times the host time of the slowest recent refresh, flush and launch
SPIN_FLOOR_MS = 0.02


@dataclass
class Timing:
    median_ms: float
    q1_ms: float
    q3_ms: float
    mean_ms: float
    min_ms: float
    n: int
    method: str                      # "events" | "cuda_graph"
    samples_ms: list[float] = field(default_factory=list)
    host_ratio: float | None = None  # host time / event time over a back-to-back block
    host_ms_per_call: float | None = None
    notes: list[str] = field(default_factory=list)
    calls: int = 0                   # calls made in all (each with its own draw)
    launch_host_ms: float | None = None  # host time of one call (median), the spin covers it
    spin_ms: float | None = None     # the GPU wait queued before each timed call
    flush_ms: list[float] = field(default_factory=list)  # GPU time of each timed call's L2 flush (after its refresh)
    phases_s: dict[str, float] = field(default_factory=dict)  # host seconds of each phase of the measurement
    sample_calls: list[int] = field(default_factory=list)  # the call of each sample (a replay's first call)
    repeats_ms: list[float] = field(default_factory=list)  # pool mode: samples on repeated draws, kept apart

    def to_dict(self, keep_samples: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not keep_samples:
            d.pop("samples_ms")
        return d

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms


def quartiles(samples: Sequence[float]) -> list[float]:
    """[q1, median, q3] (all three the one sample when there is one)."""
    return statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3


def summarize(samples: Sequence[float], method: str) -> Timing:
    s = sorted(samples)
    q = quartiles(s)
    return Timing(median_ms=statistics.median(s), q1_ms=q[0], q3_ms=q[2], mean_ms=statistics.fmean(s),
                  min_ms=s[0], n=len(s), method=method, samples_ms=list(samples))


class _Flusher:
    def __init__(self) -> None:
        self.buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        self.buf.zero_()


@dataclass
class Workload:
    """What is timed. `run(slot)` is the timed call; `prepare(i, slot)` gives call i new input values in
    `slot`'s buffers and `after(i, slot)` looks at its outputs — both outside the timed region. Graph
    replay captures one call per slot, so every replayed call still sees its own fresh values."""

    run: Callable[[int], Any]
    prepare: Callable[[int, int], Any] = lambda i, slot: None
    after: Callable[[int, int], Any] = lambda i, slot: None
    slots: int = 1

    @staticmethod
    def of(fns: Sequence[Callable[[], Any]]) -> Workload:
        """Closures with their own inputs, called in rotation (benchmarks of trusted code, ceilings)."""
        current = [fns[0]]

        def prepare(i: int, slot: int) -> None:
            current[0] = fns[i % len(fns)]

        return Workload(run=lambda slot: current[0](), prepare=prepare)


class _Spin:
    """The GPU wait before each timed call, sized from the host time of recent calls."""

    _cycles_per_ms: float | None = None  # measured once per process

    def __init__(self) -> None:
        self.host_ms: list[float] = []
        self.cycles = 0

    @classmethod
    def cycles_per_ms(cls) -> float:
        if cls._cycles_per_ms is None:
            probe = 2_000_000
            a, b = _Event(enable_timing=True), _Event(enable_timing=True)
            _spin(probe // 10)  # first launch loads the kernel
            _record(a, torch.cuda.current_stream())
            _spin(probe)
            _record(b, torch.cuda.current_stream())
            _synchronize()
            cls._cycles_per_ms = probe / max(_elapsed(a, b), 1e-3)
        return cls._cycles_per_ms

    def saw(self, host_ms: float) -> None:
        self.host_ms = (self.host_ms + [host_ms])[-8:]

    def forget_first(self) -> None:
        """Size from the calls after the first: its host time holds one-off work (buffers, masks, a draw's
        first use), and a spin sized from it (up to SPIN_MAX_MS) would be queued before each first sample."""
        self.host_ms = self.host_ms[1:] or self.host_ms

    def size(self) -> None:
        if _spin is None or not self.host_ms:
            return
        ms = min(SPIN_MAX_MS, max(SPIN_FLOOR_MS, SPIN_MARGIN * max(self.host_ms)))
        self.cycles = int(ms * self.cycles_per_ms())

    @property
    def ms(self) -> float:
        return self.cycles / self._cycles_per_ms if self.cycles and self._cycles_per_ms else 0.0

    def __call__(self) -> None:
        if self.cycles:
            _spin(self.cycles)


class _Calls:
    """Numbers the calls of one measurement: call i always gets draw i, whatever phase it belongs to."""

    def __init__(self, work: Workload, flush: _Flusher | None):
        self.work, self.flush, self.n = work, flush, 0
        self.spin = _Spin()
        self.launch_ms: list[float] = []
        self.flushes: list[tuple[Any, Any]] = []  # (event before the flush, start event) of each timed call
        self.timed: list[int] = []  # the index of every timed call (of every replay's first call)

    def one(self, record: bool = True) -> tuple[Any, Any] | None:
        """Call i: new input values and an L2 flush, then the timed call between its events. A timed call
        queues the spin first, so while the GPU spins the inputs still hold the previous call's values:
        nothing the candidate left running beside the spin (work on a stream of its own) can compute from
        the new ones before the start event, only during the flush that follows the refresh."""
        i, slot = self.n, self.n % self.work.slots
        self.n += 1
        before = None
        if record:
            self.spin()
        t = _perf_counter()
        self.work.prepare(i, slot)
        if record:  # the flush alone, between these events and the start: a draw that waits on the GPU
            before = _Event(enable_timing=True)  # (a copy from host memory) puts no host time in the window
            _record(before, torch.cuda.current_stream())
        if self.flush is not None:
            self.flush()
        if not record:
            self.work.run(slot)
            self.spin.saw((_perf_counter() - t) * 1e3)
            self.work.after(i, slot)
            return None
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        self.timed.append(i)
        launched = _perf_counter()
        _record(start, torch.cuda.current_stream())
        self.work.run(slot)
        _record(end, torch.cuda.current_stream())
        now = _perf_counter()
        self.spin.saw((now - t) * 1e3)
        self.launch_ms.append((now - launched) * 1e3)
        self.flushes.append((before, start))
        self.work.after(i, slot)
        return start, end


def _event_samples(calls: _Calls, reps: int, host_s: float | None = None, least: int = 1,
                   record: bool = True) -> list[float]:
    """`reps` timed calls (untimed with `record` False: no samples), or fewer (never under `least`) once
    `host_s` seconds of host time are spent."""
    deadline = None if host_s is None else _perf_counter() + host_s
    pairs = []
    for k in range(reps):
        pair = calls.one(record)
        if pair is not None:
            pairs.append(pair)
        if deadline is not None and k + 1 >= least and _perf_counter() > deadline:
            break
    _synchronize()
    return [_elapsed(a, b) for a, b in pairs]


def _warm_up(calls: _Calls, n: int, host_s: float, least: int) -> None:
    """`n` calls without spin or events (or fewer, never under `least`, once `host_s` seconds of host time are
    spent): they ready caches, clocks and allocator and size the spin of the repetitions. Timed with the spin
    they queued one spin each, sized from the first calls' host time: the GPU then spun longer than the host
    worked, and the 1 MiB softmax's warm-up took 0.27-0.38 s of GPU time for a 0.1 s host limit (H200)."""
    _event_samples(calls, n, host_s, least, record=False)


def host_ratio(work: Workload, calls: int = 20) -> tuple[float, float]:
    """Host time around a full device synchronise over event time for the same block of calls.

    Events live on the current stream; work launched on another stream is invisible to them but not to
    `torch.cuda.synchronize()`, so a ratio far above 1 means hidden work. (The block reuses slot 0's
    values: it measures where work runs, not what it computes.)
    """
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _synchronize()
    t0 = _perf_counter()
    _record(start, torch.cuda.current_stream())
    for _ in range(calls):
        work.run(0)
    _record(end, torch.cuda.current_stream())
    _synchronize()
    host_ms = (_perf_counter() - t0) * 1e3
    return host_ms / max(_elapsed(start, end), 1e-6), host_ms / calls


def _graph_samples(calls: _Calls, reps: int, least: int) -> list[float]:
    """Capture one call per slot in a graph; before each replay every slot gets its next draw."""
    work = calls.work
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        for slot in range(work.slots):  # each slot's buffers get a draw and one warm call before capture
            work.prepare(calls.n, slot)
            work.run(slot)
            work.after(calls.n, slot)
            calls.n += 1
        with torch.cuda.graph(graph, stream=side):
            for slot in range(work.slots):
                work.run(slot)
    torch.cuda.current_stream().wait_stream(side)
    _synchronize()
    samples: list[float] = []
    deadline = _perf_counter() + REPS_HOST_S
    for _ in range(reps):
        if len(samples) >= least and _perf_counter() > deadline:
            break
        first = calls.n
        calls.timed.append(first)
        for slot in range(work.slots):
            work.prepare(first + slot, slot)
        a, b = _Event(enable_timing=True), _Event(enable_timing=True)
        _record(a, torch.cuda.current_stream())
        graph.replay()
        _record(b, torch.cuda.current_stream())
        for slot in range(work.slots):
            work.after(first + slot, slot)
        calls.n += work.slots
        _synchronize()
        samples.append(_elapsed(a, b) / work.slots)
    return samples


MIN_CALLS = 32  # every measurement makes at least this many calls with fresh draws (protocol.GUARANTEED_CALLS)
# and none at or past CHECKED_SPAN, where the secret checks end: a candidate can count its calls, and a call
# past the checks' span could return anything (review, 2026-12-02: half of a small kernel's samples were)


def measure(work: Workload | Sequence[Callable[[], Any]], *, warmup_ms: float = 25.0, rep_ms: float = 200.0,
            min_reps: int = 30, max_reps: int = 2000, use_graph: bool | None = None) -> Timing:
    """Time `work` (new input values before every call) and return median/IQR/mean in ms."""
    if not isinstance(work, Workload):
        work = Workload.of(list(work))
    phases = _Phases()
    flush = _Flusher()
    calls = _Calls(work, flush)
    for _ in range(max(work.slots, 3)):
        calls.one(record=False)
    _synchronize()
    calls.spin.forget_first()
    calls.spin.size()
    est = max(statistics.median(_event_samples(calls, 5)), 1e-4)
    phases.mark("first")
    # every call of a measurement lies before CHECKED_SPAN, where the secret checks end: the warm-up
    # leaves most of it to the repetitions, and the repetitions stop at it
    n_warm = min(max(1, int(warmup_ms / est)), max_reps, max(3, CHECKED_SPAN // 4 - calls.n))
    _warm_up(calls, n_warm, WARMUP_HOST_S, least=3)
    phases.mark("warmup")
    calls.spin.size()
    calls.launch_ms.clear()
    calls.flushes.clear()
    calls.timed.clear()
    room = max(1, CHECKED_SPAN - calls.n)
    reps = int(min(max_reps, room, max(min_reps, rep_ms / est)))
    graph = est < GRAPH_THRESHOLD_MS if use_graph is None else use_graph
    notes: list[str] = []
    samples, method = _repetitions(calls, reps, room, min_reps, graph, notes)
    phases.mark("reps")
    # what is judged is fixed before the candidate runs again (host_ratio calls it): tuples, no result object
    # yet, so nothing it could reach from its own frames (a walk the policy and the audit hook both refuse)
    # changes a figure afterwards
    flushes = tuple(_elapsed(a, b) for a, b in calls.flushes)  # synchronised at the end of the repetitions
    timed = tuple(calls.timed[-len(samples):])
    launch = statistics.median(calls.launch_ms) if calls.launch_ms else None
    ratio, host_ms = host_ratio(work)
    phases.mark("host_ratio")
    result = summarize(samples, method)
    result.host_ratio, result.host_ms_per_call = ratio, host_ms
    result.launch_host_ms = launch
    result.spin_ms = calls.spin.ms if not graph else None
    result.flush_ms = list(flushes)
    result.notes = notes
    result.calls = calls.n
    result.phases_s = phases.seconds
    result.sample_calls = list(timed)
    del flush
    return result


def _repetitions(calls: _Calls, reps: int, room: int, min_reps: int, graph: bool,
                 notes: list[str]) -> tuple[tuple[float, ...], str]:
    """The timed repetitions: replays of a CUDA graph (one sample per replay), else one event pair per call."""
    work = calls.work
    if graph:
        try:
            work.slots = GRAPH_SLOTS
            replays = max(1, room // GRAPH_SLOTS - 1)  # the capture's warm calls take one slot set
            return tuple(_graph_samples(calls, replays, least=min(min_reps, replays))), "cuda_graph"
        except RuntimeError as e:  # not capturable: fall back to events, say so
            notes.append(f"CUDA graph capture failed ({str(e).splitlines()[0][:120]}); timed with events")
            work.slots = 1
            calls.timed.clear()
            reps = max(1, min(reps, CHECKED_SPAN - calls.n))
    return tuple(_event_samples(calls, reps, REPS_HOST_S, least=min(min_reps, reps))), "events"


MIN_FRESH_SAMPLES = 5  # fewer samples on draws of their own than this, and the figures keep the repeats


def fresh_only(t: Timing, is_fresh: Callable[[int], bool]) -> Timing:
    """The figures of the samples whose call had a draw of its own; the others go to `repeats_ms` (pool mode:
    a memo fed by repeated draws then lowers no reported figure, and the judge compares the two groups)."""
    keep: list[tuple[float, int]] = []
    repeats: list[float] = []
    for x, i in zip(t.samples_ms, t.sample_calls, strict=True):
        if is_fresh(i):
            keep.append((x, i))
        else:
            repeats.append(x)
    if len(keep) < MIN_FRESH_SAMPLES or not repeats:
        return t
    s = summarize([x for x, _ in keep], t.method)
    return replace(t, median_ms=s.median_ms, q1_ms=s.q1_ms, q3_ms=s.q3_ms, mean_ms=s.mean_ms, min_ms=s.min_ms,
                   n=s.n, samples_ms=s.samples_ms, sample_calls=[i for _, i in keep], repeats_ms=repeats,
                   notes=[*t.notes, f"figures from the {len(keep)} calls on a draw of their own; the "
                                    f"{len(repeats)} on repeated draws kept apart"])


class _Phases:
    """Host seconds from one mark to the next (where a measurement's own time goes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t = _perf_counter()

    def mark(self, name: str) -> None:
        now = _perf_counter()
        self.seconds[name] = round(now - self._t, 4)
        self._t = now


def bootstrap_speedup(baseline: Sequence[float], candidate: Sequence[float], *, iters: int = 2000,
                      seed: int = 0, stat: str = "median") -> tuple[float, float, float]:
    """Ratio baseline/candidate of medians (or means) with a 95% bootstrap interval: (point, lo, hi)."""
    b = torch.tensor(list(baseline), dtype=torch.float64)
    c = torch.tensor(list(candidate), dtype=torch.float64)

    def center(x: torch.Tensor) -> torch.Tensor:
        return x.median(dim=-1).values if stat == "median" else x.mean(dim=-1)

    point = float(center(b) / center(c))
    g = torch.Generator().manual_seed(seed)
    bi = torch.randint(len(b), (iters, len(b)), generator=g)
    ci = torch.randint(len(c), (iters, len(c)), generator=g)
    ratios = center(b[bi]) / center(c[ci])
    lo, hi = torch.quantile(ratios, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return point, lo, hi
