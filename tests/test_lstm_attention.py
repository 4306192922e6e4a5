"""Attention in an LSTM encoder-decoder (minattn/lstm_attention.py): LSTM parity with
torch.nn, Luong attention NumPy vs torch, the lexical probe, the scores' gradient against
autograd, bad input. The authors' copy model and its training: test_lstm_attention_official.py;
the classifier, the translator and the agreement metric (lesson 08): test_agreement*.py."""

import math

import numpy as np
import pytest
import torch
from expect import close
from parity import np_, t  # tests/ is on sys.path (rootdir conftest)
from torch import nn

from minattn import lstm_attention as la
from minattn.attention import softmax_np

T64 = dict(dtype=torch.float64)


# ----------------------------------------------------------------------------- the LSTM
def test_lstm_cell_matches_torch_lstmcell(rng):
    torch.manual_seed(0)
    cell = nn.LSTMCell(5, 7).double()
    x, h, c = rng.normal(size=(3, 5)), rng.normal(size=(3, 7)), rng.normal(size=(3, 7))
    params = [np_(p) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
    h_np, c_np = la.lstm_cell_np(x, h, c, *params)
    h_ref, c_ref = cell(t(x), (t(h), t(c)))
    assert np.abs(h_np - np_(h_ref)).max() < 1e-12 and np.abs(c_np - np_(c_ref)).max() < 1e-12
    h_t, c_t = la.lstm_cell_torch(t(x), t(h), t(c), *[t(p) for p in params])
    assert np.abs(np_(h_t) - h_np).max() < 1e-12 and np.abs(np_(c_t) - c_np).max() < 1e-12


def test_lstm_over_a_sequence_matches_torch_lstm(rng):
    torch.manual_seed(1)
    lstm = nn.LSTM(4, 6, batch_first=True).double()
    x = rng.normal(size=(2, 9, 4))
    params = [np_(p) for p in (lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0,
                               lstm.bias_hh_l0)]
    out_np, (h_np, c_np) = la.lstm_np(x, *params)
    out_ref, (h_ref, c_ref) = lstm(t(x))
    assert np.abs(out_np - np_(out_ref)).max() < 1e-12
    assert np.abs(h_np - np_(h_ref[0])).max() < 1e-12 and np.abs(c_np - np_(c_ref[0])).max() < 1e-12


# ----------------------------------------------------------------------------- attention step
@pytest.mark.exercise("5.1")
def test_luong_attention_by_hand():
    # one decoder state, two encoder states, W_a = identity: scores s·h_i = (1, 0)
    s = np.array([[[1.0, 0.0]]])
    h = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    context, alpha = la.luong_attention_np(s, h, np.eye(2)[None])
    e = math.e
    assert np.allclose(alpha[0, 0, 0], [e / (e + 1), 1 / (e + 1)], atol=1e-12)
    assert np.allclose(context[0, 0], [e / (e + 1), 1 / (e + 1)], atol=1e-12)


@pytest.mark.exercise("5.1")
def test_luong_attention_uses_the_course_softmax_and_sums_heads(rng):
    s, h = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    W = rng.normal(size=(2, 4, 4))
    mask = np.ones((2, 5), bool)
    mask[1, 3:] = False
    context, alpha = la.luong_attention_np(s, h, W, mask)
    assert alpha.shape == (2, 2, 3, 5), (
        f"the shapes differ: {alpha.shape} vs (2, 2, 3, 5): α is (B, K, T, N)")
    assert np.all(alpha[1, ..., 3:] == 0), ("padded source positions get weight: give the mask "
                                            "(B, N) to the softmax, as (B, 1, 1, N)")
    for k in range(2):
        scores = s @ W[k] @ h.transpose(0, 2, 1)  # (B, T, N)
        close(alpha[:, k], softmax_np(scores, mask[:, None, :]), atol=1e-12,
              what=f"the weights α of head {k}: ")
    expected = sum(alpha[:, k] @ h for k in range(2))  # c_t = Σ_h Σ_i α^h_ti h_i
    close(context, expected, atol=1e-12, what="the context: ", mistakes=[(
        "the heads' contexts are averaged: c_t sums them (Σ_k Σ_i α^k_ti h_i)", expected / 2)])


@pytest.mark.exercise("5.1")
@pytest.mark.parametrize("uniform", [False, True])
def test_luong_attention_numpy_torch_parity(rng, uniform):
    s, h, W = rng.normal(size=(3, 4, 6)), rng.normal(size=(3, 7, 6)), rng.normal(size=(2, 6, 6))
    mask = rng.random((3, 7)) < 0.7
    mask[:, 0] = True
    c_np, a_np = la.luong_attention_np(s, h, W, mask, uniform)
    c_t, a_t = la.luong_attention_torch(t(s), t(h), t(W), torch.as_tensor(mask), uniform)
    assert np.abs(np_(c_t) - c_np).max() < 1e-12 and np.abs(np_(a_t) - a_np).max() < 1e-12

# ----------------------------------------------------------------------------- probe, gradient
def test_lexical_probe_numpy_torch_parity_and_by_hand(rng):
    h, s = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 3, 4))
    W1, b1, W2, b2 = (rng.normal(size=(6, 8)), rng.normal(size=6), rng.normal(size=(7, 6)),
                      rng.normal(size=7))
    y = rng.integers(0, 7, size=(2, 3))
    beta = la.lexical_probe_np(h, s, y, W1, b1, W2, b2)
    got = la.lexical_probe_torch(t(h), t(s), torch.as_tensor(y), *map(t, (W1, b1, W2, b2)))
    assert beta.shape == (2, 3, 5) and np.abs(np_(got) - beta).max() < 1e-12
    # β_ti is the output network's p(y_t) with the context set to h_i
    logits = la.output_np(np.broadcast_to(h[1, 4], (4,)), s[1, 2], W1, b1, W2, b2)
    p = np.exp(la.log_softmax_np(logits))
    assert abs(beta[1, 2, 4] - p[y[1, 2]]) < 1e-12


