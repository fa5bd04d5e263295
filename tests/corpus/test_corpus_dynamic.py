"""Dynamic cheat corpus: each file in tests/corpus/wrong/dynamic/ must be rejected under its category, by the
worker's run-time checks alone where it says `# policy: off`; honest files must be accepted.

Header of a candidate file:
    # expect: CATEGORY        the report's category
    # policy: off|on          static AST policy off (dynamic layers alone) or on
    # problem: NAME           problems/corpus/NAME.py
    # needle: TEXT            must appear in the report's message or feedback
    # isolated: yes           verified by a separate parent that was started with a fake API key
    # writes: FILE            the escape tries to create FILE outside its work directory
    # gpu: yes                needs CUDA (side streams, races); run on the H200

Escape files in tests/corpus/wrong/escape/ attack the OS walls rather than the verdict; each runs from a
parent of its own with planted keys, with the Python tripwires off (the walls alone) and on, and must
leave no trace. Their header:
    # problem: NAME           problems/corpus/NAME.py
    # attack: TEXT            the class of attack
    # writes: FILE, FILE      files it tries to create in the escape folder
    # leaks: yes              it puts what it read into the report, transformed
    # floods: yes             it writes gigabytes to stdout
    # fills: yes              it fills its RAM-backed work dir (the memory watchdog must stop it)
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.report import CATEGORIES, Report
from kernelagent.verifier.sandbox.pool import WorkerPool
from tests.paths import CORPUS, WRONG
from tests.paths import HONEST as HONEST_DIR
from tests.paths import PROBLEMS as PROBLEM_HOME

DYN = WRONG / "dynamic"
PROBLEMS = PROBLEM_HOME / "corpus"
SECRET = "sk-test-secret-123"

# Known gaps of the verifier: (test, candidate) -> what goes wrong. Each is a strict xfail, so the
# test starts failing (XPASS) the day the verifier is fixed and the entry must be removed.
_NUMPY = (
    "NumPy (like pure Python or ctypes) computes below the aten dispatcher, so OpRecorder sees only the "
    "allowed copies and allocations; a copy kernel satisfies the launch count; accepted")
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("rejected", "fallback_numpy"): _NUMPY,
    ("category", "fallback_numpy"): _NUMPY,
}


# Cases the OS walls stop before the Python tripwire they were written against fires: when confinement
# applied, they are rejected with this (category, needle) instead of their header's.
WALLED_FIRST: dict[str, tuple[str, str]] = {
    # the pid namespace hides the caller's pid and Landlock the scratch folder: no pack is found to link
    "escape_hardlink_ref": ("runtime_error", "KeyError"),
}


def _expected(case: Case, report: dict) -> tuple[str, str]:
    walled = ((report.get("environment") or {}).get("confinement") or {}).get("level") == "strict"
    return WALLED_FIRST[case.name] if walled and case.name in WALLED_FIRST else (case.expect, case.needle)


def _parent_environ_readable() -> bool:
    """Whether this machine lets a process read its parent's /proc/<pid>/environ (Linux, same user: yes)."""
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb"):
            return True
    except OSError:
        return False


# escape_proc_environ: the audit hook refuses /proc/<other pid>/..., and the parent redacts its own
# secrets from every report, so the key stays out even where the parent's environment is readable.


@dataclass(frozen=True)
class Case:
    path: Path
    expect: str
    policy: str
    problem: Path
    needle: str
    isolated: bool = False
    gpu: bool = False
    writes: str = ""

    @property
    def name(self) -> str:
        return self.path.stem


def _header(text: str, key: str, default: str | None = None) -> str:
    match = re.search(rf"^# {key}: (.+)$", text, re.MULTILINE)
    if match is None:
        if default is None:
            raise AssertionError(f"missing '# {key}:' line")
        return default
    return match.group(1).strip()


def load_case(path: Path) -> Case:
    text = path.read_text()
    return Case(path=path, expect=_header(text, "expect", "ok"), policy=_header(text, "policy", "on"),
                problem=PROBLEMS / f"{_header(text, 'problem')}.py", needle=_header(text, "needle", ""),
                isolated=_header(text, "isolated", "no") == "yes", gpu=_header(text, "gpu", "no") == "yes",
                writes=_header(text, "writes", ""))


CHEATS = [load_case(p) for p in sorted(DYN.glob("*.py")) if not p.name.startswith("_")]
CHEATS.sort(key=lambda c: c.policy)  # policy-off files first: one warm Verifier at a time
HONEST = [load_case(p) for p in sorted((HONEST_DIR / "dynamic").glob("*.py"))]
LOCAL = [c for c in CHEATS if not c.isolated and not c.gpu]
ISOLATED = [c for c in CHEATS if c.isolated]
GPU = [c for c in CHEATS if c.gpu]


