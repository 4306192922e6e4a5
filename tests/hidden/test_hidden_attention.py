"""Teacher-only probes for lesson 01's exercises (1.1-1.3): what the visible tests do not try.

Each compares a student's function with a plain, obviously-correct formula written here, on
inputs the visible tests avoid: a max taken over the wrong axis or the whole batch, random
masks with empty rows, extra leading axes, single queries/keys, float32, a non-default scale.
"""

import numpy as np
import pytest
import torch

from minattn.attention import (
    attention_backward_np,
    attention_np,
    attention_torch,
    softmax_np,
    softmax_torch,
)

pytestmark = pytest.mark.hidden


def plain_softmax(x, mask=None):
    """Loop-free but naive: per-row max in float64, masked entries and empty rows -> 0."""
    x = np.asarray(x, dtype=np.float64)
    mask = np.ones(x.shape, bool) if mask is None else np.broadcast_to(mask, x.shape)
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row, keep = x[idx], mask[idx]
        if keep.any():
            e = np.exp(row[keep] - row[keep].max())
            out[idx][keep] = e / e.sum()
    return out


@pytest.mark.exercise("1.1")
@pytest.mark.parametrize("axis_scale", [(1.0, 800.0), (800.0, 1.0)])
def test_softmax_max_is_per_row_not_per_column_or_global(rng, axis_scale):
    # Rows offset by ±hundreds: a max over the wrong axis (or over everything) underflows.
    rows, cols = axis_scale
    x = rng.standard_normal((4, 3, 6)) + rows * np.arange(-1, 2)[None, :, None] \
        + cols * np.array([0, 0, 0, 0, 0, -1.0])
    expected = plain_softmax(x)
    np.testing.assert_allclose(softmax_np(x), expected, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(softmax_torch(torch.tensor(x)).numpy(), expected, rtol=1e-10,
                               atol=1e-300)


@pytest.mark.exercise("1.1")
def test_softmax_random_masks_with_empty_rows_and_broadcasting(rng):
    x = rng.standard_normal((2, 3, 5, 7)) * 30
    mask = rng.random((3, 1, 7)) < 0.4  # broadcasts over batch and queries; some rows empty
    mask[0] = False
    expected = plain_softmax(x, mask)
    got = softmax_np(x, mask)
    assert got.shape == x.shape and np.all(np.isfinite(got))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)
    t = torch.tensor(x, requires_grad=True)
    out = softmax_torch(t, torch.tensor(mask))
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-15)
    (out * torch.tensor(rng.standard_normal(x.shape))).sum().backward()
    assert torch.isfinite(t.grad).all() and torch.all(t.grad[:, 0] == 0)


@pytest.mark.exercise("1.1")
def test_softmax_keeps_float32_and_handles_one_entry():
    x = np.array([[3.0], [-1e30]], dtype=np.float32)
    np.testing.assert_array_equal(softmax_np(x), [[1.0], [1.0]])
    assert softmax_torch(torch.tensor(x)).dtype == torch.float32


def plain_attention(q, k, v, mask=None, scale=None):
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    w = plain_softmax(q @ np.swapaxes(k, -1, -2) * scale, mask)
    return w @ v, w


@pytest.mark.exercise("1.2")
@pytest.mark.parametrize("shape", [((1, 3), (4, 3), (4, 2)), ((2, 2, 2, 5, 3), (2, 2, 2, 1, 3),
                                                              (2, 2, 2, 1, 4)),
                                   ((6, 1), (6, 1), (6, 6))])
def test_attention_other_shapes_and_scales(rng, shape):
    q, k, v = (rng.standard_normal(s) for s in shape)
    for scale in (None, 0.3):
        out, w = attention_np(q, k, v, scale=scale)
        exp_out, exp_w = plain_attention(q, k, v, scale=scale)
        np.testing.assert_allclose(out, exp_out, atol=1e-12)
        np.testing.assert_allclose(w, exp_w, atol=1e-12)
        out_t, w_t = attention_torch(*map(torch.tensor, (q, k, v)), scale=scale)
        np.testing.assert_allclose(out_t.numpy(), exp_out, atol=1e-12)


@pytest.mark.exercise("1.2")
def test_attention_random_masks_including_empty_rows(rng):
    q, k, v = (rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 6, 5)),
               rng.standard_normal((3, 6, 2)))
    mask = rng.random((3, 4, 6)) < 0.3
    mask[1, 2] = False
    out, w = attention_np(q, k, v, mask)
    exp_out, exp_w = plain_attention(q, k, v, mask)
    np.testing.assert_allclose(out, exp_out, atol=1e-12)
    np.testing.assert_allclose(w, exp_w, atol=1e-12)
    assert np.all(out[1, 2] == 0)


@pytest.mark.exercise("1.3")
def test_backward_with_scale_broadcast_mask_and_float32(rng):
    q, k, v = (rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)),
               rng.standard_normal((2, 5, 3)))
    mask = rng.random((1, 3, 5)) < 0.5  # broadcast over the batch; maybe empty rows
    grad_out = rng.standard_normal((2, 3, 3))
    for dtype, atol in ((np.float64, 1e-10), (np.float32, 1e-4)):
        args = [a.astype(dtype) for a in (q, k, v)]
        ts = [torch.tensor(a, requires_grad=True) for a in args]
        out, _ = attention_torch(*ts, torch.tensor(mask), scale=0.7)
        out.backward(torch.tensor(grad_out.astype(dtype)))
        ours = attention_backward_np(grad_out.astype(dtype), *args, mask, scale=0.7)
        for g, t in zip(ours, ts):
            assert g.shape == t.shape
            np.testing.assert_allclose(g, t.grad.numpy(), atol=atol)


@pytest.mark.exercise("1.3")
def test_backward_single_key_gives_no_query_gradient(rng):
    # One key: the weight is 1 whatever the score, so dq = dk = 0 and dv = grad_out.
    q, k, v = rng.standard_normal((3, 2)), rng.standard_normal((1, 2)), rng.standard_normal((1, 4))
    grad_out = rng.standard_normal((3, 4))
    dq, dk, dv = attention_backward_np(grad_out, q, k, v)
    np.testing.assert_allclose(dq, 0, atol=1e-14)
    np.testing.assert_allclose(dk, 0, atol=1e-14)
    np.testing.assert_allclose(dv, grad_out.sum(0, keepdims=True), atol=1e-12)


# ----------------------------------------------------------------------------- answers (1.4, 1.5)
@pytest.mark.exercise("1.4")
def test_predicted_weight_of_a_duplicated_token():
    from minattn.course.answers.attention import duplicate_token_weight

    e = np.exp(0.5 ** 0.5)
    assert abs(duplicate_token_weight() - 2 * e / (3 * e + 1)) < 0.005  # two decimals


@pytest.mark.exercise("1.5")
def test_reported_jacobian_norm_with_4096_keys():
    from minattn.course.answers.attention import jacobian_norm_with_4096_keys

    # softmax_rows_np(64, rng, n_keys=4096)[True]["jacobian"].mean(): 0.0257-0.0259, seeds 0-2
    # (500 queries); 64 keys give 0.18.
    assert 0.02 <= jacobian_norm_with_4096_keys() <= 0.032
