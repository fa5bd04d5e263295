"""Namespace launcher for verifier workers: `python -I -S nsinit.py [flags] -- CMD...` (stdlib only).

Unshares user (root inside mapped to our uid, setgroups denied), pid, mount, network, IPC and UTS
namespaces, then forks: the child is PID 1 of the new pid namespace, so when it exits every process in the
namespace (setsid and double-forked ones too) is killed by the kernel. PID 1 dies with this launcher
(PR_SET_PDEATHSIG), mounts a private /proc (only the sandbox's own processes) and a size-capped private /tmp
where it can, brings `lo` up when asked (tool runs), then forks CMD as PID 2 and stays a trusted init: it
reaps orphans and exits when CMD does. CMD never runs as PID 1, so nothing it runs can undo PID 1's death
signal or outlive it. This process waits and exits with CMD's status (re-raising a fatal signal), so the
parent sees the worker's fate.

What applied goes to CMD's environment (KERNELAGENT_SANDBOX_*), which the worker puts in its report.
`--probe` prints, as JSON, what this machine allows, and runs nothing.
"""

from __future__ import annotations

import _signal  # not `signal`: it imports enum, the largest part of this launcher's start-up
import ctypes
import os
import resource
import select
import struct
import sys

# imports are kept to the few light ones: this runs once per worker, on the pool's critical path

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWIPC, CLONE_NEWUTS = 0x08000000, 0x04000000  # SysV shared memory, semaphores, message queues; host name
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 0x1, 0x2, 0x4, 0x8, 0x20, 0x1000
MS_REC, MS_PRIVATE = 0x4000, 0x40000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
EXIT_REFUSED = 71          # strict confinement could not be had (EX_OSERR)
TMP_SIZE = "512m"          # the private /tmp is RAM-backed and not in the watchdog's count: keep it small
NPROC = 4096               # processes + threads of the sandbox (counted in its own user namespace)
PARENT_POLL_S = 0.2        # how often the launcher checks that its parent lives

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(want_net: bool, want_user: bool = True) -> tuple[list[str], dict[str, str]]:
    """Unshare what this machine allows, strongest first; returns the namespaces and why others failed."""
    uid, gid = os.getuid(), os.getgid()
    net = CLONE_NEWNET if want_net else 0
    errors: dict[str, str] = {}
    try:
        if not want_user:
            raise OSError(0, "not asked for")
        _unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | net)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
        return ["user", "pid", "mount", "ipc", "uts"] + (["net"] if net else []), errors
    except OSError as e:
        errors["user"] = e.strerror if e.errno == 0 else str(e)
    try:  # real root without user namespaces: the others still isolate, but the worker keeps root's capabilities
        _unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | net)
        return ["pid", "mount", "ipc", "uts"] + (["net"] if net else []), errors
    except OSError as e:
        errors["pid"] = errors["mount"] = errors["ipc"] = str(e)
        if net:
            errors["net"] = str(e)
    return [], errors


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def private_mounts(keep: list[str], private_run: bool = False, readonly: list[str] | None = None,
                   hide: list[str] | None = None) -> dict[str, str]:
    """In the child (PID 1): this namespace's own /proc, a private /tmp unless a kept dir lives there,
    (tool runs, which may open sockets) an empty /run, so no host daemon's socket can be named, the `hide`
    folders covered by an empty mount (the verifier daemon's socket folder), and the `readonly` folders bound
    read-only (files linked in from outside must not be chmod-ed or touched through their links: Landlock
    does not cover attribute changes)."""
    done: dict[str, str] = {}
    try:
        _mount("none", "/", None, MS_REC | MS_PRIVATE)
    except OSError as e:
        return {"proc": f"host ({e})", "tmp": "host"}
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        done["proc"] = "private"
    except OSError as e:  # a /proc partly covered by the host (containers) cannot be mounted again
        done["proc"] = f"host ({e})"
    tmp = os.path.realpath("/tmp")
    if any(os.path.realpath(k) == tmp or os.path.realpath(k).startswith(tmp + "/") for k in keep):
        done["tmp"] = "host (the work dir is in /tmp)"
    else:
        try:
            _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={TMP_SIZE},mode=1777")
            done["tmp"] = "private"
        except OSError as e:
            done["tmp"] = f"host ({e})"
    if private_run:
        try:
            _mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16m,mode=755")
            done["run"] = "private"
        except OSError as e:
            done["run"] = f"host ({e})"
    _hide(hide or [], keep)
    for folder in readonly or []:
        try:
            _mount(folder, folder, None, MS_BIND | MS_REC)
            # a user namespace may not clear flags its mounts inherited (noexec on /dev/shm, atime modes)
            _mount("none", folder, None, MS_BIND | MS_REMOUNT | MS_RDONLY | _locked_flags(folder))
            done["inputs"] = "read-only"
        except OSError as e:
            done["inputs"] = f"writable ({e})"
            break
    return done


