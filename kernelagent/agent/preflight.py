"""Checks made before the first paid call: the backend's packages, the model, its price, the limits.

Each failure is a `SetupError` whose message says what to do; the CLI turns it into one line and exit 2.
"""

from __future__ import annotations

import importlib.util

from kernelagent.agent.config import OptimizeConfig
from kernelagent.agent.errors import MissingExtra, SetupError
from kernelagent.agent.providers.base import Provider
from kernelagent.agent.providers.prices import FREE, Price, resolve_price

BACKEND_MODULES = {"cute": ("cutlass", "cuda")}   # top-level modules the CuTe DSL needs
MIN_THINKING = 1024                                 # the Messages API's smallest thinking budget


def check_backend(backend: str) -> None:
    """MissingExtra when the backend's packages are not installed (found without importing them)."""
    missing = [m for m in BACKEND_MODULES.get(backend, ()) if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtra(f"--backend {backend} needs the CuTe DSL (missing module(s): {', '.join(missing)}); "
                           "install it with `pip install 'kernelagent[cute]'` (nvidia-cutlass-dsl)")


def check_limits(config: OptimizeConfig) -> None:
    """SetupError for limits the API would refuse or that leave no room for an answer."""
    if config.thinking_budget is not None and config.thinking_budget < MIN_THINKING:
        raise SetupError(f"--thinking-budget must be at least {MIN_THINKING} tokens")
    if config.max_output_tokens < 1:
        raise SetupError("--max-output-tokens must be at least 1")


def price_of(provider: Provider, config: OptimizeConfig) -> Price:
    """The price calls are billed at; free for a replayed script unless a price is given."""
    if provider.name == "replay" and config.price_in is None:
        return FREE
    return resolve_price(provider.model, config.price_in, config.price_out)


def preflight(provider: Provider, config: OptimizeConfig) -> Price:
    """Everything checkable before spending: packages, limits, the model (asking the provider), the price."""
    check_backend(config.backend)
    check_limits(config)
    check = getattr(provider, "check_model", None)
    if check is not None:
        check()
    return price_of(provider, config)
