"""One timing method for candidate, eager reference and torch.compile reference (GPU only).

Each call: new input values (fresh.Refresher, outside the events), flush L2 (outside the events),
record events around the call, then fingerprint its outputs (outside the events). Warm-up first;
repetitions until a time budget or a count; median, interquartile range and mean. A host-clock
cross-check around a full device synchronise catches work hidden on other streams. Under 10 us the
calls are captured in a CUDA graph (one call per buffer slot) and replayed, each slot refilled before
every replay.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

_perf_counter = time.perf_counter  # captured before any candidate is imported
_Event = getattr(torch.cuda, "Event", None)
_synchronize = torch.cuda.synchronize
_elapsed = _Event.elapsed_time if _Event is not None else None
_record = _Event.record if _Event is not None else None

GRAPH_THRESHOLD_MS = 0.010
GRAPH_SLOTS = 20         # calls per replayed graph, each with its own input buffers and draw
L2_FLUSH_BYTES = 256 * 2**20


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

    def to_dict(self, keep_samples: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not keep_samples:
            d.pop("samples_ms")
        return d

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms


def summarize(samples: Sequence[float], method: str) -> Timing:
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0]] * 3
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


class _Calls:
    """Numbers the calls of one measurement: call i always gets draw i, whatever phase it belongs to."""

    def __init__(self, work: Workload, flush: _Flusher | None):
        self.work, self.flush, self.n = work, flush, 0

    def one(self, record: bool = True) -> tuple[Any, Any] | None:
        i, slot = self.n, self.n % self.work.slots
        self.n += 1
        self.work.prepare(i, slot)
        if self.flush is not None:
            self.flush()
        if not record:
            self.work.run(slot)
            self.work.after(i, slot)
            return None
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _record(start, torch.cuda.current_stream())
        self.work.run(slot)
        _record(end, torch.cuda.current_stream())
        self.work.after(i, slot)
        return start, end


def _event_samples(calls: _Calls, reps: int) -> list[float]:
    pairs = [calls.one() for _ in range(reps)]
    _synchronize()
    return [_elapsed(a, b) for a, b in pairs]


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


def _graph_samples(calls: _Calls, reps: int) -> list[float]:
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
    samples = []
    for _ in range(reps):
        first = calls.n
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


def measure(work: Workload | Sequence[Callable[[], Any]], *, warmup_ms: float = 25.0, rep_ms: float = 200.0,
            min_reps: int = 30, max_reps: int = 2000, use_graph: bool | None = None) -> Timing:
    """Time `work` (new input values before every call) and return median/IQR/mean in ms."""
    if not isinstance(work, Workload):
        work = Workload.of(list(work))
    flush = _Flusher()
    calls = _Calls(work, flush)
    for _ in range(work.slots):
        calls.one(record=False)
    _synchronize()
    est = max(statistics.median(_event_samples(calls, 5)), 1e-4)
    n_warm = max(1, int(warmup_ms / est))
    _event_samples(calls, min(n_warm, max_reps))
    reps = int(min(max_reps, max(min_reps, rep_ms / est)))
    graph = est < GRAPH_THRESHOLD_MS if use_graph is None else use_graph
    notes: list[str] = []
    if graph:
        try:
            work.slots = GRAPH_SLOTS
            result = summarize(_graph_samples(calls, max(min_reps, 50)), "cuda_graph")
        except RuntimeError as e:  # not capturable: fall back to events, say so
            notes.append(f"CUDA graph capture failed ({str(e).splitlines()[0][:120]}); timed with events")
            work.slots = 1
            result = summarize(_event_samples(calls, reps), "events")
    else:
        result = summarize(_event_samples(calls, reps), "events")
    result.host_ratio, result.host_ms_per_call = host_ratio(work)
    result.notes = notes
    result.calls = calls.n
    del flush
    return result


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
