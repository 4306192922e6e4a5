"""Small models for the lessons' training demos, built on the library's mechanisms."""

from __future__ import annotations


import numpy as np
import torch
from torch import nn

from .attention import MultiHeadAttention
from .sparse_kernels import block_sparse_attention_torch, window_attention_torch
from .tools.utils import (as_numpy, check_array, check_ids, check_same_device, check_size, describe,
                          fail, shape_str)
from .xl import sinusoid_torch


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


# ==== lesson 02: sparse patterns


def window_attend(w: int, dilation: int = 1, causal: bool = False, global_idx=None,
                  block: int | None = None):
    """A kernel for `MultiHeadAttention(..., attend=)`: (q, k, v, mask) -> sliding-window
    attention (`sparse_kernels.window_attention_torch`). The pattern is the mask, so the
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
    attention on `layout` (`sparse_kernels.block_sparse_attention_torch`); mask must be None."""
    layout = as_numpy(layout)
    check_array("layout", layout, "bool", ndim=2, hint="(nb, nb)", like=np.ndarray)
    block = check_size("block", block, 1)

    def attend(q, k, v, mask=None):
        _no_mask(mask, "block_sparse_attend")
        return block_sparse_attention_torch(q, k, v, layout, block, causal)
    attend.__name__ = f"block_sparse({int(layout.sum())} blocks of {block})"
    return attend


def _no_mask(mask, name):
    if mask is not None:
        fail(f"{name}: the sparse pattern is the mask", "mask=None", f"a mask of type {type(mask)}")


def check_tokens(tokens, embedding: nn.Embedding, max_len: int | None = None) -> None:
    """tokens: (B, N) integer ids inside the embedding's vocabulary, N <= max_len, N > 0."""
    check_array("tokens", tokens, "int", ndim=2, hint="(B, N) token ids", like=torch.Tensor)
    if 0 in tokens.shape or max_len is not None and tokens.shape[1] > max_len:
        fail("tokens", f"(B, N) with 0 < N <= max_len = {max_len}" if max_len else
             "(B, N) with B, N > 0", describe(tokens))
    check_ids("tokens", tokens, embedding.num_embeddings)
    check_same_device(tokens=tokens, weights=embedding.weight)


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
        check_tokens(tokens, self.embed, max_len=self.position.shape[0])
        x = self.embed(tokens) + self.position[: tokens.shape[1]]  # (B, N, D)
        for layer, (attn, mlp) in enumerate(zip(self.attn, self.mlp)):
            x = x + attn(self.norms[2 * layer](x))[0]
            x = x + mlp(self.norms[2 * layer + 1](x))
        return self.head(self.norms[-1](x[:, 0]))  # (B, n_classes)


# ==== lesson 03: multi-scale attention — the baselines of the Multi-Scale Transformer
class TransformerBaseline(nn.Module):
    """A vanilla Transformer encoder with the Multi-Scale Transformer's input and readout.

    inputs (B, N) token ids (with `embedding`) or (B, N, d_in), lengths (B,) or None -> (B, n_out)
    Linear input + learned positions, a classification node at position 0, `layers` post-norm
    blocks [x <- LN(x + MHA(x)); x <- LN(x + FFN(x))] with full attention (every head sees
    every real token), then MLP([x_node ; max over real tokens]) (`multiscale.NodeReadout`;
    max_pool=False: MLP(x_node)).
    """

    def __init__(self, d_in: int, d_model: int, num_heads: int, layers: int, n_out: int,
                 max_len: int, embedding: nn.Module | None = None, ffn: int = 2,
                 max_pool: bool = True):
        from .multiscale import NodeReadout

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
        from .multiscale import check_classifier_inputs

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
        from .multiscale import head_statistics_torch

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
        from .multiscale import check_classifier_inputs, masked_max_torch

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
            loss = nn.functional.cross_entropy(linear(x), y) + 0.5 * l2 * linear.weight.square().sum()
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            acc = (linear(x_valid).argmax(-1) == y_valid).float().mean().item()
        if best is None or acc > best[2]:
            best = (linear, l2, acc)
    return best
