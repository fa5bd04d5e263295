"""Removing what a worker left: a folder tree however deep, by descriptors, never raising.

`shutil.rmtree` recurses once per folder level (Python 3.11) and works by path: a chain of folders a
candidate made 1,500 deep raised RecursionError past `ignore_errors=True`, and a path beyond PATH_MAX
cannot be named at all. This walks with an explicit stack of open folders, naming each entry relative
to its folder's descriptor, and never follows a symbolic link.
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


def _empty(top: int) -> None:
    """Remove everything inside the folder open as `top` (closed on return)."""
    stack: list[tuple[int, str]] = [(top, "")]  # open folders, each with its name in the one below it
    stuck: set[tuple[int, int]] = set()  # folders that could not be removed: not entered again
    while stack:
        fd, name = stack[-1]
        child = _first_subfolder(fd, stuck)
        if child is not None:
            stack.append(child)
            continue
        stack.pop()
        if stack:
            try:
                os.rmdir(name, dir_fd=stack[-1][0])
            except OSError:
                st = os.fstat(fd)
                stuck.add((st.st_dev, st.st_ino))
        os.close(fd)


def _first_subfolder(fd: int, stuck: set[tuple[int, int]]) -> tuple[int, str] | None:
    """Unlink the files in the folder open as `fd`; open and return its first subfolder not yet stuck."""
    try:
        os.fchmod(fd, 0o700)  # a folder the candidate made unreadable or unwritable (a non-root caller)
    except OSError:
        pass
    try:
        with os.scandir(fd) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except OSError:
        return None
    for name, is_dir in names:
        if not is_dir:
            _unlink(name, fd)
            continue
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            _unlink(name, fd)
            continue
        st = os.stat(sub)
        if (st.st_dev, st.st_ino) in stuck:
            os.close(sub)
            continue
        return sub, name
    return None


def _unlink(name: str, dir_fd: int | None) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
