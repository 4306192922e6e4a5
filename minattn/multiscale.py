"""Multi-scale self-attention (lesson 03): one window per head, and the Multi-Scale Transformer.

Guo, Qiu, Liu, Xue and Zhang, "Multi-Scale Self-Attention for Text Classification" (AAAI 2020;
its slides: "Scale-Aware Self-Attention", "Multi-Scale Multi-Head Self-Attention",
"Multi-Scale Transformer"). Scale-aware self-attention lets head h of a layer see only the
tokens within its scale ω_h:

    head_h(X) = softmax(Q_h K_hᵀ / √d + M^(ω_h)) V_h,    M^(ω)_ij = 0 if |i − j| <= ω, else −∞

and multi-scale multi-head attention is lesson 01's multi-head attention with one such window
per head. ω is the course's one-sided half-width (2ω + 1 keys per query, fewer at the ends):
ω = 0 sees only its own token (a position-wise layer), ω >= N − 1 sees everything.

    windows  ω = (ω_1, ..., ω_H), integers >= 0
    q, k, v  (B, H, N, d)        mask (optional)  bool, broadcastable to (B, H, N, N)
    output   (B, H, N, d)        weights          (B, H, N, N)       (True = may attend)

The measured scale of a head is how far it looks: the attention-weighted distance, averaged
over the queries,  scale(h) = (1/N) Σ_i Σ_j a_ij |i − j|  (0 for a head on its own token,
about N/3 for a head spread evenly over N tokens).

Which scales go where (`allocate_scales_np`): with N' heads per layer, the K candidate scales
ω_1 < ... < ω_K (the paper's {3, N/16, N/8, N/4, N/2}, N the text's length: `scale_candidates`)
and a control factor α, layer l gets n^l_k heads of scale ω_k; α > 0 puts small scales in the
lower layers and large ones higher up, α < 0 the reverse, α = 0 spreads them evenly.

The Multi-Scale Transformer (`MultiScaleTransformer`) stacks such layers as
    x <- LayerNorm(x + GELU(MultiScaleAttention(x)))
with no position-wise FFN and no positional embedding, prepends a learned classification node
at position 0 and classifies MLP([x_node ; max over the tokens]).

Speed lives in minattn/fast/multiscale.py (heads grouped by scale onto the window and band
kernels; one-call routes on a GPU), chosen by the caller:
`MultiScaleTransformer(..., kernel=multiscale_attention_fast_torch)`. The input checks are in
minattn/checks.py, section "multiscale": each body below starts with its math.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import checks as c
from .attention import MultiHeadAttention, attention_np, attention_torch
from .contract import as_numpy, checked, hide


# ============================================================================ NumPy reference
@checked(n="int >= 1", n_global="int in 0 .. n", rules=[c.windows_per_head])
def scale_mask_np(n: int, windows, n_global: int = 0) -> np.ndarray:
    """(H, N, N) bool: head h lets query i see key j iff |i − j| <= windows[h].

    n_global: the first n_global positions are global (a relay node, as in Star-Transformer):
    they see every position and every position sees them, whatever the window.
    """
    # BEGIN EXERCISE 3.1 implement: the per-head window mask |i - j| <= ω_h, shape (H, N, N) (~10 min)
    i = np.arange(n)[:, None]  # (N, 1) queries
    j = np.arange(n)[None, :]  # (1, N) keys
    mask = np.abs(i - j)[None] <= np.array(windows)[:, None, None]  # (H, N, N)
    # END EXERCISE
    mask[:, :n_global, :] = True  # a global position sees everything ...
    mask[:, :, :n_global] = True  # ... and is seen by everything
    return mask


@checked(q="float* (B, H, N, d)", k="float* (B, H, N, d)", v="float* (B, H, N, dv)",
         mask="bool? ~(B, H, N, N)", n_global="int in 0 .. N", rules=[c.windows_per_head])
def multiscale_attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, windows,
                            mask: np.ndarray | None = None,
                            n_global: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Multi-scale multi-head attention: head h attends within |i − j| <= windows[h].

    q, k, v (B, H, N, d); windows: H integers >= 0; mask: optional bool broadcastable to
    (B, H, N, N), True = may attend (padding, ...); n_global: the first n_global positions see
    and are seen by all (`scale_mask_np`). Returns output (B, H, N, d), weights (B, H, N, N).
    """
    allowed = scale_mask_np(q.shape[-2], windows, n_global)  # (H, N, N): each head's window
    if mask is not None:
        allowed = allowed & mask  # (B, H, N, N)
    return attention_np(q, k, v, allowed)  # lesson 01's masked attention


@checked(weights="float* (B, H, N, N)", query_mask="bool? (B, N)",
         rules=[c.weights_of_real_queries])
