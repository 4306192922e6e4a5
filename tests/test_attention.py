"""Lesson 01: scaled dot-product and multi-head attention.

The oracles: NumPy vs torch in float64 (same math, two implementations), our hand-written
backward vs torch autograd, and our torch code vs PyTorch's own SDPA and nn.MultiheadAttention.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from expect import close, returns_array, returns_tensor  # tests/ is on sys.path
from hypothesis import given, settings
from hypothesis import strategies as st

from minattn.attention import (
    MultiHeadAttention,
    additive_scores_np,
    additive_scores_torch,
    attention_backward_np,
    attention_np,
    attention_torch,
    causal_mask_np,
    causal_mask_torch,
    multi_head_attention_np,
    padding_mask_torch,
    softmax_np,
    softmax_torch,
)
from minattn.fast.attention import attention_fast_torch


def random_qkv(rng, batch=(2, 3), lq=5, lk=7, d=4, dv=6):
    q = rng.standard_normal(batch + (lq, d))
    k = rng.standard_normal(batch + (lk, d))
    v = rng.standard_normal(batch + (lk, dv))
    return q, k, v


def t64(x):
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


# ----------------------------------------------------------------------------- softmax
@pytest.mark.exercise("1.1")
def test_softmax_matches_definition(rng):
    x = rng.standard_normal((3, 4, 5))
    expected = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    close(returns_array(softmax_np(x), "softmax_np"), expected, rtol=1e-12, atol=1e-15,
          what="softmax_np: ")


@pytest.mark.exercise("1.1")
def test_softmax_is_stable_for_huge_logits():
    x = np.array([[1e4, 0.0, -1e4], [1e4, 1e4, 1e4]])
    overflow = "exp overflowed for scores of 10000: subtract the row maximum"
    w = softmax_np(x)
    close(w, [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-12, what="softmax_np: ",
          nonfinite=overflow)
    wt = returns_tensor(softmax_torch(torch.tensor(x)), "softmax_torch")
    close(wt, w, atol=1e-12, what="softmax_torch: ", nonfinite=overflow)


@pytest.mark.exercise("1.1")
def test_softmax_uses_a_max_per_row():
    # Rows near +1000 beside rows near -1000: one global max would underflow the low rows to
    # 0/0; the max must be taken per row.
    x = np.array([[1000.0, 999.0, 998.0], [-1000.0, -1001.0, -1002.0], [0.5, -0.5, 0.0]])
    expected = np.exp(x - x.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    why = ("NaN or inf for rows near 1000 and -1000: subtract each row's own maximum (exp(1000) "
           "overflows; one maximum for every row underflows the low rows to 0/0)")
    for name, got in (("softmax_np", softmax_np(x)),
                      ("softmax_torch", returns_tensor(softmax_torch(torch.tensor(x)),
                                                       "softmax_torch"))):
        close(got, expected, rtol=1e-12, what=f"{name}: ", nonfinite=why)


@pytest.mark.exercise("1.1")
def test_softmax_masked_entries_get_zero_and_empty_rows_are_zero():
    x = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    mask = np.array([[True, False, True], [False, False, False]])
    w = softmax_np(x, mask)
    np.testing.assert_allclose(w[0], [np.e ** -2 / (1 + np.e ** -2), 0, 1 / (1 + np.e ** -2)])
    np.testing.assert_array_equal(w[1], [0, 0, 0])


# ----------------------------------------------------------------------------- forward
def test_hand_checkable_example():
    """One query, two keys: scores (0, 1)·(1/√1) -> weights softmax([0, 2]) on v."""
    q = np.array([[2.0]])
    k = np.array([[0.0], [1.0]])
    v = np.array([[10.0], [20.0]])
    out, w = attention_np(q, k, v)
    w1 = np.exp(2) / (1 + np.exp(2))
    np.testing.assert_allclose(w, [[1 - w1, w1]])
    np.testing.assert_allclose(out, [[10 * (1 - w1) + 20 * w1]])


@pytest.mark.exercise("1.2")
@pytest.mark.parametrize("use_mask", [False, True])
def test_numpy_matches_torch_float64(rng, use_mask):
    q, k, v = random_qkv(rng)
    mask = rng.random((2, 3, 5, 7)) < 0.6 if use_mask else None
    out_np, w_np = attention_np(q, k, v, mask)
    out_t, w_t = attention_torch(*map(torch.tensor, (q, k, v)),
                                 None if mask is None else torch.tensor(mask))
    for name, out in (("attention_np", out_np), ("attention_np", w_np)):
        returns_array(out, name)
    for name, out in (("attention_torch", out_t), ("attention_torch", w_t)):
        returns_tensor(out, name)
    close(out_np, out_t, rtol=0, atol=1e-10, what="output, NumPy vs torch: ")
    close(w_np, w_t, rtol=0, atol=1e-10, what="weights, NumPy vs torch: ")


@pytest.mark.exercise("1.2")
def test_weights_rows_sum_to_one_and_respect_mask(rng):
    q, k, v = random_qkv(rng)
    mask = rng.random((5, 7)) < 0.5
    mask[:, 0] = True  # every row sees at least one key
    _, w = attention_np(q, k, v, mask)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)
    assert np.all(w[..., ~mask] == 0)


@pytest.mark.exercise("1.2")
def test_scale_argument(rng):
    q, k, v = random_qkv(rng)
    out_default, _ = attention_np(q, k, v)
    out_explicit, _ = attention_np(q * 2, k, v, scale=0.5 / np.sqrt(4))
    np.testing.assert_allclose(out_default, out_explicit, atol=1e-12)


@pytest.mark.exercise("1.2")
@pytest.mark.parametrize("use_mask", [False, True])
def test_attention_matches_pytorchs_sdpa_float64(rng, use_mask):
    """PyTorch's own scaled dot-product attention is the oracle: the 1/√d scale, the mask's
    polarity (True = may attend) and the weighted sum, on inputs with d != 1 (forgetting the
    scale passes the other visible tests of 1.2 where d = 1 or the scale is given)."""
    q, k, v = random_qkv(rng, d=16)
    mask = rng.random((2, 3, 5, 7)) < 0.6 if use_mask else None
    if mask is not None:
        mask[..., 0] = True  # every row sees a key (SDPA gives NaN or 0 on an empty row)
    inputs = dict(attn_mask=None if mask is None else torch.tensor(mask))
    expected = F.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), **inputs)
    unscaled = F.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), **inputs, scale=1.0)
    mistakes = [("the scores are not divided by √d (d = 16): your weights are those of scale 1",
                 unscaled)]
    out_np, _ = attention_np(q, k, v, mask)
    close(returns_array(out_np, "attention_np"), expected, rtol=0, atol=1e-12,
          what="attention_np differs from F.sdpa: ", mistakes=mistakes)
    out_t, _ = attention_torch(*map(torch.tensor, (q, k, v)),
                               None if mask is None else torch.tensor(mask))
    close(returns_tensor(out_t, "attention_torch"), expected, rtol=0, atol=1e-12,
          what="attention_torch differs from F.sdpa: ", mistakes=mistakes)


# ----------------------------------------------------------------------------- backward
@pytest.mark.exercise("1.3")
@pytest.mark.parametrize("use_mask", [False, True])
def test_numpy_backward_matches_autograd(rng, use_mask):
    q, k, v = random_qkv(rng)
    mask = rng.random((2, 1, 5, 7)) < 0.6 if use_mask else None
    grad_out = rng.standard_normal((2, 3, 5, 6))
    qt, kt, vt = t64(q), t64(k), t64(v)
    out, _ = attention_torch(qt, kt, vt, None if mask is None else torch.tensor(mask))
    out.backward(torch.tensor(grad_out))
    grads = attention_backward_np(grad_out, q, k, v, mask)
    for ours, theirs in zip(grads, (qt.grad, kt.grad, vt.grad)):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=1e-8)


@pytest.mark.exercise("1.3")
def test_numpy_backward_matches_finite_differences(rng):
    q, k, v = random_qkv(rng, batch=(1,), lq=2, lk=3, d=2, dv=2)
    grad_out = rng.standard_normal((1, 2, 2))
    grad_q, _, _ = attention_backward_np(grad_out, q, k, v)
    eps = 1e-6
    for idx in np.ndindex(q.shape):
        bump = np.zeros_like(q)
        bump[idx] = eps
        plus = (attention_np(q + bump, k, v)[0] * grad_out).sum()
        minus = (attention_np(q - bump, k, v)[0] * grad_out).sum()
        assert abs((plus - minus) / (2 * eps) - grad_q[idx]) < 1e-7


# ----------------------------------------------------------------------------- vs PyTorch SDPA
def sdpa_masks(lq, lk, rng):
    lengths = torch.tensor([lk, lk - 3])
    return {
        "none": None,
        "causal": causal_mask_torch(lq, lk),
        "padding": padding_mask_torch(lengths, lk),
        "arbitrary": (torch.tensor(rng.random((2, 4, lq, lk)) < 0.7)
                      | torch.eye(lq, lk, dtype=torch.bool)),
    }


@pytest.mark.parametrize("kind", ["none", "causal", "padding", "arbitrary"])
def test_torch_matches_sdpa_float32(rng, kind):
    q, k, v = (torch.tensor(a, dtype=torch.float32) for a in random_qkv(rng, (2, 4), 9, 9, 8, 8))
    mask = sdpa_masks(9, 9, rng)[kind]
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ours, _ = attention_torch(q, k, v, mask)
    fast = attention_fast_torch(q, k, v, mask)
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(fast, expected, rtol=0, atol=1e-5)


def test_fast_path_causal_flag(rng):
    q, k, v = (torch.tensor(a, dtype=torch.float32) for a in random_qkv(rng, (1, 2), 6, 6, 4, 4))
    torch.testing.assert_close(attention_fast_torch(q, k, v, is_causal=True),
                               attention_torch(q, k, v, causal_mask_torch(6))[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("lq,lk", [(3, 7), (7, 7), (7, 3)])
def test_causal_is_bottom_right_everywhere(rng, lq, lk):
    # The queries are the last Lq of Lk positions (a memory or cache comes first), in the mask
    # helpers and in attention_fast_torch(is_causal=True) alike.
    mask = causal_mask_np(lq, lk)
    assert mask[-1].all() and mask.sum() == sum(max(0, min(lk, i + 1 + lk - lq)) for i in range(lq))
    np.testing.assert_array_equal(causal_mask_torch(lq, lk).numpy(), mask)
    q, k, v = (torch.tensor(a) for a in random_qkv(rng, (2,), lq, lk, 4, 4))
    torch.testing.assert_close(attention_fast_torch(q, k, v, is_causal=True),
                               attention_torch(q, k, v, torch.tensor(mask))[0], rtol=0, atol=1e-10)


def test_causal_flag_and_mask_together_raise(rng):
    q, k, v = (torch.tensor(a) for a in random_qkv(rng, (2,), 4, 4, 4, 4))
    with pytest.raises(ValueError, match="not both"):
        attention_fast_torch(q, k, v, mask=causal_mask_torch(4), is_causal=True)


# ----------------------------------------------------------------------------- fully masked rows
def test_fully_masked_rows_are_zero_not_nan(rng):
    q, k, v = random_qkv(rng, batch=(2,), lq=3, lk=4)
    mask = np.ones((2, 3, 4), dtype=bool)
    mask[0, 1] = False  # query 1 of batch 0 sees nothing
    out_np, w_np = attention_np(q, k, v, mask)
    assert np.all(out_np[0, 1] == 0) and np.all(w_np[0, 1] == 0)
    grads_np = attention_backward_np(np.ones_like(out_np), q, k, v, mask)
    assert all(np.all(np.isfinite(g)) for g in grads_np)

    for fn in (lambda *a: attention_torch(*a)[0], attention_fast_torch):
        qt, kt, vt = t64(q), t64(k), t64(v)
        out = fn(qt, kt, vt, torch.tensor(mask))
        assert torch.all(out[0, 1] == 0)
        out.sum().backward()
        for g in (qt.grad, kt.grad, vt.grad):
            assert torch.isfinite(g).all()
        assert torch.all(qt.grad[0, 1] == 0)
        np.testing.assert_allclose(qt.grad.numpy(), grads_np[0], atol=1e-10)


def test_huge_logits_do_not_overflow():
    q = np.array([[100.0, 100.0]])
    k = np.array([[100.0, 100.0], [-100.0, -100.0]])  # scores ±1e4 / √2
    v = np.array([[1.0], [2.0]])
    out, w = attention_np(q, k, v)
    assert np.all(np.isfinite(w)) and np.allclose(out, [[1.0]])
    out_t, _ = attention_torch(*map(torch.tensor, (q, k, v)))
    assert torch.isfinite(out_t).all()


# ----------------------------------------------------------------------------- multi-head
@pytest.mark.parametrize("self_attention", [True, False])
def test_multihead_matches_torch_module(self_attention):
    torch.manual_seed(0)
    d_model, heads = 16, 4
    ours = MultiHeadAttention(d_model, heads)
    theirs = torch.nn.MultiheadAttention(d_model, heads, batch_first=True)
    ours.load_from_torch(theirs)
    x = torch.randn(3, 5, d_model)
    kv = x if self_attention else torch.randn(3, 7, d_model)
    lk = kv.shape[1]
    allowed = torch.rand(3, 5, lk) < 0.7
    allowed[..., 0] = True
    # nn.MultiheadAttention: attn_mask True = blocked, 3-D masks are (B·H, Lq, Lk).
    their_mask = (~allowed).repeat_interleave(heads, dim=0)
    expected, expected_w = theirs(x, kv, kv, attn_mask=their_mask, need_weights=True)
    out, w = ours(x, kv, kv, mask=allowed[:, None], need_weights=True)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(w.mean(1), expected_w, rtol=0, atol=1e-6)
    fast, none = ours(x, kv, kv, mask=allowed[:, None])
    assert none is None
    torch.testing.assert_close(fast, expected, rtol=0, atol=1e-5)


def test_the_three_kernels_of_the_module_agree(rng):
    """flash (fused SDPA), the explicit path (flash=False or need_weights) and a kernel passed
    as attend= give one output, masks with empty rows included (zeros there, not NaN)."""
    torch.manual_seed(0)
    fused = MultiHeadAttention(12, 3).double()
    explicit = MultiHeadAttention(12, 3, flash=False).double()
    seamed = MultiHeadAttention(12, 3, attend=attention_fast_torch).double()
    explicit.load_state_dict(fused.state_dict())
    seamed.load_state_dict(fused.state_dict())
    x = torch.tensor(rng.standard_normal((2, 5, 12)))
    mask = torch.tensor(rng.random((2, 1, 5, 5)) < 0.5)
    mask[0, 0, 2] = False  # a query that sees no key
    out, weights = explicit(x, mask=mask)
    assert weights is not None and torch.all(weights[0, :, 2] == 0)
    for module in (fused, seamed):
        got, none = module(x, mask=mask)
        assert none is None
        torch.testing.assert_close(got, out, rtol=0, atol=1e-12)
    assert "attend=explicit" in repr(explicit) and "attend=sdpa" in repr(fused)


def test_load_from_torch_raises_on_bias_mismatch():
    with pytest.raises(ValueError, match="bias"):
        MultiHeadAttention(8, 2).load_from_torch(torch.nn.MultiheadAttention(8, 2, bias=False))
    with pytest.raises(ValueError, match="bias"):
        MultiHeadAttention(8, 2, bias=False).load_from_torch(torch.nn.MultiheadAttention(8, 2))


def test_attend_seam_replaces_the_kernel():
    torch.manual_seed(0)
    calls = []

    def explicit(q, k, v, mask):
        calls.append(q.shape)
        return attention_torch(q, k, v, mask)[0]

    plain, seamed = MultiHeadAttention(16, 4), MultiHeadAttention(16, 4, attend=explicit)
    seamed.load_state_dict(plain.state_dict())
    x = torch.randn(2, 5, 16)
    mask = causal_mask_torch(5)
    torch.testing.assert_close(seamed(x, mask=mask)[0], plain(x, mask=mask)[0], rtol=0, atol=1e-5)
    assert calls == [(2, 4, 5, 4)]  # (B, H, N, dh) reached the kernel
    with pytest.raises(ValueError, match="need_weights"):
        seamed(x, need_weights=True)


def test_multihead_is_permutation_equivariant_without_positions():
    # Attention alone has no notion of order: permuting the tokens permutes the outputs.
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).double()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    perm = torch.randperm(6)
    torch.testing.assert_close(mha(x[:, perm])[0], mha(x)[0][:, perm], rtol=0, atol=1e-12)


def test_multihead_numpy_matches_torch_float64(rng):
    torch.manual_seed(0)
    module = MultiHeadAttention(12, 3).double()
    x = rng.standard_normal((2, 4, 12))
    y = rng.standard_normal((2, 6, 12))
    mask = rng.random((2, 1, 4, 6)) < 0.6
    out_np, w_np = multi_head_attention_np(x, y, y, module.numpy_params(), 3, mask)
    out_t, w_t = module(torch.tensor(x), torch.tensor(y), torch.tensor(y),
                        mask=torch.tensor(mask), need_weights=True)
    np.testing.assert_allclose(out_np, out_t.detach().numpy(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(w_np, w_t.detach().numpy(), rtol=0, atol=1e-10)


def test_multihead_follows_input_device_and_dtype():
    module = MultiHeadAttention(8, 2).to(torch.float64)
    out, _ = module(torch.randn(1, 3, 8, dtype=torch.float64))
    assert out.dtype == torch.float64 and out.device.type == "cpu"


@pytest.mark.cuda
def test_multihead_on_cuda_matches_cpu():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    expected, _ = module(x, need_weights=True)
    out, _ = module.cuda()(x.cuda())
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("shapes, message", [
    (((2, 5, 4), (2, 7, 3), (2, 7, 6)), r"^k: .* d = 4,"),
    (((2, 5, 4), (2, 7, 4), (2, 6, 6)), r"^v: .* Lk = 7,"),
    (((2, 5, 4), (3, 7, 4), (3, 7, 6)), r"^k: .* \.\.\. = \(2,\)"),
    (((4,), (7, 4), (7, 6)), r"^q: expected float \(\.\.\., Lq, d\),"),
    (((2, 0, 4), (2, 7, 4), (2, 7, 6)), "every size >= 1"),
    (((0, 5, 4), (0, 7, 4), (0, 7, 6)), "every size >= 1"),
])
def test_bad_shapes_raise_value_error(shapes, message):
    arrays = [np.zeros(s) for s in shapes]
    with pytest.raises(ValueError, match=message) as err:
        attention_np(*arrays)
    assert "expected" in str(err.value) and "got" in str(err.value)
    with pytest.raises(ValueError, match=message):
        attention_torch(*map(torch.tensor, arrays))


def test_bad_masks_raise_value_error(rng):
    q, k, v = random_qkv(rng, batch=(2,), lq=3, lk=4)
    with pytest.raises(ValueError, match="mask: expected bool"):
        attention_np(q, k, v, np.ones((3, 4)))  # float mask
    with pytest.raises(ValueError, match=r"broadcastable to \(2, 3, 4\)"):
        attention_np(q, k, v, np.ones((3, 3), dtype=bool))  # wrong shape
    with pytest.raises(ValueError, match="mask: expected bool"):
        attention_torch(*map(torch.tensor, (q, k, v)), torch.ones(3, 4, dtype=torch.int64))


def test_multihead_bad_input():
    with pytest.raises(ValueError, match="num_heads: expected int >= 1, divides d_model = 10"):
        MultiHeadAttention(10, 3)
    module = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"^query: expected float \(B, Lq, self.d_model\).*= 8"):
        module(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match=r"^key: .*B = 2"):
        module(torch.randn(2, 3, 8), torch.randn(3, 3, 8))


def test_different_devices_raise():
    q = torch.zeros(1, 2, 4)
    k = torch.zeros(1, 2, 4, device="meta")  # a second device that exists everywhere
    with pytest.raises(ValueError, match=r"^k: .* on q's device, cpu"):
        attention_torch(q, k, k)


# ----------------------------------------------------------------------------- properties
@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 3), lq=st.integers(1, 6), lk=st.integers(1, 6), d=st.integers(1, 5),
       dv=st.integers(1, 5), seed=st.integers(0, 2**31 - 1), p_keep=st.floats(0.0, 1.0))
def test_property_numpy_torch_sdpa_agree(batch, lq, lk, d, dv, seed, p_keep):
    rng = np.random.default_rng(seed)
    q, k, v = random_qkv(rng, (batch,), lq, lk, d, dv)
    mask = rng.random((batch, lq, lk)) < p_keep  # may contain fully masked rows
    out_np, w_np = attention_np(q, k, v, mask)
    assert np.all(np.isfinite(out_np))
    sums = w_np.sum(-1)
    assert np.allclose(sums[mask.any(-1)], 1.0) and np.all(sums[~mask.any(-1)] == 0)
    qt, kt, vt, mt = map(torch.tensor, (q, k, v, mask))
    out_t, _ = attention_torch(qt, kt, vt, mt)
    np.testing.assert_allclose(out_np, out_t.numpy(), atol=1e-10)
    fast = attention_fast_torch(qt, kt, vt, mt)
    np.testing.assert_allclose(out_np, fast.numpy(), atol=1e-10)


# ----------------------------------------------------------------------------- additive (Bahdanau)
def additive_params(rng, h=5, dq=3, dk=4):
    return rng.standard_normal((h, dq)), rng.standard_normal((h, dk)), rng.standard_normal(h)


def test_additive_scores_match_the_formula_pair_by_pair(rng):
    q, k = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 4, 4))  # dq != dk is allowed
    w_q, w_k, v_a = additive_params(rng)
    scores = additive_scores_np(q, k, w_q, w_k, v_a)
    assert scores.shape == (2, 3, 4)
    for b, i, j in np.ndindex(2, 3, 4):
        assert abs(scores[b, i, j] - v_a @ np.tanh(w_q @ q[b, i] + w_k @ k[b, j])) < 1e-12


def test_additive_scores_numpy_matches_torch_float64_with_gradients(rng):
    q, k = rng.standard_normal((2, 3, 5, 3)), rng.standard_normal((2, 3, 6, 4))
    params = additive_params(rng)
    expected = additive_scores_np(q, k, *params)
    tensors = [t64(a) for a in (q, k, *params)]
    got = additive_scores_torch(*tensors)
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(additive_scores_torch, tensors, fast_mode=True)
    # and they plug into the same softmax and weighted sum as dot-product scores
    mask = rng.random((5, 6)) < 0.6
    weights = softmax_np(expected, mask)
    np.testing.assert_allclose(softmax_torch(got, torch.tensor(mask)).detach().numpy(), weights,
                               atol=1e-12)


def test_additive_scores_bad_input(rng):
    q, k = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 4, 4))
    w_q, w_k, v_a = additive_params(rng)
    for args, message in [((q, k, w_q, w_k, v_a[:4]), r"^v_a: .*h = 5"),
                          ((q, k, w_q[:, :2], w_k, v_a), r"^w_q: .*dq = 3"),
                          ((q, k[:1], w_q, w_k, v_a), r"^k: .*\.\.\. = \(2,\)"),
                          ((q[0, 0], k, w_q, w_k, v_a), r"^q: expected float \(\.\.\., Lq, dq\)")]:
        with pytest.raises(ValueError, match=message):
            additive_scores_np(*args)
        with pytest.raises(ValueError, match=message):
            additive_scores_torch(*map(torch.tensor, args))


# ---------------------------------------------------------------- lesson 01: the backward's row sum
def test_backward_row_sum_needs_only_the_output(rng):
    """rowsum(∂P ⊙ P) = rowsum(∂O ⊙ O), the identity FlashAttention's backward rests on (Dao et
    al. 2022, Appendix B), with masks and a query row that sees no key."""
    q, k, v = random_qkv(rng)
    mask = rng.random((2, 3, 5, 7)) < 0.6
    mask[0, 0, 0] = False  # an empty row: both sums are 0
    grad_out = rng.standard_normal((2, 3, 5, 6))
    out, weights = attention_np(q, k, v, mask)
    row_sum_p = ((grad_out @ np.swapaxes(v, -1, -2)) * weights).sum(-1)
    np.testing.assert_allclose(row_sum_p, (grad_out * out).sum(-1), rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- lesson 01: positions
def test_sinusoid_offset_is_one_rotation_for_every_position():
    """Vaswani et al. §3.5: PE(p + k) is a linear function of PE(p): each (sin, cos) pair turns by
    k·ω. The library's table lays out all sines, then all cosines."""
    from minattn.attention import sinusoid_np

    n, d, k = 40, 16, 5
    pe = sinusoid_np(n, d)
    omega = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    c, s = np.diag(np.cos(k * omega)), np.diag(np.sin(k * omega))
    np.testing.assert_allclose(pe[:-k] @ np.block([[c, -s], [s, c]]), pe[k:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(pe[:, :d // 2] ** 2 + pe[:, d // 2:] ** 2, 1.0)  # unit pairs


def test_reversal_task_targets_and_sizes():
    from minattn.course.attention import reversal

    tokens, targets = reversal(5, 6, 9, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (5, 6) and tokens.dtype == torch.int64
    torch.testing.assert_close(targets, tokens.flip(1))
    assert all(len(set(row.tolist())) == 6 for row in tokens)  # distinct: the floor is 1/(N-1)
    assert int(tokens.max()) < 9
    for bad in ((0, 6, 9), (5, 10, 9), (5, 1, 9)):
        with pytest.raises(ValueError, match="expected"):
            reversal(*bad, torch.Generator())


def test_position_reader_without_positions_is_blind_to_order():
    """With positions="none" permuting the input permutes the logits: no model of that kind can
    reverse a sequence. The sinusoids and a learned table break the symmetry."""
    from minattn.attention import PositionReader

    tokens = torch.randperm(12)[:7][None]
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    for positions in PositionReader.POSITIONS:
        torch.manual_seed(0)
        model = PositionReader(12, 7, positions, d_model=8).double()
        if positions == "learned":
            torch.nn.init.normal_(model.table)
        with torch.no_grad():
            logits, weights = model(tokens, need_weights=True)
            permuted = model(tokens[:, perm])
        assert logits.shape == (1, 7, 12) and weights.shape == (1, 1, 7, 7)
        blind = torch.allclose(permuted, logits[:, perm], atol=1e-12)
        assert blind == (positions == "none"), positions
    with pytest.raises(ValueError, match="expected"):
        PositionReader(12, 7, "rotary")


def test_learned_positions_start_at_the_init_std_they_are_given():
    from minattn.attention import PositionReader

    torch.manual_seed(0)
    for std in (0.02, 0.2, 0.71):
        table = PositionReader(12, 64, "learned", init_std=std).table
        assert abs(table.std().item() - std) < 0.05 * std
    with pytest.raises(ValueError, match="init_std"):
        PositionReader(12, 7, "learned", init_std=0.0)
    with pytest.raises(ValueError, match="d_model"):
        PositionReader(12, 7, "sinusoid", d_model=7)  # a sine and a cosine per frequency
    model = PositionReader(12, 7, "sinusoid", d_model=8)
    with pytest.raises(ValueError, match="tokens"):
        model(torch.zeros(1, 8, dtype=torch.long))  # longer than max_len
    with pytest.raises(ValueError, match="tokens"):
        model(torch.full((1, 3), 12))  # outside the vocabulary


def test_train_reversal_stops_at_its_target():
    from minattn.course.attention import reversal, steps_to, train_reversal

    held_out = reversal(64, 4, 6, torch.Generator().manual_seed(1))
    _, history = train_reversal("sinusoid", 0, held_out, n_symbols=6, steps=400, eval_every=5,
                                stop_at=0.5)
    reached = steps_to(history, 0.5)
    assert reached is not None and history["accuracy_step"][-1] == reached


def test_heads_by_contrast_tells_a_column_from_a_link():
    from minattn.course.attention import heads_by_contrast

    w = np.full((1, 2, 4, 4), 0.25)
    w[0, 0, :, 1] = 0.7  # head 1: every query looks at token 1 (a column)
    w[0, 1, 3, 1] = 0.7  # head 2: only query 3 does
    found = heads_by_contrast(w, query=3, key=1)
    np.testing.assert_allclose(found["pair"], [[0.7, 0.7]])
    np.testing.assert_allclose(found["others"], [[0.7, 0.25]])
    np.testing.assert_allclose(found["contrast"], [[0.0, 0.45]], atol=1e-12)
    with pytest.raises(ValueError, match="weights"):
        heads_by_contrast(w[0], 3, 1)


# ------------------------------------------------------------ lesson 01: the online softmax
@pytest.mark.parametrize("block", [1, 3, 7, 64])
def test_online_attention_equals_attention_float64(rng, block):
    """Block by block with a running max and sum (FlashAttention's forward) gives attention_np's
    output exactly, masks and a row that sees no key included; its lse recovers the weights."""
    from minattn.attention import online_attention_np, online_attention_torch

    q, k, v = random_qkv(rng)
    mask = rng.random((2, 3, 5, 7)) < 0.6
    mask[0, 0, 0] = False  # an empty row: output 0, lse -inf
    out, weights = attention_np(q, k, v, mask)
    online, lse = online_attention_np(q, k, v, mask, block=block)
    np.testing.assert_allclose(online, out, rtol=0, atol=1e-13)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    np.testing.assert_allclose(np.where(mask, np.exp(scores - lse[..., None]), 0.0), weights,
                               rtol=0, atol=1e-13)
    assert lse[0, 0, 0] == -np.inf and np.isfinite(np.delete(lse.ravel(), 0)).all()
    online_t, lse_t = online_attention_torch(*(torch.tensor(a) for a in (q, k, v, mask)),
                                             block=block)
    np.testing.assert_allclose(online_t.numpy(), online, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(np.isinf(lse_t.numpy()), np.isinf(lse))


def test_online_attention_torch_gradients_match_attention_torch(rng):
    from minattn.attention import online_attention_torch

    q, k, v = random_qkv(rng)
    mask = torch.tensor(rng.random((5, 7)) < 0.7)  # broadcast over the batch axes
    mask[1] = False
    grad_out = torch.tensor(rng.standard_normal((2, 3, 5, 6)))
    grads = []
    for fn in (lambda *a: attention_torch(*a)[0],
               lambda *a: online_attention_torch(*a, block=3)[0]):
        qt, kt, vt = t64(q), t64(k), t64(v)
        fn(qt, kt, vt, mask).backward(grad_out)
        grads.append([qt.grad, kt.grad, vt.grad])
    for ours, ref in zip(*grads):
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)


def test_online_attention_float32_matches_sdpa_and_refuses_bad_blocks(rng):
    from minattn.attention import online_attention_np, online_attention_torch

    q, k, v = (torch.tensor(a, dtype=torch.float32) for a in random_qkv(rng, lk=50))
    out, _ = online_attention_torch(q, k, v, block=16)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-5)
    for block in (0, -2, 2.5):
        with pytest.raises(ValueError, match="block"):
            online_attention_np(q.numpy(), k.numpy(), v.numpy(), block=block)
    with pytest.raises(ValueError, match="mask"):
        online_attention_torch(q, k, v, mask=torch.zeros(5, 50))  # a float mask


# ------------------------------------------------------------ lesson 01: why √d, and its runs
def test_softmax_rows_closed_forms_equal_the_explicit_jacobians():
    """‖diag(P) − PPᵀ‖ and ‖∂P/∂q‖ = ‖J K c‖ in closed form equal the explicit matrices, and the
    gradient norm matches autograd's Jacobian of softmax(c q·k) with respect to q."""
    from minattn.course.attention import softmax_rows_np

    d, n_keys = 6, 5
    rows = softmax_rows_np(d, np.random.default_rng(0), n_queries=3, n_keys=n_keys)
    rng = np.random.default_rng(0)  # the same draws again
    q, k = rng.standard_normal((3, d)), rng.standard_normal((3, n_keys, d))
    for scaled, c in ((True, 1 / np.sqrt(d)), (False, 1.0)):
        for i in range(3):
            p = softmax_np(k[i] @ q[i] * c)
            jac = np.diag(p) - np.outer(p, p)
            assert abs(rows[scaled]["jacobian"][i] - np.linalg.norm(jac)) < 1e-7
            auto = torch.autograd.functional.jacobian(
                lambda x: torch.softmax(torch.tensor(k[i]) @ x * c, -1), torch.tensor(q[i]))
            assert abs(rows[scaled]["to_q"][i] - np.linalg.norm(auto.numpy())) < 1e-7
            assert abs(rows[scaled]["max_weight"][i] - p.max()) < 1e-12
    with pytest.raises(ValueError, match="rng"):
        softmax_rows_np(4, 0)


def test_steps_to_and_the_most_frequent_value_floor():
    from minattn.course.attention import most_frequent_value_accuracy, steps_to
    from minattn.course.train import History

    history = History(step=[])
    for step, acc in ((5, 0.5), (10, 0.991), (15, 0.98), (20, 1.0)):
        history.log(step, accuracy=acc)
    assert steps_to(history, 0.99) == 10 and steps_to(history, 1.0) == 20
    assert steps_to(history, 1.01) is None
    with pytest.raises(ValueError, match="history"):
        steps_to(history, 0.5, key="loss")
    batch = {"values": torch.tensor([[3, 3, 1, 2]]), "targets": torch.tensor([[3, 1, 3, 2]])}
    assert most_frequent_value_accuracy(batch, 4) == 0.5  # always answer 3: right twice of four
