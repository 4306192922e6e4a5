"""Wrong calls are refused with a clear message; masked garbage never reaches a result.

* the survey (tests/bad_calls.py): every one of its wrong calls on the library's public
  functions must raise ValueError/TypeError "<what>: expected <x>, got <y>" naming the argument;
* the issue's cases one by one, with the exact answer where there is one (what a mask hides
  may hold NaN and the result is the one without it, forward and backward);
* Hypothesis: random bad inputs (shapes, dtypes, NaN/inf, negative or fractional sizes) at the
  attention entry points, the pools and the size helpers give a documented error or a finite
  result equal to the NumPy reference.
Cheap by design (tiny shapes, float64): the whole file takes a few seconds.
"""

from __future__ import annotations

import math

import bad_calls  # tests/ is on sys.path (rootdir conftest)
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minattn import attention as A
from minattn import ibm1
from minattn import lstm_attention as LA
from minattn import multiscale as MS
from minattn import task_heads as TH
from minattn import xl as X

NAN, INF = float("nan"), float("inf")
OUR_FORMAT = bad_calls.OUR_FORMAT


# ============================================================================ the survey
def test_every_wrong_call_of_the_survey_is_refused_clearly():
    _, rows = bad_calls.survey()
    unclear = [f"[{cat}] {e.module}.{e.function} ({e.what}): {msg[:120]}"
               for e, cat, msg in rows if cat != "clear"]
    assert len(rows) >= 300
    assert not unclear, "\n".join(unclear)


# ============================================================================ the cases
def refused(call, *names):
    """The call raises ValueError/TypeError in our format, naming every one of `names`."""
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    text = str(info.value)
    assert OUR_FORMAT.match(text), text
    for name in names:
        assert name in text, text
    return text


def test_float_masks_are_refused_by_all_three_attention_entry_points():
    rng = np.random.default_rng(0)
    s, q = rng.standard_normal((3, 5)), rng.standard_normal((3, 4))
    additive = np.where(np.tri(3, 5, 2, dtype=bool), 0.0, -np.inf)
    refused(lambda: A.softmax_np(s, additive), "mask")
    refused(lambda: A.softmax_torch(torch.from_numpy(s), torch.from_numpy(additive)), "mask")
    refused(lambda: A.attention_np(q, q, q, additive[:, :3]), "mask")
    # the conversion the docstring gives reproduces the bool answer exactly
    np.testing.assert_array_equal(A.softmax_np(s, additive == 0),
                                  A.softmax_np(s, np.tri(3, 5, 2) > 0))


def test_mha_refuses_an_ambiguous_2_axis_mask_and_takes_key_padding_mask():
    torch.manual_seed(0)
    B = L = 3
    mha = A.MultiHeadAttention(4, 2).double()
    x = torch.randn(B, L, 4, dtype=torch.float64)
    kp = torch.tensor([[True, True, False], [True, False, False], [True, True, True]])
    refused(lambda: mha(x, mask=kp), "mask", "key_padding_mask")
    out, w = mha(x, key_padding_mask=kp, need_weights=True)
    assert torch.all(w.masked_select(~kp[:, None, None, :].expand_as(w)) == 0)
    ref, _ = mha(x, mask=kp[:, None, None, :], need_weights=True)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    # each sequence with its own padding: the same as running it alone, unpadded
    alone, _ = mha(x[1:2, :1], need_weights=True)
    torch.testing.assert_close(out[1:2, :1], alone, rtol=1e-12, atol=1e-12)


def test_inf_scores_and_sizes():
    refused(lambda: A.softmax_np(np.array([[0.0, INF]])), "scores")
    assert np.array_equal(A.softmax_np(np.array([[0.0, -INF]])), [[1.0, 0.0]])  # -inf: weight 0
    for bad in (-1, 2.5, True):
        refused(lambda: A.causal_mask_np(bad), "n_queries")
    refused(lambda: X.relative_distances_np(-2, 3), "n_queries")
    mem, hid = np.zeros((1, 2, 4)), np.zeros((1, 3, 4))
    refused(lambda: X.update_memory_np(mem, hid, -1), "mem_len")
    refused(lambda: X.update_memory_torch(torch.from_numpy(mem), torch.from_numpy(hid), -1),
            "mem_len")


def test_measured_scale_refuses_float_and_wrong_shape_query_masks():
    w = np.full((1, 1, 3, 3), 1 / 3)
    refused(lambda: MS.measured_scale_np(w, np.ones((1, 3))), "query_mask")
    refused(lambda: MS.measured_scale_np(w, np.ones(3, bool)), "query_mask")


