"""Every reply a run paid for, kept the moment it ends: `$KERNELAGENT_HOME/runs/<run>/replies.jsonl`.

One JSON line per call: turn, candidate index, the request's hash, how it ended (`complete`, `failed`,
`cancelled`), its text (and the text of attempts that broke off), tokens and dollars.
A resumed run reuses a complete reply to the same request instead of paying for it again, and the
run's spending is the sum of these lines, so a turn that failed half-way is still counted.
When the memory store can log LLM exchanges (`Store.log_exchange`), each call is mirrored there too.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from kernelagent.agent.providers.base import Block

FILE = "replies.jsonl"
TOKEN_KEYS = ("input", "output", "cache_read", "cache_write")


def request_key(model: str, system: list[Block], messages: list[dict[str, str]], max_tokens: int) -> str:
    """A hash that is equal exactly when two requests would send the same bytes of content."""
    payload = json.dumps({"model": model, "system": [b.text for b in system], "messages": messages,
                          "max_tokens": max_tokens}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


class ReplyLog:
    """Append-only log of a run's calls; safe to write from the threads of one turn."""

    def __init__(self, folder: Path, *, store: Any = None, run_id: str | None = None, provider: str = ""):
        self.path = Path(folder) / FILE
        self.store, self.run_id, self.provider = store, run_id, provider
        self._lock = threading.Lock()

    def mirror(self, record: dict[str, Any], system: list[Block], messages: list[dict[str, str]]) -> None:
        """The call as a row of the store's `exchanges` table, when the store has one."""
        log = getattr(self.store, "log_exchange", None)
        if log is None:
            return
        tokens = record.get("tokens") or {}
        try:
            log(run_id=self.run_id, turn=record["turn"], candidate_index=record["index"], provider=self.provider,
                model=record.get("model") or "", system=system, messages=messages,
                response=record.get("text") or "\n".join(record.get("partials") or []),
                input_tokens=tokens.get("input", 0), output_tokens=tokens.get("output", 0),
                cache_read_tokens=tokens.get("cache_read", 0), cache_write_tokens=tokens.get("cache_write", 0),
                cost_usd=record.get("cost_usd") or 0.0, stop_reason=record.get("stop_reason"),
                error=record.get("error"))
        except sqlite3.Error:
            pass  # the reply is safe in the run's replies.jsonl; the mirror is a convenience

    def append(self, record: dict[str, Any]) -> None:
        """Write one line and flush it to disk before returning."""
        line = json.dumps({**record, "time": time.time()}, default=str)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()

    def records(self) -> list[dict[str, Any]]:
        """Every line written so far (a line cut by a crash is skipped)."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def complete_reply(self, turn: int, index: int, key: str) -> dict[str, Any] | None:
        """A complete reply already paid for this exact call, if any."""
        for r in self.records():
            if (r.get("status") == "complete" and r.get("turn") == turn and r.get("index") == index
                    and r.get("request") == key):
                return r
        return None

    def totals(self) -> tuple[dict[str, int], float]:
        """Tokens (by kind) and dollars over every call of the run, failed ones included."""
        tokens = dict.fromkeys(TOKEN_KEYS, 0)
        usd = 0.0
        for r in self.records():
            for k in TOKEN_KEYS:
                tokens[k] += int((r.get("tokens") or {}).get(k, 0))
            usd += float(r.get("cost_usd") or 0.0)
        return tokens, usd
