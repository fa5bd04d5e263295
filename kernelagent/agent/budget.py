"""The run's spending, checked before money is spent: each call first reserves its worst case.

Worst case of one call = its input (estimated generously from the characters sent, at the dearer of the
input and cache-write rates) plus `max_tokens` of output, at the model's price. A call whose worst case
would pass the dollar or token limit is not made. Reservations are settled with what the call really cost.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kernelagent.agent.providers.prices import Price, worst_case_usd

CHARS_PER_TOKEN = 3  # fewer characters per token than real text or code have, so the estimate runs high


def estimate_tokens(chars: int) -> int:
    """A generous token count for `chars` characters of prompt."""
    return chars // CHARS_PER_TOKEN + 1


@dataclass(frozen=True)
class Limits:
    """Budgets of a run; None means no limit of that kind."""

    usd: float | None = None
    tokens: int | None = None
    gpu_seconds: float | None = None


@dataclass
class Reservation:
    usd: float
    tokens: int


class Ledger:
    """Dollars and tokens spent and reserved; thread-safe, since a turn's calls run in parallel."""

    def __init__(self, limits: Limits, price: Price, spent_usd: float = 0.0, spent_tokens: int = 0):
        self.limits, self.price = limits, price
        self.spent_usd, self.spent_tokens = spent_usd, spent_tokens
        self.reserved_usd, self.reserved_tokens = 0.0, 0
        self.refused = 0
        self._lock = threading.Lock()

    def worst_case(self, prompt_chars: int, max_tokens: int) -> Reservation:
        tokens_in = estimate_tokens(prompt_chars)
        return Reservation(worst_case_usd(self.price, tokens_in, max_tokens), tokens_in + max_tokens)

    def reserve(self, prompt_chars: int, max_tokens: int) -> Reservation | None:
        """Hold the worst case of one call, or None (and count a refusal) when it would pass a limit."""
        want = self.worst_case(prompt_chars, max_tokens)
        with self._lock:
            if not self._fits(want):
                self.refused += 1
                return None
            self.reserved_usd += want.usd
            self.reserved_tokens += want.tokens
            return want

    def settle(self, held: Reservation, usd: float, tokens: int) -> None:
        """Replace a reservation by what the call cost (also for a call that failed after being paid)."""
        with self._lock:
            self.reserved_usd -= held.usd
            self.reserved_tokens -= held.tokens
            self.spent_usd += usd
            self.spent_tokens += tokens

    def fits(self, prompt_chars: int, max_tokens: int) -> bool:
        """True when one more call of this size could be made now."""
        with self._lock:
            return self._fits(self.worst_case(prompt_chars, max_tokens))

    def _fits(self, want: Reservation) -> bool:
        usd, tokens = self.limits.usd, self.limits.tokens
        if usd is not None and self.spent_usd + self.reserved_usd + want.usd > usd:
            return False
        return tokens is None or self.spent_tokens + self.reserved_tokens + want.tokens <= tokens


def gpu_seconds_left(limits: Limits, used: float) -> float | None:
    """Verifier seconds still allowed (None: no limit)."""
    return None if limits.gpu_seconds is None else max(0.0, limits.gpu_seconds - used)
