"""Multi-scale attention (minattn/multiscale.py, minattn/fast/multiscale.py) and lesson 03's
models (minattn/course/multiscale.py).

The reference is checked against per-head attention written out with hand-made masks, the
torch twin against the reference, and the grouped fast path against both (outputs and
gradients, float64). Then the allocation rule, the measured scale, and two properties of the
Multi-Scale Transformer: padding changes no prediction, and with every ω >= N it cannot tell
token order apart.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from expect import same_mask  # tests/ is on sys.path

from minattn.attention import MultiHeadAttention, attention_np, padding_mask_torch
from minattn.course.multiscale import (
    PARTNER_FILLER,
    PARTNER_X,
    PARTNER_Y,
    PARTNER_Z,
    BiLSTMClassifier,
    TransformerBaseline,
    bag_of_words,
    departure_np,
    departure_torch,
    drop_keys_np,
    drop_keys_torch,
    effective_scale_task,
    fit_logistic_regression,
    head_statistics,
    mean_vectors,
    partner_task,
    pretrained_head_scales,
    uniform_weights_np,
    uniform_weights_torch,
)
from minattn.fast.multiscale import (
    PIECE_KINDS,
    band_attention_fast_torch,
    band_masked_attention_fast_torch,
    band_pieces_np,
    multiscale_attention_fast_torch,
)
from minattn.multiscale import (
    MultiScaleKernel,
    MultiScaleTransformer,
    ScaleAllocation,
    allocate_scales_np,
    layer_windows,
    measured_scale_np,
    measured_scale_torch,
    multiscale_attention_np,
    multiscale_attention_torch,
    scale_candidates,
    scale_mask_np,
    scale_mask_torch,
)
from minattn.sparse import sliding_window_mask_np


def _qkv(b, h, n, d, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, n, d, generator=gen, dtype=torch.float64, requires_grad=True)
                 for _ in range(3))


def _hand_mask(n, w):
    """|i - j| <= w: lesson 02's sliding window (in a student copy it waits on exercise 2.1)."""
    return sliding_window_mask_np(n, w)


# ============================================================================ masks (3.1)
@pytest.mark.exercise("3.1")
def test_scale_mask_small_example():
    mask = scale_mask_np(4, [0, 1, 5])
    assert mask.shape == (3, 4, 4), (f"the shapes differ: {mask.shape} vs (3, 4, 4): one (N, N) "
                                     "mask per head, heads first")
    same_mask(mask[0], np.eye(4, dtype=bool), 0, what="head 0 (ω = 0): ")
    same_mask(mask[1], np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]], bool),
              1, what="head 1 (ω = 1): ")
    assert mask[2].all() and mask.dtype == bool


@pytest.mark.exercise("3.1")
@pytest.mark.parametrize("n", [1, 7, 16])
def test_scale_mask_matches_definition_and_torch(n):
    ws = [0, 2, 3, 9]
    mask = scale_mask_np(n, ws)
    assert mask.shape == (len(ws), n, n), (f"the shapes differ: {mask.shape} vs "
                                           f"{(len(ws), n, n)}: heads first")
    for h, w in enumerate(ws):
        same_mask(mask[h], _hand_mask(n, w), w, what=f"head {h} (ω = {w}): ")
    same_mask(scale_mask_torch(n, ws), mask, -1, what="scale_mask_torch vs scale_mask_np: ")


# ============================================================================ reference and twin
@pytest.mark.exercise("3.1")
def test_reference_is_per_head_attention():
    q, k, v = (x.detach().numpy() for x in _qkv(2, 3, 9, 4))
    ws = [1, 3, 20]
    out, weights = multiscale_attention_np(q, k, v, ws)
    for h, w in enumerate(ws):
        ref, ref_w = attention_np(q[:, h], k[:, h], v[:, h], _hand_mask(9, w))
        np.testing.assert_allclose(out[:, h], ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(weights[:, h], ref_w, rtol=0, atol=1e-12)
    assert np.all(weights[:, 0][:, ~_hand_mask(9, 1)] == 0)  # nothing outside the window


@pytest.mark.exercise("3.1")
def test_torch_twin_matches_reference_with_padding():
    q, k, v = _qkv(2, 4, 11, 5, seed=1)
    mask = padding_mask_torch(torch.tensor([11, 6]), 11)
    out, weights = multiscale_attention_torch(q, k, v, [0, 2, 4, 10], mask)
    ref, ref_w = multiscale_attention_np(*(x.detach().numpy() for x in (q, k, v)), [0, 2, 4, 10],
                                         mask.numpy())
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights.detach().numpy(), ref_w, rtol=0, atol=1e-12)


