"""A rich live view of a run, fed by the graph's progress events (the nodes never print).

    with LiveView(console) as view:
        optimize(problem, config, deps, progress=view)

It redraws a few times a second, so the elapsed time, the tokens being streamed, retries and the
current stage move during a long generation or a back-off; it always ends with a newline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kernelagent.agent.text import strip_ansi

ROWS = 12  # latest candidates shown
STYLES = {"accepted": "green", "unverified": "yellow", "rejected": "red"}
CHARS_PER_TOKEN = 4  # streamed text is counted in characters; shown as approximate tokens


class ProgressState:
    """What the view shows, updated event by event (kept apart from rendering so it can be tested)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.info: dict[str, Any] = {}
        self.turn, self.turns, self.best = 0, 0, None
        self.tokens: dict[str, int] = {}
        self.cost, self.stop, self.accepted = 0.0, None, False
        self.stage, self.retries, self.last_retry = "starting", 0, ""
        self.streamed: dict[tuple[int, int], int] = {}
        self.rows: dict[tuple[int, int], dict[str, Any]] = {}

    def update(self, e: dict[str, Any]) -> None:
        kind = e.get("event")
        if kind == "start":
            self.info, self.turns, self.started = e, e.get("turns", 0), self.clock()
        elif kind == "turn":
            self.turn, self.turns = e["turn"], e.get("turns", self.turns)
        elif kind == "stage":
            self.stage = e.get("stage", "")
        elif kind == "stream":
            self.streamed[(e["turn"], e["index"])] = e.get("chars", 0)
        elif kind == "retry":
            self.retries += 1
            wait = e.get("wait")
            self.last_retry = strip_ansi(str(e.get("reason", "")))[:60] + (f", next try in {wait:.0f} s"
                                                                          if wait else "")
        elif kind in ("proposed", "verified"):
            self.rows.setdefault((e["turn"], e["index"]), {}).update(e)
        elif kind == "selected":
            self.best, self.accepted = e.get("best_speedup"), e.get("accepted", False)
            self.tokens, self.cost, self.stop = e.get("tokens") or {}, e.get("cost_usd", 0.0), e.get("stop")
        elif kind in ("done", "stopped"):
            self.stop = e.get("status")
            self.stage = "finished" if kind == "done" else e.get("status", "stopped")

    def elapsed(self) -> str:
        s = int(self.clock() - self.started)
        return f"{s // 60}:{s % 60:02d}"

    def streamed_tokens(self) -> int:
        """About how many tokens the current turn's calls have streamed so far."""
        return sum(n for (turn, _), n in self.streamed.items() if turn == self.turn) // CHARS_PER_TOKEN

    def headline(self) -> str:
        budget = self.info.get("budget_usd")
        best = f"{self.best:.2f}x" if self.best is not None else ("accepted" if self.accepted else "–")
        tokens = f"{self.tokens.get('input', 0)} in / {self.tokens.get('output', 0)} out"
        return (f"run {self.info.get('run_id', '?')} · {self.info.get('model', '')} · {self.elapsed()} · "
                f"turn {self.turn}/{self.turns} · best {best} · tokens {tokens} · ${self.cost:.3f}"
                + (f" of ${budget:.2f}" if budget else "") + (f" · stop: {self.stop}" if self.stop else ""))

    def status_line(self) -> str:
        line = f"{self.stage} · ~{self.streamed_tokens()} tokens streamed this turn · retries {self.retries}"
        return line + (f" (last: {self.last_retry})" if self.last_retry else "")


def render(state: ProgressState) -> Group:
    """The headline, the current stage and a table of the latest candidates."""
    table = Table(expand=False, box=None, pad_edge=False)
    for col in ("turn", "cand", "verdict", "category", "ms", "speedup", "message"):
        table.add_column(col, justify="right" if col in ("turn", "cand", "ms", "speedup") else "left")
    for (turn, index), r in sorted(state.rows.items())[-ROWS:]:
        verdict = r.get("verdict") or ("…" if r.get("ok") else "none")
        table.add_row(str(turn), str(index), Text(verdict, style=STYLES.get(verdict, "")),
                      r.get("category") or r.get("error") or "",
                      f"{r['candidate_ms']:.3g}" if r.get("candidate_ms") is not None else "",
                      f"{r['speedup']:.2f}x" if r.get("speedup") is not None else "",
                      strip_ansi(r.get("message") or "")[:70])
    return Group(Text(state.headline(), style="bold"), Text(state.status_line(), style="dim"), table)


class LiveView:
    """Callable progress sink over a rich Live display that refreshes on its own a few times a second."""

    def __init__(self, console: Console | None = None, on_event: Callable[[dict], None] | None = None,
                 refresh_per_second: float = 4.0):
        self.state = ProgressState()
        self.console = console or Console(stderr=True)
        self.on_event = on_event
        self._lock = threading.Lock()  # events come from the call and verify worker threads
        self._live = Live(console=self.console, get_renderable=self._renderable, transient=False,
                          auto_refresh=self.console.is_terminal, refresh_per_second=refresh_per_second)

    def _renderable(self) -> Group:
        with self._lock:
            return render(self.state)

    def __enter__(self) -> LiveView:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()
        if not self.console.is_terminal:
            self.console.file.write("\n")  # rich leaves the last frame without one off a terminal
            self.console.file.flush()

    def __call__(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.state.update(event)
        if self.console.is_terminal and event.get("event") != "stream":
            self._live.refresh()  # streamed text shows at the next automatic refresh
        if self.on_event is not None:
            self.on_event(event)
