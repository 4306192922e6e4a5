"""Sparse patterns and references (minattn/sparse.py) and their linear-cost kernels
(minattn/fast/sparse.py).

Every kernel is checked against lesson 01's dense masked attention on the NumPy mask of the
same pattern, outputs and gradients, in float64. The masks themselves are checked against
definitions written out entry by entry and, where available, against FlexAttention's
create_mask for an equivalent mask_mod.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from expect import same_mask  # tests/ is on sys.path

from minattn.attention import (
    MultiHeadAttention,
    attention_np,
    attention_torch,
    multi_head_attention_np,
)
from minattn.fast.sparse import (
    REFERENCES,
    WindowAttentionFunction,
    band_mask_torch,
    block_sparse_attention_fast_torch,
    diameter_fast_np,
    dilated_window_attention_fast_torch,
    global_window_attention_fast_torch,
    sliding_window_attention_fast_torch,
    window_attention_fast_torch,
)
from minattn.sparse import (
    SparseClassifier,
    bigbird_layout_np,
    bigbird_layouts_np,
    bigbird_mask_np,
    block_layout_np,
    block_mask_np,
    block_sparse_attend,
    block_sparse_attention_np,
    block_sparse_attention_torch,
    diameter_np,
    dilated_window_mask_np,
    fixed_masks_np,
    global_mask_np,
    hops_np,
    longformer_mask_np,
    random_mask_np,
    reach_np,
    sliding_window_mask_np,
    strided_masks_np,
    union_np,
    window_attend,
    window_attention_np,
    window_attention_torch,
)


def _window_mask(n, w, dilation=1, causal=False, glob=()):
    """The kernels' reference pattern from the library's masks (in a student copy they wait on
    exercise 2.1): the dilated window ∪ global rows and columns, ∩ j <= i if causal."""
    mask = dilated_window_mask_np(n, w, dilation)
    if len(glob):
        mask = mask | global_mask_np(n, list(glob))
    return mask & np.tri(n, dtype=bool) if causal else mask


def _qkv(shape, seed=0, dv=None, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    *batch, n, d = shape
    q, k, v = (torch.randn(*batch, n, size, generator=gen, dtype=torch.float64).to(device)
               .requires_grad_() for size in (d, d, dv or d))
    return q, k, v


def _assert_matches_dense(kernel, mask_np, shape=(2, 3, 0, 5), seed=0, device="cpu"):
    """kernel(q, k, v) equals dense masked attention on mask_np: outputs and gradients."""
    n = mask_np.shape[-1]
    q, k, v = _qkv(shape[:-2] + (n, shape[-1]), seed, device=device)
    grad_out = torch.randn(*q.shape[:-1], v.shape[-1], dtype=torch.float64,
                           generator=torch.Generator().manual_seed(seed + 1)).to(device)
    out = kernel(q, k, v)
    assert out.device == q.device
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    ref, _ = attention_torch(q, k, v, torch.as_tensor(mask_np, device=device))
    ref_grads = torch.autograd.grad(ref, (q, k, v), grad_out)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for g, r, name in zip(grads, ref_grads, "qkv"):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10, msg=f"grad of {name} differs")


# ============================================================================ patterns
def test_sliding_window_mask_small_example():
    expected = np.array([[1, 1, 0, 0, 0],
                         [1, 1, 1, 0, 0],
                         [0, 1, 1, 1, 0],
                         [0, 0, 1, 1, 1],
                         [0, 0, 0, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(sliding_window_mask_np(5, 1), expected)
    np.testing.assert_array_equal(sliding_window_mask_np(5, 1, causal=True), np.tril(expected))


@pytest.mark.exercise("2.1")
@pytest.mark.parametrize("n,w", [(1, 0), (7, 0), (7, 2), (9, 3), (6, 10)])
@pytest.mark.parametrize("causal", [False, True])
def test_sliding_window_mask_matches_definition(n, w, causal):
    mask = sliding_window_mask_np(n, w, causal)
    assert mask.dtype == np.bool_, f"sliding_window_mask_np returned {mask.dtype}, not bool"
    want = np.zeros((n, n), bool)
    for i, j in itertools.product(range(n), range(n)):
        want[i, j] = abs(i - j) <= w and (j <= i or not causal)
    same_mask(mask, want, w, what=f"sliding_window_mask_np({n}, {w}, causal={causal}): ")
    # 2w + 1 keys per query away from the ends (w + 1 when causal)
    if n > 2 * w:
        assert mask[w].sum() == (w + 1 if causal else 2 * w + 1)


@pytest.mark.exercise("2.1")
def test_dilated_window_is_window_of_every_delta_th_token():
    mask = dilated_window_mask_np(20, 2, 3)
    seen = np.flatnonzero(mask[10]).tolist()
    assert seen == [4, 7, 10, 13, 16], f"dilated_window_mask_np(20, 2, 3): query 10 sees {seen}"
    same_mask(dilated_window_mask_np(9, 2, 1), sliding_window_mask_np(9, 2), 2,
              what="dilation 1 is the sliding window: ")
    seen = np.flatnonzero(dilated_window_mask_np(20, 2, 3, causal=True)[10]).tolist()
    assert seen == [4, 7, 10], f"dilated_window_mask_np(20, 2, 3, causal=True): query 10: {seen}"


def test_global_random_bigbird_and_union():
    g = global_mask_np(6, [0, 4])
    assert g[0].all() and g[:, 4].all() and not g[1, 2]
    r = random_mask_np(50, 3, seed=1)
    assert (r.sum(1) == 3).all()
    np.testing.assert_array_equal(r, random_mask_np(50, 3, seed=1))  # seeded
    assert not np.array_equal(r, random_mask_np(50, 3, seed=2))
    rc = random_mask_np(50, 3, seed=1, causal=True)
    assert not np.triu(rc, 1).any() and rc[0].sum() == 1 and rc[1].sum() == 2
    layout = bigbird_layout_np(10, window=1, n_global=1, n_random=2, seed=0)
    assert layout[0].all() and layout[:, 0].all()
    # window (3 blocks, 2 at the end) + global block 0 (inside row 1's window) + 2 random
    assert layout[1:].sum(1).tolist() == [5, 6, 6, 6, 6, 6, 6, 6, 5]
    mask = bigbird_mask_np(37, 4, seed=0)  # 37 is not a multiple of the block: cut to N
    np.testing.assert_array_equal(mask, block_mask_np(bigbird_layout_np(10, seed=0), 4, 37))
    np.testing.assert_array_equal(block_layout_np(mask, 4), bigbird_layout_np(10, seed=0))
    np.testing.assert_array_equal(union_np(sliding_window_mask_np(6, 1), g),
                                  sliding_window_mask_np(6, 1) | g)


def test_sparse_transformer_patterns():
    local, strided = strided_masks_np(16, 4)
    i = 13  # A¹ = {t, ..., i}, t = max(0, i - l): l + 1 keys (Child et al. 2019, §4.3)
    assert np.flatnonzero(local[i]).tolist() == [9, 10, 11, 12, 13]
    assert np.flatnonzero(local[2]).tolist() == [0, 1, 2]  # t = max(0, 2 - 4)
    assert np.flatnonzero(strided[i]).tolist() == [1, 5, 9, 13]
    block, summary = fixed_masks_np(16, 4, 1)
    assert np.flatnonzero(block[i]).tolist() == [12, 13]
    assert np.flatnonzero(summary[i]).tolist() == [3, 7, 11]
    # two hops of local ∪ strided connect every j <= i (the point of the factorisation)
    assert diameter_np(union_np(local, strided)) == 2


def test_hops_and_diameter():
    # window w: news travels w positions per layer; a global token makes it 2 hops
    assert diameter_np(sliding_window_mask_np(21, 2)) == 10
    assert diameter_np(sliding_window_mask_np(21, 2) | global_mask_np(21, [5])) == 2
    hops = hops_np(sliding_window_mask_np(8, 1))
    assert hops[0].tolist() == list(range(8)) and (np.diag(hops) == 0).all()
    assert diameter_np(dilated_window_mask_np(12, 2, 2)) == float("inf")  # classes never meet
    assert diameter_np(sliding_window_mask_np(12, 1, causal=True)) == 11


def test_reach_through_a_stack_and_the_fast_diameter():
    """reach_np of one mask repeated is hops_np's reach; different masks compose in order;
    breadth-first search gives diameter_np's layers (inf and causal patterns included)."""
    window = sliding_window_mask_np(30, 2)
    np.testing.assert_array_equal(reach_np(window, window, window),
                                  (hops_np(window, max_hops=3) >= 0))
    first, second = np.zeros((3, 3), bool), np.zeros((3, 3), bool)
    first[1, 0], second[2, 1] = True, True  # 0 -> 1 in layer 1, then 1 -> 2 in layer 2
    assert reach_np(first, second)[2, 0] and not reach_np(second, first)[2, 0]
    masks = [window, window | random_mask_np(30, 1, seed=0), dilated_window_mask_np(12, 2, 2),
             union_np(*strided_masks_np(40, 6)), union_np(*fixed_masks_np(40, 8, 2)),
             sliding_window_mask_np(13, 1, causal=True), bigbird_mask_np(50, 5, seed=2)]
    for mask in masks:
        assert diameter_fast_np(mask) == diameter_np(mask)
    for n in (64, 256):  # the Sparse Transformer's point: two hops at O(N√N)
        assert diameter_fast_np(union_np(*strided_masks_np(n, round(n ** 0.5)))) == 2
        assert diameter_fast_np(union_np(*fixed_masks_np(n, round(n ** 0.5), 2))) == 2


