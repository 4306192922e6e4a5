"""Task-specific attention heads over a frozen encoder's token states (Jia, "Task-specific
attention", Stanford CS224N poster, 2024), lesson 07 — NumPy, then PyTorch, then the modules.

A pretrained encoder (lesson 07 uses MiniLM, `minattn.encoder`) turns a sentence into token
states H = (h_0 = [CLS], h_1, ..., h_{n-1}), shape (B, L, D), right-padded (mask (B, L), True on
real tokens, the first token always real). A task needs one vector per sentence:

    first token   z = h_0
    mean pooling  z = Σ_i m_i h_i / Σ_i m_i                       (padding excluded)
    attention     z = W_o Σ_i a_i W_v h_i + b,  a = softmax_i(q · k_i / √d_h)   per head,
                  the query from the first token (q = W_q LN(h_0)) or learned (q = W_q w)

The attention head is lesson 01's `MultiHeadAttention`, trained for the task over a frozen
encoder (or with its top layers: `encoder.TopLayers`, passed as `encoder=` to the models). Its
queries and keys read standardised states, LN(h) = (h − mean(h)) / std(h) over the features
(no affine), its values the raw states. So with uniform weights a_i = 1/n the single-sentence
head is exactly a linear map of mean pooling, z = W_o W_v mean(H) + b. The pair head read at
A's [CLS] (the poster's) is not: with uniform weights it gives a_0 + W_o W_v mean(B) + b,
A's first token and a linear map of the mean of B — never the mean of A's tokens.

    attention_pool        single sentences: 1-2 self-attention layers (residual, pre-norm),
                          then the first token's query (or a learned one) reads all tokens
    cross_attention_pool  pairs: A's tokens attend to B's (residual, one or more layers),
                          then the mean over A's tokens, or A's first token alone
    pearson_loss          −corr(pred, target) over a batch, for similarity regression
    pair_features_torch   [u, v, |u − v|, u ⊙ v], what a pair classifier reads

    SentenceClassifier    a read-out of one sentence's tokens, then a linear classifier
    PairModel             a read-out of each sentence of a pair, then a linear classifier of
                          [u, v, |u − v|, u ⊙ v] (PairSimilarity: the cosine of u and v)

The poster's optional initialisation, every projection weight ~ U(0.9, 1) (`init="u09"`,
`u09_init_`), and what it does to the first attention and to the head's output: lesson 07,
section 5 (and `attention_pool_np(..., normalize=False)`: queries and keys without LN).

Input checks: `minattn.checks`, section "task_heads". The fast single-query read-out:
`minattn.fast.task_heads`. Data, baselines and training: `minattn.course.task_heads`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from . import checks as c
from .attention import MultiHeadAttention, multi_head_attention_np, padding_mask_torch
from .contract import checked, hide

LN_EPS = 1e-5


# ============================================================================ NumPy reference
@checked(states="float (B, L, D) where mask", mask="bool (B, L)", rules=[c.right_padded])
def cls_pool_np(states: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """First-token pooling: (B, L, D), (B, L) -> (B, D), the state of [CLS]."""
    return states[:, 0]


@checked(states="float (B, L, D) where mask", mask="bool (B, L)", rules=[c.right_padded])
def mean_pool_np(states: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Masked mean pooling: (B, L, D), (B, L) bool -> (B, D), z_b = Σ_i m_bi h_bi / Σ_i m_bi.

    Padding is selected away, not multiplied by 0: padded states may be garbage (even NaN)."""
    # BEGIN EXERCISE 7.1 implement: masked mean over the real tokens (not the padding) (~10 min)
    real = mask[..., None]  # (B, L, 1): True on real tokens
    total = np.where(real, states, 0.0).sum(axis=1)  # (B, D): padding never enters the sum
    return total / real.sum(axis=1).astype(states.dtype)  # float32 in, float32 out
    # END EXERCISE