def _hide(folders: list[str], keep: list[str]) -> None:
    """Cover each existing folder holding no kept one with an empty read-only tmpfs: a socket in it cannot
    be named (Landlock ABI <= 7 does not mediate connect() on a path-named socket). Best effort: the
    daemon's token is the wall; this leaves a candidate nothing to knock on."""
    kept = [os.path.realpath(k) for k in keep]
    for folder in map(os.path.realpath, folders):
        if os.path.isdir(folder) and not any(k == folder or k.startswith(folder + "/") for k in kept):
            try:
                _mount("tmpfs", folder, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0")
            except OSError:
                pass


def _locked_flags(folder: str) -> int:
    """The mount flags of `folder`'s file system that a remount inside a user namespace must keep."""
    have = os.statvfs(folder).f_flag
    pairs = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
             (os.ST_NOATIME, 0x400), (os.ST_NODIRATIME, 0x800), (os.ST_RELATIME, 0x200000))
    return MS_NOSUID | MS_NODEV | sum(ms for st, ms in pairs if have & st and ms not in (MS_NOSUID, MS_NODEV))


def loopback_up() -> str:
    """Bring `lo` up in this network namespace (a tool's front end and its injected library talk over it)."""
    import _socket
    import fcntl

    try:
        s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        try:
            req = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
            fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
        finally:
            s.close()
        return "up"
    except OSError as e:
        return f"down ({e})"


def _limits(userns: bool) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if userns:  # counted per user namespace: only the sandbox's own processes count, so a bound is safe
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        cap = NPROC if hard == resource.RLIM_INFINITY else min(NPROC, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))


def _program_home(program: str) -> list[str]:
    """The folder above the program's own `bin/` (a virtual environment in /tmp, say): it must stay visible
    for the program to start at all."""
    if not os.path.isabs(program):
        return []
    return [os.path.dirname(os.path.dirname(os.path.abspath(program)))]


def _child(cmd: list[str], spaces: list[str], errors: dict[str, str], opts: dict, report: int | None,
           lifeline: int | None = None) -> None:
    """PID 1 of the sandbox: dies with the launcher, sets up mounts and loopback, then runs CMD as its child
    and writes CMD's wait status to `report` (None: no pid namespace, so this process becomes CMD).
    `lifeline`: the read end of a pipe only the launcher holds open; at EOF after the death signal is set,
    the launcher died before that (between fork and prctl, where no signal would come), so this exits."""
    try:
        _libc.prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)
        if lifeline is not None:
            if select.select([lifeline], [], [], 0)[0]:  # EOF: the launcher is gone already
                os._exit(128 + _signal.SIGKILL)
            os.close(lifeline)
        env = dict(os.environ)
        keep = [*opts["keep"], *_program_home(cmd[0])]
        mounts = private_mounts(keep, opts["run"], opts["readonly"], opts["hide"]) if "mount" in spaces else {
            "proc": "host", "tmp": "host"}
        lo = loopback_up() if opts["lo"] and "net" in spaces else ("down" if "net" in spaces else "host")
        _limits("user" in spaces)
        env.update(KERNELAGENT_SANDBOX_NS=",".join(spaces), KERNELAGENT_SANDBOX_PROC=mounts["proc"],
                   KERNELAGENT_SANDBOX_TMP=mounts["tmp"], KERNELAGENT_SANDBOX_RUN=mounts.get("run", "host"),
                   KERNELAGENT_SANDBOX_LO=lo, KERNELAGENT_SANDBOX_INPUTS=mounts.get("inputs", "none asked"),
                   KERNELAGENT_SANDBOX_NS_ERRORS="; ".join(f"{k}: {v}" for k, v in errors.items()))
        if report is not None:
            _init(cmd, env, report)
        os.execvpe(cmd[0], cmd, env)
    except OSError as e:
        print(f"kernelagent sandbox: cannot start {cmd[0]}: {e}", file=sys.stderr, flush=True)
    os._exit(127)


def _init(cmd: list[str], env: dict[str, str], report: int) -> None:
    """Fork CMD, reap every orphan the namespace hands over, and when CMD ends, report its status and exit:
    the kernel then kills whatever is left in the namespace."""
    pid = os.fork()
    if pid == 0:
        os.close(report)
        try:
            os.execvpe(cmd[0], cmd, env)
        except OSError as e:
            print(f"kernelagent sandbox: cannot start {cmd[0]}: {e}", file=sys.stderr, flush=True)
        os._exit(127)
    os.close(0)  # the request pipe is the worker's: its end-of-file must not wait for this process
    for sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGUSR1, _signal.SIGUSR2, _signal.SIGPIPE):
        _signal.signal(sig, _signal.SIG_IGN)  # (after the fork: the worker keeps its defaults) nothing inside stops it
    while True:
        try:
            done, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if done == pid:
            os.write(report, struct.pack("i", status))
            os._exit(0)


