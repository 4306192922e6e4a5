"""Multi-scale self-attention (Guo et al., AAAI 2020) — NumPy reference, then PyTorch.

Scale-aware attention: head h of a layer lets token i attend only to tokens j with
|i − j| <= ω_h (ω_h = "the scale" of head h, the course's one-sided half-width). A layer whose
heads use different ω is multi-scale multi-head attention: ordinary multi-head attention
(lesson 01) with one window mask per head.

    windows  ω = (ω_1, ..., ω_H), one per head, integers >= 0 (ω >= N - 1 means "everything")
    q, k, v  (B, H, N, d)        mask (optional)  bool, broadcastable to (B, H, N, N)
    output   (B, H, N, d)        weights          (B, H, N, N)

The measured scale of a head is the attention-weighted distance Σ_j a_ij |i − j|, averaged
over the queries i: small for a local head, about N/3 for a head spread evenly over everything.

Scale allocation across layers (`allocate_scales_np`): with N' heads per layer, K candidate
scales ω_1 < ... < ω_K and a control factor α, layer l gets n^l_k heads of scale ω_k. α > 0 puts
small scales in the lower layers, α < 0 large ones, α = 0 spreads heads evenly.

The Multi-Scale Transformer (`MultiScaleTransformer`) stacks such layers with a residual, a
nonlinearity and layer norm — no position-wise FFN, no positional embedding — and classifies
from [classification node ; max-pool over the tokens] with a 2-layer MLP.

The fast path (heads grouped by scale: lesson 02's window kernel, a band kernel, SDPA) is in
`fast.py`; the model in `model.py`, its baselines in `baselines.py`; the head analysis
(uniform weights, departure) in `analysis.py`; lesson 03's tasks in `data.py`. The per-head
window check `check_windows` sits with lesson 02's window patterns (`minattn.sparse`).
"""

from __future__ import annotations

import numpy as np
import torch

from ..attention import attention_np, attention_torch, check_attention_inputs
from ..checks import (
    check_array,
    check_finite,
    check_number,
    check_same_device,
    check_size,
    check_windows,
    describe,
    fail,
    hide,
    shape_str,
)


