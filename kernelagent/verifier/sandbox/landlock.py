"""Landlock for a worker: which paths it may read, run or write, and the ruleset that makes it so.

`worker_grants` lists the rules (read+execute where Python, its packages and the toolchain live; a few
device nodes; full access on the worker's own folders; nothing of the caller's home, database or
scratch); `restrict` creates the ruleset with every right the kernel's ABI knows handled, TCP and
signal / abstract-socket scopes per profile, and restricts the calling thread and all it starts later.
Stdlib + ctypes only (imported by the worker).
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelagent.verifier.sandbox.confine import Profile


class LandlockError(OSError):
    """The kernel refused to create or enforce the ruleset."""


_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 444, 445, 446     # the same on every architecture
_PR_SET_NO_NEW_PRIVS = 38
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}   # rights each ABI added
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV   # the ones a rule on a file may carry
BIND_TCP, CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1, 2

RX = EXECUTE | READ_FILE | READ_DIR
RO = READ_FILE | READ_DIR
DEV = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV | READ_DIR
# /etc entries that hold secrets (or may): never granted. Entries not readable by others are skipped too.
ETC_SECRETS = {
    "shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "ssh", "ssl", "security", "credstore",
    "credstore.encrypted", "wireguard", "ipsec.secrets", "ipsec.d", "krb5.keytab", "docker", "containers",
    "kubernetes", "NetworkManager", "netplan", "pki", "letsencrypt", "openvpn", "ppp", "environment", "pip.conf",
    "apt", "machine-id", "ceph", "mysql", "postgresql", "cups", "libvirt", "polkit-1", "sssd", "samba",
}
DEV_NODES = ("null", "zero", "full", "random", "urandom", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
             "nvidia-modeset", "nvidia-caps", "nvidia-caps-imex-channels", "dri")

_libc = ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none, or disabled at boot)."""
    abi = _libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(abi, 0)


def fs_handled(abi: int) -> int:
    """Every file-system right this ABI knows (all of them are handled: none is allowed by default)."""
    return sum(bits for version, bits in _FS_BY_ABI.items() if abi >= version)


