"""A rich live view of a run, fed by the graph's progress events (the nodes never print).

    with LiveView(console) as view:
        optimize(problem, config, deps, progress=view)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

ROWS = 12  # latest candidates shown
STYLES = {"accepted": "green", "rejected": "red"}


class ProgressState:
    """What the view shows, updated event by event (kept apart from rendering so it can be tested)."""

    def __init__(self) -> None:
        self.info: dict[str, Any] = {}
        self.turn, self.turns, self.best = 0, 0, None
        self.tokens: dict[str, int] = {}
        self.cost, self.stop, self.accepted = 0.0, None, False
        self.rows: dict[tuple[int, int], dict[str, Any]] = {}

    def update(self, e: dict[str, Any]) -> None:
        kind = e.get("event")
        if kind == "start":
            self.info = e
            self.turns = e.get("turns", 0)
        elif kind == "turn":
            self.turn, self.turns = e["turn"], e.get("turns", self.turns)
        elif kind in ("proposed", "verified"):
            self.rows.setdefault((e["turn"], e["index"]), {}).update(e)
        elif kind == "selected":
            self.best, self.accepted = e.get("best_speedup"), e.get("accepted", False)
            self.tokens, self.cost, self.stop = e.get("tokens") or {}, e.get("cost_usd", 0.0), e.get("stop")
        elif kind == "done":
            self.stop = e.get("status")

    def headline(self) -> str:
        budget = self.info.get("budget_usd")
        best = f"{self.best:.2f}x" if self.best is not None else ("accepted" if self.accepted else "–")
        tokens = f"{self.tokens.get('input', 0)} in / {self.tokens.get('output', 0)} out"
        return (f"run {self.info.get('run_id', '?')} · {self.info.get('model', '')} · "
                f"turn {self.turn}/{self.turns} · best {best} · tokens {tokens} · ${self.cost:.3f}"
                + (f" of ${budget:.2f}" if budget else "") + (f" · stop: {self.stop}" if self.stop else ""))


def render(state: ProgressState) -> Group:
    """The headline and a table of the latest candidates."""
    table = Table(expand=False, box=None, pad_edge=False)
    for col in ("turn", "cand", "verdict", "category", "ms", "speedup", "message"):
        table.add_column(col, justify="right" if col in ("turn", "cand", "ms", "speedup") else "left")
    for (turn, index), r in sorted(state.rows.items())[-ROWS:]:
        verdict = r.get("verdict") or ("…" if r.get("ok") else "none")
        table.add_row(str(turn), str(index), Text(verdict, style=STYLES.get(verdict, "")),
                      r.get("category") or r.get("error") or "",
                      f"{r['candidate_ms']:.3g}" if r.get("candidate_ms") is not None else "",
                      f"{r['speedup']:.2f}x" if r.get("speedup") is not None else "",
                      (r.get("message") or "")[:70])
    return Group(Text(state.headline(), style="bold"), table)


class LiveView:
    """Callable progress sink that redraws a rich Live display on every event."""

    def __init__(self, console: Console | None = None, on_event: Callable[[dict], None] | None = None):
        self.state = ProgressState()
        self.console = console or Console(stderr=True)
        self.on_event = on_event
        self._live = Live(render(self.state), console=self.console, auto_refresh=False, transient=False)
        self._lock = threading.Lock()  # events come from the propose and verify worker threads

    def __enter__(self) -> LiveView:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()

    def __call__(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.state.update(event)
            self._live.update(render(self.state), refresh=True)
        if self.on_event is not None:
            self.on_event(event)
