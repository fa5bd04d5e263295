"""Finding the candidate file in a reply: fences parsed line by line."""

from __future__ import annotations

from kernelagent.agent.extract import extract_candidate, fences, was_truncated

FILE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_single_python_block_is_the_whole_file():
    text = f"Plan: fuse it.\n\n```python\n{FILE}```\nDone."
    assert extract_candidate(text) == FILE


def test_picks_the_block_that_defines_model_new_and_the_last_of_several():
    helper = "```python\ndef helper():\n    return 1\n```"
    first = FILE.replace("pass", "x = 1")
    text = f"{helper}\n\n```py\n{first}```\n\nBetter:\n\n```python\n{FILE}```\n\n{helper}"
    assert extract_candidate(text) == FILE


def test_none_when_no_block_defines_model_new():
    assert extract_candidate("```python\nclass Model(nn.Module):\n    pass\n```") is None
    assert extract_candidate("class ModelNew(nn.Module):\n    pass\n") is None  # not fenced
    assert extract_candidate("```python\nclass ModelNewer:\n    pass\n```") is None


def test_other_languages_are_ignored_and_unlabelled_python_counts():
    assert extract_candidate(f"```cpp\n{FILE}```") is None
    assert extract_candidate(f"```\n{FILE}```") == FILE
    assert extract_candidate(f"~~~python\n{FILE}~~~") == FILE


def test_a_reply_cut_off_inside_the_block_is_not_a_candidate():
    text = f"```python\n{FILE}"
    assert extract_candidate(text) is None and was_truncated(text)
    assert not was_truncated(f"```python\n{FILE}```")


def test_longer_fences_may_hold_triple_backticks():
    inner = FILE + 'DOC = """\n```\nnot a fence end\n"""\n'
    assert extract_candidate(f"````python\n{inner}````") == inner


def test_code_that_does_not_parse_is_still_sent_to_the_verifier():
    broken = "class ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n"
    assert extract_candidate(f"```python\n{broken}```") == broken


def test_inline_triple_backticks_do_not_open_a_fence():
    text = f"Use ```x``` inline.\n```python\n{FILE}```"
    assert [f.label for f in fences(text)] == ["python"]
    assert extract_candidate(text) == FILE
