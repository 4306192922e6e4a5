"""Teacher-only probes for lesson 05's exercises (minattn/lstm_attention/, answers)."""

import numpy as np
import pytest
import torch

from minattn import lstm_attention as la
from minattn.lstm_attention import two_sets_corpus


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
def test_hidden_agreement_ties_and_rounding():
    # n = 40: top ⌈2⌉ = 2 positions; n = 41: ⌈2.05⌉ = 3
    b = np.arange(40.0)
    assert la.agreement_np(np.eye(40)[38], b) == 1.0 and la.agreement_np(np.eye(40)[37], b) == 0.0
    assert la.agreement_np(np.eye(41)[38], np.arange(41.0)) == 1.0
    # ties in b: a tie with the best counts as top
    assert la.agreement_np(np.eye(5)[1], np.array([3.0, 3.0, 0, 0, 0])) == 1.0
    # masked positions never count, even if b is huge there
    mask = np.array([True, True, True, False])
    assert la.agreement_np(np.array([0, 0, 1.0, 0]), np.array([0, 0, 1.0, 9.0]), mask) == 1.0
    t = la.agreement_torch(torch.tensor([0, 0, 1.0, 0]), torch.tensor([0, 0, 1.0, 9.0]),
                           torch.tensor(mask))
    assert t.item() == 1.0


def test_hidden_corpus_b_has_flat_blocks():  # checks the corpus, not the answer: no exercise
    rng = np.random.default_rng(0)
    src, tgt = two_sets_corpus(400, 15, rng)
    blocks = [{f"w{k:02d}" for k in range(15)}, {f"w{k:02d}" for k in range(15, 30)}]
    # every pair holds one whole block: inside a block each word co-occurs with each other
    # word exactly as often as with itself, so the count table is flat there
    assert all(set(s) in blocks and s == t for s, t in zip(src, tgt))


# ----------------------------------------------------------------------------- answer (5.3)
@pytest.mark.exercise("5.3")
def test_predicted_failing_copy_corpus():
    from minattn.answers.lstm_attention import failing_copy_corpus

    assert failing_copy_corpus() in ("A", "B", "C")
    assert failing_copy_corpus() == "B"
