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
`multiscale_fast.py`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .attention import (MultiHeadAttention, attention_np, attention_torch,
                        check_attention_inputs, fast_attention_torch)
from .tools.utils import (as_numpy, check_array, check_finite, check_ids, check_number,
                          check_same_device, check_size, describe, fail, hide, shape_str)


# ============================================================================ input checks
def check_windows(windows, num_heads: int | None = None) -> list[int]:
    """One integer ω >= 0 per head; with num_heads, exactly that many."""
    ws = list(as_numpy(windows).reshape(-1)) if not isinstance(windows, (list, tuple)) \
        else list(windows)
    if not ws:
        fail("windows: no scales given", "one window ω >= 0 per head", repr(windows))
    for w in ws:
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 0:
            fail("windows: a window ω must be an integer >= 0", "ω in {0, 1, 2, ...}",
                 repr(windows))
    if num_heads is not None and len(ws) != num_heads:
        fail("windows: one window per head", f"{num_heads} windows",
             f"{len(ws)}: {list(map(int, ws))}")
    return [int(w) for w in ws]


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
    ws = check_windows(windows)
    n = check_size("n", n, 1)
    _check_global(n_global, n)
    # BEGIN EXERCISE 3.1 implement: the per-head window mask |i - j| <= ω_h, shape (H, N, N) (~10 min)
    i = np.arange(n)[:, None]  # (N, 1) queries
    j = np.arange(n)[None, :]  # (1, N) keys
    mask = np.abs(i - j)[None] <= np.array(ws)[:, None, None]  # (H, N, N)
    # END EXERCISE
    mask[:, :n_global, :] = True  # a global position sees everything ...
    mask[:, :, :n_global] = True  # ... and is seen by everything
    return mask


def _check_global(n_global, n):
    if isinstance(n_global, bool) or not isinstance(n_global, (int, np.integer)) or \
            not 0 <= n_global <= n:
        fail("n_global: how many leading positions are global", f"an integer in 0 .. N = {n}",
             repr(n_global))


def _combine(scale_mask, mask):
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
    _check_inputs(q, k, v, windows, mask)
    return attention_np(q, k, v, _combine(scale_mask_np(q.shape[-2], windows, n_global), mask))


def _check_inputs(q, k, v, windows, mask):
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
                    hint=f"(B, N) = ({weights.shape[0]}, {weights.shape[-1]}), True on real queries")
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


def uniform_weights_np(mask: np.ndarray) -> np.ndarray:
    """The reference a trained head is compared with: attention spread evenly over the keys
    each query may see. mask (..., N, N) bool -> weights (..., N, N) float64; a row that may see
    nothing gets zeros. Its measured scale is what a head that learned nothing would show."""
    allowed = np.asarray(mask, dtype=np.float64)
    return allowed / np.maximum(allowed.sum(-1, keepdims=True), 1)


