"""Teacher-only probes for lesson 07's exercises (kept out of student copies)."""

import numpy as np
import pytest
import torch

from minattn import task_heads as th


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
    from minattn.answers import task_heads as answers

    assert answers.u09_attention_on_raw_states() in answers.CHOICES
    assert answers.u09_attention_after_layer_norm() in answers.CHOICES
    assert answers.u09_attention_on_raw_states() != answers.u09_attention_after_layer_norm()
