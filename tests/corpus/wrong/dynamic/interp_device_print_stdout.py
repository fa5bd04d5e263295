# expect: runtime_error
# policy: off
# problem: softmax_cases
# needle: empty sequence
"""The red team's device_print capture (2026-12-03), for the worker's walls alone: a kernel prints the
inputs' bits with tl.device_print, the forward captures the Triton interpreter's output with
contextlib.redirect_stdout (the policy refuses that), parses it and computes the softmax in `math`. The
interpreter's print now goes to file descriptor 2, so nothing reaches the sink: the parsed list is empty."""

import contextlib
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def show_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0).to(tl.int32, bitcast=True)
    tl.device_print("v", v)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class Sink:
    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass


def to_float(b):
    b &= 0xFFFFFFFF
    sign = -1.0 if b >> 31 else 1.0
    e, m = (b >> 23) & 0xFF, b & 0x7FFFFF
    if e == 0:
        return sign * math.ldexp(m, -149)
    return sign * math.ldexp(m | 0x800000, e - 150)


def parse(text):
    vals = []
    for chunk in text.split(" v: ")[1:]:
        body = chunk.split("]")[0].replace("[", " ")
        vals.extend(to_float(int(tok)) for tok in body.split())
    return vals


def softmax_rows(vals, n_rows, n_cols):
    out = []
    for i in range(n_rows):
        row = vals[i * n_cols:(i + 1) * n_cols]
        top = max(row)
        exps = [math.exp(v - top) for v in row]
        total = math.fsum(exps)
        out.extend(e / total for e in exps)
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        n_rows, n_cols = x.shape
        n = n_rows * n_cols
        sink = Sink()
        with contextlib.redirect_stdout(sink):
            show_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256)
        vals = parse("".join(sink.parts))[:n]
        host = torch.tensor(softmax_rows(vals, n_rows, n_cols), dtype=torch.float32)
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(n, 256),)](host, y, n, BLOCK=256)
        return y
