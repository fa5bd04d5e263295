"""Settings of an optimisation run and of the LLM provider, with one precedence rule:
flag > environment (KERNELAGENT_PROVIDER, KERNELAGENT_MODEL, KERNELAGENT_BASE_URL) >
`$KERNELAGENT_HOME/config.toml` ([provider] name, model, base_url) > defaults below.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from kernelagent.memory.store import default_home

DEFAULT_PROVIDER = "anthropic"
DEFAULT_MODELS = {"anthropic": "claude-sonnet-5-5", "replay": "replay"}  # the one place to change it
DEFAULT_BUDGET_USD = 5.0
PROVIDERS = ("anthropic", "openai", "replay")
CONFIG_FILE = "config.toml"


@dataclass
class OptimizeConfig:
    """Knobs of one run; budgets of None mean unlimited (turns always bound the run)."""

    backend: str = "triton"              # triton | cute
    out: str | None = None               # kernel file; default beside the problem
    turns: int = 8                       # most LLM turns
    candidates: int = 4                  # candidates proposed per turn (K), spread over the beam
    beam: int = 2                        # branches kept between turns (B)
    target_speedup: float | None = None  # stop once the best is this much faster than eager
    budget_usd: float | None = DEFAULT_BUDGET_USD
    budget_tokens: int | None = None     # input + output tokens over the run (--max-tokens-total)
    budget_gpu_s: float | None = None    # seconds spent in the verifier (--gpu-seconds)
    price_in: float | None = None        # dollars per million input tokens, for a model outside the price table
    price_out: float | None = None       # dollars per million output tokens
    thinking_budget: int | None = None   # Anthropic extended thinking: tokens of thinking per call (>= 1024)
    patience: int = 3                    # turns without a better kernel before stopping (once one passed)
    max_repairs: int = 5                 # failed repairs in a row on a branch before it restarts afresh
    history_pairs: int = 2               # earlier (reply, feedback) pairs kept verbatim in a branch
    max_output_tokens: int = 16000       # per LLM call, not counting thinking
    verify_workers: int = 1              # candidates verified at once; >1 only if verify_fn serialises timing
    examples: int = 2                    # earlier accepted kernels shown in the first prompt
    shapes: str = ""                     # user shape override, part of the problem's identity in memory

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def call_max_tokens(self) -> int:
        """`max_tokens` of one call: the answer plus the thinking budget (thinking counts toward it)."""
        return self.max_output_tokens + (self.thinking_budget or 0)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OptimizeConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class ProviderSettings:
    name: str
    model: str | None
    base_url: str | None


def home_dir(home: str | Path | None = None) -> Path:
    """The kernelagent home: the argument, else $KERNELAGENT_HOME, else ~/.kernelagent."""
    return Path(home).expanduser() if home is not None else default_home()


def read_config_file(home: str | Path | None = None) -> dict[str, Any]:
    """`config.toml` in the home folder as a dict; {} when there is none."""
    path = home_dir(home) / CONFIG_FILE
    if not path.exists():
        return {}
    with path.open("rb") as f:
        return tomllib.load(f)


def resolve_provider(name: str | None = None, model: str | None = None, base_url: str | None = None, *,
                     home: str | Path | None = None,
                     env: Mapping[str, str] | None = None) -> ProviderSettings:
    """Provider name, model and base URL after applying flag > env > config file > default.

    The config file's model and base_url apply only to the provider it names (or when it names none).
    """
    env = os.environ if env is None else env
    section = read_config_file(home).get("provider", {})
    chosen = name or env.get("KERNELAGENT_PROVIDER") or section.get("name") or DEFAULT_PROVIDER
    same = section.get("name") in (None, chosen)
    model = model or env.get("KERNELAGENT_MODEL") or (section.get("model") if same else None)
    base_url = base_url or env.get("KERNELAGENT_BASE_URL") or (section.get("base_url") if same else None)
    return ProviderSettings(chosen, model or DEFAULT_MODELS.get(chosen), base_url)
