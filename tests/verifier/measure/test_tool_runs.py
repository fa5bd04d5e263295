"""Runs under a tool (ncu, compute-sanitizer): the worker must get its request and report even when
the tool does not pass stdin on, and must keep the host's network namespace (the tool talks to it)."""

from pathlib import Path

import pytest

from kernelagent.problem import inspect_candidate, inspect_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool
from tests.paths import SOFTMAX_PROBLEM, softmax_case

# a stand-in for a tool: stays the parent of the worker (as ncu and compute-sanitizer do) and starts it
# with stdin taken away, as some launchers do
NO_STDIN = ["/bin/sh", "-c", '"$@" < /dev/null; exit $?', "tool"]


@pytest.fixture(scope="module")
def setup():
    with Verifier(VerifyOptions(device="cpu", seeds=1, timeout=120), pool=WorkerPool(size=0)) as v:
        pspec = inspect_problem(SOFTMAX_PROBLEM)
        yield v, pspec, v.reference(pspec)


def test_tool_run_gets_its_request_without_stdin_and_counts_every_launch(setup):
    v, pspec, pack = setup
    res = v.single_run(inspect_candidate(softmax_case("two_kernels")), pspec, pack, NO_STDIN, main_set=False)
    assert res.status == "ok", res.stderr_tail
    assert res.result["single"]["launches"] == 2  # both kernels of the profiled forward
    # a tool talks to its injected library over local sockets: a private network namespace with lo up
    assert res.result["environment"]["confinement"]["loopback"] == "up"
    assert not (Path(res.out_dir) / "request.json").exists()  # read and removed before the candidate ran


def test_plain_workers_still_read_stdin_and_isolate_the_network(setup):
    v, _, _ = setup
    rep = v.verify(SOFTMAX_PROBLEM, softmax_case("good"))
    assert rep.accepted, rep.message
    walls = rep.environment["confinement"]
    assert walls["loopback"] == "down" and "net" in walls["namespaces"]


def test_memory_bound_covers_the_worker_below_a_tool(setup):
    """The watchdog sums the whole process group: under a tool the worker is not the process started.
    At the same bound a plain kernel runs and one that holds 1 GiB of host memory is stopped."""
    v, pspec, pack = setup
    old = v.options.memory_limit_mb
    v.options.memory_limit_mb = 1300
    try:
        plain = v.single_run(inspect_candidate(softmax_case("good")), pspec, pack, NO_STDIN, main_set=False)
        hog = v.single_run(inspect_candidate(softmax_case("host_hog")), pspec, pack, NO_STDIN, main_set=False)
    finally:
        v.options.memory_limit_mb = old
    assert plain.status == "ok", (plain.status, plain.stderr_tail)
    assert hog.status == "oom", (hog.status, hog.stderr_tail)


def test_group_rss_counts_children():
    import subprocess
    import sys
    import time

    from kernelagent.verifier.sandbox.spawn import group_rss_mb, kill_group, rss_mb

    code = "x = bytearray(300 << 20); import time; time.sleep(30)"
    proc = subprocess.Popen(["/bin/sh", "-c", f'"{sys.executable}" -c "{code}" & wait'], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while group_rss_mb(proc.pid) < 300 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert group_rss_mb(proc.pid) >= 300
        assert rss_mb(proc.pid) < 100  # the shell itself: what the watchdog used to read
    finally:
        kill_group(proc)
        proc.wait()


@pytest.mark.parametrize("helps_padding", [True, False])
def test_memcheck_gets_padding_between_allocations_when_the_tool_offers_it(tmp_path, monkeypatch, helps_padding):
    """Back-to-back allocations hide a read just past a tensor from memcheck (seen on the H200): the
    prefix asks for padding when this compute-sanitizer lists the option, and never passes an unknown one."""
    from kernelagent.verifier.measure import profiling

    tool = tmp_path / "compute-sanitizer"
    padding_line = "echo '  --padding arg  bytes after'\n" if helps_padding else ""
    tool.write_text("#!/bin/sh\necho '  --print-limit arg'\n" + padding_line)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    profiling._sanitizer_has.cache_clear()
    memcheck = profiling.sanitizer_prefix("memcheck", tmp_path / "log")
    racecheck = profiling.sanitizer_prefix("racecheck", tmp_path / "log")
    profiling._sanitizer_has.cache_clear()
    assert memcheck[0] == str(tool) and memcheck[1:3] == ["--tool", "memcheck"]
    assert ("--padding" in memcheck) is helps_padding
    if helps_padding:
        assert int(memcheck[memcheck.index("--padding") + 1]) >= 4096
    assert "--padding" not in racecheck  # shared-memory hazards: allocation gaps change nothing there
