"""benchmarks/common.py's load_module: a file imported under a name of its own, beside another copy of it."""

from __future__ import annotations

import sys

import pytest

from benchmarks.common import load_module


def test_two_copies_of_one_file_load_as_separate_modules(tmp_path):
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text("VERSION = 1\ndef version():\n    return VERSION\n")
    new.write_text("VERSION = 2\ndef version():\n    return VERSION\n")
    a, b = load_module(old, "ka_test_copy_old"), load_module(str(new), "ka_test_copy_new")
    try:
        assert (a.version(), b.version()) == (1, 2)
        assert sys.modules["ka_test_copy_old"] is a and sys.modules["ka_test_copy_new"] is b
    finally:
        sys.modules.pop("ka_test_copy_old", None)
        sys.modules.pop("ka_test_copy_new", None)


def test_a_file_that_fails_to_import_leaves_no_module_behind(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(RuntimeError, match="boom"):
        load_module(bad, "ka_test_copy_bad")
    assert "ka_test_copy_bad" not in sys.modules