def autograd_score_gradient(s, h, W_a, y, W1, b1, W2, b2, mask=None):
    """∂ Σ_t log p_t(y_t) / ∂e (B, T, N) by torch's autograd through one Luong head and the
    output network, with α, the context and u = ∂ log p / ∂c_t beside it."""
    e = torch.einsum("btd,de,bne->btn", t(s), t(W_a), t(h)).requires_grad_()
    # torch's own softmax (not lesson 01's, so that exercise 5.2 does not wait on 1.1)
    hidden = None if mask is None else ~torch.as_tensor(mask)[:, None, :]
    alpha = (e if hidden is None else e.masked_fill(hidden, -math.inf)).softmax(-1)
    context = (alpha @ t(h)).detach().requires_grad_()
    read = alpha @ t(h)  # the same context, on the path from e
    logp = []
    for c in (read, context):
        out = la.output_torch(c, t(s), *map(t, (W1, b1, W2, b2))).log_softmax(-1)
        logp.append(out.gather(-1, torch.as_tensor(y)[..., None]).sum())
    (grad_e,) = torch.autograd.grad(logp[0], e)
    (u,) = torch.autograd.grad(logp[1], context)
    return np_(grad_e), np_(alpha), np_(context), np_(u)


@pytest.mark.exercise("5.2")
def test_score_gradient_equals_autograd(rng):
    """The two-line derivation, checked: ∂ log p/∂e_ti = α_ti (u·h_i − Σ_j α_tj u·h_j), with u
    from `output_gradient_np` (no autograd), equals torch's autograd, masked positions too."""
    s, h, W_a = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 6, 4)), rng.normal(size=(4, 4))
    W1, b1, W2, b2 = (rng.normal(size=(5, 8)), rng.normal(size=5), rng.normal(size=(7, 5)),
                      rng.normal(size=7))
    y = rng.integers(0, 7, size=(2, 3))
    mask = np.ones((2, 6), bool)
    mask[1, 4:] = False
    grad_e, alpha, context, u_auto = autograd_score_gradient(s, h, W_a, y, W1, b1, W2, b2, mask)
    u = la.output_gradient_np(context, s, y, W1, b1, W2, b2)
    assert np.abs(u - u_auto).max() < 1e-12
    ours = la.score_gradient_np(alpha, h, u, mask)
    assert np.abs(ours - grad_e).max() < 1e-12
    assert np.all(ours[1, :, 4:] == 0) and np.allclose(ours.sum(-1), 0, atol=1e-12)


@pytest.mark.exercise("5.2")
def test_score_gradient_favours_the_position_the_probe_favours():
    """Uniform attention over two states: the gradient raises the score of the state whose
    read-out gains more log-probability (u·h_1 > u·h_2), by (α/2)(u·h_1 − u·h_2) each way."""
    alpha = np.full((1, 1, 2), 0.5)
    h = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    u = np.array([[[3.0, 1.0]]])  # u·h_1 = 3, u·h_2 = 1
    assert np.allclose(la.score_gradient_np(alpha, h, u), [[[0.5, -0.5]]], atol=1e-15)


# ----------------------------------------------------------------------------- bad input
def test_bad_input_raises_value_error(rng):
    s, h = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    with pytest.raises(ValueError, match=r"^h: .*H = 4"):
        la.luong_attention_np(s, rng.normal(size=(2, 5, 3)), np.eye(4)[None])
    with pytest.raises(ValueError, match=r"^mask: expected bool \(B, N\)"):
        la.luong_attention_np(s, h, np.eye(4)[None], mask=np.ones((2, 5)))
    with pytest.raises(ValueError, match=r"^mask: .*N = 5"):
        la.luong_attention_torch(t(s), t(h), t(np.eye(4)[None]), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^alpha: .*N = 5"):
        la.score_gradient_np(np.full((2, 3, 4), 0.25), h, s)
    with pytest.raises(ValueError, match=r"^u: .*H = 4"):
        la.score_gradient_np(np.full((2, 3, 5), 0.2), h, rng.normal(size=(2, 3, 3)))
    with pytest.raises(ValueError, match=r"^targets: expected ids in \[0, 7\)"):
        la.output_gradient_np(s, s, np.full((2, 3), 9), rng.normal(size=(5, 8)), np.zeros(5),
                              rng.normal(size=(7, 5)), np.zeros(7))
