"""Sparse attention kernels in PyTorch whose time and memory grow linearly with N.

The NumPy masks of `minattn.sparse` state the patterns; feeding such an (N, N) mask to dense
attention costs O(N²) time and memory however few Trues it holds. The kernels here never
build anything of size N²:

    window_attention_torch        sliding / dilated / causal window (+ global tokens), O(N·w)
    block_sparse_attention_torch  any block layout (BigBird, fixed): only non-zero blocks
    SparseSelfAttention           a multi-head self-attention layer on either kernel
    SparseClassifier              a small encoder on it, for the lesson's long-sequence task

Both are ordinary torch code, so autograd gives the backward pass. Every result equals dense
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
from .utils import fail, shape_str


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
            (c + w when causal), so small blocks waste less but call more, smaller matmuls,
            and the backward writes a gradient for every key of every span: (c + 2w) / c
            copies of each key. Default: 32 when no gradient is needed, else 64 (the fastest
            on a 2-core CPU for w in {32, 128}; see benchmarks/sparse.py).
        scale: default 1/√d.
    Returns:
        (..., N, dv).

    How: (1) dilation δ splits the sequence into δ residue classes i mod δ, each a plain
    window of half-width w over every δ-th token; (2) `blocked_window_attention_torch` runs
    every block of every class with one small band mask; (3) the few blocks where that mask
    is wrong — at the ends of the sequence, or near a global token — are recomputed with
    their exact masks and swapped in; (4) the global rows are computed densely: g·N work.
    """
    if block is None:
        needs_grad = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
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
