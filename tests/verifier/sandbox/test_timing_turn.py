"""The worker's handshakes with the parent, both sides, without a GPU. The timing turn: the parent watches
for the worker's request only once the trial inputs are delivered and does not count the wait against the
worker's time limit; the worker says it is ready and waits for the word in its read-only `-in` folder. The
delivery: inputs found in `-in` before the worker said its model was built mean a forged marker."""

from __future__ import annotations

import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from kernelagent.verifier import protocol as P
from kernelagent.verifier.protocol import CandidateFacts
from kernelagent.verifier.sandbox.pool import Worker, _Queueing, _waited
from kernelagent.verifier.worker import candidate as cand


def test_a_turn_asked_before_the_inputs_came_waits_for_them(tmp_path):
    marker = tmp_path / P.TIMING_WANTED_FILE
    marker.write_text("1")               # written early (the candidate can write in its own folder)
    delivered, stop, given = threading.Event(), threading.Event(), threading.Event()
    t = threading.Thread(target=Worker._await_marker, args=(marker, given.set, stop, delivered))
    t.start()
    assert not given.wait(0.2)           # not before the delivery
    delivered.set()
    assert given.wait(10)
    t.join(10)


def test_marker_watch_ends_with_the_run(tmp_path):
    stop, given = threading.Event(), threading.Event()
    t = threading.Thread(target=Worker._await_marker, args=(tmp_path / "never", given.set, stop))
    t.start()
    stop.set()
    t.join(10)
    assert not t.is_alive() and not given.is_set()


def test_constructed_callback_sets_what_follows(tmp_path):
    marker = tmp_path / P.CONSTRUCTED_FILE
    marker.write_text("1")
    stop, then, calls = threading.Event(), threading.Event(), []
    Worker._await_marker(marker, lambda: calls.append(1), stop, None, then)
    assert calls == [1] and then.is_set()


def test_time_in_line_is_added_to_the_limit():
    queue = _Queueing()
    assert queue.seconds() == 0.0
    with queue:
        time.sleep(0.05)
        assert queue.seconds() >= 0.05          # the current wait counts while it lasts
    done = queue.seconds()
    time.sleep(0.02)
    assert queue.seconds() == done              # and stops counting when it ends


def test_waited_raises_only_once_the_time_left_is_spent():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert _waited(proc, 5.0) is False       # still running after a 1 s slice: keep waiting
        assert _waited(proc, 0.2) is False       # the last slice: the caller works out what is left anew
        with pytest.raises(subprocess.TimeoutExpired):
            _waited(proc, 0.0)
    finally:
        proc.kill()
        proc.wait()
    done = subprocess.Popen(["true"])
    done.wait()
    assert _waited(done, 0.5) is True


def _runner(tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    out.mkdir()
    runner = object.__new__(cand.CandidateRunner)
    runner.inbox, runner.out, runner.facts = inbox, out, CandidateFacts()
    return runner


def test_worker_says_it_is_ready_then_waits_for_the_turn(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(cand.torch, "cuda", SimpleNamespace(synchronize=lambda: synced.append(1)))
    runner = _runner(tmp_path)
    t = threading.Thread(target=runner.wait_for_timing_turn)
    t.start()
    wanted = runner.out / P.TIMING_WANTED_FILE
    for _ in range(500):
        if wanted.exists():
            break
        time.sleep(0.01)
    assert wanted.exists() and synced == [1], "its own GPU work finished before it asks"
    time.sleep(0.1)
    assert t.is_alive(), "no timing before the parent's word"
    (runner.inbox / P.TIMING_TURN_FILE).write_text("")
    t.join(10)
    assert not t.is_alive()
    assert runner.facts.io["timing_wait_seconds"] >= 0.1


def test_worker_gives_up_when_no_turn_comes(tmp_path, monkeypatch):
    monkeypatch.setattr(cand.torch, "cuda", SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(cand, "TURN_WAIT_S", 0.05)
    with pytest.raises(RuntimeError, match="turn"):
        _runner(tmp_path).wait_for_timing_turn()


def test_inputs_delivered_before_the_model_was_built_are_a_forgery(tmp_path):
    runner = _runner(tmp_path)
    runner.req = SimpleNamespace(candidate="c.py")
    (runner.inbox / P.META_FILE).write_text("{}")
    (runner.inbox / P.INIT_FILE).write_text("")
    (runner.inbox / P.inputs_file(0)).write_text("")   # the parent linked them: someone said "constructed"
    with pytest.raises(cand.CandidateFailure) as failure:
        runner.receive_trials()
    assert failure.value.category == "policy_violation" and "constructed" in failure.value.message
    assert not (runner.out / P.CONSTRUCTED_FILE).exists()
