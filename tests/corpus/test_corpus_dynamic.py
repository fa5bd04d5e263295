"""Dynamic cheat corpus: each file in tests/corpus/wrong/dynamic/ must be rejected under its category, by the
worker's run-time checks alone where it says `# policy: off` (a file expecting `compile_only` gets the verdict
`unverified` instead: compiled, never run, never accepted); honest files must be accepted.

Header of a candidate file:
    # expect: CATEGORY        the report's category
    # policy: off|on          static AST policy off (dynamic layers alone) or on
    # problem: NAME           problems/corpus/NAME.py
    # needle: TEXT            must appear in the report's message or feedback
    # isolated: yes           verified by a separate parent that was started with a fake API key
    # writes: FILE            the escape tries to create FILE outside its work directory
    # gpu: yes                needs CUDA (side streams, races); run on the H200

Escape files (tests/corpus/wrong/escape/, attacks on the OS walls) are driven by test_corpus_escape.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.report import CATEGORIES, Report, verdict_of
from kernelagent.verifier.sandbox.pool import WorkerPool
from tests.corpus.headers import header as _header
from tests.paths import CORPUS, WRONG
from tests.paths import HONEST as HONEST_DIR
from tests.paths import PROBLEMS as PROBLEM_HOME

DYN = WRONG / "dynamic"
PROBLEMS = PROBLEM_HOME / "corpus"
SECRET = "sk-test-secret-123"

# Known gaps of the verifier: (test, candidate) -> what goes wrong. Each is a strict xfail, so the
# test starts failing (XPASS) the day the verifier is fixed and the entry must be removed.
KNOWN_GAPS: dict[tuple[str, str], str] = {}


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


def load_case(path: Path) -> Case:
    text = path.read_text()
    return Case(path=path, expect=_header(text, "expect", "ok"), policy=_header(text, "policy", "on"),
                problem=PROBLEMS / f"{_header(text, 'problem')}.py", needle=_header(text, "needle", ""),
                isolated=_header(text, "isolated", "no") == "yes", gpu=_header(text, "gpu", "no") == "yes",
                writes=_header(text, "writes", ""))


CHEATS = [load_case(p) for p in sorted(DYN.glob("*.py")) if not p.name.startswith("_")]
CHEATS.sort(key=lambda c: c.policy)  # policy-off files first, then policy-on
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
    """One CPU Verifier (warm pool, shared reference packs) for both policy modes: the static policy is only
    read when a verify starts (Verifier.verify), so each verify gets the options of its mode, and the second
    mode does not build every problem's pack and start a pool of its own again."""
    opts = VerifyOptions(device="cpu", timeout=60, seeds=2)
    v = Verifier(opts, pool=WorkerPool(size=1))
    v.pool.warm("cpu", "aot")

    def get(policy: str) -> Verifier:
        v.options = dataclasses.replace(opts, static_policy=policy == "on")
        return v

    yield get
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
    assert not report.accepted, f"{case.name} was accepted: {report.message}"
    assert report.verdict == verdict_of(case.expect) != "accepted", f"{case.name}: {report.verdict}"
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
