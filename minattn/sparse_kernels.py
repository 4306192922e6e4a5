"""Sparse attention kernels in PyTorch whose time and memory grow linearly with N.

The NumPy masks of `minattn.sparse` state the patterns; feeding such an (N, N) mask to dense
attention costs O(N²) time and memory however few Trues it holds. The kernels here never
build anything of size N²:

    window_attention_torch        sliding / dilated / causal window (+ global tokens), O(N·w)
    block_sparse_attention_torch  any block layout (BigBird, fixed): only non-zero blocks
    SparseSelfAttention           a multi-head self-attention layer on either kernel
    SparseClassifier              a small encoder on it, for the lesson's long-sequence task

Both are ordinary torch code, so autograd gives the backward pass — except the window kernel
in training without global tokens, whose `WindowAttentionFunction` has a hand-written backward
that recomputes a few blocks at a time (autograd's would hold every block's attention and
(c + 2w) / c copies of ∂K and ∂V). Every result equals dense
masked attention (`minattn.attention.attention_torch`) on the same pattern — the tests check
outputs and gradients in float64. Shapes: q, k (..., N, d), v (..., N, dv), as in lesson 01.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .attention import (MultiHeadAttention, check_attention_inputs, merge_heads_torch,
                        split_heads_torch)
from .sparse import _check_int, check_global_idx
from .tools.utils import fail, shape_str


# ============================================================================ window kernel
def band_mask_torch(block: int, w_left: int, w_right: int, device=None) -> torch.Tensor:
    """(c, c + w_left + w_right) bool: the window of each query inside its block's key span.

    Query a of a block (global position s + a) gets the keys s - w_left .. s + c + w_right;
    key t of that span is position s - w_left + t, so j - i in [-w_left, w_right] becomes
    a <= t <= a + w_left + w_right. One small mask serves every block: that is the trick.
    """
    return torch.from_numpy(_band_np(block, w_left, w_right)).to(device)


def _band_np(block: int, w_left: int, w_right: int) -> np.ndarray:
    # Built in NumPy: a handful of tiny index ops that would each cost a thread-pool wake-up
    # in torch.
    a = np.arange(block)[:, None]
    t = np.arange(block + w_left + w_right)[None, :]
    return (t >= a) & (t <= a + w_left + w_right)


def unfold_blocks_torch(x: torch.Tensor, block: int, w_left: int, w_right: int) -> torch.Tensor:
    """(..., M, d) -> (..., nb, c + w_left + w_right, d): block b gets rows [b·c - w_left,
    b·c + c + w_right) of x, zero rows outside 0..M-1. A view of the padded x: the blocks
    overlap in memory, no copy is made."""
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
    # BEGIN EXERCISE 2.2 blocked window: query blocks of c, unfolded key spans, one SDPA call with the band mask
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


# ------------------------------------------------------------ a hand-written backward
# Autograd through `blocked_window_attention_torch` is correct but heavy: `unfold`'s backward
# receives a ∂K and a ∂V for every key of every span, (c + 2w) / c copies of each, and SDPA keeps
# each block's attention internals for its backward. The Function below keeps only q, k, v and
# recomputes the attention of a few blocks at a time in its backward, adding their ∂K and ∂V
# into full-size buffers as it goes: the extra memory is one chunk of blocks, not N·(c + 2w).

# Scores per chunk of blocks in the backward: 2^17 (512 KiB in float32), i.e. at c = 64 and
# B·H = 4 one block per chunk for w = 128, four for w = 32; more when blocks are smaller.
# Measured at N = 16,384, w = 128 on a 2-core CPU: chunks of 2^17 to 2^21 scores took 314 →
# 450 ms and 70 → 130 MiB; small chunks stay in the cache, and the Python loop (a few dozen
# tensor ops per chunk, ~1,000 chunks at N = 65,536) costs less than the larger chunks lose.
_CHUNK_SCORES = 1 << 17
_HAND_BACKWARD = True  # False: plain autograd through the blocked kernel (the tests compare)


class WindowAttentionFunction(torch.autograd.Function):
    """Sliding-window self-attention over one class (δ = 1, no global tokens) with a
    memory-lean backward. q, k: (B, M, d); v: (B, M, dv) -> (B, M, dv).

    apply(q, k, v, w, causal, block, scale): query i attends to keys i - w .. i + w
    (.. i when causal) that lie in 0 .. M-1, exactly as `window_attention_torch`.

    forward: `window_attention_torch` itself (grad mode is off inside a Function, so it takes
        its inference path: the blocked SDPA of exercise 2.2 plus the exact end blocks).
    backward: for chunks of query blocks, recompute the scores of each block against its key
        span, then lesson 01's softmax backward (`attention_backward_np`):
            P  = softmax(scale · Q Kᵀ)           dV = Pᵀ G
            dP = G Vᵀ                            dS = P ⊙ (dP − rowsum(dP ⊙ P))
            dQ = scale · dS K                    dK = scale · dSᵀ Q
        dQ of a block is its own rows; dK and dV of a span are added into the full ∂K, ∂V.
    """

    @staticmethod
    def forward(ctx, q, k, v, w, causal, block, scale):
        out = window_attention_torch(q, k, v, w, causal=causal, block=block, scale=scale)
        ctx.save_for_backward(q, k, v)  # no attention probabilities kept: recomputed later
        ctx.window = (w, 0 if causal else w, block, scale)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k, v = ctx.saved_tensors
        grads = _window_attention_backward(q, k, v, grad_out.contiguous(), *ctx.window)
        return (*grads, None, None, None, None)


def _window_attention_backward(q, k, v, grad_out, w_left, w_right, c, scale):
    """dQ, dK, dV of the window attention over (B, M, d) tensors, a chunk of blocks at a time.

    Block b holds queries b·c .. b·c + c - 1 and sees the span of keys b·c - w_left ..
    b·c + c + w_right - 1 (length span = c + w_left + w_right). Keys outside 0 .. M-1 are
    masked out (the forward treats them as absent), so their gradients are zero.
    """
    bsz, m, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    span = c + w_left + w_right
    n_blocks = -(-m // c)
    pieces = -(-span // c)  # a span covers `pieces` consecutive c-row slices of ∂K
    chunk = max(1, _CHUNK_SCORES // (bsz * c * span))  # blocks per chunk
    band = _band_np(c, w_left, w_right)  # (c, span)
    hidden = torch.from_numpy(~band).to(q.device)  # what the band hides: inner chunks
    dq = torch.empty_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    for b0 in range(0, n_blocks, chunk):
        nbc = min(chunk, n_blocks - b0)  # blocks in this chunk
        q0 = b0 * c  # first query row of the chunk
        k0 = q0 - w_left  # first key row its spans touch (may be < 0)
        k_len = (nbc + pieces - 1) * c  # rows k0 .. k0 + k_len - 1 cover every span
        qb = _rows(q, q0, nbc * c).unflatten(1, (nbc, c))  # (B, nbc, c, d)
        gb = _rows(grad_out, q0, nbc * c).unflatten(1, (nbc, c))  # (B, nbc, c, dv)
        # The spans of the chunk's blocks: views of its key rows, as in unfold_blocks_torch.
        ks = _rows(k, k0, k_len).unfold(1, span, c)[:, :nbc].transpose(-1, -2)  # (B,nbc,span,d)
        vs = _rows(v, k0, k_len).unfold(1, span, c)[:, :nbc].transpose(-1, -2)  # (B,nbc,span,dv)

        scores = (qb @ ks.transpose(-1, -2)).mul_(scale)  # (B, nbc, c, span)
        mask = _chunk_mask(band, q0, k0, nbc, c, m)  # None (inner chunk) or (nbc, c, span)
        scores.masked_fill_(hidden if mask is None else torch.from_numpy(~mask).to(q.device),
                            float("-inf"))
        p = torch.softmax(scores, dim=-1)  # P: (B, nbc, c, span)
        del scores
        dv_span = p.transpose(-1, -2) @ gb  # Pᵀ G: (B, nbc, span, dv)
        ds = gb @ vs.transpose(-1, -2)  # dP = G Vᵀ: (B, nbc, c, span)
        ds.sub_((ds * p).sum(-1, keepdim=True)).mul_(p).mul_(scale)  # scale · dS, in place
        del p
        dq_blocks = (ds @ ks).flatten(1, 2)  # scale · dS K: (B, nbc·c, d)
        rows = min(nbc * c, m - q0)  # the last block may hold padded queries: drop them
        dq[:, q0:q0 + rows] = dq_blocks[:, :rows]
        _add_spans(dk, ds.transpose(-1, -2) @ qb, k0, c)  # scale · dSᵀ Q: (B, nbc, span, d)
        _add_spans(dv, dv_span, k0, c)
    return dq, dk, dv


def _rows(x, start, length):
    """Rows start .. start + length - 1 of x (B, M, d), zero rows where outside 0 .. M-1."""
    lo, hi = max(start, 0), min(start + length, x.shape[1])
    part = x[:, lo:max(hi, lo)]
    if part.shape[1] == length:
        return part  # a view
    return F.pad(part, (0, 0, lo - start, start + length - lo - part.shape[1]))


def _chunk_mask(band, q0, k0, nbc, c, m):
    """The keys each query of a chunk may see: the band, minus keys outside 0 .. M-1. Rows of
    padded queries (past M) may see every key of the span: any finite row will do, their G is
    zero. Returns None for a chunk far from both ends, (nbc, c, span) bool otherwise."""
    span = band.shape[1]
    if k0 >= 0 and k0 + (nbc - 1) * c + span <= m and q0 + nbc * c <= m:
        return None  # an inner chunk: the band alone is exact
    key = k0 + c * np.arange(nbc)[:, None] + np.arange(span)  # (nbc, span) positions
    query = q0 + c * np.arange(nbc)[:, None] + np.arange(c)  # (nbc, c)
    return band & ((key >= 0) & (key < m))[:, None, :] | (query >= m)[:, :, None]


def _add_spans(dst, spans, start, c):
    """dst (B, M, d) += every span of spans (B, nbc, span, d); span b starts at row
    start + b·c. Consecutive spans overlap, so each is cut into c-row pieces: piece j of every
    block lands on the c-row slices j, j + 1, ..., one shifted add per piece."""
    bsz, nbc, span, d = spans.shape
    pieces = -(-span // c)
    local = spans.new_zeros(bsz, nbc + pieces - 1, c, d)  # rows start .. of this chunk
    for j in range(pieces):
        piece = spans[:, :, j * c:(j + 1) * c]  # (B, nbc, <= c, d)
        local[:, j:j + nbc, :piece.shape[2]] += piece
    local = local.flatten(1, 2)
    lo, hi = max(start, 0), min(start + local.shape[1], dst.shape[1])
    dst[:, lo:hi] += local[:, lo - start:hi - start]  # rows outside 0 .. M-1 carry zeros


def _check_window_args(q, k, v, w, dilation, block):
    check_attention_inputs(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        fail("window attention is self-attention: queries and keys must have one length N",
             f"k of length {q.shape[-2]}", f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    return (_check_int("window w", w, 0), _check_int("dilation", dilation, 1),
            _check_int("block", block, 1))


def window_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int,
                           dilation: int = 1, causal: bool = False, global_idx=None,
                           block: int | None = None, scale: float | None = None) -> torch.Tensor:
    """Sliding-window attention in O(N·w) time and memory, forward and backward.

    Equals dense masked attention with the mask
        dilated_window_mask_np(N, w, dilation, causal)  ∪  global_mask_np(N, global_idx)
    (∩ j <= i when causal). dilation = 1 is the plain sliding window.

    Args:
        q, k: (..., N, d); v: (..., N, dv).
        w: one-sided half-width (keys i - w·δ .. i + w·δ, every δ-th).
        dilation: δ >= 1.  causal: only keys j <= i.
        global_idx: positions that attend to all and are attended by all (Longformer).
        block: queries per block c; the work per query is c + 2w keys instead of 2w + 1
            (c + w when causal), so small blocks waste less but call more, smaller matmuls.
            Default: 32 when no gradient is needed, else 64 (the fastest on a 2-core CPU for
            w in {32, 128}; see benchmarks/sparse.py).
        scale: default 1/√d.
    Returns:
        (..., N, dv).

    How: (1) dilation δ splits the sequence into δ residue classes i mod δ, each a plain
    window of half-width w over every δ-th token; (2) `blocked_window_attention_torch` runs
    every block of every class with one small band mask; (3) the few blocks where that mask
    is wrong — at the ends of the sequence, or near a global token — are recomputed with
    their exact masks and swapped in; (4) the global rows are computed densely: g·N work.
    When a gradient is needed, there are no global tokens and δ divides N, steps (2)-(3) run
    inside `WindowAttentionFunction`, whose backward recomputes the blocks chunk by chunk.
    """
    needs_grad = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    if block is None:
        block = 64 if needs_grad else 32
    w, dilation, c = _check_window_args(q, k, v, w, dilation, block)
    n, device = q.shape[-2], q.device
    g_np = check_global_idx(global_idx, n)
    w_right = 0 if causal else w

    # (1) residue classes: position i = r + δ·p lives in class r at place p.
    m = -(-n // dilation)  # places per class (the last few classes may be one shorter)

    def to_classes(x):  # (..., N, d) -> (..., δ, m, d)
        if dilation == 1:
            return x.unsqueeze(-3)  # a view: no copy
        x = F.pad(x, (0, 0, 0, m * dilation - n))
        return x.unflatten(-2, (m, dilation)).transpose(-2, -3)

    qc, kc, vc = to_classes(q), to_classes(k), to_classes(v)
    if needs_grad and _HAND_BACKWARD and not g_np.size and n % dilation == 0:
        # Training without global tokens, all classes of one length m: WindowAttentionFunction,
        # whose forward is this function's own inference path and whose hand-written backward
        # never holds more than a chunk of blocks' attention at a time.
        flat = [x.flatten(0, -3) if x.ndim > 3 else x for x in (qc, kc, vc)]  # (B', m, d)
        out = WindowAttentionFunction.apply(*flat, w, causal, c, scale)  # (B', m, dv)
        out = out.reshape(*qc.shape[:-1], out.shape[-1])  # (..., δ, m, dv)
        if dilation == 1:
            return out.squeeze(-3)
        return out.transpose(-2, -3).flatten(-3, -2)  # place p of class r -> r + δ·p
    g = torch.as_tensor(g_np, device=device)
    extra_k = k[..., g, :] if g.numel() else None  # (..., G, d): global keys ride along
    extra_v = v[..., g, :] if g.numel() else None

    # (2) the fast path over all blocks; global columns (if any) are visible to all. SDPA's
    # fast CPU kernel wants 4-d inputs, so batch, heads and classes share one axis.
    if extra_k is None:
        flat = [x.flatten(0, -3) if x.ndim > 3 else x for x in (qc, kc, vc)]
        out = blocked_window_attention_torch(*flat, w, w_right, c, scale)
        out = out.reshape(*qc.shape[:-2], *out.shape[-3:])  # (..., δ, nb, c, dv)
    else:
        out = _blocks_with_globals(qc, kc, vc, extra_k, extra_v, w, w_right, c, scale)

    # (3) the blocks where the band mask is wrong, recomputed with their exact masks. This
    # bookkeeping is on positions only (small NumPy arrays, never N²).
    q_place, k_place, exact = _irregular_blocks(n, w, dilation, causal, c, g_np)
    if exact.shape[1]:  # nw > 0
        fixed = _exact_blocks(qc, kc, vc, extra_k, extra_v, torch.as_tensor(q_place, device=device),
                              torch.as_tensor(k_place, device=device),
                              torch.as_tensor(exact, device=device), scale)
        wrong = torch.as_tensor(q_place[0, :, 0] // c, device=device)  # block numbers
        if out.requires_grad:
            out = out.index_copy(-3, wrong, fixed)  # autograd needs SDPA's output untouched
        else:
            out.index_copy_(-3, wrong, fixed)  # inference: no second copy of the output

    # Back from (..., δ, nb, c, dv) to (..., N, dv).
    if dilation == 1:
        out = out.flatten(-4, -2)[..., :n, :]  # a view
    else:
        out = out.flatten(-3, -2)[..., :m, :].transpose(-2, -3).flatten(-3, -2)[..., :n, :]

    # (4) global queries attend to every key (j <= i when causal): G rows of N keys.
    if g.numel():
        rows_mask = torch.arange(n, device=device) <= g[:, None] if causal else None  # (G, N)
        rows = F.scaled_dot_product_attention(q[..., g, :], k, v, attn_mask=rows_mask,
                                              scale=scale)
        out = out.index_copy(-2, g, rows)
    return out


def _irregular_blocks(n, w, dilation, causal, c, global_idx):
    """Which blocks the band mask gets wrong, and their exact masks (NumPy).

    A block is irregular when its key span runs past either end of its class (those keys are
    zero padding), when it holds padded queries, or when a global key is not simply visible
    to all its queries (it lies in their window, where the band already has it, or after
    them under causal). Returns q_place (δ, nw, c), k_place (δ, nw, span), exact (δ, nw, c,
    span + G); nw is about 2w/c + 2 plus a few blocks per global token.
    """
    w_right = 0 if causal else w
    m = -(-n // dilation)
    n_blocks = -(-m // c)
    lengths = np.array([-(-(n - r) // dilation) for r in range(dilation)])[:, None, None]
    start = np.arange(n_blocks) * c
    wrong = (start < w) | (start + c + w_right > lengths.min())
    residue = np.arange(dilation)[:, None, None]

    def global_visible(blocks):  # (δ, nb, c, G): may query i see global key g by column?
        q_pos = residue + dilation * (start[blocks][None, :, None] + np.arange(c))
        diff = q_pos[..., None] - global_idx  # i - g
        in_window = (np.abs(diff) <= w * dilation) & (diff % dilation == 0)
        if causal:
            return ~in_window & (diff > 0)
        return ~in_window

    if global_idx.size:
        wrong |= ~global_visible(slice(None)).all(axis=(0, 2, 3))
    blocks = np.flatnonzero(wrong)
    q_place = start[blocks][None, :, None] + np.arange(c) + 0 * residue  # (δ, nw, c)
    k_place = start[blocks][None, :, None] - w + np.arange(c + w + w_right) + 0 * residue
    exact = _band_np(c, w, w_right) & ((k_place >= 0) & (k_place < lengths))[:, :, None, :]
    if global_idx.size:
        exact = np.concatenate([exact, global_visible(blocks)], axis=-1)
    exact |= (q_place >= lengths)[..., None]  # padded queries: any finite row will do
    # Places outside a class are clamped to a real one (any finite row): `exact` masks them.
    return np.minimum(q_place, m - 1), np.clip(k_place, 0, m - 1), exact


def _blocks_with_globals(qc, kc, vc, extra_k, extra_v, w, w_right, c, scale):
    """The fast path when global keys ride along: (…, δ, nb, c, dv)."""
    n_blocks = -(-qc.shape[-2] // c)
    q_blocks = F.pad(qc, (0, 0, 0, n_blocks * c - qc.shape[-2])).unflatten(-2, (n_blocks, c))
    k_all, v_all = (_append_globals(unfold_blocks_torch(x, c, w, w_right), e)
                    for x, e in ((kc, extra_k), (vc, extra_v)))
    n_global = extra_k.shape[-2]
    mask = torch.cat([band_mask_torch(c, w, w_right, qc.device),
                      torch.ones(c, n_global, dtype=torch.bool, device=qc.device)], dim=-1)
    return F.scaled_dot_product_attention(q_blocks, k_all, v_all, attn_mask=mask, scale=scale)


def _append_globals(spans, extra):
    """spans (..., δ, nb, span, d) + extra (..., G, d) -> (..., δ, nb, span + G, d)."""
    if extra is None:
        return spans
    extra = extra[..., None, None, :, :].expand(*spans.shape[:-2], *extra.shape[-2:])
    return torch.cat([spans, extra], dim=-2)


def _exact_blocks(qc, kc, vc, extra_k, extra_v, q_place, k_place, exact, scale):
    """Recompute a few blocks with their own masks. q_place (δ, nw, c) and k_place
    (δ, nw, span) say which places of each class they hold; exact (δ, nw, c, span [+ G])."""
    classes = torch.arange(qc.shape[-3], device=qc.device)[:, None, None]
    q_sel = qc[..., classes, q_place, :]  # (..., δ, nw, c, d)
    k_sel = _append_globals(kc[..., classes, k_place, :], extra_k)  # (..., δ, nw, span [+G], d)
    v_sel = _append_globals(vc[..., classes, k_place, :], extra_v)
    # Merge (batch..., δ, nw) into two axes: SDPA's fast CPU kernel wants 4-d inputs.
    q4, k4, v4 = (x.reshape(-1, x.shape[-4] * x.shape[-3], *x.shape[-2:])
                  for x in (q_sel, k_sel, v_sel))
    mask = exact.flatten(0, 1)[None]  # (1, δ·nw, c, span [+ G]): 4-d, for the fast kernel
    out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask, scale=scale)
    return out.reshape(*q_sel.shape[:-1], out.shape[-1])


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
    check_attention_inputs(q, k, v)
    block = _check_int("block", block, 1)
    n, device = q.shape[-2], q.device
    nb = -(-n // block)
    layout = torch.as_tensor(np.asarray(layout) if not isinstance(layout, torch.Tensor)
                             else layout, device=device)
    if layout.dtype != torch.bool or tuple(layout.shape) != (nb, nb):
        fail("block layout does not fit", f"bool of shape ({nb}, {nb}) for N={n}, "
             f"block={block}", f"{layout.dtype} of shape {shape_str(layout.shape)}")
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


# ============================================================================ modules
def window_attend(w: int, dilation: int = 1, causal: bool = False, global_idx=None,
                  block: int | None = None):
    """A kernel for `SparseSelfAttention`: (q, k, v) -> window_attention_torch(...)."""
    def attend(q, k, v):
        return window_attention_torch(q, k, v, w, dilation, causal, global_idx, block)
    attend.__name__ = f"window(w={w}, dilation={dilation}, global={global_idx})"
    return attend


def block_sparse_attend(layout, block: int, causal: bool = False):
    """A kernel for `SparseSelfAttention`: (q, k, v) -> block_sparse_attention_torch(...)."""
    layout = np.asarray(layout)

    def attend(q, k, v):
        return block_sparse_attention_torch(q, k, v, layout, block, causal)
    attend.__name__ = f"block_sparse({int(layout.sum())} blocks of {block})"
    return attend


class SparseSelfAttention(MultiHeadAttention):
    """Multi-head self-attention whose heads go through a sparse kernel.

    The projections are lesson 01's `MultiHeadAttention`; `attend(q, k, v)` maps
    (B, H, N, dh) tensors to (B, H, N, dh), e.g. `window_attend(w=8, global_idx=[0])`.
    forward(x (B, N, D)) -> (B, N, D).
    """

    def __init__(self, d_model: int, num_heads: int, attend):
        super().__init__(d_model, num_heads)
        self.attend = attend

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            fail("SparseSelfAttention input", f"(B, N, {self.d_model})", shape_str(x.shape))
        q = split_heads_torch(self.q_proj(x), self.num_heads)  # (B, H, N, dh)
        k = split_heads_torch(self.k_proj(x), self.num_heads)
        v = split_heads_torch(self.v_proj(x), self.num_heads)
        return self.out_proj(merge_heads_torch(self.attend(q, k, v)))

    def extra_repr(self) -> str:
        return f"attend={getattr(self.attend, '__name__', self.attend)}"


class SparseClassifier(nn.Module):
    """A small Transformer encoder on sparse attention that classifies a sequence from token 0.

    tokens (B, N) -> token + learned position embeddings -> `layers` pre-norm blocks
    [x + attn(LN x); x + MLP(LN x)] -> LN -> linear on position 0 -> logits (B, n_classes).
    Reading position 0 is the point: what token 0 can know after L layers is exactly what
    the pattern lets flow to it in L hops.
    """

    def __init__(self, vocab: int, max_len: int, d_model: int, num_heads: int, layers: int,
                 attend, n_classes: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.attn = nn.ModuleList(SparseSelfAttention(d_model, num_heads, attend)
                                  for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(),
                                               nn.Linear(2 * d_model, d_model))
                                 for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * layers + 1))
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[: tokens.shape[1]]  # (B, N, D)
        for layer, (attn, mlp) in enumerate(zip(self.attn, self.mlp)):
            x = x + attn(self.norms[2 * layer](x))
            x = x + mlp(self.norms[2 * layer + 1](x))
        return self.head(self.norms[-1](x[:, 0]))  # (B, n_classes)
