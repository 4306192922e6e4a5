"""A hand-written backward for the sliding-window kernel: training in O(N·w) memory.

Read `blocked.py` first. Autograd through its `blocked_window_attention_torch`
is correct but heavy: `unfold`'s backward receives a ∂K and a ∂V for every key of every span,
(c + 2w) / c copies of each, and SDPA keeps each block's attention internals for its backward.
`WindowAttentionFunction` keeps only q, k, v and, in its backward, recomputes the attention of
a few blocks at a time, adding their ∂K and ∂V into full-size buffers as it goes: the extra
memory is one chunk of blocks, not N·(c + 2w). `sliding_window_attention_torch` trains
through it (`hand_backward=True`, the default); the tests check it against autograd and
against finite differences.

The backward is lesson 01's (`attention_backward_np`, exercise 1.3), applied block by block:
    P  = softmax(scale · Q Kᵀ)           dV = Pᵀ G
    dP = G Vᵀ                            dS = P ⊙ (dP − rowsum(dP ⊙ P))
    dQ = scale · dS K                    dK = scale · dSᵀ Q
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import check_attention_inputs
from ..checks import (
    check_array,
    check_finite,
    check_same_device,
    check_same_dtype,
    check_size,
    fail,
    shape_str,
)
from .blocked import band_np, window_forward_torch

# Scores per chunk of blocks in the backward: 2^17 (512 KiB in float32), i.e. at c = 64 and
# B·H = 4 one block per chunk for w = 128, four for w = 32; more when blocks are smaller.
# Measured at N = 16,384, w = 128 on a 2-core CPU: chunks of 2^17 to 2^21 scores took 314 →
# 450 ms and 70 → 130 MiB; small chunks stay in the cache, and the Python loop (a few dozen
# tensor ops per chunk, ~1,000 chunks at N = 65,536) costs less than the larger chunks lose.
CHUNK_SCORES = 1 << 17


class WindowAttentionFunction(torch.autograd.Function):
    """Sliding-window self-attention with a memory-lean backward, torch-only (reference:
    `sliding_window_attention_torch` with autograd). q, k: (B, N, d); v: (B, N, dv) -> (B, N, dv).

    apply(q, k, v, w, causal, block, scale, chunk_scores): query i attends to keys
    i - w .. i + w (.. i when causal) that lie in 0 .. N-1.

    forward: `window_forward_torch`, the core's blocked kernel plus its exact end blocks.
    backward: `window_attention_backward_torch`, a chunk of blocks at a time.
    """

    @staticmethod
    def forward(ctx, q, k, v, w, causal, block, scale, chunk_scores):
        out = window_forward_torch(q, k, v, w, causal, block, scale)
        ctx.save_for_backward(q, k, v)  # no attention probabilities kept: recomputed later
        ctx.window = (w, 0 if causal else w, block, scale, chunk_scores or CHUNK_SCORES)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k, v = ctx.saved_tensors
        grads = window_attention_backward_torch(q, k, v, grad_out.contiguous(), *ctx.window)
        return (*grads, None, None, None, None, None)


def window_attention_backward_torch(q, k, v, grad_out, w_left, w_right, c, scale,
                                    chunk_scores=CHUNK_SCORES):
    """dQ, dK, dV of the window attention over (B, N, d) tensors, a chunk of blocks at a time.

    torch-only; the block-by-block form of `attention_backward_np`. Block b holds queries
    b·c .. b·c + c - 1 and sees the span of keys b·c - w_left .. b·c + c + w_right - 1 (length
    span = c + w_left + w_right). Keys outside 0 .. N-1 are masked out (the forward treats
    them as absent), so their gradients are zero.
    """
    check_attention_inputs(q, k, v, scale=scale)
    for name, x in (("q", q), ("grad_out", grad_out)):
        check_array(name, x, "float", ndim=3, hint="(B, N, d)", like=torch.Tensor)
    if tuple(grad_out.shape) != tuple(q.shape[:-1]) + (v.shape[-1],) or k.shape != q.shape:
        fail("grad_out", f"the output's shape {shape_str(tuple(q.shape[:-1]) + (v.shape[-1],))}"
             " (and k of q's shape)",
             f"grad_out {shape_str(grad_out.shape)}, k {shape_str(k.shape)}")
    check_same_dtype(q=q, grad_out=grad_out)
    check_same_device(q=q, grad_out=grad_out)
    check_finite("grad_out", grad_out)
    w_left, w_right = check_size("w_left", w_left), check_size("w_right", w_right)
    c, chunk_scores = check_size("c", c, 1), check_size("chunk_scores", chunk_scores, 1)
    bsz, n, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    span = c + w_left + w_right
    n_blocks = -(-n // c)
    pieces = -(-span // c)  # a span covers `pieces` consecutive c-row slices of ∂K
    chunk = max(1, chunk_scores // (bsz * c * span))  # blocks per chunk
    band = band_np(c, w_left, w_right)  # (c, span)
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
        mask = _chunk_mask(band, q0, k0, nbc, c, n)  # None (inner chunk) or (nbc, c, span)
        hide = hidden if mask is None else torch.from_numpy(~mask).to(q.device)
        scores = (qb @ ks.transpose(-1, -2)).mul_(scale).masked_fill_(hide, float("-inf"))
        p = torch.softmax(scores, dim=-1)  # P: (B, nbc, c, span)
        del scores
        dv_span = p.transpose(-1, -2) @ gb  # Pᵀ G: (B, nbc, span, dv)
        ds = gb @ vs.transpose(-1, -2)  # dP = G Vᵀ: (B, nbc, c, span)
        ds.sub_((ds * p).sum(-1, keepdim=True)).mul_(p).mul_(scale)  # scale · dS, in place
        del p
        dq_blocks = (ds @ ks).flatten(1, 2)  # scale · dS K: (B, nbc·c, d)
        dk_span = ds.transpose(-1, -2) @ qb  # scale · dSᵀ Q: (B, nbc, span, d)
        rows = min(nbc * c, n - q0)  # the last block may hold padded queries: drop them
        dq[:, q0:q0 + rows] = dq_blocks[:, :rows]
        _add_spans(dk, dk_span, k0, c)
        _add_spans(dv, dv_span, k0, c)
    return dq, dk, dv


def _rows(x, start, length):
    """Rows start .. start + length - 1 of x (B, N, d), zero rows where outside 0 .. N-1."""
    lo, hi = max(start, 0), min(start + length, x.shape[1])
    part = x[:, lo:max(hi, lo)]
    if part.shape[1] == length:
        return part  # a view
    return F.pad(part, (0, 0, lo - start, start + length - lo - part.shape[1]))


def _chunk_mask(band, q0, k0, nbc, c, n):
    """The keys each query of a chunk may see: the band, minus keys outside 0 .. N-1. Rows of
    padded queries (past N) may see every key of the span: any finite row will do, their G is
    zero. Returns None for a chunk far from both ends, (nbc, c, span) bool otherwise."""
    span = band.shape[1]
    if k0 >= 0 and k0 + (nbc - 1) * c + span <= n and q0 + nbc * c <= n:
        return None  # an inner chunk: the band alone is exact
    key = k0 + c * np.arange(nbc)[:, None] + np.arange(span)  # (nbc, span) positions
    query = q0 + c * np.arange(nbc)[:, None] + np.arange(c)  # (nbc, c)
    return band & ((key >= 0) & (key < n))[:, None, :] | (query >= n)[:, :, None]


def _add_spans(dst, spans, start, c):
    """dst (B, N, d) += every span of spans (B, nbc, span, d); span b starts at row
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
    dst[:, lo:hi] += local[:, lo - start:hi - start]  # rows outside 0 .. N-1 carry zeros