@checked(x="float (..., D)", eps="number > 0")
def layer_norm_np(x: np.ndarray, eps: float = LN_EPS) -> np.ndarray:
    """Standardise each token's features: (x − mean) / √(var + eps) over the last axis."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


@checked(states="float (B, L, D) where mask", mask="bool (B, L)", num_heads="int >= 1",
         query="float? (D,)", rules=[c.right_padded, c.layers_given])
def attention_pool_np(states: np.ndarray, mask: np.ndarray, layers: list[dict], num_heads: int,
                      normalize: bool = True, query: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Self-attention pooling: layers[:-1] mix the tokens, the last one reads them all.

        x ← x + MHA(LN(x), LN(x), x)      for each layer but the last      (B, L, D)
        z = MHA(LN(x)_0, LN(x), x)        the first token's query only     (B, D)
        z = MHA(w, LN(x), x)              or a learned query vector w (D,), the same for
                                          every sentence (attention pooling)

    layers: one `MultiHeadAttention.numpy_params()` dict per layer. Padding keys are masked.
    normalize=False feeds raw states to queries and keys (to see what LN is for).
    Returns z (B, D) and the read-out attention (B, H, L) over the tokens.
    """
    states = hide(states, mask[..., None])  # padding may hold garbage: zeroed
    keys_mask = mask[:, None, None, :]  # (B, 1, 1, L)
    norm = layer_norm_np if normalize else (lambda x: x)
    x = states
    for params in layers[:-1]:
        n = norm(x)
        x = x + multi_head_attention_np(n, n, x, params, num_heads, keys_mask)[0]
    n = norm(x)
    q = n[:, :1] if query is None else np.broadcast_to(query, (len(x), 1, x.shape[-1]))
    z, weights = multi_head_attention_np(q, n, x, layers[-1], num_heads, keys_mask)
    return z[:, 0], weights[:, :, 0]


@checked(a="float (B, La, D) where a_mask", a_mask="bool (B, La)",
         b="float (B, Lb, D) where b_mask", b_mask="bool (B, Lb)", num_heads="int >= 1",
         read="one of mean, first", rules=[c.right_padded, c.layers_given])
def cross_attention_pool_np(a: np.ndarray, a_mask: np.ndarray, b: np.ndarray,
                            b_mask: np.ndarray, layers: list[dict], num_heads: int,
                            read: str = "mean") -> tuple[np.ndarray, np.ndarray]:
    """Sentence A attends to sentence B, layer by layer, then A is read out.

        x ← x + MHA(LN(x), LN(b), b)      x starts at a; queries from A, keys/values from B
        z = mean over A's real tokens of x            read="mean"            (B, D)
        z = x_0, A's first ([CLS]) token              read="first" (the poster's read-out)

    With uniform attention one layer gives z = mean(A) + W_o W_v mean(B) + b_o + W_o b_v:
    the mean of A plus a linear map of the mean of B (read="first": a_0 instead of mean(A)).
    A's tokens never attend to each other here, so read="first" needs A's first token only.
    Returns z (B, D) and the last layer's attention (B, H, La, Lb) (La = 1 when read="first").
    """
    a, b = hide(a, a_mask[..., None]), hide(b, b_mask[..., None])  # padding may hold garbage
    if read == "first":
        a, a_mask = a[:, :1], a_mask[:, :1]
    # BEGIN EXERCISE 7.2 implement: the cross-attention head (A attends to B, pool A) (~20 min)
    b_keys = layer_norm_np(b)
    x, weights = a, None
    for params in layers:
        out, weights = multi_head_attention_np(layer_norm_np(x), b_keys, b, params, num_heads,
                                               b_mask[:, None, None, :])
        x = x + out
    return mean_pool_np(x, a_mask), weights
    # END EXERCISE


