"""LLM providers behind one interface, and `make_provider`, which picks and configures one."""

from __future__ import annotations

import os
from pathlib import Path

from kernelagent.agent.config import CONFIG_FILE, PROVIDERS, home_dir, resolve_provider
from kernelagent.agent.errors import ProviderNotConfigured, SetupError
from kernelagent.agent.providers.base import Block, CallHooks, Completion, Provider, RetryPolicy
from kernelagent.agent.providers.prices import Price

__all__ = ["Block", "CallHooks", "Completion", "Provider", "RetryPolicy", "make_provider", "not_configured_message"]


def not_configured_message(reason: str, home: str | Path | None = None) -> str:
    """The exact steps that configure a provider, after a one-line reason."""
    cfg = home_dir(home) / CONFIG_FILE
    return (
        f"{reason}\n"
        "Configure one of:\n"
        "  * Anthropic (the default): export ANTHROPIC_API_KEY=sk-ant-...\n"
        "      optional: ANTHROPIC_BASE_URL for a gateway; --model M or KERNELAGENT_MODEL=M\n"
        "  * an OpenAI-compatible server (vLLM, Ollama, llama.cpp):\n"
        "      --provider openai --base-url http://localhost:8000/v1 --model NAME\n"
        "      or export OPENAI_BASE_URL=http://localhost:8000/v1 (and OPENAI_API_KEY if it needs one)\n"
        "  * a recorded script: --provider replay with KERNELAGENT_REPLAY_SCRIPT=path.jsonl\n"
        "Choose the provider with --provider or KERNELAGENT_PROVIDER, or save it in "
        f"{cfg}:\n"
        "  [provider]\n"
        '  name = "openai"\n'
        '  model = "NAME"\n'
        '  base_url = "http://localhost:8000/v1"'
    )


def make_provider(name: str | None = None, model: str | None = None, base_url: str | None = None, *,
                  api_key: str | None = None, script: str | None = None, stream: bool = True,
                  retry: RetryPolicy | None = None, home: str | Path | None = None,
                  thinking_budget: int | None = None, price: Price | None = None) -> Provider:
    """A ready provider from flags (None = not given), env and config file.

    Raises ProviderNotConfigured, whose message says how to configure one, when credentials or the
    server address are missing. `thinking_budget` (Anthropic only) turns on extended thinking.
    """
    s = resolve_provider(name, model, base_url, home=home)
    if s.name not in PROVIDERS:
        raise ProviderNotConfigured(not_configured_message(
            f"Unknown provider {s.name!r}; choose one of {', '.join(PROVIDERS)}.", home))
    if thinking_budget and s.name != "anthropic":
        raise SetupError(f"--thinking-budget applies to the anthropic provider only, not {s.name}")
    if s.name == "anthropic":
        return _anthropic(s.model or "", s.base_url, api_key, stream, retry, home, thinking_budget, price)
    if s.name == "openai":
        return _openai(s.model, s.base_url, api_key, stream, retry, home, price)
    return _replay(script or s.base_url, s.model or "replay", home)


def _anthropic(model: str, base_url: str | None, api_key: str | None, stream: bool,
               retry: RetryPolicy | None, home: str | Path | None, thinking_budget: int | None,
               price: Price | None) -> Provider:
    from kernelagent.agent.providers.anthropic import make_anthropic

    provider = make_anthropic(model, base_url, api_key=api_key, stream=stream, retry=retry,
                              thinking_budget=thinking_budget, price=price)
    if isinstance(provider, str):
        raise ProviderNotConfigured(not_configured_message(provider, home))
    return provider


def _openai(model: str | None, base_url: str | None, api_key: str | None, stream: bool,
            retry: RetryPolicy | None, home: str | Path | None, price: Price | None) -> Provider:
    from kernelagent.agent.providers.openai import OPENAI_URL, OpenAIProvider

    api_key = api_key or os.environ.get("OPENAI_API_KEY")
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or (OPENAI_URL if api_key else None)
    if not base_url:
        raise ProviderNotConfigured(not_configured_message(
            "The openai provider needs a server: no --base-url, OPENAI_BASE_URL or OPENAI_API_KEY.", home))
    if base_url == OPENAI_URL and not model:
        raise ProviderNotConfigured(not_configured_message(
            "The openai provider needs a model for api.openai.com: pass --model or KERNELAGENT_MODEL.", home))
    return OpenAIProvider(model, base_url, api_key=api_key, stream=stream, retry=retry, price=price)


def _replay(script: str | None, model: str, home: str | Path | None) -> Provider:
    from kernelagent.agent.providers.replay import ReplayProvider

    script = script or os.environ.get("KERNELAGENT_REPLAY_SCRIPT")
    if not script or not Path(script).is_file():
        raise ProviderNotConfigured(not_configured_message(
            f"The replay provider needs a script file; {script!r} is not one "
            "(set KERNELAGENT_REPLAY_SCRIPT or pass the path as --base-url).", home))
    return ReplayProvider.from_file(script, model=model)
