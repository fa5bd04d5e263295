"""The user's own library shelf through the CLI: add (re-verified, complete card) -> list -> match -> remove,
in a temporary KERNELAGENT_HOME, with the installed package left untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelagent.kernels import LIBRARY_ROOT
from tests.paths import HONEST, PROBLEMS

ROOT = Path(__file__).resolve().parents[2]
RELU, RELU_KERNEL = PROBLEMS / "corpus" / "relu.py", HONEST / "dynamic" / "relu_view.py"


def traces(folder: Path, name: str) -> list[str]:
    """Files of the installed shelf that name the new entry (none: the package was not written to)."""
    return [str(p) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            and (name in str(p.relative_to(folder)) or name.encode() in p.read_bytes())]


def ka(*args: str, home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(KERNELAGENT_HOME=str(home), COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "kernelagent.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    home = tmp_path_factory.mktemp("libhome")
    steps = {"add": ka("library", "add", str(RELU_KERNEL), "--ref", str(RELU), "--name", "my_relu", "--device",
                       "cpu", "--json", home=home)}
    folder = home / "library" / "my_relu"
    steps["files"] = {p.name: p.read_text() for p in folder.iterdir()} if folder.is_dir() else {}
    steps["list"] = ka("library", "list", "--json", home=home)
    steps["match"] = ka("library", "match", str(RELU), "--device", "cpu", "--json", home=home)
    steps["again"] = ka("library", "add", str(RELU_KERNEL), "--ref", str(RELU), "--name", "my_relu", home=home)
    steps["shipped"] = ka("library", "remove", "softmax", home=home)
    steps["remove"] = ka("library", "remove", "my_relu", home=home)
    steps["after"] = ka("library", "list", "--json", home=home)
    steps["traces"] = traces(LIBRARY_ROOT, "my_relu")
    steps["home"] = home
    return steps


def test_add_reverifies_and_writes_a_complete_card(round_trip):
    add = round_trip["add"]
    assert add.returncode == 0, add.stderr[-2000:]
    doc = json.loads(add.stdout)
    assert doc["report"]["verdict"] == "accepted" and doc["added"].endswith("library/my_relu")
    files = round_trip["files"]
    assert set(files) == {"triton.py", "reference.py", "card.json", "card.md", "report.json"}
    assert files["triton.py"] == RELU_KERNEL.read_text() and files["reference.py"] == RELU.read_text()
    assert json.loads(files["report.json"])["verdict"] == "accepted"
    card = json.loads(files["card.json"])
    assert card["backends"] == ["triton"] and card["signature"] and card["dtypes"] == ["float32"]
    assert any("[4, 96]" in s or "4, 96" in s for s in card["shapes_verified"]), card["shapes_verified"]
    assert card["tolerance"] == "per-dtype defaults" and card["origin"]["from"] == "file"
    [row] = card["verified"]
    assert row["device"] == "cpu" and row["torch"] and row["backend"] == "triton" and "candidate_ms" not in row
    assert "my_relu" in files["card.md"] and "not measured" in files["card.md"]


def test_added_entry_is_listed_and_matched_beside_the_shipped_shelf(round_trip):
    listed = {e["name"]: e["origin"] for e in json.loads(round_trip["list"].stdout)}
    assert listed["my_relu"] == "user" and listed["softmax"] == "shipped"
    match = round_trip["match"]
    assert match.returncode == 0, match.stderr[-2000:]
    hits = {r["name"]: r for r in json.loads(match.stdout)}
    assert hits["my_relu"]["match"] and hits["my_relu"]["origin"] == "user"
    assert not hits["softmax"]["match"]


def test_names_are_not_reused_and_shipped_entries_stay(round_trip):
    assert round_trip["again"].returncode == 2 and "already exists" in round_trip["again"].stderr
    assert round_trip["shipped"].returncode == 2 and "ships with kernelagent" in round_trip["shipped"].stderr
    assert "Traceback" not in round_trip["again"].stderr + round_trip["shipped"].stderr


def test_remove_deletes_only_the_users_entry_and_the_package_is_untouched(round_trip):
    assert round_trip["remove"].returncode == 0, round_trip["remove"].stderr
    assert not (round_trip["home"] / "library" / "my_relu").exists()
    names = {e["name"] for e in json.loads(round_trip["after"].stdout)}
    assert "my_relu" not in names and "softmax" in names
    assert round_trip["traces"] == []


def test_add_from_a_file_needs_the_problem(tmp_path):
    res = ka("library", "add", str(RELU_KERNEL), home=tmp_path)
    assert res.returncode == 2 and "--ref" in res.stderr and "Traceback" not in res.stderr
    unknown = ka("library", "add", "abc123", home=tmp_path)
    assert unknown.returncode == 2 and "neither a file nor an attempt or run id" in unknown.stderr
