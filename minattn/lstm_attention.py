"""Attention in LSTM models, and the tools to watch how it is learned (lesson 05).

Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns" (2021).
Notation (the paper's §2.1-2.4, eqs. 1-9): input x_1..x_n with encoder states h_i, output
y_1..y_m with decoder states s_t.

    Luong "general" attention   e_ti = s_tᵀ W_a h_i,  α_t = softmax_i(e_t),  c_t = Σ_i α_ti h_i
    output network              p_t = softmax(g([c_t ; s_t])),  g(z) = W₂ tanh(W₁ z + b₁) + b₂
    H heads, summed             c_t = Σ_h Σ_i α^h_ti h_i      (each head its own W_a^h)
    classifier                  e_i = vᵀ ReLU(W h_i + b),  P(pos) = σ(wᵀ Σ_i α_i h_i + b₀)
    lexical probe β_ti          p_t(y_t) when c_t := h_i (attend to position i only)
    agreement A(a, b)           1 if argmax_i a_i is among the top ⌈5%·n⌉ positions of b

Layout: NumPy reference (LSTM cell, attention, output network, probes, agreement), its torch
twin, then the two trainable models `Seq2SeqAttention` and `AttentionClassifier`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .attention import softmax_np, softmax_torch
from .tools.utils import (check_array, check_finite, check_ids, check_number, check_same_device,
                          check_same_dtype, check_size, describe, fail, hide, shape_str)


def check_states(s, h, mask=None, mask_name: str = "mask") -> None:
    """Decoder states s (B, T, H) and encoder states h (B, N, H) must fit; mask (B, N) bool.
    One library, dtype and device; s finite, h finite on the real tokens."""
    like = torch.Tensor if isinstance(h, torch.Tensor) else np.ndarray
    check_array("s", s, "float", like=like, hint="(B, T, H)")
    check_array("h", h, "float", like=like, hint="(B, N, H)")
    if s.ndim != 3 or h.ndim != 3 or s.shape[0] != h.shape[0] or s.shape[2] != h.shape[2]:
        fail("decoder/encoder states do not fit", "s (B, T, H) and h (B, N, H)",
             f"s {shape_str(s.shape)}, h {shape_str(h.shape)}")
    check_source_mask(mask, h, mask_name)
    check_same_dtype(s=s, h=h)
    check_same_device(s=s, h=h)
    check_finite("s", s)
    check_finite("h", h, where=None if mask is None else mask[..., None])


def check_source_mask(mask, h, mask_name: str = "mask") -> None:
    """mask None or (B, N) bool (True = real token), h's library and device, no empty row."""
    if mask is None:
        return
    like = torch.Tensor if isinstance(h, torch.Tensor) else np.ndarray
    if not isinstance(mask, like) or tuple(mask.shape) != (h.shape[0], h.shape[1]) \
            or mask.dtype not in (bool, np.bool_, torch.bool):
        fail(f"source mask ({mask_name})", f"bool of shape {shape_str(h.shape[:2])} (True = "
             "real token)", describe(mask))
    check_same_device(h=h, **{mask_name: mask})


def check_lstm_cell(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh) -> None:
    """x (B, d), h and c (B, H); weight_ih (4H, d), weight_hh (4H, H), biases (4H,)."""
    like = torch.Tensor if isinstance(x, torch.Tensor) else np.ndarray
    arrays = dict(x=x, h=h, c=c, weight_ih=weight_ih, weight_hh=weight_hh, bias_ih=bias_ih,
                  bias_hh=bias_hh)
    for name, a in arrays.items():
        check_array(name, a, "float", like=like)
    B, d, H = x.shape[0], x.shape[-1], weight_hh.shape[-1]
    want = dict(x=(B, d), h=(B, H), c=(B, H), weight_ih=(4 * H, d), weight_hh=(4 * H, H),
                bias_ih=(4 * H,), bias_hh=(4 * H,))
    for name, a in arrays.items():
        if tuple(a.shape) != want[name]:
            fail(name, f"shape {shape_str(want[name])} (x (B, d), h and c (B, H), weight_ih "
                 "(4H, d), weight_hh (4H, H), biases (4H,))", describe(a))
    check_same_dtype(**arrays)
    check_same_device(**arrays)
    for name, a in arrays.items():
        check_finite(name, a)