# ============================================================================ fast path
@pytest.mark.parametrize("n,ws,lengths", [
    (300, [3, 3, 18, 18, 37, 75, 150, 299], None),  # window kernel, dense band and full SDPA
    (300, [3, 3, 18, 18, 37, 75, 150, 299], [300, 211]),  # the same with key padding
    (200, [0, 5, 5, 400], [7, 200]),  # ω = 0, ω > N, a sentence shorter than some windows
    (37, [2, 4, 36], [37, 20]),  # short: one dense call
])
def test_fast_path_equals_reference_outputs_and_gradients(n, ws, lengths):
    q, k, v = _qkv(2, len(ws), n, 6, seed=n)
    mask = None if lengths is None else padding_mask_torch(torch.tensor(lengths), n)
    grad_out = torch.randn(2, len(ws), n, 6, dtype=torch.float64,
                           generator=torch.Generator().manual_seed(7))
    out = multiscale_attention_fast_torch(q, k, v, ws, mask, dense_below=64)
    ref, _ = multiscale_attention_np(*(x.detach().numpy() for x in (q, k, v)), ws,
                                     None if mask is None else mask.numpy())
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=0, atol=1e-10)
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    ref_out, _ = multiscale_attention_torch(q, k, v, ws, mask)
    ref_grads = torch.autograd.grad(ref_out, (q, k, v), grad_out)
    for g, r, name in zip(grads, ref_grads, "qkv"):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10, msg=f"grad of {name} differs")


def _assert_window_kernel_exact(fn, b, h, n, d, w, seed):
    """fn(q, k, v) equals |i − j| <= w attention of the reference: outputs and gradients."""
    q, k, v = _qkv(b, h, n, d, seed=seed)
    out = fn(q, k, v)
    ref, _ = multiscale_attention_torch(q, k, v, [w] * h)
    grad_out = torch.randn(ref.shape, dtype=torch.float64,
                           generator=torch.Generator().manual_seed(seed + 1))
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    for g, r, name in zip(torch.autograd.grad(out, (q, k, v), grad_out),
                          torch.autograd.grad(ref, (q, k, v), grad_out), "qkv"):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12, msg=f"grad of {name} differs")


@pytest.mark.parametrize("n,w,chunk", [
    (64, 8, 16),  # 2w = c: two triangles, no full block between them
    (64, 8, 3),  # small chunks: full blocks, triangles, a shortened triangle at the end
    (50, 20, 32),  # N not a multiple of c; the sequence start cuts triangles short
    (37, 30, 8),  # ω close to N: most chunks reach both ends
    (33, 40, 64),  # ω > N: one full block
    (10, 9, 1),  # one query per chunk
    (130, 64, None),  # the default chunk
])
def test_band_kernel_equals_reference(n, w, chunk):
    _assert_window_kernel_exact(lambda q, k, v: band_attention_fast_torch(q, k, v, w, chunk),
                                2, 3, n, 5, w, seed=n + w)


def test_band_pieces_cover_each_window_once():
    kinds_seen = set()
    for n, w, c in [(64, 8, 3), (50, 20, 32), (37, 30, 8), (200, 150, 128), (64, 8, 16)]:
        kind_map, count = band_pieces_np(n, w, c)
        np.testing.assert_array_equal(count, _hand_mask(n, w).astype(int))  # each pair once
        kinds_seen |= {PIECE_KINDS[k - 1] for k in np.unique(kind_map) if k > 0}
    assert kinds_seen == set(PIECE_KINDS)  # the cases exercise every kind of piece


def test_band_masked_path_equals_reference():
    """The kernel other devices use for ω close to N, checked here on the CPU."""
    _assert_window_kernel_exact(lambda q, k, v: band_masked_attention_fast_torch(q, k, v, 40),
                                2, 2, 60, 4, 40, seed=5)


