"""Kernel-enforced walls inside a worker: Landlock (files, TCP, signals, abstract sockets) and seccomp.

Imported by the worker (stdlib + ctypes only) and applied by `apply()` before any candidate code exists:
after torch and triton are imported and, on a GPU, after CUDA is initialised (restricting earlier made
CUDA fail with error 304 on the H200). Together with the namespaces `nsinit` made, the worker may
write only its own dirs, read only what running needs, reach no network, signal nothing outside
itself, and cannot undo any of it. What applied is reported (`Report.environment["confinement"]`).

Settings come from the parent through the environment (`KERNELAGENT_CONFINE*`); `PROFILES` holds the
two rule sets (candidate workers; runs under ncu / compute-sanitizer) — one line to flip each choice.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelagent.verifier.sandbox import landlock, seccomp

LEVELS = ("auto", "strict", "off")


class ConfinementError(RuntimeError):
    """A confinement layer that was required (strict) could not be applied; names the layer."""

    def __init__(self, layer: str, why: str):
        super().__init__(f"confinement '{layer}' unavailable: {why}")
        self.layer, self.why = layer, why


@dataclass(frozen=True)
class Profile:
    """Which walls a worker gets. `tool` workers run under ncu / compute-sanitizer, whose injected
    library talks to its front end and whose front end may trace the worker."""

    name: str
    user_ns: bool = True            # nsinit: own user namespace (root inside is us outside, with no capability)
    private_net: bool = True        # nsinit: own network namespace (else the host's)
    loopback: bool = False          # nsinit: `lo` up in it
    private_run: bool = False       # nsinit: an empty /run (host daemons' unix sockets out of reach)
    landlock: bool = True           # Landlock at all (the worker's file, network and signal walls)
    landlock_tcp: bool = True       # Landlock: TCP bind/connect handled (no rule: all refused)
    scope_abstract: bool = True     # Landlock: abstract unix sockets outside the domain unreachable
    scope_signal: bool = True       # Landlock: no signal to a process outside the domain
    deny_sockets: bool = True       # seccomp: socket() refused
    deny_tracing: bool = True       # seccomp: ptrace, process_vm_*, perf_event_open refused
    exec_in_workdir: bool = False   # Landlock: programs may run from the work dir (none need to)
    private_tmp_rw: bool = False    # Landlock: the sandbox's private /tmp writable (tools keep files there)
    dev_shm_rw: bool = False        # Landlock: /dev/shm writable -- exposes the verifier's scratch; last resort


# The tool profile keeps the host's user namespace: ncu reads GPU performance counters, which the NVIDIA
# driver reserves to CAP_SYS_ADMIN in the initial user namespace (NVreg_RestrictProfilingToAdminUsers=1,
# the default). Its worker is then root, bound by Landlock, the pid/mount/net namespaces and seccomp
# (which refuses the root-only calls that matter). Flip a field here if the H200 says otherwise.
PROFILES = {
    "candidate": Profile("candidate"),
    "tool": Profile("tool", user_ns=False, loopback=True, private_run=True, landlock_tcp=False, scope_abstract=False,
                    deny_sockets=False, deny_tracing=False, private_tmp_rw=True),
}

# On a GPU, Landlock goes on after CUDA's first context (see the module docstring). Threads that exist
# then (CUDA's own) stay outside the Landlock domain; seccomp covers them (TSYNC). When the H200 shows that
# CUDA initialises under these rules (benchmarks/confinement_probe.py), set this to True: then the
# worker is restricted before it imports anything and no thread is left outside.
RESTRICT_BEFORE_CUDA = False


# ------------------------------------------------------------------------------------------ the worker


@dataclass(frozen=True)
class Settings:
    """What the parent asked for, as the worker reads it from its environment."""

    level: str = "auto"
    profile: Profile = PROFILES["candidate"]
    tripwires: bool = True

    @classmethod
    def from_env(cls) -> Settings:
        level = os.environ.get("KERNELAGENT_CONFINE", "off")
        return cls(level=level if level in LEVELS else "auto",
                   profile=PROFILES.get(os.environ.get("KERNELAGENT_CONFINE_PROFILE", ""), PROFILES["candidate"]),
                   tripwires=os.environ.get("KERNELAGENT_TRIPWIRES", "1") != "0")

    def to_env(self) -> dict[str, str]:
        return {"KERNELAGENT_CONFINE": self.level, "KERNELAGENT_CONFINE_PROFILE": self.profile.name,
                "KERNELAGENT_TRIPWIRES": "1" if self.tripwires else "0"}


def restrict_early(mode: str) -> bool:
    """Whether to restrict before the imports (no thread exists yet) rather than after CUDA's set-up.
    The parent may ask for the early order on a GPU too (KERNELAGENT_RESTRICT_BEFORE_CUDA=1, the probe's)."""
    return mode != "cuda" or RESTRICT_BEFORE_CUDA or os.environ.get("KERNELAGENT_RESTRICT_BEFORE_CUDA") == "1"


def apply(workdir: Path, settings: Settings) -> dict[str, object]:
    """Apply Landlock and seccomp to this worker; returns what applied. Strict raises ConfinementError
    naming the first missing layer; auto applies what it can and lists the rest under `missing`."""
    import time

    t0 = time.perf_counter()
    spaces = [s for s in os.environ.get("KERNELAGENT_SANDBOX_NS", "").split(",") if s]
    report: dict[str, object] = {"profile": settings.profile.name, "namespaces": spaces,
                                 "proc": os.environ.get("KERNELAGENT_SANDBOX_PROC", "host"),
                                 "tmp": os.environ.get("KERNELAGENT_SANDBOX_TMP", "host"),
                                 "run": os.environ.get("KERNELAGENT_SANDBOX_RUN", "host"),
                                 "inputs": os.environ.get("KERNELAGENT_SANDBOX_INPUTS", "writable"),
                                 "loopback": os.environ.get("KERNELAGENT_SANDBOX_LO", "host"),
                                 "tripwires": settings.tripwires}
    if settings.level == "off":
        report.update(landlock="off", seccomp="off", level="none", missing=[])
        return report
    missing = [f"{ns} namespace" for ns in _wanted_namespaces(settings.profile) if ns not in spaces]
    if "mount" in spaces and str(report["inputs"]).startswith("writable"):
        missing.append("read-only inputs")  # hard links in -in would let it chmod the files linked in
    if missing and settings.level == "strict":
        raise ConfinementError(missing[0], os.environ.get("KERNELAGENT_SANDBOX_NS_ERRORS") or "not created")
    report["landlock_abi"] = abi = landlock.landlock_abi()
    # threads started before Landlock (CUDA's own, on a GPU) stay outside its domain; seccomp covers them
    report["threads_outside_landlock"] = max(0, _thread_count() - 1)
    steps = [("seccomp", lambda: _seccomp(settings.profile))]
    if settings.profile.landlock:
        steps.insert(0, ("landlock", lambda: _landlock(workdir, settings.profile, abi)))
    else:
        report["landlock"] = f"off ({settings.profile.name} profile)"
    for layer, step in steps:
        try:
            report[layer] = step()
        except ConfinementError as e:
            if settings.level == "strict":
                raise
            report[layer] = f"unavailable: {e.why}"
            missing.append(layer)
    report["missing"] = missing
    applied = bool(spaces) or not {"landlock", "seccomp"} <= set(missing)
    report["level"] = "strict" if not missing else "partial" if applied else "none"
    report["seconds"] = round(time.perf_counter() - t0, 4)
    return report


EXIT_REFUSED = 71   # the worker could not be confined as strictly as asked (same code as nsinit's)


def enter(workdir: Path, settings: Settings) -> dict[str, object]:
    """The worker's call: `apply`, or, when strict confinement fails, say which layer on stderr and exit
    before any request is read (the parent reports the worker's death with that line)."""
    try:
        return apply(workdir, settings)
    except ConfinementError as e:
        print(f"kernelagent sandbox: strict confinement refused: {e}", file=sys.stderr, flush=True)
        os._exit(EXIT_REFUSED)


def network_note(report: dict[str, object]) -> str:
    """One phrase for the report's `sandbox_network`: which network the worker had."""
    if "net" not in (report.get("namespaces") or []):
        return "host network"
    return "private netns, lo up" if report.get("loopback") == "up" else "private netns, no interfaces"


def _wanted_namespaces(profile: Profile) -> list[str]:
    return (["user"] if profile.user_ns else []) + ["pid", "mount", "ipc"] + (["net"] if profile.private_net else [])


def _landlock(workdir: Path, profile: Profile, abi: int) -> str:
    if abi < 1:
        raise ConfinementError("landlock", "not offered by this kernel (or disabled at boot)")
    paths = (lambda var: [p for p in os.environ.get(var, "").split(os.pathsep) if p])
    private_proc = os.environ.get("KERNELAGENT_SANDBOX_PROC") == "private"
    grants = landlock.worker_grants(workdir, profile, landlock.fs_handled(abi), private_proc,
                                    paths("KERNELAGENT_SANDBOX_HOME"), paths("KERNELAGENT_SANDBOX_SECRET"))
    try:
        return landlock.restrict(grants, abi, profile)
    except OSError as e:
        raise ConfinementError("landlock", e.strerror or str(e)) from e


def _seccomp(profile: Profile) -> str:
    try:
        return seccomp.install(profile)
    except OSError as e:
        raise ConfinementError("seccomp", e.strerror or str(e)) from e


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


# ------------------------------------------------------------------------------------------ the parent


def sandbox_env() -> dict[str, str]:
    """What the parent tells a worker about its own machine: the home folders (never granted whole) and
    the secret places (never granted at all): $KERNELAGENT_HOME, the scratch base, key folders."""
    from kernelagent.verifier.sandbox.spawn import scratch_base

    homes = {os.path.expanduser("~")}
    try:
        import pwd
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        pass
    homes = {os.path.realpath(h) for h in homes if h and os.path.realpath(h) != "/"}
    secret = {os.environ.get("KERNELAGENT_HOME") or os.path.join(os.path.expanduser("~"), ".kernelagent"),
              str(scratch_base())}
    secret |= {os.path.join(h, name) for h in homes for name in HOME_SECRETS}
    secret = {os.path.realpath(p) for p in secret if p and os.path.realpath(p) != "/"}
    return {"KERNELAGENT_SANDBOX_HOME": os.pathsep.join(sorted(homes)),
            "KERNELAGENT_SANDBOX_SECRET": os.pathsep.join(sorted(secret))}


HOME_SECRETS = (".ssh", ".gnupg", ".aws", ".anthropic", ".config", ".netrc", ".kernelagent", ".docker", ".kube",
                ".git-credentials", ".pypirc", ".bash_history", ".python_history", ".cache")


_PROBE: dict[str, object] | None = None


def probe() -> dict[str, object]:
    """What this machine offers (namespaces tried in a throw-away child, Landlock ABI, seccomp), once."""
    global _PROBE
    if _PROBE is None:
        import json
        import subprocess

        out = subprocess.run([sys.executable, "-I", "-S", str(Path(__file__).with_name("nsinit.py")), "--probe"],
                             capture_output=True, text=True, timeout=60)
        try:
            found = json.loads(out.stdout or "{}")
        except json.JSONDecodeError:
            found = {"namespaces": [], "errors": {"probe": out.stderr[-300:]}}
        found["landlock_abi"] = landlock.landlock_abi()
        found["seccomp"] = seccomp.available()
        _PROBE = found
    return _PROBE


def require(profile: Profile) -> None:
    """Raise ConfinementError naming the first layer this machine cannot give (for `strict`)."""
    found = probe()
    for ns in _wanted_namespaces(profile):
        if ns not in found.get("namespaces", []):
            raise ConfinementError(f"{ns} namespace", str((found.get("errors") or {}).get(ns, "not created")))
    if not found.get("landlock_abi"):
        raise ConfinementError("landlock", "not offered by this kernel (or disabled at boot)")
    if not found.get("seccomp"):
        raise ConfinementError("seccomp", f"no filter for {platform.machine()} (x86-64 only)")
