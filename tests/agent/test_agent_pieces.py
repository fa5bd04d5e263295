"""Small pieces of the loop: plain text, source summaries, the budget ledger, the reply log, preflight."""

from __future__ import annotations

import ast

import pytest

from kernelagent.agent.budget import Ledger, Limits, estimate_tokens
from kernelagent.agent.config import OptimizeConfig
from kernelagent.agent.errors import MissingExtra, SetupError, UnknownPrice
from kernelagent.agent.extract import extract
from kernelagent.agent.feedback import example_text
from kernelagent.agent.preflight import check_backend, check_limits, price_of
from kernelagent.agent.providers.prices import Price, resolve_price, worst_case_usd
from kernelagent.agent.replies import ReplyLog, request_key
from kernelagent.agent.summarise import fit, summarise
from kernelagent.agent.text import drop_repeats, plain, scrub_paths, strip_ansi


def test_plain_text_has_no_escapes_and_says_each_thing_once():
    coloured = ("\x1b[91mNameError: name 'tile' is not defined in the kernel body\x1b[0m\r\n"
                "\x1b]8;;x\x07link\x1b]8;;\x07")
    assert strip_ansi(coloured) == "NameError: name 'tile' is not defined in the kernel body\nlink"
    error = "Traceback:\n  File k.py, line 3\n    x = tile\nNameError: tile"
    assert drop_repeats(error + "\n" + error) == error  # the whole block twice -> once
    assert drop_repeats("a\nb\na\nb") == "a\nb\na\nb"   # short repeats are content, not a copy
    assert plain(error + "\n\x1b[91m" + error.replace("\n", "\x1b[0m\n\x1b[91m") + "\x1b[0m") == error


def test_local_paths_are_replaced_longest_first():
    labels = {"/home/u/.ka/runs/r1": "", "/home/u/.ka": "$KERNELAGENT_HOME", "/home/u": "~"}
    text = 'File "/home/u/.ka/runs/r1/t01_c0.py"; db /home/u/.ka/kernelagent.db; /home/u/x.py'
    assert scrub_paths(text, labels) == 'File "t01_c0.py"; db $KERNELAGENT_HOME/kernelagent.db; ~/x.py'


LONG = '''"""A library kernel."""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _kernel(x_ptr, y_ptr, n,
            BLOCK: tl.constexpr):
    """One program per block."""
    pid = tl.program_id(0)
''' + "    x = tl.load(x_ptr + pid)\n" * 300 + '''

class ModelNew(torch.nn.Module):
    """Drop-in module."""

    def forward(self, x):
        y = torch.empty_like(x)
        _kernel[(1,)](x, y, x.numel(), BLOCK=BLOCK)
        return y
'''


def test_a_long_example_is_summarised_by_function_never_cut():
    short = summarise(LONG)
    ast.parse(short)  # still Python: nothing cut mid-statement
    assert "def _kernel(x_ptr, y_ptr, n,\n            BLOCK: tl.constexpr):" in short
    assert '"""One program per block."""' in short and "tl.load" not in short and "BLOCK = 1024" in short
    assert "class ModelNew(torch.nn.Module):" in short and "    def forward(self, x):\n        ..." in short
    assert fit("x = 1\n", 100) == ("x = 1\n", False) and fit("def f(:\n" * 50, 100) is None
    text = example_text({"problem": "library:softmax", "backend": "triton", "speedup": None, "source": LONG},
                        "triton")
    assert "### library:softmax (Triton; shortened: function bodies left out)" in text and "?" not in text
    timed = example_text({"problem": "relu", "backend": "triton", "speedup": 1.7, "gpu": "H200", "source": "x=1"},
                         "triton")
    assert "(Triton, 1.70x over eager on H200)" in timed


def test_two_blocks_take_the_one_marked_final_else_the_last():
    a = "```python\nclass ModelNew:\n    a = 1\n```"
    b = "```python\nclass ModelNew:\n    b = 2\n```"
    marked = "```python final\nclass ModelNew:\n    m = 3\n```"
    last = extract(f"{a}\n{b}")
    assert (last.blocks, last.chosen, last.marked) == (2, 2, False) and "b = 2" in last.source
    picked = extract(f"{a}\n{marked}\n{b}")
    assert (picked.blocks, picked.chosen, picked.marked) == (3, 2, True) and "m = 3" in picked.source
    assert extract(f"{a}\n```python\nclass ModelNew:").truncated


