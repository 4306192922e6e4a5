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

from .attention import MultiHeadAttention, attention_np, attention_torch, check_attention_inputs
from .tools.utils import as_numpy, fail, shape_str


# ============================================================================ input checks
def check_windows(windows, num_heads: int | None = None) -> list[int]:
    """One integer ω >= 0 per head; with num_heads, exactly that many."""
    ws = list(as_numpy(windows).reshape(-1)) if not isinstance(windows, (list, tuple)) \
        else list(windows)
    if not ws:
        fail("no scales given", "one window ω >= 0 per head", repr(windows))
    for w in ws:
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 0:
            fail("a window ω must be an integer >= 0", "ω in {0, 1, 2, ...}", repr(windows))
    if num_heads is not None and len(ws) != num_heads:
        fail("one window per head", f"{num_heads} windows", f"{len(ws)}: {list(map(int, ws))}")
    return [int(w) for w in ws]


def scale_candidates(n: int) -> list[int]:
    """The paper's candidate scales for sequences of length n: ω ∈ {3, N/16, N/8, N/4, N/2}."""
    if n < 2:
        fail("sequence length for the scale candidates", "n >= 2", repr(n))
    return [3] + [max(1, n // f) for f in (16, 8, 4, 2)]


# ============================================================================ NumPy reference
def scale_mask_np(n: int, windows) -> np.ndarray:
    """(H, N, N) bool: head h lets query i see key j iff |i − j| <= windows[h]."""
    ws = check_windows(windows)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        fail("sequence length n", "an integer >= 1", repr(n))
    # BEGIN EXERCISE 3.1 implement: the per-head window mask |i - j| <= ω_h, shape (H, N, N) (~10 min)
    i = np.arange(n)[:, None]  # (N, 1) queries
    j = np.arange(n)[None, :]  # (1, N) keys
    mask = np.abs(i - j)[None] <= np.array(ws)[:, None, None]  # (H, N, N)
    # END EXERCISE
    return mask


def _combine(scale_mask, mask):
    """The head windows (H, N, N) AND a user mask (padding, ...) broadcastable to (B, H, N, N)."""
    return scale_mask if mask is None else scale_mask & mask


def multiscale_attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, windows,
                            mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Multi-scale multi-head attention: head h attends within |i − j| <= windows[h].

    Args:
        q, k, v: (B, H, N, d) — self-attention, so one length N.
        windows: H integers >= 0.
        mask: optional bool broadcastable to (B, H, N, N), True = may attend (e.g. padding).
    Returns:
        output (B, H, N, d) and weights (B, H, N, N).
    """
    _check_inputs(q, k, v, windows, mask)
    return attention_np(q, k, v, _combine(scale_mask_np(q.shape[-2], windows), mask))


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
        (H,) the mean attention distance of each head.
    """
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    n = weights.shape[-1]
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])  # (N, N): |i - j|
    per_query = (weights * distance).sum(-1)  # (B, H, N)
    if query_mask is None:
        return per_query.mean(axis=(0, 2))
    keep = np.asarray(query_mask, dtype=np.float64)[:, None, :]  # (B, 1, N)
    return (per_query * keep).sum(axis=(0, 2)) / np.maximum(keep.sum(axis=(0, 2)), 1)


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
    if not np.isfinite(alpha):
        fail("alpha must be a finite number", "a float such as 0.5", repr(alpha))
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
    if counts.ndim != 2 or counts.shape[1] != len(scales):
        fail("counts and scales must match", f"(L, {len(scales)}) counts",
             shape_str(counts.shape))
    return [[int(w) for w, c in zip(scales, row) for _ in range(int(c))] for row in counts]


# ============================================================================ PyTorch
def scale_mask_torch(n: int, windows, device=None) -> torch.Tensor:
    """Torch twin of `scale_mask_np`: (H, N, N) bool on `device`."""
    ws = check_windows(windows)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        fail("sequence length n", "an integer >= 1", repr(n))
    # BEGIN EXERCISE 3.1 implement: the per-head window mask |i - j| <= ω_h, shape (H, N, N) (~10 min)
    i = torch.arange(n, device=device)[:, None]  # (N, 1) queries
    j = torch.arange(n, device=device)[None, :]  # (1, N) keys
    mask = (i - j).abs()[None] <= torch.tensor(ws, device=device)[:, None, None]  # (H, N, N)
    # END EXERCISE
    return mask


