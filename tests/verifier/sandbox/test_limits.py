"""Bounds the parent keeps on a worker: only a tail of its output, its memory counted over every process
it started and its files in RAM-backed scratch, a bounded file scan, a limit relative to available memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelagent.verifier.sandbox import limits
from kernelagent.verifier.sandbox.remove import remove_tree


def test_output_tail_keeps_the_end_and_counts_everything_without_holding_it():
    r, w = os.pipe()
    tail = limits.OutputTail(r, "stdout")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    writer = subprocess.Popen([sys.executable, "-c", "import os\nfor i in range(512): os.write(1, b'x' * (1 << 20))\n"
                               "os.write(1, b'THE END')"], stdout=w)
    os.close(w)
    writer.wait(120)
    tail.wait(30)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert tail.total == 512 * (1 << 20) + 7
    assert tail.text(100).endswith("xxxTHE END") and len(tail.text(100)) == 100
    assert grown_mb < 64, f"the parent grew by {grown_mb:.0f} MiB reading 512 MiB"


def test_dir_bytes_counts_allocated_blocks_and_stops_at_too_many_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data").write_bytes(os.urandom(1 << 20))
    with open(tmp_path / "sparse", "wb") as f:
        f.truncate(1 << 30)  # 1 GiB that holds nothing
    size = limits.dir_bytes([tmp_path])
    assert (1 << 20) <= size < (1 << 20) + (1 << 16)
    for i in range(30):
        (tmp_path / f"f{i}").touch()
    with pytest.raises(limits.TooManyFiles):
        limits.dir_bytes([tmp_path], max_files=20)


def test_worker_pids_follow_children_that_left_the_process_group():
    code = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while len(limits.worker_pids(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = limits.worker_pids(proc.pid)
        assert proc.pid in pids and len(pids) == 2  # the setsid child is in another group, still counted
    finally:
        for pid in limits.worker_pids(proc.pid):
            os.kill(pid, 9)
        proc.wait()


def test_memory_meter_adds_files_in_ram_backed_scratch(tmp_path):
    shm = Path("/dev/shm")
    if not limits.ram_backed(shm):
        pytest.skip("no RAM-backed /dev/shm here")
    work = shm / f"ka-limits-test-{os.getpid()}"
    work.mkdir()
    try:
        (work / "blob").write_bytes(b"\1" * (64 << 20))
        meter = limits.MemoryMeter([work])
        rss, files = meter.sample(os.getpid())
        assert 64 <= files < 65 and rss > 10
        assert limits.MemoryMeter([tmp_path]).dirs == [] or not limits.ram_backed(tmp_path)
    finally:
        import shutil
        shutil.rmtree(work)


def test_default_limit_is_a_share_of_available_memory(monkeypatch):
    monkeypatch.setattr(limits, "available_mb", lambda: 10_000)
    assert limits.default_memory_limit_mb() == 7_500
    assert "available" in limits.LIMIT_BASIS


def test_a_folder_nested_past_path_max_stops_the_scan_instead_of_hiding_its_files(tmp_path):
    """Files below a path longer than PATH_MAX cannot be named by path: the scan said nothing of them and a
    worker held gigabytes past its limit. What cannot be measured is a reason to stop the worker."""
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(100):  # 100 x 51 characters: beyond PATH_MAX (4096)
        os.mkdir("d" * 50, dir_fd=fd)
        sub = os.open("d" * 50, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.close(os.open("hidden", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    os.close(fd)
    try:
        with pytest.raises(limits.Unmeasurable):
            limits.dir_bytes([tmp_path])
    finally:
        remove_tree(tmp_path / ("d" * 50))


def test_memory_held_through_descriptors_is_counted(tmp_path):
    """A memfd or an unlinked open file holds memory no folder shows (2 GiB went unseen past a 1.2 GiB
    limit); the meter counts them through the processes' descriptors, once each."""
    child = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "m = os.memfd_create('balloon'); os.write(m, b'x' * (8 << 20))\n"
        f"f = open({str(tmp_path / 'gone')!r}, 'wb'); f.write(b'y' * (4 << 20)); f.flush()\n"
        f"os.unlink({str(tmp_path / 'gone')!r}); os.dup(m)\n"
        "print('ready', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        held = limits.held_by_descriptors([child.pid])
        assert held >= 12 << 20 and held < 13 << 20  # 8 MiB + 4 MiB, the duplicated memfd once
        assert limits.held_by_descriptors([os.getpid()]) < 1 << 20
    finally:
        child.kill()
        child.wait()
