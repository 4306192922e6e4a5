"""Multi-scale attention, fast: heads grouped by scale, each group on the cheapest kernel.

`multiscale_attention_fast_torch(q, k, v, windows, mask)` returns exactly the output of
`reference.multiscale_attention_np` (the tests check outputs and gradients in float64), but
never builds an (H, N, N) mask for the scales it groups:

    the heads, sorted by ω, are cut into groups of equal ω (views), and each group runs on
      * PyTorch's fused SDPA with no window (`attention_fast_torch`) when ω >= N − 1,
      * the band kernel below (CPU) when ω >= BAND_FROM: chunks of queries, each against the
        keys of its band, cut into pieces that PyTorch's fused kernel runs without a mask;
      * lesson 02's window kernel `window_attention_torch` (O(N·ω)) for smaller ω,
      * (not on CPU) dense SDPA with the group's band mask when ω is close to N;
    the group outputs are put back in head order.
For short sequences (N < DENSE_BELOW) one dense masked SDPA call over all heads is faster than
several small calls, so everything goes there (the fallback the benchmark measured). On CUDA
no group runs on its own (`sparse.dispatch`, pattern "multiscale"): from
MULTISCALE_FLEX_FROM[dtype] on, all heads run in one FlexAttention call with per-head window
tiles (`sparse.flex.flex_multiscale_attention`), below it in one dense SDPA call with the
(H, N, N) mask — measured faster than the groups' calls there.

The band kernel. Cut the queries into chunks of c (c <= 2ω). Chunk [a, a + c) sees the keys
[a − ω, a + c + ω), and they fall in three pieces:

    keys [a − ω, a − ω + c)      query a + r sees key a − ω + t iff t >= r   (a triangle)
    keys [a − ω + c, a + ω)      every query of the chunk sees every key     (a full block)
    keys [a + ω, a + ω + c)      query a + r sees key a + ω + t iff t <= r   (a triangle)

A full block is plain attention; a lower triangle is causal attention, which PyTorch's fused
kernel does without a mask and skipping the blocks above the diagonal; the upper triangle is
a lower one with queries and keys both read backwards. Softmax over the union of the pieces
is rebuilt from each piece's output o_p and log-sum-exp l_p (the trick of FlashAttention):

    L = log Σ_p exp(l_p),    out = Σ_p exp(l_p − L) · o_p.

The backward needs no new kernel either: for every piece, the fused backward given the final
out and L (not the piece's own) returns exactly that piece's share of dq, dk, dv — it only
uses them to recompute the weights exp(s − L) and the row sums Σ dout · out. The public
`F.scaled_dot_product_attention` does not return l_p, so the kernel calls the CPU op behind
it; on other devices the groups take the window kernel or the band mask instead.
Pieces cut off by an end of the sequence are dropped or shortened; a shortened triangle gets
an explicit mask (at most one per end).

Padding. The window and band kernels take no mask. A key-padding mask (B, 1, 1, N) — the only
mask the fast path accepts; any other mask falls back to dense — is folded into the keys
instead: one extra feature, 1 on every query and 0 (real key) or a huge negative number
(padded key) on the keys, adds −∞ (in effect) to every score of a padded key and nothing to
the others:

    q' = [q, 1]·s,  k' = [k, b_j],  s = √((d+1)/d)  =>  q'·k'/√(d+1) = q·k/√d + b_j/√d.

(s keeps the kernel's default 1/√(d+1) scaling equal to ours, 1/√d.) A query whose window holds
no real key would see only huge negatives — a finite, meaningless row — so such rows are set to
zero, as the reference gives them.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import visible_inputs
from ..checks import check_size, fail, shape_str
from ..fast.attention import attention_fast_torch
from ..sparse import check_window_args, dispatch, window_attention_torch
from .reference import check_multiscale_inputs, scale_mask_torch

DENSE_BELOW = 512  # N below which one dense masked call beats grouping (benchmarks/multiscale.py)
BAND_FROM = 128  # ω from which the band kernel beats the window kernel (CPU)
# Off CPU the window kernel runs a group when its span 2ω + 64 is below this share of N.
WINDOW_SPAN_SHARE = 0.75
_BLOCK = 64  # the window kernel's query block (its default in training)
# The fused CPU kernel behind F.scaled_dot_product_attention, which also returns log-sum-exp.
_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
_FLASH_CPU_BACKWARD = getattr(torch.ops.aten,
                              "_scaled_dot_product_flash_attention_for_cpu_backward", None)


def multiscale_attention_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windows,
                                    mask: torch.Tensor | None = None,
                                    dense_below: int = DENSE_BELOW) -> torch.Tensor:
    """Torch-only fast path of `multiscale_attention_np` (output only): (B, H, N, d).

    q, k, v: (B, H, N, d); windows: H integers >= 0; mask: None or bool broadcastable to
    (B, H, N, N). Key-padding masks (B or 1, 1, 1, N) keep the grouped path (CPU); other masks,
    and N < dense_below, take one dense masked call.
    """
    ws = check_multiscale_inputs(q, k, v, windows, mask)
    dense_below = check_size("dense_below", dense_below)
    q, k, v = visible_inputs(q, k, v, mask)  # padding may hold garbage: set to 0, rest checked
    n = q.shape[-2]
    key_mask = _key_padding(mask, q.shape[0], n)
    # CUDA: one FlexAttention call with per-head windows, or one dense call (sparse/dispatch.py)
    if mask is None or key_mask is not None:
        out = dispatch.routed_multiscale_attention(q, k, v, ws, key_mask)
        if out is not None:
            return out
    if mask is None and n < dense_below:  # one call; every row sees itself, so no empty row
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_band_bias(n, ws, q))
    dense_route = dispatch.choose_kernel(q.device, n, q.dtype, q.shape[-1], v.shape[-1],
                                         pattern="multiscale") != "readable"
    if n < dense_below or dense_route or (mask is not None and key_mask is None):
        full = scale_mask_torch(n, ws, q.device)  # (H, N, N)
        return attention_fast_torch(q, k, v, mask=full if mask is None else full & mask)
    # Heads sorted by ω (one gather, none when they already are), then cut into groups of equal
    # ω: views, whose gradients autograd joins with one cat instead of one zero-filled
    # (B, H, N, d) tensor per group.
    order = sorted(range(len(ws)), key=lambda h: ws[h])
    already_sorted = order == list(range(len(ws)))
    group_ws = sorted(set(ws))
    sizes = [ws.count(w) for w in group_ws]
    if not already_sorted:
        idx = torch.tensor(order, device=q.device)
        q, k, v = (x.index_select(1, idx) for x in (q, k, v))
    groups = zip(*(x.split(sizes, dim=1) for x in (q, k, v)), group_ws)  # (B, G, N, d) each
    out = torch.cat([_group(qg, kg, vg, w, key_mask) for qg, kg, vg, w in groups], dim=1)
    if already_sorted:
        return out
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


# ============================================================================ one group of heads
def _group(q, k, v, w, key_mask):
    """Attention of one group of heads sharing the window w: (B, G, N, d)."""
    n = q.shape[-2]
    if w >= n - 1:  # the window covers everything: plain (key-masked) SDPA
        return attention_fast_torch(q, k, v, mask=None if key_mask is None
                                    else key_mask[:, None, None, :])
    if key_mask is None:
        return _windowed(q, k, v, w)
    out = _windowed(*_fold_padding(q, k, v, key_mask), w)[..., :-1]
    # Queries with no real key in their window: zeros, as in the reference.
    seen = torch.cat([key_mask.new_zeros(key_mask.shape[0], 1, dtype=torch.long),
                      key_mask.long().cumsum(-1)], dim=-1)  # (B, N + 1) prefix counts
    i = torch.arange(n, device=q.device)
    has_key = (seen[:, (i + w + 1).clamp(max=n)] - seen[:, (i - w).clamp(min=0)]) > 0  # (B, N)
    return out.masked_fill(~has_key[:, None, :, None], 0.0)


def _windowed(q, k, v, w):
    """|i − j| <= w, no mask, on the cheapest kernel for this device and w: (B, G, N, d)."""
    on_cpu = q.device.type == "cpu" and _FLASH_CPU is not None
    if on_cpu and w >= BAND_FROM:
        return band_attention_cpu(q, k, v, w)
    if on_cpu or 2 * w + _BLOCK < WINDOW_SPAN_SHARE * q.shape[-2]:
        return window_attention_torch(q, k, v, w)
    return band_masked_attention_torch(q, k, v, w)


def band_masked_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                w: int) -> torch.Tensor:
    """|i − j| <= w as one dense SDPA call with the (N, N) band mask: (B, G, N, d). Off CPU,
    for ω close to N, where the window kernel would do nearly N² work anyway."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_band_bias(q.shape[-2], [w], q))


