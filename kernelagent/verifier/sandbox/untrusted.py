"""Reading what a worker wrote: the parent is not confined, so a name in a worker's folder must not lead it
anywhere else. A candidate controls those folders: a symbolic link there would be followed by the parent to
its own files (`/proc/self/...`, the caller's home), a FIFO would block it for ever, `/dev/zero` behind a link
would fill its memory. Every such read goes through here: no link followed, a regular file only, a size cap.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UntrustedFile(ValueError):
    """A worker's file that is not a plain regular file of bounded size."""


def plain_file(path: str | Path, max_bytes: int | None = None) -> int:
    """The size of `path` if it is a regular file (not a link, FIFO or device) of at most `max_bytes`."""
    fd = _open(path)
    try:
        return _checked_size(fd, path, max_bytes)
    finally:
        os.close(fd)


def read_bytes(path: str | Path, max_bytes: int) -> bytes:
    """The content of `path`, checked as `plain_file` says, read from the descriptor that was checked."""
    fd = _open(path)
    try:
        size = _checked_size(fd, path, max_bytes)
        chunks, left = [], size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | Path, max_bytes: int) -> str:
    return read_bytes(path, max_bytes).decode(errors="replace")


def _open(path: str | Path) -> int:
    try:
        return os.open(path, _FLAGS)
    except OSError as e:  # ELOOP: a symbolic link; ENXIO: a FIFO with no writer
        raise UntrustedFile(f"{path}: cannot be opened as a plain file ({e.strerror})") from e


def _checked_size(fd: int, path: str | Path, max_bytes: int | None) -> int:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedFile(f"{path}: not a regular file")
    if max_bytes is not None and st.st_size > max_bytes:
        raise UntrustedFile(f"{path}: {st.st_size} bytes, more than the {max_bytes} allowed")
    return st.st_size
