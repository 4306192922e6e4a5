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


# ==== lesson 03: multi-scale attention — the baselines of the Multi-Scale Transformer
class TransformerBaseline(nn.Module):
    """A vanilla Transformer encoder with the Multi-Scale Transformer's input and readout.

    inputs (B, N) token ids (with `embedding`) or (B, N, d_in), lengths (B,) or None -> (B, n_out)
    Linear input + learned positions, a classification node at position 0, `layers` post-norm
    blocks [x <- LN(x + MHA(x)); x <- LN(x + FFN(x))] with full attention (every head sees
    every real token), then MLP([x_node ; max over real tokens]).
    """

    def __init__(self, d_in: int, d_model: int, num_heads: int, layers: int, n_out: int,
                 max_len: int, embedding: nn.Module | None = None, ffn: int = 2):
        super().__init__()
        self.embedding = embedding
        self.input = nn.Linear(d_in, d_model)
        self.node = nn.Parameter(torch.randn(d_model) * 0.02)
        self.position = nn.Parameter(torch.randn(max_len + 1, d_model) * 0.02)
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, num_heads) for _ in range(layers))
        self.ffn = nn.ModuleList(nn.Sequential(nn.Linear(d_model, ffn * d_model), nn.GELU(),
                                               nn.Linear(ffn * d_model, d_model))
                                 for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * layers))
        self.classifier = nn.Sequential(nn.Linear(2 * d_model, d_model), nn.ReLU(),
                                        nn.Linear(d_model, n_out))

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        from .multiscale import masked_max_torch

        x = self.input(self.embedding(inputs) if self.embedding is not None else inputs)
        bsz, n, _ = x.shape
        x = torch.cat([self.node.expand(bsz, 1, -1), x], dim=1) + self.position[: n + 1]
        lengths = torch.full((bsz,), n, device=x.device) if lengths is None else lengths
        keep = torch.arange(n + 1, device=x.device)[None] < lengths[:, None] + 1  # (B, 1 + N)
        self.last_weights = []
        for layer, (attn, ffn) in enumerate(zip(self.attn, self.ffn)):
            out, weights = attn(x, mask=keep[:, None, None, :], need_weights=self.record)
            self.last_weights.append(weights)
            x = self.norms[2 * layer](x + out)
            x = self.norms[2 * layer + 1](x + ffn(x))
        pooled = masked_max_torch(x[:, 1:], keep[:, 1:])
        return self.classifier(torch.cat([x[:, 0], pooled], dim=-1))

    record = False  # True: forward keeps each layer's weights (B, H, 1 + N, 1 + N)

    @torch.no_grad()
    def measured_scales(self, inputs, lengths=None):
        """(L, H) measured scale of every head on this batch (real queries only), as
        `MultiScaleTransformer.measured_scales`."""
        import numpy as np

        from .multiscale import measured_scale_torch

        self.record = True
        try:
            self.forward(inputs, lengths)
        finally:
            self.record = False
        n = self.last_weights[0].shape[-1]
        keep = None if lengths is None else \
            torch.arange(n, device=self.node.device)[None] < lengths[:, None] + 1
        return np.stack([measured_scale_torch(w, keep).cpu().numpy() for w in self.last_weights])


class BiLSTMClassifier(nn.Module):
    """A bidirectional LSTM baseline with the same readout idea.

    inputs (B, N) token ids (with `embedding`) or (B, N, d_in), lengths (B,) or None -> (B, n_out)
    Packed BiLSTM (each direction starts at the sentence's own end), then
    MLP([last states of both directions ; max over real tokens]).
    """

    def __init__(self, d_in: int, hidden: int, n_out: int, embedding: nn.Module | None = None):
        super().__init__()
        self.embedding = embedding
        self.lstm = nn.LSTM(d_in, hidden, batch_first=True, bidirectional=True)
        self.classifier = nn.Sequential(nn.Linear(4 * hidden, hidden), nn.ReLU(),
                                        nn.Linear(hidden, n_out))

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        from .multiscale import masked_max_torch

        x = self.embedding(inputs) if self.embedding is not None else inputs
        bsz, n, _ = x.shape
        lengths = torch.full((bsz,), n) if lengths is None else lengths
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, (h, _) = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=n)
        keep = torch.arange(n, device=x.device)[None] < lengths.to(x.device)[:, None]
        last = torch.cat([h[0], h[1]], dim=-1)  # (B, 2·hidden): forward and backward
        return self.classifier(torch.cat([last, masked_max_torch(out, keep)], dim=-1))
