"""Runs under a tool (ncu, compute-sanitizer): the worker must get its request and report even when
the tool does not pass stdin on, and must keep the host's network namespace (the tool talks to it)."""

from pathlib import Path

import pytest

from kernelagent.problem import inspect_candidate, inspect_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.pool import WorkerPool

CASES = Path(__file__).parent / "cases" / "softmax"
# a stand-in for a tool: starts the worker with stdin taken away, as some launchers do
NO_STDIN = ["/bin/sh", "-c", 'exec "$@" < /dev/null', "tool"]


@pytest.fixture(scope="module")
def setup():
    with Verifier(VerifyOptions(device="cpu", seeds=1, timeout=120), pool=WorkerPool(size=0)) as v:
        pspec = inspect_problem(CASES / "op.py")
        yield v, pspec, v.reference(pspec)


def test_tool_run_gets_its_request_without_stdin_and_counts_every_launch(setup):
    v, pspec, pack = setup
    res = v.single_run(inspect_candidate(CASES / "two_kernels.py"), pspec, pack, NO_STDIN, main_set=False)
    assert res.status == "ok", res.stderr_tail
    assert res.result["single"]["launches"] == 2  # both kernels of the profiled forward
    assert res.result["environment"]["sandbox_network"] == "kept for a profiler"
    assert not (Path(res.out_dir) / "request.json").exists()  # read and removed before the candidate ran


def test_plain_workers_still_read_stdin_and_isolate_the_network(setup):
    v, _, _ = setup
    rep = v.verify(CASES / "op.py", CASES / "good.py")
    assert rep.accepted, rep.message
    assert rep.environment.get("sandbox_network") != "kept for a profiler"
