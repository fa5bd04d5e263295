"""`library list` and `library show` as a person reads them: measured speedups from the cards' verify rows, summaries
cut at a word, and the card rendered (not raw markdown)."""

from __future__ import annotations

import io

from rich.console import Console

from kernelagent.cli.library import first_sentence, list_cmd, show_cmd, speedups


def test_speedups_take_the_latest_gpu_row_per_backend_and_skip_cpu_rows():
    rows = [{"backend": "triton", "gpu": "NVIDIA H200", "speedup_eager": 1.5},
            {"backend": "triton", "gpu": "NVIDIA H200", "speedup_eager": 2.07},
            {"backend": "cute", "gpu": "NVIDIA H200", "speedup_eager": 1.84},
            {"backend": "triton", "device": "cpu", "gpu": None, "speedup_eager": 9.0},
            {"backend": "cute", "gpu": "NVIDIA H100", "speedup_eager": None}]
    assert speedups(rows) == "cute 1.84x (H200), triton 2.07x (H200)"
    dated = [{"backend": "triton", "gpu": "H200", "date": "2026-12-02", "speedup_eager": 2.0},
             {"backend": "triton", "gpu": "H200", "date": "2026-11-30", "speedup_eager": 1.0}]  # recorded later
    assert speedups(dated) == "triton 2x (H200)"
    assert speedups([]) == "not measured"


def test_first_sentence_is_cut_at_a_word_with_an_ellipsis():
    assert first_sentence("Row softmax, forward and backward. The rest.") == "Row softmax, forward and backward"
    long = "word " * 40
    cut = first_sentence(long, limit=33)
    assert cut.endswith(" …") and len(cut) <= 35 and all(w == "word" for w in cut[:-2].split())


def _render(fn, *args) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None)
    fn(*args, console) if fn is list_cmd else fn(*args, console, console)
    return buf.getvalue()


def test_list_shows_the_measured_speedups_of_the_shipped_cards(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path))  # the shipped shelf only, not the user's
    out = _render(list_cmd, False)
    line = next(x for x in out.splitlines() if x.lstrip().startswith("cross_entropy"))
    assert "triton" in line and "x (H200)" in line  # the card's verify rows (2026-12-02)


def test_show_renders_the_card_and_its_speedups():
    out = _render(show_cmd, "softmax", False)
    assert "## " not in out and "**" not in out  # markdown rendered, not printed raw
    assert "measured against eager:" in out and "x (H200)" in out