# ============================================================================ NumPy reference
def sigmoid_np(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def lstm_cell_np(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    """One LSTM step, gates written out (PyTorch's layout: rows i, f, g, o of the weights).

    x (B, d), h and c (B, H); weight_ih (4H, d), weight_hh (4H, H), biases (4H,) -> (h', c').
        i = σ(W_i x + U_i h + b_i)   input gate     f = σ(...)  forget gate
        g = tanh(W_g x + U_g h + b_g) candidate     o = σ(...)  output gate
        c' = f ⊙ c + i ⊙ g,   h' = o ⊙ tanh(c')
    """
    check_lstm_cell(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh)
    gates = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh  # (B, 4H)
    i, f, g, o = np.split(gates, 4, axis=-1)
    c_new = sigmoid_np(f) * c + sigmoid_np(i) * np.tanh(g)
    return sigmoid_np(o) * np.tanh(c_new), c_new


def lstm_np(x, weight_ih, weight_hh, bias_ih, bias_hh, state=None):
    """A one-layer LSTM over a sequence: x (B, N, d) -> outputs (B, N, H), (h_N, c_N)."""
    check_array("x", x, "float", ndim=3, like=np.ndarray, hint="(B, N, d)")
    check_array("weight_hh", weight_hh, "float", ndim=2, like=np.ndarray, hint="(4H, H)")
    B, H = x.shape[0], weight_hh.shape[1]
    h, c = state if state is not None else (np.zeros((B, H)), np.zeros((B, H)))
    outputs = []
    for t in range(x.shape[1]):
        h, c = lstm_cell_np(x[:, t], h, c, weight_ih, weight_hh, bias_ih, bias_hh)
        outputs.append(h)
    return np.stack(outputs, axis=1), (h, c)


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


def luong_attention_np(s, h, W_a, mask=None, uniform=False):
    """Luong "general" attention with K heads summed.

    s (B, T, H) decoder states, h (B, N, H) encoder states, W_a (K, H, H), mask (B, N) bool
    (True = real token) -> context (B, T, H), weights α (B, K, T, N).
    uniform=True freezes α to 1/n over the real tokens (W_a is then unused).
    Padded encoder states may hold anything: they are set to 0 before they are read.
    """
    check_luong(s, h, W_a, mask)
    h = h if mask is None else hide(h, mask[..., None])
    # BEGIN EXERCISE 5.1 implement: the Luong attention step (scores, softmax, context) (~10 min)
    scores = np.einsum("btd,kde,bne->bktn", s, W_a, h)  # e^k_ti = s_tᵀ W_a^k h_i
    if uniform:
        scores = np.zeros_like(scores)  # equal scores: softmax gives 1/n over the real tokens
    m = None if mask is None else mask[:, None, None, :]  # (B, 1, 1, N)
    alpha = softmax_np(scores, m)  # (B, K, T, N)
    context = np.einsum("bktn,bnd->btd", alpha, h)  # c_t = Σ_k Σ_i α^k_ti h_i
    # END EXERCISE
    return context, alpha


def check_luong(s, h, W_a, mask) -> None:
    check_states(s, h, mask)
    check_array("W_a", W_a, "float", ndim=3, like=type(h) if isinstance(h, torch.Tensor)
                else np.ndarray, hint=f"(K, {h.shape[-1]}, {h.shape[-1]})")
    if W_a.shape[1:] != (h.shape[-1], h.shape[-1]) or W_a.shape[0] < 1:
        fail("W_a", f"(K, H, H) = (K, {h.shape[-1]}, {h.shape[-1]}), one matrix per head",
             describe(W_a))
    check_same_dtype(h=h, W_a=W_a)
    check_same_device(h=h, W_a=W_a)
    check_finite("W_a", W_a)


def check_output(context, s, W1, b1, W2, b2) -> None:
    """context and s (..., H); W1 (h1, 2H), b1 (h1,), W2 (V, h1), b2 (V,)."""
    like = torch.Tensor if isinstance(s, torch.Tensor) else np.ndarray
    arrays = dict(context=context, s=s, W1=W1, b1=b1, W2=W2, b2=b2)
    for name, a in arrays.items():
        check_array(name, a, "float", like=like)
    H = s.shape[-1]
    if context.shape != s.shape or W1.ndim != 2 or W1.shape[1] != 2 * H or \
            tuple(b1.shape) != (W1.shape[0],) or W2.ndim != 2 or W2.shape[1] != W1.shape[0] or \
            tuple(b2.shape) != (W2.shape[0],):
        fail("W1", f"context and s of one shape (..., H = {H}), W1 (h1, 2H = {2 * H}), b1 (h1,), "
             "W2 (V, h1), b2 (V,)", ", ".join(f"{n} {shape_str(a.shape)}" for n, a in arrays.items()))
    check_same_dtype(**arrays)
    check_same_device(**arrays)
    for name, a in arrays.items():
        check_finite(name, a)


def output_np(context, s, W1, b1, W2, b2):
    """The output network g([c_t ; s_t]) = W₂ tanh(W₁ [c_t ; s_t] + b₁) + b₂ -> logits (.., V)."""
    check_output(context, s, W1, b1, W2, b2)
    z = np.concatenate([context, s], axis=-1)
    return np.tanh(z @ W1.T + b1) @ W2.T + b2


def log_softmax_np(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def lexical_probe_np(h, s, targets, W1, b1, W2, b2):
    """β_ti = p_t(y_t) when the model attends only to position i, i.e. c_t := h_i.

    h (B, N, H), s (B, T, H), targets (B, T) int -> β (B, T, N).
    """
    check_probe(h, s, targets, W2)
    N, T = h.shape[1], s.shape[1]
    c = np.broadcast_to(h[:, None], (h.shape[0], T, N, h.shape[2]))  # (B, T, N, H): c_t := h_i
    st = np.broadcast_to(s[:, :, None], c.shape)
    logp = log_softmax_np(output_np(c, st, W1, b1, W2, b2))  # (B, T, N, V)
    idx = np.broadcast_to(targets[:, :, None, None], (*c.shape[:3], 1))
    return np.exp(np.take_along_axis(logp, idx, axis=-1)[..., 0])


def check_probe(h, s, targets, W2, targets_name: str = "targets") -> None:
    """h (B, N, H), s (B, T, H), targets (B, T) ids in [0, V) with V = W2's rows."""
    check_states(s, h)
    check_array(targets_name, targets, "int", like=type(h) if isinstance(h, torch.Tensor)
                else np.ndarray, hint="(B, T) ids")
    if tuple(targets.shape) != tuple(s.shape[:2]):
        fail(targets_name, f"shape (B, T) = {shape_str(s.shape[:2])}", describe(targets))
    check_ids(targets_name, targets, W2.shape[0], "the output vocabulary")


def check_classifier(h, W, b, v, w, b0, mask) -> None:
    """h (B, N, H), W (H', H), b (H',), v (H',), w (H,), b0 a number; mask (B, N) bool."""
    like = torch.Tensor if isinstance(h, torch.Tensor) else np.ndarray
    check_array("h", h, "float", ndim=3, like=like, hint="(B, N, H)")
    arrays = dict(h=h, W=W, b=b, v=v, w=w)
    for name, a in arrays.items():
        check_array(name, a, "float", like=like)
    H = h.shape[-1]
    if W.ndim != 2 or W.shape[1] != H or tuple(b.shape) != (W.shape[0],) or \
            tuple(v.shape) != (W.shape[0],) or tuple(w.shape) != (H,):
        fail("W", f"W (H', H = {H}), b (H',), v (H',), w (H,)",
             ", ".join(f"{n} {shape_str(a.shape)}" for n, a in arrays.items()))
    if not (isinstance(b0, torch.Tensor) and b0.ndim == 0):
        check_number("b0", b0)
    check_source_mask(mask, h)
    check_same_dtype(**arrays)
    check_same_device(**arrays)
    check_finite("h", h, where=None if mask is None else mask[..., None])
    for name, a in list(arrays.items())[1:]:
        check_finite(name, a)


def classifier_np(h, W, b, v, w, b0, mask=None, uniform=False):
    """Attention classifier: e_i = vᵀ ReLU(W h_i + b), α = softmax(e), P = σ(wᵀ Σ α_i h_i + b₀).

    h (B, N, D) encoder states, W (I, D), b (I,), v (I,) (a one-hidden-layer network of width
    I scores each position; ReLU as in the authors' code), w (D,), b0 scalar, mask (B, N) bool
    -> (log-odds z (B,), α (B, N)); P(pos) = σ(z). uniform=True freezes α to 1/n. Padded states
    may hold anything: they are set to 0 before they are read.
    """
    check_classifier(h, W, b, v, w, b0, mask)
    h = h if mask is None else hide(h, mask[..., None])
    scores = np.maximum(h @ W.T + b, 0.0) @ v  # (B, N)
    alpha = softmax_np(np.zeros_like(scores) if uniform else scores, mask)
    return (alpha[..., None] * h).sum(1) @ w + b0, alpha


def classifier_probe_np(h, w, b0, labels):
    """β_i = σ(s · (wᵀ h_i + b₀)), s = +1 for a positive label, -1 for a negative one -> (B, N)."""
    check_classifier_probe(h, w, b0, labels)
    sign = np.where(np.asarray(labels) > 0, 1.0, -1.0)[:, None]
    return sigmoid_np(sign * (h @ w + b0))


def check_classifier_probe(h, w, b0, labels) -> None:
    """h (B, N, H), w (H,), b0 a number, labels (B,) of h's library."""
    like = torch.Tensor if isinstance(h, torch.Tensor) else np.ndarray
    check_array("h", h, "float", ndim=3, like=like, hint="(B, N, H)")
    check_array("w", w, "float", ndim=1, like=like, hint=f"({h.shape[-1]},)")
    labels = np.asarray(labels) if like is np.ndarray else labels
    check_array("labels", labels, None, ndim=1, like=like, hint=f"({h.shape[0]},)")
    if labels.shape[0] != h.shape[0] or w.shape[0] != h.shape[-1]:
        fail("labels", f"({h.shape[0]},) labels and w ({h.shape[-1]},)",
             f"labels {shape_str(labels.shape)}, w {shape_str(w.shape)}")
    if not (isinstance(b0, torch.Tensor) and b0.ndim == 0):
        check_number("b0", b0)
    check_same_dtype(h=h, w=w)
    check_same_device(h=h, w=w, labels=labels)
    check_finite("h", h)
    check_finite("w", w)


def check_agreement(a, b, mask):
    """a, b (..., N) of one shape, library and device; mask None or bool broadcastable to it
    with at least one real position per row; a and b finite on the real positions. Returns
    the mask, broadcast."""
    like = torch.Tensor if isinstance(a, torch.Tensor) else np.ndarray
    check_array("a", a, None, like=like)
    check_array("b", b, None, like=like)
    if a.shape != b.shape or a.ndim < 1:
        fail("agreement needs two score arrays of one shape", "a, b (..., N)",
             f"{shape_str(a.shape)} and {shape_str(b.shape)}")
    check_same_device(a=a, b=b, mask=mask)
    if mask is None:
        mask = torch.ones_like(a, dtype=torch.bool) if like is torch.Tensor else \
            np.ones(a.shape, bool)
    else:
        check_array("mask", mask, "bool", like=like, hint="(..., N), True = real position")
        try:
            mask = mask.expand(a.shape) if like is torch.Tensor else np.broadcast_to(mask, a.shape)
        except (RuntimeError, ValueError):
            fail("mask", f"a bool mask broadcastable to {shape_str(a.shape)}", describe(mask))
    if a.shape[-1] == 0 or not bool(mask.any(-1).all()):
        fail("mask", "at least one real position in every row", "a row with none")
    check_finite("a", a, where=mask)
    check_finite("b", b, where=mask)
    return mask


def agreement_np(a, b, mask=None):
    """A(a, b) per row: 1.0 if argmax_i a_i is among the top ⌈5%·n⌉ positions of b, else 0.0.

    a, b (..., N) scores over n positions (mask (..., N) bool: True = real position; n = its
    count per row). Ties in b count in favour (only strictly larger values outrank). -> (...,)
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    mask = check_agreement(a, b, None if mask is None else np.asarray(mask))
    # BEGIN EXERCISE 5.2 implement: the agreement metric A(a, b) (~10 min)
    n = mask.sum(-1)
    k = np.ceil(0.05 * n)  # the top 5%, at least one position
    best = np.where(mask, a, -np.inf).argmax(-1)  # (...,) argmax of a over real positions
    b_best = np.take_along_axis(b, best[..., None], -1)
    rank = (np.where(mask, b, -np.inf) > b_best).sum(-1)  # positions of b strictly above it
    return (rank < k).astype(float)
    # END EXERCISE


def agreement_baseline_np(lengths):
    """Expected A(a, b) when argmax a is a uniformly random position: mean of ⌈5%·n⌉ / n."""
    n = np.asarray(lengths)
    if n.size == 0 or n.dtype.kind not in "iu" or (n < 1).any():
        fail("agreement baseline lengths", "a non-empty list of integer lengths >= 1",
             repr(lengths))
    n = n.astype(float)
    return float(np.mean(np.ceil(0.05 * n) / n))


def contextualized_agreement(agreements, performances, threshold):
    """ξ (paper §3.1, eq. 11): the performance at the first checkpoint whose agreement
    *exceeds* `threshold` (strictly, as the authors' `passing_idx`), or None if none does.

    agreements[τ] = A(α*, α^τ) of re-seeded runs at checkpoint τ (averaged over the runs),
    performances[τ] their performance there; threshold = e.g. A(α*, β^uf). ξ reads: "the
    probe agrees with α* as well as an attention that has reached this performance".
    """
    if len(agreements) != len(performances) or not len(agreements):
        fail("contextualized agreement curves", "two non-empty lists of one length",
             f"{len(agreements)} and {len(performances)}")
    threshold = check_number("threshold", threshold)
    for name, values in (("agreements", agreements), ("performances", performances)):
        for value in values:
            check_number(name, value)
    for a, p in zip(agreements, performances):
        if a > threshold:
            return float(p)
    return None


# ============================================================================ torch twins
def lstm_cell_torch(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    """Twin of lstm_cell_np (and of nn.LSTMCell given the same weights)."""
    check_lstm_cell(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh)
    gates = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh  # (B, 4H)
    i, f, g, o = gates.chunk(4, dim=-1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_new), c_new


def luong_attention_torch(s, h, W_a, mask=None, uniform=False):
    """Twin of luong_attention_np: (context (B, T, H), α (B, K, T, N))."""
    check_luong(s, h, W_a, mask)
    h = h if mask is None else hide(h, mask[..., None])
    # BEGIN EXERCISE 5.1 implement: the Luong attention step, torch twin
    scores = torch.einsum("btd,kde,bne->bktn", s, W_a, h)
    if uniform:
        scores = torch.zeros_like(scores).detach()
    m = None if mask is None else mask[:, None, None, :]
    alpha = softmax_torch(scores, m)
    context = torch.einsum("bktn,bnd->btd", alpha, h)
    # END EXERCISE
    return context, alpha


def output_torch(context, s, W1, b1, W2, b2):
    """Twin of output_np."""
    check_output(context, s, W1, b1, W2, b2)
    return torch.tanh(torch.cat([context, s], dim=-1) @ W1.T + b1) @ W2.T + b2


def lexical_probe_torch(h, s, targets, W1, b1, W2, b2):
    """Twin of lexical_probe_np, one example at a time (the (T, N, V) logits stay small)."""
    check_probe(h, s, targets, W2)
    betas = []
    for hb, sb, yb in zip(h, s, targets):  # (N, H), (T, H), (T,)
        T, N = sb.shape[0], hb.shape[0]
        c = hb[None].expand(T, N, -1)
        logp = output_torch(c, sb[:, None].expand_as(c), W1, b1, W2, b2).log_softmax(-1)
        betas.append(logp.gather(-1, yb[:, None, None].expand(T, N, 1))[..., 0].exp())
    return torch.stack(betas)


def classifier_torch(h, W, b, v, w, b0, mask=None, uniform=False):
    """Twin of classifier_np."""
    check_classifier(h, W, b, v, w, b0, mask)
    h = h if mask is None else hide(h, mask[..., None])
    scores = torch.relu(h @ W.T + b) @ v
    alpha = softmax_torch(torch.zeros_like(scores) if uniform else scores, mask)
    return (alpha[..., None] * h).sum(1) @ w + b0, alpha


def classifier_probe_torch(h, w, b0, labels):
    """Twin of classifier_probe_np."""
    check_classifier_probe(h, w, b0, labels)
    sign = torch.where(labels > 0, 1.0, -1.0).to(h.dtype)[:, None]
    return torch.sigmoid(sign * (h @ w + b0))


def agreement_torch(a, b, mask=None):
    """Twin of agreement_np."""
    mask = check_agreement(a, b, mask)
    # BEGIN EXERCISE 5.2 implement: the agreement metric, torch twin
    k = torch.ceil(0.05 * mask.sum(-1))
    neg = torch.tensor(-math.inf, dtype=a.dtype, device=a.device)
    best = torch.where(mask, a, neg).argmax(-1, keepdim=True)
    rank = (torch.where(mask, b, neg) > b.gather(-1, best)).sum(-1)
    return (rank < k).to(a.dtype)
    # END EXERCISE


# ============================================================================ models
class Seq2SeqAttention(nn.Module):
    """LSTM encoder-decoder with Luong attention (one layer each, unidirectional).

    The decoder runs as one nn.LSTM call under teacher forcing (input y_{t-1}, no input
    feeding) and starts from a zero state (*choice*: it sees the source only through
    attention, and padding at the end of the source changes nothing). heads=K sums K heads;
    uniform=True freezes attention to uniform.

        src (B, N), tgt_in (B, T) (y shifted right, BOS first), src_mask (B, N) bool
        -> logits (B, T, V_y), α (B, K, T, N)
    """

    def __init__(self, n_src: int, n_tgt: int, hidden: int = 256, embed: int | None = None,
                 heads: int = 1, uniform: bool = False):
        super().__init__()
        for name, value in (("n_src", n_src), ("n_tgt", n_tgt), ("hidden", hidden), ("heads", heads)):
            if isinstance(value, (int, np.integer)) and value < 1:
                fail("Seq2SeqAttention sizes", "positive n_src, n_tgt, hidden, heads",
                     f"{n_src}, {n_tgt}, {hidden}, {heads}")
            check_size(name, value, 1)
        embed = hidden if embed is None else check_size("embed", embed, 1)
        self.uniform = uniform
        self.src_embed, self.tgt_embed = nn.Embedding(n_src, embed), nn.Embedding(n_tgt, embed)
        self.encoder = nn.LSTM(embed, hidden, batch_first=True)
        self.decoder = nn.LSTM(embed, hidden, batch_first=True)
        self.W_a = nn.Parameter(torch.randn(heads, hidden, hidden) / math.sqrt(hidden))
        self.hidden_layer = nn.Linear(2 * hidden, hidden)  # W₁, b₁ of g
        self.out = nn.Linear(hidden, n_tgt)  # W₂, b₂ of g

    def states(self, src, tgt_in):
        """Encoder states h (B, N, H) and decoder states s (B, T, H)."""
        if src.ndim != 2 or tgt_in.ndim != 2 or src.shape[0] != tgt_in.shape[0]:
            fail("Seq2SeqAttention inputs", "src (B, N) and tgt_in (B, T) token ids",
                 f"{shape_str(src.shape)} and {shape_str(tgt_in.shape)}")
        for name, ids, table in (("src", src, self.src_embed), ("tgt_in", tgt_in, self.tgt_embed)):
            check_array(name, ids, "int", like=torch.Tensor, hint="token ids")
            check_ids(name, ids, table.num_embeddings)
        check_same_device(src=src, tgt_in=tgt_in, weights=self.W_a)
        h, _ = self.encoder(self.src_embed(src))
        s, _ = self.decoder(self.tgt_embed(tgt_in))
        return h, s

    def output_params(self):
        return (self.hidden_layer.weight, self.hidden_layer.bias, self.out.weight, self.out.bias)

    def forward(self, src, tgt_in, src_mask=None):
        if src_mask is not None:
            check_source_mask(src_mask, src[..., None], "src_mask")
        h, s = self.states(src, tgt_in)
        context, alpha = luong_attention_torch(s, h, self.W_a, src_mask, self.uniform)
        return output_torch(context, s, *self.output_params()), alpha

    @torch.no_grad()
    def probe(self, src, tgt_in, tgt_out):
        """Lexical probe β (B, T, N): p_t(y_t) with c_t := h_i."""
        h, s = self.states(src, tgt_in)
        check_probe(h, s, tgt_out, self.out.weight, "tgt_out")
        return lexical_probe_torch(h, s, tgt_out, *self.output_params())


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

    def __init__(self, n_vocab: int, hidden: int = 64, embed: int | None = None,
                 attn_hidden: int | None = None, uniform: bool = False):
        super().__init__()
        n_vocab, hidden = check_size("n_vocab", n_vocab, 1), check_size("hidden", hidden, 1)
        embed = hidden if embed is None else check_size("embed", embed, 1)
        attn_hidden = hidden if attn_hidden is None else check_size("attn_hidden", attn_hidden, 1)
        self.uniform = uniform
        self.embed = nn.Embedding(n_vocab, embed)
        self.forward_lstm = nn.LSTM(embed, hidden, batch_first=True)  # reads x_1..x_n
        self.backward_lstm = nn.LSTM(embed, hidden, batch_first=True)  # reads x_n..x_1
        self.attn = nn.Linear(2 * hidden, attn_hidden)  # W, b
        self.v = nn.Linear(attn_hidden, 1, bias=False)  # v
        self.readout = nn.Linear(2 * hidden, 1)  # w, b₀

    def states(self, x, mask=None):
        """Encoder states h (B, N, 2H), zero at padded positions (the twin of `bilstm_np`)."""
        if x.ndim != 2:
            fail("AttentionClassifier input", "token ids (B, N)", shape_str(x.shape))
        check_array("x", x, "int", like=torch.Tensor, hint="(B, N) token ids")
        check_ids("x", x, self.embed.num_embeddings)
        check_same_device(x=x, weights=self.readout.weight)
        B, N = x.shape
        positions = torch.arange(N, device=x.device).expand(B, N)
        ok = mask is None or (tuple(mask.shape) == (B, N) and mask.dtype == torch.bool)
        lengths = torch.full((B,), N, device=x.device) if mask is None or not ok else mask.sum(1)
        if not ok or (mask is not None and not torch.equal(mask, positions < lengths[:, None])):
            fail("AttentionClassifier mask", f"bool {shape_str((B, N))}, True on a prefix of "
                 "each row (padding at the end)", f"{mask.dtype} {shape_str(mask.shape)}")
        e = self.embed(x)  # (B, N, E)
        forward, _ = self.forward_lstm(e)
        # reverse each row's real prefix (n-1-i for i < n), leave the padding where it is:
        # the backward LSTM then starts at the row's last real token, as with packing
        flip = torch.where(positions < lengths[:, None], lengths[:, None] - 1 - positions,
                           positions)[..., None]
        backward, _ = self.backward_lstm(e.gather(1, flip.expand_as(e)))
        backward = backward.gather(1, flip.expand_as(backward))  # the flip is its own inverse
        real = (positions < lengths[:, None])[..., None]
        return torch.cat([forward, backward], dim=-1) * real

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
