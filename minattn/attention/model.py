"""`MultiHeadAttention`, the trainable twin of `multi_head_attention_np`, and lesson 01's demo
models built on it (associative recall, reading by position).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..checks import (
    check_array,
    check_ids,
    check_same_device,
    check_size,
    describe,
    fail,
    shape_str,
)
from .checks import check_mha_inputs, visible_mha_inputs
from .fast import attention_fast_torch
from .reference import attention_torch, merge_heads_torch, sinusoid_torch, split_heads_torch


class MultiHeadAttention(nn.Module):
    """Multi-head attention (batch first), the trainable twin of `multi_head_attention_np`.

    forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D), mask=None, need_weights=False,
            key_padding_mask=None) -> output (B, Lq, D), weights (B, H, Lq, Lk) or None

    mask: bool (Lq, Lk) or 4 axes broadcastable to (B, H, Lq, Lk); key_padding_mask: bool
    (B, Lk), True on real keys (a 2-axis mask that could be either is refused: see
    `check_mha_inputs`).

    With need_weights=False `F.scaled_dot_product_attention` runs (fast, and O(N) memory when
    it picks a fused kernel); with need_weights=True the explicit path runs and returns
    per-head weights.
    `torch.nn.MultiheadAttention` averages weights over heads by default: use
    `weights.mean(1)` to compare. Its masks mean the opposite (True = blocked) — ours follow
    SDPA (True = may attend).

    The extension seam: `attend(q, k, v, mask) -> out`, all (B, H, ·, dh), replaces the
    attention kernel (sparse windows in lesson 02, per-head scales in lesson 03, ...) while the
    projections stay the same. A custom kernel returns no weights.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, attend=None):
        super().__init__()
        d_model = check_size("d_model", d_model, 1)
        num_heads = check_size("num_heads", num_heads, 1)
        if d_model % num_heads != 0:
            fail("d_model must split evenly into heads", "d_model divisible by num_heads",
                 f"d_model={d_model}, num_heads={num_heads}")
        self.d_model, self.num_heads = d_model, num_heads
        self.attend = attend  # None: scaled dot-product attention (fused or explicit)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None,
                value: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                need_weights: bool = False, key_padding_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        key = query if key is None else key  # self-attention by default
        value = key if value is None else value
        mask = check_mha_inputs(query, key, value, self.num_heads, self.d_model, mask,
                                key_padding_mask, dtype=self.q_proj.weight.dtype)
        check_same_device(query=query, weights=self.q_proj.weight)
        query, key, value = visible_mha_inputs(query, key, value, mask)
        q = split_heads_torch(self.q_proj(query), self.num_heads)  # (B, H, Lq, dh)
        k = split_heads_torch(self.k_proj(key), self.num_heads)  # (B, H, Lk, dh)
        v = split_heads_torch(self.v_proj(value), self.num_heads)  # (B, H, Lk, dh)
        if self.attend is not None:
            if need_weights:
                fail("need_weights with a custom attend kernel", "need_weights=False",
                     f"need_weights=True with attend={self.attend}")
            heads, weights = self.attend(q, k, v, mask), None
        elif need_weights:
            heads, weights = attention_torch(q, k, v, mask)
        else:
            heads, weights = attention_fast_torch(q, k, v, mask), None
        return self.out_proj(merge_heads_torch(heads)), weights

    def extra_repr(self) -> str:
        kernel = "sdpa" if self.attend is None else getattr(self.attend, "__name__", self.attend)
        return f"d_model={self.d_model}, num_heads={self.num_heads}, attend={kernel}"

    def numpy_params(self) -> dict[str, np.ndarray]:
        """The weights as float64 NumPy arrays, keyed as `multi_head_attention_np` expects."""
        params = {}
        for short, layer in (("q", self.q_proj), ("k", self.k_proj), ("v", self.v_proj),
                             ("o", self.out_proj)):
            params[f"w_{short}"] = layer.weight.detach().cpu().double().numpy()
            bias = layer.bias if layer.bias is not None else torch.zeros(self.d_model)
            params[f"b_{short}"] = bias.detach().cpu().double().numpy()
        return params

    @torch.no_grad()
    def load_from_torch(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a `torch.nn.MultiheadAttention` (same d_model and heads)."""
        if not isinstance(mha, nn.MultiheadAttention):
            fail("mha", "a torch.nn.MultiheadAttention", describe(mha))
        if mha.embed_dim != self.d_model or mha.num_heads != self.num_heads:
            fail("nn.MultiheadAttention does not match", f"d_model={self.d_model}, "
                 f"heads={self.num_heads}", f"embed_dim={mha.embed_dim}, heads={mha.num_heads}")
        w_q, w_k, w_v = mha.in_proj_weight.chunk(3)  # stacked [W_q; W_k; W_v]
        for layer, w in ((self.q_proj, w_q), (self.k_proj, w_k), (self.v_proj, w_v)):
            layer.weight.copy_(w)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        ours_bias, theirs_bias = self.q_proj.bias is not None, mha.in_proj_bias is not None
        if ours_bias != theirs_bias:
            fail("bias settings differ", f"nn.MultiheadAttention(bias={ours_bias})",
                 f"nn.MultiheadAttention(bias={theirs_bias})")
        if ours_bias:
            for layer, b in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_bias.chunk(3)):
                layer.bias.copy_(b)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self


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
        check_recall_inputs(queries, keys, values, self.key_embedding, self.value_embedding)
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
        check_recall_inputs(queries, keys, values, self.key_embedding, self.value_embedding)
        pairs = self.key_embedding(keys) + self.value_embedding(values)  # (B, P, D)
        summary = pairs.mean(dim=1, keepdim=True)  # (B, 1, D): order and binding are gone
        asked = self.key_embedding(queries)  # (B, Q, D)
        return self.mlp(torch.cat([asked, summary.expand_as(asked)], dim=-1))


class PositionReader(nn.Module):
    """One self-attention layer that has to read by position (lesson 01's reversal task).

        tokens (B, N) -> logits (B, N, n_symbols)

    x = E[token] + P, with P chosen by `positions`: "none" (attention sees a bag of tokens),
    "sinusoid" (Vaswani et al.'s fixed table, `sinusoid_torch`) or "learned" (a trained
    (max_len, D) table). One single-head self-attention layer over x; each position's attended
    vector is read out as symbol logits.
    """

    POSITIONS = ("none", "sinusoid", "learned")

    def __init__(self, n_symbols: int, max_len: int, positions: str, d_model: int = 64):
        super().__init__()
        if positions not in self.POSITIONS:
            fail("unknown positions", f"one of {self.POSITIONS}", repr(positions))
        self.positions = positions
        self.embedding = nn.Embedding(n_symbols, d_model)
        self.table = (nn.Parameter(torch.randn(max_len, d_model) * 0.02)
                      if positions == "learned" else None)
        self.attention = MultiHeadAttention(d_model, num_heads=1)
        self.readout = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, n_symbols))

    def forward(self, tokens: torch.Tensor, need_weights: bool = False):
        x = self.embedding(tokens)  # (B, N, D)
        n, d = x.shape[1], x.shape[2]
        if self.positions == "sinusoid":
            x = x + sinusoid_torch(n, d, device=x.device, dtype=x.dtype)  # row p codes position p
        elif self.positions == "learned":
            x = x + self.table[:n]
        found, weights = self.attention(x, need_weights=need_weights)
        logits = self.readout(found)  # (B, N, n_symbols)
        return (logits, weights) if need_weights else logits


def check_recall_inputs(queries, keys, values, key_embedding, value_embedding) -> None:
    """queries (B, Q), keys and values (B, P) token ids inside their vocabularies."""
    for name, ids, table in (("queries", queries, key_embedding), ("keys", keys, key_embedding),
                             ("values", values, value_embedding)):
        check_array(name, ids, "int", ndim=2, hint="(B, ·) token ids", like=torch.Tensor)
        check_ids(name, ids, table.num_embeddings)
    if keys.shape != values.shape or queries.shape[0] != keys.shape[0]:
        fail("values", f"the shape of keys {shape_str(keys.shape)} (and queries of batch "
             f"{keys.shape[0]})", f"values {shape_str(values.shape)}, queries "
             f"{shape_str(queries.shape)}")
    check_same_device(queries=queries, keys=keys, values=values, weights=key_embedding.weight)
