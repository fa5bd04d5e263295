"""The library registry (kernelagent.kernels): scanning the family folders, cards, lookups."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernelagent.kernels import LibraryError, get_entry, list_entries

ROOT = Path(__file__).resolve().parents[2]

FAMILIES = {"softmax": "softmax", "log_softmax": "log_softmax", "rms_norm": "rms_norm", "layer_norm": "layer_norm",
            "cross_entropy": "cross_entropy", "linear_cross_entropy": "linear_cross_entropy", "attention": "attention"}
ROWWISE = ("softmax", "log_softmax", "rms_norm", "layer_norm")
CARD_KEYS = {"name", "family", "summary", "backends", "signature", "verified", "dtypes", "notes"}
ROWWISE_KEYS = CARD_KEYS | {"backward", "shapes_verified", "tolerance", "ops", "limits", "tuning"}


def test_list_entries_finds_the_first_shelf():
    entries = {e.name: e for e in list_entries()}
    assert set(FAMILIES) <= set(entries)
    for name, entry in entries.items():
        assert entry.reference_path.is_file()
        assert set(entry.backends) == set(entry.card["backends"]), name
        assert all(p.is_file() for p in entry.backends.values())


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_cards_are_complete_and_claim_nothing_unmeasured(name):
    entry = get_entry(name)
    assert CARD_KEYS <= set(entry.card), CARD_KEYS - set(entry.card)
    assert entry.family == FAMILIES[name]
    for row in entry.card["verified"]:  # filled only by `library verify --record`, from a real run
        assert row.get("date") and (row.get("gpu") or row.get("device")) and row.get("backend") in entry.backends
    assert entry.card["signature"] and all(op.startswith("aten::") for op in entry.card["signature"])
    assert (entry.path / "card.md").is_file()


def _card_rows(data: dict, name: str, source: str) -> list[dict]:
    """The card rows a results file gives for `name`, by the script that wrote it."""
    if data.get("benchmark") == "rowwise_peers":
        from benchmarks.rowwise_peers import card_rows
        return card_rows(data, name, source)
    if data.get("benchmark") == "attention_peers":
        from benchmarks.attention_peers import card_rows as attention_rows
        return attention_rows(data, name, source)
    if data.get("benchmark") == "losses_peers":
        from benchmarks.losses_peers import card_rows as loss_rows
        return loss_rows(data, name, source)
    from benchmarks.cards_from_peers import rows_for
    return rows_for(data, name, source)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_measured_figures_come_from_their_results_file(name):
    """Every figure in card.json `measured` (and so in card.md) is the one in the cited results file."""
    from benchmarks.cards_from_peers import markdown

    entry = get_entry(name)
    measured = entry.card.get("measured", [])
    results = {}
    for row in measured:
        src = ROOT / row["source"]
        assert src.is_file(), row["source"]
        if row["source"] not in results:
            results[row["source"]] = json.loads(src.read_text())
        data = results[row["source"]]
        assert row in _card_rows(data, name, row["source"])
        assert row["gpu"] and row["peers_ms"]
    if not measured:
        return
    benchmark = results[measured[0]["source"]].get("benchmark")  # the script that wrote it
    if benchmark == "attention_peers":
        from benchmarks.attention_peers import card_markdown as attention_markdown
        assert attention_markdown(measured) in (entry.path / "card.md").read_text()
    elif benchmark == "losses_peers":
        from benchmarks.losses_peers import card_markdown as loss_markdown
        assert loss_markdown(measured) in (entry.path / "card.md").read_text()
    elif benchmark == "rowwise_peers":
        from benchmarks.rowwise_peers import card_markdown
        assert card_markdown(measured) in (entry.path / "card.md").read_text()
    else:
        assert markdown(measured) in (entry.path / "card.md").read_text()


@pytest.mark.parametrize("name", ROWWISE)
def test_rowwise_cards_say_what_was_checked_and_what_is_not_done(name):
    card = get_entry(name).card
    assert ROWWISE_KEYS <= set(card), ROWWISE_KEYS - set(card)
    assert set(card["backends"]) == {"triton", "cute"} and card["backward"] is True
    assert all(op.startswith("kernelagent::") for op in card["ops"]) and card["limits"] and card["shapes_verified"]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_triton_file_defines_model_and_public_function(name):
    tree = ast.parse(get_entry(name).backends["triton"].read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"ModelNew", name} <= defined
    if name in ROWWISE:  # the CuTe file mirrors it
        cute = ast.parse(get_entry(name).backends["cute"].read_text())
        assert {"ModelNew", name} <= {n.name for n in cute.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    ref = ast.parse(get_entry(name).reference_path.read_text())
    ref_defs = {n.name for n in ref.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"Model", "get_inputs", "get_init_inputs", "get_test_inputs"} <= ref_defs


def test_get_entry_unknown_name_lists_known():
    with pytest.raises(LibraryError, match="softmax"):
        get_entry("no_such_kernel")


def test_scan_of_another_root(tmp_path):
    good = tmp_path / "fam"
    good.mkdir()
    (good / "reference.py").write_text("")
    (good / "triton.py").write_text("")
    (good / "card.json").write_text(json.dumps({"name": "fam_v1", "family": "fam", "backends": ["triton"]}))
    (tmp_path / "no_card").mkdir()
    [entry] = list_entries(tmp_path)
    assert (entry.name, entry.family, list(entry.backends)) == ("fam_v1", "fam", ["triton"])
    assert get_entry("fam", tmp_path) == entry  # by folder name too
    (good / "card.json").write_text("{not json")
    with pytest.raises(LibraryError, match="not valid JSON"):
        list_entries(tmp_path)
