"""The persistent reference cache: a hit in a new verifier, misses when the problem or a version changes,
one build under concurrent writers, LRU eviction within the size bound, corrupt entries dropped."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import threading
import time
from pathlib import Path

import pytest

from kernelagent.problem import inspect_problem
from kernelagent.verifier import refcache
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.refcache import RefCache
from tests.paths import HONEST, PROBLEMS

PROBLEM = PROBLEMS / "corpus" / "relu.py"
RELU_GOOD = HONEST / "dynamic" / "relu_view.py"


def _opts(**kw) -> VerifyOptions:
    return VerifyOptions(**{"device": "cpu", "seeds": 1, "timeout": 120, **kw})


def _reference(problem: Path, **kw):
    with Verifier(_opts(**kw)) as v:
        pack = v.reference(inspect_problem(problem))
        files = sorted(p.name for p in pack.dir.iterdir())
        return pack, files


def _fake_pack(tmp: Path, name: str, size: int) -> tuple[Path, Path]:
    pack, ref = tmp / name / "pack", tmp / name / "ref"
    pack.mkdir(parents=True)
    ref.mkdir(parents=True)
    (pack / "meta.json").write_text(json.dumps({"trials": []}))
    (ref / "ref_0.pt").write_bytes(os.urandom(size))
    return pack, ref


def _publish(cache: RefCache, tmp: Path, key: str, size: int = 1000) -> None:
    pack, ref = _fake_pack(tmp, key, size)
    assert cache.publish(key, {"problem": key}, pack, ref, {"problem": {"name": key}}, {}, 7, 1.0)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One pack built and stored in a home of its own, shared by the tests that read it back."""
    home = tmp_path_factory.mktemp("cachehome")
    old = os.environ.get("KERNELAGENT_HOME")
    os.environ["KERNELAGENT_HOME"] = str(home)
    try:
        pack, files = _reference(PROBLEM)
    finally:
        if old is None:
            os.environ.pop("KERNELAGENT_HOME")
        else:
            os.environ["KERNELAGENT_HOME"] = old
    return home, pack, files


def test_second_verifier_hits_the_cache_and_keeps_the_packs_secret(built, monkeypatch):
    home, first, files1 = built
    monkeypatch.setenv("KERNELAGENT_HOME", str(home))
    assert first.meta["cache"]["hit"] is False and first.meta["cache"]["stored"] is True
    second, files2 = _reference(PROBLEM)
    assert second.meta["cache"]["hit"] is True
    assert second.secret == first.secret            # the candidate is seeded like the reference was
    assert files1 == files2 and "meta.json" in files2 and "entry.json" not in files2
    assert second.meta["trials"] == first.meta["trials"]
    entry = next((home / "cache" / "refs").glob("[0-9a-f]*"))
    assert json.loads((entry / "entry.json").read_text())["secret"] == first.secret
    # the copy the candidate reads (pack dir) never holds the secret
    assert str(first.secret) not in (entry / "pack" / "meta.json").read_text()


def test_a_verify_from_the_cache_accepts_the_honest_kernel(built, monkeypatch):
    monkeypatch.setenv("KERNELAGENT_HOME", str(built[0]))
    with Verifier(_opts()) as v:
        report = v.verify(PROBLEM, RELU_GOOD)
        assert v.reference(inspect_problem(PROBLEM)).meta["cache"]["hit"] is True
    assert report.accepted, report.message


def test_changed_problem_misses(built, monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELAGENT_HOME", str(built[0]))
    changed = tmp_path / "relu.py"
    changed.write_text(PROBLEM.read_text() + "\n# a comment changes the content hash\n")
    with Verifier(_opts()) as v:
        same, other = v.pack_key(inspect_problem(PROBLEM)), v.pack_key(inspect_problem(changed))
    assert same != other
    assert RefCache().restore(same, tmp_path / "p1", tmp_path / "r1") is not None
    assert RefCache().restore(other, tmp_path / "p2", tmp_path / "r2") is None


def test_changed_version_or_format_misses(monkeypatch):
    spec = inspect_problem(PROBLEM)
    with Verifier(_opts()) as v:
        before = v.pack_key(spec)
        facts = dict(refcache.machine_facts("cpu"), torch="9.9.9")
        monkeypatch.setattr(refcache, "machine_facts", lambda device: facts)
        assert v.pack_key(spec) != before
        monkeypatch.setattr(refcache, "PACK_FORMAT", refcache.PACK_FORMAT + 1)
        assert len({before, v.pack_key(spec)}) == 2
    seeds = Verifier(_opts(seeds=2))
    try:
        assert seeds.pack_key(spec) != before
    finally:
        seeds.close()


def test_disabled_cache_writes_nothing(_isolated_home):
    pack, _ = _reference(PROBLEM, cache=False)
    assert pack.meta["cache"] == {"hit": False, "key": pack.meta["cache"]["key"], "stored": False, "disabled": True}
    assert RefCache().entries() == []


def test_concurrent_verifiers_build_once():
    spec = inspect_problem(PROBLEM)
    notes: list[dict] = []

    def one() -> None:
        with Verifier(_opts()) as v:
            notes.append(v.reference(spec).meta["cache"])

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(n["hit"] for n in notes) == [False, True, True], notes
    assert len(RefCache().entries()) == 1


def _race(root: str, key: str, size: int, out: str) -> None:
    cache = RefCache(Path(root), limit=10**9)
    pack, ref = _fake_pack(Path(out), f"{key}-{os.getpid()}", size)
    ok = cache.publish(key, {"problem": key}, pack, ref, {"problem": {"name": key}}, {}, os.getpid(), 1.0)
    Path(out, f"done-{os.getpid()}").write_text(str(ok))


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    root = tmp_path / "cache"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_race, args=(str(root), "k" * 32, 200_000, str(tmp_path))) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert all(p.exitcode == 0 for p in procs)
    assert [f.read_text() for f in tmp_path.glob("done-*")] == ["True"] * 4
    cache = RefCache(root, limit=10**9)
    assert [e.key for e in cache.entries()] == ["k" * 32]
    assert not list(root.glob(".tmp-*"))
    hit = cache.restore("k" * 32, tmp_path / "p", tmp_path / "r")
    assert hit is not None and hit.secret in {p.pid for p in procs}
    assert (tmp_path / "r" / "ref_0.pt").stat().st_size == 200_000