def test_token_ids_dtypes_and_devices():
    torch.manual_seed(0)
    model = X.TransformerXL(7, d_model=8, num_heads=2, num_layers=1, mem_len=2)
    for ids in (torch.tensor([[1, 7]]), torch.tensor([[-1, 2]])):
        refused(lambda: model(ids), "tokens")
    q32 = torch.zeros(2, 4)
    refused(lambda: A.attention_torch(q32, q32.double(), q32.double()), "dtype")
    s, h, W = torch.zeros(1, 2, 4), torch.zeros(1, 3, 4, device="meta"), torch.zeros(1, 4, 4)
    refused(lambda: LA.luong_attention_torch(s, h, W), "device")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 0/0 inside the E-step, then refused
def test_ibm1_all_zero_table_and_negative_iterations():
    bx = ibm1.make_bitext([["a", "b"], ["a"]], [["A"], ["B"]])
    refused(lambda: ibm1.em_np(bx, -1), "iterations")
    refused(lambda: ibm1.e_step_np(np.zeros((3, 2)), bx), "t")
    refused(lambda: ibm1.e_step_torch(torch.zeros(3, 2, dtype=torch.float64), bx), "t")
    refused(lambda: ibm1.alignment_matrix_np(np.zeros((3, 2)), bx, 0), "t")


# ============================================================================ select, not multiply
def test_mean_pool_ignores_nan_in_padding_forward_and_backward():
    rng = np.random.default_rng(1)
    states, mask = rng.standard_normal((2, 4, 3)), np.array([[1, 1, 0, 0], [1, 0, 0, 0]], bool)
    dirty = states.copy()
    dirty[~mask] = NAN
    pooled = TH.mean_pool_np(dirty, mask)
    np.testing.assert_allclose(pooled[0], states[0, :2].mean(0), rtol=1e-12)
    np.testing.assert_allclose(pooled[1], states[1, 0], rtol=1e-12)
    st_ = torch.from_numpy(dirty).requires_grad_()  # the encoder's sentence embedding uses it too
    out = TH.mean_pool_torch(st_, torch.from_numpy(mask))
    torch.testing.assert_close(out, torch.from_numpy(pooled), rtol=1e-12, atol=0)
    out.sum().backward()
    assert torch.isfinite(st_.grad).all() and torch.all(st_.grad[~torch.from_numpy(mask)] == 0)
    # a sentence with no real token (not even [CLS]) is refused, not pooled to a made-up 0
    refused(lambda: TH.mean_pool_torch(st_, torch.zeros(2, 4, dtype=torch.bool)), "mask")


def test_attention_with_nan_under_the_mask_equals_attention_without_it():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    mask = np.ones((3, 5), bool)
    mask[:, 3:] = False  # keys 3, 4 are padding
    mask[2] = False  # query 2 sees nothing
    kd, vd, qd = k.copy(), v.copy(), q.copy()
    kd[3:], vd[3:], qd[2] = NAN, INF, NAN
    out, w = A.attention_np(qd, kd, vd, mask)
    ref, wref = A.attention_np(q[:, :], k[:3], v[:3], mask[:, :3])
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)
    assert np.array_equal(out[2], np.zeros(2)) and np.array_equal(w[2], np.zeros(5))
    tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (qd, kd, vd))
    tout, _ = A.attention_torch(tq, tk, tv, torch.from_numpy(mask))
    torch.testing.assert_close(tout, torch.from_numpy(out), rtol=1e-12, atol=1e-15)
    tout.sum().backward()
    for g in (tq.grad, tk.grad, tv.grad):
        assert torch.isfinite(g).all()
    assert torch.all(tk.grad[3:] == 0) and torch.all(tq.grad[2] == 0)


# ============================================================================ Hypothesis
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
poison = st.sampled_from([None, NAN, INF, -INF])


@SETTINGS
@given(lq=st.integers(-1, 3), lk=st.integers(0, 3), d=st.integers(0, 3),
       dtype=st.sampled_from([np.float64, np.float32, np.int64, np.bool_]),
       k_dtype=st.sampled_from([None, np.float32]), mask_kind=st.sampled_from(
           [None, "bool", "float", "wrong_shape"]), bad=poison, seed=st.integers(0, 3))
