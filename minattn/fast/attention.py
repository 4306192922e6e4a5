"""Attention through PyTorch's fused kernel: the output of `minattn.attention.attention_torch`,
without storing the weights.

Read minattn/attention.py first: this is the same function on `F.scaled_dot_product_attention`
(the call `MultiHeadAttention`'s flash branch makes), with our conventions patched in — a row
that sees no key gives zeros, and causality is bottom-right aligned. What it saves is measured
in lesson 01, section 7, and in benchmarks/README.md, section "Dense attention".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import checks as c
from ..attention import (  # noqa: F401 (attention_torch: the reference it equals)
    attention_torch,
    causal_mask_torch,
    hide_unseen,
)
from ..contract import checked


@checked(q="float* (..., Lq, d)", k="float* (..., Lk, d)", v="float* (..., Lk, dv)",
         mask="bool? ~(..., Lq, Lk)", scale="number?", is_causal="bool",
         rules=[c.seen_finite, c.mask_or_causal])
def attention_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         mask: torch.Tensor | None = None, scale: float | None = None,
                         is_causal: bool = False) -> torch.Tensor:
    """Torch-only: the output of `attention_torch` (and `attention_np`) through PyTorch's fused
    kernel, no weights.

    F.scaled_dot_product_attention runs a fused kernel (flash; on CUDA also memory-efficient)
    when one accepts the inputs, and then the (Lq, Lk) matrix is never stored; otherwise its
    math backend stores it, like `attention_torch`. Two differences from our convention are
    patched here: a fully masked row comes back as NaN from some kernels (we return zeros), and
    causality is bottom-right aligned as in `causal_mask_torch` — the Lq queries are the *last*
    Lq positions of the Lk keys, as when a cache or memory of earlier keys is prepended.
    Give `is_causal=True` or a mask, not both.
    """
    q, k, v = hide_unseen(q, k, v, mask)  # what the mask hides may hold garbage
    if is_causal and q.shape[-2] != k.shape[-2]:  # SDPA's own is_causal is top-left aligned
        mask, is_causal = causal_mask_torch(q.shape[-2], k.shape[-2], device=q.device), False
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    seen = mask.any(dim=-1, keepdim=True)  # (..., Lq, 1): does the row see any key?
    # Open the empty rows so the kernel sees finite numbers (no NaN in forward or backward),
    # then zero their output.
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~seen, scale=scale)
    return out.masked_fill(~seen, 0.0)
