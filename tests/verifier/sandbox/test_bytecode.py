"""Bytecode for what workers import is written once by a trusted child, never by a worker; a pooled GPU
worker touches the GPU only when the parent gives it its turn."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path

from kernelagent.verifier.protocol import GPU_TURN_FILE, IMPORTED_FILE
from kernelagent.verifier.sandbox import bytecode
from kernelagent.verifier.worker import main as worker_main

NAME = "kernelagent.verifier.worker.candidate"


def test_missing_bytecode_is_found_and_written_by_the_trusted_child():
    pyc = Path(importlib.util.cache_from_source(importlib.util.find_spec(NAME).origin))
    pyc.unlink(missing_ok=True)
    assert NAME in bytecode.missing()
    assert bytecode.compile_now()
    assert pyc.exists()
    assert NAME not in bytecode.missing()


def test_the_warm_up_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("KERNELAGENT_BYTECODE", "0")
    monkeypatch.setattr(bytecode, "missing", lambda: ["torch"])
    assert bytecode.warm_in_background() is None


def test_a_pooled_gpu_worker_waits_for_its_turn(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("KERNELAGENT_WORKER_GPU_TURN", "1")
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (worker_main._wait_for_gpu_turn(tmp_path), done.set()))
    waiter.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / IMPORTED_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (tmp_path / IMPORTED_FILE).exists()
    assert not done.wait(0.3)  # no turn yet: it still waits
    (tmp_path / GPU_TURN_FILE).write_text("")
    assert done.wait(30)
    waiter.join()


def test_a_worker_started_on_demand_does_not_wait(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("KERNELAGENT_WORKER_GPU_TURN", raising=False)
    worker_main._wait_for_gpu_turn(tmp_path)
    assert not os.listdir(tmp_path)


def test_a_worker_started_early_is_the_one_the_verify_gets(tmp_path: Path):
    from kernelagent.verifier.sandbox.pool import WorkerPool

    pool = WorkerPool(size=0, root=tmp_path, confinement="off")
    try:
        pool.prestart("cpu")
        early = pool._idle["cpu"][0]
        assert pool.acquire("cpu") is early
        early.discard()
    finally:
        pool.close()


def test_the_device_is_guessed_without_torch(monkeypatch):
    from kernelagent.verifier.api import likely_device

    assert likely_device("cpu") == "cpu" and likely_device("cuda") == "cuda"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert likely_device("auto") == "cpu"


def test_the_bytecode_child_gets_nothing_of_the_callers_environment(monkeypatch):
    """It only imports: no keys, no marks a test (or an attack) gave the caller's environment."""
    seen = {}

    def fake_run(cmd, env, **kw):  # noqa: ANN001, ANN202
        seen.update(env)
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("KERNELAGENT_TEST_MARK", "mark")
    monkeypatch.setattr(bytecode.subprocess, "run", fake_run)
    assert bytecode.compile_now()
    assert "ANTHROPIC_API_KEY" not in seen and "KERNELAGENT_TEST_MARK" not in seen
    assert seen["CUDA_VISIBLE_DEVICES"] == "" and "PYTHONPATH" in seen


def test_a_gpu_worker_says_it_imported_even_where_no_gpu_is_visible(tmp_path: Path, monkeypatch):
    """The parent waits for that word before giving the turn: without it a pool's start hung for minutes."""
    monkeypatch.setenv("KERNELAGENT_WORKER_GPU_TURN", "1")
    monkeypatch.delenv("KERNELAGENT_WORKER_WARM", raising=False)
    done = threading.Event()
    starter = threading.Thread(target=lambda: (worker_main._warm_imports("cuda", tmp_path), done.set()))
    starter.start()
    deadline = time.monotonic() + 120
    while not (tmp_path / IMPORTED_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (tmp_path / IMPORTED_FILE).exists()
    (tmp_path / GPU_TURN_FILE).write_text("")
    assert done.wait(120)
    starter.join()


def test_only_workers_waiting_for_a_quiet_gpu_are_refilled_after_a_verify(tmp_path: Path):
    """A CPU worker is replaced when handed out; refilling GPU workers after a CPU verify started a
    process the pool never used."""
    from kernelagent.verifier.sandbox.pool import WorkerPool

    pool = WorkerPool(size=1, root=tmp_path, confinement="off")
    try:
        pool.refill("cpu")
        assert pool._warming == [] and pool._idle == {}
    finally:
        pool.close()