def test_attention_gives_a_documented_error_or_the_reference(lq, lk, d, dtype, k_dtype, mask_kind,
                                                             bad, seed):
    rng = np.random.default_rng(seed)
    shape_q, shape_k = (max(lq, 0), d) if lq >= 0 else (d,), (lk, d)
    q = rng.standard_normal(shape_q).astype(dtype)
    k = rng.standard_normal(shape_k).astype(k_dtype or dtype)
    v = rng.standard_normal((lk, 2)).astype(dtype)
    mask = {None: None, "bool": rng.random((max(lq, 0), lk)) < 0.7,
            "float": np.zeros((max(lq, 0), lk)),
            "wrong_shape": np.ones((lk + 1, 1), bool)}[mask_kind]
    if bad is not None and q.size and q.dtype.kind == "f":
        q.flat[0] = bad
    try:
        out, w = A.attention_np(q, k, v, mask)
    except (ValueError, TypeError) as err:
        assert OUR_FORMAT.match(str(err)), str(err)
        with pytest.raises(type(err)):  # the twin refuses too
            A.attention_torch(*(torch.from_numpy(np.asarray(a)) for a in (q, k, v)),
                              None if mask is None else torch.from_numpy(mask))
        return
    assert np.isfinite(out).all() and np.isfinite(w).all()
    tout, tw = A.attention_torch(*(torch.from_numpy(a) for a in (q, k, v)),
                                 None if mask is None else torch.from_numpy(mask))
    np.testing.assert_allclose(tout.numpy(), out, rtol=1e-6, atol=1e-6)
    rows = mask.any(-1) if mask is not None else np.ones(q.shape[0], bool)
    np.testing.assert_allclose(w.sum(-1), rows.astype(float), rtol=1e-6)


@SETTINGS
@given(b=st.integers(0, 2), n=st.integers(0, 3), dim=st.integers(1, 3),
       mask_kind=st.sampled_from(["bool", "float", "short"]), garbage=poison,
       seed=st.integers(0, 3))
def test_mean_pool_gives_a_documented_error_or_the_mean_of_the_real_tokens(b, n, dim, mask_kind,
                                                                          garbage, seed):
    rng = np.random.default_rng(seed)
    states = rng.standard_normal((b, n, dim))
    mask = rng.random((b, n)) < 0.6
    mask[:, :1] = True  # the task heads' contract: the first token ([CLS]) is real
    if garbage is not None:
        states[~mask] = garbage
    given_mask = {"bool": mask, "float": mask.astype(float), "short": mask[:, :-1]}[mask_kind]
    try:
        pooled = TH.mean_pool_np(states, given_mask)
    except (ValueError, TypeError) as err:
        assert OUR_FORMAT.match(str(err)), str(err)
        return
    assert mask_kind == "bool" and np.isfinite(pooled).all()
    for row in range(b):
        want = states[row, mask[row]].mean(0) if mask[row].any() else np.zeros(dim)
        np.testing.assert_allclose(pooled[row], want, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(TH.mean_pool_torch(torch.from_numpy(states), torch.from_numpy(mask)),
                               torch.from_numpy(pooled), rtol=1e-12, atol=1e-15)


@SETTINGS
@given(value=st.one_of(st.integers(-3, 3), st.floats(-3, 3), st.just(float("nan")), st.booleans(),
                       st.just("2"), st.none()))
def test_sizes_are_non_negative_integers(value):
    calls = [lambda: A.causal_mask_np(value), lambda: X.relative_distances_np(value, 3),
             lambda: ibm1.em_np(ibm1.make_bitext([["a"]], [["A"]]), value)]
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    for call in calls:
        if ok:
            call()
        else:
            refused(call)


def test_softmax_fully_masked_rows_are_zero_forward_and_backward():
    s = torch.tensor([[NAN, INF, 1.0], [0.5, 2.0, -1.0]], dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[False, False, False], [True, False, True]])
    p = A.softmax_torch(s, mask)
    assert torch.equal(p[0], torch.zeros(3, dtype=torch.float64))
    assert math.isclose(float(p[1].sum().detach()), 1.0)
    (p * torch.arange(3.0, dtype=torch.float64)).sum().backward()
    assert torch.isfinite(s.grad).all() and torch.all(s.grad[0] == 0)


@SETTINGS
@given(m=st.integers(0, 3), n=st.integers(1, 3),
       mem_len=st.one_of(st.integers(-2, 5), st.just(1.5)),
       width=st.sampled_from([4, 3]), first=st.booleans())
def test_update_memory_gives_a_documented_error_or_the_last_mem_len_states(m, n, mem_len, width,
                                                                         first):
    rng = np.random.default_rng(m + 7 * n)
    memory = None if first else rng.standard_normal((2, m, width))
    hidden = rng.standard_normal((2, n, 4))
    try:
        new = X.update_memory_np(memory, hidden, mem_len)
    except (ValueError, TypeError) as err:
        assert OUR_FORMAT.match(str(err)), str(err)
        assert mem_len == 1.5 or mem_len < 0 or (memory is not None and width != 4)
        return
    both = hidden if memory is None else np.concatenate([memory, hidden], 1)
    np.testing.assert_array_equal(new, both[:, both.shape[1] - min(mem_len, both.shape[1]):])
    t = X.update_memory_torch(None if memory is None else torch.from_numpy(memory),
                              torch.from_numpy(hidden), mem_len)
    np.testing.assert_array_equal(t.numpy(), new)