def _fold_padding(q, k, v, key_mask):
    """q, k, v with one extra feature that removes the padded keys (see the module docstring)."""
    d = q.shape[-1]
    s = math.sqrt((d + 1) / d)
    big = torch.finfo(q.dtype).max / 4  # exp(q·k − big) is exactly 0, and nothing overflows
    bias = torch.zeros(key_mask.shape, dtype=q.dtype, device=q.device).masked_fill(~key_mask, -big)
    q1 = torch.cat([q, torch.ones_like(q[..., :1])], dim=-1) * s  # (B, G, N, d + 1)
    k1 = torch.cat([k, bias[:, None, :, None].expand(*k.shape[:-1], 1)], dim=-1)
    v1 = torch.cat([v, torch.zeros_like(v[..., :1])], dim=-1)  # same width as q, k
    return q1, k1, v1


# ============================================================================ the band kernel
def band_attention_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int,
                       chunk: int | None = None) -> torch.Tensor:
    """|i − j| <= w attention on CPU from unmasked fused pieces (see the module docstring).

    q, k, v: (B, G, N, d) -> (B, G, N, d); w >= 1. chunk: queries per chunk c, 1 .. 2w (the
    two triangles must not overlap); default 128, or 256 from w = 1,024, at most 2w (about the
    fastest in the chunk table of benchmarks/multiscale.py: larger chunks mean fewer calls).
    """
    w = check_window_args(q, k, v, w)
    if q.ndim != 4:
        fail("q, k, v of the band kernel", "(B, G, N, d)", shape_str(q.shape))
    if _FLASH_CPU is None or q.device.type != "cpu":
        fail("the band kernel runs PyTorch's fused CPU attention", "tensors on the CPU",
             f"{q.device} (torch {torch.__version__})")
    if w < 1:
        fail("the band kernel's window", "w >= 1 (w = 0: each query sees only itself)", repr(w))
    c = min(256 if w >= 1024 else 128, 2 * w) if chunk is None else chunk
    if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= 2 * w:
        fail("queries per chunk of the band kernel", f"an integer in 1 .. 2w = {2 * w}", repr(c))
    return _BandAttention.apply(q, k, v, w, c)


