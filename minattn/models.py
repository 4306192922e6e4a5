"""Small models for the lessons' training demos, built on the library's mechanisms."""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadAttention
from .tools.utils import fail


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


# ============================================================================ lesson 07: task heads
class SentenceClassifier(nn.Module):
    """A frozen encoder's token states -> one vector per sentence -> class logits.

    pool: "cls" (first token), "mean" (masked mean) or "attention" (`task_heads.AttentionPool`
    with `num_layers` self-attention layers and `init` "default" or "u09").
    d_in: the encoder's width; when it differs from d_model, a trainable linear map P
    (d_in -> d_model) narrows the states, for every pool alike: the heads apply it to every
    token first (a narrower head is cheaper), the baselines to the pooled vector (the same
    thing, since P(mean h) = mean(P h) and P(h_0) = (P h)_0, at a fraction of the cost).
    forward(states (B, L, d_in), mask (B, L) bool, need_weights=False) -> logits (B, n_classes)
    (and the read-out attention (B, H, L) when need_weights).
    """

    def __init__(self, pool: str, d_model: int, n_classes: int = 2, num_heads: int = 12,
                 num_layers: int = 1, init: str = "default", d_in: int | None = None):
        super().__init__()
        from .task_heads import AttentionPool

        if pool not in ("cls", "mean", "attention"):
            fail("unknown pool", "'cls', 'mean' or 'attention'", repr(pool))
        self.pool = pool
        self.project = nn.Identity() if d_in in (None, d_model) else nn.Linear(d_in, d_model)
        self.head = AttentionPool(d_model, num_heads, num_layers, init) if pool == "attention" \
            else None
        self.classifier = nn.Linear(d_model, n_classes)

    def forward(self, states, mask, need_weights: bool = False):
        from .task_heads import cls_pool_torch, mean_pool_torch

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

    pool: "cls", "mean", or "cross" (`task_heads.CrossAttentionPool`, applied both ways with
    shared weights: u = A attends to B, v = B attends to A).
    out: "classify" -> logit = w · [u, v, |u − v|, u ⊙ v] + b            (B,)
         "similarity" -> cos(P u, P v), P a trainable D×D map starting at the identity (B,)
    d_in: as in `SentenceClassifier` (a shared linear map of every token state first).
    """

    def __init__(self, pool: str, d_model: int, out: str = "classify", num_heads: int = 12,
                 num_layers: int = 1, init: str = "default", d_in: int | None = None):
        super().__init__()
        from .task_heads import CrossAttentionPool

        if pool not in ("cls", "mean", "cross") or out not in ("classify", "similarity"):
            fail("unknown PairModel setting", "pool in ('cls', 'mean', 'cross'), out in "
                 "('classify', 'similarity')", f"pool={pool!r}, out={out!r}")
        self.pool, self.out = pool, out
        self.project = nn.Identity() if d_in in (None, d_model) else nn.Linear(d_in, d_model)
        self.head = CrossAttentionPool(d_model, num_heads, num_layers, init) if pool == "cross" \
            else None
        if out == "classify":
            self.top = nn.Linear(4 * d_model, 1)
        else:
            self.top = nn.Linear(d_model, d_model, bias=False)
            nn.init.eye_(self.top.weight)

    def embed_pair(self, a, a_mask, b, b_mask):
        from .task_heads import check_pair, cls_pool_torch, mean_pool_torch

        check_pair(a, a_mask, b, b_mask)
        if self.pool == "cls":
            return self.project(cls_pool_torch(a, a_mask)), self.project(cls_pool_torch(b, b_mask))
        if self.pool == "mean":
            return (self.project(mean_pool_torch(a, a_mask)),
                    self.project(mean_pool_torch(b, b_mask)))
        a, b = self.project(a), self.project(b)
        return self.head(a, a_mask, b, b_mask)[0], self.head(b, b_mask, a, a_mask)[0]

    def forward(self, a, a_mask, b, b_mask):
        u, v = self.embed_pair(a, a_mask, b, b_mask)
        if self.out == "classify":
            return self.top(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))[:, 0]
        return nn.functional.cosine_similarity(self.top(u), self.top(v), dim=-1)