class Rules:
    """Path-beneath rules being collected. A grant never covers a protected path whole (a path holding
    one is granted child by child), and nothing inside a secret path is ever granted."""

    def __init__(self, handled: int, protected: list[str], secret: list[str]):
        real = (lambda paths: [os.path.realpath(p) for p in paths if p])
        self.handled, self.secret = handled, real(secret)
        self.protected = real(protected) + self.secret
        self.grants: dict[str, int] = {}

    def grant(self, path: str | os.PathLike, access: int, parent_resolved: bool = False) -> None:
        """Allow `access` beneath `path`, splitting it around protected paths. `parent_resolved`: the folder
        holding `path` has no link in it (then only a link at the end needs resolving; realpath is slow)."""
        real = str(path) if parent_resolved and not os.path.islink(path) else os.path.realpath(path)
        if not os.path.exists(real) or any(_within(real, p) for p in self.secret):
            return
        if any(_within(p, real) for p in self.protected):
            if not os.path.isdir(real) or any(real == p for p in self.protected):
                return
            for child in _listdir(real):
                self.grant(os.path.join(real, child), access, parent_resolved=True)
            return
        self.grants[real] = self.grants.get(real, 0) | (access & self.handled)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _add_rules(ruleset: int, grants: dict[str, int]) -> list[str]:
    """Add each grant (rights on a file limited to file rights); returns the paths that failed."""
    failed = []
    for path, access in grants.items():
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            failed.append(path)
            continue
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= _FILE_RIGHTS
            attr = struct.pack("=Qi", access, fd)
            if access and _libc.syscall(_SYS_ADD, ruleset, 1, ctypes.c_char_p(attr), 0) != 0:
                failed.append(f"{path}: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)
    return failed


def restrict(grants: dict[str, int], abi: int, profile: Profile) -> str:
    """Create the ruleset, add the grants and restrict this thread (and all it starts from now on)."""
    fs = fs_handled(abi)
    net = (BIND_TCP | CONNECT_TCP) if abi >= 4 and profile.landlock_tcp else 0
    scoped = ((SCOPE_ABSTRACT_UNIX if profile.scope_abstract else 0)
              | (SCOPE_SIGNAL if profile.scope_signal else 0)) if abi >= 6 else 0
    attr = struct.pack("QQQ", fs, net, scoped) if abi >= 6 else struct.pack("QQ", fs, net) if abi >= 4 \
        else struct.pack("Q", fs)
    ruleset = _libc.syscall(_SYS_CREATE, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0)
    if ruleset < 0:
        raise LandlockError(f"create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        failed = _add_rules(ruleset, grants)
        if failed:
            raise LandlockError("rules refused: " + "; ".join(failed[:5]))
        no_new_privs()
        if _libc.syscall(_SYS_RESTRICT, ruleset, 0) != 0:
            raise LandlockError(f"restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    parts = ["fs"] + (["tcp"] if net else []) + [name for bit, name in ((SCOPE_SIGNAL, "signal"),
                                                                        (SCOPE_ABSTRACT_UNIX, "abstract-unix"))
                                                 if scoped & bit]
    return ",".join(parts)


def no_new_privs() -> None:
    """PR_SET_NO_NEW_PRIVS: no program started from here gains privileges (Landlock and seccomp need it)."""
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs: " + os.strerror(ctypes.get_errno()))


# ------------------------------------------------------------------------------------------ what is granted


def worker_grants(workdir: Path, profile: Profile, handled: int, private_proc: bool,
                  protected: list[str], secret: list[str]) -> dict[str, int]:
    """The rules of one worker: read+execute where Python, its packages and the toolchain live; read+write
    on a few device nodes; full access on its own dirs; nothing else (no $HOME, no scratch, no /tmp).
    `protected` (the home folder) is never granted whole; nothing inside `secret` is granted at all."""
    rules = Rules(handled, protected, secret + [str(_package_dir() / "kernels")])
    for path in ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt", "/sys"):
        rules.grant(path, RX)
    for path in _python_dirs() + _cuda_dirs():
        rules.grant(path, RX)
    _grant_package(rules)
    _grant_etc(rules)
    _grant_proc(rules, private_proc)
    for name in DEV_NODES:
        rules.grant(f"/dev/{name}", DEV)
    for entry in _listdir("/dev"):
        if entry.startswith("nvidia"):
            rules.grant(f"/dev/{entry}", DEV, parent_resolved=True)
    if profile.private_tmp_rw and os.environ.get("KERNELAGENT_SANDBOX_TMP") == "private":
        rules.grant("/tmp", handled & ~(REFER | EXECUTE | MAKE_CHAR | MAKE_BLOCK))
    if profile.dev_shm_rw:
        rules.grants["/dev/shm"] = handled & ~(REFER | EXECUTE | MAKE_CHAR | MAKE_BLOCK)
    # no device nodes anywhere (a worker without a user namespace is root and could make one)
    own = handled & ~(REFER | MAKE_CHAR | MAKE_BLOCK | (0 if profile.exec_in_workdir else EXECUTE))
    # REFER (moving files between folders) inside the work dir only: Triton's cache writes a temporary
    # folder and renames its files into place; nothing moves between the work dir, -out and -in
    rules.grants[str(workdir)] = own | (handled & REFER)
    rules.grants[f"{workdir}-out"] = own
    if os.path.isdir(f"{workdir}-in"):
        rules.grants[f"{workdir}-in"] = RO & handled
    return rules.grants


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _package_dir() -> Path:
    return Path(__file__).resolve().parents[2]


def _python_dirs() -> list[str]:
    """The interpreter's prefixes and every sys.path entry that holds installed packages or the stdlib."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)}
    stdlib = os.path.dirname(os.__file__)
    for entry in sys.path:
        if entry and os.path.isabs(entry) and ("-packages" in entry or _within(entry, stdlib)
                                               or _within(entry, sys.base_prefix) or _within(entry, sys.prefix)):
            dirs.add(entry)
    for name in ("torch", "triton", "cutlass", "nvidia"):  # their own trees, wherever they are installed
        dirs.update(_module_dirs(name))
    dirs.update(_dsl_roots(_module_dirs("cutlass")))
    return sorted(d for d in dirs if d and d != "/")


def _dsl_roots(cutlass_dirs: list[str]) -> list[str]:
    """CuTe DSL's distribution folder (its runtime library lives beside the Python packages, in `lib/`):
    on the H200 the DSL's JIT could not resolve its runtime's CUDA symbols when only the `cutlass` package
    itself was readable (2026-12-01)."""
    roots = []
    for d in cutlass_dirs:
        for parent in list(Path(d).parents)[:3]:
            if parent.name.startswith("nvidia_cutlass_dsl"):
                roots.append(str(parent))
    return roots


def _module_dirs(name: str) -> list[str]:
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return [str(p) for p in (spec.submodule_search_locations or [])] or (
        [os.path.dirname(spec.origin)] if spec.origin else [])


def _cuda_dirs() -> list[str]:
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if os.path.isabs(d)]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.path.isabs(os.environ.get(var, "")):
            dirs.append(os.environ[var])
    for var in ("TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH"):
        if os.path.isabs(os.environ.get(var, "")):
            dirs.append(os.path.dirname(os.environ[var]))
    return dirs


def _grant_package(rules: Rules) -> None:
    """The kernelagent package, child by child, without `kernels` (the library is not the candidate's)."""
    pkg = _package_dir()
    rules.grants[str(pkg)] = READ_DIR & rules.handled  # listing only, so `import kernelagent.x` resolves
    for child in _listdir(str(pkg)):
        if child != "kernels":
            rules.grant(pkg / child, RX, parent_resolved=True)


def _grant_etc(rules: Rules) -> None:
    etc_real = os.path.realpath("/etc") == "/etc"
    for name in _listdir("/etc"):
        path = f"/etc/{name}"
        if name in ETC_SECRETS or name.endswith((".key", ".pem", ".secret", ".secrets")):
            continue
        try:
            if not os.stat(path).st_mode & 0o004:  # not for everyone's eyes: not for the candidate's
                continue
        except OSError:
            continue
        rules.grant(path, RX, parent_resolved=etc_real)
    for name in _listdir("/etc/ssl"):  # public certificates yes, private keys no
        if name != "private":
            rules.grant(f"/etc/ssl/{name}", RO)


def _grant_proc(rules: Rules, private: bool) -> None:
    """A private /proc (this sandbox's processes only) is readable whole; the host's only for this process."""
    if private:
        rules.grant("/proc", RO)
        return
    for path in ("/proc/self", "/proc/thread-self", "/proc/driver/nvidia", "/proc/devices", "/proc/cpuinfo",
                 "/proc/meminfo", "/proc/stat", "/proc/sys", "/proc/filesystems", "/proc/version"):
        rules.grant(path, RO)
