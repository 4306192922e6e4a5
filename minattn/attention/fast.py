"""Attention through PyTorch's fused kernel: the output of `attention_np`, without the weights.

Read `reference.py` first: this is the same function on `F.scaled_dot_product_attention`,
with our conventions (empty rows give zeros, causality bottom-right aligned) patched in.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..checks import fail, shape_str
from .checks import check_attention_inputs, visible_inputs
from .reference import causal_mask_torch


def attention_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         mask: torch.Tensor | None = None, scale: float | None = None,
                         is_causal: bool = False) -> torch.Tensor:
    """Torch-only: the output of `attention_np` through PyTorch's fused kernel (no weights).

    F.scaled_dot_product_attention runs a fused kernel (flash; on CUDA also memory-efficient)
    when one accepts the inputs, and then the (Lq, Lk) matrix is never stored; otherwise its
    math backend stores it, like `attention_torch` (lesson 01, section 8, measures both). Two
    differences from our convention are patched here:
    a fully masked row comes back as NaN from some kernels (we return zeros), and causality
    is bottom-right aligned as in `causal_mask_torch` — the Lq queries are the *last* Lq
    positions of the Lk keys, as when a cache or memory of earlier keys is prepended. (SDPA's
    own `is_causal` is top-left aligned; we use it only when Lq == Lk, where the two agree.)
    Give `is_causal=True` or a mask, not both.
    """
    check_attention_inputs(q, k, v, mask, scale, like=torch.Tensor)
    if is_causal and mask is not None:
        fail("attention_fast_torch takes a mask or is_causal=True, not both",
             "one of them (fold causality into the mask with causal_mask_torch)",
             f"mask {shape_str(mask.shape)} and is_causal=True")
    if is_causal and q.shape[-2] != k.shape[-2]:
        mask = causal_mask_torch(q.shape[-2], k.shape[-2], device=q.device)
    q, k, v = visible_inputs(q, k, v, mask)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    has_key = mask.any(dim=-1, keepdim=True)  # (..., Lq, 1): does the row see any key?
    # Open the empty rows so the kernel sees finite numbers (no NaN in forward or backward),
    # then zero their output.
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~has_key, scale=scale)
    return out.masked_fill(~has_key, 0.0)
