"""The Multi-Scale Transformer of Guo et al. (AAAI 2020): its attention kernel, its readout and
the classifier; the baselines it is compared with are in `baselines.py`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention
from ..checks import (
    check_array,
    check_finite,
    check_ids,
    check_same_device,
    describe,
    fail,
    shape_str,
)
from ..fast.attention import attention_fast_torch
from ..sparse import check_windows
from .analysis import head_statistics_torch
from .fast import multiscale_attention_fast_torch
from .reference import (
    ScaleAllocation,
    check_multiscale_inputs,
    combine_masks,
    multiscale_attention_torch,
    scale_mask_torch,
)


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


class MultiScaleKernel:
    """The `attend(q, k, v, mask) -> out` kernel of a multi-scale layer, for
    `MultiHeadAttention(d_model, H, attend=MultiScaleKernel(windows))`.

    fast=True runs `fast.multiscale_attention_fast_torch` (heads grouped by scale:
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
            self.last_mask = combine_masks(scale_mask_torch(q.shape[-2], self.windows, q.device,
                                                       self.n_global), mask)
            return out
        if self.n_global:
            check_multiscale_inputs(q, k, v, self.windows, mask)
            allowed = scale_mask_torch(q.shape[-2], self.windows, q.device, self.n_global)
            return attention_fast_torch(q, k, v, mask=combine_masks(allowed, mask))
        if self.fast:
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
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, heads, attend=kernel)
                                  for kernel in self.kernels)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in windows)
        self.classifier = NodeReadout(d_model, n_out, max_pool)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        check_classifier_inputs(inputs, lengths, self.embedding, self.input.weight)
        x = self.input(self.embedding(inputs) if self.embedding is not None else inputs)
        bsz, n, _ = x.shape
        if self.allocation is not None:  # ω from this batch's length N (the node not counted)
            for kernel, ws in zip(self.kernels, self.allocation(max(n, 2))):
                kernel.set_windows(ws)
        x = torch.cat([self.node.expand(bsz, 1, -1), x], dim=1)  # (B, 1 + N, D)
        if self.position is not None:
            if n > self.max_len:
                fail("sequence longer than the positional embedding",
                     f"N <= max_len = {self.max_len}", f"N = {n}")
            x = x + self.position[: n + 1]
        lengths = torch.full((bsz,), n, device=x.device) if lengths is None else lengths
        keep = torch.arange(n + 1, device=x.device)[None] < lengths[:, None] + 1  # (B, 1 + N)
        # (B, 1, 1, 1 + N): padded keys are never seen; no mask when nothing is padded, so the
        # kernel takes its cached band mask instead of combining one per batch
        mask = None if bool(keep.all()) else keep[:, None, None, :]
        for attn, norm in zip(self.attn, self.norms):
            x = norm(x + F.gelu(attn(x, mask=mask)[0]))
        return self.classifier(x, keep)

    def windows(self) -> list[list[int]]:
        """Each layer's windows as the last batch used them."""
        return [list(kernel.windows) for kernel in self.kernels]

    @torch.no_grad()
    def attention_maps(self, inputs, lengths=None
                       ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every layer's weights (B, H, 1 + N, 1 + N) on this batch and what each query could
        see (bool, broadcastable to the weights); position 0 is the node."""
        for kernel in self.kernels:
            kernel.record = True
        try:
            self.forward(inputs, lengths)
        finally:
            for kernel in self.kernels:
                kernel.record = False
        return ([kernel.last_weights for kernel in self.kernels],
                [kernel.last_mask for kernel in self.kernels])

    @torch.no_grad()
    def measured_scales(self, inputs, lengths=None) -> np.ndarray:
        """(L, H) measured scale of every head on this batch (real queries only)."""
        return head_statistics_torch(*self.attention_maps(inputs, lengths), lengths)["scale"]

    @torch.no_grad()
    def head_statistics(self, inputs, lengths=None) -> dict[str, np.ndarray]:
        """`head_statistics_torch` of every head on this batch: (L, H) arrays."""
        return head_statistics_torch(*self.attention_maps(inputs, lengths), lengths)