def drop_keys_np(weights: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Attention weights (B, H, N, N) with the keys where keep (B, N) is False removed and each
    row renormalised over the keys kept (a row left with nothing: zeros). Used to take
    attention sinks such as BERT's [CLS] and [SEP] out of a measured scale."""
    w = weights * np.asarray(keep, dtype=weights.dtype)[:, None, None, :]
    total = w.sum(-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0)


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


def departure_np(weights: np.ndarray, mask: np.ndarray,
                 query_mask: np.ndarray | None = None) -> np.ndarray:
    """How far each head is from uniform attention inside what it may see: the total-variation
    distance ½ Σ_j |a_ij − u_ij| (0: uniform, near 1: all weight where uniform puts almost
    none), averaged over the queries (and the batch) as `measured_scale_np` averages.

    weights (B, H, N, N), mask bool broadcastable to them, query_mask (B, N) or None -> (H,).
    A head can keep the uniform head's scale and still depart from it (by picking words).
    """
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    tv = 0.5 * np.abs(weights - uniform_weights_np(np.broadcast_to(mask, weights.shape))).sum(-1)
    if query_mask is None:
        return tv.mean(axis=(0, 2))
    keep = np.asarray(query_mask, dtype=np.float64)[:, None, :]
    return (tv * keep).sum(axis=(0, 2)) / np.maximum(keep.sum(axis=(0, 2)), 1)


# ============================================================================ PyTorch
def scale_mask_torch(n: int, windows, device=None, n_global: int = 0) -> torch.Tensor:
    """Torch twin of `scale_mask_np`: (H, N, N) bool on `device`."""
    ws = check_windows(windows)
    n = check_size("n", n, 1)
    _check_global(n_global, n)
    # BEGIN EXERCISE 3.1 implement: the per-head window mask |i - j| <= ω_h, shape (H, N, N) (~10 min)
    i = torch.arange(n, device=device)[:, None]  # (N, 1) queries
    j = torch.arange(n, device=device)[None, :]  # (1, N) keys
    mask = (i - j).abs()[None] <= torch.tensor(ws, device=device)[:, None, None]  # (H, N, N)
    # END EXERCISE
    mask[:, :n_global, :] = True  # a global position sees everything ...
    mask[:, :, :n_global] = True  # ... and is seen by everything
    return mask


def multiscale_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windows,
                               mask: torch.Tensor | None = None, n_global: int = 0
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of `multiscale_attention_np`: output (B, H, N, d), weights (B, H, N, N)."""
    _check_inputs(q, k, v, windows, mask)
    windowed = scale_mask_torch(q.shape[-2], windows, q.device, n_global)
    return attention_torch(q, k, v, _combine(windowed, mask))


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


def check_classifier_inputs(inputs, lengths, embedding, weight, max_len=None) -> None:
    """The inputs of lesson 03's classifiers: (B, N) token ids inside the embedding's
    vocabulary (with an nn.Embedding), else (B, N, d_in) finite vectors of the dtype and width
    of the first layer's `weight` (·, d_in); lengths None or (B,) integers in 1..N (a sentence
    has at least one token)."""
    if isinstance(embedding, nn.Embedding):
        check_array("inputs", inputs, "int", ndim=2, hint="(B, N) token ids", like=torch.Tensor)
        check_ids("inputs", inputs, embedding.num_embeddings, "the embedding's vocabulary")
    elif embedding is None:
        check_array("inputs", inputs, "float", ndim=3, hint="(B, N, d_in)", like=torch.Tensor)
        if weight is not None and (inputs.shape[-1] != weight.shape[-1]
                                   or inputs.dtype != weight.dtype):
            fail("inputs", f"(B, N, {weight.shape[-1]}) {str(weight.dtype).removeprefix('torch.')}"
                 " vectors, the first layer's width and dtype", describe(inputs))
        check_finite("inputs", inputs)
    if inputs.shape[0] == 0 or inputs.shape[1] == 0:
        fail("inputs", "at least one sequence of at least one token", describe(inputs))
    if max_len is not None and inputs.shape[1] > max_len:
        fail("inputs: sequence longer than the positional embedding",
             f"N <= max_len = {max_len}", f"N = {inputs.shape[1]}")
    if lengths is not None:
        n = inputs.shape[1]
        check_array("lengths", lengths, "int", ndim=1, hint="(B,) integers", like=torch.Tensor)
        if lengths.shape[0] != inputs.shape[0] or int(lengths.min()) < 1 or int(lengths.max()) > n:
            fail("lengths", f"({inputs.shape[0]},) integers in 1..N = {n}",
                 f"{describe(lengths)} from {int(lengths.min())} to {int(lengths.max())}"
                 if lengths.numel() else describe(lengths))


def uniform_weights_torch(mask: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Torch twin of `uniform_weights_np`: (..., N, N) bool -> even weights over allowed keys."""
    allowed = mask.to(dtype)
    return allowed / allowed.sum(-1, keepdim=True).clamp(min=1)


