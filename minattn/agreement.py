"""Does attention point where a probe points? (lesson 08)

Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns" (2021):
the attention classifier of §2.4, the agreement metric and its contextualised form of §3.1,
and one row of Table 2 (§3.2), computed as the authors' code computes them
(`classification/classifier_model.py`, `classification/utils.py`: `topKMatch_single`,
`fetch_stats`, `passing_idx`). Read top down:

  the classifier (NumPy, then torch)
    h_i = [→h_i ; ←h_i]          one LSTM reads x_1..x_n, another x_n..x_1      (B, N, 2H)
    e_i = vᵀ ReLU(W h_i + b)     a one-hidden-layer network scores each position  (B, N)
    α = softmax(e),  P(pos) = σ(z),  z = wᵀ Σ_i α_i h_i + b₀                        (B,)
    lexical probe  β_i = σ(s · (wᵀ h_i + b₀)), s = +1 for a positive label, -1 for a negative
                   one: the classifier's answer for the true label if it attended to i alone

  the agreement metric (eq. 10)
    A(a, b) = 1 if argmax_i a_i is among the top ⌈5%·n⌉ positions of b, else 0,
              averaged over the counted output words of a validation set;
    Â       = mean of ⌈5%·n⌉ / n: A when a's argmax is a uniformly random position

  one row of Table 2: runs evaluated at the same checkpoints τ on one validation set
    gold       a standard model; α* = its attention at its best-performance checkpoint
    others     standard models of other seeds: attention α^τ, probe β^τ, performance P^τ
    uniform    the same architecture with attention frozen uniform: its probe β^uf,τ
    A(α, β^uf) = max_τ A(α*, β^uf,τ)     A(α, β) = max_τ A(α*, β^τ) (β of others[0])
    curve(τ)   = mean over `others` of A(α*, α^τ), beside their mean performance P(τ)
    ξ(α, b)    = P(τ) at the first τ where curve(τ) > A(α, b)  (eq. 11; None: never)
  The maximum over checkpoints is the authors' (appendix A.7): the agreement rises, then falls.

  the trainable models of Table 2
    AttentionClassifier   the classifier above as one nn.Module (sentiment)
    Seq2SeqAttention      Luong's LSTM translator, lesson 05's reference as one module

Shapes: B a batch, N input positions (padding at the end, mask True = real), T output words
(classification: T = 1), M validation examples, C checkpoints. The LSTM, Luong's attention,
the output network and the translator's probe are lesson 05's (`minattn.lstm_attention`);
that file never imports this one. Input checks: minattn/checks.py, section "agreement".
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from . import checks as c
from .attention import softmax_np, softmax_torch
from .contract import checked, hide
from .lstm_attention import (
    lexical_probe_torch,
    lstm_np,
    luong_attention_torch,
    output_torch,
    sigmoid_np,
)


# ============================================================================ the classifier
def bilstm_np(x, lengths, forward_params, backward_params):
    """A bidirectional one-layer LSTM: h_i = [→h_i ; ←h_i] -> (B, N, 2H).

    x (B, N, d) with padding at the end of each row, lengths (B,) its real tokens n.
    →h reads x_1..x_n, ←h reads x_n..x_1 of each row's own n, so padding changes no real
    state (what PyTorch's packed sequences do); padded positions get zeros.
    forward_params, backward_params: (weight_ih, weight_hh, bias_ih, bias_hh) of each direction.
    """
    B, N, _ = x.shape
    H = forward_params[1].shape[1]
    out = np.zeros((B, N, 2 * H))
    for b, n in enumerate(lengths):
        forward, _ = lstm_np(x[b:b + 1, :n], *forward_params)
        backward, _ = lstm_np(x[b:b + 1, :n][:, ::-1], *backward_params)  # read right to left
        out[b, :n, :H], out[b, :n, H:] = forward[0], backward[0, ::-1]  # ←h_i back at i
    return out


@checked(h="float (B, N, D) where mask", W="float (I, D)", b="float (I,)", v="float (I,)",
         w="float (D,)", mask="bool? (B, N)", uniform="bool", rules=[c.b0_number])
def classifier_np(h, W, b, v, w, b0, mask=None, uniform=False):
    """Attention classifier: e_i = vᵀ ReLU(W h_i + b), α = softmax(e), z = wᵀ Σ α_i h_i + b₀.

    h (B, N, D) encoder states, W (I, D), b (I,), v (I,) (a one-hidden-layer network of width
    I scores each position; ReLU as in the authors' code), w (D,), b0 scalar, mask (B, N) bool
    -> (log-odds z (B,), α (B, N)); P(pos) = σ(z). uniform=True freezes α to 1/n. Padded states
    may hold anything: they are set to 0 before they are read.
    """
    h = h if mask is None else hide(h, mask[..., None])  # padding may hold garbage: zeroed
    scores = np.maximum(h @ W.T + b, 0.0) @ v  # (B, N)
    alpha = softmax_np(np.zeros_like(scores) if uniform else scores, mask)
    return (alpha[..., None] * h).sum(1) @ w + b0, alpha


@checked(h="float (B, N, D)", w="float (D,)", labels="real (B,)", rules=[c.b0_number])
def classifier_probe_np(h, w, b0, labels):
    """β_i = σ(s · (wᵀ h_i + b₀)), s = +1 for a positive label, -1 for a negative one -> (B, N)."""
    sign = np.where(np.asarray(labels) > 0, 1.0, -1.0)[:, None]
    return sigmoid_np(sign * (h @ w + b0))


# ============================================================================ the agreement metric
@checked(rules=[c.score_rows])
def agreement_np(a, b, mask=None):
    """A(a, b) per row: 1.0 if argmax_i a_i is among the top ⌈5%·n⌉ positions of b, else 0.0.

    a, b (..., N) scores over n positions (mask (..., N) bool: True = real position; n = its
    count per row). Ties in b count in favour (only strictly larger values outrank). -> (...,)
    """
    a, b = np.asarray(a, float), np.asarray(b, float)  # lists of numbers too
    mask = np.ones(a.shape, bool) if mask is None else np.broadcast_to(mask, a.shape)
    # BEGIN EXERCISE 8.1 implement: the agreement metric A(a, b) (~10 min)
    n = mask.sum(-1)
    k = np.ceil(0.05 * n)  # the top 5%, at least one position
    best = np.where(mask, a, -np.inf).argmax(-1)  # (...,) argmax of a over real positions
    b_best = np.take_along_axis(b, best[..., None], -1)
    rank = (np.where(mask, b, -np.inf) > b_best).sum(-1)  # positions of b strictly above it
    return (rank < k).astype(float)
    # END EXERCISE


@checked(rules=[c.lengths_at_least_one])
def agreement_baseline_np(lengths):
    """Expected A(a, b) when argmax a is a uniformly random position: mean of ⌈5%·n⌉ / n."""
    n = np.asarray(lengths, dtype=float)
    return float(np.mean(np.ceil(0.05 * n) / n))


@checked(threshold="number", rules=[c.curves_of_one_length])
def contextualized_agreement(agreements, performances, threshold):
    """ξ (paper §3.1, eq. 11): the performance at the first checkpoint whose agreement
    *exceeds* `threshold` (strictly, as the authors' `passing_idx`), or None if none does.

    agreements[τ] = A(α*, α^τ) of re-seeded runs at checkpoint τ (averaged over the runs),
    performances[τ] their performance there; threshold = e.g. A(α, β^uf). ξ reads: "the
    probe agrees with α* as well as an attention that has reached this performance".
    """
    # BEGIN EXERCISE 8.2 implement: the contextualised agreement ξ (~10 min)
    for a, p in zip(agreements, performances):
        if a > threshold:
            return float(p)
    return None
    # END EXERCISE


# ============================================================================ Table 2
def counted_masks(M: int, T: int, N: int, key_mask, row_mask):
    """key_mask (M, N) or (M, T, N) as (M, T, N) and row_mask (M, T), bool NumPy arrays (None:
    every position, every row)."""
    keys = np.ones((M, N), bool) if key_mask is None else np.asarray(key_mask)
    rows = np.ones((M, T), bool) if row_mask is None else np.asarray(row_mask)
    keys = keys[:, None, :] if keys.ndim == 2 else keys
    return np.broadcast_to(keys, (M, T, N)), rows


@checked(a="real (..., M, T, N)", b="real (..., M, T, N)",
         rules=[c.masks_counted])
def mean_agreement_np(a, b, key_mask=None, row_mask=None):
    """A(a, b) averaged over every counted output word of a validation set (paper eq. 10).

    a, b (..., M, T, N): scores of M examples, T output words each (classification: T = 1),
    over N input positions; key_mask (M, N) or (M, T, N) bool: the real input positions;
    row_mask (M, T) bool: the output words that count (real, and e.g. not <unk>).
    Leading axes (checkpoints, say) are kept: returns a float, or an array of those axes.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    key_mask, row_mask = counted_masks(*a.shape[-3:], key_mask, row_mask)
    per_row = agreement_np(a, b, key_mask)  # (..., M, T)
    result = per_row[..., row_mask].mean(-1)
    return float(result) if np.ndim(result) == 0 else result


@checked(rules=[c.masks_counted])
def random_baseline_np(key_mask, row_mask=None):
    """Â: the expected A(a, b) when a's argmax is a uniformly random real position, averaged
    over the counted output words (key_mask (M, N) or (M, T, N), row_mask (M, T))."""
    keys = np.asarray(key_mask)
    M, N = keys.shape[0], keys.shape[-1]
    T = keys.shape[1] if keys.ndim == 3 else 1 if row_mask is None else np.shape(row_mask)[-1]
    key_mask, row_mask = counted_masks(M, T, N, key_mask, row_mask)
    n = key_mask.sum(-1)  # (M, T): real positions for each output word
    return agreement_baseline_np(n[row_mask])


@checked(rules=[c.runs_of_one_shape])
def agreement_row_np(gold, others, uniform, key_mask=None, row_mask=None):
    """One row of the paper's Table 2 from recorded runs (see the module's docstring).

    gold, each of others, uniform: dicts with "alpha" and "beta" (C, M, T, N) (attention and
    probe at C checkpoints, the same for every run) and "perf" (C,). β of `others[0]` gives
    A(α, β); the ξ curve averages all `others` (the authors: 5 re-seeded runs for
    classification, 1 for translation).
    Returns {"A(α, β^uf)", "A(α, β)", "A_rand", "ξ(α, β^uf)", "ξ(α, β)", "P*", "best",
    "curve", "curve_perf"}; a ξ is None when the curve never exceeds its threshold.
    """
    key_mask, row_mask = counted_masks(*np.shape(gold["alpha"])[1:], key_mask, row_mask)
    best = int(np.argmax(gold["perf"]))  # the first best checkpoint, as np.argmax in theirs
    alpha_star = np.asarray(gold["alpha"])[best]

    def agree_over_checkpoints(scores):  # A(α*, scores^τ) for every τ -> (C,)
        star = np.broadcast_to(alpha_star, np.shape(scores))
        return mean_agreement_np(star, scores, key_mask, row_mask)

    curve = np.mean([agree_over_checkpoints(run["alpha"]) for run in others], axis=0)
    curve_perf = np.mean([run["perf"] for run in others], axis=0)
    a_uf = float(agree_over_checkpoints(uniform["beta"]).max())
    a_beta = float(agree_over_checkpoints(others[0]["beta"]).max())
    return {"A(α, β^uf)": a_uf, "A(α, β)": a_beta,
            "A_rand": random_baseline_np(key_mask, row_mask),
            "ξ(α, β^uf)": contextualized_agreement(curve, curve_perf, a_uf),
            "ξ(α, β)": contextualized_agreement(curve, curve_perf, a_beta),
            "P*": float(gold["perf"][best]), "best": best, "curve": curve,
            "curve_perf": curve_perf}


# ============================================================================ torch twins
@checked(h="float (B, N, D) where mask", W="float (I, D)", b="float (I,)", v="float (I,)",
         w="float (D,)", mask="bool? (B, N)", uniform="bool", rules=[c.b0_number])
def classifier_torch(h, W, b, v, w, b0, mask=None, uniform=False):
    """Twin of classifier_np."""
    h = h if mask is None else hide(h, mask[..., None])  # padding may hold garbage: zeroed
    scores = torch.relu(h @ W.T + b) @ v
    alpha = softmax_torch(torch.zeros_like(scores) if uniform else scores, mask)
    return (alpha[..., None] * h).sum(1) @ w + b0, alpha


@checked(h="float (B, N, D)", w="float (D,)", labels="real (B,)", rules=[c.b0_number])
def classifier_probe_torch(h, w, b0, labels):
    """Twin of classifier_probe_np."""
    sign = torch.where(labels > 0, 1.0, -1.0).to(h.dtype)[:, None]
    return torch.sigmoid(sign * (h @ w + b0))


@checked(a="real* (..., N)", b="real* (..., N)", mask="bool? ~(..., N)",
         rules=[c.real_position_per_row])
def agreement_torch(a, b, mask=None):
    """Twin of agreement_np."""
    mask = torch.ones_like(a, dtype=torch.bool) if mask is None else mask.expand(a.shape)
    # BEGIN EXERCISE 8.1 implement: the agreement metric, torch twin
    k = torch.ceil(0.05 * mask.sum(-1))
    neg = torch.tensor(float("-inf"), dtype=a.dtype, device=a.device)
    best = torch.where(mask, a, neg).argmax(-1, keepdim=True)
    rank = (torch.where(mask, b, neg) > b.gather(-1, best)).sum(-1)
    return (rank < k).to(a.dtype)
    # END EXERCISE


# ============================================================================ the models
class AttentionClassifier(nn.Module):
    """Bidirectional LSTM encoder + MLP attention + linear read-out: the paper's §2.4
    classifier in the layout of the authors' `classification/classifier_model.py`.

        h_i = [→h_i ; ←h_i]  (each direction a one-layer LSTM of width `hidden`)
        e_i = vᵀ ReLU(W h_i + b),  α = softmax(e),  z = wᵀ Σ_i α_i h_i + b₀,  P(pos) = σ(z)

        x (B, N) token ids, mask (B, N) bool (True = real token; padding at the end)
        -> log-odds z (B,), α (B, N)
    uniform=True freezes α to 1/n over the real tokens. The authors' score layer has a bias
    after v; a softmax ignores a constant, so it is left out here.
    """

    @checked(n_vocab="int >= 1", hidden="int >= 1", embed="int? >= 1", attn_hidden="int? >= 1")
    def __init__(self, n_vocab: int, hidden: int = 64, embed: int | None = None,
                 attn_hidden: int | None = None, uniform: bool = False):
        super().__init__()
        self.uniform = uniform
        embed = hidden if embed is None else embed
        attn_hidden = hidden if attn_hidden is None else attn_hidden
        self.embed = nn.Embedding(n_vocab, embed)
        self.forward_lstm = nn.LSTM(embed, hidden, batch_first=True)  # reads x_1..x_n
        self.backward_lstm = nn.LSTM(embed, hidden, batch_first=True)  # reads x_n..x_1
        self.attn = nn.Linear(2 * hidden, attn_hidden)  # W, b
        self.v = nn.Linear(attn_hidden, 1, bias=False)  # v
        self.readout = nn.Linear(2 * hidden, 1)  # w, b₀

    @checked(x="int (B, N) < self.embed", mask="bool? (B, N)", rules=[c.prefix_mask])
    def states(self, x, mask=None):
        """Encoder states h (B, N, 2H), zero at padded positions (the twin of `bilstm_np`)."""
        B, N = x.shape
        mask = torch.ones(B, N, dtype=torch.bool, device=x.device) if mask is None else mask
        positions = torch.arange(N, device=x.device).expand(B, N)
        lengths = mask.sum(1, keepdim=True)  # (B, 1)
        e = self.embed(x)  # (B, N, E)
        forward, _ = self.forward_lstm(e)
        # reverse each row's real prefix (n-1-i for i < n), leave the padding where it is:
        # the backward LSTM then starts at the row's last real token, as with packing
        flip = torch.where(mask, lengths - 1 - positions, positions)[..., None]
        backward, _ = self.backward_lstm(e.gather(1, flip.expand_as(e)))
        backward = backward.gather(1, flip.expand_as(backward))  # the flip is its own inverse
        return torch.cat([forward, backward], dim=-1) * mask[..., None]

    def forward(self, x, mask=None):
        return classifier_torch(self.states(x, mask), self.attn.weight, self.attn.bias,
                                self.v.weight[0], self.readout.weight[0], self.readout.bias[0],
                                mask, self.uniform)

    @torch.no_grad()
    def position_logits(self, x, mask=None):
        """Log-odds wᵀ h_i + b₀ obtained by attending only to position i -> (B, N)."""
        return self.readout(self.states(x, mask))[..., 0]

    @torch.no_grad()
    def probe(self, x, labels, mask=None):
        """Lexical probe β (B, N) = σ(s · (wᵀ h_i + b₀))."""
        return classifier_probe_torch(self.states(x, mask), self.readout.weight[0],
                                      self.readout.bias[0], labels)


class Seq2SeqAttention(nn.Module):
    """LSTM encoder-decoder with Luong attention (one layer each, unidirectional): lesson 05's
    reference functions (`luong_attention_torch`, `output_torch`, `lexical_probe_torch`) as
    one module, for translation.

    The decoder runs as one nn.LSTM call under teacher forcing (input y_{t-1}, no input
    feeding) and starts from a zero state (*choice*: it sees the source only through
    attention, and padding at the end of the source changes nothing). heads=K sums K heads;
    uniform=True freezes attention to uniform.

        src (B, N), tgt_in (B, T) (y shifted right, BOS first), src_mask (B, N) bool
        -> logits (B, T, V_y), α (B, K, T, N)
    """

    @checked(n_src="int >= 1", n_tgt="int >= 1", hidden="int >= 1", embed="int? >= 1",
             heads="int >= 1")
    def __init__(self, n_src: int, n_tgt: int, hidden: int = 256, embed: int | None = None,
                 heads: int = 1, uniform: bool = False):
        super().__init__()
        self.uniform = uniform
        embed = hidden if embed is None else embed
        self.src_embed, self.tgt_embed = nn.Embedding(n_src, embed), nn.Embedding(n_tgt, embed)
        self.encoder = nn.LSTM(embed, hidden, batch_first=True)
        self.decoder = nn.LSTM(embed, hidden, batch_first=True)
        self.W_a = nn.Parameter(torch.randn(heads, hidden, hidden) / math.sqrt(hidden))
        self.hidden_layer = nn.Linear(2 * hidden, hidden)  # W₁, b₁ of g
        self.out = nn.Linear(hidden, n_tgt)  # W₂, b₂ of g

    @checked(src="int (B, N) < self.src_embed", tgt_in="int (B, T) < self.tgt_embed")
    def states(self, src, tgt_in):
        """Encoder states h (B, N, H) and decoder states s (B, T, H)."""
        h, _ = self.encoder(self.src_embed(src))
        s, _ = self.decoder(self.tgt_embed(tgt_in))
        return h, s

    def output_params(self):
        return (self.hidden_layer.weight, self.hidden_layer.bias, self.out.weight, self.out.bias)

    @checked(src="int (B, N)", tgt_in="int (B, T)", src_mask="bool? (B, N)")
    def forward(self, src, tgt_in, src_mask=None):
        h, s = self.states(src, tgt_in)
        context, alpha = luong_attention_torch(s, h, self.W_a, src_mask, self.uniform)
        return output_torch(context, s, *self.output_params()), alpha

    @torch.no_grad()
    @checked(tgt_in="int (B, T)", tgt_out="int (B, T) < self.out")
    def probe(self, src, tgt_in, tgt_out):
        """Lexical probe β (B, T, N): p_t(y_t) with c_t := h_i."""
        h, s = self.states(src, tgt_in)
        return lexical_probe_torch(h, s, tgt_out, *self.output_params())
