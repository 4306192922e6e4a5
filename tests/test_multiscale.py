"""Multi-scale attention (minattn.multiscale, minattn.multiscale_fast) and lesson 03's models.

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

from minattn.attention import MultiHeadAttention, attention_np, padding_mask_torch
from minattn.models import BiLSTMClassifier, TransformerBaseline
from minattn.multiscale import (MultiScaleKernel, MultiScaleTransformer, allocate_scales_np,
                                layer_windows, measured_scale_np, measured_scale_torch,
                                multiscale_attention_np, multiscale_attention_torch,
                                scale_candidates, scale_mask_np, scale_mask_torch)
from minattn.multiscale_fast import (PIECE_KINDS, band_attention_cpu, band_masked_attention_torch,
                                     band_pieces_np, multiscale_attention_fast_torch)
from minattn.sparse import sliding_window_mask_np
from minattn.tasks import effective_scale_task


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
    np.testing.assert_array_equal(mask[0], np.eye(4, dtype=bool))
    np.testing.assert_array_equal(mask[1], np.array([[1, 1, 0, 0], [1, 1, 1, 0],
                                                     [0, 1, 1, 1], [0, 0, 1, 1]], dtype=bool))
    assert mask[2].all() and mask.shape == (3, 4, 4) and mask.dtype == bool


@pytest.mark.exercise("3.1")
@pytest.mark.parametrize("n", [1, 7, 16])
def test_scale_mask_matches_definition_and_torch(n):
    ws = [0, 2, 3, 9]
    mask = scale_mask_np(n, ws)
    for h, w in enumerate(ws):
        np.testing.assert_array_equal(mask[h], _hand_mask(n, w))
    np.testing.assert_array_equal(scale_mask_torch(n, ws).numpy(), mask)


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
    _assert_window_kernel_exact(lambda q, k, v: band_attention_cpu(q, k, v, w, chunk),
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
    _assert_window_kernel_exact(lambda q, k, v: band_masked_attention_torch(q, k, v, 40),
                                2, 2, 60, 4, 40, seed=5)


@pytest.mark.parametrize("w,chunk,message", [
    (0, None, "w >= 1"), (4, 9, "1 .. 2w = 8"), (4, 0, "1 .. 2w"), (-1, None, "w"),
])
def test_band_kernel_bad_input(w, chunk, message):
    q, k, v = _qkv(1, 1, 20, 4)
    with pytest.raises(ValueError, match=message):
        band_attention_cpu(q, k, v, w, chunk)
    with pytest.raises(ValueError, match=r"\(B, G, N, d\)"):
        band_attention_cpu(q[0], k[0], v[0], 4)


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
    fast = MultiHeadAttention(16, 4, attend=MultiScaleKernel(ws)).double()
    slow = MultiHeadAttention(16, 4, attend=MultiScaleKernel(ws, fast=False)).double()
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
    return {"multi-scale (fast)": MultiScaleTransformer(12, 12, windows, 3, embedding=emb),
            "multi-scale (reference)": MultiScaleTransformer(12, 12, windows, 3, embedding=emb,
                                                             fast=False),
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
@pytest.mark.parametrize("windows,match", [([3, -1], "integer >= 0"), ([], "no scales"),
                                           ([3, 2.5], "integer >= 0"), ([3, 3, 3], "one window per head")])
def test_bad_windows(windows, match):
    q, k, v = _qkv(1, 2, 5, 4)
    with pytest.raises(ValueError, match=match):
        multiscale_attention_torch(q, k, v, windows)
    with pytest.raises(ValueError, match=match):
        multiscale_attention_fast_torch(q, k, v, windows)


def test_bad_inputs():
    q, k, v = _qkv(1, 2, 5, 4)
    with pytest.raises(ValueError, match="axes"):
        multiscale_attention_torch(q[0], k[0], v[0], [1, 2])
    with pytest.raises(ValueError, match="one length N"):
        multiscale_attention_np(*(x.detach().numpy() for x in (q, k[:, :, :3], v[:, :, :3])), [1, 2])
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
