"""Providers against the stand-in servers: the real Anthropic SDK and httpx, retries, broken replies, usage,
caching, the model check, thinking, cancelling, replay."""

from __future__ import annotations

import json
import threading

import pytest
import tenacity

from kernelagent.agent.errors import (
    ModelUnavailable,
    ProviderAuthError,
    ProviderCancelled,
    ProviderError,
    ReplayError,
    ReplyBroken,
)
from kernelagent.agent.providers import make_provider
from kernelagent.agent.providers.base import Block, CallHooks, RetryPolicy, retry_after_or_backoff
from kernelagent.agent.providers.prices import cost_usd
from kernelagent.agent.providers.replay import ReplayProvider
from tests.fakes.agent_kit import FAST_RETRY, LLMS
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import MODEL, FakeOpenAI

SYSTEM = [Block("You write kernels.", cache=True), Block("The Triton guide.", cache=True)]
ASK = [{"role": "user", "content": "write relu"}]
STREAMING = [x for x in LLMS if x.stream]


def _anthropic(url: str, monkeypatch, stream: bool = True, **kw):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    return make_provider("anthropic", "claude-sonnet-5-5", stream=stream, retry=kw.pop("retry", FAST_RETRY), **kw)


def _events(hooks_events: list) -> CallHooks:
    return CallHooks(on_event=hooks_events.append)


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_retries_overloaded_and_rate_limited(home, monkeypatch, stream):
    usage = {"text": "ok", "input_tokens": 12, "output_tokens": 34, "cache_read": 1000, "cache_write": 200}
    seen: list[dict] = []
    with FakeAnthropic([usage], failures=[529, 429]) as fake:
        done = _anthropic(fake.url, monkeypatch, stream).complete(SYSTEM, ASK, max_tokens=64, hooks=_events(seen))
    assert len(fake.requests) == 3 and done.text == "ok"
    assert [e["reason"] for e in seen if e["event"] == "retry"] == ["HTTP 529", "HTTP 429"]  # the live view hears
    assert (done.input_tokens, done.output_tokens, done.cache_read_tokens, done.cache_write_tokens) == \
        (12, 34, 1000, 200)
    assert done.cost_usd == pytest.approx(cost_usd("claude-sonnet-5-5", input_tokens=12, output_tokens=34,
                                                   cache_read_tokens=1000, cache_write_tokens=200))
    body = fake.requests[-1]
    assert [b.get("cache_control") for b in body["system"]] == [{"type": "ephemeral"}] * 2
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["max_tokens"] == 64 and body.get("stream", False) is stream


def test_a_529_storm_is_ridden_out_by_the_sdk_retries(home, monkeypatch):
    storm = RetryPolicy(attempts=40, initial_wait=0.001, max_wait=0.01, stall_timeout=2.0)
    with FakeAnthropic(["after the storm"], failures=[529] * 35) as fake:
        done = _anthropic(fake.url, monkeypatch, retry=storm).complete(SYSTEM, ASK, max_tokens=8)
    assert done.text == "after the storm" and len(fake.requests) == 36


def test_the_default_retry_budget_lasts_minutes():
    """The SDK doubles its wait from 0.5 s up to 8 s (at least 3/4 of that after jitter); 60 attempts last minutes."""
    import anthropic._constants as c

    policy = RetryPolicy()
    waits = [min(c.INITIAL_RETRY_DELAY * 2**n, c.MAX_RETRY_DELAY) * 0.75 for n in range(policy.attempts - 1)]
    assert sum(waits) > 5 * 60 and policy.stall_timeout < policy.request_timeout


def test_retry_after_is_honoured(home, monkeypatch):
    seen: list[dict] = []
    with FakeAnthropic(["ok"], failures=[]) as fake:
        fake.failures.append({"fail": 429, "retry_after": "0.05"})
        done = _anthropic(fake.url, monkeypatch).complete(SYSTEM, ASK, max_tokens=8, hooks=_events(seen))
    assert done.text == "ok" and [e["wait"] for e in seen if e["event"] == "retry"] == [0.05]


