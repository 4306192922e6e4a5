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

Layout: NumPy reference (LSTM cell, attention, output network, probes), then its torch twin.
The agreement metric A(a, b) is in `agreement.py`, the two trainable models
`Seq2SeqAttention` and `AttentionClassifier` in `model.py`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..attention import softmax_np, softmax_torch
from ..tools.utils import (
    check_array,
    check_finite,
    check_ids,
    check_number,
    check_same_device,
    check_same_dtype,
    describe,
    fail,
    hide,
    shape_str,
)


def check_decoder_encoder_states(s, h, mask=None, mask_name: str = "mask") -> None:
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
    check_decoder_encoder_states(s, h, mask)
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
             "W2 (V, h1), b2 (V,)",
             ", ".join(f"{n} {shape_str(a.shape)}" for n, a in arrays.items()))
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
    check_decoder_encoder_states(s, h)
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
