"""The baselines of the Multi-Scale Transformer (lesson 03): a vanilla Transformer encoder and a
BiLSTM with the same input and readout, and the linear baselines on bags of words and mean
word vectors.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..attention import MultiHeadAttention
from ..checks import fail
from .analysis import head_statistics_torch
from .model import NodeReadout, check_classifier_inputs, masked_max_torch


class TransformerBaseline(nn.Module):
    """A vanilla Transformer encoder with the Multi-Scale Transformer's input and readout.

    inputs (B, N) token ids (with `embedding`) or (B, N, d_in), lengths (B,) or None -> (B, n_out)
    Linear input + learned positions, a classification node at position 0, `layers` post-norm
    blocks [x <- LN(x + MHA(x)); x <- LN(x + FFN(x))] with full attention (every head sees
    every real token), then MLP([x_node ; max over real tokens]) (`model.NodeReadout`;
    max_pool=False: MLP(x_node)).
    """

    def __init__(self, d_in: int, d_model: int, num_heads: int, layers: int, n_out: int,
                 max_len: int, embedding: nn.Module | None = None, ffn: int = 2,
                 max_pool: bool = True):
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
        self.classifier = NodeReadout(d_model, n_out, max_pool)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        check_classifier_inputs(inputs, lengths, self.embedding, self.input.weight,
                                max_len=self.position.shape[0] - 1)
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
        return self.classifier(x, keep)

    record = False  # True: forward keeps each layer's weights (B, H, 1 + N, 1 + N)

    @torch.no_grad()
    def attention_maps(self, inputs, lengths=None):
        """Every layer's weights (B, H, 1 + N, 1 + N) and what each query could see (the real
        keys, (B, 1, 1, 1 + N)), as `MultiScaleTransformer.attention_maps`."""
        self.record = True
        try:
            self.forward(inputs, lengths)
        finally:
            self.record = False
        n = self.last_weights[0].shape[-1]
        lengths = torch.full((inputs.shape[0],), n - 1) if lengths is None else lengths
        keep = torch.arange(n, device=self.node.device)[None] < lengths[:, None] + 1
        return list(self.last_weights), [keep[:, None, None, :]] * len(self.last_weights)

    @torch.no_grad()
    def measured_scales(self, inputs, lengths=None) -> np.ndarray:
        """(L, H) measured scale of every head on this batch (real queries only)."""
        return self.head_statistics(inputs, lengths)["scale"]

    @torch.no_grad()
    def head_statistics(self, inputs, lengths=None) -> dict[str, np.ndarray]:
        """(L, H) scale, uniform scale and departure of every head, as
        `MultiScaleTransformer.head_statistics` (the uniform reference spreads over the
        whole sentence)."""
        return head_statistics_torch(*self.attention_maps(inputs, lengths), lengths)


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
        check_classifier_inputs(inputs, lengths, self.embedding, self.lstm.weight_ih_l0)
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


def bag_of_words(ids: torch.Tensor, lengths: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Which words each sentence holds: ids (n, N), lengths (n,) -> (n, V) float 0/1 (the
    padding beyond each length is ignored; word order is gone)."""
    real = torch.arange(ids.shape[1])[None] < lengths[:, None]
    out = torch.zeros(ids.shape[0], vocab_size)
    out[torch.arange(ids.shape[0])[:, None].expand_as(ids)[real], ids[real]] = 1.0
    return out


def mean_vectors(ids: torch.Tensor, lengths: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """The mean word vector of each sentence: ids (n, N), lengths (n,), matrix (V, D) -> (n, D)."""
    real = (torch.arange(ids.shape[1])[None] < lengths[:, None]).to(matrix.dtype)
    return (matrix[ids] * real[..., None]).sum(1) / real.sum(1, keepdim=True).clamp(min=1)


def fit_logistic_regression(x: torch.Tensor, y: torch.Tensor, x_valid: torch.Tensor,
                            y_valid: torch.Tensor, l2_grid=(1e-4, 1e-3, 1e-2, 1e-1)
                            ) -> tuple[nn.Linear, float, float]:
    """The linear baseline: multinomial logistic regression, fitted full-batch with L-BFGS for
    each L2 strength of `l2_grid` (loss = cross-entropy + l2/2 · |W|²); the strength with the
    best validation accuracy wins.

    x (n, F) float, y (n,) int64 -> (the fitted nn.Linear, its l2, its validation accuracy).
    """
    if x.ndim != 2 or y.shape != (x.shape[0],) or x_valid.shape[1:] != x.shape[1:]:
        fail("logistic regression inputs", "x (n, F), y (n,), x_valid (m, F)",
             f"x {tuple(x.shape)}, y {tuple(y.shape)}, x_valid {tuple(x_valid.shape)}")
    best = None
    for l2 in l2_grid:
        linear = nn.Linear(x.shape[1], int(y.max()) + 1)
        nn.init.zeros_(linear.weight)
        nn.init.zeros_(linear.bias)
        opt = torch.optim.LBFGS(linear.parameters(), lr=1.0, max_iter=200,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = (nn.functional.cross_entropy(linear(x), y)
                    + 0.5 * l2 * linear.weight.square().sum())
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            acc = (linear(x_valid).argmax(-1) == y_valid).float().mean().item()
        if best is None or acc > best[2]:
            best = (linear, l2, acc)
    return best
