"""One timing method for candidate, eager reference and torch.compile reference (GPU only).

Each sample: flush L2 (outside the events), pick the next input set (rotation defeats caches keyed on
inputs), record events around one call. Warm-up first; repetitions until a time budget or a count;
median and interquartile range. A host-clock cross-check around a full device synchronise catches
work hidden on other streams. Under 10 us the calls are captured in a CUDA graph and replayed.
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


def _event_samples(fns: Sequence[Callable[[], Any]], reps: int, flush: _Flusher | None) -> list[float]:
    starts = [_Event(enable_timing=True) for _ in range(reps)]
    ends = [_Event(enable_timing=True) for _ in range(reps)]
    stream = torch.cuda.current_stream()
    for i in range(reps):
        if flush is not None:
            flush()
        _record(starts[i], stream)
        fns[i % len(fns)]()
        _record(ends[i], stream)
    _synchronize()
    return [_elapsed(a, b) for a, b in zip(starts, ends, strict=True)]


def _estimate_ms(fns: Sequence[Callable[[], Any]], flush: _Flusher) -> float:
    return statistics.median(_event_samples(fns, 5, flush))


def host_ratio(fns: Sequence[Callable[[], Any]], calls: int = 20) -> tuple[float, float]:
    """Host time around a full device synchronise over event time for the same block of calls.

    Events live on the current stream; work launched on another stream is invisible to them but not to
    `torch.cuda.synchronize()`, so a ratio far above 1 means hidden work.
    """
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _synchronize()
    t0 = _perf_counter()
    _record(start, torch.cuda.current_stream())
    for i in range(calls):
        fns[i % len(fns)]()
    _record(end, torch.cuda.current_stream())
    _synchronize()
    host_ms = (_perf_counter() - t0) * 1e3
    return host_ms / max(_elapsed(start, end), 1e-6), host_ms / calls


def _graph_samples(fns: Sequence[Callable[[], Any]], reps: int, per_graph: int = 20) -> list[float]:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        for i in range(3):
            fns[i % len(fns)]()
        with torch.cuda.graph(graph, stream=side):
            for i in range(per_graph):
                fns[i % len(fns)]()
    torch.cuda.current_stream().wait_stream(side)
    _synchronize()
    samples = []
    for _ in range(reps):
        a, b = _Event(enable_timing=True), _Event(enable_timing=True)
        _record(a, torch.cuda.current_stream())
        graph.replay()
        _record(b, torch.cuda.current_stream())
        _synchronize()
        samples.append(_elapsed(a, b) / per_graph)
    return samples


def measure(fns: Sequence[Callable[[], Any]], *, warmup_ms: float = 25.0, rep_ms: float = 200.0,
            min_reps: int = 30, max_reps: int = 2000, use_graph: bool | None = None) -> Timing:
    """Time `fns` (one closure per input set, called in rotation) and return median/IQR in ms."""
    flush = _Flusher()
    for f in fns:
        f()
    _synchronize()
    est = max(_estimate_ms(fns, flush), 1e-4)
    n_warm = max(1, int(warmup_ms / est))
    _event_samples(fns, min(n_warm, max_reps), flush)
    reps = int(min(max_reps, max(min_reps, rep_ms / est)))
    graph = est < GRAPH_THRESHOLD_MS if use_graph is None else use_graph
    notes: list[str] = []
    if graph:
        try:
            result = summarize(_graph_samples(fns, max(min_reps, 50)), "cuda_graph")
        except RuntimeError as e:  # not capturable: fall back to events, say so
            notes.append(f"CUDA graph capture failed ({str(e).splitlines()[0][:120]}); timed with events")
            result = summarize(_event_samples(fns, reps, flush), "events")
    else:
        result = summarize(_event_samples(fns, reps, flush), "events")
    result.host_ratio, result.host_ms_per_call = host_ratio(fns)
    result.notes = notes
    del flush
    return result


def bootstrap_speedup(baseline: Sequence[float], candidate: Sequence[float], *, iters: int = 2000,
                      seed: int = 0) -> tuple[float, float, float]:
    """Ratio of medians baseline/candidate with a 95% bootstrap interval: (point, lo, hi)."""
    b = torch.tensor(list(baseline), dtype=torch.float64)
    c = torch.tensor(list(candidate), dtype=torch.float64)
    point = float(b.median() / c.median())
    g = torch.Generator().manual_seed(seed)
    bi = torch.randint(len(b), (iters, len(b)), generator=g)
    ci = torch.randint(len(c), (iters, len(c)), generator=g)
    ratios = b[bi].median(dim=1).values / c[ci].median(dim=1).values
    lo, hi = torch.quantile(ratios, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return point, lo, hi