def test_build_lock_excludes_a_second_holder(tmp_path):
    cache = RefCache(tmp_path, limit=10**9)
    with cache.build_lock("a" * 32, wait=1.0) as first:
        t0 = time.monotonic()
        with cache.build_lock("a" * 32, wait=0.3) as second:
            assert first and not second
        assert time.monotonic() - t0 >= 0.3
    with cache.build_lock("a" * 32, wait=0.0) as again:
        assert again


def test_lru_eviction_keeps_the_total_under_the_bound(tmp_path):
    cache = RefCache(tmp_path / "c", limit=2500)
    for key in ("a", "b"):
        _publish(cache, tmp_path, key * 32)
        time.sleep(0.02)
    # using "a" makes "b" the least recently used
    assert cache.restore("a" * 32, tmp_path / "p", tmp_path / "r") is not None
    time.sleep(0.02)
    _publish(cache, tmp_path, "c" * 32)
    keys = {e.key[0] for e in cache.entries()}
    assert keys == {"a", "c"}
    assert cache.info()["bytes"] <= 2500
    assert not cache.publish("d" * 32, {}, *_fake_pack(tmp_path, "big", 5000), {}, {}, 1, 1.0)  # over the bound
    assert cache.clear()[0] == 2 and cache.entries() == []


def test_bad_size_bound_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("KERNELAGENT_CACHE_MAX_GB", "lots")
    with pytest.raises(ValueError, match="KERNELAGENT_CACHE_MAX_GB"):
        refcache.max_bytes()
    monkeypatch.setenv("KERNELAGENT_CACHE_MAX_GB", "0.5")
    assert refcache.max_bytes() == 500_000_000


def test_truncated_entry_is_dropped(tmp_path):
    cache = RefCache(tmp_path / "c", limit=10**9)
    _publish(cache, tmp_path, "e" * 32)
    (cache.entry_dir("e" * 32) / "ref" / "ref_0.pt").write_bytes(b"short")
    assert cache.restore("e" * 32, tmp_path / "p", tmp_path / "r") is None
    assert cache.entries() == []


def test_an_old_entry_is_drawn_anew(tmp_path, monkeypatch):
    cache = RefCache(tmp_path / "c", limit=10**9)
    _publish(cache, tmp_path, "f" * 32)
    assert RefCache(tmp_path / "c", limit=10**9, age=3600).restore("f" * 32, tmp_path / "p", tmp_path / "r")
    assert RefCache(tmp_path / "c", limit=10**9, age=0.0).restore("f" * 32, tmp_path / "p", tmp_path / "r") is None
    assert cache.entries() == []
    monkeypatch.setenv("KERNELAGENT_CACHE_MAX_AGE_HOURS", "2")
    assert RefCache(tmp_path / "c").age == 7200.0


@pytest.mark.gpu
def test_gpu_pack_with_baselines_and_timing_plan_is_reused():
    """On the GPU a pack also holds the baselines and the timing plan: a verifier in a new process (here: a
    new Verifier, empty memory) must time the candidate against the cached ones and accept it."""
    problem = PROBLEMS / "bench" / "softmax_16x16384.py"
    kernel = PROBLEMS.parent / "examples" / "softmax" / "kernel.py"
    with Verifier(VerifyOptions(device="cuda", seeds=2)) as v:
        first = v.verify(problem, kernel)
        built = v.reference(inspect_problem(problem))
    assert first.accepted, first.message
    with Verifier(VerifyOptions(device="cuda", seeds=2)) as v:
        second = v.verify(problem, kernel)
        hit = v.reference(inspect_problem(problem))
    assert hit.meta["cache"]["hit"] is True and hit.meta["baseline"] == built.meta["baseline"]
    assert second.accepted, second.message
    assert second.metrics.get("candidate_ms") and second.metrics.get("eager_ms") == first.metrics.get("eager_ms")
