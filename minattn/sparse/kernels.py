"""Sparse attention kernels in PyTorch whose time and memory grow linearly with N.

The NumPy masks of `patterns.py` state the patterns; feeding such an (N, N) mask to dense
attention costs O(N²) time and memory however few Trues it holds. Nothing here builds
anything of size N². Read `blocked.py` first (the idea, exercise 2.2: blocks of queries, one
band mask), then `backward.py`, then this file top to bottom:

    sliding_window_attention_torch   the core: |i - j| <= w (j <= i when causal), O(N·w)
    dilated_window_attention_torch   every δ-th token: the core on each residue class i mod δ
    global_window_attention_torch    window ∪ global tokens (Longformer)
    window_attention_torch           the entry point: picks one of the three above
    block_sparse_attention_torch     any block layout (BigBird, fixed): only non-zero blocks

All are ordinary torch code, so autograd gives the backward pass — except the core when it
trains: `backward.py` gives it a hand-written backward
that recomputes a few blocks at a time instead of keeping every block's attention. Every result
equals dense masked attention (`minattn.attention.attention_torch`) on the same pattern: the
tests check outputs and gradients in float64. Shapes: q, k (..., N, d), v (..., N, dv).
The layers that use these kernels are built in `model.py`:
`MultiHeadAttention(d, h, attend=window_attend(w))`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import check_attention_inputs, visible_inputs
from ..checks import check_size, fail, hide, shape_str
from .backward import WindowAttentionFunction
from .blocked import band_np, check_window_args, unfold_blocks_torch, window_forward_torch
from .dispatch import routed_block_sparse_attention, routed_window_attention
from .patterns import check_global_idx, check_int


# ====================================================================== the core: a sliding window
def _default_block(block, q, k, v) -> int:
    """c = 32 for a forward without gradients, 64 for training: the fastest on a 2-core CPU
    for w in {32, 128} (benchmarks/sparse.py)."""
    if block is None:
        training = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
        return 64 if training else 32
    return check_int("block", block, 1)


def sliding_window_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int,
                                   causal: bool = False, *, block: int | None = None,
                                   scale: float | None = None, hand_backward: bool = True,
                                   chunk_scores: int | None = None) -> torch.Tensor:
    """Sliding-window self-attention in O(N·w) time and memory, forward and backward.

    torch-only; equals dense masked attention with `sliding_window_mask_np(N, w, causal)`:
    query i attends to keys i - w .. i + w (.. i when causal) that lie in 0 .. N-1.

    Args:
        q, k: (..., N, d); v: (..., N, dv).  w: one-sided half-width >= 0.
        block: queries per block c. Each query does c + 2w key lookups instead of 2w + 1
            (c + w when causal): small blocks waste less but call more, smaller matmuls.
            Default: 32 without gradients, 64 when training.
        scale: default 1/√d.
        hand_backward: when a gradient is needed, train through
            `backward.WindowAttentionFunction`, whose backward recomputes a chunk of
            blocks at a time; False: plain autograd through the blocked kernel.
        chunk_scores: scores per chunk in that backward (default `backward.CHUNK_SCORES`).
    Returns:
        (..., N, dv).
    """
    w = check_window_args(q, k, v, w, scale)
    c = _default_block(block, q, k, v)
    if chunk_scores is not None:
        chunk_scores = check_size("chunk_scores", chunk_scores, 1)
    lead = q.shape[:-2]
    # One batch axis (B' = batch · heads · ...): SDPA's fast CPU kernel wants 4-d blocks.
    q3, k3, v3 = (x.reshape(-1, *x.shape[-2:]) for x in (q, k, v))  # (B', N, d)
    training = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    if training and hand_backward:
        out = WindowAttentionFunction.apply(q3, k3, v3, w, causal, c, scale, chunk_scores)
    else:
        out = window_forward_torch(q3, k3, v3, w, causal, c, scale)
    return out.reshape(*lead, *out.shape[-2:])


# ========================================================================== dilation, global tokens
def _to_classes(x: torch.Tensor, dilation: int) -> torch.Tensor:
    """(..., N, d) -> (..., δ, m, d), m = ceil(N / δ): place p of class r is position r + δ·p
    (zero rows past N)."""
    n = x.shape[-2]
    m = -(-n // dilation)
    return F.pad(x, (0, 0, 0, m * dilation - n)).unflatten(-2, (m, dilation)).transpose(-2, -3)


def dilated_window_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int,
                                   dilation: int, causal: bool = False, **options) -> torch.Tensor:
    """Dilated sliding window: i attends to j iff |i - j| <= w·δ and δ divides i - j.

    torch-only; equals dense masked attention with `dilated_window_mask_np(N, w, δ, causal)`.
    q, k: (..., N, d); v: (..., N, dv) -> (..., N, dv). `options` go to the core
    (`sliding_window_attention_torch`: block, scale, hand_backward, chunk_scores).

    Query i = r + δ·p sees only keys of its own residue class r = i mod δ, and inside the
    class the dilated window is a plain window of half-width w over the places p. So: cut the
    sequence into its δ classes, run the core on them as a batch, put the places back. When δ
    does not divide N, the first N mod δ classes are one place longer than the others: the
    core runs once per group of equal length.
    """
    w = check_window_args(q, k, v, w)
    dilation = check_int("dilation", dilation, 1)
    if dilation == 1:
        return sliding_window_attention_torch(q, k, v, w, causal, **options)
    n = q.shape[-2]
    m = -(-n // dilation)  # places in the longest classes
    n_long = n - (m - 1) * dilation  # classes 0 .. n_long - 1 have m places, the others m - 1
    qc, kc, vc = (_to_classes(x, dilation) for x in (q, k, v))  # (..., δ, m, d)
    parts = [sliding_window_attention_torch(qc[..., :n_long, :, :], kc[..., :n_long, :, :],
                                            vc[..., :n_long, :, :], w, causal, **options)]
    if n_long < dilation:  # the shorter classes, without their padding place
        if m > 1:
            short = sliding_window_attention_torch(
                qc[..., n_long:, :m - 1, :], kc[..., n_long:, :m - 1, :],
                vc[..., n_long:, :m - 1, :], w, causal, **options)
        else:  # N < δ: those classes are empty
            short = vc.new_zeros(*vc.shape[:-3], dilation - n_long, 0, vc.shape[-1])
        parts.append(F.pad(short, (0, 0, 0, 1)))
    out = torch.cat(parts, dim=-3)  # (..., δ, m, dv)
    return out.transpose(-2, -3).flatten(-3, -2)[..., :n, :]  # place p of class r -> r + δ·p


def global_window_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int,
                                  global_idx, dilation: int = 1, causal: bool = False, *,
                                  block: int | None = None,
                                  scale: float | None = None) -> torch.Tensor:
    """Longformer's pattern: a (dilated) window plus global tokens, in O(N·(w + G)).

    torch-only; equals dense masked attention with
        dilated_window_mask_np(N, w, δ) | global_mask_np(N, global_idx)   (∩ j <= i if causal).
    q, k: (..., N, d); v: (..., N, dv) -> (..., N, dv). Plain autograd backward.

    Every block of queries (of every residue class) gets its span of window keys plus the G
    global keys, the same for every block, and its own exact (c, span + G) mask: a global key
    already in a query's window is seen through the window, not twice; keys past the ends
    are masked. Then the G global queries attend to all N keys (G·N work) and replace their rows.
    """
    w = check_window_args(q, k, v, w, scale)
    dilation = check_int("dilation", dilation, 1)
    c = _default_block(block, q, k, v)
    n, device = q.shape[-2], q.device
    g_np = check_global_idx(global_idx, n)
    g = torch.as_tensor(g_np, device=device)
    w_right = 0 if causal else w
    qc, kc, vc = (_to_classes(x, dilation) for x in (q, k, v))  # (..., δ, m, d)
    n_blocks = -(-qc.shape[-2] // c)
    mask = torch.as_tensor(_global_blocks_mask_np(n, w, dilation, causal, c, g_np),
                           device=device).flatten(0, 1)  # (δ·nb, c, span + G)
    # not a twin of exercise 2.2: it cuts blocks as 2.2 does (the lesson draws that), but
    # its keys (span + global) and its exact per-block masks are its own; 2.2 is the band alone.
    q_blocks = F.pad(qc, (0, 0, 0, n_blocks * c - qc.shape[-2])).unflatten(-2, (n_blocks, c))
    k_all, v_all = (torch.cat([unfold_blocks_torch(xc, c, w, w_right),  # (..., δ, nb, span, d)
                               x[..., None, None, g, :].expand(*xc.shape[:-2], n_blocks,
                                                               len(g_np), x.shape[-1])], dim=-2)
                    for x, xc in ((k, kc), (v, vc)))  # (..., δ, nb, span + G, d)
    # One batch axis and δ·nb blocks: SDPA's fast CPU kernel wants 4-d inputs.
    q4, k4, v4 = (x.reshape(-1, x.shape[-4] * x.shape[-3], *x.shape[-2:])
                  for x in (q_blocks, k_all, v_all))
    out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask, scale=scale)
    out = out.reshape(*qc.shape[:-2], n_blocks * c, -1)[..., :qc.shape[-2], :]  # (..., δ, m, dv)
    out = out.transpose(-2, -3).flatten(-3, -2)[..., :n, :]  # (..., N, dv)
    rows_mask = torch.arange(n, device=device) <= g[:, None] if causal else None  # (G, N)
    rows = F.scaled_dot_product_attention(q[..., g, :], k, v, attn_mask=rows_mask, scale=scale)
    return out.index_copy(-2, g, rows)  # the global queries see every key


def _global_blocks_mask_np(n, w, dilation, causal, c, global_idx) -> np.ndarray:
    """(δ, nb, c, span + G) bool: who each query of each block sees among its span's keys
    (the window, inside the sequence) and the G global keys (those not already in its window;
    under causal only those before it). Rows of padded queries see everything (cut off later)."""
    w_right = 0 if causal else w
    m = -(-n // dilation)
    starts = np.arange(-(-m // c)) * c  # (nb,) first place of each block
    residue = np.arange(dilation)[:, None, None]
    q_pos = residue + dilation * (starts[:, None] + np.arange(c))  # (δ, nb, c)
    k_place = starts[:, None] - w + np.arange(c + w + w_right)  # (nb, span)
    k_real = (k_place >= 0) & (residue + dilation * k_place < n)  # (δ, nb, span)
    window = band_np(c, w, w_right) & k_real[:, :, None, :]  # (δ, nb, c, span)
    diff = q_pos[..., None] - global_idx  # (δ, nb, c, G): i - g
    in_window = (np.abs(diff) <= w * dilation) & (diff % dilation == 0)
    seen = ~in_window & (diff > 0) if causal else ~in_window
    return np.concatenate([window, seen], axis=-1) | (q_pos >= n)[..., None]


def window_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int, *,
                           dilation: int = 1, causal: bool = False, global_idx=None,
                           **options) -> torch.Tensor:
    """Sliding-window attention in O(N·w) time and memory, forward and backward.

    Equals dense masked attention with the mask
        dilated_window_mask_np(N, w, dilation, causal)  ∪  global_mask_np(N, global_idx)
    (∩ j <= i when causal). dilation = 1 is the plain sliding window.

    Args:
        q, k: (..., N, d); v: (..., N, dv).
        w: one-sided half-width (keys i - w·δ .. i + w·δ, every δ-th).
        dilation: δ >= 1.  causal: only keys j <= i.
        global_idx: positions that attend to all and are attended by all (Longformer).
        options: block, scale; without global tokens also hand_backward, chunk_scores (see
            `sliding_window_attention_torch`). On CUDA in float32, float16 or bfloat16, unless
            block, hand_backward or chunk_scores is given, FlexAttention or fused SDPA runs
            the pattern instead (`dispatch.choose_kernel` says which).
    Returns:
        (..., N, dv).
    """
    check_window_args(q, k, v, w)
    # On CUDA: FlexAttention or fused SDPA, the same numbers (dispatch.py); else None.
    out = routed_window_attention(q, k, v, w, dilation, causal, global_idx, options)
    if out is not None:
        return out
    if check_global_idx(global_idx, q.shape[-2]).size:
        options = {key: val for key, val in options.items()
                   if key not in ("hand_backward", "chunk_scores")}  # autograd there
        return global_window_attention_torch(q, k, v, w, global_idx, dilation, causal, **options)
    return dilated_window_attention_torch(q, k, v, w, dilation, causal, **options)


# ============================================================================ block-sparse
def block_sparse_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout,
                                 block: int, causal: bool = False,
                                 scale: float | None = None) -> torch.Tensor:
    """Attention restricted to the non-zero blocks of a block layout; only those are computed.

    Equals dense masked attention with mask block_mask_np(layout, block, N) (∩ j <= i when
    causal). Time and memory are proportional to the number of non-zero blocks P.

    Args:
        q, k: (..., N, d); v: (..., N, dv).
        layout: (nb, nb) bool, nb = ceil(N / block) (NumPy or torch), e.g. bigbird_layout_np.
        causal: also mask j > i inside the blocks (for causal layouts such as the fixed one).
    Returns:
        (..., N, dv); a query whose row has no allowed key gets zeros.

    The softmax of a query row is spread over several blocks, so it is done in two passes
    over the P blocks: the row maximum (for stability) and the row sum are gathered from all
    the blocks of the row with scatter_reduce / index_add, then every block is normalised.
    """
    check_attention_inputs(q, k, v, scale=scale)
    block = check_int("block", block, 1)
    n, device = q.shape[-2], q.device
    # On CUDA: FlexAttention or fused SDPA, the same numbers (dispatch.py); else None.
    out = routed_block_sparse_attention(q, k, v, layout, block, causal, scale)
    if out is not None:
        return out
    nb = -(-n // block)
    layout = torch.as_tensor(np.asarray(layout) if not isinstance(layout, torch.Tensor)
                             else layout, device=device)
    if layout.dtype != torch.bool or tuple(layout.shape) != (nb, nb):
        fail("block layout does not fit", f"bool of shape ({nb}, {nb}) for N={n}, "
             f"block={block}", f"{layout.dtype} of shape {shape_str(layout.shape)}")
    q, k, v = _visible_blocks(q, k, v, layout, block, causal)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    rows, cols = torch.nonzero(layout, as_tuple=True)  # (P,), (P,): the non-zero blocks

    def blocks(x):  # (..., N, d) -> (..., nb, b, d)
        return F.pad(x, (0, 0, 0, nb * block - n)).unflatten(-2, (nb, block))

    qb, kb, vb = blocks(q), blocks(k), blocks(v)
    scores = qb[..., rows, :, :] @ kb[..., cols, :, :].transpose(-1, -2) * scale  # (..., P, b, b)
    # Which (query, key) pairs of each block are real: keys past N are padding.
    a = torch.arange(block, device=device)
    i = rows[:, None, None] * block + a[:, None]  # (P, b, 1)
    j = cols[:, None, None] * block + a[None, :]  # (P, 1, b)
    allowed = (j < n) & (j <= i) if causal else (j < n).expand(-1, block, -1)
    scores = scores.masked_fill(~allowed, float("-inf"))

    # Softmax over each query row, across all the blocks of that row.
    with torch.no_grad():  # the max cancels in the softmax: no gradient needed
        block_max = scores.amax(dim=-1)  # (..., P, b)
        row_max = torch.full((*block_max.shape[:-2], nb, block), float("-inf"),
                             dtype=scores.dtype, device=device)
        index = rows[:, None].expand(block_max.shape)  # (..., P, b): the row of each block
        row_max = row_max.scatter_reduce(-2, index, block_max, "amax")
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(scores - row_max[..., rows, :, None])  # (..., P, b, b); masked -> 0
    row_sum = torch.zeros_like(row_max).index_add(-2, rows, exp.sum(-1))  # (..., nb, b)
    out = torch.zeros(*qb.shape[:-1], v.shape[-1], dtype=v.dtype, device=device)
    out = out.index_add(-3, rows, exp @ vb[..., cols, :, :])  # (..., nb, b, dv)
    out = out / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)[..., None]
    return out.flatten(-3, -2)[..., :n, :]


def _visible_blocks(q, k, v, layout, block, causal):
    """`attention.visible_inputs` for a block layout: the query rows of blocks that see no
    block and the keys of blocks no query sees (under causal, only rows I >= J see block J)
    are set to 0, the rest must be finite."""
    if causal:
        layout = layout & torch.ones_like(layout).tril()
    n = q.shape[-2]
    rows_seen = layout.any(1).repeat_interleave(block)[:n, None]  # (N, 1)
    keys_seen = layout.any(0).repeat_interleave(block)[:n, None]  # (N, 1)
    q, k, v = hide(q, rows_seen), hide(k, keys_seen), hide(v, keys_seen)
    return visible_inputs(q, k, v)  # checks that they are finite
