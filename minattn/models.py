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
