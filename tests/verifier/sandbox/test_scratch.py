"""Where the verifier keeps its files: the scratch folder, its ownership check, and the sweep of what
dead verifiers left behind (in /dev/shm that would hold RAM until a reboot)."""

from __future__ import annotations

import os
import subprocess
import sys

from kernelagent.verifier.sandbox.spawn import make_workdir, scratch_base, sweep_stale


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # exited and reaped: nothing runs under this id now (reuse within the test is unlikely)


def test_sweep_removes_only_folders_of_dead_processes(tmp_path):
    dead, live = _dead_pid(), os.getpid()
    for name in (f"kernelagent-{dead}", f"ka-worker-{dead}-abc", f"ka-worker-{dead}-abc-out", f"ka-tool-{dead}-x",
                 f"kernelagent-{live}", f"ka-worker-{live}-abc", "kernelagent-notapid", "someone-elses"):
        (tmp_path / name).mkdir()
    assert sweep_stale(tmp_path) == 4
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([f"kernelagent-{live}", f"ka-worker-{live}-abc", "kernelagent-notapid", "someone-elses"])


def test_work_dirs_carry_the_parent_pid_and_scratch_is_private(tmp_path):
    d = make_workdir(tmp_path)
    assert d.name.startswith(f"ka-worker-{os.getpid()}-")
    base = scratch_base()
    if str(base).startswith("/dev/shm/"):
        st = os.lstat(base)
        assert st.st_uid == os.getuid() and not st.st_mode & 0o077


def test_a_scratch_folder_planted_by_someone_else_is_not_used(tmp_path, monkeypatch):
    import kernelagent.verifier.sandbox.spawn as sb

    shm = tmp_path / "shm"
    shm.mkdir()
    planted = shm / f"kernelagent-{os.getuid()}"
    planted.mkdir(mode=0o777)
    os.chmod(planted, 0o777)  # open to everyone: not ours to trust
    real_path = sb.Path
    monkeypatch.delenv("KERNELAGENT_SCRATCH", raising=False)
    monkeypatch.setattr(sb, "Path", lambda p, *a: real_path(str(shm) if p == "/dev/shm" else p, *a))
    monkeypatch.setattr(sb, "SHM_MIN_FREE", 0)
    assert sb.scratch_base() != planted
    os.chmod(planted, 0o700)
    assert sb.scratch_base() == planted


def test_closing_one_verifier_leaves_another_in_the_same_process_intact(tmp_path, monkeypatch):
    """Two verifiers in one process (a test module's shared one and a short-lived one, an IDE server's
    per-request ones) each own their scratch folder: closing one must not delete the other's packs."""
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.options import VerifyOptions

    monkeypatch.setenv("KERNELAGENT_SCRATCH", str(tmp_path))
    keep = Verifier(VerifyOptions(device="cpu", seeds=1))
    (keep.scratch / "packs").mkdir(parents=True)
    with Verifier(VerifyOptions(device="cpu", seeds=1)) as other:
        (other.scratch / "packs").mkdir(parents=True)
        assert other.scratch != keep.scratch
    assert (keep.scratch / "packs").is_dir() and not other.scratch.exists()
    keep.close()
    assert not keep.scratch.exists()
