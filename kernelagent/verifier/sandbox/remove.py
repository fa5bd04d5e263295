"""Removing what a worker left: a folder tree however deep or wide, by descriptors, never raising.

`shutil.rmtree` recurses once per folder level (Python 3.11) and works by path: a chain of folders a
candidate made 1,500 deep raised RecursionError past `ignore_errors=True`, and a path beyond PATH_MAX
cannot be named at all. This walks down and back up with one folder open at a time (names relative to it,
`..` to climb, each climb checked against the folder it left), scans each folder once, and never follows
a symbolic link. Call it only once no process can still change the tree (the worker's namespace is gone).
"""

from __future__ import annotations

import os
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str | Path) -> bool:
    """Remove `path` (a folder with everything below it, or a file or link); True when it is gone."""
    try:
        top = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        return _unlink(str(path), None)
    _empty(top)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _empty(fd: int) -> None:
    """Remove everything below the folder open as `fd` (closed on return)."""
    # per level below the top: the name of the folder entered, its parent's identity, the parent's
    # subfolders still to visit
    path: list[tuple[str, tuple[int, int], list[str]]] = []
    pending = _clear_files(fd)
    while True:
        if pending:
            name = pending.pop()
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                _unlink(name, fd)
                continue
            path.append((name, _identity(fd), pending))
            os.close(fd)
            fd, pending = child, _clear_files(child)
            continue
        if not path:
            os.close(fd)
            return
        name, parent_id, pending = path.pop()
        try:
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
        except OSError:
            os.close(fd)
            return
        os.close(fd)
        fd = parent
        if _identity(fd) != parent_id:  # the tree moved under us: stop rather than remove elsewhere
            os.close(fd)
            return
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            pass


def _clear_files(fd: int) -> list[str]:
    """Unlink every non-folder in the folder open as `fd`; return its subfolders' names (scanned once)."""
    try:
        os.fchmod(fd, 0o700)  # a folder made unreadable or unwritable (matters to a caller who is not root)
    except OSError:
        pass
    try:
        with os.scandir(fd) as entries:
            found = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except OSError:
        return []
    folders = []
    for name, is_dir in found:
        if is_dir:
            folders.append(name)
        else:
            _unlink(name, fd)
    return folders


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _unlink(name: str, dir_fd: int | None) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