def _refuse(why: str) -> None:
    print(f"kernelagent sandbox: strict confinement refused: {why}", file=sys.stderr, flush=True)
    os._exit(EXIT_REFUSED)


def _relay(pid: int, report: int, parent: int) -> None:
    """Wait for PID 1 and leave the way CMD did (as PID 1 reported it; PID 1's own fate if it could not):
    its exit status, or its fatal signal re-raised. If the process that started this launcher dies first
    (killed with SIGKILL, say: it could not clean up), PID 1 is killed, and the kernel with it everything in
    the namespace: nothing a verification started outlives its caller."""
    os.close(0)  # the request pipe belongs to the worker: its end-of-file must not wait for this process
    status = _wait_watching_parent(pid, report, parent)
    said = os.read(report, 4)
    if len(said) == 4:
        status = struct.unpack("i", said)[0]
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        _signal.signal(sig, _signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def _wait_watching_parent(pid: int, report: int, parent: int) -> int:
    """PID 1's wait status; PID 1 is killed first if this launcher gets a new parent (the old one died).
    A descriptor of PID 1 itself (pidfd) wakes this loop the moment it ends, and nothing PID 1's descendants
    write can fake that (where pidfds are missing, PID 1's status pipe does it); between wake-ups the
    parent is looked at. (PR_SET_PDEATHSIG follows the thread that forked the launcher, and pools start
    workers from threads that end early; a process that left its pid namespace may start no thread.)"""
    try:
        wake = os.pidfd_open(pid)
    except (AttributeError, OSError):
        wake = report
    killed = False
    while not select.select([wake], [], [], PARENT_POLL_S)[0]:
        if not killed and os.getppid() != parent:
            try:
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                pass
            killed = True
    return os.waitpid(pid, 0)[1]


def _parse(argv: list[str]) -> tuple[dict, list[str]]:
    opts: dict = {"strict": False, "lo": False, "net": True, "user": True, "run": False, "keep": [], "readonly": [],
                  "hide": [], "probe": False}
    i = 0
    while i < len(argv) and argv[i] != "--":
        arg = argv[i]
        if arg in ("--keep", "--readonly"):  # --readonly: bound read-only inside (and kept visible)
            opts[arg[2:]].append(argv[i + 1])
            opts["keep"] += [argv[i + 1]] if arg == "--readonly" else []
            i += 1
        elif arg == "--hide":  # covered by an empty mount inside
            opts["hide"].append(argv[i + 1])
            i += 1
        elif arg in ("--strict", "--lo", "--probe"):
            opts[arg[2:]] = True
        elif arg == "--private-run":
            opts["run"] = True
        elif arg == "--host-net":
            opts["net"] = False
        elif arg == "--no-userns":  # keep the host's user namespace (tools that need real capabilities)
            opts["user"] = False
        else:
            raise SystemExit(f"nsinit: unknown option {arg}")
        i += 1
    return opts, argv[i + 1:]


def probe() -> dict:
    """What this machine allows, tried in a throw-away child (this process is left as it was)."""
    import json

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        spaces, errors = enter_namespaces(True)
        result = {"namespaces": spaces, "errors": errors}
        if "pid" in spaces:
            inner = os.fork()
            if inner == 0:
                result.update(private_mounts([]) if "mount" in spaces else {})
                result["loopback"] = loopback_up() if "net" in spaces else "host"
                os.write(w, json.dumps(result).encode())
                os._exit(0)
            os.waitpid(inner, 0)
        else:
            os.write(w, json.dumps(result).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data or b"{}")


def main(argv: list[str]) -> None:
    parent = os.getppid()  # first: a parent that dies from here on is seen by _watch_parent
    opts, cmd = _parse(argv)
    if opts["probe"]:
        import json
        print(json.dumps(probe()))
        return
    if not cmd:
        raise SystemExit("nsinit: no command after --")
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # inherited by everything below: no setuid gains
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    spaces, errors = enter_namespaces(opts["net"], opts["user"])
    wanted = {"pid", "mount", "ipc"} | ({"net"} if opts["net"] else set()) | ({"user"} if opts["user"] else set())
    if opts["strict"] and not wanted <= set(spaces):
        _refuse("; ".join(f"{k} namespace: {v}" for k, v in errors.items()) or "namespaces unavailable")
    if "pid" not in spaces:  # nothing to be PID 1 of: become the command itself
        _child(cmd, spaces, errors, opts, None)
    read_end, write_end = os.pipe()
    life_read, life_write = os.pipe()  # held open by this launcher only, never written
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.close(life_write)
        _child(cmd, spaces, errors, opts, write_end, life_read)
    os.close(write_end)
    os.close(life_read)
    _relay(pid, read_end, parent)


if __name__ == "__main__":
    main(sys.argv[1:])
