"""Teacher-only probes for lesson 05's exercises (minattn/lstm_attention.py, answers)."""

import numpy as np
import pytest
import torch

from minattn import lstm_attention as la
from minattn.course.lstm_attention import two_sets_corpus


@pytest.mark.exercise("5.1")
def test_hidden_attention_gradient_reaches_every_head():
    torch.manual_seed(0)
    s, h = torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 5, 4, dtype=torch.float64)
    W = torch.randn(3, 4, 4, dtype=torch.float64, requires_grad=True)
    context, alpha = la.luong_attention_torch(s, h, W)
    assert alpha.shape == (2, 3, 3, 5) and context.shape == (2, 3, 4)
    (context ** 2).sum().backward()
    assert torch.all(W.grad.flatten(1).abs().sum(1) > 0)
    assert torch.autograd.gradcheck(lambda w: la.luong_attention_torch(s, h, w)[0], (W,))


@pytest.mark.exercise("5.1")
def test_hidden_attention_fully_masked_row_gives_zero_context():
    s, h = np.ones((1, 2, 3)), np.ones((1, 4, 3))
    context, alpha = la.luong_attention_np(s, h, np.eye(3)[None], np.zeros((1, 4), bool))
    assert np.all(alpha == 0) and np.all(context == 0) and not np.isnan(context).any()


@pytest.mark.exercise("5.2")
def test_hidden_score_gradient_is_the_softmax_jacobian_applied_to_the_gains():
    rng = np.random.default_rng(3)
    alpha = rng.dirichlet(np.ones(6), size=(2, 3))  # (B, T, N), rows sum to 1
    h, u = rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 3, 4))
    gain = np.einsum("btd,bnd->btn", u, h)
    jacobian = alpha[..., :, None] * (np.eye(6) - alpha[..., None, :])  # ∂α_j/∂e_i
    expected = np.einsum("btij,btj->bti", jacobian.swapaxes(-1, -2), gain)
    assert np.allclose(la.score_gradient_np(alpha, h, u), expected, atol=1e-12)
    # one-hot attention gets no gradient: the softmax is flat there
    one_hot = np.zeros((2, 3, 6))
    one_hot[..., 2] = 1.0
    assert np.allclose(la.score_gradient_np(one_hot, h, u), 0.0, atol=1e-15)


def test_hidden_corpus_b_has_flat_blocks():  # checks the corpus, not the answer: no exercise
    rng = np.random.default_rng(0)
    src, tgt = two_sets_corpus(400, 15, rng)
    blocks = [{f"w{k:02d}" for k in range(15)}, {f"w{k:02d}" for k in range(15, 30)}]
    # every pair holds one whole block: inside a block each word co-occurs with each other
    # word exactly as often as with itself, so the count table is flat there
    assert all(set(s) in blocks and s == t for s, t in zip(src, tgt))


# ----------------------------------------------------------------------------- answer (5.3)
@pytest.mark.exercise("5.3")
def test_predicted_least_often_learned_copy_corpus():
    from minattn.course.answers.lstm_attention import least_often_learned_corpus

    assert least_often_learned_corpus() in ("A", "B", "C")
    assert least_often_learned_corpus() == "B"
