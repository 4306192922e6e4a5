"""Lesson 02's layers and model: sparse kernels behind `MultiHeadAttention(..., attend=)`."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..attention import MultiHeadAttention, check_tokens
from ..checks import as_numpy, check_array, check_size, fail
from .kernels import block_sparse_attention_torch, window_attention_torch


def window_attend(w: int, dilation: int = 1, causal: bool = False, global_idx=None,
                  block: int | None = None):
    """A kernel for `MultiHeadAttention(..., attend=)`: (q, k, v, mask) -> sliding-window
    attention (`kernels.window_attention_torch`). The pattern is the mask, so the
    layer's `mask` argument must be None."""
    w, dilation = check_size("w", w), check_size("dilation", dilation, 1)
    if block is not None:
        block = check_size("block", block, 1)
    if global_idx is not None:
        check_array("global_idx", np.asarray(global_idx), "int" if len(np.asarray(global_idx))
                    else None, ndim=1, hint="positions")

    def attend(q, k, v, mask=None):
        _no_mask(mask, "window_attend")
        return window_attention_torch(q, k, v, w, dilation=dilation, causal=causal,
                                      global_idx=global_idx, block=block)
    attend.__name__ = f"window(w={w}, dilation={dilation}, global={global_idx})"
    return attend


def block_sparse_attend(layout, block: int, causal: bool = False):
    """A kernel for `MultiHeadAttention(..., attend=)`: (q, k, v, mask) -> block-sparse
    attention (`kernels.block_sparse_attention_torch`); mask must be None.

    layout: (nb, nb) bool, one layout for every head, or (H, nb, nb), one per head (BigBird
    draws its random blocks per head: `bigbird_layouts_np`); q, k, v are then (B, H, N, dh).
    """
    layout = as_numpy(layout)
    check_array("layout", layout, "bool", hint="(nb, nb) or (H, nb, nb)", like=np.ndarray)
    if layout.ndim not in (2, 3):
        fail("layout", "bool (nb, nb) or (H, nb, nb)", f"{layout.ndim} dimensions")
    block = check_size("block", block, 1)

    def attend(q, k, v, mask=None):
        _no_mask(mask, "block_sparse_attend")
        if layout.ndim == 2:
            return block_sparse_attention_torch(q, k, v, layout, block, causal)
        if q.ndim != 4 or q.shape[1] != layout.shape[0]:
            fail("block_sparse_attend: one layout per head", f"q of shape (B, "
                 f"{layout.shape[0]}, N, dh)", f"q of shape {tuple(q.shape)}")
        return torch.stack([block_sparse_attention_torch(q[:, h], k[:, h], v[:, h], layout[h],
                                                         block, causal)
                            for h in range(layout.shape[0])], dim=1)
    heads = "" if layout.ndim == 2 else f", per head of {layout.shape[0]}"
    attend.__name__ = f"block_sparse({int(layout.sum())} blocks of {block}{heads})"
    return attend


def _no_mask(mask, name):
    if mask is not None:
        fail(f"{name}: the sparse pattern is the mask", "mask=None", f"a mask of type {type(mask)}")


class SparseClassifier(nn.Module):
    """A small Transformer encoder on sparse attention that classifies a sequence from token 0.

    tokens (B, N) -> token + learned position embeddings -> `layers` pre-norm blocks
    [x + attn(LN x); x + MLP(LN x)] -> LN -> linear on position 0 -> logits (B, n_classes).
    attn = `MultiHeadAttention(d_model, num_heads, attend=attend)`, e.g.
    attend = `window_attend(w=8, global_idx=[0])`, the same kernel in every layer, or a list of
    `layers` kernels, one per layer (BigBird's random blocks differ from layer to layer).
    Reading position 0 is the point: what token 0 can know after L layers is exactly what the
    pattern lets flow to it in L hops.
    """

    def __init__(self, vocab: int, max_len: int, d_model: int, num_heads: int, layers: int,
                 attend, n_classes: int = 2):
        super().__init__()
        layers = check_size("layers", layers, 1)
        attends = list(attend) if isinstance(attend, (list, tuple)) else [attend] * layers
        if len(attends) != layers:
            fail("attend: one kernel per layer", f"{layers} kernels", f"{len(attends)}")
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, num_heads, attend=fn)
                                  for fn in attends)
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(),
                                               nn.Linear(2 * d_model, d_model))
                                 for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * layers + 1))
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        check_tokens(tokens, self.embed, max_len=self.position.shape[0])
        x = self.embed(tokens) + self.position[: tokens.shape[1]]  # (B, N, D)
        for layer, (attn, mlp) in enumerate(zip(self.attn, self.mlp)):
            x = x + attn(self.norms[2 * layer](x))[0]
            x = x + mlp(self.norms[2 * layer + 1](x))
        return self.head(self.norms[-1](x[:, 0]))  # (B, n_classes)
