"""Teacher-only tests for exercise 1.1 (the softmax), beyond what tests/test_attention.py shows
students: several shapes, random and broadcast masks, rows far apart in scale."""

import numpy as np
import pytest

from minattn.attention import softmax_np


def per_row_softmax(x, mask):
    """The definition, one row at a time."""
    out = np.zeros_like(x)
    for index in np.ndindex(x.shape[:-1]):
        keep = mask[index]
        if keep.any():
            row = x[index][keep]
            e = np.exp(row - row.max())
            out[index][keep] = e / e.sum()
    return out


@pytest.mark.hidden
@pytest.mark.exercise("1.1")
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 6)])
def test_softmax_random_masks_and_scales(shape):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape) * 30 + rng.choice([-700.0, 0.0, 700.0], size=shape[:-1] + (1,))
    mask = rng.random(shape) < 0.6
    mask[..., 0] = len(shape) == 1 or mask[..., 0]  # some rows keep entry 0 ...
    if len(shape) > 1:
        mask.reshape(-1, shape[-1])[0] = False  # ... and one row is fully masked
    np.testing.assert_allclose(softmax_np(x, mask), per_row_softmax(x, mask), rtol=1e-12, atol=1e-300)


@pytest.mark.hidden
@pytest.mark.exercise("1.1")
def test_softmax_broadcast_padding_mask():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 4, 5))
    mask = np.arange(5)[None, None, None, :] < np.array([5, 2])[:, None, None, None]  # (2, 1, 1, 5)
    expected = per_row_softmax(x, np.broadcast_to(mask, x.shape))
    np.testing.assert_allclose(softmax_np(x, mask), expected, rtol=1e-12, atol=1e-300)