@checked(pred="float (N>=2,)", target="float (N,)", eps="number >= 0")  # a correlation
def pearson_loss_np(pred: np.ndarray, target: np.ndarray, eps: float = 1e-12) -> float:
    """Negative Pearson correlation: −Σ p̃ t̃ / √(Σ p̃² Σ t̃²), p̃ = pred − mean(pred), same for t.

    It ignores the scale and offset of `pred`: only how well its ordering and spacing match
    the target's counts. eps keeps a constant vector from dividing by zero.
    """
    p, t = pred - pred.mean(), target - target.mean()
    return float(-(p * t).sum() / np.sqrt((p * p).sum() * (t * t).sum() + eps))


# ============================================================================ PyTorch
@checked(states="float (B, L, D) where mask", mask="bool (B, L)", rules=[c.right_padded])
def cls_pool_torch(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Torch twin of `cls_pool_np`."""
    return states[:, 0]


@checked(states="float (B, L, D) where mask", mask="bool (B, L)", rules=[c.right_padded])
def mean_pool_torch(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Torch twin of `mean_pool_np`."""
    # BEGIN EXERCISE 7.1 implement: masked mean over the real tokens (not the padding) (~10 min)
    real = mask.unsqueeze(-1)  # (B, L, 1)
    total = torch.where(real, states, torch.zeros_like(states)).sum(dim=1)
    return total / real.sum(dim=1).to(states.dtype)
    # END EXERCISE


@checked(x="float (..., D)", eps="number > 0")
def layer_norm_torch(x: torch.Tensor, eps: float = LN_EPS) -> torch.Tensor:
    """Torch twin of `layer_norm_np` (= F.layer_norm without weight and bias)."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps)


@checked(pred="float (N>=2,)", target="float (N,)", eps="number >= 0")  # a correlation
def pearson_loss_torch(pred: torch.Tensor, target: torch.Tensor, eps: float = 1e-12
                       ) -> torch.Tensor:
    """Torch twin of `pearson_loss_np` (a differentiable scalar)."""
    p, t = pred - pred.mean(), target - target.mean()
    return -(p * t).sum() / torch.sqrt((p * p).sum() * (t * t).sum() + eps)


@checked(u="real (B, D)", v="real (B, D)")
def pair_features_torch(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Torch only (a NumPy twin would be one line): what a pair classifier reads,
    [u, v, |u − v|, u ⊙ v], (B, D) x 2 -> (B, 4D) (Sentence-BERT's (u, v, |u − v|) plus the
    element-wise product)."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


# ============================================================================ the heads
@torch.no_grad()
@checked(rules=[c.attention_layer])
def u09_init_(mha: MultiHeadAttention, generator: torch.Generator | None = None) -> None:
    """The poster's optional initialisation: every projection weight ~ U(0.9, 1), in place.

    Biases keep their default init. What it does to the first step's attention (after LN and
    on raw states) and to the head's output: see this module's docstring.
    """
    for layer in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
        layer.weight.uniform_(0.9, 1.0, generator=generator)


@checked(d_model="int >= 1", num_heads="int >= 1", num_layers="int >= 1",
         init="one of default, u09")
def attention_layers(owner: str, d_model: int, num_heads: int, num_layers: int,
                     init: str) -> nn.ModuleList:
    """`num_layers` of lesson 01's MultiHeadAttention for a head, initialised "default"
    (PyTorch's) or "u09" (every projection weight ~ U(0.9, 1))."""
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

    @checked(query="one of first, learned")
    def __init__(self, d_model: int, num_heads: int, num_layers: int = 1,
                 init: str = "default", normalize: bool = True, query: str = "first"):
        super().__init__()
        self.layers = attention_layers("AttentionPool", d_model, num_heads, num_layers, init)
        self.init, self.normalize = init, normalize
        # a learned query starts like a standardised token state: N(0, 1) features
        self.query = nn.Parameter(torch.randn(d_model)) if query == "learned" else None

    @checked(states="float (B, L, self.layers.0.d_model) like self.layers.0.q_proj where mask",
             mask="bool (B, L)", rules=[c.right_padded])
    def forward(self, states: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        states = hide(states, mask[..., None])  # padding may hold garbage: zeroed
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

    @checked(read="one of mean, first")
    def __init__(self, d_model: int, num_heads: int, num_layers: int = 1, init: str = "default",
                 read: str = "mean"):
        super().__init__()
        self.layers = attention_layers("CrossAttentionPool", d_model, num_heads, num_layers, init)
        self.init, self.read = init, read

    @checked(a="float (B, La, self.layers.0.d_model) like self.layers.0.q_proj where a_mask",
             b="float (B, Lb, self.layers.0.d_model) where b_mask", a_mask="bool (B, La)",
             b_mask="bool (B, Lb)", rules=[c.right_padded])
    def forward(self, a: torch.Tensor, a_mask: torch.Tensor, b: torch.Tensor,
                b_mask: torch.Tensor, need_weights: bool = False):
        a, b = hide(a, a_mask[..., None]), hide(b, b_mask[..., None])  # padding may hold garbage
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


# ============================================================================ the models
class Standardize(nn.Module):
    """Fixed per-feature standardisation of token states, (h − μ) / σ, with μ and σ measured on
    training tokens: the preprocessing a linear probe gives its features, given to a trained
    read-out. Without it, features whose scale is small (a pair's u ⊙ v of raw MiniLM states
    is ~10× smaller than u) move the output slowly under Adam, whose steps are the same size
    for every weight. μ, σ are buffers (saved and moved with the model, never trained).

    Standardize(tokens (T, D)) measures them; forward(states (B, L, D), mask) -> (B, L, D),
    token by token: mask (B, L) only says where the states must be finite (padding may hold
    anything, and stays padding). σ is floored at `min_std` (a feature that never varies stays
    near 0 instead of blowing up).
    """

    @checked(tokens="float (T>=2, D)", min_std="number > 0")  # a spread to measure
    def __init__(self, tokens: torch.Tensor, min_std: float = 1e-3):
        super().__init__()
        tokens, self.d_model = tokens.double(), tokens.shape[1]
        self.register_buffer("mean", tokens.mean(0).float())
        self.register_buffer("std", tokens.std(0).clamp_min(min_std).float())

    @checked(states="float (..., self.d_model) where mask", mask="bool? (...)")
    def forward(self, states: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return (states - self.mean) / self.std


class SentenceClassifier(nn.Module):
    """Token states -> one vector per sentence -> class logits.

    readout: how the sentence is read, either a pooling function (states, mask) -> z, such as
    `cls_pool_torch` or `mean_pool_torch`, or a head module (states, mask, need_weights) ->
    (z, weights), such as `AttentionPool`.
    d_model: the width of z (the classifier's input).
    project: a linear map of the states to d_model (default: none). A head reads the mapped
    tokens (a narrower head is cheaper); a pooling function's vector is mapped after pooling
    (the same thing, since P(mean h) = mean(P h) and P(h_0) = (P h)_0, at a fraction of the cost).
    encoder: a trainable module (states, mask) -> states run first (e.g. `encoder.TopLayers`:
    fine-tuning; a "[CLS] A [SEP] B" pair read by `cls_pool_torch` is a cross-encoder). None:
    the states are frozen features.
    standardize: a `Standardize` applied to the states (after the encoder), or None.
    forward(states (B, L, d_in), mask (B, L) bool, need_weights=False) -> logits (B, n_classes)
    (and the read-out attention (B, H, L), None for a pooling function, when need_weights).
    """

    def __init__(self, readout, d_model: int, n_classes: int = 2, project: nn.Module | None = None,
                 encoder: nn.Module | None = None, standardize: Standardize | None = None):
        super().__init__()
        self.encoder, self.standardize = encoder, standardize
        self.project = nn.Identity() if project is None else project
        self.readout = readout
        self.classifier = nn.Linear(d_model, n_classes)

    @checked(states="float (B, L, D) like self where mask", mask="bool (B, L)",
             rules=[c.right_padded])
    def forward(self, states, mask, need_weights: bool = False):
        if self.encoder is not None:
            states = self.encoder(states, mask)
        if self.standardize is not None:
            states = self.standardize(states, mask)
        if isinstance(self.readout, nn.Module):  # a head reads the mapped tokens
            z, weights = self.readout(self.project(states), mask, need_weights=need_weights)
        else:  # pool, then map the pooled vector
            z, weights = self.project(self.readout(states, mask)), None
        logits = self.classifier(z)
        return (logits, weights) if need_weights else logits


class PairModel(nn.Module):
    """Two sentences' token states -> a paraphrase logit, w · [u, v, |u − v|, u ⊙ v] + b  (B,).

    readout: a pooling function (states, mask) -> z, applied to each sentence alone, or a
    `CrossAttentionPool`, applied both ways with shared weights: u = A attends to B, v = B
    attends to A.
    d_model, project, encoder, standardize: as in `SentenceClassifier` (the encoder and the
    map shared by A and B).
    """

    def __init__(self, readout, d_model: int, project: nn.Module | None = None,
                 encoder: nn.Module | None = None, standardize: Standardize | None = None):
        super().__init__()
        self.encoder, self.standardize = encoder, standardize
        self.project = nn.Identity() if project is None else project
        self.readout = readout
        self.top = self.make_top(d_model)

    @staticmethod
    def make_top(d_model: int) -> nn.Module:
        return nn.Linear(4 * d_model, 1)

    def score(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.top(pair_features_torch(u, v))[:, 0]

    @checked(a="float (B, La, D) like self where a_mask", a_mask="bool (B, La)",
             b="float (B, Lb, D) where b_mask", b_mask="bool (B, Lb)", rules=[c.right_padded])
    def embed_pair(self, a, a_mask, b, b_mask, need_weights: bool = False):
        """(u, v), each (B, d_model), and with need_weights the heads' read-out attention
        (A over B's tokens, B over A's): (B, H, La or 1, Lb) and (B, H, Lb or 1, La), None
        for a pooling function."""
        if self.encoder is not None:
            a, b = self.encoder(a, a_mask), self.encoder(b, b_mask)
        if self.standardize is not None:
            a, b = self.standardize(a, a_mask), self.standardize(b, b_mask)
        weights = (None, None)
        if not isinstance(self.readout, nn.Module):  # pool each sentence, then map it
            u, v = self.project(self.readout(a, a_mask)), self.project(self.readout(b, b_mask))
        else:
            a, b = self.project(a), self.project(b)
            (u, a_reads_b), (v, b_reads_a) = (self.readout(a, a_mask, b, b_mask, need_weights),
                                              self.readout(b, b_mask, a, a_mask, need_weights))
            weights = (a_reads_b, b_reads_a)
        return (u, v, weights) if need_weights else (u, v)

    @checked(a="float (B, La, D) like self where a_mask", a_mask="bool (B, La)",
             b="float (B, Lb, D) where b_mask", b_mask="bool (B, Lb)", rules=[c.right_padded])
    def forward(self, a, a_mask, b, b_mask, need_weights: bool = False):
        """(B,) logits or similarity scores; with need_weights also `embed_pair`'s weights."""
        u, v, *weights = self.embed_pair(a, a_mask, b, b_mask, need_weights)
        out = self.score(u, v)
        return (out, weights[0]) if need_weights else out


class PairSimilarity(PairModel):
    """A `PairModel` that scores a pair's similarity: cos(P u, P v) (B,), P a trainable
    d_model × d_model map starting at the identity."""

    @staticmethod
    def make_top(d_model: int) -> nn.Module:
        top = nn.Linear(d_model, d_model, bias=False)
        nn.init.eye_(top.weight)
        return top

    def score(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return nn.functional.cosine_similarity(self.top(u), self.top(v), dim=-1)
