"""Multi-scale attention, fast: heads grouped by scale, each group on the cheapest kernel.

`multiscale_attention_fast_torch(q, k, v, windows, mask)` returns exactly the output of
`multiscale.multiscale_attention_np` (the tests check outputs and gradients in float64), but
never builds an (H, N, N) mask for the small scales:

    heads with the same ω form a group (gathered along the head axis), and the group runs on
      * lesson 02's window kernel `window_attention_torch` (O(N·ω)) when ω is small,
      * PyTorch's fused SDPA with no window (`fast_attention_torch`) when ω >= N − 1,
      * dense SDPA with the group's band mask when neither pays (ω close to N);
    the group outputs are put back in head order.
For short sequences (N < DENSE_BELOW) one dense masked SDPA call over all heads is faster than
several small calls, so everything goes there (the fallback the benchmark measured).

Padding. The window kernel takes no mask. A key-padding mask (B, 1, 1, N) — the only mask the
fast path accepts; any other mask falls back to dense — is folded into the keys instead: one
extra feature, 1 on every query and 0 (real key) or a huge negative number (padded key) on the
keys, adds −∞ (in effect) to every score of a padded key and nothing to the others:

    q' = [q, 1]·s,  k' = [k, b_j],  s = √((d+1)/d)  =>  q'·k'/√(d+1) = q·k/√d + b_j/√d.

(s keeps the kernel's default 1/√(d+1) scaling equal to ours, 1/√d.) A query whose window holds
no real key would see only huge negatives — a finite, meaningless row — so such rows are set to
zero, as the reference gives them.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from .attention import fast_attention_torch
from .multiscale import _check_inputs, scale_mask_torch
from .sparse_kernels import window_attention_torch

DENSE_BELOW = 1024  # N below which one dense masked call beats grouping (benchmarks/multiscale.py)
WINDOW_PAYS = 0.75  # the window kernel runs a group when 2ω + 64 < WINDOW_PAYS · N
_BLOCK = 64  # the window kernel's query block (its default in training)


def multiscale_attention_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windows,
                                    mask: torch.Tensor | None = None,
                                    dense_below: int = DENSE_BELOW) -> torch.Tensor:
    """Torch-only fast path of `multiscale_attention_np` (output only): (B, H, N, d).

    q, k, v: (B, H, N, d); windows: H integers >= 0; mask: None or bool broadcastable to
    (B, H, N, N). Key-padding masks (B or 1, 1, 1, N) keep the grouped path; other masks,
    and N < dense_below, take one dense masked call.
    """
    ws = _check_inputs(q, k, v, windows, mask)
    n = q.shape[-2]
    key_mask = _key_padding(mask, q.shape[0], n)
    if mask is None and n < dense_below:  # one call; every row sees itself, so no empty row
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_band_bias(n, ws, q))
    if n < dense_below or (mask is not None and key_mask is None):
        full = scale_mask_torch(n, ws, q.device)  # (H, N, N)
        return fast_attention_torch(q, k, v, mask=full if mask is None else full & mask)
    outs, order = [], []
    for w in sorted(set(ws)):
        heads = [h for h, wh in enumerate(ws) if wh == w]
        idx = torch.tensor(heads, device=q.device)
        qg, kg, vg = (x.index_select(1, idx) for x in (q, k, v))  # (B, G, N, d)
        outs.append(_group(qg, kg, vg, w, key_mask))
        order += heads
    out = torch.cat(outs, dim=1)  # heads in group order
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order)] = torch.arange(len(order))
    return out.index_select(1, inverse.to(q.device))  # back in head order


def _band_bias(n, ws, like):
    """(1, H, N, N) additive mask, 0 inside each head's window and −∞ outside, in like's dtype:
    SDPA takes a float mask as it is, while a bool one is converted on every call; and a 4-d
    mask keeps SDPA's fused CPU kernel (a 3-d one was measured 3× slower at N = 256)."""
    return _band_bias_cached(n, tuple(ws), like.device, like.dtype)


@functools.lru_cache(maxsize=4)
def _band_bias_cached(n, ws, device, dtype):
    allowed = scale_mask_torch(n, list(ws), device)[None]  # (1, H, N, N)
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill_(~allowed,
                                                                               float("-inf"))


def _key_padding(mask, bsz, n):
    """(B, N) key mask if `mask` is a key-padding mask (shape (B|1, 1, 1, N)), else None."""
    if mask is None or mask.ndim != 4 or mask.shape[1:3] != (1, 1) or mask.shape[-1] != n:
        return None
    return mask[:, 0, 0, :].expand(bsz, n)


def _group(q, k, v, w, key_mask):
    """Attention of one group of heads sharing the window w: (B, G, N, d)."""
    n = q.shape[-2]
    if w >= n - 1:  # the window covers everything: plain (key-masked) SDPA
        return fast_attention_torch(q, k, v, mask=None if key_mask is None
                                    else key_mask[:, None, None, :])
    if 2 * w + _BLOCK >= WINDOW_PAYS * n:  # the window kernel would do nearly N² work anyway
        if key_mask is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=_band_bias(n, [w], q))
        band = scale_mask_torch(n, [w], q.device)  # (1, N, N)
        return fast_attention_torch(q, k, v, mask=band if key_mask is None
                                    else band & key_mask[:, None, None, :])
    if key_mask is None:
        return window_attention_torch(q, k, v, w)
    d = q.shape[-1]
    s = math.sqrt((d + 1) / d)
    big = torch.finfo(q.dtype).max / 4  # exp(q·k − big) is exactly 0, and nothing overflows
    bias = torch.zeros(key_mask.shape, dtype=q.dtype, device=q.device).masked_fill(~key_mask, -big)
    q1 = torch.cat([q, torch.ones_like(q[..., :1])], dim=-1) * s  # (B, G, N, d + 1)
    k1 = torch.cat([k, bias[:, None, :, None].expand(*k.shape[:-1], 1)], dim=-1)
    v1 = torch.cat([v, torch.zeros_like(v[..., :1])], dim=-1)  # same width as q, k
    out = window_attention_torch(q1, k1, v1, w)[..., :-1]
    # Queries with no real key in their window: zeros, as in the reference.
    seen = torch.cat([key_mask.new_zeros(key_mask.shape[0], 1, dtype=torch.long),
                      key_mask.long().cumsum(-1)], dim=-1)  # (B, N + 1) prefix counts
    i = torch.arange(n, device=q.device)
    has_key = (seen[:, (i + w + 1).clamp(max=n)] - seen[:, (i - w).clamp(min=0)]) > 0  # (B, N)
    return out.masked_fill(~has_key[:, None, :, None], 0.0)
