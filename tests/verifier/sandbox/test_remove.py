"""Removing what a worker left: a folder chain deeper than Python's recursion and longer than PATH_MAX goes,
links are not followed out of it, and the sweep of dead verifiers' folders survives such a tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelagent.verifier.sandbox.remove import remove_tree
from kernelagent.verifier.sandbox.spawn import sweep_stale

DEPTH = max(1500, sys.getrecursionlimit() + 200)  # deeper than a recursive remover can go


def _deep_chain(top: Path, outside: Path) -> None:
    """DEPTH folders of 50-character names (beyond PATH_MAX as a path), files and links out on the way."""
    fd = os.open(top, os.O_RDONLY)
    for i in range(DEPTH):
        os.mkdir("d" * 50, dir_fd=fd)
        sub = os.open("d" * 50, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = sub
        if i % 300 == 0:
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
            os.symlink(outside, "out", dir_fd=fd)
    os.close(fd)


@pytest.fixture
def outside(tmp_path: Path):
    keep = tmp_path / "outside"
    keep.mkdir()
    (keep / "keep.txt").write_text("the caller's")
    yield keep
    for entry in tmp_path.iterdir():  # a chain left by a failure would break pytest's own clean-up later
        remove_tree(entry)


def test_a_chain_deeper_than_recursion_and_path_max_is_removed(tmp_path: Path, outside: Path):
    top = tmp_path / "work"
    top.mkdir()
    _deep_chain(top, outside)
    (top / ("d" * 50)).chmod(0)  # and made unreadable at the top
    with pytest.raises((RecursionError, OSError)):
        shutil.rmtree(top, ignore_errors=True)  # the control: what the verifier used before
    assert remove_tree(top) and not top.exists()
    assert (outside / "keep.txt").read_text() == "the caller's"  # the links were not followed


def test_a_file_or_a_missing_path_is_fine(tmp_path: Path):
    f = tmp_path / "f"
    f.write_text("x")
    assert remove_tree(f) and not f.exists()
    assert remove_tree(tmp_path / "missing")


def test_the_sweep_of_dead_verifiers_survives_a_deep_tree(tmp_path: Path, outside: Path):
    dead = tmp_path / "ka-worker-999999999-abc"  # no such process
    dead.mkdir()
    _deep_chain(dead, outside)
    assert sweep_stale(tmp_path) == 1
    assert not dead.exists() and (outside / "keep.txt").exists()


def test_wide_and_deep_trees_go_with_few_descriptors(tmp_path: Path):
    """Each folder is scanned once (thousands of siblings made a rescanning walk take minutes) and one folder
    is open at a time (a walk holding one per level ran out of descriptors under a low limit)."""
    script = (
        "import os, resource, sys\n"
        "from kernelagent.verifier.sandbox.remove import remove_tree\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "top = sys.argv[1]\n"
        "for i in range(3000):\n"
        "    os.mkdir(f'{top}/wide{i}')\n"
        "fd = os.open(top, os.O_RDONLY)\n"
        "for i in range(600):\n"
        "    os.mkdir('deep', dir_fd=fd)\n"
        "    sub = os.open('deep', os.O_RDONLY, dir_fd=fd)\n"
        "    os.close(fd)\n"
        "    fd = sub\n"
        "os.close(fd)\n"
        "print(remove_tree(top), os.path.exists(top))\n")
    top = tmp_path / "tree"
    top.mkdir()
    out = subprocess.run([sys.executable, "-c", script, str(top)], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.split() == ["True", "False"], out.stderr