def test_the_ledger_refuses_a_call_whose_worst_case_would_pass_a_limit():
    price = Price(2.0, 10.0, 2.5, 0.2)
    worst = worst_case_usd(price, estimate_tokens(3000), 1000)
    assert worst == pytest.approx((1001 * 2.5 + 1000 * 10.0) / 1e6)
    ledger = Ledger(Limits(usd=2.5 * worst), price)
    first, second = ledger.reserve(3000, 1000), ledger.reserve(3000, 1000)
    assert first and second and ledger.reserve(3000, 1000) is None and ledger.refused == 1
    ledger.settle(first, 0.1 * worst, 10)  # cheaper than feared: room again
    assert ledger.fits(3000, 1000) and ledger.spent_usd == pytest.approx(0.1 * worst)
    tokens = Ledger(Limits(tokens=2500), price)
    assert tokens.reserve(300, 1000) and tokens.reserve(300, 1000) and not tokens.fits(300, 1000)


def test_prices_unknown_models_and_given_prices():
    with pytest.raises(UnknownPrice, match="--price-in and --price-out"):
        resolve_price("my-local-llama")
    with pytest.raises(UnknownPrice, match="both"):
        resolve_price("my-local-llama", 1.0, None)
    assert resolve_price("my-local-llama", 0.0, 0.0).output == 0.0
    assert resolve_price("claude-sonnet-5-5").output == 10.0
    assert resolve_price("claude-sonnet-5-5", 1.0, 2.0).output == 2.0  # the user's price wins

    class Replay:
        name, model = "replay", "replay"

    assert price_of(Replay(), OptimizeConfig()).output == 0.0


def test_preflight_finds_missing_extras_and_bad_limits(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(MissingExtra, match="cutlass"):
        check_backend("cute")
    check_backend("triton")
    with pytest.raises(SetupError, match="at least 1024"):
        check_limits(OptimizeConfig(thinking_budget=100))


def test_the_reply_log_keeps_every_call_and_finds_a_paid_reply(tmp_path):
    log = ReplyLog(tmp_path / "runs" / "r1")
    key = request_key("m", [], [{"role": "user", "content": "hi"}], 100)
    assert key != request_key("m", [], [{"role": "user", "content": "hi"}], 101)
    log.append({"turn": 1, "index": 0, "request": key, "status": "failed", "partials": ["half"],
                "tokens": {"input": 10, "output": 2}, "cost_usd": 0.01})
    log.append({"turn": 1, "index": 0, "request": key, "status": "complete", "text": "reply",
                "tokens": {"input": 10, "output": 5, "cache_read": 100}, "cost_usd": 0.02})
    with (tmp_path / "runs" / "r1" / "replies.jsonl").open("a") as f:
        f.write('{"turn": 1, "cut by a cra')  # a line cut by a crash is skipped
    assert log.complete_reply(1, 0, key)["text"] == "reply" and log.complete_reply(1, 1, key) is None
    tokens, usd = log.totals()
    assert tokens == {"input": 20, "output": 7, "cache_read": 100, "cache_write": 0} and usd == pytest.approx(0.03)


def test_verifier_options_carry_the_backend_and_keep_to_the_gpu_budget(tmp_path):
    from kernelagent.agent.deps import Deps, RunContext
    from kernelagent.agent.verify_node import options_for
    from kernelagent.verifier.options import VerifyOptions

    def ctx(gpu: float | None) -> RunContext:
        deps = Deps(provider=None, verify_fn=None, verify_options=VerifyOptions(timeout=300.0))
        return RunContext(deps=deps, config=OptimizeConfig(budget_gpu_s=gpu), workdir=tmp_path)

    free = options_for(ctx(None), "cute", used=1e6, parallel=2)
    assert (free.backend, free.timeout) == ("cute", 300.0)
    capped = options_for(ctx(100.0), "triton", used=40.0, parallel=2)
    assert (capped.backend, capped.timeout) == ("triton", 30.0)  # two at once may not pass the 60 s left
    assert options_for(ctx(100.0), "triton", used=100.0, parallel=1) is None
