"""The fused CuTe backward's dQ post-pass (`_dq_post_kernel` in cute.py) under the Triton interpreter.

The fused kernel stores dQ's fp32 parts in register-fragment order, a region of 64 rows by 64 columns
(private parts) or by D/2 (shared) at a time (thread t's values 4j..4j+3 at (j * 128 + t) * 4), and adds
them into a global buffer in that order; the post-pass must read it back, for both region widths. Here
the order is written from the Hopper wgmma accumulator layout as CuTe defines it
(thread t = 32 w + 4 g + q holds rows 16 w + g and + 8, columns 2 q, 2 q + 1 of every 8-column group; its
value i is column +i % 2, row +8 (i // 2 % 2), group i // 4), independently of the post-pass's formula.
The post-pass must recover dQ (within one unit in the last place) and take out the centring term
(rs - dlse) * K[best] where a row has a best key (none: -1), scaled, in the output dtype, rows past the
sequence untouched. The GPU tests check the kernel's side (tests/kernels/test_attention_gpu.py).
"""

from __future__ import annotations

import pytest

from tests.helpers.interp import run_in_interpreter

pytest.importorskip("cutlass")


def scatter_like_the_kernel(dq, half: int):  # half: the columns of one region
    """(B, H, S_pad, D) fp32 in natural order -> the same buffer as the fused kernel leaves it."""
    import torch

    out = torch.empty_like(dq)
    b, h, s_pad, d = dq.shape
    flat_in = dq.reshape(b * h, s_pad, d)
    flat_out = out.reshape(b * h, s_pad * d)
    per_thread = 64 * half // 128
    for bh in range(b * h):
        for block in range(s_pad // 64):
            for wg in range(d // half):
                base = block * 64 * d + wg * 64 * half
                for t in range(128):
                    for i in range(per_thread):
                        row = 16 * (t // 32) + (t % 32) // 4 + 8 * (i // 2 % 2)
                        col = wg * half + 2 * (t % 4) + i % 2 + 8 * (i // 4)
                        pos = ((i // 4) * 128 + t) * 4 + i % 4
                        flat_out[bh, base + pos] = flat_in[bh, block * 64 + row, col]
    return out


def child() -> dict:
    """In the interpreter: run the post-pass on a scattered buffer, compare with the formula in torch."""
    import torch

    from kernelagent.kernels.attention import cute as ac

    torch.manual_seed(0)
    errors = {}
    tiles = ac._fused_tiles
    for private, d, sq, dtype in ((p, *case) for p in (False, True)
                                  for case in ((128, 100, torch.bfloat16), (64, 64, torch.float16))):
        ac._fused_tiles = lambda d, p=private: {**tiles(d), "private_dq": p}
        b, h, hkv, s_pad = 1, 2, 1, 128
        acc = torch.randn(b, h, s_pad, d)
        rs = torch.randn(b, h, s_pad)
        best = torch.randint(-1, sq, (b, h, s_pad), dtype=torch.int32)
        tab = torch.zeros(b, h, 4, s_pad)
        tab[:, :, 1] = torch.where(torch.rand(b, h, s_pad) < 0.2, float("inf"), 1.0)
        tab[:, :, 3] = torch.randn(b, h, s_pad)
        k = torch.randn(b, sq, hkv, d).to(dtype)
        dq = torch.full((b, sq, h, d), 7.0, dtype=dtype)
        scale = 0.125
        ac._dq_post_kernel[(triton_cdiv(sq, ac.POST_BLOCK), b * h)](
            scatter_like_the_kernel(acc, ac._dq_region(d)), rs, best, tab, k, dq, *ac._strides(k, False),
            *ac._strides(dq, False), sq, s_pad, h, h // hkv, scale, HEAD_D=d, BLOCK_D=ac._block_d(d),
            BLOCK_M=ac.POST_BLOCK, REGION=ac._dq_region(d))
        sums = torch.where(tab[:, :, 1] != float("inf"), rs - tab[:, :, 3], rs)
        centre = torch.where((best >= 0)[..., None], k[0, best.clamp_min(0).long()[0], 0].float()[None], 0.0)
        want = ((acc - sums[..., None] * centre) * scale)[:, :, :sq].transpose(1, 2).to(dtype)
        # one unit in the last place of the output dtype at most (fp32 rounding order, then the cast)
        ulp = 2.0 ** (-7 if dtype == torch.bfloat16 else -10)
        off = (dq.float() - want.float()).abs() / (want.float().abs() * ulp + 1e-30)
        errors[f"{d} private={private}"] = float(off.max())
    return errors


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_post_pass_reads_the_kernels_order_and_centres():
    code = ("from tests.helpers.interp import emit\nimport tests.kernels.test_attention_fused_post as t\n"
            "emit(t.child())\n")
    errors = run_in_interpreter(code, timeout=300)
    assert len(errors) == 4
    assert all(e <= 1.0 for e in errors.values()), errors
