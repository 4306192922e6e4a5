"""The blocked idea behind the sparse kernels: blocks of queries, one band mask, O(N·w).

Read it before `kernels.py`, which builds every window pattern on it, and `backward.py`, which
gives its core a hand-written backward:

    band_mask_torch                  the window of each query inside its block's key span
    unfold_blocks_torch              each block's span of keys, a view (no copy)
    blocked_window_attention_torch   the idea (exercise 2.2): one SDPA call over all blocks
    window_forward_torch             the core's forward: the idea, with the blocks at the two
                                     ends recomputed with their exact masks

Shapes: q, k (..., N, d), v (..., N, dv).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import check_attention_inputs, visible_inputs
from ..checks import check_array, check_size, fail, shape_str
from .patterns import check_int


# ============================================================================ the blocked idea
def band_np(block: int, w_left: int, w_right: int) -> np.ndarray:
    """`band_mask_torch` as a NumPy array (no checks): the band of every block."""
    # Built in NumPy: a handful of tiny index ops that would each cost a thread-pool wake-up
    # in torch.
    a = np.arange(block)[:, None]
    t = np.arange(block + w_left + w_right)[None, :]
    return (t >= a) & (t <= a + w_left + w_right)


def band_mask_torch(block: int, w_left: int, w_right: int, device=None) -> torch.Tensor:
    """(c, c + w_left + w_right) bool: the window of each query inside its block's key span.

    Query a of a block (global position s + a) gets the keys s - w_left .. s + c + w_right;
    key t of that span is position s - w_left + t, so j - i in [-w_left, w_right] becomes
    a <= t <= a + w_left + w_right. One small mask serves every block: that is the trick.
    """
    block, w_left, w_right = _check_band(block, w_left, w_right)
    return torch.from_numpy(band_np(block, w_left, w_right)).to(device)


def _check_band(block, w_left, w_right) -> tuple[int, int, int]:
    return (check_size("block", block, 1), check_size("w_left", w_left),
            check_size("w_right", w_right))


def unfold_blocks_torch(x: torch.Tensor, block: int, w_left: int, w_right: int) -> torch.Tensor:
    """(..., M, d) -> (..., nb, c + w_left + w_right, d): block b gets rows [b·c - w_left,
    b·c + c + w_right) of x, zero rows outside 0..M-1. A view of the padded x: the blocks
    overlap in memory, no copy is made."""
    check_array("x", x, None, min_ndim=2, hint="(..., M, d)", like=torch.Tensor)
    block, w_left, w_right = _check_band(block, w_left, w_right)
    n_blocks = -(-x.shape[-2] // block)
    pad_right = n_blocks * block - x.shape[-2] + w_right
    padded = F.pad(x, (0, 0, w_left, pad_right))  # (..., w_left + nb·c + w_right, d)
    return padded.unfold(-2, block + w_left + w_right, block).transpose(-1, -2)


def blocked_window_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                   w_left: int, w_right: int, block: int,
                                   scale: float | None = None) -> torch.Tensor:
    """The fast path: every query i attends to keys i - w_left .. i + w_right, as if the
    sequence continued with zero keys past both ends (those are removed by the caller).

    q, k: (..., M, d); v: (..., M, dv) -> (..., nb, c, dv), nb = ceil(M / c) query blocks.

    Queries are cut into blocks of c; each block gets the c + w_left + w_right keys around
    it (an unfold of the padded keys); one batched SDPA call with the fixed (c, c + w_l + w_r)
    band mask does all blocks at once. Work: N·(c + w_l + w_r) scores instead of N².
    """
    check_attention_inputs(q, k, v, scale=scale)
    block, w_left, w_right = _check_band(block, w_left, w_right)
    # BEGIN EXERCISE 2.2 implement: the blocked window forward: query blocks of c, unfolded key spans, one SDPA call with the band mask (~20 min)
    n_blocks = -(-q.shape[-2] // block)
    pad = n_blocks * block - q.shape[-2]
    q_blocks = (F.pad(q, (0, 0, 0, pad)) if pad else q).unflatten(-2, (n_blocks, block))
    # q_blocks: (..., nb, c, d)
    k_spans = unfold_blocks_torch(k, block, w_left, w_right)  # (..., nb, c + wl + wr, d)
    v_spans = unfold_blocks_torch(v, block, w_left, w_right)  # (..., nb, c + wl + wr, dv)
    band = band_mask_torch(block, w_left, w_right, q.device)  # (c, c + wl + wr)
    out = F.scaled_dot_product_attention(q_blocks, k_spans, v_spans, attn_mask=band, scale=scale)
    # END EXERCISE
    return out


# ============================================================================ the core's forward
def check_window_args(q, k, v, w, scale=None) -> int:
    """q, k, v of self-attention (one length N), finite (every key is in its own query's
    window: nothing is hidden), w an integer >= 0."""
    check_attention_inputs(q, k, v, scale=scale)
    if q.shape[-2] != k.shape[-2]:
        fail("window attention is self-attention: queries and keys must have one length N",
             f"k of length {q.shape[-2]}", f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    w = check_int("window w", w, 0)
    visible_inputs(q, k, v)  # checks that they are finite
    return w


def window_forward_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int,
                         causal: bool, block: int, scale: float | None) -> torch.Tensor:
    """The core's computation, torch-only: q, k (B, N, d), v (B, N, dv) -> (B, N, dv).

    (1) `blocked_window_attention_torch` runs every block with the one band mask; (2) the
    few blocks where that mask is wrong — their span runs past an end of the sequence, where
    the blocked kernel saw zero keys — are recomputed with their exact masks and swapped in.
    """
    w = check_window_args(q, k, v, w, scale)
    block = check_size("block", block, 1)
    n = q.shape[-2]
    w_right = 0 if causal else w
    out = blocked_window_attention_torch(q, k, v, w, w_right, block, scale)  # (B, nb, c, dv)
    wrong, fixed = _end_blocks(q, k, v, w, w_right, block, scale)
    if wrong.numel():
        if out.requires_grad:
            out = out.index_copy(-3, wrong, fixed)  # autograd needs SDPA's output untouched
        else:
            out.index_copy_(-3, wrong, fixed)  # inference: no second copy of the output
    return out.flatten(-3, -2)[..., :n, :]


def _end_blocks(q, k, v, w_left, w_right, c, scale):
    """The blocks near the two ends, with their exact masks: about (w_left + w_right) / c + 2
    blocks. Returns their numbers (nw,) and outputs (B, nw, c, dv). The bookkeeping is on
    positions only (small NumPy arrays, never N²)."""
    n, device = q.shape[-2], q.device
    starts = np.arange(-(-n // c)) * c
    blocks = np.flatnonzero((starts < w_left) | (starts + c + w_right > n))
    q_pos = starts[blocks, None] + np.arange(c)  # (nw, c)
    k_pos = starts[blocks, None] - w_left + np.arange(c + w_left + w_right)  # (nw, span)
    exact = band_np(c, w_left, w_right) & ((k_pos >= 0) & (k_pos < n))[:, None, :]
    exact |= (q_pos >= n)[:, :, None]  # padded queries: any finite row will do (cut off later)
    # Positions outside 0 .. N-1 are clamped to a real row: `exact` masks them out.
    q_idx, k_idx = (torch.as_tensor(np.clip(p, 0, n - 1), device=device) for p in (q_pos, k_pos))
    out = F.scaled_dot_product_attention(q[:, q_idx], k[:, k_idx], v[:, k_idx],
                                         attn_mask=torch.as_tensor(exact, device=device),
                                         scale=scale)  # (B, nw, c, dv)
    return torch.as_tensor(blocks, device=device), out
