"""`kernelagent batch` on CPU: a folder of small problems with honest and wrong candidates, killed midway
and run again: nothing is verified twice and the summary comes out the same."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import HONEST, PROBLEMS, WRONG

ROOT = Path(__file__).resolve().parents[2]


def make_folder(root: Path) -> Path:
    """relu (one honest, one wrong candidate), scale (one honest), transpose (no candidate)."""
    folder = root / "problems"
    folder.mkdir()
    for name in ("relu", "scale", "transpose"):
        shutil.copy(PROBLEMS / "corpus" / f"{name}.py", folder / f"{name}.py")
    shutil.copy(HONEST / "dynamic" / "relu_view.py", folder / "relu_kernel.py")
    shutil.copy(WRONG / "dynamic" / "inplace_relu.py", folder / "relu_kernel_inplace.py")
    shutil.copy(HONEST / "dynamic" / "scale_weight.py", folder / "scale_kernel.py")
    return folder


def batch_cmd(folder: Path) -> list[str]:
    return [sys.executable, "-m", "kernelagent.cli", "batch", str(folder), "--device", "cpu", "--seeds", "1",
            "--json"]


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(KERNELAGENT_HOME=str(home), COLUMNS="100")
    return env


def verified_items(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("select count(*) from batch_items where candidate_sha != ''").fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # tables not created yet


@pytest.fixture(scope="module")
def killed_then_finished(tmp_path_factory):
    """Start the batch, kill its whole process group once the first candidate is recorded, run it again."""
    root = tmp_path_factory.mktemp("batch")
    home, folder = root / "home", make_folder(root)
    db = home / "kernelagent.db"
    proc = subprocess.Popen(batch_cmd(folder), cwd=ROOT, env=env_for(home), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 500
    while verified_items(db) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.3)
    killed_at = verified_items(db)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = subprocess.run(batch_cmd(folder), cwd=ROOT, env=env_for(home), capture_output=True, text=True,
                           timeout=900)
    again = subprocess.run(batch_cmd(folder), cwd=ROOT, env=env_for(home), capture_output=True, text=True,
                           timeout=300)
    return {"killed_at": killed_at, "first": first, "again": again, "db": db}


def test_the_kill_left_work_to_do(killed_then_finished):
    assert 1 <= killed_then_finished["killed_at"] < 3


def test_resumed_batch_verifies_each_candidate_once(killed_then_finished):
    run = killed_then_finished["first"]
    assert run.returncode == 0, run.stderr[-2000:]  # every problem with candidates has a correct one
    with sqlite3.connect(killed_then_finished["db"]) as conn:
        per_source = conn.execute("select count(*) from attempts group by source_sha").fetchall()
        runs = conn.execute("select kind, count(*) from runs group by kind").fetchall()
    assert sorted(n for (n,) in per_source) == [1, 1, 1]  # three candidates, each verified exactly once
    assert runs == [("verify", 2)]  # one verify run per problem with candidates


def test_summary_counts_and_is_identical_when_run_again(killed_then_finished):
    summary = json.loads(killed_then_finished["first"].stdout)
    assert (summary["problems"], summary["evaluated"], summary["no_candidate"], summary["candidates"]) == (3, 2, 1, 3)
    assert summary["correct"] == 2 and summary["speed_measured"] is False
    assert summary["eager"]["fast_0"] == 1.0 and summary["eager"]["fast_1"] is None
    relu = next(p for p in summary["per_problem"] if p["problem"] == "relu")
    assert relu["correct"] and relu["best_candidate"].endswith("relu_kernel.py")
    assert sum(relu["failures"].values()) == 1
    again = killed_then_finished["again"]
    assert json.loads(again.stdout) == summary
    with sqlite3.connect(killed_then_finished["db"]) as conn:
        assert conn.execute("select count(*) from attempts").fetchone()[0] == 3  # nothing verified again


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    missing = subprocess.run([sys.executable, "-m", "kernelagent.cli", "batch", str(tmp_path / "nope")], cwd=ROOT,
                             env=env_for(tmp_path), capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    gpus = subprocess.run([*batch_cmd(tmp_path)[:-1], "--gpus", "0"], cwd=ROOT, env=env_for(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert gpus.returncode == 2 and ("no problem files" in gpus.stderr or "--gpus" in gpus.stderr)
