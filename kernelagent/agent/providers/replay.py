"""Plays a recorded JSONL script instead of calling a model: one line per expected call.

Line format: {"text": "...", "input_tokens": 10, "output_tokens": 20, "cost_usd": 0.0, "stop_reason": "end_turn",
"expect_contains": ["..."]}; every string in `expect_contains` must occur in the prompt of that call.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from kernelagent.agent.errors import ReplayError
from kernelagent.agent.providers.base import Block, CallHooks, Completion, prompt_text


def load_script(path: str | Path) -> list[dict]:
    """The script's lines as dicts; blank lines are skipped, bad JSON names its line."""
    lines = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ReplayError(f"replay script {path}, line {n}: not JSON ({error.msg})") from error
    return lines


class ReplayProvider:
    """Answers call i with line i of the script; calls are served one at a time, in order."""

    name = "replay"
    max_concurrency = 1

    def __init__(self, script: list[dict], *, model: str = "replay", source: str = "<script>"):
        self.script, self.model, self.source = script, model, source
        self.calls = 0
        self._lock = threading.Lock()

    def check_model(self) -> None:
        """Nothing to check: a script has no model list."""

    @classmethod
    def from_file(cls, path: str | Path, model: str = "replay") -> ReplayProvider:
        return cls(load_script(path), model=model, source=str(path))

    def complete(self, system: list[Block], messages: list[dict[str, str]], *, max_tokens: int,
                 hooks: CallHooks | None = None) -> Completion:
        """The next scripted reply; raises ReplayError when the script is spent or an expectation fails."""
        with self._lock:
            if self.calls >= len(self.script):
                raise ReplayError(f"replay script {self.source} has {len(self.script)} lines; "
                                  f"call {self.calls + 1} asked for one more")
            line, self.calls = self.script[self.calls], self.calls + 1
        prompt = prompt_text(system, messages)
        missing = [s for s in line.get("expect_contains", []) if s not in prompt]
        if missing:
            raise ReplayError(f"replay script {self.source}, call {self.calls}: the prompt lacks {missing!r}")
        if hooks is not None:
            hooks.streamed(line.get("text", ""))
        return Completion(text=line.get("text", ""), input_tokens=int(line.get("input_tokens", 0)),
                          output_tokens=int(line.get("output_tokens", 0)),
                          cost_usd=float(line.get("cost_usd", 0.0)),
                          raw_stop_reason=line.get("stop_reason", "end_turn"),
                          model=self.model)
