"""The trainable heads of lesson 07 and the models built on them.

    AttentionPool, CrossAttentionPool   the attention heads (twins of `attention_pool_np` and
                                        `cross_attention_pool_np` in `reference.py`)
    u09_init_, attention_layers         the poster's U(0.9, 1) initialisation, the heads' layers
    attention_entropy_ratio, ...        how far from uniform a head's first attention is
    Standardize                         fixed per-feature (h − μ) / σ of token states
    SentenceClassifier, PairModel       token states -> a class / a paraphrase or similarity score
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..attention import MultiHeadAttention, padding_mask_torch
from ..checks import check_array, check_finite, check_same_device, check_size, describe, fail, hide
from .baselines import pair_features
from .reference import (
    check_module_input,
    check_pair,
    check_read,
    check_token_states,
    cls_pool_torch,
    layer_norm_torch,
    mean_pool_torch,
)


# ============================================================================ the heads
@torch.no_grad()
def u09_init_(mha: MultiHeadAttention, generator: torch.Generator | None = None) -> None:
    """The poster's optional initialisation: every projection weight ~ U(0.9, 1), in place.

    Biases keep their default init. What it does to the first step's attention (after LN and
    on raw states) and to the head's output: see this module's docstring.
    """
    if not isinstance(mha, MultiHeadAttention):
        fail("mha", "a minattn MultiHeadAttention", describe(mha))
    for layer in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
        layer.weight.uniform_(0.9, 1.0, generator=generator)


def attention_layers(owner: str, d_model: int, num_heads: int, num_layers: int,
                     init: str) -> nn.ModuleList:
    """`num_layers` of lesson 01's MultiHeadAttention for a head, initialised "default"
    (PyTorch's) or "u09" (every projection weight ~ U(0.9, 1))."""
    if isinstance(num_layers, (int, np.integer)) and not isinstance(num_layers, bool) \
            and num_layers < 1:
        fail(f"{owner} needs at least one layer", "num_layers >= 1", f"{num_layers}")
    num_layers = check_size("num_layers", num_layers, 1)
    if init not in ("default", "u09"):
        fail("unknown init", "'default' or 'u09'", repr(init))
    layers = nn.ModuleList(MultiHeadAttention(d_model, num_heads) for _ in range(num_layers))
    if init == "u09":
        for layer in layers:
            u09_init_(layer)
    return layers


class AttentionPool(nn.Module):
    """Self-attention pooling, the trainable twin of `attention_pool_np`.

    forward(states (B, L, D), mask (B, L) bool, need_weights=False)
        -> z (B, D), read-out attention (B, H, L) or None
    init: "default" (PyTorch's) or "u09" (every attention weight ~ U(0.9, 1)).
    query: "first" (the first token's state asks: the poster's head) or "learned" (one trained
        vector `self.query` asks, the same for every sentence: attention pooling).
    """

    def __init__(self, d_model: int, num_heads: int, num_layers: int = 1,
                 init: str = "default", normalize: bool = True, query: str = "first"):
        super().__init__()
        if query not in ("first", "learned"):
            fail("unknown query of AttentionPool", "'first' or 'learned'", repr(query))
        self.layers = attention_layers("AttentionPool", d_model, num_heads, num_layers, init)
        self.init, self.normalize = init, normalize
        # a learned query starts like a standardised token state: N(0, 1) features
        self.query = nn.Parameter(torch.randn(d_model)) if query == "learned" else None

    def forward(self, states: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        check_token_states(states, mask, like=torch.Tensor)
        check_module_input("states", states, self)
        states = hide(states, mask[..., None])  # padding may be garbage; LN would spread it
        keys_mask = padding_mask_torch(mask.sum(dim=1), mask.shape[1])  # (B, 1, 1, L)
        norm = layer_norm_torch if self.normalize else (lambda x: x)
        x = states
        for layer in self.layers[:-1]:
            n = norm(x)
            x = x + layer(n, n, x, mask=keys_mask)[0]
        n = norm(x)
        q = n[:, :1] if self.query is None else self.query.expand(len(x), 1, -1)
        z, weights = self.layers[-1](q, n, x, mask=keys_mask, need_weights=need_weights)
        return z[:, 0], (weights[:, :, 0] if need_weights else None)

    def numpy_params(self) -> list[dict]:
        return [layer.numpy_params() for layer in self.layers]

    def numpy_query(self) -> np.ndarray | None:
        """The learned query as float64 NumPy (None when the first token asks)."""
        return None if self.query is None else self.query.detach().cpu().double().numpy()


class CrossAttentionPool(nn.Module):
    """Cross-attention head for pairs, the trainable twin of `cross_attention_pool_np`.

    forward(a (B, La, D), a_mask, b (B, Lb, D), b_mask, need_weights=False)
        -> z (B, D), last layer's attention (B, H, La, Lb) or None (La = 1 when read="first")
    read: "mean" (mean of A's tokens) or "first" (A's [CLS] token, the poster's read-out).
    """

    def __init__(self, d_model: int, num_heads: int, num_layers: int = 1, init: str = "default",
                 read: str = "mean"):
        super().__init__()
        check_read(read)
        self.layers = attention_layers("CrossAttentionPool", d_model, num_heads, num_layers, init)
        self.init, self.read = init, read

    def forward(self, a: torch.Tensor, a_mask: torch.Tensor, b: torch.Tensor,
                b_mask: torch.Tensor, need_weights: bool = False):
        check_pair(a, a_mask, b, b_mask)
        check_module_input("a", a, self)
        a, b = hide(a, a_mask[..., None]), hide(b, b_mask[..., None])  # garbage in padding: gone
        if self.read == "first":  # A's tokens never attend to each other: only the first counts
            a, a_mask = a[:, :1], a_mask[:, :1]
        # BEGIN EXERCISE 7.2 implement: the cross-attention head (A attends to B, pool A) (~20 min)
        b_keys = layer_norm_torch(b)
        keys_mask = padding_mask_torch(b_mask.sum(dim=1), b_mask.shape[1])  # (B, 1, 1, Lb)
        x, weights = a, None
        for layer in self.layers:
            out, weights = layer(layer_norm_torch(x), b_keys, b, mask=keys_mask,
                                 need_weights=need_weights)
            x = x + out
        return mean_pool_torch(x, a_mask), weights
        # END EXERCISE

    def numpy_params(self) -> list[dict]:
        return [layer.numpy_params() for layer in self.layers]


def attention_entropy_ratio(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Torch-only diagnostic: entropy of each read-out row / log(number of real tokens).

    weights (B, H, L), mask (B, L) -> (B, H) in [0, 1]: 1 = uniform (mean pooling), 0 = one
    token. Sentences of one token have no choice to make and count as 1.
    """
    check_array("weights", weights, "float", ndim=3, hint="(B, H, L)", like=torch.Tensor)
    check_array("mask", mask, "bool", ndim=2, hint="(B, L)", like=torch.Tensor)
    if mask.shape[0] != weights.shape[0] or mask.shape[1] != weights.shape[2]:
        fail("mask", f"shape (B, L) = ({weights.shape[0]}, {weights.shape[2]})", describe(mask))
    check_same_device(weights=weights, mask=mask)
    real = mask[:, None, :]
    check_finite("weights", weights, where=real)
    if bool(((weights < 0) & real).any()):
        fail("weights", "attention weights >= 0 (rows of a softmax)", "negative values")
    weights = hide(weights, real)
    plogp = torch.where(weights > 0, weights * torch.log(weights.clamp_min(1e-30)),
                        torch.zeros_like(weights))
    n = mask.sum(dim=1).to(weights.dtype)[:, None]  # (B, 1)
    return torch.where(n > 1, -plogp.sum(dim=-1) / torch.log(n.clamp_min(2)), torch.ones_like(n))


def mean_entropy_ratio(weights: torch.Tensor, mask: torch.Tensor) -> float:
    """`attention_entropy_ratio` averaged over sentences and heads, as a Python float (on the
    host, whatever device the weights are on)."""
    return float(attention_entropy_ratio(weights, mask).mean().item())


def uniform_scale_note(d_model: int) -> str:
    """One line comparing U(0.9, 1)'s noise half-width with PyTorch's default init bound."""
    d_model = check_size("d_model", d_model, 1)
    return (f"U(0.9, 1) = 0.95 + U(-0.05, 0.05); PyTorch's default nn.Linear init for "
            f"D = {d_model} is U(-{1 / math.sqrt(d_model):.3f}, {1 / math.sqrt(d_model):.3f})")


# ============================================================================ the models
class Standardize(nn.Module):
    """Fixed per-feature standardisation of token states, (h − μ) / σ, with μ and σ measured on
    training tokens: the preprocessing `LinearProbe` gives its features, given to a trained
    read-out. Without it, features whose scale is small (a pair's u ⊙ v of raw MiniLM states
    is ~10× smaller than u) move the output slowly under Adam, whose steps are the same size
    for every weight. μ, σ are buffers (saved and moved with the model, never trained).

    Standardize(tokens (T, D)) measures them; forward(states (B, L, D)) -> (B, L, D).
    σ is floored at `min_std` (a feature that never varies stays near 0 instead of blowing up).
    """

    def __init__(self, tokens: torch.Tensor, min_std: float = 1e-3):
        super().__init__()
        check_array("tokens", tokens, "float", ndim=2, hint="(T, D) token states",
                    like=torch.Tensor)
        if len(tokens) < 2:
            fail("Standardize needs token states to measure", "at least 2 tokens",
                 f"{len(tokens)}")
        tokens = tokens.double()
        self.register_buffer("mean", tokens.mean(0).float())
        self.register_buffer("std", tokens.std(0).clamp_min(min_std).float())

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        if states.shape[-1] != len(self.mean):
            fail("states", f"(..., {len(self.mean)}) token states, the measured width",
                 describe(states))
        return (states - self.mean) / self.std


class SentenceClassifier(nn.Module):
    """Token states -> one vector per sentence -> class logits.

    pool: "cls" (first token), "mean" (masked mean), "query" (`AttentionPool`, one
    layer read by a learned query) or "attention" (`AttentionPool` with `num_layers`
    self-attention layers read by the first token's query, `init` "default" or "u09").
    d_in: the states' width; when it differs from d_model, a trainable linear map P
    (d_in -> d_model) narrows the states, for every pool alike: the heads apply it to every
    token first (a narrower head is cheaper), the baselines to the pooled vector (the same
    thing, since P(mean h) = mean(P h) and P(h_0) = (P h)_0, at a fraction of the cost).
    encoder: a trainable module (states, mask) -> states run first (e.g. `encoder.TopLayers`:
    fine-tuning; a "[CLS] A [SEP] B" pair read at "cls" is a cross-encoder). None: the states
    are frozen features.
    standardize: a `Standardize` applied to the states (after the encoder), or None.
    forward(states (B, L, d_in), mask (B, L) bool, need_weights=False) -> logits (B, n_classes)
    (and the read-out attention (B, H, L) when need_weights).
    """

    def __init__(self, pool: str, d_model: int, n_classes: int = 2, num_heads: int = 12,
                 num_layers: int = 1, init: str = "default", d_in: int | None = None,
                 encoder: nn.Module | None = None, standardize: Standardize | None = None):
        super().__init__()
        if pool not in ("cls", "mean", "query", "attention"):
            fail("unknown pool", "'cls', 'mean', 'query' or 'attention'", repr(pool))
        self.pool, self.encoder, self.standardize = pool, encoder, standardize
        self.project = nn.Identity() if d_in in (None, d_model) else nn.Linear(d_in, d_model)
        self.head = None
        if pool == "query":
            self.head = AttentionPool(d_model, num_heads, 1, init, query="learned")
        elif pool == "attention":
            self.head = AttentionPool(d_model, num_heads, num_layers, init)
        self.classifier = nn.Linear(d_model, n_classes)

    def forward(self, states, mask, need_weights: bool = False):
        check_token_states(states, mask)
        weight = next(self.parameters()).dtype
        if states.dtype != weight:
            fail("states", f"dtype {str(weight).removeprefix('torch.')}, the model's",
                 describe(states))

        if self.encoder is not None:
            states = self.encoder(states, mask)
        if self.standardize is not None:
            states = self.standardize(states)
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

    pool: "cls", "mean", or "cross" (`CrossAttentionPool` with `num_layers` layers
    and read-out `read` ("mean" of A's tokens, or "first": A's [CLS], the poster's), applied
    both ways with shared weights: u = A attends to B, v = B attends to A).
    out: "classify" -> logit = w · [u, v, |u − v|, u ⊙ v] + b            (B,)
         "similarity" -> cos(P u, P v), P a trainable D×D map starting at the identity (B,)
    d_in: as in `SentenceClassifier` (a shared linear map of every token state first).
    encoder: as in `SentenceClassifier`, run on A and on B (shared weights) before pooling.
    standardize: as in `SentenceClassifier`, on A's and B's states.
    """

    def __init__(self, pool: str, d_model: int, out: str = "classify", num_heads: int = 12,
                 num_layers: int = 1, init: str = "default", d_in: int | None = None,
                 read: str = "mean", encoder: nn.Module | None = None,
                 standardize: Standardize | None = None):
        super().__init__()
        if pool not in ("cls", "mean", "cross") or out not in ("classify", "similarity"):
            fail("unknown PairModel setting", "pool in ('cls', 'mean', 'cross'), out in "
                 "('classify', 'similarity')", f"pool={pool!r}, out={out!r}")
        self.pool, self.out, self.encoder, self.standardize = pool, out, encoder, standardize
        self.project = nn.Identity() if d_in in (None, d_model) else nn.Linear(d_in, d_model)
        self.head = CrossAttentionPool(d_model, num_heads, num_layers, init, read) \
            if pool == "cross" else None
        if out == "classify":
            self.top = nn.Linear(4 * d_model, 1)
        else:
            self.top = nn.Linear(d_model, d_model, bias=False)
            nn.init.eye_(self.top.weight)

    def embed_pair(self, a, a_mask, b, b_mask, need_weights: bool = False):
        """(u, v), each (B, d_model), and with need_weights the heads' read-out attention
        (A over B's tokens, B over A's): (B, H, La or 1, Lb) and (B, H, Lb or 1, La), None
        without a head."""
        check_pair(a, a_mask, b, b_mask)
        if self.encoder is not None:
            a, b = self.encoder(a, a_mask), self.encoder(b, b_mask)
        if self.standardize is not None:
            a, b = self.standardize(a), self.standardize(b)
        weights = (None, None)
        if self.pool in ("cls", "mean"):
            pool = cls_pool_torch if self.pool == "cls" else mean_pool_torch
            u, v = self.project(pool(a, a_mask)), self.project(pool(b, b_mask))
        else:
            a, b = self.project(a), self.project(b)
            (u, a_reads_b), (v, b_reads_a) = (self.head(a, a_mask, b, b_mask, need_weights),
                                              self.head(b, b_mask, a, a_mask, need_weights))
            weights = (a_reads_b, b_reads_a)
        return (u, v, weights) if need_weights else (u, v)

    def forward(self, a, a_mask, b, b_mask, need_weights: bool = False):
        """(B,) logits or similarity scores; with need_weights also `embed_pair`'s weights."""
        u, v, *weights = self.embed_pair(a, a_mask, b, b_mask, need_weights)
        if self.out == "classify":
            out = self.top(pair_features(u, v))[:, 0]
        else:
            out = nn.functional.cosine_similarity(self.top(u), self.top(v), dim=-1)
        return (out, weights[0]) if need_weights else out
