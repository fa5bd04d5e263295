"""timing.measure's GPU on the CPU (tests of the measurement's order and arithmetic)."""

from __future__ import annotations


class FakeGPU:
    """timing.measure's GPU on the CPU: events read a clock that the spin, the flush and the workload
    advance; `log` keeps the order of what was queued."""

    def __init__(self, monkeypatch, spin_ms: float | None = 1.0, flush_ms: float = 0.0) -> None:  # noqa: ANN001
        import kernelagent.verifier.measure.timing as T

        self.T, self.clock, self.log = T, 0.0, []
        gpu = self

        class Ev:
            def __init__(self, enable_timing: bool = True) -> None:
                self.t = 0.0

        def record(ev, stream):  # noqa: ANN001
            ev.t = gpu.clock
            gpu.log.append("event")

        def flush() -> None:
            gpu.advance(flush_ms, "flush")

        monkeypatch.setattr(T, "_Event", Ev)
        monkeypatch.setattr(T, "_record", record)
        monkeypatch.setattr(T, "_elapsed", lambda a, b: b.t - a.t)
        monkeypatch.setattr(T, "_synchronize", lambda: None)
        monkeypatch.setattr(T, "_spin", None if spin_ms is None else (lambda cycles: self.advance(spin_ms, "spin")))
        monkeypatch.setattr(T._Spin, "_cycles_per_ms", 1e6)
        monkeypatch.setattr(T, "_Flusher", lambda: flush)
        monkeypatch.setattr(T.torch.cuda, "current_stream", lambda: None)

    def advance(self, ms: float, what: str) -> None:
        self.clock += ms
        self.log.append(what)