@pytest.mark.parametrize("w,chunk,message", [
    (0, None, "w: expected an integer >= 1"), (4, 9, "1 .. 2w = 8"), (4, 0, "1 .. 2w"),
    (-1, None, "w"),
])
def test_band_kernel_bad_input(w, chunk, message):
    q, k, v = _qkv(1, 1, 20, 4)
    with pytest.raises(ValueError, match=message):
        band_attention_fast_torch(q, k, v, w, chunk)
    with pytest.raises(ValueError, match=r"\(B, G, N, d\)"):
        band_attention_fast_torch(q[0], k[0], v[0], 4)


@pytest.mark.cuda
def test_fast_path_on_cuda_equals_reference():
    """On a GPU the groups take the window kernel or the band mask (no band kernel there)."""
    cuda = torch.device("cuda")
    n, ws = 300, [3, 3, 18, 18, 37, 75, 150, 299]
    q, k, v = (x.detach().to(cuda).requires_grad_() for x in _qkv(2, len(ws), n, 6, seed=1))
    mask = padding_mask_torch(torch.tensor([300, 211], device=cuda), n)
    out = multiscale_attention_fast_torch(q, k, v, ws, mask, dense_below=64)
    ref, _ = multiscale_attention_torch(q, k, v, ws, mask)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    grad_out = torch.randn_like(ref)
    for g, r in zip(torch.autograd.grad(out, (q, k, v), grad_out),
                    torch.autograd.grad(ref, (q, k, v), grad_out)):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10)


def test_fast_path_general_mask_falls_back_to_dense():
    q, k, v = _qkv(1, 2, 80, 4, seed=3)
    mask = torch.rand(1, 2, 80, 80, generator=torch.Generator().manual_seed(0)) < 0.5
    out = multiscale_attention_fast_torch(q, k, v, [3, 30], mask, dense_below=16)
    ref, _ = multiscale_attention_np(*(x.detach().numpy() for x in (q, k, v)), [3, 30],
                                     mask.numpy())
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=0, atol=1e-12)


def test_fast_path_float32_has_no_nan_on_empty_windows():
    q, k, v = (x.float() for x in _qkv(1, 3, 600, 8, seed=4))
    mask = padding_mask_torch(torch.tensor([5]), 600)  # most queries see no real key at ω = 3
    out = multiscale_attention_fast_torch(q, k, v, [3, 40, 200], mask)  # window + band kernel
    assert torch.isfinite(out).all() and (out[0, 0, 9:] == 0).all()
    assert (out[0, 2, 205:] == 0).all() and (out[0, 2, :205] != 0).any(-1).all()


def test_full_windows_in_the_seam_equal_plain_multi_head_attention():
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 4).double()
    multi = MultiHeadAttention(16, 4, attend=MultiScaleKernel([9, 9, 30, 9])).double()
    multi.load_state_dict(plain.state_dict())
    x = torch.randn(2, 10, 16, dtype=torch.float64)
    torch.testing.assert_close(multi(x)[0], plain(x)[0], rtol=1e-12, atol=1e-12)


def test_fast_kernel_in_the_seam_equals_the_reference_kernel():
    """Through MultiHeadAttention the heads arrive as strided views (B, N, H, d) -> (B, H, N, d):
    the grouped path (window and band kernels) must give the reference's outputs and gradients."""
    n, ws = 600, [3, 40, 150, 300]  # N >= DENSE_BELOW: grouped; ω = 150, 300 on the band kernel
    torch.manual_seed(0)
    fast = MultiHeadAttention(16, 4, attend=MultiScaleKernel(
        ws, kernel=multiscale_attention_fast_torch)).double()
    slow = MultiHeadAttention(16, 4, attend=MultiScaleKernel(ws)).double()
    slow.load_state_dict(fast.state_dict())
    x = torch.randn(2, n, 16, dtype=torch.float64)
    mask = padding_mask_torch(torch.tensor([600, 420]), n)
    out_fast, out_slow = fast(x, mask=mask)[0], slow(x, mask=mask)[0]
    torch.testing.assert_close(out_fast, out_slow, rtol=0, atol=1e-12)
    out_fast.square().sum().backward()
    out_slow.square().sum().backward()
    for (name, p), q in zip(fast.named_parameters(), slow.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-9, atol=1e-10, msg=name)


