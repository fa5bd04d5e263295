"""Parent side of the sandbox: scrubbed environment, per-worker directories, process-group kill.

A worker is `python -m kernelagent.verifier.worker`, started in its own session (process group) with
an environment built from an allowlist: API keys, tokens and proxies never reach candidate code.
Confined (the default), it is started through `nsinit` (its own user, pid, mount and network
namespaces) and restricts itself with Landlock and seccomp (`confine`) before any candidate code exists.
Its stdout and stderr are pipes the parent drains into a bounded tail (`limits.OutputTail`).
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from kernelagent.verifier.sandbox import confine, limits

# Variables a worker may inherit. Everything else (API keys, tokens, proxies, credentials) is dropped.
_ALLOWED_EXACT = {
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME",
    "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "VIRTUAL_ENV", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "CUTE_DSL_ARCH", "PYTHONUNBUFFERED",
}
_ALLOWED_PREFIXES = ("NVIDIA_", "KERNELAGENT_TEST_")
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PROXY", "COOKIE")


def scrubbed_env(workdir: Path, mode: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a worker: the allowlist, minus anything that looks secret, plus own dirs."""
    env: dict[str, str] = {}
    for k, v in os.environ.items():
        if any(m in k.upper() for m in _SECRET_MARKERS):
            continue
        if k in _ALLOWED_EXACT or k.startswith(_ALLOWED_PREFIXES):
            env[k] = v
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "/usr/bin:/bin")])
    pkg_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
    for sub in ("home", "tmp", "triton", "cute", "inductor", "cache"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    env.update({
        "HOME": str(workdir / "home"), "TMPDIR": str(workdir / "tmp"), "XDG_CACHE_HOME": str(workdir / "cache"),
        "TRITON_CACHE_DIR": str(workdir / "triton"), "CUTE_DSL_CACHE_DIR": str(workdir / "cute"),
        "TORCHINDUCTOR_CACHE_DIR": str(workdir / "inductor"), "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0",
        "KERNELAGENT_WORKER_MODE": mode,
    })
    if mode in ("cpu", "aot"):
        if mode == "cpu":
            env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
        env.setdefault("CUTE_DSL_ARCH", "sm_90a")
    env.setdefault("OMP_NUM_THREADS", "2" if mode == "cpu" else "4")
    env.update(extra or {})
    return env


def secret_values() -> list[str]:
    """Values of this process's secret-looking variables (API keys, tokens), to keep out of reports."""
    return sorted({v for k, v in os.environ.items() if any(m in k.upper() for m in _SECRET_MARKERS)
                   and len(v) >= 8}, key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    for value in secrets:
        if value in text:
            text = text.replace(value, "[redacted]")
    return text


SHM_MIN_FREE = 8 * 2**30


def scratch_base() -> Path:
    """Where workers and packs live: $KERNELAGENT_SCRATCH, else /dev/shm when it has room (the outputs
    of every trial go to the parent through files, about 1.5 GB for a 128 MiB problem by our count, and
    torch.save wrote to /dev/shm about four times faster than to /tmp on the development machine), else
    the temp directory."""
    env = os.environ.get("KERNELAGENT_SCRATCH")
    if env:
        return Path(env)
    shm = Path("/dev/shm")
    try:
        st = os.statvfs(shm)
        if os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize >= SHM_MIN_FREE:
            # a folder of its own: candidates may write in /dev/shm, but never inside this folder
            # (the guard protects the folder that holds a worker's work dir when it is in /dev/shm)
            base = shm / f"kernelagent-{os.getuid()}"
            base.mkdir(mode=0o700, exist_ok=True)
            st = os.lstat(base)  # ours, a real folder, closed to others: else someone else planted it
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
                return base
    except OSError:
        pass
    return Path(tempfile.gettempdir())


def make_workdir(root: Path | None = None, prefix: str = "ka-worker-") -> Path:
    base = root or scratch_base()
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))


def sweep_stale(base: Path | None = None) -> int:
    """Remove what verifiers that died (kill -9, a crash) left in the scratch folder: folders named
    after a process id that no longer runs. In /dev/shm they would hold RAM until a reboot."""
    from kernelagent.verifier.sandbox.remove import remove_tree

    removed = 0
    for entry in (base or scratch_base()).glob("*"):
        m = re.match(r"(?:kernelagent|ka-worker|ka-tool)-(\d+)(?:-|$)", entry.name)
        if not m or entry.is_symlink() or not entry.is_dir() or _alive(int(m.group(1))):
            continue
        removed += remove_tree(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Started(NamedTuple):
    proc: subprocess.Popen
    stdout: limits.OutputTail
    stderr: limits.OutputTail


NSINIT = Path(__file__).with_name("nsinit.py")


def worker_command(workdir: Path, prefix: list[str] | None, settings: confine.Settings) -> list[str]:
    """The worker's command line: under a tool prefix if any, and below the namespace launcher if confined
    (launcher -> tool -> worker, so the tool and everything it starts live in the sandbox too)."""
    cmd = [*(prefix or []), sys.executable, "-m", "kernelagent.verifier.worker", str(workdir)]
    if settings.level == "off":
        return cmd
    p = settings.profile
    flags = [*(["--strict"] if settings.level == "strict" else []), *(["--lo"] if p.loopback else []),
             *([] if p.private_net else ["--host-net"]), *([] if p.user_ns else ["--no-userns"]),
             *(["--private-run"] if p.private_run else [])]
    # folders the worker needs that a private /tmp would hide: its own, and import paths (a GPU image may
    # unpack packages into /tmp, as the H200's CuTe DSL bundle does)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + [p for p in sys.path if p]
    for own in (workdir, f"{workdir}-out", *dict.fromkeys(paths)):
        flags += ["--keep", str(own)]
    flags += ["--readonly", f"{workdir}-in"]  # files linked in from the pack and the user's problem
    # the verifier daemon's folder (kernelagent.tools.daemon_wire.run_dir): its socket, out of a worker's sight
    ka_home = os.path.expanduser(os.environ.get("KERNELAGENT_HOME") or "~/.kernelagent")
    flags += ["--hide", os.path.join(ka_home, "run")]
    # -I -S: the launcher is stdlib only; it ignores PYTHON* variables and site-packages (10 ms, not 40)
    return [sys.executable, "-I", "-S", str(NSINIT), *flags, "--", *cmd]


def spawn_worker(workdir: Path, mode: str, prefix: list[str] | None = None,
                 extra_env: dict[str, str] | None = None, settings: confine.Settings | None = None) -> Started:
    """Start a worker in its own process group; it imports torch/triton, then waits for a request."""
    settings = settings or confine.Settings()
    env = scrubbed_env(workdir, mode, {**settings.to_env(), **(extra_env or {})})
    if settings.level != "off":
        env.update(confine.sandbox_env())
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(worker_command(workdir, prefix, settings), stdin=subprocess.PIPE, stdout=out_w,
                                stderr=err_w, cwd=str(workdir), env=env, start_new_session=True, close_fds=True)
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return Started(proc, limits.OutputTail(out_r, "stdout"), limits.OutputTail(err_r, "stderr"))


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker and everything it started (its whole process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in a process group, in MiB: the worker and anything it started,
    and, under a tool (ncu, compute-sanitizer), the worker below the tool's own process."""
    total = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == str(pgid):
            total += rss_mb(int(entry.name))
    return total


def default_memory_limit_mb() -> int:
    """3/4 of the memory available now (limits.default_memory_limit_mb)."""
    return limits.default_memory_limit_mb()