# ============================================================================ input checks
def scale_candidates(n: int) -> list[int]:
    """The paper's candidate scales for sequences of length n, smallest first:
    ω ∈ {3, N/16, N/8, N/4, N/2} (each at least 1). For N >= 48 that is the paper's order; for
    shorter sequences N/16 and N/8 fall below 3 (N = 32 gives [2, 3, 4, 8, 16])."""
    n = check_size("n", n, 2)
    return sorted([3] + [max(1, n // f) for f in (16, 8, 4, 2)])


class ScaleAllocation:
    """Each layer's windows, recomputed from the length N of every batch.

    counts (L, K): layer l gives counts[l, k] heads the k-th smallest of the K candidate scales
    `scale_candidates(N)` — ω ∈ {3, N/16, N/8, N/4, N/2} as the paper means them, N being the
    sentence length, not a fixed maximum. Calling it with N gives the L lists of windows
    (`layer_windows`); e.g. `ScaleAllocation(allocate_scales_np(5, 5, 3, 0.5))(21)`.
    """

    def __init__(self, counts):
        counts = np.asarray(counts)
        if counts.ndim != 2 or counts.shape[1] != 5 or (counts < 0).any() or \
                len(set(counts.sum(1).tolist())) != 1 or counts.sum(1)[0] < 1:
            fail("head counts per layer over the 5 candidate scales", "(L, 5) counts >= 0, "
                 "every row with the same number of heads >= 1", f"{counts.tolist()}")
        self.counts = counts.astype(np.int64)
        self.num_layers, self.num_heads = len(counts), int(counts.sum(1)[0])

    def __call__(self, n: int) -> list[list[int]]:
        return layer_windows(self.counts, scale_candidates(n))

    def __repr__(self) -> str:
        return f"ScaleAllocation({self.counts.tolist()})"


# ============================================================================ NumPy reference
def scale_mask_np(n: int, windows, n_global: int = 0) -> np.ndarray:
    """(H, N, N) bool: head h lets query i see key j iff |i − j| <= windows[h].

    n_global: the first n_global positions are global (a relay node, as in Star-Transformer):
    they see every position and every position sees them, whatever the window.
    """
    windows = check_windows(windows)
    n = check_size("n", n, 1)
    _check_global(n_global, n)
    # BEGIN EXERCISE 3.1 implement: the per-head window mask |i - j| <= ω_h, shape (H, N, N) (~10 min)
    i = np.arange(n)[:, None]  # (N, 1) queries
    j = np.arange(n)[None, :]  # (1, N) keys
    mask = np.abs(i - j)[None] <= np.array(windows)[:, None, None]  # (H, N, N)
    # END EXERCISE
    mask[:, :n_global, :] = True  # a global position sees everything ...
    mask[:, :, :n_global] = True  # ... and is seen by everything
    return mask


def _check_global(n_global, n):
    if isinstance(n_global, bool) or not isinstance(n_global, (int, np.integer)) or \
            not 0 <= n_global <= n:
        fail("n_global: how many leading positions are global", f"an integer in 0 .. N = {n}",
             repr(n_global))


def combine_masks(scale_mask, mask):
    """The head windows (H, N, N) AND a user mask (padding, ...) broadcastable to (B, H, N, N)."""
    return scale_mask if mask is None else scale_mask & mask


def multiscale_attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, windows,
                            mask: np.ndarray | None = None,
                            n_global: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Multi-scale multi-head attention: head h attends within |i − j| <= windows[h].

    Args:
        q, k, v: (B, H, N, d) — self-attention, so one length N.
        windows: H integers >= 0.
        mask: optional bool broadcastable to (B, H, N, N), True = may attend (e.g. padding).
        n_global: the first n_global positions see and are seen by all (`scale_mask_np`).
    Returns:
        output (B, H, N, d) and weights (B, H, N, N).
    """
    check_multiscale_inputs(q, k, v, windows, mask)
    return attention_np(q, k, v, combine_masks(scale_mask_np(q.shape[-2], windows, n_global), mask))


def check_multiscale_inputs(q, k, v, windows, mask):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim != 4:
            fail(f"{name} has the wrong number of axes", "(B, H, N, d)", shape_str(x.shape))
    check_attention_inputs(q, k, v, mask)
    if q.shape[-2] != k.shape[-2]:
        fail("multi-scale attention is self-attention: one length N",
             f"k of length {q.shape[-2]}", f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    return check_windows(windows, q.shape[1])


def measured_scale_np(weights: np.ndarray, query_mask: np.ndarray | None = None) -> np.ndarray:
    """Measured scale of each head: Σ_j a_ij |i − j|, averaged over queries (and the batch).

    Args:
        weights: (B, H, N, N) attention weights.
        query_mask: optional (B, N) bool, True on the queries to average over (real tokens).
    Returns:
        (H,) the mean attention distance of each head; 0 for a batch without a real query.
    Padded queries' rows may hold anything: they are selected away, never multiplied by 0.
    """
    check_measured_scale_inputs(weights, query_mask, np.ndarray)
    n = weights.shape[-1]
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])  # (N, N): |i - j|
    if query_mask is None:
        return (weights * distance).sum(-1).mean(axis=(0, 2))
    keep = query_mask[:, None, :]  # (B, 1, N)
    per_query = np.where(keep, (hide(weights, keep[..., None]) * distance).sum(-1), 0.0)
    return per_query.sum(axis=(0, 2)) / np.maximum(keep.sum(axis=(0, 2)), 1)


def check_measured_scale_inputs(weights, query_mask, like) -> None:
    """weights (B, H, N, N) >= 0, finite for the real queries; query_mask None or (B, N) bool."""
    check_array("weights", weights, "float", hint="(B, H, N, N)", like=like)
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    keep = None
    if query_mask is not None:
        check_array("query_mask", query_mask, "bool", like=like,
                    hint=f"(B, N) = ({weights.shape[0]}, {weights.shape[-1]}), "
                         "True on real queries")
        if tuple(query_mask.shape) != (weights.shape[0], weights.shape[-1]):
            fail("query_mask", f"shape (B, N) = ({weights.shape[0]}, {weights.shape[-1]}), "
                 "True on real queries", describe(query_mask))
        check_same_device(weights=weights, query_mask=query_mask)
        keep = query_mask[:, None, :, None]
    check_finite("weights", weights, where=keep)
    negative = weights < 0 if keep is None else (weights < 0) & keep
    if bool(negative.any()):
        fail("weights", "attention weights >= 0 (rows of a softmax)",
             f"{int(negative.sum())} negative values")


def allocate_scales_np(num_heads: int, num_scales: int, num_layers: int,
                       alpha: float) -> np.ndarray:
    """How many heads of each scale every layer gets: (L, K) integer counts, rows sum to N'.

    The rule (ours; the paper gives only an example):
      1. scores: layer l (l = 1..L) of L gives scale k (k = 1..K, smallest first) the score
             z^l_k = α · (K − k) · t_l,    t_l = 1 − 2(l − 1)/(L − 1)   (t_l = 1 when L = 1)
         so layer 1 gets [α(K−1), ..., α, 0] (the slides' z¹), the top layer the mirror image,
         and the middle layer (t = 0) all zeros;
      2. shares: p^l = softmax(z^l);
      3. counts: head h = 0..N'−1 of the layer takes the first scale whose cumulative share
         P^l_k = p^l_1 + ... + p^l_k exceeds h / N', i.e.
             n^l_k = ⌈N' · P^l_k⌉ − ⌈N' · P^l_{k−1}⌉.
    α = 0 gives p uniform (N'/K heads per scale when K divides N'); α > 0 tilts layer 1 toward
    small scales and the top layer toward large ones; α < 0 the reverse.
    """
    for name, value, low in (("num_heads N'", num_heads, 1), ("num_scales K", num_scales, 1),
                             ("num_layers L", num_layers, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            fail(f"{name} must be an integer >= {low}", f">= {low}", repr(value))
    alpha = check_number("alpha", alpha)
    # BEGIN EXERCISE 3.2 implement: scale allocation — scores z, softmax shares, counts from the cumulative shares (~15 min)
    layer = np.arange(num_layers)[:, None]  # (L, 1), l - 1
    t = 1.0 - 2.0 * layer / (num_layers - 1) if num_layers > 1 else np.ones((1, 1))
    z = alpha * (num_scales - 1 - np.arange(num_scales))[None, :] * t  # (L, K)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)  # (L, K) shares
    # ceil with a small tolerance, so that 0.6000000000000001 · 10 counts as 6
    cum = np.ceil(num_heads * np.cumsum(p, axis=1) - 1e-9).astype(np.int64)  # (L, K)
    cum[:, -1] = num_heads  # the cumulative share of all K scales is 1
    counts = np.diff(cum, axis=1, prepend=0)
    # END EXERCISE
    return counts


def layer_windows(counts: np.ndarray, scales) -> list[list[int]]:
    """(L, K) head counts + K scales -> each layer's list of N' windows, smallest first."""
    counts = np.asarray(counts)
    scales = check_windows(scales)
    if counts.ndim != 2 or counts.shape[1] != len(scales):
        fail("counts and scales must match", f"(L, {len(scales)}) counts",
             shape_str(counts.shape))
    if counts.dtype.kind not in "iu" or (counts < 0).any():
        fail("counts", "integer head counts >= 0 (allocate_scales_np's)", describe(counts))
    return [[int(w) for w, c in zip(scales, row) for _ in range(int(c))] for row in counts]


# ============================================================================ PyTorch
def scale_mask_torch(n: int, windows, device=None, n_global: int = 0) -> torch.Tensor:
    """Torch twin of `scale_mask_np`: (H, N, N) bool on `device`."""
    windows = check_windows(windows)
    n = check_size("n", n, 1)
    _check_global(n_global, n)
    # BEGIN EXERCISE 3.1 implement: the per-head window mask |i - j| <= ω_h, shape (H, N, N) (~10 min)
    i = torch.arange(n, device=device)[:, None]  # (N, 1) queries
    j = torch.arange(n, device=device)[None, :]  # (1, N) keys
    mask = (i - j).abs()[None] <= torch.tensor(windows, device=device)[:, None, None]  # (H, N, N)
    # END EXERCISE
    mask[:, :n_global, :] = True  # a global position sees everything ...
    mask[:, :, :n_global] = True  # ... and is seen by everything
    return mask


def multiscale_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windows,
                               mask: torch.Tensor | None = None, n_global: int = 0
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of `multiscale_attention_np`: output (B, H, N, d), weights (B, H, N, N)."""
    check_multiscale_inputs(q, k, v, windows, mask)
    windowed = scale_mask_torch(q.shape[-2], windows, q.device, n_global)
    return attention_torch(q, k, v, combine_masks(windowed, mask))


def measured_scale_torch(weights: torch.Tensor,
                         query_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Torch twin of `measured_scale_np`: (H,) mean attention distance per head."""
    check_measured_scale_inputs(weights, query_mask, torch.Tensor)
    pos = torch.arange(weights.shape[-1], device=weights.device)
    distance = (pos[:, None] - pos[None, :]).abs().to(weights.dtype)  # (N, N)
    if query_mask is None:
        return (weights * distance).sum(-1).mean(dim=(0, 2))
    keep = query_mask[:, None, :]  # (B, 1, N)
    per_query = torch.where(keep, (hide(weights, keep[..., None]) * distance).sum(-1), 0.0)
    return per_query.sum(dim=(0, 2)) / keep.sum(dim=(0, 2)).clamp(min=1)


