"""Teacher-only probes for lesson 02's exercises (removed from student copies)."""

import numpy as np
import pytest
import torch

from minattn.attention import attention_torch
from minattn.fast.sparse import blocked_window_attention_torch, window_attention_fast_torch
from minattn.sparse import dilated_window_mask_np, sliding_window_mask_np


def _definition(n, w, dilation, causal):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    mask = (np.abs(i - j) <= w * dilation) & ((i - j) % dilation == 0)
    return mask & (j <= i) if causal else mask


@pytest.mark.exercise("2.1")
@pytest.mark.parametrize("causal", [False, True])
def test_hidden_masks_against_definition_many_sizes(causal):
    rng = np.random.default_rng(7)
    for _ in range(40):
        n, w, dilation = int(rng.integers(1, 60)), int(rng.integers(0, 70)), int(rng.integers(1, 6))
        got = sliding_window_mask_np(n, w, causal)
        assert got.dtype == np.bool_ and got.shape == (n, n)
        np.testing.assert_array_equal(got, _definition(n, w, 1, causal))
        np.testing.assert_array_equal(dilated_window_mask_np(n, w, dilation, causal),
                                      _definition(n, w, dilation, causal))


@pytest.mark.exercise("2.2")
@pytest.mark.parametrize("w_left,w_right,block", [(3, 0, 4), (0, 5, 4), (2, 7, 3), (6, 6, 16)])
def test_hidden_blocked_kernel_inner_queries_asymmetric(w_left, w_right, block):
    """Away from the ends the blocked kernel alone is exact, for any w_left, w_right."""
    n = 61
    gen = torch.Generator().manual_seed(w_left + 10 * w_right)
    q, k, v = (torch.randn(2, n, 5, generator=gen, dtype=torch.float64) for _ in range(3))
    out = blocked_window_attention_torch(q, k, v, w_left, w_right, block)
    assert out.shape == (2, -(-n // block), block, 5)
    out = out.flatten(1, 2)[:, :n]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    mask = torch.as_tensor((j - i >= -w_left) & (j - i <= w_right))
    ref, _ = attention_torch(q, k, v, mask)
    inner = slice(w_left, n - w_right - block)  # queries whose whole span lies inside
    torch.testing.assert_close(out[:, inner], ref[:, inner], rtol=1e-10, atol=1e-10)


def test_hidden_many_global_tokens_float32():  # the global path: not part of exercise 2.2
    n, w = 300, 9
    glob = [0, 1, 50, 51, 52, 150, 299]
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, n, 16, generator=gen) for _ in range(3))
    mask = _definition(n, w, 2, False)
    mask[glob] = True
    mask[:, glob] = True
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.as_tensor(mask))
    out = window_attention_fast_torch(q, k, v, w, dilation=2, global_idx=glob)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.exercise("2.3")
def test_hidden_predictions_exact():
    from minattn.course.answers import sparse as answers
    assert answers.layers_window_255_to_0() == 32
    assert answers.layers_window_plus_global() == 2


@pytest.mark.exercise("2.4")
def test_hidden_deaf_fraction_exact(answer):
    from minattn.course.answers import sparse as answers
    assert abs(answer(answers.fraction_of_deaf_bigbird_layouts) - 0.09) < 0.005
