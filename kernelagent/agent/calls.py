"""One turn's LLM calls: budget reserved first, run in parallel, each reply logged the moment it ends.

Calls run in daemon threads and the caller waits in short, interruptible slices, so Ctrl-C cancels every
call at once (open streams are closed, back-off sleeps end) and the text that had arrived is logged as
`cancelled` before KeyboardInterrupt goes on; the process never waits for a stalled stream to finish.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any

from kernelagent.agent.budget import Ledger, Reservation, estimate_tokens
from kernelagent.agent.errors import ProviderCancelled, ProviderError
from kernelagent.agent.providers.base import Block, CallHooks, Completion, Provider
from kernelagent.agent.providers.prices import FREE, cost_usd
from kernelagent.agent.replies import ReplyLog

WAIT_SLICE = 0.2  # seconds the caller blocks at a time, so Ctrl-C is handled at once
CHARS_PER_OUTPUT_TOKEN = 4


@dataclass
class Call:
    """One planned call of a turn and, once it ends, what came of it."""

    turn: int
    index: int
    messages: list[dict[str, str]]
    key: str
    reused: dict[str, Any] | None = None       # a complete reply from the log (a resumed turn)
    held: Reservation | None = None
    skipped: bool = False                     # not made: its worst case would pass the budget
    completion: Completion | None = None
    error: BaseException | None = None
    record: dict[str, Any] | None = None
    hooks: CallHooks = field(default_factory=CallHooks)
    lock: threading.Lock = field(default_factory=threading.Lock)


def prompt_chars(system: list[Block], messages: list[dict[str, str]]) -> int:
    return sum(len(b.text) for b in system) + sum(len(m["content"]) for m in messages)


def reserve_all(calls: list[Call], system: list[Block], ledger: Ledger, max_tokens: int) -> None:
    """Reserve each new call's worst case, in order; those that do not fit are skipped, never made."""
    for c in calls:
        if c.reused is None:
            c.held = ledger.reserve(prompt_chars(system, c.messages), max_tokens)
            c.skipped = c.held is None


def run_calls(provider: Provider, system: list[Block], calls: list[Call], *, max_tokens: int, ledger: Ledger,
              log: ReplyLog, emit: Any) -> None:
    """Make the calls that are neither reused nor skipped; fill in `completion`/`error` and `record`."""
    todo = [c for c in calls if c.reused is None and not c.skipped]
    done: queue.Queue[int] = queue.Queue()
    gate = threading.Semaphore(max(1, provider.max_concurrency))
    pending = {c.index for c in todo}
    try:
        for c in todo:
            c.hooks.on_event = _relay(emit, c)
            threading.Thread(target=_work, args=(provider, system, c, max_tokens, ledger, log, gate, done),
                             name=f"llm-t{c.turn}c{c.index}", daemon=True).start()
        while pending:
            try:
                pending.discard(done.get(timeout=WAIT_SLICE))
            except queue.Empty:
                continue
    except KeyboardInterrupt:
        for c in todo:
            c.hooks.cancel()
        for c in todo:
            _close(c, ledger, log, provider, ProviderCancelled("interrupted (Ctrl-C)"), system=system)
        raise


def _relay(emit: Any, c: Call) -> Any:
    return lambda e: emit(e.pop("event"), turn=c.turn, index=c.index, **e)


def _work(provider: Provider, system: list[Block], c: Call, max_tokens: int, ledger: Ledger, log: ReplyLog,
          gate: threading.Semaphore, done: queue.Queue[int]) -> None:
    error: BaseException | None = None
    completion = None
    try:
        with gate:
            c.hooks.check()
            completion = provider.complete(system, c.messages, max_tokens=max_tokens, hooks=c.hooks)
    except ProviderError as e:
        error = e
    except Exception as e:  # noqa: BLE001 - a provider bug must not kill the turn silently; it is logged
        error = ProviderError(f"the provider failed: {type(e).__name__}: {e}")
    finally:
        _close(c, ledger, log, provider, error, completion, system=system)
        done.put(c.index)  # always, so the caller never waits for a thread that died


def _close(c: Call, ledger: Ledger, log: ReplyLog, provider: Provider, error: BaseException | None,
           completion: Completion | None = None, *, system: list[Block]) -> None:
    """Log the call's outcome and settle its reservation, exactly once (the worker or Ctrl-C, first wins)."""
    with c.lock:
        if c.record is not None:
            return
        c.completion, c.error = completion, error
        c.record = _record(c, ledger, provider, error, completion)
        log.append(c.record)
        log.mirror(c.record, system, c.messages)
        if c.held is not None:
            ledger.settle(c.held, c.record["cost_usd"], sum(c.record["tokens"].values()))


def _record(c: Call, ledger: Ledger, provider: Provider, error: BaseException | None,
            completion: Completion | None) -> dict[str, Any]:
    """The reply log's line for a finished call: its text, the text that broke off, tokens and dollars."""
    tokens, usd = _partial_cost(c, ledger, provider, failed=completion is None)
    estimated = bool(usd or tokens["output"])
    if completion is not None:
        for k, v in (("input", completion.input_tokens), ("output", completion.output_tokens),
                     ("cache_read", completion.cache_read_tokens), ("cache_write", completion.cache_write_tokens)):
            tokens[k] += v
        usd += _cost(completion, ledger)
    status = "complete" if completion else ("cancelled" if isinstance(error, ProviderCancelled) else "failed")
    return {"turn": c.turn, "index": c.index, "request": c.key, "status": status,
            "text": completion.text if completion else "", "partials": _partials(c, completion is None),
            "stop_reason": completion.raw_stop_reason if completion else None,
            "error": str(error) if error else None, "retries": c.hooks.retries, "tokens": tokens,
            "cost_usd": usd, "estimated": estimated, "model": completion.model if completion else provider.model}


def _cost(done: Completion, ledger: Ledger) -> float:
    """Dollars of a reply at the run's price (the provider's own figure when the run has none, e.g. replay)."""
    if ledger.price == FREE:
        return done.cost_usd
    return cost_usd(done.model, input_tokens=done.input_tokens, output_tokens=done.output_tokens,
                    cache_read_tokens=done.cache_read_tokens, cache_write_tokens=done.cache_write_tokens,
                    price=ledger.price)


def _partials(c: Call, failed: bool) -> list[str]:
    texts = list(c.hooks.partials) + ([c.hooks.text()] if failed and c.hooks.text() else [])
    return [t for t in texts if t]


def _partial_cost(c: Call, ledger: Ledger, provider: Provider, *, failed: bool) -> tuple[dict[str, int], float]:
    """Tokens and dollars of attempts that broke off (estimated: their usage never arrived)."""
    out_tokens = sum(len(t) for t in _partials(c, failed)) // CHARS_PER_OUTPUT_TOKEN
    in_tokens = c.hooks.input_tokens if (failed and c.hooks.input_tokens) else 0
    if failed and not in_tokens and out_tokens:
        in_tokens = estimate_tokens(sum(len(m["content"]) for m in c.messages))
    tokens = {"input": in_tokens, "output": out_tokens, "cache_read": 0, "cache_write": 0}
    usd = cost_usd(provider.model, input_tokens=in_tokens, output_tokens=out_tokens, price=ledger.price)
    return tokens, usd
