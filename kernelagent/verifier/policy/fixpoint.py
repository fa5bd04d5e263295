"""Memoised recursive evaluation that survives cycles (`x = x.view(...)`, `a = b; b = a`).

A value that depends on itself is iterated at the root of its cycle until it stops growing; values
inside an unfinished cycle are kept aside as provisional and recomputed, so answers do not depend on
the order in which questions are asked.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")
_NONE = 1 << 30


class KeyedSolver(Generic[T]):
    """`get(key, compute)`: compute once per key, iterating cycles to a fixpoint."""

    def __init__(self, empty: T, max_depth: int = 60, rounds: int = 8) -> None:
        self.empty = empty
        self.max_depth = max_depth
        self.rounds = rounds
        self.memo: dict[Hashable, T] = {}
        self.partial: dict[Hashable, T] = {}
        self.stack: dict[Hashable, int] = {}
        self.hits: set[int] = set()
        self.low = _NONE
        self.provisional_uses = 0  # grows whenever an unfinished value is handed out
        self.too_deep = False

    @property
    def idle(self) -> bool:
        """No evaluation in progress: whatever was computed is final."""
        return not self.stack

    def clear(self) -> None:
        self.memo.clear()
        self.partial.clear()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        if key in self.memo:
            return self.memo[key]
        if key in self.stack:
            index = self.stack[key]
            self.hits.add(index)
            self.low = min(self.low, index)
            self.provisional_uses += 1
            return self.partial.get(key, self.empty)
        if len(self.stack) >= self.max_depth:
            self.too_deep = True
            self.provisional_uses += 1
            return self.empty
        return self._evaluate(key, compute)

    def _evaluate(self, key: Hashable, compute: Callable[[], T]) -> T:
        index = len(self.stack)
        self.stack[key] = index
        outer_low = self.low
        try:
            for _ in range(self.rounds):
                self.low = _NONE
                self.hits.discard(index)
                result = compute()
                low = self.low
                if low < index or index not in self.hits or self.partial.get(key) == result:
                    break
                self.partial[key] = result  # a cycle back to this key: go round again with what we know
        finally:
            del self.stack[key]
            self.hits.discard(index)
        if low >= index:
            self.memo[key] = result
            self.partial.pop(key, None)
            self.low = outer_low
        else:
            self.partial[key] = result
            self.low = min(outer_low, low)
        return result
