"""Small models for the lessons' training demos, built on the library's mechanisms."""

from __future__ import annotations

import math

import torch
from torch import nn

from .attention import MultiHeadAttention, causal_mask_torch, check_tokens
from .tools.utils import describe, fail
from .xl import sinusoid_torch


# ==== lesson 04: Transformer-XL — the vanilla baseline (absolute positions, no memory)


class VanillaBlock(nn.Module):
    """A pre-norm Transformer block (causal self-attention + ReLU FFN), `XLLayer`'s twin
    without memory or relative positions."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads, bias=False)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, mask):
        x = x + self.attention(self.norm1(x), mask=mask)[0]
        return x + self.ff(self.norm2(x))


class VanillaLM(nn.Module):
    """The baseline of lesson 04: `TransformerXL`'s size and layout, absolute sinusoidal
    positions, no memory — every segment is read on its own.

    forward(tokens (B, L), memories=None, mem_len=None) -> logits (B, L, V), None
    (the same call as `TransformerXL`, so one training loop serves both; memories are ignored).
    """

    def __init__(self, vocab_size: int, d_model: int = 128, num_heads: int = 4,
                 num_layers: int = 2, d_ff: int | None = None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)
        self.layers = nn.ModuleList(VanillaBlock(d_model, num_heads, d_ff or 4 * d_model)
                                    for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, tokens, memories=None, mem_len=None):
        check_tokens(tokens, self.embedding)
        L = tokens.shape[1]
        h = self.embedding(tokens) * math.sqrt(self.d_model)
        h = h + sinusoid_torch(L, self.d_model, device=h.device, dtype=h.dtype)  # positions 0..L−1
        mask = causal_mask_torch(L, L, device=tokens.device)[None, None]  # (1, 1, L, L)
        for layer in self.layers:
            h = layer(h, mask)
        return self.final_norm(h) @ self.embedding.weight.T + self.out_bias, None


# ==== lesson 07: task heads
class SentenceClassifier(nn.Module):
    """Token states -> one vector per sentence -> class logits.

    pool: "cls" (first token), "mean" (masked mean), "query" (`task_heads.AttentionPool`, one
    layer read by a learned query) or "attention" (`AttentionPool` with `num_layers`
    self-attention layers read by the first token's query, `init` "default" or "u09").
    d_in: the states' width; when it differs from d_model, a trainable linear map P
    (d_in -> d_model) narrows the states, for every pool alike: the heads apply it to every
    token first (a narrower head is cheaper), the baselines to the pooled vector (the same
    thing, since P(mean h) = mean(P h) and P(h_0) = (P h)_0, at a fraction of the cost).
    encoder: a trainable module (states, mask) -> states run first (e.g. `encoder.TopLayers`:
    fine-tuning; a "[CLS] A [SEP] B" pair read at "cls" is a cross-encoder). None: the states
    are frozen features.
    forward(states (B, L, d_in), mask (B, L) bool, need_weights=False) -> logits (B, n_classes)
    (and the read-out attention (B, H, L) when need_weights).
    """

    def __init__(self, pool: str, d_model: int, n_classes: int = 2, num_heads: int = 12,
                 num_layers: int = 1, init: str = "default", d_in: int | None = None,
                 encoder: nn.Module | None = None):
        super().__init__()
        from .task_heads import AttentionPool

        if pool not in ("cls", "mean", "query", "attention"):
            fail("unknown pool", "'cls', 'mean', 'query' or 'attention'", repr(pool))
        self.pool, self.encoder = pool, encoder
        self.project = nn.Identity() if d_in in (None, d_model) else nn.Linear(d_in, d_model)
        self.head = None
        if pool == "query":
            self.head = AttentionPool(d_model, num_heads, 1, init, query="learned")
        elif pool == "attention":
            self.head = AttentionPool(d_model, num_heads, num_layers, init)
        self.classifier = nn.Linear(d_model, n_classes)

    def forward(self, states, mask, need_weights: bool = False):
        from .task_heads import check_states, cls_pool_torch, mean_pool_torch

        check_states(states, mask)
        weight = next(self.parameters()).dtype
        if states.dtype != weight:
            fail("states", f"dtype {str(weight).removeprefix('torch.')}, the model's",
                 describe(states))

        if self.encoder is not None:
            states = self.encoder(states, mask)
        weights = None
        if self.pool == "cls":
            z = self.project(cls_pool_torch(states, mask))
        elif self.pool == "mean":
            z = self.project(mean_pool_torch(states, mask))
        else:
            z, weights = self.head(self.project(states), mask, need_weights=need_weights)
        logits = self.classifier(z)
        return (logits, weights) if need_weights else logits


class PairModel(nn.Module):
    """Two sentences' token states -> a paraphrase logit or a similarity score.

    pool: "cls", "mean", or "cross" (`task_heads.CrossAttentionPool` with `num_layers` layers
    and read-out `read` ("mean" of A's tokens, or "first": A's [CLS], the poster's), applied
    both ways with shared weights: u = A attends to B, v = B attends to A).
    out: "classify" -> logit = w · [u, v, |u − v|, u ⊙ v] + b            (B,)
         "similarity" -> cos(P u, P v), P a trainable D×D map starting at the identity (B,)
    d_in: as in `SentenceClassifier` (a shared linear map of every token state first).
    encoder: as in `SentenceClassifier`, run on A and on B (shared weights) before pooling.
    """

    def __init__(self, pool: str, d_model: int, out: str = "classify", num_heads: int = 12,
                 num_layers: int = 1, init: str = "default", d_in: int | None = None,
                 read: str = "mean", encoder: nn.Module | None = None):
        super().__init__()
        from .task_heads import CrossAttentionPool

        if pool not in ("cls", "mean", "cross") or out not in ("classify", "similarity"):
            fail("unknown PairModel setting", "pool in ('cls', 'mean', 'cross'), out in "
                 "('classify', 'similarity')", f"pool={pool!r}, out={out!r}")
        self.pool, self.out, self.encoder = pool, out, encoder
        self.project = nn.Identity() if d_in in (None, d_model) else nn.Linear(d_in, d_model)
        self.head = CrossAttentionPool(d_model, num_heads, num_layers, init, read) \
            if pool == "cross" else None
        if out == "classify":
            self.top = nn.Linear(4 * d_model, 1)
        else:
            self.top = nn.Linear(d_model, d_model, bias=False)
            nn.init.eye_(self.top.weight)

    def embed_pair(self, a, a_mask, b, b_mask):
        from .task_heads import check_pair, cls_pool_torch, mean_pool_torch

        check_pair(a, a_mask, b, b_mask)
        if self.encoder is not None:
            a, b = self.encoder(a, a_mask), self.encoder(b, b_mask)
        if self.pool == "cls":
            return self.project(cls_pool_torch(a, a_mask)), self.project(cls_pool_torch(b, b_mask))
        if self.pool == "mean":
            return (self.project(mean_pool_torch(a, a_mask)),
                    self.project(mean_pool_torch(b, b_mask)))
        a, b = self.project(a), self.project(b)
        return self.head(a, a_mask, b, b_mask)[0], self.head(b, b_mask, a, a_mask)[0]

    def forward(self, a, a_mask, b, b_mask):
        from .task_heads import pair_features

        u, v = self.embed_pair(a, a_mask, b, b_mask)
        if self.out == "classify":
            return self.top(pair_features(u, v))[:, 0]
        return nn.functional.cosine_similarity(self.top(u), self.top(v), dim=-1)
