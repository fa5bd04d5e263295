"""Dollars per million tokens for the models we know, in one table.

A model outside the table has no price: `resolve_price` refuses it unless the user gives one
(`--price-in/--price-out`, dollars per million tokens; 0 for a local server), so a budget always binds.

A model name matches the longest key it starts with, so dated or suffixed names
(claude-sonnet-4-5-20250929, claude-opus-5-5[1m]) resolve. List prices from the providers' pricing
pages (Anthropic: input, output, 5-minute cache write, cache hit); batch discounts do not apply here.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelagent.agent.errors import UnknownPrice


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_write: float
    cache_read: float
    long_prompt: int | None = None  # prompts above this many tokens pay every rate times long_factor
    long_factor: float = 1.0


def _claude(inp: float, out: float, read: float | None = None) -> Price:
    return Price(inp, out, cache_write=inp * 1.25, cache_read=inp * 0.1 if read is None else read)


def _openai(inp: float, out: float, cached: float) -> Price:
    return Price(inp, out, cache_write=inp, cache_read=cached)


PRICES: dict[str, Price] = {
    "claude-fable-5-1": _claude(10.0, 50.0, read=0.25),
    "claude-mythos-5-1": _claude(10.0, 50.0, read=0.25),
    "claude-fable-5": _claude(10.0, 50.0),
    "claude-mythos-5": _claude(10.0, 50.0),
    "claude-opus-5-5": _claude(4.0, 20.0, read=0.20),
    "claude-opus-5": _claude(5.0, 25.0),
    "claude-opus-4-8": _claude(5.0, 25.0),
    "claude-opus-4-7": _claude(5.0, 25.0),
    "claude-opus-4-6": _claude(5.0, 25.0),
    "claude-opus-4-5": _claude(5.0, 25.0),
    "claude-opus-4-1": _claude(15.0, 75.0),
    "claude-opus-4": _claude(15.0, 75.0),
    "claude-sonnet-5-5": _claude(2.0, 10.0, read=0.10),
    "claude-sonnet-5": _claude(2.0, 10.0),
    "claude-sonnet-4": _claude(3.0, 15.0),  # 4, 4.5 and 4.6
    "claude-haiku-5-5": Price(0.10, 0.50, 0.125, 0.01, long_prompt=100_000, long_factor=5.0),
    "claude-haiku-4-5": _claude(1.0, 5.0),
    "claude-3-5-haiku": _claude(0.8, 4.0),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5": _openai(1.25, 10.0, 0.125),
    "gpt-4.1-mini": _openai(0.4, 1.6, 0.1),
    "gpt-4.1": _openai(2.0, 8.0, 0.5),
    "gpt-4o-mini": _openai(0.15, 0.6, 0.075),
    "gpt-4o": _openai(2.5, 10.0, 1.25),
    "o4-mini": _openai(1.1, 4.4, 0.275),
    "o3": _openai(2.0, 8.0, 0.5),
}
FREE = Price(0.0, 0.0, 0.0, 0.0)


def price_for(model: str) -> Price | None:
    """The price of `model` (longest matching prefix), or None when the model is not in the table."""
    keys = [k for k in PRICES if model.lower().startswith(k)]
    return PRICES[max(keys, key=len)] if keys else None


def resolve_price(model: str, price_in: float | None = None, price_out: float | None = None) -> Price:
    """The price to bill `model` at: the user's (both flags given) over the table's; UnknownPrice otherwise."""
    if (price_in is None) != (price_out is None):
        raise UnknownPrice("give both --price-in and --price-out (dollars per million tokens), or neither")
    if price_in is not None and price_out is not None:
        if price_in < 0 or price_out < 0:
            raise UnknownPrice("--price-in and --price-out must not be negative")
        return Price(price_in, price_out, cache_write=price_in * 1.25, cache_read=price_in * 0.1)
    known = price_for(model)
    if known is None:
        raise UnknownPrice(f"no price is known for model {model!r}, so the dollar budget could not be kept; "
                           "pass --price-in and --price-out (dollars per million tokens; 0 0 for a local server)")
    return known


def worst_case_usd(price: Price, input_tokens: int, max_output_tokens: int) -> float:
    """The most one call can cost: every input token at the dearer of input and cache-write, full output."""
    rate_in = max(price.input, price.cache_write)
    total = input_tokens * rate_in + max_output_tokens * price.output
    factor = price.long_factor if price.long_prompt is not None and input_tokens > price.long_prompt else 1.0
    return total * factor / 1e6


def cost_usd(model: str, *, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0,
             cache_write_tokens: int = 0, price: Price | None = None) -> float:
    """Dollars for one call at `price` (else the table's; $0 for a model outside it); input is uncached."""
    p = price or price_for(model) or FREE
    total = (input_tokens * p.input + output_tokens * p.output + cache_read_tokens * p.cache_read
             + cache_write_tokens * p.cache_write)
    prompt = input_tokens + cache_read_tokens + cache_write_tokens
    factor = p.long_factor if p.long_prompt is not None and prompt > p.long_prompt else 1.0
    return total * factor / 1e6