def measured_scale_np(weights: np.ndarray, query_mask: np.ndarray | None = None) -> np.ndarray:
    """Measured scale of each head: Σ_j a_ij |i − j|, averaged over queries (and the batch).

    weights (B, H, N, N); query_mask optional (B, N) bool, True on the queries to average over
    (real tokens). Returns (H,), 0 for a batch without a real query. Padded queries' rows may
    hold anything: they are selected away, never multiplied by 0.
    """
    n = weights.shape[-1]
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])  # (N, N): |i - j|
    if query_mask is None:
        return (weights * distance).sum(-1).mean(axis=(0, 2))
    keep = query_mask[:, None, :]  # (B, 1, N)
    per_query = np.where(keep, (hide(weights, keep[..., None]) * distance).sum(-1), 0.0)
    return per_query.sum(axis=(0, 2)) / np.maximum(keep.sum(axis=(0, 2)), 1)


@checked(n="int >= 2")
def scale_candidates(n: int) -> list[int]:
    """The paper's candidate scales for texts of length N, smallest first:
    ω ∈ {3, N/16, N/8, N/4, N/2} (each at least 1). For N >= 48 that is the paper's order; for
    shorter texts N/16 and N/8 fall below 3 (N = 32 gives [2, 3, 4, 8, 16])."""
    return sorted([3] + [max(1, n // f) for f in (16, 8, 4, 2)])


@checked(num_heads="int >= 1", num_scales="int >= 1", num_layers="int >= 1",
         alpha="number")
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


@checked(rules=[c.heads_counts])
def layer_windows(counts: np.ndarray, scales) -> list[list[int]]:
    """(L, K) head counts + K scales -> each layer's list of N' windows, smallest first."""
    return [[int(w) for w, c in zip(scales, row) for _ in range(int(c))] for row in counts]


# ============================================================================ PyTorch twins
@checked(n="int >= 1", n_global="int in 0 .. n", rules=[c.windows_per_head])
def scale_mask_torch(n: int, windows, device=None, n_global: int = 0) -> torch.Tensor:
    """Torch twin of `scale_mask_np`: (H, N, N) bool on `device`."""
    # BEGIN EXERCISE 3.1 implement: the per-head window mask |i - j| <= ω_h, shape (H, N, N) (~10 min)
    i = torch.arange(n, device=device)[:, None]  # (N, 1) queries
    j = torch.arange(n, device=device)[None, :]  # (1, N) keys
    mask = (i - j).abs()[None] <= torch.tensor(windows, device=device)[:, None, None]  # (H, N, N)
    # END EXERCISE
    mask[:, :n_global, :] = True  # a global position sees everything ...
    mask[:, :, :n_global] = True  # ... and is seen by everything
    return mask


@checked(q="float* (B, H, N, d)", k="float* (B, H, N, d)", v="float* (B, H, N, dv)",
         mask="bool? ~(B, H, N, N)", n_global="int in 0 .. N", rules=[c.windows_per_head])
def multiscale_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windows,
                               mask: torch.Tensor | None = None, n_global: int = 0
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of `multiscale_attention_np`: output (B, H, N, d), weights (B, H, N, N)."""
    allowed = scale_mask_torch(q.shape[-2], windows, q.device, n_global)  # (H, N, N)
    if mask is not None:
        allowed = allowed & mask  # (B, H, N, N)
    return attention_torch(q, k, v, allowed)


@checked(weights="float* (B, H, N, N)", query_mask="bool? (B, N)",
         rules=[c.weights_of_real_queries])
def measured_scale_torch(weights: torch.Tensor,
                         query_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Torch twin of `measured_scale_np`: (H,) mean attention distance per head."""
    n = weights.shape[-1]
    pos = torch.arange(n, device=weights.device)
    distance = (pos[:, None] - pos[None, :]).abs().to(weights.dtype)  # (N, N): |i - j|
    if query_mask is None:
        return (weights * distance).sum(-1).mean(dim=(0, 2))
    keep = query_mask[:, None, :]  # (B, 1, N)
    per_query = torch.where(keep, (hide(weights, keep[..., None]) * distance).sum(-1), 0.0)
    return per_query.sum(dim=(0, 2)) / keep.sum(dim=(0, 2)).clamp(min=1)


@checked(x="float (B, N, D) where keep", keep="bool (B, N)")
def masked_max_torch(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Torch-only (the classifier's max-pool): max over the tokens of x (B, N, D) where keep
    (B, N) is True -> (B, D); an example with no token gives zeros."""
    out = x.masked_fill(~keep[..., None], float("-inf")).amax(dim=1)
    return torch.where(torch.isfinite(out), out, torch.zeros_like(out))


# ============================================================================ the model
class ScaleAllocation:
    """Each layer's windows, recomputed from the length N of every batch.

    counts (L, 5): layer l gives counts[l, k] heads the k-th smallest of the five candidate
    scales `scale_candidates(N)` — ω ∈ {3, N/16, N/8, N/4, N/2} as the paper means them, N being
    the text's length, not a fixed maximum. Called with N it gives the L lists of windows
    (`layer_windows`); e.g. `ScaleAllocation(allocate_scales_np(5, 5, 3, 0.5))(21)`.
    """

    @checked(rules=[c.five_scale_counts])
    def __init__(self, counts):
        self.counts = as_numpy(counts).astype(np.int64)  # a list or a tensor too
        self.num_layers, self.num_heads = len(self.counts), int(self.counts.sum(1)[0])

    def __call__(self, n: int) -> list[list[int]]:
        return layer_windows(self.counts, scale_candidates(n))

    def __repr__(self) -> str:
        return f"ScaleAllocation({self.counts.tolist()})"


class MultiScaleKernel:
    """The `attend(q, k, v, mask) -> out` kernel of a multi-scale layer, for
    `MultiHeadAttention(d_model, H, attend=MultiScaleKernel(windows))`.

    kernel: the function that computes it, `(q, k, v, windows, mask, n_global=...) -> out`;
    None runs the reference `multiscale_attention_torch`, and the caller may name a faster
    one with the same numbers (`minattn.fast.multiscale.multiscale_attention_fast_torch`).
    n_global: how many leading positions are global (a relay node). `set_windows` changes the
    windows between batches (same H). With `record = True` it runs the reference and keeps
    the weights in `last_weights` (B, H, N, N) and what each query could see in `last_mask`.
    """

    @checked(n_global="int", kernel="callable?", rules=[c.windows_given])
    def __init__(self, windows, n_global: int = 0, kernel=None):
        self.windows = [int(w) for w in windows]  # a list of ints of its own
        self.n_global, self.kernel = n_global, kernel
        self.record, self.last_weights, self.last_mask = False, None, None

    @property
    def __name__(self) -> str:
        return f"multiscale(ω={self.windows}" + (f", global={self.n_global})" if self.n_global
                                                 else ")")

    @checked(rules=[c.windows_per_head])
    def set_windows(self, windows) -> None:
        self.windows = [int(w) for w in windows]

    def __call__(self, q, k, v, mask=None):
        if self.kernel is not None and not self.record:
            return self.kernel(q, k, v, self.windows, mask, n_global=self.n_global)
        out, weights = multiscale_attention_torch(q, k, v, self.windows, mask, self.n_global)
        if self.record:
            allowed = scale_mask_torch(q.shape[-2], self.windows, q.device, self.n_global)
            self.last_weights = weights
            self.last_mask = allowed if mask is None else allowed & mask
        return out


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
        `ScaleAllocation`, which recomputes them from every batch's length N.
    kernel: what computes each layer (`MultiScaleKernel`): None, the reference; the caller
        names a fast one, e.g. `minattn.fast.multiscale.multiscale_attention_fast_torch`.
    The node: by default an ordinary position under the windows — a head of window ω lets it
        see the first ω tokens, so in a layer of small windows it hears only the start of the
        sentence. global_node=True makes it a relay node (as in Star-Transformer, by the same
        group): in every head it sees every token and every token sees it.
    max_len: None (the paper's classifier: no positional embedding), or the longest N for a
        learned positional embedding added to the node and the tokens.
    max_pool: False reads out from the node alone (`NodeReadout`).
    """

    @checked(rules=[c.layers_of_windows])
    def __init__(self, d_in: int, d_model: int, windows, n_out: int,
                 embedding: nn.Module | None = None, kernel=None,
                 max_len: int | None = None, max_pool: bool = True, global_node: bool = False):
        super().__init__()
        self.allocation = windows if isinstance(windows, ScaleAllocation) else None
        if self.allocation is not None:
            windows = self.allocation(2 * 16)  # the layout (L lists of H); the values per batch
        self.embedding = embedding
        self.input = nn.Linear(d_in, d_model)
        self.node = nn.Parameter(torch.randn(d_model) * 0.02)
        self.max_len, self.global_node = max_len, global_node
        self.position = None if max_len is None else nn.Parameter(
            torch.randn(max_len + 1, d_model) * 0.02)
        self.kernels = [MultiScaleKernel(ws, int(global_node), kernel) for ws in windows]
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, len(windows[0]), attend=kern)
                                  for kern in self.kernels)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in windows)
        self.classifier = NodeReadout(d_model, n_out, max_pool)

    @checked(rules=[c.model_inputs])
    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        x = self.input(self.embedding(inputs) if self.embedding is not None else inputs)
        bsz, n, _ = x.shape
        if self.allocation is not None:  # ω from this batch's length N (the node not counted)
            for kern, ws in zip(self.kernels, self.allocation(max(n, 2))):
                kern.set_windows(ws)
        x = torch.cat([self.node.expand(bsz, 1, -1), x], dim=1)  # (B, 1 + N, D)
        if self.position is not None:
            x = x + self.position[: n + 1]
        lengths = torch.full((bsz,), n, device=x.device) if lengths is None else lengths
        keep = torch.arange(n + 1, device=x.device)[None] < lengths[:, None] + 1  # (B, 1 + N)
        # (B, 1, 1, 1 + N): padded keys are never seen; no mask when nothing is padded, so that
        # a kernel may use one cached band mask for the whole batch
        mask = None if bool(keep.all()) else keep[:, None, None, :]
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
        """(L, H) measured scale of every head on this batch, over the real queries (the node
        and the first `lengths` tokens)."""
        weights, _ = self.attention_maps(inputs, lengths)
        n = weights[0].shape[-1]
        keep = None if lengths is None else \
            torch.arange(n, device=weights[0].device)[None] < lengths[:, None] + 1
        return np.stack([measured_scale_torch(w, keep).cpu().numpy() for w in weights])
