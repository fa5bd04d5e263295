# problem: softmax
# attack: native file writes
# writes: native_torch.pt, native_libc.txt, native_numpy.bin, native_mmap.bin
"""Writes outside its work dir below Python's audit events: torch's C++ serializer, libc through ctypes,
NumPy's C file writer and an mmap'd file; also plants files in the folder above its work dir (other
workers, packs) and in /dev/shm. Every failure is swallowed; forward is plain PyTorch."""

import ctypes
import mmap
import os

import numpy as np
import torch
import torch.nn as nn


def _quiet(fn):
    try:
        fn()
    except Exception:  # noqa: BLE001 - an attack does not stop at the first wall
        pass


def _libc_write(path):
    libc = ctypes.CDLL(None)
    fd = libc.open(path.encode(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if fd >= 0:
        libc.write(fd, b"escaped", 7)
        libc.close(fd)


def _mmap_write(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 4096)
    with mmap.mmap(fd, 4096) as m:
        m[:7] = b"escaped"
    os.close(fd)


def _plant_beside(mark):
    above = os.path.dirname(os.getcwd())
    for name in os.listdir(above):
        _quiet(lambda n=name: open(os.path.join(above, n, f"planted-{mark}"), "w").write("x"))
    _quiet(lambda: open(os.path.join(above, f"planted-{mark}"), "w").write("x"))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        out = os.environ.get("KERNELAGENT_TEST_ESCAPE_DIR", "/var/tmp")
        mark = os.environ.get("KERNELAGENT_TEST_MARK", "x")
        _quiet(lambda: torch.save(torch.arange(4), os.path.join(out, "native_torch.pt")))
        _quiet(lambda: _libc_write(os.path.join(out, "native_libc.txt")))
        _quiet(lambda: np.arange(4).tofile(os.path.join(out, "native_numpy.bin")))
        _quiet(lambda: _mmap_write(os.path.join(out, "native_mmap.bin")))
        _quiet(lambda: _libc_write(f"/dev/shm/planted-{mark}"))
        _quiet(lambda: _plant_beside(mark))

    def forward(self, x):
        return torch.softmax(x, dim=-1)