def multiscale_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windows,
                               mask: torch.Tensor | None = None
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of `multiscale_attention_np`: output (B, H, N, d), weights (B, H, N, N)."""
    _check_inputs(q, k, v, windows, mask)
    return attention_torch(q, k, v, _combine(scale_mask_torch(q.shape[-2], windows, q.device),
                                             mask))


def measured_scale_torch(weights: torch.Tensor,
                         query_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Torch twin of `measured_scale_np`: (H,) mean attention distance per head."""
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    pos = torch.arange(weights.shape[-1], device=weights.device)
    distance = (pos[:, None] - pos[None, :]).abs().to(weights.dtype)  # (N, N)
    per_query = (weights * distance).sum(-1)  # (B, H, N)
    if query_mask is None:
        return per_query.mean(dim=(0, 2))
    keep = query_mask.to(weights.dtype)[:, None, :]  # (B, 1, N)
    return (per_query * keep).sum(dim=(0, 2)) / keep.sum(dim=(0, 2)).clamp(min=1)


class MultiScaleKernel:
    """The `attend(q, k, v, mask) -> out` kernel of a multi-scale layer, for
    `MultiHeadAttention(d_model, H, attend=MultiScaleKernel(windows))`.

    fast=True runs `multiscale_fast.multiscale_attention_fast_torch` (heads grouped by scale:
    window kernel for small ω, band kernel for large); fast=False the reference
    `multiscale_attention_torch`.
    With `record = True` it runs the reference and keeps the weights in `last_weights`
    (B, H, N, N), for the scale analysis.
    """

    def __init__(self, windows, fast: bool = True):
        self.windows = check_windows(windows)
        self.fast, self.record, self.last_weights = fast, False, None
        self.__name__ = f"multiscale(ω={self.windows})"

    def __call__(self, q, k, v, mask=None):
        if self.record:
            out, self.last_weights = multiscale_attention_torch(q, k, v, self.windows, mask)
            return out
        if self.fast:
            from .multiscale_fast import multiscale_attention_fast_torch
            return multiscale_attention_fast_torch(q, k, v, self.windows, mask)
        return multiscale_attention_torch(q, k, v, self.windows, mask)[0]


def masked_max_torch(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Torch-only: max over the tokens of x (B, N, D) where keep (B, N) is True -> (B, D);
    an example with no token gives zeros."""
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
    embedding: the windows are the only thing that knows order), and classify
        MLP([x_node ; max over the real tokens of x]),  MLP = Linear-ReLU-Linear.
    The node is an ordinary position under the windows (ω >= N sees everything).
    `windows` lists each layer's H windows, e.g. `layer_windows(allocate_scales_np(...), ω)`.
    max_len: None (the paper's classifier: no positional embedding), or the longest N for a
    learned positional embedding added to the node and the tokens — for tasks where a head must
    know *which* tokens it sees, not only that they are near (lesson 03's effective-scale task).
    max_pool: False reads out from the node alone (`NodeReadout`).
    """

    def __init__(self, d_in: int, d_model: int, windows: list[list[int]], n_out: int,
                 embedding: nn.Module | None = None, fast: bool = True,
                 max_len: int | None = None, max_pool: bool = True):
        super().__init__()
        if not windows:
            fail("MultiScaleTransformer needs at least one layer", "a list of per-layer windows",
                 repr(windows))
        heads = len(windows[0])
        self.embedding = embedding
        self.input = nn.Linear(d_in, d_model)
        self.node = nn.Parameter(torch.randn(d_model) * 0.02)
        self.max_len = max_len
        self.position = None if max_len is None else nn.Parameter(
            torch.randn(max_len + 1, d_model) * 0.02)  # as the Transformer baseline's
        self.kernels = [MultiScaleKernel(check_windows(ws, heads), fast) for ws in windows]
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, heads, attend=kern)
                                  for kern in self.kernels)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in windows)
        self.classifier = NodeReadout(d_model, n_out, max_pool)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        x = self.input(self.embedding(inputs) if self.embedding is not None else inputs)
        bsz, n, _ = x.shape
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

    @torch.no_grad()
    def measured_scales(self, inputs, lengths=None) -> np.ndarray:
        """(L, H) measured scale of every head on this batch (real queries only)."""
        for kern in self.kernels:
            kern.record = True
        try:
            self.forward(inputs, lengths)
        finally:
            for kern in self.kernels:
                kern.record = False
        n = self.kernels[0].last_weights.shape[-1]
        keep = None if lengths is None else \
            torch.arange(n, device=self.node.device)[None] < lengths[:, None] + 1
        return np.stack([measured_scale_torch(kern.last_weights, keep).cpu().numpy()
                         for kern in self.kernels])
