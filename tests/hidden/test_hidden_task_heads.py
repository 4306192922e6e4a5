"""Teacher-only probes for lesson 07's exercises (kept out of student copies)."""

import numpy as np
import pytest
import torch
from test_task_heads import offset_states

from minattn import task_heads as th
from minattn.course import task_heads as ct


def padded(rng, lengths, d=8):
    B, L = len(lengths), max(lengths)
    x = rng.standard_normal((B, L, d))
    mask = np.arange(L)[None, :] < np.array(lengths)[:, None]
    return x, mask


@pytest.mark.exercise("7.1")
def test_mean_pool_keeps_dtype_one_token_rows_and_blocks_padding_gradient(rng):
    x, mask = padded(rng, [1, 4, 2])
    z = th.mean_pool_np(x.astype(np.float32), mask)
    assert z.dtype == np.float32
    np.testing.assert_allclose(z[0], x[0, 0], rtol=1e-6)  # a one-token sentence is its token
    xt = torch.from_numpy(x).requires_grad_()
    th.mean_pool_torch(xt, torch.from_numpy(mask)).sum().backward()
    assert torch.all(xt.grad[~torch.from_numpy(mask)] == 0)
    expected = np.where(mask, 1 / mask.sum(1, keepdims=True), 0)[..., None] * np.ones(8)
    np.testing.assert_allclose(xt.grad.numpy(), expected, atol=1e-15)


@pytest.mark.exercise("7.2")
def test_cross_head_short_b_and_pair_independence(rng):
    a, am = padded(rng, [3, 5])
    b, bm = padded(rng, [1, 4])  # B of one token: every query reads it with weight 1
    torch.manual_seed(0)
    head = th.CrossAttentionPool(8, 2, num_layers=2).double()
    T = lambda *xs: [torch.from_numpy(x) for x in xs]
    z, w = head(*T(a, am, b, bm), need_weights=True)
    assert torch.allclose(w[0, :, :3, 0], torch.ones(2, 3, dtype=torch.float64))
    z_np, _ = th.cross_attention_pool_np(a, am, b, bm, head.numpy_params(), 2)
    np.testing.assert_allclose(z.detach().numpy(), z_np, atol=1e-10)
    b2 = b.copy()
    b2[1] += 3.0  # changing pair 1's B leaves pair 0 alone
    z2 = head(*T(a, am, b2, bm))[0]
    assert torch.allclose(z2[0], z[0], atol=1e-12) and not torch.allclose(z2[1], z[1])


@pytest.mark.exercise("7.3")
def test_answers_are_valid_choices():
    from minattn.course.answers import task_heads as answers

    assert answers.u09_attention_on_raw_states() in answers.CHOICES
    assert answers.u09_attention_after_layer_norm() in answers.CHOICES
    assert answers.u09_attention_on_raw_states() != answers.u09_attention_after_layer_norm()


# ============================================================= exercise 7.3, and what gives it away
# (tests/ is on sys.path when pytest imports this package: offset_states is the visible tests')
def first_step_entropy(states, mask, init, normalize, seed=0):
    torch.manual_seed(seed)
    head = th.AttentionPool(states.shape[-1], 4, 1, init=init, normalize=normalize)
    with torch.no_grad():
        _, w = head(states, mask, need_weights=True)
    return ct.attention_entropy_ratio(w, mask).mean().item()


def entropy_choice(ratio: float) -> str:
    return "uniform" if ratio > 0.9 else "one token" if ratio < 0.2 else "between"


def real_or_synthetic_states():
    """MiniLM's states of a few sentences when the encoder is there, else offset_states()."""
    from minattn.course import data

    if not data.available("minilm"):
        return offset_states()
    from minattn.course.encoder import load_minilm
    from minattn.encoder import encode_batch

    encoder, tok = load_minilm()
    ids, mask = encode_batch(tok, ["A gripping, beautifully acted film.",
                                   "The plot is thin and the jokes fall flat every time.",
                                   "In the beginning God created the heavens and the earth.",
                                   "It rains.", "Nobody will remember this movie next week."])
    with torch.no_grad():
        return encoder(ids, mask), mask


def test_u09_starts_near_mean_pooling_after_layer_norm():
    x, mask = offset_states()
    ratio = first_step_entropy(x, mask, "u09", normalize=True)
    assert ratio > 0.95  # close to uniform: the head starts near mean pooling
    # ... at least as close as PyTorch's default init (whose noise is U(±1/8) at d = 64, larger)
    assert ratio >= first_step_entropy(x, mask, "default", normalize=True) - 0.01


def test_u09_on_raw_states_collapses_onto_few_tokens():
    x, mask = offset_states()
    assert first_step_entropy(x, mask, "u09", normalize=False) < 0.3
    assert first_step_entropy(x, mask, "default", normalize=False) > 0.8


@pytest.mark.exercise("7.3")
def test_prediction_u09_on_raw_states():
    from minattn.course.answers import task_heads as answers

    predicted = answers.u09_attention_on_raw_states()  # first: a stub fails before the measuring
    x, mask = real_or_synthetic_states()
    ratio = np.mean([first_step_entropy(x, mask, "u09", False, seed) for seed in range(3)])
    assert predicted == entropy_choice(ratio)


@pytest.mark.exercise("7.3")
def test_prediction_u09_after_layer_norm():
    from minattn.course.answers import task_heads as answers

    predicted = answers.u09_attention_after_layer_norm()  # first: a stub fails before the measuring
    x, mask = real_or_synthetic_states()
    ratio = np.mean([first_step_entropy(x, mask, "u09", True, seed) for seed in range(3)])
    assert predicted == entropy_choice(ratio)
