"""Provider resolution (flag > env > config file > default), missing configuration, prices."""

from __future__ import annotations

import pytest

from kernelagent.agent.config import DEFAULT_MODELS, resolve_provider
from kernelagent.agent.errors import ProviderNotConfigured
from kernelagent.agent.providers import make_provider
from kernelagent.agent.providers.prices import cost_usd, price_for


def _config(home, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_default_is_anthropic_with_the_default_model(home):
    s = resolve_provider()
    assert (s.name, s.model, s.base_url) == ("anthropic", DEFAULT_MODELS["anthropic"], None)


def test_flag_beats_env_beats_config_file(home, monkeypatch):
    _config(home, '[provider]\nname = "openai"\nmodel = "from-file"\nbase_url = "http://file:1/v1"\n')
    assert resolve_provider() == resolve_provider("openai", "from-file", "http://file:1/v1")
    monkeypatch.setenv("KERNELAGENT_MODEL", "from-env")
    assert resolve_provider().model == "from-env"
    assert resolve_provider(model="from-flag").model == "from-flag"
    assert resolve_provider().base_url == "http://file:1/v1"


def test_config_file_settings_apply_only_to_the_provider_it_names(home):
    _config(home, '[provider]\nname = "openai"\nmodel = "llama"\nbase_url = "http://file:1/v1"\n')
    s = resolve_provider("anthropic")
    assert (s.model, s.base_url) == (DEFAULT_MODELS["anthropic"], None)


def test_missing_anthropic_key_says_how_to_configure(home):
    with pytest.raises(ProviderNotConfigured) as caught:
        make_provider()
    text = str(caught.value)
    for needle in ("ANTHROPIC_API_KEY", "--provider openai", "--base-url", "OPENAI_BASE_URL", "--model",
                   "KERNELAGENT_MODEL", str(home / "config.toml"), "[provider]"):
        assert needle in text


def test_openai_needs_a_server_and_replay_a_script(home):
    with pytest.raises(ProviderNotConfigured, match="needs a server"):
        make_provider("openai")
    with pytest.raises(ProviderNotConfigured, match="needs a script"):
        make_provider("replay")
    with pytest.raises(ProviderNotConfigured, match="Unknown provider 'gemini'"):
        make_provider("gemini")


def test_providers_are_built_when_configured(home, monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    p = make_provider(model="claude-opus-5-5")
    assert (p.name, p.model) == ("anthropic", "claude-opus-5-5")
    o = make_provider("openai", base_url="http://127.0.0.1:9/v1")
    assert o.name == "openai" and str(o.client.base_url).startswith("http://127.0.0.1:9/v1")
    script = tmp_path / "s.jsonl"
    script.write_text('{"text": "hi"}\n')
    monkeypatch.setenv("KERNELAGENT_REPLAY_SCRIPT", str(script))
    assert make_provider("replay").name == "replay"


def test_prices_match_the_longest_prefix_and_count_cache():
    assert price_for("claude-sonnet-5-5-20260601").input == 2.0
    assert price_for("claude-sonnet-5").cache_read == pytest.approx(0.2)
    assert price_for("claude-opus-4-1-20250805").output == 75.0
    assert price_for("claude-opus-4-5").output == 25.0
    assert price_for("my-local-llama") is None
    assert cost_usd("my-local-llama", input_tokens=10**6, output_tokens=10**6) == 0.0
    cost = cost_usd("claude-sonnet-4-5", input_tokens=1000, output_tokens=100, cache_read_tokens=10_000,
                    cache_write_tokens=2000)
    assert cost == pytest.approx((1000 * 3 + 100 * 15 + 10_000 * 0.3 + 2000 * 3.75) / 1e6)


def test_long_prompts_pay_the_higher_tier():
    short = cost_usd("claude-haiku-5-5", input_tokens=100_000, output_tokens=1000)
    long = cost_usd("claude-haiku-5-5", input_tokens=100_001, output_tokens=1000)
    assert short == pytest.approx((100_000 * 0.1 + 1000 * 0.5) / 1e6)
    assert long == pytest.approx(5 * (100_001 * 0.1 + 1000 * 0.5) / 1e6)


def test_a_broken_sdk_profile_is_reported_not_raised(home, monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(ProviderNotConfigured, match="could not load credentials") as caught:
        make_provider()
    assert "ANTHROPIC_API_KEY" in str(caught.value)