def test_anthropic_gives_up_after_the_retries(home, monkeypatch):
    with FakeAnthropic(["never"], failures=[500] * 10) as fake:
        with pytest.raises(ProviderError, match="500") as caught:
            _anthropic(fake.url, monkeypatch).complete(SYSTEM, ASK, max_tokens=8)
    assert caught.value.retryable and len(fake.requests) == FAST_RETRY.attempts


@pytest.mark.parametrize(("status", "error"), [(401, ProviderAuthError), (400, ProviderError)])
def test_anthropic_client_errors_are_not_retried(home, monkeypatch, status, error):
    with FakeAnthropic(["never"], failures=[status]) as fake:
        with pytest.raises(error) as caught:
            _anthropic(fake.url, monkeypatch).complete(SYSTEM, ASK, max_tokens=8)
    assert not caught.value.retryable and len(fake.requests) == 1


BROKEN = {"stall": {"stall": 5.0, "after_chunks": 1}, "drop": {"drop": True, "after_chunks": 1},
          "malformed": {"malformed": True}, "empty": {"empty": True}}


@pytest.mark.parametrize("how", sorted(BROKEN))
@pytest.mark.parametrize("llm", STREAMING, ids=lambda x: x.kind)
def test_a_broken_reply_is_sent_again_and_its_text_kept(home, monkeypatch, llm, how):
    step = {**BROKEN[how], "text": "partial plan " * 5}
    seen: list[dict] = []
    with llm.server_cls([step, "the whole reply"]) as fake:
        hooks = _events(seen)
        done = llm.provider(fake.url, monkeypatch).complete(SYSTEM, ASK, max_tokens=8, hooks=hooks)
    assert done.text == "the whole reply" and len(fake.requests) == 2
    assert fake.requests[0] == fake.requests[1]  # the same request, re-sent: nothing was answered
    assert [e["event"] for e in seen].count("retry") == 1
    if how in ("stall", "drop"):
        assert hooks.partials and hooks.partials[0].startswith("partial plan")  # paid for, so kept


@pytest.mark.parametrize("llm", STREAMING, ids=lambda x: x.kind)
def test_a_reply_that_keeps_breaking_is_a_provider_error_not_a_traceback(home, monkeypatch, llm):
    with llm.server_cls([{"drop": True, "after_chunks": 1, "text": "abc def ghi"}] * 5) as fake:
        with pytest.raises(ReplyBroken, match="broke off|ended before|empty"):
            llm.provider(fake.url, monkeypatch).complete(SYSTEM, ASK, max_tokens=8)
    assert len(fake.requests) == FAST_RETRY.stream_attempts


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_non_streamed_reply_that_is_not_json_is_retried(home, monkeypatch, kind):
    llm = next(x for x in LLMS if x.kind == kind and not x.stream)
    with llm.server_cls([{"malformed": True}, "fine"]) as fake:
        done = llm.provider(fake.url, monkeypatch).complete(SYSTEM, ASK, max_tokens=8)
    assert done.text == "fine" and len(fake.requests) == 2


@pytest.mark.parametrize("llm", STREAMING, ids=lambda x: x.kind)
def test_cancel_ends_a_call_at_once_and_keeps_what_arrived(home, monkeypatch, llm):
    slow = RetryPolicy(attempts=2, stream_attempts=2, initial_wait=0.001, max_wait=0.01, stall_timeout=60.0)
    hooks = CallHooks()
    outcome: list[BaseException] = []
    with llm.server_cls([{"text": "first words, then a long wait", "hold": 60, "after_chunks": 1}]) as fake:
        provider = llm.provider(fake.url, monkeypatch, retry=slow)

        def call() -> None:
            try:
                provider.complete(SYSTEM, ASK, max_tokens=8, hooks=hooks)
            except ProviderError as e:
                outcome.append(e)

        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        assert fake.streaming.wait(20)
        while not hooks.text():
            assert worker.is_alive()
            fake.streaming.wait(0.01)
        hooks.cancel()
        worker.join(10)
        assert not worker.is_alive()  # before the server lets go of the reply: the cancel itself ended it
    assert isinstance(outcome[0], ProviderCancelled)
    assert hooks.text() and "first words".startswith(hooks.text()) and len(fake.requests) == 1