# ============================================================================ allocation (3.2)
@pytest.mark.exercise("3.2")
def test_allocation_reproduces_the_slides_worked_example():
    # N' = 10, K = 5, α = 0.5: first-layer scores [2, 1.5, 1, 0.5, 0] -> {5, 2, 2, 1, 0}
    np.testing.assert_array_equal(allocate_scales_np(10, 5, 1, 0.5), [[5, 2, 2, 1, 0]])
    np.testing.assert_array_equal(allocate_scales_np(10, 5, 3, 0.5)[0], [5, 2, 2, 1, 0])


@pytest.mark.exercise("3.2")
@pytest.mark.parametrize("heads,scales,layers", [(10, 5, 3), (5, 5, 3), (8, 5, 4), (7, 3, 2)])
def test_allocation_properties(heads, scales, layers):
    alphas = np.linspace(-2, 2, 41)
    counts = np.stack([allocate_scales_np(heads, scales, layers, a) for a in alphas])
    assert (counts >= 0).all() and (counts.sum(-1) == heads).all()
    small_first = np.cumsum(counts, axis=-1)  # (α, L, K) heads with a scale <= ω_k
    assert (np.diff(small_first[:, 0], axis=0) >= 0).all()  # layer 1: more small scales as α grows
    assert (np.diff(small_first[:, -1], axis=0) <= 0).all()  # top layer: the reverse
    uniform = allocate_scales_np(heads, scales, layers, 0.0)
    assert (uniform == uniform[0]).all() and uniform.max() - uniform.min() <= 1
    a_pos, a_neg = allocate_scales_np(heads, scales, layers, 1.0), \
        allocate_scales_np(heads, scales, layers, -1.0)
    np.testing.assert_array_equal(a_pos[0], a_neg[-1])  # α < 0 is α > 0 upside down


def test_allocation_even_split_and_windows():
    np.testing.assert_array_equal(allocate_scales_np(10, 5, 3, 0.0), np.full((3, 5), 2))
    windows = layer_windows(allocate_scales_np(10, 5, 1, 0.5), scale_candidates(64))
    assert windows == [[3, 3, 3, 3, 3, 4, 4, 8, 8, 16]]
    assert scale_candidates(64) == [3, 4, 8, 16, 32]


def test_measured_scale_by_hand_and_twin():
    weights = np.zeros((1, 2, 4, 4))
    weights[0, 0] = np.eye(4)  # attends to itself: scale 0
    weights[0, 1, np.arange(4), [3, 3, 0, 0]] = 1.0  # distances 3, 2, 2, 3
    np.testing.assert_allclose(measured_scale_np(weights), [0.0, 2.5])
    keep = np.array([[True, False, False, False]])
    np.testing.assert_allclose(measured_scale_np(weights, keep), [0.0, 3.0])
    rnd = np.random.default_rng(0).dirichlet(np.ones(6), size=(2, 3, 6))
    np.testing.assert_allclose(measured_scale_torch(torch.from_numpy(rnd)).numpy(),
                               measured_scale_np(rnd), rtol=1e-12)


# ============================================================================ models
def _text_models(windows):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(30, 12, padding_idx=0)
    return {"multi-scale (fast)": MultiScaleTransformer(12, 12, windows, 3, embedding=emb,
                                                        kernel=multiscale_attention_fast_torch),
            "multi-scale (reference)": MultiScaleTransformer(12, 12, windows, 3, embedding=emb),
            "transformer": TransformerBaseline(12, 12, 3, 2, 3, max_len=40, embedding=emb),
            "bilstm": BiLSTMClassifier(12, 8, 3, embedding=emb)}


@pytest.mark.parametrize("name", ["multi-scale (fast)", "multi-scale (reference)", "transformer",
                                  "bilstm"])
