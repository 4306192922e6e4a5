"""Multi-scale attention, fast: the numbers of `minattn.multiscale.multiscale_attention_np`
without an (H, N, N) mask for long sequences. The caller chooses by name:

    multiscale_attention_fast_torch         heads grouped by scale, each group on the cheapest
                                            kernel (written for the CPU, runs anywhere)
    multiscale_attention_routed_fast_torch  on CUDA one call for all heads, dense SDPA with the
                                            (H, N, N) mask or FlexAttention with per-head window
                                            tiles, as `minattn.fast.flex.choose_kernel(...,
                                            pattern="multiscale")` decides; elsewhere the first

Grouped by scale. The heads, sorted by ω, are cut into groups of equal ω (views), and each group
runs on
  * PyTorch's fused SDPA with no window when ω >= N − 1,
  * the band kernel below (CPU) when ω >= BAND_FROM,
  * lesson 02's window kernel `window_attention_fast_torch` (O(N·ω)) for smaller ω,
  * (not on the CPU) dense SDPA with the group's band mask when ω is close to N;
and the group outputs are put back in head order. For short sequences (N < DENSE_BELOW), for
masks other than key padding and with global positions, one dense masked SDPA call over all
heads is the whole computation. The thresholds are measured: benchmarks/README.md, section
"Multi-scale attention (lesson 03)".

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

Padding. The window and band kernels take no mask. A key-padding mask (B, 1, 1, N) is folded
into the keys instead: one extra feature, 1 on every query and 0 (real key) or a huge negative
number (padded key) on the keys, adds −∞ (in effect) to every score of a padded key and nothing
to the others:

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

from .. import checks as c
from ..attention import hide_unseen
from ..contract import checked
from ..multiscale import multiscale_attention_np, scale_mask_torch  # noqa: F401  (its reference)
from . import flex
from .attention import attention_fast_torch
from .sparse import window_attention_fast_torch

DENSE_BELOW = 512  # N below which one dense masked call beats grouping (benchmarks/README.md)
BAND_FROM = 128  # ω from which the band kernel beats the window kernel on the CPU
WINDOW_SPAN_SHARE = 0.75  # off the CPU the window kernel runs a group while 2ω + 64 < this · N
_BLOCK = 64  # the window kernel's query block (its default in training)
# The fused CPU kernel behind F.scaled_dot_product_attention, which also returns log-sum-exp.
_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
_FLASH_CPU_BACKWARD = getattr(torch.ops.aten,
                              "_scaled_dot_product_flash_attention_for_cpu_backward", None)


@checked(q="float* (B, H, N, d)", k="float* (B, H, N, d)", v="float* (B, H, N, dv)",
         mask="bool? ~(B, H, N, N)", n_global="int in 0 .. N", dense_below="int",
         rules=[c.windows_per_head])
def multiscale_attention_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windows,
                                    mask: torch.Tensor | None = None, n_global: int = 0,
                                    dense_below: int = DENSE_BELOW) -> torch.Tensor:
    """`multiscale_attention_np`'s output (B, H, N, d), heads grouped by scale.

    q, k, v (B, H, N, d); windows: H integers >= 0; mask: None or bool broadcastable to
    (B, H, N, N); n_global leading global positions. A key-padding mask (B or 1, 1, 1, N) keeps
    the grouped path; N < dense_below, another mask or n_global > 0 take one dense masked call.
    """
    q, k, v = hide_unseen(q, k, v, mask)  # what the mask hides may hold garbage
    n = q.shape[-2]
    key_mask = _key_padding(mask, q.shape[0], n)
    if mask is None and not n_global and n < dense_below:  # every row sees itself: none empty
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_band_bias(n, windows, q))
    if n < dense_below or n_global or (mask is not None and key_mask is None):
        return _dense(q, k, v, windows, mask, n_global)
    # Heads sorted by ω (one gather, none when they already are), then cut into groups of equal
    # ω: views, whose gradients autograd joins with one cat.
    order = sorted(range(len(windows)), key=lambda h: windows[h])
    already_sorted = order == list(range(len(windows)))
    group_ws = sorted(set(windows))
    sizes = [windows.count(w) for w in group_ws]
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


@checked(q="float* (B, H, N, d)", k="float* (B, H, N, d)", v="float* (B, H, N, dv)",
         mask="bool? ~(B, H, N, N)", n_global="int in 0 .. N", rules=[c.windows_per_head])
def multiscale_attention_routed_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                           windows, mask: torch.Tensor | None = None,
                                           n_global: int = 0) -> torch.Tensor:
    """`multiscale_attention_np`'s output (B, H, N, d) on the route `flex.choose_kernel(...,
    pattern="multiscale")` picks for the inputs' device, dtype and N: "readable",
    `multiscale_attention_fast_torch`; "dense", one SDPA call with the (H, N, N) mask; "flex",
    one FlexAttention call with per-head window tiles (no mask or key padding only; where the
    compiler refuses it, the dense call with a warning)."""
    q, k, v = hide_unseen(q, k, v, mask)  # what the mask hides may hold garbage
    route = flex.choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1],
                               pattern="multiscale")
    if route == "readable":
        return multiscale_attention_fast_torch(q, k, v, windows, mask, n_global)
    key_mask = _key_padding(mask, q.shape[0], q.shape[-2])
    if route == "flex" and not n_global and (mask is None or key_mask is not None):
        out = flex.routed_multiscale_attention(q, k, v, windows, key_mask)
        if out is not None:  # None: the compiler refused flex (a warning said so)
            return out
    return _dense(q, k, v, windows, mask, n_global)


def _dense(q, k, v, windows, mask, n_global):
    """One fused SDPA call over all heads with the (H, N, N) window mask ∩ mask (a query that
    may see no key gets zeros, as in the reference)."""
    allowed = scale_mask_torch(q.shape[-2], windows, q.device, n_global)
    return attention_fast_torch(q, k, v, mask=allowed if mask is None else allowed & mask)


def _band_bias(n, ws, like):
    """(1, H, N, N) additive mask, 0 inside each head's window and −∞ outside, in like's dtype
    (SDPA takes a float mask as it is, a bool one is converted on every call; a 4-d mask keeps
    its fused CPU kernel), cached per N, windows, device and dtype."""
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
        return band_attention_fast_torch(q, k, v, w)
    if on_cpu or 2 * w + _BLOCK < WINDOW_SPAN_SHARE * q.shape[-2]:
        return window_attention_fast_torch(q, k, v, w)
    return band_masked_attention_fast_torch(q, k, v, w)


def band_masked_attention_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                     w: int) -> torch.Tensor:
    """|i − j| <= w as one dense SDPA call with the (N, N) band mask: (B, G, N, d). Off the CPU,
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
@checked(q="float (B, G, N, d)", k="float (B, G, N, d)", v="float (B, G, N, dv)",
         w="int >= 1", chunk="int? in 1 .. 2w", rules=[c.band_kernel])
def band_attention_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int,
                              chunk: int | None = None) -> torch.Tensor:
    """|i − j| <= w attention on the CPU from unmasked fused pieces (see the module docstring).

    q, k, v: (B, G, N, d) -> (B, G, N, d); w >= 1. chunk: queries per chunk c, 1 .. 2w (the
    two triangles must not overlap); default 128, or 256 from w = 1,024, at most 2w (larger
    chunks mean fewer calls: the chunk table of benchmarks/README.md).
    """
    c = min(256 if w >= 1024 else 128, 2 * w) if chunk is None else chunk
    return _BandAttention.apply(q, k, v, w, c)


@checked(n="int", w="int", c="int >= 1")
def band_pieces(n: int, w: int, c: int) -> list:
    """For each query chunk: (a, m, pieces), queries a .. a + m − 1 and their key pieces
    (start, stop, kind), kind one of "all", "lower" (t <= r), "upper" (t >= r), "mask"."""
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