@SETTINGS
@given(n=st.integers(1, 4), garbage=poison,
       lengths=st.lists(st.integers(0, 4), min_size=2, max_size=2),
       seed=st.integers(0, 3))
def test_luong_attention_ignores_padding_and_matches_its_twin(n, garbage, lengths, seed):
    rng = np.random.default_rng(seed)
    s, h = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, n, 4))
    W = rng.standard_normal((2, 4, 4))
    mask = np.arange(n)[None, :] < np.minimum(lengths, n)[:, None]
    if garbage is not None:
        h[~mask] = garbage
    try:
        ctx, alpha = LA.luong_attention_np(s, h, W, mask)
    except (ValueError, TypeError) as err:
        assert OUR_FORMAT.match(str(err)), str(err)
        return
    assert np.isfinite(ctx).all() and np.isfinite(alpha).all()
    for b in range(2):
        real = mask[b]
        if not real.any():
            assert np.array_equal(ctx[b], np.zeros_like(ctx[b]))
            continue
        ref, _ = LA.luong_attention_np(s[b:b + 1], h[b:b + 1, real], W)
        np.testing.assert_allclose(ctx[b], ref[0], rtol=1e-10, atol=1e-12)
    tctx, _ = LA.luong_attention_torch(*(torch.from_numpy(a) for a in (s, h, W, mask)))
    np.testing.assert_allclose(tctx.numpy(), ctx, rtol=1e-10, atol=1e-12)


def test_values_are_read_at_the_door_not_inside_a_training_graph():
    """A NaN in data or a parameter is refused; an activation (made under autograd from checked
    inputs) is not read again, so a training step pays for no value check."""
    from minattn.contract import check_finite, in_graph
    leaf = torch.tensor([1.0, float("nan")], requires_grad=True)
    with pytest.raises(ValueError, match="finite"):
        check_finite("x", leaf)
    activation = leaf * 1.0
    assert in_graph(activation) and not in_graph(leaf) and not in_graph(activation, leaf)
    check_finite("x", activation)  # not read
    with torch.no_grad():
        with pytest.raises(ValueError, match="finite"):
            check_finite("x", leaf * 1.0)  # computed without gradients: read


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_the_one_reduction_finite_test_matches_the_element_wise_one(dtype):
    """check_finite's fast path (a sum, or a max when -inf is allowed) decides exactly as the
    element-wise test: every bad value anywhere is found, masked-away ones are let through,
    and finite values whose sum overflows are not refused."""
    from minattn.contract import check_finite
    big = torch.finfo(dtype).max
    g = torch.Generator().manual_seed(0)
    for bad in (float("nan"), math.inf, -math.inf):
        for n in (1, 7, 1000):
            for at in {0, n // 2, n - 1}:
                x = torch.randn(n, generator=g).to(dtype)
                x[at] = bad
                with pytest.raises(ValueError, match="finite"):
                    check_finite("x", x)
                keep = torch.ones(n, dtype=torch.bool)
                keep[at] = False
                check_finite("x", x, where=keep)  # the bad value does not count
                if bad == -math.inf:
                    check_finite("x", x, minus_inf_ok=True)
                else:
                    with pytest.raises(ValueError, match="finite"):
                        check_finite("x", x, minus_inf_ok=True)
    check_finite("x", torch.full((4,), big, dtype=dtype))  # its sum is inf: still all finite
    check_finite("x", torch.tensor([big, -big, big], dtype=dtype).view(3, 1).expand(3, 5))
    check_finite("x", torch.empty(0, 3, dtype=dtype))


@pytest.mark.parametrize("name", ["attention_torch", "attention_fast_torch"])
def test_activations_skip_the_selection_and_give_the_same_answer(name):
    """Hidden keys and empty query rows: an activation (not selected) and a leaf (selected)
    give the same outputs and the same gradients."""
    import minattn.attention as A
    import minattn.fast.attention as FA
    fn = getattr(FA if "_fast_" in name else A, name)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(2, 5, 5, generator=g) > 0.5
    mask[0, 1] = False  # a query that sees no key
    mask[1, :, 3] = False  # a key that no query sees
    answers = []
    for as_activation in (False, True):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        inputs = [x * 1.0 for x in leaves] if as_activation else leaves
        out = fn(*inputs, mask=mask)
        out = out[0] if isinstance(out, tuple) else out
        out.square().sum().backward()
        answers.append([out.detach()] + [x.grad for x in leaves])
    for a, b in zip(*answers):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