def test_padding_changes_no_prediction(name):
    model = _text_models([[0, 1, 4], [2, 8, 30]])[name].double().eval()
    gen = torch.Generator().manual_seed(1)
    lengths = torch.tensor([9, 4, 12])
    tokens = torch.randint(2, 30, (3, 12), generator=gen)
    tokens[torch.arange(12)[None] >= lengths[:, None]] = 0
    longer = torch.cat([tokens, torch.randint(2, 30, (3, 25), generator=gen)], dim=1)  # junk pad
    with torch.no_grad():
        short_out = model(tokens, lengths)
        long_out = model(longer, lengths)
        alone = torch.cat([model(tokens[b:b + 1, :lengths[b]], lengths[b:b + 1]) for b in range(3)])
    torch.testing.assert_close(long_out, short_out, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(alone, short_out, rtol=1e-10, atol=1e-10)


def test_only_windows_make_the_multi_scale_transformer_see_order():
    x = torch.randn(2, 10, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    torch.manual_seed(0)
    wide = MultiScaleTransformer(6, 8, [[10, 20], [10, 10]], 2).double()  # every ω >= N
    torch.testing.assert_close(wide(x[:, perm]), wide(x), rtol=1e-10, atol=1e-10)
    torch.manual_seed(0)
    local = MultiScaleTransformer(6, 8, [[1, 20], [1, 2]], 2).double()
    assert not torch.allclose(local(x[:, perm]), local(x), rtol=1e-6, atol=1e-6)


def test_positions_make_even_wide_windows_see_order():
    x = torch.randn(2, 10, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    torch.manual_seed(0)
    wide = MultiScaleTransformer(6, 8, [[10, 20], [10, 10]], 2, max_len=12).double()
    assert not torch.allclose(wide(x[:, perm]), wide(x), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="max_len = 12"):
        wide(torch.randn(1, 13, 6, dtype=torch.float64))


def test_node_read_out_hears_only_what_attention_carries():
    """max_pool=False: a token beyond the node's reach (2 layers of ω = 1: positions 1, 2)
    cannot change the output; with the paper's max-pool read-out it can."""
    x = torch.randn(1, 8, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    far = x.clone()
    far[0, 5] += 1.0  # token 6, at position 6 behind the node
    for max_pool, changes in ((False, False), (True, True)):
        torch.manual_seed(0)
        model = MultiScaleTransformer(4, 8, [[1, 1], [1, 1]], 2, max_len=8,
                                      max_pool=max_pool).double()
        assert torch.allclose(model(far), model(x), rtol=0, atol=1e-12) != changes


def test_measured_scales_of_the_model():
    torch.manual_seed(0)
    model = MultiScaleTransformer(4, 8, [[0, 2], [5, 40]], 2)
    x = torch.randn(3, 20, 4)
    scales = model.measured_scales(x, torch.tensor([20, 10, 15]))
    assert scales.shape == (2, 2) and scales[0, 0] == 0.0
    assert 0 < scales[0, 1] <= 2 and 0 < scales[1, 0] <= 5 and scales[1, 1] > scales[1, 0] * 0.5


def test_effective_scale_task_target():
    x, y = effective_scale_task(4, 10, 3, 2, torch.Generator().manual_seed(0))
    expected = x[:, 0] * x[:, 9] + x[:, 1] * x[:, 8]  # a_1 ⊙ a_N + a_2 ⊙ a_{N-1}
    torch.testing.assert_close(y, expected)
    assert x.shape == (4, 10, 3) and 0 <= x.min() and x.max() <= 1


# ============================================================================ bad input
@pytest.mark.parametrize("windows,match", [([3, -1], "one integer window"),
                                           ([], "one integer window"),
                                           ([3, 2.5], "one integer window"),
                                           ([3, 3, 3], "one window per head")])
def test_bad_windows(windows, match):
    q, k, v = _qkv(1, 2, 5, 4)
    with pytest.raises(ValueError, match=match):
        multiscale_attention_torch(q, k, v, windows)
    with pytest.raises(ValueError, match=match):
        multiscale_attention_fast_torch(q, k, v, windows)


def test_bad_inputs():
    q, k, v = _qkv(1, 2, 5, 4)
    with pytest.raises(ValueError, match=r"^q: expected float \(B, H, N, d\)"):
        multiscale_attention_torch(q[0], k[0], v[0], [1, 2])
    with pytest.raises(ValueError, match=r"^k: expected float \(B, H, N, d\) with .*N = 5"):
        multiscale_attention_np(*(x.detach().numpy() for x in (q, k[:, :, :3], v[:, :, :3])),
                                [1, 2])
    with pytest.raises(ValueError, match="bool"):
        multiscale_attention_torch(q, k, v, [1, 2], torch.ones(5, 5))
    with pytest.raises(ValueError, match="one window per head"):
        MultiScaleTransformer(4, 8, [[1, 2], [1, 2, 3]], 2)
    with pytest.raises(ValueError, match="num_heads"):
        allocate_scales_np(0, 5, 3, 0.5)
    with pytest.raises(ValueError, match="alpha"):
        allocate_scales_np(10, 5, 3, float("nan"))
    with pytest.raises(ValueError, match="k <= n // 2"):
        effective_scale_task(2, 10, 3, 6, torch.Generator())


# ========================================================================== scales from the length
def test_scale_candidates_are_the_papers_five_in_increasing_order_for_every_n():
    for n in range(2, 400):
        got = scale_candidates(n)
        assert got == sorted(got) and len(got) == 5, n
        assert sorted(got) == sorted([3] + [max(1, n // f) for f in (16, 8, 4, 2)]), n
    assert scale_candidates(32) == [2, 3, 4, 8, 16]
    assert scale_candidates(21) == [1, 2, 3, 5, 10]
    with pytest.raises(ValueError, match="n: expected an integer >= 2"):
        scale_candidates(1)


def test_scale_allocation_follows_each_batch_length():
    counts = allocate_scales_np(5, 5, 3, 0.5)
    allocation = ScaleAllocation(counts)
    assert allocation(21) == layer_windows(counts, [1, 2, 3, 5, 10])
    assert allocation(64) == layer_windows(counts, [3, 4, 8, 16, 32])
    torch.manual_seed(0)
    model = MultiScaleTransformer(4, 10, allocation, 2).double().eval()
    for n in (9, 21, 40):
        fixed = MultiScaleTransformer(4, 10, allocation(n), 2).double().eval()
        fixed.load_state_dict(model.state_dict())
        x = torch.randn(2, n, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
        lengths = torch.tensor([n, n - 3])
        torch.testing.assert_close(model(x, lengths), fixed(x, lengths), rtol=0, atol=1e-12)
        assert model.windows() == allocation(n)
    with pytest.raises(ValueError, match=r"head counts >= 0 \(L, 5\)"):
        ScaleAllocation([[1, 1, 1]])
    with pytest.raises(ValueError, match="rows have one sum >= 1"):
        ScaleAllocation([[1, 1, 1, 1, 1], [5, 0, 0, 0, 1]])


# ============================================================================ relay node
def test_global_positions_see_and_are_seen_by_all():
    mask = scale_mask_np(7, [0, 2], n_global=1)
    hand = np.stack([_hand_mask(7, 0), _hand_mask(7, 2)])
    hand[:, 0, :] = hand[:, :, 0] = True
    np.testing.assert_array_equal(mask, hand)
    np.testing.assert_array_equal(scale_mask_torch(7, [0, 2], n_global=1).numpy(), hand)
    q, k, v = _qkv(2, 2, 7, 3, seed=5)
    pad = padding_mask_torch(torch.tensor([7, 5]), 7)
    out, w = multiscale_attention_np(*(x.detach().numpy() for x in (q, k, v)), [0, 2],
                                     pad.numpy(), n_global=1)
    ref, ref_w = attention_np(*(x.detach().numpy() for x in (q, k, v)), hand & pad.numpy())
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    twin, _ = multiscale_attention_torch(q, k, v, [0, 2], pad, n_global=1)
    np.testing.assert_allclose(twin.detach().numpy(), ref, rtol=0, atol=1e-12)
    fast = MultiScaleKernel([0, 2], n_global=1, kernel=multiscale_attention_fast_torch)(
        q, k, v, pad)  # the relay node's dense path
    np.testing.assert_allclose(fast.detach().numpy(), ref, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="n_global"):
        scale_mask_np(4, [1], n_global=5)


def test_relay_node_hears_every_token():
    """Node read-out, two layers of ω = 1: the paper's node cannot hear token 6, a relay can."""
    x = torch.randn(1, 8, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    far = x.clone()
    far[0, 5] += 1.0
    for relay in (False, True):
        torch.manual_seed(0)
        model = MultiScaleTransformer(4, 8, [[1, 1], [1, 1]], 2, max_pool=False,
                                      global_node=relay).double()
        assert torch.allclose(model(far), model(x), rtol=0, atol=1e-12) != relay


def test_windows_see_distance_not_direction():
    """Mirroring a sequence mirrors every windowed layer's output; a position-free model with a
    relay node cannot tell a sequence from its mirror image, the paper's node at position 0 and
    learned positions can."""
    q, k, v = (x.detach().numpy() for x in _qkv(1, 3, 9, 4, seed=6))
    out, _ = multiscale_attention_np(q, k, v, [1, 2, 4])
    mirrored, _ = multiscale_attention_np(q[:, :, ::-1], k[:, :, ::-1], v[:, :, ::-1], [1, 2, 4])
    np.testing.assert_allclose(mirrored, out[:, :, ::-1], rtol=0, atol=1e-12)
    x = torch.randn(2, 9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    for options, blind in ((dict(global_node=True), True), ({}, False), (dict(max_len=9), False)):
        torch.manual_seed(0)
        model = MultiScaleTransformer(4, 8, [[1, 3], [2, 4]], 2, **options).double()
        assert torch.allclose(model(x.flip(1)), model(x), rtol=0, atol=1e-12) == blind, options


# ============================================================================ uniform reference
def test_uniform_weights_drop_keys_and_departure_by_hand_and_twins():
    mask = np.array([[[[True, True, False], [True, True, True], [False, False, False]]]])
    flat = uniform_weights_np(mask)
    np.testing.assert_allclose(flat[0, 0], [[0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3], [0, 0, 0]])
    np.testing.assert_allclose(uniform_weights_torch(torch.from_numpy(mask), torch.float64)
                               .numpy(), flat)
    assert departure_np(flat, mask)[0] == pytest.approx(0.0)
    onehot = np.zeros((1, 1, 3, 3))
    onehot[0, 0, 0, 0] = onehot[0, 0, 1, 1] = 1.0  # row 0: TV 1/2; row 1: TV 2/3; row 2: 0
    np.testing.assert_allclose(departure_np(onehot, mask), [(0.5 + 2 / 3 + 0) / 3])
    np.testing.assert_allclose(departure_np(onehot, mask, np.array([[True, True, False]])),
                               [(0.5 + 2 / 3) / 2])
    np.testing.assert_allclose(departure_torch(torch.from_numpy(onehot), torch.from_numpy(mask))
                               .numpy(), departure_np(onehot, mask))
    weights = np.array([[[[0.5, 0.25, 0.25], [0.2, 0.3, 0.5], [0.6, 0.4, 0.0]]]])
    keep = np.array([[False, True, True]])  # drop key 0 (a sink) and renormalise
    dropped = drop_keys_np(weights, keep)
    np.testing.assert_allclose(dropped[0, 0], [[0, 0.5, 0.5], [0, 0.375, 0.625], [0, 1, 0]])
    np.testing.assert_allclose(drop_keys_torch(torch.from_numpy(weights), torch.from_numpy(keep))
                               .numpy(), dropped)


def test_head_statistics_of_the_models():
    torch.manual_seed(0)
    x, lengths = torch.randn(3, 12, 4), torch.tensor([12, 7, 9])
    stats = head_statistics(MultiScaleTransformer(4, 8, [[0, 0], [2, 30]], 2), x, lengths)
    assert set(stats) == {"scale", "uniform_scale", "departure"}
    assert stats["scale"].shape == (2, 2)
    np.testing.assert_allclose(stats["scale"][0], 0.0)  # ω = 0: itself, which is uniform
    np.testing.assert_allclose(stats["departure"][0], 0.0, atol=1e-7)
    assert (stats["uniform_scale"][1] > 0).all() and (stats["departure"][1] > 0).all()
    base = head_statistics(TransformerBaseline(4, 8, 2, 2, 2, max_len=12), x, lengths)
    # every head of the baseline may see the whole sentence: one uniform reference for all
    np.testing.assert_allclose(base["uniform_scale"], base["uniform_scale"][0, 0], rtol=1e-6)


class _StubEncoding:
    def __init__(self, n):
        self.ids, self.attention_mask = list(range(n)), [1] * n


class _StubTokenizer:
    def encode_batch(self, texts):
        return [_StubEncoding(len(t.split()) + 2) for t in texts]  # [CLS] words [SEP]


class _StubEncoder(torch.nn.Module):
    """One layer, one head: every query puts half its weight on [CLS] and half on the next
    token (the last one on itself)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def run(self, ids, mask, need_weights=False):
        n = ids.shape[1]
        w = torch.zeros(1, 1, n, n)
        w[..., 0] = 0.5
        w[0, 0, torch.arange(n), (torch.arange(n) + 1).clamp(max=n - 1)] += 0.5
        return None, [w.expand(ids.shape[0], 1, n, n)]


def test_pretrained_head_scales_remove_the_sinks():
    scales, uniform = pretrained_head_scales(_StubEncoder(), _StubTokenizer(),
                                             ["a b c d", "a b c d"])
    # words at positions 1..4; [CLS] (0) and [SEP] (5) removed: queries 1, 2, 3 look 1 ahead,
    # query 4's next token is [SEP], so it keeps nothing -> 0
    np.testing.assert_allclose(scales, [[[0.75]], [[0.75]]])
    # uniform over 4 words: mean distance (0+1+2+3 + 1+0+1+2 + 2+1+0+1 + 3+2+1+0) / 16
    np.testing.assert_allclose(uniform, [[[20 / 16]], [[20 / 16]]])


# ============================================================================ the partner task
def test_partner_task_needs_the_pattern_and_the_count():
    tokens, labels = partner_task(200, 32, 3, np.random.default_rng(0))
    assert tokens.shape == (200, 32) and set(labels.tolist()) == {0, 1}
    for row, label in zip(tokens.numpy(), labels.numpy()):
        for t in (PARTNER_X, PARTNER_Y, PARTNER_Z):  # the same bag for both labels
            assert (row == t).sum() == 3
        xs = np.flatnonzero(row == PARTNER_X)
        partners = []
        for i in xs:  # ω = 3 around an X holds its partner and fillers only
            near = [j for j in range(max(0, i - 3), min(32, i + 4))
                    if j != i and row[j] < PARTNER_FILLER]
            assert len(near) == 1 and abs(near[0] - i) == 1  # right next to it, either side
            partners.append(row[near[0]])
        assert int(partners.count(PARTNER_Y) > partners.count(PARTNER_Z)) == label
    with pytest.raises(ValueError, match="odd number of pairs"):
        partner_task(4, 32, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n >= "):
        partner_task(4, 20, 3, np.random.default_rng(0))


# ============================================================================ linear baselines
def test_bag_of_words_mean_vectors_and_logistic_regression():
    ids = torch.tensor([[2, 3, 2, 0], [4, 0, 0, 0]])
    lengths = torch.tensor([3, 1])
    np.testing.assert_array_equal(bag_of_words(ids, lengths, 5).numpy(),
                                  [[0, 0, 1, 1, 0], [0, 0, 0, 0, 1]])
    matrix = torch.arange(10.0).reshape(5, 2)
    np.testing.assert_allclose(mean_vectors(ids, lengths, matrix).numpy(),
                               [[(4 + 6 + 4) / 3, (5 + 7 + 5) / 3], [8, 9]])
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(200, 3, generator=gen)
    y = (x[:, 0] - x[:, 1] > 0).long()
    model, l2, valid_acc = fit_logistic_regression(x[:150], y[:150], x[150:], y[150:],
                                                   l2_grid=(1e-3, 1e-1))
    assert valid_acc > 0.95 and l2 in (1e-3, 1e-1)
    assert (model(x).argmax(-1) == y).float().mean() > 0.95
    with pytest.raises(ValueError, match="logistic regression inputs"):
        fit_logistic_regression(x, y[:10], x, y)
