"""Runs the escape corpus from a parent set up like a user's: started with an API key in its environment, a
home with key files and a $KERNELAGENT_HOME database holding the same key, listeners on TCP, UDP, a unix
socket and an abstract socket. After each verify it records every trace the attack could leave.

    python tests/corpus/wrong/escape/_driver.py OUT.json ESCAPE_DIR MODE[:STEM+STEM][,MODE...] CANDIDATE...

MODE: walls (confinement auto, Python tripwires off: the OS walls alone), both (walls and tripwires),
none (confinement and tripwires off: the control, showing the attacks are real). OUT.json is rewritten
after every case, so a caller killed half-way still shows how far it got.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import socket
import sys
import threading
import uuid
from pathlib import Path

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.limits import worker_pids
from kernelagent.verifier.sandbox.pool import WorkerPool
from kernelagent.verifier.sandbox.spawn import scratch_base
from tests.paths import PROBLEMS as PROBLEM_HOME

PROBLEMS = PROBLEM_HOME / "corpus"
MODES = {"walls": ("auto", False), "both": ("auto", True), "none": ("off", False)}
MEMORY_LIMIT_MB = 3000


class Listeners:
    """TCP + UDP on the loopback, a unix socket at a path, an abstract socket: each records what reaches it."""

    def __init__(self, folder: Path):
        self.heard: list[str] = []
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.unix_path = str(folder / "listener.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        self.unix.listen()
        self.abstract_name = f"ka-escape-{uuid.uuid4().hex}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen()
        for name, sock in (("tcp", self.tcp), ("unix", self.unix), ("abstract", self.abstract)):
            threading.Thread(target=self._accept, args=(name, sock), daemon=True).start()
        threading.Thread(target=self._receive, daemon=True).start()

    def _accept(self, name: str, sock: socket.socket) -> None:
        while True:
            conn, _ = sock.accept()
            self.heard.append(name)
            conn.close()

    def _receive(self) -> None:
        while True:
            self.udp.recv(4096)
            self.heard.append("udp")


def marked_processes(mark: str, idle: set[int]) -> list[int]:
    """Processes whose command line or environment holds the marker (only the workers' descendants get it),
    but for the pool's idle workers (`idle`: they wait for the next case)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid() or int(entry) in idle:
            continue
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{entry}/{part}", "rb") as f:
                    if mark.encode() in f.read():
                        found.append(int(entry))
                        break
            except OSError:
                continue
    return found


def _command(pid: int) -> str:
    """A left process's command line and parent, for the failure message."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:300]
        with open(f"/proc/{pid}/stat") as f:
            ppid = f.read().rsplit(")", 1)[1].split()[1]
        return f"{cmd} (parent {ppid})"
    except OSError:
        return "(gone)"


def planted_files(mark: str) -> list[str]:
    """Files named after the marker in the test's scratch folder (and the one above it) or at the top of
    /dev/shm: what an attack planted."""
    hits = {f"/dev/shm/{f}" for f in os.listdir("/dev/shm") if mark in f}
    for dirpath, _, files in os.walk(scratch_base().parent):
        hits |= {os.path.join(dirpath, f) for f in files if mark in f}
    return sorted(hits)


def scratch_used_mb() -> float:
    """Memory held by files in this run's own scratch folder (RAM-backed): counted there, not as the free
    space of /dev/shm, which a second copy of the suite running beside this one fills too."""
    total = 0
    for dirpath, _, files in os.walk(scratch_base()):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total / 2**20


def problem_of(candidate: Path) -> Path:
    match = re.search(r"^# problem: (\w+)", candidate.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"{candidate} has no '# problem:' line")
    return PROBLEMS / f"{match.group(1)}.py"


def traces(mark: str, escape_dir: Path, listeners: Listeners, rss_before: int, shm_before: float,
           pool: WorkerPool) -> dict:
    """What the last verify left behind; then clean it up so the next case starts clean."""
    pool.settle()  # a replacement worker still starting is the pool's, not the attack's
    for w in [w for ws in pool._idle.values() for w in ws]:
        w.wait_ready(60)  # its launcher forks the worker inside the namespaces later: wait for the whole tree
    idle = {pid for ws in pool._idle.values() for w in ws for pid in worker_pids(w.proc.pid)}
    procs, planted = marked_processes(mark, idle), planted_files(mark)
    files = sorted(p.name for p in escape_dir.iterdir() if p.name != "listener.sock")
    found = {"processes": procs, "commands": {pid: _command(pid) for pid in procs}, "files": files,
             "planted": planted, "heard": list(listeners.heard),
             "parent_rss_growth_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024,
             "shm_lost_mb": round(scratch_used_mb() - shm_before, 1)}
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for name in files:
        (escape_dir / name).unlink()
    for path in planted:
        os.unlink(path)
    listeners.heard.clear()
    return found


def main() -> None:
    out, escape_dir, modes = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(",")
    candidates = [Path(p) for p in sys.argv[4:]]
    only = {m.split(":")[0]: set(m.split(":")[1].split("+")) for m in modes if ":" in m}  # MODE:stem+stem
    listeners = Listeners(escape_dir)
    mark = f"kaescape{uuid.uuid4().hex}"
    # set after start: the workers inherit these (KERNELAGENT_TEST_* pass the scrubbed environment), while
    # this process's own start-up environment (in /proc) holds the key but not the marker
    os.environ.update(KERNELAGENT_TEST_ESCAPE_DIR=str(escape_dir), KERNELAGENT_TEST_MARK=mark,
                      KERNELAGENT_TEST_CALLER=str(os.getpid()), KERNELAGENT_TEST_HOME=os.environ["HOME"],
                      KERNELAGENT_TEST_KA_HOME=os.environ["KERNELAGENT_HOME"], KERNELAGENT_TEST_TCP=str(listeners.port),
                      KERNELAGENT_TEST_UNIX=listeners.unix_path, KERNELAGENT_TEST_ABSTRACT=listeners.abstract_name)
    result: dict = {"parent_has_key": bool(os.environ.get("ANTHROPIC_API_KEY")), "runs": {}}
    for mode in (m.split(":")[0] for m in modes):
        confinement, tripwires = MODES[mode]
        options = VerifyOptions(device="cpu", timeout=90, seeds=1, static_policy=False, cache=True,
                                memory_limit_mb=MEMORY_LIMIT_MB)
        pool = WorkerPool(size=1, confinement=confinement, tripwires=tripwires)
        with Verifier(options, pool=pool) as v:
            v.scratch.mkdir(parents=True, exist_ok=True)
            (v.scratch / "planted-secret.txt").write_text(os.environ.get("ANTHROPIC_API_KEY", ""))
            pool.warm("cpu")
            runs = result["runs"].setdefault(mode, {})
            for cand in [c for c in candidates if mode not in only or c.stem in only[mode]]:
                rss, shm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, scratch_used_mb()
                report = v.verify(problem_of(cand), cand).to_dict()
                runs[cand.stem] = {"report": report, "traces": traces(mark, escape_dir, listeners, rss, shm, pool)}
                out.write_text(json.dumps(result, default=str))
        shutil.rmtree(v.scratch, ignore_errors=True)
    result["finished"] = True
    out.write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
