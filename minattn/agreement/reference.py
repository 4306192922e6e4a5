"""The attention classifier of Snell et al. (2021), §2.4 (lesson 08): a bidirectional LSTM
read by an attention whose scores come from a one-hidden-layer network, and its lexical probe.

    h_i = [→h_i ; ←h_i]         one LSTM reads x_1..x_n, another x_n..x_1 (`bilstm_np`)
    classifier                  e_i = vᵀ ReLU(W h_i + b),  α = softmax(e),
                                P(pos) = σ(wᵀ Σ_i α_i h_i + b₀)
    lexical probe β_i           σ(s · (wᵀ h_i + b₀)), s = ±1 for a positive/negative label:
                                the classifier's answer if it attended to position i only

Layout: NumPy reference, then its torch twin. The LSTM itself is lesson 05's
(`minattn.lstm_attention.lstm_np`); the trainable module is `model.AttentionClassifier`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..attention import softmax_np, softmax_torch
from ..checks import (
    check_array,
    check_finite,
    check_number,
    check_same_device,
    check_same_dtype,
    fail,
    hide,
    shape_str,
)
from ..lstm_attention import check_source_mask, lstm_np, sigmoid_np


# ============================================================================ NumPy reference
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
