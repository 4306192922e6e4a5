"""Small models for the lessons' training demos, built on the library's mechanisms."""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadAttention


class RecallAttention(nn.Module):
    """Associative recall with one cross-attention layer.

    Each pair (key, value) is one token: E_key[key] + E_val[value]. Each query is E_key[query].
    The queries attend over the pair tokens; the attended vector is read out as value logits.

        queries (B, Q), keys (B, P), values (B, P) -> logits (B, Q, n_values)
    """

    def __init__(self, n_keys: int, n_values: int, d_model: int = 64, num_heads: int = 1):
        super().__init__()
        self.key_embedding = nn.Embedding(n_keys, d_model)
        self.value_embedding = nn.Embedding(n_values, d_model)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, n_values))

    def forward(self, queries, keys, values, need_weights: bool = False):
        pairs = self.key_embedding(keys) + self.value_embedding(values)  # (B, P, D)
        asked = self.key_embedding(queries)  # (B, Q, D)
        found, weights = self.attention(asked, pairs, pairs, need_weights=need_weights)
        logits = self.readout(found)  # (B, Q, n_values)
        return (logits, weights) if need_weights else logits


class RecallMeanPool(nn.Module):
    """The same task without attention: every query sees the *mean* of the pair tokens.

    Averaging keeps which keys and which values occur but loses which value sat next to which
    key, so no amount of training can recover the binding — the point of the comparison.
    An MLP of about the attention model's size reads [query; mean].
    """

    def __init__(self, n_keys: int, n_values: int, d_model: int = 64):
        super().__init__()
        self.key_embedding = nn.Embedding(n_keys, d_model)
        self.value_embedding = nn.Embedding(n_values, d_model)
        self.mlp = nn.Sequential(nn.Linear(2 * d_model, 2 * d_model), nn.ReLU(),
                                 nn.Linear(2 * d_model, d_model), nn.LayerNorm(d_model),
                                 nn.Linear(d_model, n_values))

    def forward(self, queries, keys, values):
        pairs = self.key_embedding(keys) + self.value_embedding(values)  # (B, P, D)
        summary = pairs.mean(dim=1, keepdim=True)  # (B, 1, D): order and binding are gone
        asked = self.key_embedding(queries)  # (B, Q, D)
        return self.mlp(torch.cat([asked, summary.expand_as(asked)], dim=-1))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ==== lesson 02: sparse patterns
import numpy as np  # noqa: E402  (imports of this section, kept here for clean merges)

from .sparse_kernels import block_sparse_attention_torch, window_attention_torch  # noqa: E402
from .tools.utils import fail  # noqa: E402


def window_attend(w: int, dilation: int = 1, causal: bool = False, global_idx=None,
                  block: int | None = None):
    """A kernel for `MultiHeadAttention(..., attend=)`: (q, k, v, mask) -> sliding-window
    attention (`sparse_kernels.window_attention_torch`). The pattern is the mask, so the
    layer's `mask` argument must be None."""
    def attend(q, k, v, mask=None):
        _no_mask(mask, "window_attend")
        return window_attention_torch(q, k, v, w, dilation=dilation, causal=causal,
                                      global_idx=global_idx, block=block)
    attend.__name__ = f"window(w={w}, dilation={dilation}, global={global_idx})"
    return attend


def block_sparse_attend(layout, block: int, causal: bool = False):
    """A kernel for `MultiHeadAttention(..., attend=)`: (q, k, v, mask) -> block-sparse
    attention on `layout` (`sparse_kernels.block_sparse_attention_torch`); mask must be None."""
    layout = np.asarray(layout)

    def attend(q, k, v, mask=None):
        _no_mask(mask, "block_sparse_attend")
        return block_sparse_attention_torch(q, k, v, layout, block, causal)
    attend.__name__ = f"block_sparse({int(layout.sum())} blocks of {block})"
    return attend


def _no_mask(mask, name):
    if mask is not None:
        fail(f"{name}: the sparse pattern is the mask", "mask=None", f"a mask of type {type(mask)}")


class SparseClassifier(nn.Module):
    """A small Transformer encoder on sparse attention that classifies a sequence from token 0.

    tokens (B, N) -> token + learned position embeddings -> `layers` pre-norm blocks
    [x + attn(LN x); x + MLP(LN x)] -> LN -> linear on position 0 -> logits (B, n_classes).
    attn = `MultiHeadAttention(d_model, num_heads, attend=attend)`, e.g.
    attend = `window_attend(w=8, global_idx=[0])`. Reading position 0 is the point: what
    token 0 can know after L layers is exactly what the pattern lets flow to it in L hops.
    """

    def __init__(self, vocab: int, max_len: int, d_model: int, num_heads: int, layers: int,
                 attend, n_classes: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, num_heads, attend=attend)
                                  for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(),
                                               nn.Linear(2 * d_model, d_model))
                                 for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * layers + 1))
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[: tokens.shape[1]]  # (B, N, D)
        for layer, (attn, mlp) in enumerate(zip(self.attn, self.mlp)):
            x = x + attn(self.norms[2 * layer](x))[0]
            x = x + mlp(self.norms[2 * layer + 1](x))
        return self.head(self.norms[-1](x[:, 0]))  # (B, n_classes)