def params(test: str, cases: list[Case]) -> list:
    out = []
    for case in cases:
        reason = KNOWN_GAPS.get((test, case.name))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def verifiers():
    """One CPU Verifier (warm pool, shared reference packs) per policy mode, built when first asked for."""
    made: dict[str, Verifier] = {}

    def get(policy: str) -> Verifier:
        if policy not in made:
            opts = VerifyOptions(device="cpu", timeout=60, seeds=2, static_policy=policy == "on")
            made[policy] = Verifier(opts, pool=WorkerPool(size=1))
            made[policy].pool.warm("cpu", "aot")
        return made[policy]

    yield get
    for v in made.values():
        v.close()


_REPORTS: dict[tuple[str, str], Report] = {}


def report_for(case: Case, verifiers) -> Report:
    key = (case.name, case.policy)
    if key not in _REPORTS:
        _REPORTS[key] = verifiers(case.policy).verify(case.problem, case.path)
    return _REPORTS[key]


@pytest.fixture(scope="module", autouse=True)
def separate_parent(request, tmp_path_factory):
    """Starts the escape files' own parent (exec'd with a fake API key, like the CLI) at module set-up,
    so it runs alongside the in-process tests; only when an escape test was selected."""
    if not any("isolated" in getattr(item, "fixturenames", ()) for item in request.session.items):
        yield None
        return
    escape_dir = tmp_path_factory.mktemp("escape_target")
    out = tmp_path_factory.mktemp("isolated") / "reports.json"
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELAGENT_SCRATCH", "TMPDIR")}  # both in /tmp
    env.update(ANTHROPIC_API_KEY=SECRET, KERNELAGENT_TEST_ESCAPE_DIR=str(escape_dir), PYTHONPATH=str(CORPUS.parents[1]))
    cmd = [sys.executable, str(CORPUS / "_driver.py"), str(out), *[str(c.path) for c in ISOLATED]]
    proc = subprocess.Popen(cmd, cwd=CORPUS.parents[1], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    yield proc, out, escape_dir
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def isolated(separate_parent) -> dict:
    """Reports of the escape files, keyed by file stem."""
    proc, out, _ = separate_parent
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["parent_has_key"], "the driver must start with the key in its environment"
    return result["reports"]


@pytest.fixture(scope="module")
def escape_dir(separate_parent) -> Path:
    return separate_parent[2]


# ------------------------------------------------------------------------------------------- checks


def _names_it(report: Report | dict, needle: str) -> bool:
    message = report.message if isinstance(report, Report) else report["message"]
    feedback = report.feedback if isinstance(report, Report) else report["feedback"]
    return needle in message or needle in feedback


def test_corpus_headers_and_coverage():
    for case in CHEATS + HONEST:
        assert case.expect in CATEGORIES, case.path
        assert case.policy in ("on", "off"), case.path
        assert case.problem.exists(), case.path
        assert case.expect == "ok" or case.needle, f"{case.path} needs a '# needle:'"
    covered = {c.expect for c in CHEATS}
    for category in ("stale_memory", "input_mutation", "fallback_to_reference", "policy_violation",
                     "caching_detected", "mismatch", "no_kernel_launched", "nondeterministic",
                     "stream_violation", "runtime_error"):
        assert category in covered, category
    assert all(c.expect == "ok" and c.policy == "on" for c in HONEST) and len(HONEST) >= 5


@pytest.mark.parametrize("case", params("rejected", LOCAL))
def test_cheat_is_rejected(case: Case, verifiers):
    report = report_for(case, verifiers)
    assert report.verdict == "rejected", f"{case.name} was accepted: {report.message}"
    if case.policy == "off":
        policy = report.stage("policy")
        assert policy is not None and policy.status == "skipped"


@pytest.mark.parametrize("case", params("category", LOCAL))
def test_cheat_category_and_feedback(case: Case, verifiers):
    report = report_for(case, verifiers)
    assert report.category == case.expect, f"{case.name}: {report.category}: {report.message}"
    assert _names_it(report, case.needle), (report.message, report.feedback)


@pytest.mark.parametrize("case", params("accepted", HONEST))
def test_honest_candidate_is_accepted(case: Case, verifiers):
    report = report_for(case, verifiers)
    assert report.verdict == "accepted", f"{case.name}: {report.category}: {report.message}\n{report.feedback}"
    assert report.metrics["trials"] == report.metrics["trials_passed"] >= 4


# ------------------------------------------------------------------------- escapes (separate parent)


@pytest.mark.parametrize("case", params("rejected", ISOLATED))
def test_escape_is_rejected(case: Case, isolated):
    report = isolated[case.name]
    assert report["verdict"] == "rejected", f"{case.name} was accepted: {report['message']}"


@pytest.mark.parametrize("case", params("category", ISOLATED))
def test_escape_category_names_the_refusal(case: Case, isolated):
    report = isolated[case.name]
    expect, needle = _expected(case, report)
    assert report["category"] == expect, f"{case.name}: {report['category']}: {report['message'][:300]}"
    assert _names_it(report, needle), report["message"][:500]


@pytest.mark.parametrize("case", params("secret", ISOLATED))
def test_parent_api_key_never_reaches_the_report(case: Case, isolated):
    assert SECRET not in json.dumps(isolated[case.name])


@pytest.mark.parametrize("case", params("no_files", [c for c in ISOLATED if c.writes]))
def test_escape_leaves_no_file_outside_the_work_dir(case: Case, isolated, escape_dir):
    assert not (escape_dir / case.writes).exists()


def test_environment_dump_reaches_the_report_without_secrets(isolated):
    """Control for the secret test: the leak channel works (worker variables show), the key does not."""
    report = isolated["escape_env_leak"]
    assert "KERNELAGENT_WORKER_MODE" in report["message"] and "KERNELAGENT_TEST_ESCAPE_DIR" in report["message"]
    assert "ANTHROPIC" not in report["message"] and SECRET not in report["feedback"]


# ---------------------------------------------------------------------------------------- GPU only


@pytest.fixture(scope="module")
def gpu_verifier():
    v = Verifier(VerifyOptions(device="cuda", timeout=300, seeds=2, static_policy=False), pool=WorkerPool(size=1))
    yield v
    v.close()


@pytest.mark.gpu
@pytest.mark.parametrize("case", params("gpu", GPU))
def test_gpu_cheat(case: Case, gpu_verifier):
    assert case.policy == "off"
    report = gpu_verifier.verify(case.problem, case.path)
    assert report.category == case.expect, f"{case.name}: {report.category}: {report.message}"
    assert _names_it(report, case.needle), (report.message, report.feedback)


# ------------------------------------------------------------------- escapes through the OS walls (own parent)

ESCAPE = WRONG / "escape"
ESCAPE_KEY = f"sk-ant-escape-{uuid.uuid4().hex}"
ESCAPE_MODES = ("walls", "both")  # tripwires off (the OS walls alone), then on
CONTROL_CASES = ("native_write", "key_leak")  # run with no walls at all too: the attacks are real


@dataclass(frozen=True)
class Escape:
    path: Path
    attack: str
    writes: tuple[str, ...]
    leaks: bool
    floods: bool
    fills: bool

    @property
    def name(self) -> str:
        return self.path.stem


def load_escape(path: Path) -> Escape:
    text = path.read_text()
    writes = tuple(w.strip() for w in _header(text, "writes", "").split(",") if w.strip())
    return Escape(path, _header(text, "attack"), writes, _header(text, "leaks", "no") == "yes",
                  _header(text, "floods", "no") == "yes", _header(text, "fills", "no") == "yes")


ESCAPES = [load_escape(p) for p in sorted(ESCAPE.glob("*.py")) if not p.name.startswith("_")]


@pytest.fixture(scope="module")
def escape_runs():
    """Runs every escape file under each mode in one separate parent, started like a user's: an API key in
    its environment, a home with key files and a $KERNELAGENT_HOME database holding the key. Everything
    lives in /var/tmp, which the sandbox does not replace (it gets a /tmp of its own)."""
    base = Path(tempfile.mkdtemp(prefix="ka-escape-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    home, ka_home, target = base / "home", base / "kahome", base / "target"
    for folder in (home / ".anthropic", home / ".ssh", ka_home, target):
        folder.mkdir(parents=True)
    (home / ".anthropic" / "api_key").write_text(ESCAPE_KEY + "\n")
    (home / ".ssh" / "id_ed25519").write_text(f"-----BEGIN KEY-----\n{ESCAPE_KEY}\n")
    (ka_home / "kernelagent.db").write_text(f"attempts ... provider key {ESCAPE_KEY}")
    # a scratch folder of its own (RAM-backed, like the default): what the attacks plant or fill is this test's
    shm = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else base
    scratch = Path(tempfile.mkdtemp(prefix="ka-escape-scratch-", dir=shm))
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    env.update(ANTHROPIC_API_KEY=ESCAPE_KEY, HOME=str(home), KERNELAGENT_HOME=str(ka_home),
               KERNELAGENT_SCRATCH=str(scratch / "kernelagent"), PYTHONPATH=str(CORPUS.parents[1]))
    out = base / "runs.json"
    modes = ",".join([*ESCAPE_MODES, "none:" + "+".join(CONTROL_CASES)])
    proc = subprocess.run([sys.executable, str(ESCAPE / "_driver.py"), str(out), str(target), modes,
                           *[str(e.path) for e in ESCAPES]], cwd=CORPUS.parents[1], env=env, capture_output=True,
                          text=True, timeout=1500)
    runs = json.loads(out.read_text()) if out.exists() else {}
    yield proc, runs
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)


def _leaked(text: str) -> bool:
    """Whether the key is in `text` as is, reversed, or inside any base64 or hex run."""
    key = ESCAPE_KEY.encode()
    if ESCAPE_KEY in text or ESCAPE_KEY[::-1] in text:
        return True
    for run in re.findall(r"[A-Za-z0-9+/]{24,}={0,2}", text):
        try:
            if key in base64.b64decode(run + "=" * (-len(run) % 4)):
                return True
        except ValueError:
            pass
    for run in re.findall(r"(?:[0-9a-f]{2}){16,}", text):
        if key in bytes.fromhex(run):
            return True
    return False


def test_escape_parent_survived_every_attack(escape_runs):
    proc, runs = escape_runs
    done = {mode: sorted(r) for mode, r in runs.get("runs", {}).items()}
    assert proc.returncode == 0 and runs.get("finished"), f"the caller died (rc {proc.returncode}) after {done}: " \
                                                          f"{proc.stderr[-2000:]}"
    assert runs["parent_has_key"]


@pytest.mark.parametrize("mode", ESCAPE_MODES)
@pytest.mark.parametrize("case", ESCAPES, ids=lambda e: e.name)
def test_escape_leaves_no_trace(case: Escape, mode: str, escape_runs):
    run = escape_runs[1].get("runs", {}).get(mode, {}).get(case.name)
    assert run is not None, f"{case.name} did not run under {mode}"
    t, report = run["traces"], run["report"]
    assert t["files"] == [], f"{case.attack}: files outside the work dir: {t['files']}"
    assert t["planted"] == [], f"{case.attack}: files planted in the scratch: {t['planted']}"
    assert t["processes"] == [], f"{case.attack}: processes left running: {t['processes']}"
    assert t["heard"] == [], f"{case.attack}: reached the caller's listeners: {t['heard']}"
    assert not _leaked(json.dumps(report)), f"{case.attack}: the key is in the report"
    assert "LOOT:" not in json.dumps(report), f"{case.attack}: it read something it should not: {report['message']}"
    assert report["environment"]["confinement"]["level"] == "strict", report["environment"].get("confinement")
    assert report["environment"]["confinement"]["tripwires"] is (mode == "both")


@pytest.mark.parametrize("case", [e for e in ESCAPES if e.floods or e.fills], ids=lambda e: e.name)
def test_escape_resource_attacks_are_bounded(case: Escape, escape_runs):
    for mode in ESCAPE_MODES:
        run = escape_runs[1]["runs"][mode][case.name]
        t, report = run["traces"], run["report"]
        assert len(json.dumps(report)) < 200_000
        if case.floods:
            assert t["parent_rss_growth_mb"] < 200, f"the parent grew by {t['parent_rss_growth_mb']:.0f} MiB"
        if case.fills:
            assert "host-memory limit" in report["message"], report["message"]
            assert t["shm_lost_mb"] < 64, f"{t['shm_lost_mb']} MiB of /dev/shm still held after the verify"


def test_escape_attacks_are_real_without_walls(escape_runs):
    """The control: with confinement and tripwires off the same files do write outside and leak the key,
    so the checks above can fail."""
    runs = escape_runs[1]["runs"]["none"]
    assert set(runs["native_write"]["traces"]["files"]) >= {"native_torch.pt", "native_libc.txt"}
    assert _leaked(json.dumps(runs["key_leak"]["report"]))
    assert runs["key_leak"]["report"]["environment"]["confinement"]["level"] == "none"


def test_escape_headers():
    assert len(ESCAPES) >= 10
    for case in ESCAPES:
        assert (PROBLEMS / f"{_header(case.path.read_text(), 'problem')}.py").exists(), case.path
        assert case.attack