def test_model_check_names_the_models_the_key_can_use(home, monkeypatch):
    with FakeAnthropic([]) as fake:
        _anthropic(fake.url, monkeypatch).check_model()  # the default model is offered
        monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
        wrong = make_provider("anthropic", "claude-sonnet-3", retry=FAST_RETRY)
        with pytest.raises(ModelUnavailable, match="claude-sonnet-5-5, claude-opus-5-5, claude-haiku-5-5"):
            wrong.check_model()
    assert fake.gets and fake.requests == []  # asked the models endpoint only; nothing was paid for


def test_thinking_budget_is_sent_and_its_text_left_out(home, monkeypatch):
    with FakeAnthropic(["the answer"]) as fake:
        provider = _anthropic(fake.url, monkeypatch, thinking_budget=2048)
        done = provider.complete(SYSTEM, ASK, max_tokens=4096)
    assert fake.requests[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert fake.requests[0]["max_tokens"] == 4096 and done.text == "the answer"


@pytest.mark.parametrize("stream", [True, False])
def test_openai_compatible_usage_retries_and_model_discovery(home, stream):
    reply = {"text": "hello", "input_tokens": 40, "output_tokens": 7, "cache_read": 60}
    with FakeOpenAI([reply], failures=[503]) as fake:
        provider = make_provider("openai", base_url=fake.url + "/v1", stream=stream, retry=FAST_RETRY)
        done = provider.complete(SYSTEM, ASK, max_tokens=32)
    assert provider.model == MODEL  # asked /v1/models: a one-model local server needs no --model
    assert (done.text, done.input_tokens, done.output_tokens, done.cache_read_tokens) == ("hello", 40, 7, 60)
    body = fake.requests[-1]
    assert body["messages"][0] == {"role": "system", "content": "You write kernels.\n\nThe Triton guide."}
    assert body["messages"][1:] == ASK and body["stream"] is stream and len(fake.requests) == 2


def test_openai_named_model_is_checked(home):
    with FakeOpenAI([]) as fake:
        with pytest.raises(ModelUnavailable, match="offers: fake-coder, gpt-4o-mini"):
            make_provider("openai", "llama-70b", fake.url + "/v1", retry=FAST_RETRY).check_model()


def test_openai_priced_model_costs_money(home):
    with FakeOpenAI([{"text": "x", "input_tokens": 1000, "output_tokens": 100}]) as fake:
        done = make_provider("openai", "gpt-4o-mini", fake.url + "/v1").complete(SYSTEM, ASK, max_tokens=8)
    assert done.cost_usd == pytest.approx((1000 * 0.15 + 100 * 0.6) / 1e6)


def test_openai_unreachable_server_is_a_retryable_error(home):
    retry = RetryPolicy(attempts=2, initial_wait=0.0, max_wait=0.0, connect_timeout=1.0)
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


def test_retry_after_wins_over_backoff():
    wait = retry_after_or_backoff(RetryPolicy(initial_wait=1.0, max_wait=5.0))

    def state(error: BaseException, attempt: int = 1) -> tenacity.RetryCallState:
        s = tenacity.RetryCallState(None, None, (), {})
        s.attempt_number = attempt
        s.set_exception((type(error), error, None))
        return s

    assert wait(state(ProviderError("x", retry_after=2.5))) == 2.5
    assert 1.0 <= wait(state(ProviderError("x"))) <= 1.5 and wait(state(ProviderError("x"), 10)) <= 5.5
