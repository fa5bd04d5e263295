# expect: policy_violation
# policy: off
# problem: softmax
# needle: -in
"""(Red team, 2026-12-01.) Policy off. Class: forged delivery handshake. At import, the candidate creates `<workdir>-out/constructed`
with a C-level writer (torch.from_file(shared=True), an mmap opened in C++: no audit event, and Landlock lets the worker write its -out
folder). The parent takes that for "the model is built" and links the trial inputs, problem.py and the
timing key into -in while the constructor is still running; the constructor waits for them, computes every
trial's answer with torch.softmax (no op recorder around the constructor) and forward only looks the answer
up (one .item() read as key) and copies it out with a Triton kernel. The audit hook now refuses candidate
code reading the `-in` folder at all, which stops it first; the delivery-order check behind it (trial inputs
already there when the worker says the model is built) is tested on its own in
tests/verifier/sandbox/test_timing_turn.py."""

import os
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

_OUT = os.getcwd() + "-out"
_IN = os.getcwd() + "-in"
torch.from_file(_OUT + "/constructed", shared=True, size=1, dtype=torch.uint8)  # mmap: C open(O_CREAT)


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def _key(x):
    flat = x.reshape(-1)
    n = flat.numel()
    return (tuple(x.shape),) + tuple(float(flat[i * n // 8].item()) for i in range(8))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.answers = {}
        deadline = time.time() + 30
        while not os.path.exists(_IN + "/delivery.json") and time.time() < deadline:
            time.sleep(0.01)
        for name in sorted(os.listdir(_IN)):
            if name.startswith("inputs_") and name.endswith(".pt"):
                data = torch.load(os.path.join(_IN, name), weights_only=True)
                x = data["inputs"][0]
                self.answers[_key(x)] = torch.softmax(x, dim=-1)

    def forward(self, x):
        x = x.contiguous()
        ans = self.answers[_key(x)].to(x.device)
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 256),)](ans, y, x.numel(), BLOCK=256)
        return y
