"""Providers against the fake servers: the real Anthropic SDK and httpx, retries, usage, caching, replay."""

from __future__ import annotations

import json

import pytest

from kernelagent.agent.errors import ProviderAuthError, ProviderError, ReplayError
from kernelagent.agent.providers import make_provider
from kernelagent.agent.providers.base import Block, RetryPolicy
from kernelagent.agent.providers.prices import cost_usd
from kernelagent.agent.providers.replay import ReplayProvider
from tests.fakes.agent_kit import FAST_RETRY
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import MODEL, FakeOpenAI

SYSTEM = [Block("You write kernels.", cache=True), Block("The Triton guide.", cache=True)]
ASK = [{"role": "user", "content": "write relu"}]


def _anthropic(url: str, monkeypatch, stream: bool = True):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    return make_provider("anthropic", "claude-sonnet-5-5", stream=stream, retry=FAST_RETRY)


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_retries_overloaded_and_rate_limited(home, monkeypatch, stream):
    usage = {"text": "ok", "input_tokens": 12, "output_tokens": 34, "cache_read": 1000, "cache_write": 200}
    with FakeAnthropic([usage], failures=[529, 429]) as fake:
        done = _anthropic(fake.url, monkeypatch, stream).complete(SYSTEM, ASK, max_tokens=64)
    assert len(fake.requests) == 3 and done.text == "ok"
    assert (done.input_tokens, done.output_tokens, done.cache_read_tokens, done.cache_write_tokens) == \
        (12, 34, 1000, 200)
    assert done.cost_usd == pytest.approx(cost_usd("claude-sonnet-5-5", input_tokens=12, output_tokens=34,
                                                   cache_read_tokens=1000, cache_write_tokens=200))
    body = fake.requests[-1]
    assert [b.get("cache_control") for b in body["system"]] == [{"type": "ephemeral"}] * 2
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["max_tokens"] == 64 and body.get("stream", False) is stream


def test_anthropic_gives_up_after_the_retries(home, monkeypatch):
    with FakeAnthropic(["never"], failures=[500] * 10) as fake:
        with pytest.raises(ProviderError, match="500") as caught:
            _anthropic(fake.url, monkeypatch).complete(SYSTEM, ASK, max_tokens=8)
    assert caught.value.retryable and len(fake.requests) == FAST_RETRY.retries + 1


@pytest.mark.parametrize(("status", "error"), [(401, ProviderAuthError), (400, ProviderError)])
def test_anthropic_client_errors_are_not_retried(home, monkeypatch, status, error):
    with FakeAnthropic(["never"], failures=[status]) as fake:
        with pytest.raises(error) as caught:
            _anthropic(fake.url, monkeypatch).complete(SYSTEM, ASK, max_tokens=8)
    assert not caught.value.retryable and len(fake.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
def test_openai_compatible_usage_retries_and_model_discovery(home, stream):
    reply = {"text": "hello", "input_tokens": 40, "output_tokens": 7, "cache_read": 60}
    with FakeOpenAI([reply], failures=[503]) as fake:
        provider = make_provider("openai", base_url=fake.url + "/v1", stream=stream, retry=FAST_RETRY)
        done = provider.complete(SYSTEM, ASK, max_tokens=32)
    assert provider.model == MODEL  # asked /v1/models: a one-model local server needs no --model
    assert (done.text, done.input_tokens, done.output_tokens, done.cache_read_tokens) == ("hello", 40, 7, 60)
    assert done.cost_usd == 0.0  # a local model has no price
    body = fake.requests[-1]
    assert body["messages"][0] == {"role": "system", "content": "You write kernels.\n\nThe Triton guide."}
    assert body["messages"][1:] == ASK and body["stream"] is stream and len(fake.requests) == 2


def test_openai_priced_model_costs_money(home):
    with FakeOpenAI([{"text": "x", "input_tokens": 1000, "output_tokens": 100}]) as fake:
        done = make_provider("openai", "gpt-4o-mini", fake.url + "/v1").complete(SYSTEM, ASK, max_tokens=8)
    assert done.cost_usd == pytest.approx((1000 * 0.15 + 100 * 0.6) / 1e6)


def test_openai_unreachable_server_is_a_retryable_error(home):
    retry = RetryPolicy(retries=1, base_delay=0)
    provider = make_provider("openai", "m", "http://127.0.0.1:9/v1", retry=retry)
    with pytest.raises(ProviderError, match="unreachable") as caught:
        provider.complete(SYSTEM, ASK, max_tokens=8)
    assert caught.value.retryable


def test_replay_plays_lines_in_order_and_checks_prompts(tmp_path):
    script = tmp_path / "script.jsonl"
    lines = [{"text": "one", "input_tokens": 10, "output_tokens": 20, "expect_contains": ["write relu"]},
             {"text": "two", "expect_contains": ["not in the prompt"]}]
    script.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    provider = ReplayProvider.from_file(script)
    first = provider.complete(SYSTEM, ASK, max_tokens=8)
    assert (first.text, first.input_tokens, first.output_tokens) == ("one", 10, 20)
    with pytest.raises(ReplayError, match="lacks"):
        provider.complete(SYSTEM, ASK, max_tokens=8)
    with pytest.raises(ReplayError, match="has 2 lines; call 3"):
        provider.complete(SYSTEM, ASK, max_tokens=8)


def test_replay_reports_a_bad_line(tmp_path):
    script = tmp_path / "bad.jsonl"
    script.write_text('{"text": "ok"}\n{oops\n')
    with pytest.raises(ReplayError, match="line 2"):
        ReplayProvider.from_file(script)


def test_retry_after_wins_over_backoff_but_is_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    assert policy.delay(0, 2.5) == 2.5 and policy.delay(0, 60.0) == 5.0
    assert 0.5 <= policy.delay(0, None) <= 1.0 and policy.delay(10, None) <= 5.0
