"""A GPU gate that logs every hold, as it is had and before it is given back (inside the real hold), for
the session tests on CPU and on the GPU."""

from __future__ import annotations

import threading
from pathlib import Path

from kernelagent.tools.session import GpuGate


class LoggedGate(GpuGate):
    """Logs ("EX"|"SH", +1 taken / -1 given)."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.log: list[tuple[str, int]] = []
        self._kinds: dict[int, str] = {}
        self._guard = threading.Lock()

    def take(self, shared: bool = False, give_up=None) -> int:  # noqa: ANN001 - GpuGate.take's own
        fd = super().take(shared, give_up)
        if fd < 0:
            return fd
        with self._guard:
            self._kinds[fd] = "SH" if shared else "EX"
            self.log.append((self._kinds[fd], 1))
        return fd

    def give(self, fd: int) -> None:
        if fd >= 0:
            with self._guard:
                self.log.append((self._kinds.pop(fd), -1))
        super().give(fd)

    def holding(self) -> dict[str, int]:
        with self._guard:
            return {k: sum(d for kind, d in self.log if kind == k) for k in ("SH", "EX")}