def test_bigbird_layouts_per_head_and_per_layer():
    """One seed draws a different layout for every head of every layer (as BigBird's code
    does), each a BigBird layout: the same window, different random blocks; the same seed
    draws the same layouts."""
    layouts = bigbird_layouts_np(16, 2, 3, window=1, n_global=0, n_random=1, seed=7)
    assert layouts.shape == (2, 3, 16, 16) and layouts.dtype == bool
    band = np.abs(np.arange(16)[:, None] - np.arange(16)[None, :]) <= 1
    for layout in layouts.reshape(-1, 16, 16):
        assert (layout[band]).all() and (layout & ~band).sum(1).tolist() == [1] * 16
    assert len({layout.tobytes() for layout in layouts.reshape(-1, 16, 16)}) == 6
    np.testing.assert_array_equal(layouts, bigbird_layouts_np(16, 2, 3, 1, 0, 1, seed=7))
    with pytest.raises(ValueError, match="expected"):
        bigbird_layouts_np(16, 0, 2)


@pytest.mark.parametrize("bad", [
    lambda: sliding_window_mask_np(5, -1),
    lambda: sliding_window_mask_np(0, 1),
    lambda: dilated_window_mask_np(5, 1, 0),
    lambda: global_mask_np(5, [5]),
    lambda: global_mask_np(5, [1, 1]),
    lambda: block_mask_np(np.ones((2, 2), dtype=bool), 4, 20),
    lambda: fixed_masks_np(8, 4, 5),
    lambda: union_np(np.ones((2, 2), bool), np.ones((3, 3), bool)),
    lambda: hops_np(np.ones((2, 3), bool)),
    lambda: reach_np(),
    lambda: reach_np(np.ones((2, 2), bool), np.ones((3, 3), bool)),
])
def test_patterns_reject_bad_input(bad):
    with pytest.raises(ValueError, match="expected"):
        bad()