def departure_torch(weights: torch.Tensor, mask: torch.Tensor,
                    query_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Torch twin of `departure_np`: (H,) mean total-variation distance from uniform attention."""
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    flat = uniform_weights_torch(mask.expand(weights.shape), weights.dtype)
    tv = 0.5 * (weights - flat).abs().sum(-1)  # (B, H, N)
    if query_mask is None:
        return tv.mean(dim=(0, 2))
    keep = query_mask.to(weights.dtype)[:, None, :]
    return (tv * keep).sum(dim=(0, 2)) / keep.sum(dim=(0, 2)).clamp(min=1)


def drop_keys_torch(weights: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Torch twin of `drop_keys_np`: (B, H, N, N) weights without the keys where keep (B, N)
    is False, rows renormalised."""
    w = weights * keep.to(weights.dtype)[:, None, None, :]
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / total.clamp(min=torch.finfo(w.dtype).tiny), 0.0)


class MultiScaleKernel:
    """The `attend(q, k, v, mask) -> out` kernel of a multi-scale layer, for
    `MultiHeadAttention(d_model, H, attend=MultiScaleKernel(windows))`.

    fast=True runs `multiscale_fast.multiscale_attention_fast_torch` (heads grouped by scale:
    window kernel for small ω, band kernel for large); fast=False the reference
    `multiscale_attention_torch`. n_global > 0 (global leading positions) is no band any more:
    one dense masked call. `set_windows` changes the windows between batches (same H).
    With `record = True` it runs the reference and keeps the weights in `last_weights`
    (B, H, N, N) and what each query could see in `last_mask`, for the scale analysis.
    """

    def __init__(self, windows, fast: bool = True, n_global: int = 0):
        self.windows = check_windows(windows)
        self.fast, self.n_global = fast, n_global
        self.record, self.last_weights, self.last_mask = False, None, None

    @property
    def __name__(self) -> str:
        return f"multiscale(ω={self.windows}" + (f", global={self.n_global})" if self.n_global
                                                 else ")")

    def set_windows(self, windows) -> None:
        self.windows = check_windows(windows, len(self.windows))

    def __call__(self, q, k, v, mask=None):
        if self.record:
            out, self.last_weights = multiscale_attention_torch(q, k, v, self.windows, mask,
                                                                self.n_global)
            self.last_mask = _combine(scale_mask_torch(q.shape[-2], self.windows, q.device,
                                                       self.n_global), mask)
            return out
        if self.n_global:
            _check_inputs(q, k, v, self.windows, mask)
            allowed = scale_mask_torch(q.shape[-2], self.windows, q.device, self.n_global)
            return fast_attention_torch(q, k, v, mask=_combine(allowed, mask))
        if self.fast:
            from .multiscale_fast import multiscale_attention_fast_torch
            return multiscale_attention_fast_torch(q, k, v, self.windows, mask)
        return multiscale_attention_torch(q, k, v, self.windows, mask)[0]


