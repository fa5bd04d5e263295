"""Escape corpus: each file in tests/corpus/wrong/escape/ attacks the OS walls rather than the verdict. All run
from one parent of their own with planted keys (an API key in its environment, key files in its home, a
database holding the key), with the Python tripwires off (the walls alone) and on, and must leave no trace;
two run with no walls at all as the control that the attacks are real. Header of an escape file:
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

from tests.corpus.headers import header as _header
from tests.paths import CORPUS, WRONG
from tests.paths import PROBLEMS as PROBLEM_HOME

PROBLEMS = PROBLEM_HOME / "corpus"


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
    assert t["processes"] == [], f"{case.attack}: processes left running: {t.get('commands', t['processes'])}"
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