# ============================================================================ the references
@pytest.mark.parametrize("options", [dict(), dict(dilation=3), dict(causal=True),
                                     dict(global_idx=[0, 20], dilation=2, causal=True)])
def test_window_attention_is_attention_on_longformers_mask(options):
    """The reference: lesson 01's attention on the pattern's mask, NumPy and torch twins equal
    in float64, and the mask is the union the docstring states."""
    n, w = 37, 3
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 2, 3, n, 5))
    mask = _window_mask(n, w, options.get("dilation", 1), options.get("causal", False),
                        options.get("global_idx", ()))
    np.testing.assert_array_equal(longformer_mask_np(n, w, **options), mask)
    out = window_attention_np(q, k, v, w, **options)
    np.testing.assert_allclose(out, attention_np(q, k, v, mask)[0], rtol=0, atol=0)
    twin = window_attention_torch(*(torch.from_numpy(x) for x in (q, k, v)), w, **options)
    np.testing.assert_allclose(twin.numpy(), out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_block_sparse_attention_twins_and_empty_rows(causal):
    n, block = 30, 4
    layout = bigbird_layout_np(8, 1, 1, 1, seed=2)
    layout[3] = False  # queries 12..15 see nothing: zeros
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((3, 2, n, 6))
    mask = block_mask_np(layout, block, n) & (np.tri(n, dtype=bool) if causal else True)
    out = block_sparse_attention_np(q, k, v, layout, block, causal)
    np.testing.assert_allclose(out, attention_np(q, k, v, mask)[0], rtol=0, atol=0)
    assert (out[:, 12:16] == 0).all()
    twin = block_sparse_attention_torch(*(torch.from_numpy(x) for x in (q, k, v)), layout, block,
                                        causal)
    np.testing.assert_allclose(twin.numpy(), out, rtol=1e-12, atol=1e-12)
    q[:, 12:16] = np.nan  # what the layout hides may hold anything
    np.testing.assert_array_equal(block_sparse_attention_np(q, k, v, layout, block, causal), out)


def test_every_fast_kernel_equals_its_reference():
    """minattn.fast.sparse.REFERENCES: each fast function against the reference it names."""
    q, k, v = _qkv((2, 3, 45, 6), seed=9)
    layout = bigbird_layout_np(12, 1, 1, 1, seed=4)
    calls = {window_attention_fast_torch: ((q, k, v, 4), dict(dilation=2, global_idx=[3, 30])),
             block_sparse_attention_fast_torch: ((q, k, v, layout, 4), dict(causal=True)),
             diameter_fast_np: ((union_np(*fixed_masks_np(40, 6, 2)),), {})}
    assert set(calls) == set(REFERENCES)
    for fast, (args, kwargs) in calls.items():
        got, want = fast(*args, **kwargs), REFERENCES[fast](*args, **kwargs)
        if isinstance(want, float):
            assert got == want
            continue
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
        for g, r in zip(torch.autograd.grad(got.sum(), (q, k, v)),
                        torch.autograd.grad(want.sum(), (q, k, v))):
            torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10)