def masked_max_torch(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Torch-only: max over the tokens of x (B, N, D) where keep (B, N) is True -> (B, D);
    an example with no token gives zeros."""
    check_array("x", x, "float", ndim=3, hint="(B, N, D)", like=torch.Tensor)
    check_array("keep", keep, "bool", like=torch.Tensor, hint="(B, N), True on real tokens")
    if tuple(keep.shape) != tuple(x.shape[:2]):
        fail("keep", f"shape (B, N) = {shape_str(x.shape[:2])}, True on real tokens",
             describe(keep))
    check_same_device(x=x, keep=keep)
    check_finite("x", x, where=keep[..., None])
    out = x.masked_fill(~keep[..., None], float("-inf")).amax(dim=1)
    return torch.where(torch.isfinite(out), out, torch.zeros_like(out))


class NodeReadout(nn.Module):
    """The classifier of lesson 03's models: x (B, 1 + N, D), keep (B, 1 + N) -> (B, n_out).

    max_pool=True (the paper's): MLP([x_node ; max over the real tokens of x]); False: MLP(x_node)
    alone, so that a token can reach the output only through attention (a test of reach).
    MLP = Linear-ReLU-Linear.
    """

    def __init__(self, d_model: int, n_out: int, max_pool: bool = True):
        super().__init__()
        self.max_pool = max_pool
        self.mlp = nn.Sequential(nn.Linear((2 if max_pool else 1) * d_model, d_model), nn.ReLU(),
                                 nn.Linear(d_model, n_out))

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        if not self.max_pool:
            return self.mlp(x[:, 0])
        return self.mlp(torch.cat([x[:, 0], masked_max_torch(x[:, 1:], keep[:, 1:])], dim=-1))


class MultiScaleTransformer(nn.Module):
    """The Multi-Scale Transformer classifier (or regressor) of Guo et al.

    inputs (B, N) token ids (with `embedding`) or (B, N, d_in) vectors, lengths (B,) or None
        -> (B, n_out)

    x = Linear(inputs); prepend a learned classification node at position 0; then per layer
        x <- LayerNorm(x + GELU(MultiScaleAttention(x)))
    (no position-wise FFN: the nonlinearity and a small-ω head play its part; no positional
    embedding: the windows are the only thing that knows order — distance, not direction), and
    classify MLP([x_node ; max over the real tokens of x]),  MLP = Linear-ReLU-Linear.

    windows: each layer's H windows (`layer_windows(allocate_scales_np(...), ω)`), or a
        `ScaleAllocation`, which recomputes them from every batch's length N (the paper's
        ω ∈ {3, N/16, N/8, N/4, N/2}).
    The node: by default an ordinary position under the windows — a head of window ω lets it
        see the first ω tokens (all of them once ω >= N), so in a layer of small windows it
        hears only the start of the sentence. global_node=True makes it a relay node (as in
        Star-Transformer, by the same group): in every head it sees every token and every token
        sees it.
    max_len: None (the paper's classifier: no positional embedding), or the longest N for a
        learned positional embedding added to the node and the tokens — for tasks where a head
        must know *which* tokens it sees, not only that they are near.
    max_pool: False reads out from the node alone (`NodeReadout`).
    """

    def __init__(self, d_in: int, d_model: int, windows, n_out: int,
                 embedding: nn.Module | None = None, fast: bool = True,
                 max_len: int | None = None, max_pool: bool = True, global_node: bool = False):
        super().__init__()
        self.allocation = windows if isinstance(windows, ScaleAllocation) else None
        if self.allocation is not None:
            windows = self.allocation(2 * 16)  # the layout (L lists of H); the values per batch
        if not windows or not isinstance(windows, (list, tuple)):
            fail("windows: MultiScaleTransformer needs at least one layer",
                 "a list of per-layer windows", repr(windows))
        heads = len(check_windows(windows[0]))
        self.embedding = embedding
        self.input = nn.Linear(d_in, d_model)
        self.node = nn.Parameter(torch.randn(d_model) * 0.02)
        self.max_len, self.global_node = max_len, global_node
        self.position = None if max_len is None else nn.Parameter(
            torch.randn(max_len + 1, d_model) * 0.02)  # as the Transformer baseline's
        self.kernels = [MultiScaleKernel(check_windows(ws, heads), fast, int(global_node))
                        for ws in windows]
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, heads, attend=kern)
                                  for kern in self.kernels)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in windows)
        self.classifier = NodeReadout(d_model, n_out, max_pool)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        check_classifier_inputs(inputs, lengths, self.embedding, self.input.weight)
        x = self.input(self.embedding(inputs) if self.embedding is not None else inputs)
        bsz, n, _ = x.shape
        if self.allocation is not None:  # ω from this batch's length N (the node not counted)
            for kern, ws in zip(self.kernels, self.allocation(max(n, 2))):
                kern.set_windows(ws)
        x = torch.cat([self.node.expand(bsz, 1, -1), x], dim=1)  # (B, 1 + N, D)
        if self.position is not None:
            if n > self.max_len:
                fail("sequence longer than the positional embedding",
                     f"N <= max_len = {self.max_len}", f"N = {n}")
            x = x + self.position[: n + 1]
        lengths = torch.full((bsz,), n, device=x.device) if lengths is None else lengths
        keep = torch.arange(n + 1, device=x.device)[None] < lengths[:, None] + 1  # (B, 1 + N)
        mask = keep[:, None, None, :]  # (B, 1, 1, 1 + N): padded keys are never seen
        for attn, norm in zip(self.attn, self.norms):
            x = norm(x + F.gelu(attn(x, mask=mask)[0]))
        return self.classifier(x, keep)

    def windows(self) -> list[list[int]]:
        """Each layer's windows as the last batch used them."""
        return [list(kern.windows) for kern in self.kernels]

    @torch.no_grad()
    def attention_maps(self, inputs, lengths=None
                       ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every layer's weights (B, H, 1 + N, 1 + N) on this batch and what each query could
        see (bool, broadcastable to the weights); position 0 is the node."""
        for kern in self.kernels:
            kern.record = True
        try:
            self.forward(inputs, lengths)
        finally:
            for kern in self.kernels:
                kern.record = False
        return ([kern.last_weights for kern in self.kernels],
                [kern.last_mask for kern in self.kernels])

    @torch.no_grad()
    def measured_scales(self, inputs, lengths=None) -> np.ndarray:
        """(L, H) measured scale of every head on this batch (real queries only)."""
        return head_statistics_torch(*self.attention_maps(inputs, lengths), lengths)["scale"]

    @torch.no_grad()
    def head_statistics(self, inputs, lengths=None) -> dict[str, np.ndarray]:
        """`head_statistics_torch` of every head on this batch: (L, H) arrays."""
        return head_statistics_torch(*self.attention_maps(inputs, lengths), lengths)


def head_statistics_torch(weights, masks, lengths=None) -> dict[str, np.ndarray]:
    """Torch-only, for trained models: per-layer weights (B, H, 1 + N, 1 + N) and what each
    query could see -> (L, H) arrays over the real queries (the node and the first `lengths`
    tokens):
        "scale"          the measured scale (`measured_scale_torch`);
        "uniform_scale"  the scale of uniform attention under the same mask: what the head
                         would show had it learned nothing;
        "departure"      the distance from that uniform attention (`departure_torch`).
    """
    n = weights[0].shape[-1]
    keep = None if lengths is None else \
        torch.arange(n, device=weights[0].device)[None] < lengths[:, None] + 1
    stats = {"scale": [], "uniform_scale": [], "departure": []}
    for w, m in zip(weights, masks):
        flat = uniform_weights_torch(m.expand(w.shape), w.dtype)
        stats["scale"].append(measured_scale_torch(w, keep).cpu().numpy())
        stats["uniform_scale"].append(measured_scale_torch(flat, keep).cpu().numpy())
        stats["departure"].append(departure_torch(w, m, keep).cpu().numpy())
    return {k: np.stack(v) for k, v in stats.items()}


@torch.no_grad()
def pretrained_head_scales(encoder, tokenizer, texts: list[str], batch_size: int = 64
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The scale of every head of a pretrained BERT-style encoder (`encoder.MiniLMEncoder`), per
    sentence, with the attention sinks [CLS] and [SEP] taken out.

    BERT heads park much of their weight on [CLS] and [SEP] (an "attention sink": a no-op
    target), which sit at both ends and would make every head look wide. So the first and the
    last real token are removed as keys and as queries, and each query's weights are
    renormalised over the words that are left (`drop_keys_torch`).
    Returns (S, L, H) measured scales and (S, L, H) the scales of uniform attention over the
    same words (the reference: a head that attends evenly to the whole sentence).
    """
    from .encoder import encode_batch

    device = next(encoder.parameters()).device
    measured, uniform = [], []
    for start in range(0, len(texts), batch_size):
        ids, mask = encode_batch(tokenizer, texts[start:start + batch_size], device)
        _, weights = encoder.run(ids, mask, need_weights=True)  # L × (B, H, N, N)
        n = ids.shape[1]
        pos = torch.arange(n, device=device)[None]
        words = mask & (pos > 0) & (pos < mask.sum(1, keepdim=True) - 1)  # no [CLS], no [SEP]
        flat = uniform_weights_torch(words[:, None, None, :].expand(-1, 1, n, n))
        for b in range(ids.shape[0]):
            keep = words[b:b + 1]
            measured.append([measured_scale_torch(drop_keys_torch(w[b:b + 1], keep), keep)
                             .cpu().numpy() for w in weights])
            uniform.append([measured_scale_torch(flat[b:b + 1], keep).cpu().numpy()
                            .repeat(weights[0].shape[1])] * len(weights))
    return np.array(measured), np.array(uniform)
