"""Memoised recursive evaluation that survives cycles (`x = x.view(...)`, `a = b; b = a`).

A value that depends on itself is iterated at the root of its cycle until it stops growing. A value
inside an unfinished cycle is provisional: it is reused only while every cycle member it read is still
being evaluated in the same round (so answers do not depend on the order in which questions are asked),
and recomputed after. Work is bounded: past a budget of evaluations per check the solver gives up and
says so (`too_deep`), and the file is reported as too indirect (red team, 2026-12-03: names bound twice
to the one below, closed into a cycle, doubled the work a level; 18 levels held the policy check 30 s).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, NamedTuple, TypeVar

from kernelagent.verifier.policy import deadline

T = TypeVar("T")
_NONE = 1 << 30
# Evaluations (rounds of `compute`) one solver makes at most; the library's largest kernel needs about 6000.
MAX_WORK = 50_000


class _Provisional(NamedTuple, Generic[T]):
    value: T
    reads: frozenset[int]  # the rounds (serials) of unfinished keys the value read; valid while all are live


class KeyedSolver(Generic[T]):
    """`get(key, compute)`: compute once per key, iterating cycles to a fixpoint."""

    def __init__(self, empty: T, max_depth: int = 60, rounds: int = 8, max_work: int | None = None) -> None:
        self.empty = empty
        self.max_depth = max_depth
        self.rounds = rounds
        self.max_work = MAX_WORK if max_work is None else max_work
        self.work = 0  # evaluations made so far (never reset: the budget is per check)
        self.memo: dict[Hashable, T] = {}
        self.partial: dict[Hashable, T] = {}
        self.provisional: dict[Hashable, _Provisional[T]] = {}
        self.stack: dict[Hashable, int] = {}
        self.serials: list[int] = []  # the serial of each stack entry's current round
        self._next_serial = 0
        self.hits: set[int] = set()
        self.low = _NONE
        self.provisional_uses = 0  # grows whenever an unfinished value is handed out
        self.too_deep = False

    @property
    def idle(self) -> bool:
        """No evaluation in progress: whatever was computed is final."""
        return not self.stack

    @property
    def exhausted(self) -> bool:
        """The work budget ran out: some answers were cut short."""
        return self.work >= self.max_work

    def clear(self) -> None:
        self.memo.clear()
        self.partial.clear()
        self.provisional.clear()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        if key in self.memo:
            return self.memo[key]
        if key in self.stack:
            self._read(self.stack[key])
            return self.partial.get(key, self.empty)
        kept = self.provisional.get(key)
        if kept is not None and self._still_valid(kept):
            return kept.value
        if len(self.stack) >= self.max_depth or self.work >= self.max_work:
            self.too_deep = True
            self.provisional_uses += 1
            return self.empty
        return self._evaluate(key, compute)

    def _read(self, index: int) -> None:
        """An unfinished value (the stack entry at `index`) was handed out."""
        self.hits.add(index)
        self.low = min(self.low, index)
        self.provisional_uses += 1

    def _still_valid(self, kept: _Provisional[T]) -> bool:
        """A provisional value holds while the rounds it read are the current rounds of keys on the stack;
        reusing it reads those keys again."""
        live = {serial: index for index, serial in enumerate(self.serials)}
        if not kept.reads or not kept.reads <= live.keys():
            return False
        for serial in kept.reads:
            self._read(live[serial])
        return True

    def _evaluate(self, key: Hashable, compute: Callable[[], T]) -> T:
        deadline.check()
        index = len(self.stack)
        self.stack[key] = index
        self.serials.append(-1)
        outer_low = self.low
        try:
            for _ in range(self.rounds):
                self.low = _NONE
                self.hits.discard(index)
                self.serials[index] = self._next_serial
                self._next_serial += 1
                self.work += 1
                result = compute()
                low = self.low
                if low < index or index not in self.hits or self.partial.get(key) == result:
                    break
                self.partial[key] = result  # a cycle back to this key: go round again with what we know
            reads = frozenset(self.serials[i] for i in self.hits if i < index)
        finally:
            del self.stack[key]
            self.serials.pop()
            self.hits.discard(index)
        if low >= index:
            self.memo[key] = result
            self.partial.pop(key, None)
            self.provisional.pop(key, None)
            self.low = outer_low
        else:
            self.partial[key] = result
            self.provisional[key] = _Provisional(result, reads)
            self.low = min(outer_low, low)
        return result
