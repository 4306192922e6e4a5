"""Attention in an LSTM encoder-decoder, and why it is learned (lesson 05).

Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns" (2021).
Notation (the paper's §2.1-2.2, eqs. 1-4): input x_1..x_n with encoder states h_i, output
y_1..y_m with decoder states s_t.

    Luong "general" attention   e_ti = s_tᵀ W_a h_i,  α_t = softmax_i(e_t),  c_t = Σ_i α_ti h_i
    output network              p_t = softmax(g([c_t ; s_t])),  g(z) = W₂ tanh(W₁ z + b₁) + b₂
    H heads, summed             c_t = Σ_h Σ_i α^h_ti h_i      (each head its own W_a^h)
    lexical probe β_ti          p_t(y_t) when c_t := h_i (attend to position i only)
    the scores' gradient        ∂ log p_t(y_t) / ∂e_ti = α_ti (u_t·h_i − Σ_j α_tj u_t·h_j),
                                u_t = ∂ log p_t(y_t) / ∂c_t: attention follows the probe

Layout: NumPy reference (LSTM cell, attention, output network, probe, the scores' gradient),
then its torch twin (the gradient's twin is torch's autograd itself: the tests compare them).
The authors' copy model is in `official.py`; the classifier and the translation model of
Table 2 are lesson 08's (`minattn.agreement`).
"""

from __future__ import annotations

import numpy as np
import torch

from ..attention import softmax_np, softmax_torch
from ..checks import (
    check_array,
    check_finite,
    check_ids,
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


def output_gradient_np(context, s, targets, W1, b1, W2, b2):
    """u_t = ∂ log p_t(y_t) / ∂c_t: how the log-probability of the right word changes with the
    context, back through the output network g (`output_np`):

        a = tanh(W₁ [c ; s] + b₁),   p = softmax(W₂ a + b₂)
        ∂ log p_y / ∂(W₂ a + b₂) = onehot(y) − p
        u = (W₁'s first H columns)ᵀ ((1 − a²) ⊙ W₂ᵀ (onehot(y) − p))

    context and s (B, T, H), targets (B, T) ids -> u (B, T, H).
    """
    check_output(context, s, W1, b1, W2, b2)
    check_probe(context, s, targets, W2)
    a = np.tanh(np.concatenate([context, s], axis=-1) @ W1.T + b1)  # (B, T, h1)
    logits = a @ W2.T + b2
    residual = np.eye(W2.shape[0])[targets] - np.exp(log_softmax_np(logits))  # onehot(y) - p
    return ((residual @ W2) * (1 - a ** 2)) @ W1[:, :context.shape[-1]]


def score_gradient_np(alpha, h, u, mask=None):
    """∂ log p_t(y_t) / ∂e_ti = α_ti (u_t·h_i − Σ_j α_tj u_t·h_j): why attention follows the
    probe (one head).

    log p depends on the scores e_t only through c_t = Σ_j α_tj h_j; with u_t = ∂ log p / ∂c_t
    (`output_gradient_np`) and the softmax Jacobian ∂α_tj/∂e_ti = α_tj (δ_ij − α_ti),
        ∂ log p / ∂e_ti = Σ_j (u_t·h_j) α_tj (δ_ij − α_ti).
    u_t·h_i is the first-order gain in log p from moving the context to h_i (a linearised
    lexical probe): a gradient step raises e_ti where that gain beats its α-weighted mean.
    alpha (B, T, N), h (B, N, H), u (B, T, H), mask (B, N) bool -> (B, T, N).
    """
    check_score_gradient(alpha, h, u, mask)
    h = h if mask is None else hide(h, mask[..., None])
    # BEGIN EXERCISE 5.2 implement: the gradient of log p with respect to the scores (~10 min)
    gain = np.einsum("btd,bnd->btn", u, h)  # u_t·h_i
    return alpha * (gain - (alpha * gain).sum(-1, keepdims=True))
    # END EXERCISE


def check_score_gradient(alpha, h, u, mask) -> None:
    """alpha (B, T, N) one head's weights, h (B, N, H), u (B, T, H); mask (B, N) bool."""
    check_decoder_encoder_states(u, h, mask)
    check_array("alpha", alpha, "float", ndim=3, like=np.ndarray, hint="(B, T, N)")
    if alpha.shape != (u.shape[0], u.shape[1], h.shape[1]):
        fail("alpha", f"one head's weights (B, T, N) = "
             f"{shape_str((u.shape[0], u.shape[1], h.shape[1]))}", describe(alpha))
    check_finite("alpha", alpha)


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
