"""Reference for the attention family: softmax(q k^T * scale) v in (B, S, H, D) layout, forward and
backward, with causal masking, grouped-query heads, soft-capping and a sliding window.

Conventions (the library's kernels follow them):
* q is (B, Sq, Hq, D); k and v are (B, Sk, Hkv, D) with Hq a multiple of Hkv; query head h reads
  key/value head h // (Hq // Hkv) (as repeat_interleave over the head axis does).
* Query i and key j are aligned at the bottom right, as FlashAttention does: with off = Sk - Sq,
  causal means j <= i + off, and window (left, right) keeps i + off - left <= j <= i + off + right
  (None, or a negative value, on a side: unbounded there). With Sq == Sk this is the usual mask.
* softcap: scores become softcap * tanh(scores / softcap) after scaling (Gemma 2, FA's softcap).
* A query that sees no key gets an output of zeros.
The options come with the inputs, so one problem covers the masks; the defaults are
F.scaled_dot_product_attention(q, k, v) on (B, H, S, D)-transposed tensors.
"""

import torch
import torch.nn as nn

BACKWARD = True
DTYPE = torch.bfloat16
# option sets the offline match tries beside a problem's q, k, v (kernelagent/verifier/reference/matching.py): a
# problem computing causal attention, or attention in SDPA's (B, H, S, D) layout, gets the kernel with those bound
MATCH_PRESETS = [{}, {"causal": True}, {"layout": "bhsd"}, {"layout": "bhsd", "causal": True}]


def visible(sq: int, sk: int, causal: bool = False, window=None, device=None) -> torch.Tensor:
    """[Sq, Sk] bool: which keys each query sees (bottom-right aligned causal mask and window)."""
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    keep = torch.ones(sq, sk, dtype=torch.bool, device=device)
    left, right = (None, None) if window is None else window
    left = None if left is None or left < 0 else left
    right = None if right is None or right < 0 else right
    if causal:
        right = 0 if right is None else min(right, 0)
    if right is not None:
        keep &= j <= i + right
    if left is not None:
        keep &= j >= i - left
    return keep


def attention_reference(q, k, v, causal=False, scale=None, softcap=None, window=None):
    """softmax(q k^T * scale [softcapped], masked) v per head, in the inputs' dtype (softmax in fp32)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = d ** -0.5 if scale is None else scale
    qh = q.transpose(1, 2)  # (B, Hq, Sq, D)
    kh = k.transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    s = (qh @ kh.transpose(-1, -2)) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    keep = visible(sq, sk, causal, window, q.device)
    s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s.to(torch.promote_types(s.dtype, torch.float32)), dim=-1)
    p = torch.where(keep.any(-1, keepdim=True), p, torch.zeros_like(p)).to(q.dtype)  # no key seen: zeros
    return (p @ vh).transpose(1, 2)  # (B, Sq, Hq, D)


class Model(nn.Module):
    """attention_reference(q, k, v, causal, scale, softcap, window): (B, Sq, Hq, D); with layout "bhsd" inputs and
    output in (B, H, S, D), as F.scaled_dot_product_attention takes them."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, causal=False, scale=None, softcap=None, window=None, layout="bshd"):
        if layout not in ("bshd", "bhsd"):
            raise ValueError(f"attention: layout must be 'bshd' or 'bhsd', got {layout!r}")
        if layout == "bhsd":  # SDPA's (B, H, S, D): the same attention on the transposed views
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            return attention_reference(q, k, v, causal, scale, softcap, window).transpose(1, 2)
        return attention_reference(q, k, v, causal, scale, softcap, window)


def _qkv(b, sq, sk, hq, hkv, d, dtype=DTYPE):
    return [torch.randn(b, sq, hq, d).to(dtype), torch.randn(b, sk, hkv, d).to(dtype),
            torch.randn(b, sk, hkv, d).to(dtype)]


def get_inputs():
    return _qkv(2, 4096, 4096, 16, 16, 128) + [True]  # causal, 2 x 4096 tokens, 16 heads of 128


def get_init_inputs():
    return []


def get_test_inputs():
    """Small sets (the CPU interpreter runs them): lengths that are not multiples of a block, GQA and
    MQA, causal with Sq < Sk and Sq > Sk (bottom-right: the first queries then see no key), a
    sliding window, soft-capping, an explicit scale, head dims 64 and 128, bf16 and fp16, GQA in SDPA's
    (B, H, S, D) layout; then one larger causal set for the GPU."""
    f16 = torch.float16
    return [
        _qkv(1, 37, 37, 2, 2, 64),
        _qkv(2, 45, 45, 4, 2, 64) + [True],
        _qkv(1, 19, 50, 4, 1, 64) + [True],
        _qkv(1, 50, 19, 2, 1, 64) + [True],
        _qkv(2, 33, 33, 2, 2, 128, f16) + [False, 0.2],
        _qkv(1, 61, 61, 4, 2, 64) + [True, None, None, (20, 0)],
        _qkv(1, 40, 29, 2, 2, 64, f16) + [False, None, 10.0],
        _qkv(1, 30, 30, 2, 1, 64) + [False, None, None, (7, 5)],
        [t.transpose(1, 2).contiguous() for t in _qkv(1, 40, 40, 4, 2, 64)] + [True, None, None, None, "bhsd"],
        _qkv(2, 1000, 1000, 8, 2, 128) + [True],
    ]