def test_fixed_pattern_with_a_constant_c_grows_like_n_sqrt_n():
    """Child et al.'s fixed pattern with l = √N and a constant c: keys per query about
    (1 + c)·√N / 2, like the strided pair's √N (the whole layer O(N√N)); c = l/4 would give
    O(N) keys per query."""
    sizes = [256, 1024, 4096]
    for c in (2, 4):
        keys = [union_np(*fixed_masks_np(n, round(n ** 0.5), c)).sum(1).mean() for n in sizes]
        slope = np.polyfit(np.log(sizes), np.log(keys), 1)[0]
        assert 0.45 < slope < 0.55, (c, slope)
        for n, kq in zip(sizes, keys):
            assert abs(kq / n ** 0.5 - (1 + c) / 2) < 0.1, (n, kq)
    quarter = [union_np(*fixed_masks_np(n, round(n ** 0.5), round(n ** 0.5) // 4)).sum(1).mean()
               for n in sizes]
    assert np.polyfit(np.log(sizes), np.log(quarter), 1)[0] > 0.85


# ============================================================================ flex_attention
@pytest.mark.parametrize("n", [16, 37])
def test_flex_create_mask_equals_our_masks(n):
    flex = pytest.importorskip("torch.nn.attention.flex_attention", reason="no flex_attention")

    def _flex_dense(mask_mod, n):
        return flex.create_mask(mask_mod, None, None, n, n, device="cpu")[0, 0].numpy()

    w, dil, stride, blk, c = 3, 2, 4, 4, 1

    def window(b, h, qi, ki):
        return (qi - ki).abs() <= w

    def causal_window(b, h, qi, ki):
        return (qi - ki <= w) & (ki <= qi)

    def dilated(b, h, qi, ki):
        return ((qi - ki).abs() <= w * dil) & ((qi - ki) % dil == 0)

    def with_global(b, h, qi, ki):
        return window(b, h, qi, ki) | (qi == 0) | (qi == 5) | (ki == 0) | (ki == 5)

    def strided(b, h, qi, ki):
        return (ki <= qi) & (((qi - ki) <= stride) | ((qi - ki) % stride == 0))

    def fixed(b, h, qi, ki):
        return (ki <= qi) & ((qi // blk == ki // blk) | (ki % blk >= blk - c))

    layout = torch.as_tensor(bigbird_layout_np(-(-n // blk), 1, 1, 1, seed=3))

    def bigbird(b, h, qi, ki):
        return layout[qi // blk, ki // blk]

    cases = [(window, sliding_window_mask_np(n, w)),
             (causal_window, sliding_window_mask_np(n, w, causal=True)),
             (dilated, dilated_window_mask_np(n, w, dil)),
             (with_global, sliding_window_mask_np(n, w) | global_mask_np(n, [0, 5])),
             (strided, union_np(*strided_masks_np(n, stride))),
             (fixed, union_np(*fixed_masks_np(n, blk, c))),
             (bigbird, bigbird_mask_np(n, blk, 1, 1, 1, seed=3))]
    for mask_mod, ours in cases:
        np.testing.assert_array_equal(_flex_dense(mask_mod, n), ours, err_msg=mask_mod.__name__)


# ============================================================================ kernels
def test_band_mask_is_the_window_seen_from_a_block():
    band = band_mask_torch(4, 2, 2)  # query a of the block sees keys t = a .. a + 4
    assert band.shape == (4, 8)
    assert band[1].nonzero().flatten().tolist() == [1, 2, 3, 4, 5]


@pytest.mark.exercise("2.2")
@pytest.mark.parametrize("n,w,block", [(1, 0, 4), (7, 0, 4), (16, 2, 4), (37, 3, 8),
                                       (37, 5, 4), (20, 30, 8), (50, 4, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_window_kernel_matches_dense(n, w, block, causal):
    # autograd's backward here: the hand-written one (exercise 1.3's give-away) is tested below
    _assert_matches_dense(lambda q, k, v: window_attention_fast_torch(
        q, k, v, w, causal=causal, block=block, hand_backward=False), _window_mask(n, w, 1, causal))


@pytest.mark.exercise("2.2")
@pytest.mark.parametrize("n,w,dilation,block", [(20, 2, 2, 4), (37, 3, 3, 4), (37, 1, 5, 2),
                                                (11, 4, 4, 8), (33, 2, 32, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_dilated_kernel_matches_dense(n, w, dilation, block, causal):
    _assert_matches_dense(lambda q, k, v: window_attention_fast_torch(
        q, k, v, w, dilation=dilation, causal=causal, block=block, hand_backward=False),
        _window_mask(n, w, dilation, causal), seed=n)


@pytest.mark.parametrize("n,w,dilation,glob", [(20, 2, 1, [0]), (37, 3, 1, [0, 18, 36]),
                                               (37, 2, 3, [4, 5]), (9, 1, 2, [8]),
                                               (40, 30, 1, [39]), (5, 0, 7, [0, 2])])
@pytest.mark.parametrize("causal", [False, True])
def test_window_kernel_with_global_tokens_matches_dense(n, w, dilation, glob, causal):
    _assert_matches_dense(lambda q, k, v: window_attention_fast_torch(
        q, k, v, w, dilation=dilation, causal=causal, global_idx=glob, block=4),
        _window_mask(n, w, dilation, causal, glob), seed=w)


@pytest.mark.parametrize("n,w,dilation", [(1, 0, 1), (37, 3, 1), (40, 20, 3), (7, 2, 9),
                                          (64, 5, 2), (50, 0, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_hand_backward_matches_dense(n, w, dilation, causal):
    """The default training path (WindowAttentionFunction) against dense masked attention."""
    _assert_matches_dense(lambda q, k, v: window_attention_fast_torch(
        q, k, v, w, dilation=dilation, causal=causal, block=8),
        _window_mask(n, w, dilation, causal), seed=n + w)


def test_window_entry_point_and_its_wrappers_agree():
    """window_attention_fast_torch(q, k, v, w) is the contract other lessons use; the core and the
    two wrappers it dispatches to compute the same numbers."""
    q, k, v = _qkv((2, 3, 30, 4), seed=5)
    with torch.no_grad():
        torch.testing.assert_close(window_attention_fast_torch(q, k, v, 3),
                                   sliding_window_attention_fast_torch(q, k, v, 3), rtol=0, atol=0)
        torch.testing.assert_close(window_attention_fast_torch(q, k, v, 3, dilation=2),
                                   dilated_window_attention_fast_torch(q, k, v, 3, 2),
                                   rtol=0, atol=0)
        torch.testing.assert_close(window_attention_fast_torch(q, k, v, 3, dilation=2,
                                                               global_idx=[7]),
                                   global_window_attention_fast_torch(q, k, v, 3, [7], 2),
                                   rtol=0, atol=0)
        # an empty global set is the plain window; the global path with no window keys too
        torch.testing.assert_close(window_attention_fast_torch(q, k, v, 3, global_idx=[]),
                                   window_attention_fast_torch(q, k, v, 3), rtol=0, atol=0)


def _graph_has(fn, name):
    """Does the autograd graph ending at grad_fn `fn` contain a node called `name`?"""
    return fn is not None and (fn.name() == name or any(_graph_has(f, name)
                                                         for f, _ in fn.next_functions))


@pytest.mark.parametrize("n,w,block,causal", [(1, 0, 4, False), (7, 0, 4, True),
                                               (9, 2, 4, False), (10, 5, 3, False),
                                               (10, 5, 3, True), (6, 9, 4, False)])
def test_window_function_gradcheck(n, w, block, causal):
    """The hand-written backward of WindowAttentionFunction against finite differences,
    one block per chunk (chunk_scores=1, so the spans of several chunks overlap in ∂K, ∂V).
    fast_mode compares uᵀJv for random u, v instead of every entry of J: any wrong entry still
    fails it, at a twentieth of the time (the entry-by-entry comparison with autograd's
    gradients is test_window_function_matches_autograd_path)."""
    q, k, v = _qkv((2, n, 3), seed=n + w, dv=2)
    fn = WindowAttentionFunction.apply
    assert torch.autograd.gradcheck(lambda q, k, v: fn(q, k, v, w, causal, block, None, 1),
                                    (q, k, v), fast_mode=True)


@pytest.mark.parametrize("n,w,dilation,block", [(37, 3, 1, 8), (40, 20, 1, 8), (64, 5, 1, 16),
                                                (36, 2, 3, 4), (50, 0, 1, 4)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk_scores", [1, 500, 1 << 17])
def test_window_function_matches_autograd_path(n, w, dilation, block, causal, chunk_scores):
    """Same outputs and gradients as autograd through the blocked kernel, for chunks of one
    block, a few blocks, and all blocks at once."""
    q, k, v = _qkv((2, 3, n, 5), seed=n)
    grad_out = torch.randn(*q.shape, dtype=torch.float64,
                           generator=torch.Generator().manual_seed(1))
    results = []
    for hand in (True, False):
        out = window_attention_fast_torch(q, k, v, w, dilation=dilation, causal=causal, block=block,
                                     hand_backward=hand, chunk_scores=chunk_scores)
        assert _graph_has(out.grad_fn, "WindowAttentionFunctionBackward") == hand
        results.append((out, *torch.autograd.grad(out, (q, k, v), grad_out)))
    for a, b, name in zip(*results, ("out", "dq", "dk", "dv")):
        assert torch.isfinite(a).all(), name
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=name)


def test_strided_heads_run_on_the_window_kernel():
    """Sparse Transformer strided = causal window (w = l) and causal dilated (δ = l)."""
    n, stride = 30, 5  # the paper's l
    local, strided = strided_masks_np(n, stride)
    _assert_matches_dense(lambda q, k, v: window_attention_fast_torch(q, k, v, stride, causal=True,
                                                                 block=4), local)
    _assert_matches_dense(lambda q, k, v: window_attention_fast_torch(q, k, v, n, dilation=stride,
                                                                 causal=True, block=4), strided)


@pytest.mark.parametrize("n,block", [(16, 4), (37, 4), (37, 8), (5, 8)])
def test_block_sparse_kernel_matches_dense_on_bigbird(n, block):
    layout = bigbird_layout_np(-(-n // block), window=1, n_global=1, n_random=1, seed=n)
    _assert_matches_dense(lambda q, k, v: block_sparse_attention_fast_torch(q, k, v, layout, block),
                          block_mask_np(layout, block, n))


@pytest.mark.parametrize("n", [16, 30])
def test_block_sparse_kernel_matches_dense_on_fixed_pattern(n):
    length, c, block = 8, 4, 4  # summary columns fill whole blocks: exact layout with causal
    mask = union_np(*fixed_masks_np(n, length, c))
    layout = block_layout_np(mask, block)
    _assert_matches_dense(lambda q, k, v: block_sparse_attention_fast_torch(q, k, v, layout, block,
                                                                       causal=True), mask)


def test_block_sparse_rows_with_no_key_give_zeros_not_nan():
    n, block = 20, 4
    layout = bigbird_layout_np(5, 1, 0, 0)
    layout[2] = False  # query block 2 sees nothing
    mask = block_mask_np(layout, block, n)
    _assert_matches_dense(lambda q, k, v: block_sparse_attention_fast_torch(q, k, v, layout, block),
                          mask)
    q, k, v = _qkv((1, n, 3))
    out = block_sparse_attention_fast_torch(q, k, v, layout, block)
    assert torch.all(out[0, 8:12] == 0)
    out.sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()


def test_block_sparse_work_is_proportional_to_nonzero_blocks():
    """The scores it materialises are P·b² numbers, P = non-zero blocks (not N²)."""
    n, block = 64, 8
    seen = {}
    orig_matmul = torch.Tensor.__matmul__

    def spy(a, b):
        result = orig_matmul(a, b)
        seen.setdefault("shape", result.shape)
        return result

    layout = bigbird_layout_np(8, 1, 1, 1, seed=0)
    q, k, v = _qkv((1, n, 3))
    torch.Tensor.__matmul__ = spy
    try:
        block_sparse_attention_fast_torch(q, k, v, layout, block)
    finally:
        torch.Tensor.__matmul__ = orig_matmul
    assert seen["shape"] == (1, int(layout.sum()), block, block)


def test_kernels_match_dense_in_float32_with_sdpa():
    """float32 against PyTorch's own kernel fed the dense mask."""
    n, w = 100, 7
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, n, 16, generator=gen) for _ in range(3))
    mask = torch.as_tensor(sliding_window_mask_np(n, w) | global_mask_np(n, [0, 50]))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out = window_attention_fast_torch(q, k, v, w, global_idx=[0, 50], block=16)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_window_attend_layer_matches_numpy_reference():
    """MultiHeadAttention(attend=window_attend(...)): lesson 01's projections, sparse heads."""
    torch.manual_seed(0)
    n, w = 23, 3
    fast = window_attend(w, global_idx=[0], kernel=window_attention_fast_torch, block=4)
    layer = MultiHeadAttention(8, 2, attend=fast).double()
    x = torch.randn(2, n, 8, dtype=torch.float64)
    mask = _window_mask(n, w, glob=[0])
    ref, _ = multi_head_attention_np(x.numpy(), x.numpy(), x.numpy(), layer.numpy_params(), 2,
                                     mask)
    out, weights = layer(x)
    assert weights is None
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    assert "window(w=3" in repr(layer)
    slow = MultiHeadAttention(8, 2, attend=window_attend(w, global_idx=[0])).double()
    slow.load_state_dict(layer.state_dict())
    torch.testing.assert_close(slow(x)[0], out, rtol=1e-10, atol=1e-12)  # the dense reference


@pytest.mark.parametrize("bad", [
    lambda q: window_attention_fast_torch(q, q, q, -1),
    lambda q: window_attention_fast_torch(q, q, q, 2, dilation=0),
    lambda q: window_attention_fast_torch(q, q, q, 2, dilation=2, global_idx=[1], block=0),
    lambda q: window_attention_fast_torch(q, q, q, 2, block=0),
    lambda q: window_attention_fast_torch(q, q[:, :5], q[:, :5], 2),
    lambda q: window_attention_fast_torch(q, q, q, 2, global_idx=[10]),
    lambda q: block_sparse_attention_fast_torch(q, q, q, np.ones((2, 2), bool), 4),
    lambda q: block_sparse_attention_fast_torch(q, q, q, np.ones((3, 3), int), 4),
    lambda q: MultiHeadAttention(8, 2, attend=window_attend(1))(q),  # d_model 4, not 8
    lambda q: MultiHeadAttention(4, 2, attend=window_attend(1))(q, mask=torch.ones(10, 10) > 0),
    lambda q: MultiHeadAttention(4, 2, attend=window_attend(1))(q, need_weights=True),
])
def test_kernels_reject_bad_input(bad):
    q = torch.randn(2, 10, 4)
    with pytest.raises(ValueError, match="expected"):
        bad(q)


def test_sparse_classifier_reads_token_zero_through_the_pattern():
    """With a window, token 0's logits cannot depend on a token further than layers·w away;
    a global token 0 makes them depend on everything. Block-sparse layers train too."""
    torch.manual_seed(0)
    n, w, layers = 40, 3, 2
    x = torch.randint(0, 10, (2, n))
    far = x.clone()
    far[:, -1] = (far[:, -1] + 1) % 10  # change only the last token
    fast = window_attention_fast_torch
    window = SparseClassifier(10, n, 16, 2, layers, window_attend(w, kernel=fast, block=8))
    assert torch.equal(window(x), window(far))
    with_global = SparseClassifier(10, n, 16, 2, layers,
                                   window_attend(w, global_idx=[0], kernel=fast, block=8))
    assert not torch.allclose(with_global(x), with_global(far))
    layout = block_layout_np(sliding_window_mask_np(n, w), 8)
    model = SparseClassifier(10, n, 16, 2, layers, block_sparse_attend(layout, 8))
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    layouts = bigbird_layouts_np(5, layers, 2, 1, 0, 1, seed=0)  # per head and per layer
    model = SparseClassifier(10, n, 16, 2, layers, [block_sparse_attend(lay, 8) for lay in layouts])
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    with pytest.raises(ValueError, match="expected"):
        SparseClassifier(10, n, 16, 2, layers, [window_attend(w)])  # one kernel for 2 layers


def test_block_sparse_attend_per_head_layouts_match_dense():
    """A layout per head: each head equals dense masked attention on its own mask."""
    n, block = 30, 4
    layouts = bigbird_layouts_np(-(-n // block), 1, 3, 1, 1, 1, seed=5)[0]  # (H, nb, nb)
    masks = np.stack([block_mask_np(layout, block, n) for layout in layouts])  # (H, N, N)
    for kernel in (None, block_sparse_attention_fast_torch):
        _assert_matches_dense(block_sparse_attend(layouts, block, kernel=kernel), masks,
                              shape=(2, 3, 0, 5))
    q = torch.randn(2, 2, n, 5)
    with pytest.raises(ValueError, match="expected"):
        block_sparse_attend(layouts, block)(q, q, q)  # 2 heads, 3 layouts


@pytest.mark.cuda
@pytest.mark.parametrize("hand_backward", [True, False])
def test_kernels_on_cuda_match_dense(hand_backward):
    """The same kernels on a GPU: float64 outputs and gradients equal dense masked attention
    there (window, dilated, causal, global, block-sparse), and float32 agrees with SDPA."""
    cuda = torch.device("cuda")
    n, w = 70, 5
    cases = [(dict(), _window_mask(n, w)),
             (dict(dilation=3, causal=True), _window_mask(n, w, 3, True)),
             (dict(global_idx=[0, 33]), _window_mask(n, w, glob=[0, 33]))]
    for options, mask in cases:
        _assert_matches_dense(lambda q, k, v: window_attention_fast_torch(
            q, k, v, w, block=16, hand_backward=hand_backward, **options), mask, device=cuda)
    layout = bigbird_layout_np(-(-n // 8), 1, 1, 1, seed=0)
    _assert_matches_dense(lambda q, k, v: block_sparse_attention_fast_torch(q, k, v, layout, 8),
                          block_mask_np(layout, 8, n), device=cuda)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 1000, 32, generator=gen).to(cuda) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.as_tensor(_window_mask(1000, 64), device=cuda))
    torch.testing.assert_close(window_attention_fast_torch(q, k, v, 64), ref, rtol=1e-5, atol=1e-5)


# ============================================================================ lesson 02's plots
def test_running_mean_of_a_training_curve():
    """Lesson 02's loss panel: the trailing mean of the last `window` values at every step."""
    from minattn.course.plots import running_mean_np

    x = np.array([4.0, 0.0, 2.0, 6.0, 1.0])
    np.testing.assert_allclose(running_mean_np(x, 2), [4, 2, 1, 4, 3.5])
    np.testing.assert_allclose(running_mean_np(x, 10), np.cumsum(x) / np.arange(1, 6))
    np.testing.assert_array_equal(running_mean_np(x, 1), x)
    with pytest.raises(ValueError, match="expected"):
        running_mean_np(x, 0)


def test_a_log_axis_shorter_than_a_decade_gets_labels():
    """Lesson 02's cost figure: its times span less than a decade in smoke mode, where
    matplotlib labels only powers of ten (one label, or none). 1-2-5 values label it; a span of
    decades gets the powers of ten alone."""
    from minattn.course.plots import ticks_125

    assert ticks_125(0.62, 3.5) == [1.0, 2.0]
    assert ticks_125(0.9, 1.2) == [0.5, 1.0, 2.0]  # one inside: widened by one on each side
    assert ticks_125(0.05, 40) == [0.1, 1.0, 10.0]
    assert ticks_125(0.012, 0.07) == [0.02, 0.05]


def test_the_curves_read_the_first_held_out_sequences_and_the_table_reads_them_all():
    """Lesson 02's training runs: the steps the table and the claims read (eval_at, the last)
    score the whole held-out set, the curve's other checks its first `curve_size` sequences.
    Here every sequence is held out twice, with both labels, so any model scores exactly 0.5
    on the whole set, and almost never exactly 0.5 on its first half."""
    from minattn.course.sparse import accuracy_at, train_two_halves, two_halves

    tokens, labels = two_halves(16, 24, torch.Generator().manual_seed(0))
    both = torch.cat([tokens, tokens]), torch.cat([labels, 1 - labels])
    history = train_two_halves(window_attend(4), 0, 6, both, n=24, batch=4, d_model=8,
                               heads=2, layers=1, device="cpu", eval_at={3}, curve=(0, 1, 2, 4),
                               curve_size=16)
    assert history["accuracy_step"] == [0, 1, 2, 3, 4, 6]
    assert accuracy_at(history, 3) == accuracy_at(history, 6) == 0.5
    assert any(accuracy_at(history, step) != 0.5 for step in (0, 1, 2, 4))