def band_pieces(n: int, w: int, c: int) -> list:
    """For each query chunk: (a, m, pieces), queries a .. a + m − 1 and their key pieces
    (start, stop, kind), kind one of "all", "lower" (t <= r), "upper" (t >= r), "mask"."""
    n, w, c = check_size("n", n), check_size("w", w), check_size("c", c, 1)
    plan = []
    for a in range(0, n, c):
        m = min(c, n - a)
        pieces = []
        if a - w + m > 0:  # the upper triangle, unless it lies before the sequence
            pieces.append((max(a - w, 0), a - w + m, "upper" if a - w >= 0 else "mask"))
        if min(a + w, n) > max(a - w + m, 0):
            pieces.append((max(a - w + m, 0), min(a + w, n), "all"))
        if a + w < n:  # the lower triangle, unless it lies past the sequence
            pieces.append((a + w, min(a + w + m, n), "lower" if a + w + m <= n else "mask"))
        plan.append((a, m, pieces))
    return plan


PIECE_KINDS = ("all", "lower", "upper", "mask")


def band_pieces_np(n: int, w: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """The plan of `band_pieces` drawn on the (N, N) query-key grid, for reading and checking.

    Returns kind (N, N) int: 0 where no piece computes the pair, 1 + PIECE_KINDS.index(kind)
    where one does; and count (N, N) int: how many pieces compute the pair — it must be 1
    inside the window |i − j| <= w and 0 outside, or the kernel would miss or double a pair.
    """
    plan = band_pieces(n, w, c)  # checks n, w, c
    kind_map, count = np.zeros((n, n), dtype=int), np.zeros((n, n), dtype=int)
    for a, m, pieces in plan:
        for start, stop, kind in pieces:
            r, t = np.arange(m)[:, None], np.arange(stop - start)[None, :]  # query r, key t
            inside = {"all": np.ones((m, stop - start), dtype=bool), "lower": t <= r,
                      "upper": t >= r, "mask": np.abs(a + r - start - t) <= w}[kind]
            count[a:a + m, start:stop] += inside
            kind_map[a:a + m, start:stop][inside] = 1 + PIECE_KINDS.index(kind)
    return kind_map, count


def _piece_mask(a, m, start, stop, w, like):
    """(m, stop − start) additive mask of a shortened triangle: 0 where |i − j| <= w,
    −∞ elsewhere."""
    i = torch.arange(a, a + m, device=like.device)[:, None]
    j = torch.arange(start, stop, device=like.device)[None, :]
    return torch.zeros(len(i), j.shape[1], dtype=like.dtype, device=like.device).masked_fill_(
        (i - j).abs() > w, float("-inf"))


def _flip(x):
    return x.flip(-2)


def _piece_forward(q, k, v, kind, mask):
    """(out (B, G, m, d), log-sum-exp (B, G, m)) of one piece."""
    if kind == "upper":  # read backwards, t >= r becomes t <= r
        out, lse = _FLASH_CPU(_flip(q), _flip(k), _flip(v), 0.0, True)
        return _flip(out), lse.flip(-1)
    return _FLASH_CPU(q, k, v, 0.0, kind == "lower", attn_mask=mask)


def _piece_backward(dout, q, k, v, out, lse, kind, mask):
    """(dq, dk, dv) of one piece, given the final out and log-sum-exp of its queries."""
    if kind == "upper":
        grads = _FLASH_CPU_BACKWARD(_flip(dout), _flip(q), _flip(k), _flip(v), _flip(out),
                                    lse.flip(-1), 0.0, True)
        return tuple(_flip(g) for g in grads)
    return _FLASH_CPU_BACKWARD(dout, q, k, v, out, lse, 0.0, kind == "lower", attn_mask=mask)


class _BandAttention(torch.autograd.Function):
    """The band kernel's forward (pieces merged by log-sum-exp) and backward (each piece's
    fused backward, given the merged out and log-sum-exp). Saves q, k, v, out and lse only:
    O(N·d) memory."""

    @staticmethod
    def forward(ctx, q, k, v, w, c):
        plan = band_pieces(q.shape[-2], w, c)
        out, lse = torch.empty_like(q), q.new_empty(q.shape[:-1])  # (B, G, N, d), (B, G, N)
        for a, m, pieces in plan:
            rows = slice(a, a + m)
            parts = [_piece_forward(q[..., rows, :], k[..., start:stop, :], v[..., start:stop, :],
                                    kind, _piece_mask(a, m, start, stop, w, q)
                                    if kind == "mask" else None)
                     for start, stop, kind in pieces]  # [(out_p, lse_p)]
            total = torch.stack([lse_p for _, lse_p in parts]).logsumexp(0)  # (B, G, m)
            out[..., rows, :] = sum(out_p * (lse_p - total).exp()[..., None]
                                    for out_p, lse_p in parts)
            lse[..., rows] = total
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.plan, ctx.w = plan, w
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dout = dout.contiguous()
        for a, m, pieces in ctx.plan:
            rows = slice(a, a + m)
            for start, stop, kind in pieces:
                keys = slice(start, stop)
                mask = _piece_mask(a, m, start, stop, ctx.w, q) if kind == "mask" else None
                gq, gk, gv = _piece_backward(dout[..., rows, :], q[..., rows, :], k[..., keys, :],
                                             v[..., keys, :], out[..., rows, :], lse[..., rows],
                                             kind, mask)
                dq[..., rows, :] += gq  # every piece of the chunk adds its share
                dk[..., keys, :] += gk  # a key gets shares from several chunks
                dv[..., keys, :] += gv
        return dq, dk, dv, None, None
