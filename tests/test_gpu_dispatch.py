"""The CUDA routes of the sparse patterns (minattn/fast/flex.py: FlexAttention, compiled, the
dispatch) and the GPU tier (make test-gpu).

On the CPU: which kernel the dispatch picks for each device and dtype, and that those routes
agree with the saved H100 measurements they rest on; the tile lists of every BlockMask against
`sparse.block_layout_np` of the pattern's mask (the tiles a kernel must visit, and those it may
take whole; per sequence with key padding); FlexAttention's eager forward with our BlockMasks
and mask_mods, and the dense route forward and backward, against dense masked attention on the
NumPy mask of the same pattern in float64; the dispatch points of the kernels, driven by a
stubbed decision, and what they do when the compiler would run flex eagerly.
On a GPU (`cuda`-marked): every route, forward and backward in float32, against the same
dense reference, through the kernels' own entry points.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from minattn.attention import attention_torch, padding_mask_torch
from minattn.course import REPO_ROOT, gpu_tier
from minattn.fast import flex
from minattn.fast.flex import (
    block_sparse_attention_routed_fast_torch,
    window_attention_routed_fast_torch,
)
from minattn.fast.multiscale import (
    multiscale_attention_fast_torch,
    multiscale_attention_routed_fast_torch,
)
from minattn.fast.sparse import block_sparse_attention_fast_torch, window_attention_fast_torch
from minattn.multiscale import multiscale_attention_torch, scale_mask_np
from minattn.sparse import (
    bigbird_layout_np,
    block_layout_np,
    block_mask_np,
    dilated_window_mask_np,
    global_mask_np,
    window_attend,
)


def _window_mask(n, w, dilation=1, causal=False, glob=()):
    """The window pattern from the library's masks (in a student copy they wait on exercise
    2.1): the dilated window ∪ global rows and columns, ∩ j <= i when causal."""
    mask = dilated_window_mask_np(n, w, dilation)
    if len(glob):
        mask = mask | global_mask_np(n, list(glob))
    return mask & np.tri(n, dtype=bool) if causal else mask


def _tiles(mask, tile):
    """(some, every): tiles of an (N, N) mask with at least one allowed pair / every real pair
    allowed (positions past N do not exist)."""
    n = mask.shape[0]
    nt = -(-n // tile)
    padded = np.ones((nt * tile, nt * tile), dtype=bool)
    padded[:n, :n] = mask
    every = padded.reshape(nt, tile, nt, tile).all(axis=(1, 3))
    some = block_layout_np(mask, tile)
    return some, every & some


def _qkv(shape, seed=0, dtype=torch.float64, device="cpu", grad=False):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=gen, dtype=dtype).to(device).requires_grad_(grad)
                 for _ in range(3))


FLEX_F32 = flex.FLEX_FROM[torch.float32]  # where float32 takes flex on CUDA
WINDOW_CASES = [dict(), dict(dilation=3), dict(causal=True), dict(dilation=2, causal=True),
                dict(global_idx=[0, 33]), dict(global_idx=[5, 36], causal=True, dilation=2)]


# ============================================================================ the decision
@pytest.mark.parametrize("device, n, dtype, d, expected", [
    ("cpu", 65536, torch.float32, 64, "readable"),  # the readable kernels are the CPU's
    ("cuda", 1024, torch.float32, 64, "dense"),  # short: one fused SDPA call with the mask
    ("cuda", flex.FLEX_FROM[torch.float32], torch.float32, 64, "flex"),
    ("cuda", 4096, torch.bfloat16, 64, "dense"),  # bfloat16: dense measured faster at 4k
    ("cuda", 16384, torch.bfloat16, 64, "flex"),  # ... and flex at 16k
    ("cuda", 65536, torch.bfloat16, 128, "flex"),
    ("cuda", 65536, torch.float64, 64, "readable"),  # float64: the exact readable kernels
    ("cuda", 8192, torch.float32, 24, "dense"),  # a head size flex may not take
    ("cuda", 65536, torch.float32, 24, "readable"),  # ... and an (N, N) mask too large
    ("cuda:1", 8192, torch.float16, 32, "flex"),
])
def test_choose_kernel_picks_flex_only_on_cuda(device, n, dtype, d, expected):
    assert flex.choose_kernel(torch.device(device), n, dtype, d) == expected


def test_readable_policy_and_bad_policy():
    cuda = torch.device("cuda")
    with flex.kernel_policy("readable"):
        assert flex.choose_kernel(cuda, 65536, torch.float32, 64) == "readable"
    assert flex.choose_kernel(cuda, 65536, torch.float32, 64) == "flex"
    assert flex.choose_kernel(cuda, 65536, torch.float32, 64, policy="readable") == "readable"
    with pytest.raises(ValueError, match="policy: expected one of auto, readable"):
        flex.choose_kernel(cuda, 100, policy="fastest")
    with pytest.raises(ValueError, match="kernel policy"), flex.kernel_policy("flex"):
        pass


def test_on_the_cpu_the_routes_run_the_readable_kernels():
    """On the CPU the routed functions run minattn.fast.sparse's kernels (the same numbers,
    bit for bit); the multi-scale dispatch leaves the layer to its own kernels."""
    q, k, v = _qkv((2, 40, 8))
    torch.testing.assert_close(window_attention_routed_fast_torch(q, k, v, 3, global_idx=[5]),
                               window_attention_fast_torch(q, k, v, 3, global_idx=[5]),
                               rtol=0, atol=0)
    layout = np.ones((5, 5), bool)
    torch.testing.assert_close(block_sparse_attention_routed_fast_torch(q, k, v, layout, 8),
                               block_sparse_attention_fast_torch(q, k, v, layout, 8),
                               rtol=0, atol=0)
    q4, k4, v4 = _qkv((1, 2, 40, 8))
    assert flex.routed_multiscale_attention(q4, k4, v4, [2, 39]) is None
    torch.testing.assert_close(multiscale_attention_routed_fast_torch(q4, k4, v4, [2, 39]),
                               multiscale_attention_fast_torch(q4, k4, v4, [2, 39]),
                               rtol=0, atol=0)


def test_multiscale_routes_and_bad_pattern():
    """The multi-scale layer: one dense call below MULTISCALE_FLEX_FROM, one flex call from
    there, in every dtype flex takes; float64 and the CPU keep the readable kernels."""
    for dtype, n in flex.MULTISCALE_FLEX_FROM.items():
        assert flex.choose_kernel("cuda", n - 1, dtype, pattern="multiscale") == "dense"
        assert flex.choose_kernel("cuda", n, dtype, pattern="multiscale") == "flex"
    assert flex.choose_kernel("cuda", 8192, torch.float64, pattern="multiscale") == "readable"
    assert flex.choose_kernel("cpu", 8192, pattern="multiscale") == "readable"
    with pytest.raises(ValueError, match="pattern: expected one of window, multiscale"):
        flex.choose_kernel("cuda", 100, pattern="band")


RESULTS = REPO_ROOT / "benchmarks" / "results" / "h100-2026-11-26"


def _saved_window_ms() -> dict:
    """(dtype, N) -> {"dense": ms, "flex": ms}, forward + backward, from the saved H100 files:
    yardstick.jsonl's float32 rows (its first, before anything else ran in that process; its
    bfloat16 rows ran after the compiler had given up, eagerly) and sparse_bf16.json."""
    import json

    out = {}
    for line in (RESULTS / "yardstick.jsonl").read_text().splitlines():
        row = json.loads(line) if line.startswith("{") else {}
        if row.get("kind") == "window" and row["dtype"] == "torch.float32" \
                and row["who"] in ("dense", "flex"):
            out.setdefault(("float32", row["n"]), {})[row["who"]] = row["fwdbwd_ms"]
    for r in json.loads((RESULTS / "sparse_bf16.json").read_text())["results"]:
        out[("bfloat16", r["n"])] = {who: r["fwd_bwd_s"][who] * 1e3 for who in ("dense", "flex")}
    return out


def test_the_routes_stand_on_the_saved_measurements():
    """At every (dtype, N) of the saved H100 measurements the dispatch picks the kernel measured
    faster there (benchmarks/README.md, "The routes", quotes the same numbers); float16 routes as
    bfloat16. The multi-scale layer's dense route at N = 1,024 (one call) was measured faster
    than its per-group calls."""
    import json

    saved = _saved_window_ms()
    assert set(saved) == {("float32", 4096), ("float32", 16384), ("bfloat16", 4096),
                          ("bfloat16", 16384)}
    assert saved["float32", 4096] == pytest.approx({"dense": 4.36, "flex": 2.87}, abs=0.006)
    for (dtype, n), ms in saved.items():
        faster = min(ms, key=ms.get)
        assert flex.choose_kernel("cuda", n, getattr(torch, dtype)) == faster, (dtype, n)
    assert flex.FLEX_FROM[torch.float16] == flex.FLEX_FROM[torch.bfloat16]
    ms = json.loads((RESULTS / "multiscale.json").read_text())["results"]
    at_1k = next(r["fwd_bwd_s"] for r in ms if r["n"] == 1024)
    assert at_1k["masked"] < at_1k["grouped"]
    assert flex.choose_kernel("cuda", 1024, pattern="multiscale") == "dense"


def test_the_routes_stand_on_the_h200_measurements():
    """On one H200 (benchmarks/results/h200-2026-11-30/, `--quick` runs): at every N measured,
    in float32 and bfloat16, the window dispatch and the multi-scale layer pick the route that
    was measured faster there, forward + backward (window: dense masked SDPA against compiled
    FlexAttention; multi-scale: its one masked SDPA call against its FlexAttention call)."""
    import json

    h200 = REPO_ROOT / "benchmarks" / "results" / "h200-2026-11-30"
    checked = []
    for dtype, short in (("float32", "fp32"), ("bfloat16", "bf16")):
        for r in json.loads((h200 / f"sparse_{short}.json").read_text())["results"]:
            ms = {who: r["fwd_bwd_s"][who] for who in ("dense", "flex")}
            assert flex.choose_kernel("cuda", r["n"], getattr(torch, dtype)) == \
                min(ms, key=ms.get), (dtype, r["n"], ms)
            checked.append(("window", dtype, r["n"]))
        for r in json.loads((h200 / f"multiscale_{short}.json").read_text())["results"]:
            ms = {"dense": r["fwd_bwd_s"]["masked"], "flex": r["fwd_bwd_s"]["flex"]}
            assert flex.choose_kernel("cuda", r["n"], getattr(torch, dtype),
                                      pattern="multiscale") == min(ms, key=ms.get), (dtype, ms)
            checked.append(("multiscale", dtype, r["n"]))
    assert len(checked) == 12  # N = 4k, 8k, 16k (window) and 1k, 4k, 8k (multi-scale), 2 dtypes


# ============================================================================ tile lists
@pytest.mark.parametrize("options", WINDOW_CASES)
@pytest.mark.parametrize("n, w, tile", [(70, 5, 16), (64, 0, 8), (37, 20, 5), (1, 3, 16)])
def test_window_tiles_are_the_masks_tiles(n, w, tile, options):
    """Partial ∪ full = every tile with an allowed pair (no more: no wasted tile); full tiles
    have every pair allowed, and without global tokens every such tile is listed as full."""
    glob = [g for g in options.get("global_idx", []) if g < n]
    opts = dict(options, global_idx=glob)
    mask = _window_mask(n, w, opts.get("dilation", 1), opts.get("causal", False), glob)
    partial, full = flex.window_tiles_np(n, w, tile=tile, **opts)
    some, every = _tiles(mask, tile)
    np.testing.assert_array_equal(partial | full, some)
    assert not (partial & full).any() and not (full & ~every).any()
    if not glob:
        np.testing.assert_array_equal(full, every)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n, block, tile", [(70, 8, 16), (70, 16, 8), (100, 12, 16), (37, 5, 5)])
def test_layout_tiles_are_the_masks_tiles(n, block, tile, causal):
    layout = bigbird_layout_np(-(-n // block), 1, 1, 1, seed=2)
    layout[3] = False  # a block row with no key: its queries see nothing
    mask = block_mask_np(layout, block, n)
    mask = np.tril(mask) if causal else mask
    partial, full = flex.layout_tiles_np(layout, block, n, causal, tile)
    some, every = _tiles(mask, tile)
    np.testing.assert_array_equal(partial | full, some)
    np.testing.assert_array_equal(full, every)


def test_block_masks_list_exactly_the_tiles():
    """The BlockMask built from the tile lists shows the same tiles (to_dense: partial | full),
    per head for the multi-scale windows."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    n, ws = 70, [0, 3, 20, 69]
    bm = flex.multiscale_block_mask(n, ws, tile=16)
    for h, w in enumerate(ws):
        some, every = _tiles(scale_mask_np(n, [w])[0], 16)
        np.testing.assert_array_equal(bm.to_dense()[0, h].numpy(), some)
        full = flex.multiscale_tiles_np(n, ws, tile=16)[1][h]
        np.testing.assert_array_equal(full, every)
    bm = flex.window_block_mask(n, 5, 2, True, (0, 33), "cpu", 16)
    np.testing.assert_array_equal(bm.to_dense()[0, 0].numpy(),
                                  _tiles(_window_mask(n, 5, 2, True, [0, 33]), 16)[0])
    assert flex.window_block_mask(n, 5, 2, True, (0, 33), "cpu", 16) is bm  # cached


def test_padded_multiscale_tiles_leave_out_the_padding():
    """With key padding, each sequence gets its own tile lists: exactly the tiles of its
    (window ∩ real keys) mask, no tile of padding only, and full tiles only where every pair is
    allowed — the tiles a kernel visits are never wholly masked."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    n, ws, tile = 70, [0, 3, 20, 69], 16
    lengths = torch.tensor([70, 40, 16, 1])
    key_mask = padding_mask_torch(lengths, n)[:, 0, 0, :]  # (B, N)
    full_h = torch.from_numpy(flex.multiscale_tiles_np(n, ws, tile)[1])
    partial, full = flex.padded_tiles(full_h, torch.tensor(ws), key_mask, n, tile)
    dense = flex.multiscale_block_mask(n, ws, key_mask, tile=tile).to_dense()
    for b in range(len(lengths)):
        for h, w in enumerate(ws):
            some, every = _tiles(scale_mask_np(n, [w])[0] & key_mask[b].numpy()[None, :], tile)
            np.testing.assert_array_equal((partial | full)[b, h].numpy(), some)
            np.testing.assert_array_equal(full[b, h].numpy(), every & some)
            np.testing.assert_array_equal(dense[b, h].numpy(), some)
    assert not (partial & full).any()


# ============================================================================ flex forward (CPU)
# FlexAttention's eager forward (an unfused reference that applies the mask_mod to every
# score; ~0.3 s of CPU per call, whatever the size) with our BlockMasks, in float64, against
# dense masked attention on the NumPy mask of each pattern. Every branch of every mask_mod
# runs once: here the plain window and the causal block layout with an empty row; below,
# through the dispatch points, the dilated causal window with global tokens and the per-head
# windows with padding.
def test_flex_window_and_block_sparse_forward_equal_dense_masked_attention():
    pytest.importorskip("torch.nn.attention.flex_attention")
    n, w = 40, 3
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 1, n, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(2, 1, n, 5, generator=gen, dtype=torch.float64)  # dv != d
    out = flex.flex_window_attention(q, k, v, w, tile=16)
    ref, _ = attention_torch(q, k, v, torch.as_tensor(_window_mask(n, w)))
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    block = 8
    layout = bigbird_layout_np(-(-n // block), 1, 1, 1, seed=0)
    layout[2] = False  # queries 16..23 see nothing: zeros
    mask = np.tril(block_mask_np(layout, block, n))
    ref, _ = attention_torch(q, k, v, torch.as_tensor(mask))
    out = flex.flex_block_sparse_attention(q, k, v, layout, block, causal=True, tile=16)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    assert (out[..., 16:24, :] == 0).all()


def test_flex_on_the_cpu_refuses_gradients_and_bad_input():
    pytest.importorskip("torch.nn.attention.flex_attention")
    q, k, v = _qkv((1, 30, 8), grad=True)
    with pytest.raises(ValueError, match="no CPU backward"):
        flex.flex_window_attention(q, k, v, 3)
    q, k, v = (x.detach() for x in (q, k, v))
    with pytest.raises(ValueError, match="w: expected an integer >= 0"):
        flex.flex_window_attention(q, k, v, -1)
    with pytest.raises(ValueError, match=r"layout: expected bool \(4, 4\)"):
        flex.flex_block_sparse_attention(q, k, v, np.ones((3, 3), bool), 8)
    with pytest.raises(ValueError, match=r"^k: expected float \(\.\.\., N, d\) with .*N = 30"):
        flex.flex_window_attention(q, k[:, :20], v[:, :20], 3)
    with pytest.raises(ValueError, match="windows: expected one window per head, 2"):
        flex.flex_multiscale_attention(q[None].expand(1, 2, 30, 8), k[None].expand(1, 2, 30, 8),
                                       v[None].expand(1, 2, 30, 8), [1, 2, 3])


# ============================================================================ dense route (CPU)
def _assert_matches_dense(kernel, mask, shape=(2, 3, 0, 6), seed=0):
    """Outputs and gradients of kernel(q, k, v) equal dense masked attention, float64."""
    q, k, v = _qkv(shape[:-2] + (mask.shape[0], shape[-1]), seed, grad=True)
    grad_out = torch.randn(q.shape, dtype=torch.float64,
                           generator=torch.Generator().manual_seed(seed + 1))
    out = kernel(q, k, v)
    ref, _ = attention_torch(q, k, v, torch.as_tensor(mask))
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for g, r, name in zip(torch.autograd.grad(out, (q, k, v), grad_out),
                          torch.autograd.grad(ref, (q, k, v), grad_out), "qkv"):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10, msg=f"grad of {name}")


@pytest.mark.parametrize("options", WINDOW_CASES + [dict(w=69), dict(w=80, causal=True)])
def test_dense_route_equals_dense_masked_attention(options):
    n = 70
    options = dict(options)
    w = options.pop("w", 5)
    mask = _window_mask(n, w, options.get("dilation", 1), options.get("causal", False),
                        options.get("global_idx", ()))
    _assert_matches_dense(lambda q, k, v: flex.dense_window_attention(q, k, v, w, **options),
                          mask)


def test_dense_block_sparse_route_gives_zeros_to_empty_rows():
    n, block = 70, 8
    layout = bigbird_layout_np(-(-n // block), 1, 1, 1, seed=0)
    layout[2] = False
    _assert_matches_dense(lambda q, k, v: flex.dense_block_sparse_attention(q, k, v, layout,
                                                                            block),
                          block_mask_np(layout, block, n))


# ============================================================================ dispatch points
@pytest.fixture
def decide(monkeypatch):
    """Make the dispatch decide as it would on CUDA (route given), on CPU tensors."""
    def set_route(route):
        monkeypatch.setattr(flex, "choose_kernel", lambda *args, **kw: route)
    return set_route


def test_the_kernels_dispatch_to_the_dense_route(decide, monkeypatch):
    """window_attention_routed_fast_torch, block_sparse_attention_routed_fast_torch: the
    route's output, forward and backward; the fast kernels chosen by name never route."""
    decide("dense")
    n, w = 70, 5
    for options in WINDOW_CASES:
        mask = _window_mask(n, w, options.get("dilation", 1), options.get("causal", False),
                            options.get("global_idx", ()))
        _assert_matches_dense(lambda q, k, v: window_attention_routed_fast_torch(q, k, v, w,
                                                                                 **options),
                              mask)
    layout = bigbird_layout_np(9, 1, 1, 1, seed=0)
    _assert_matches_dense(lambda q, k, v: block_sparse_attention_routed_fast_torch(
        q, k, v, layout, 8), block_mask_np(layout, 8, n))
    calls = []
    monkeypatch.setattr(flex, "dense_window_attention", lambda *a, **kw: calls.append(1))
    q, k, v = _qkv((1, n, 4))
    window_attention_fast_torch(q, k, v, w, block=16)
    window_attend(w, kernel=window_attention_fast_torch)(q, k, v)
    assert not calls  # the readable kernel, as its caller chose
    window_attention_routed_fast_torch(q, k, v, w)
    window_attend(w, kernel=window_attention_routed_fast_torch)(q, k, v)
    assert calls == [1, 1]


def test_the_kernels_dispatch_to_flex(decide):
    """The same entry points with the decision "flex" run FlexAttention (eager, on the CPU):
    the dilated causal window with global tokens, and per-head windows with key padding (a
    query whose window holds no real key gets zeros)."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    decide("flex")
    n, w = 50, 4
    q, k, v = _qkv((2, n, 8))
    out = window_attention_routed_fast_torch(q, k, v, w, dilation=2, causal=True,
                                             global_idx=[7, 30])
    ref, _ = attention_torch(q, k, v, torch.as_tensor(_window_mask(n, w, 2, True, [7, 30])))
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    ws = [0, 3, 9, 49]
    q, k, v = _qkv((2, 4, n, 8), seed=1)
    pad = padding_mask_torch(torch.tensor([50, 31]), n)  # row 1: queries from 35 see no key
    ref, _ = multiscale_attention_torch(q, k, v, ws, pad)
    out = multiscale_attention_routed_fast_torch(q, k, v, ws, pad)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    assert (out[1, :2, 35:] == 0).all()


def test_a_call_the_compiler_would_run_eagerly_is_refused(monkeypatch):
    """Where the compiler gives up on a call, it runs the compiled function as plain Python.
    Here the plain copy stands in for torch.compile's output, as it would run then: the call is
    refused (FlexNotCompiledError, naming the copy and N), not run unfused."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    monkeypatch.setattr(flex, "compiled_copy", flex.named_copy)
    q, k, v = _qkv((1, 1, 40, 8), dtype=torch.float32)
    with pytest.raises(flex.FlexNotCompiledError, match=r"flex_window_mask_mod_False_1_None"
                                                           r"_cpu_float32_d8, N = 40.*refused"):
        flex.run_flex(q, k, v, flex.window_block_mask(40, 3), compiled=True)


def test_a_refused_flex_call_runs_dense_up_to_dense_max(decide, monkeypatch):
    """The dispatch turns a refused flex call into dense SDPA with the (N, N) mask, with a
    warning that says why, up to DENSE_MAX; past it, the error. The multi-scale layer then
    makes its one dense call (no per-group call)."""
    from minattn.fast import multiscale as fast

    decide("flex")

    def refuse(*args, **kwargs):
        raise flex.FlexNotCompiledError("the compiler would have run it eagerly.")

    for name in ("flex_window_attention", "flex_block_sparse_attention",
                 "flex_multiscale_attention"):
        monkeypatch.setattr(flex, name, refuse)
    monkeypatch.setattr(fast, "_group", refuse)
    n, w = 50, 4
    q, k, v = _qkv((2, n, 8))
    with pytest.warns(RuntimeWarning, match=r"eagerly\. Dense SDPA with the \(N, N\) mask runs "
                                            r"instead \(N = 50 <= DENSE_MAX"):
        out = window_attention_routed_fast_torch(q, k, v, w, causal=True)
    ref, _ = attention_torch(q, k, v, torch.as_tensor(_window_mask(n, w, causal=True)))
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    layout = bigbird_layout_np(7, 1, 1, 1, seed=0)
    with pytest.warns(RuntimeWarning, match="Dense SDPA"):
        out = block_sparse_attention_routed_fast_torch(q, k, v, layout, 8)
    ref, _ = attention_torch(q, k, v, torch.as_tensor(block_mask_np(layout, 8, n)))
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    ws = [0, 3, 9, 49]
    q4, k4, v4 = _qkv((2, 4, n, 8), seed=1)
    pad = padding_mask_torch(torch.tensor([50, 31]), n)
    with pytest.warns(RuntimeWarning, match="Dense SDPA"):
        out = multiscale_attention_routed_fast_torch(q4, k4, v4, ws, pad)
    torch.testing.assert_close(out, multiscale_attention_torch(q4, k4, v4, ws, pad)[0],
                               rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(flex, "DENSE_MAX", n - 1)
    with pytest.raises(flex.FlexNotCompiledError, match="eagerly"):
        window_attention_routed_fast_torch(q, k, v, w)


def test_multiscale_dense_route_is_one_call(decide, monkeypatch):
    """On CUDA below MULTISCALE_FLEX_FROM the layer is one dense SDPA call with the (H, N, N)
    mask (measured faster than its per-group calls), with or without key padding."""
    from minattn.fast import multiscale as fast

    decide("dense")
    monkeypatch.setattr(fast, "_group", lambda *a: pytest.fail("a per-group call"))
    n, ws = 60, [0, 3, 9, 59]
    q, k, v = _qkv((2, 4, n, 8), seed=2)
    for mask in (None, padding_mask_torch(torch.tensor([60, 20]), n)):
        out = multiscale_attention_routed_fast_torch(q, k, v, ws, mask)
        torch.testing.assert_close(out, multiscale_attention_torch(q, k, v, ws, mask)[0],
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MINATTN_COMPILE_TESTS"),
                    reason="compiles FlexAttention on the CPU (~40 s of CPU time): "
                           "MINATTN_COMPILE_TESTS=1 runs it")
def test_compiled_flex_on_the_cpu_visits_our_tiles():
    """torch.compile'd FlexAttention (the CPU's fused kernel, which like the GPU's visits only
    the listed tiles): our BlockMasks (window, per-head windows with padding, a causal block
    layout) give the dense result, and a tile dropped from a list
    changes it — the tile lists are used, not just the mask_mod. Opt-in: compiling costs more
    than the whole default run may spend here; the tile lists themselves are checked against
    the masks above, and the `cuda` tests run the compiled kernel on a GPU."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    n, w = 300, 20
    q, k, v = _qkv((1, 2, n, 16), dtype=torch.float32)
    ref, _ = attention_torch(q, k, v, torch.as_tensor(_window_mask(n, w, 2, True, [150])))
    out = flex.flex_window_attention(q, k, v, w, dilation=2, causal=True, global_idx=[150],
                                     compiled=True)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    ws = [3, 20, 150, 299]  # per-head tiles (the BlockMask's head axis), with key padding
    q4, k4, v4 = _qkv((2, 4, n, 16), seed=1, dtype=torch.float32)
    pad = padding_mask_torch(torch.tensor([300, 170]), n)
    ref4, _ = multiscale_attention_torch(q4, k4, v4, ws, pad)
    out4 = flex.flex_multiscale_attention(q4, k4, v4, ws, pad[:, 0, 0, :], compiled=True)
    torch.testing.assert_close(out4, ref4, rtol=1e-5, atol=1e-5)
    layout = bigbird_layout_np(5, 1, 1, 1, seed=0)  # blocks of 64, tiles of 128
    layout[2] = False
    ref, _ = attention_torch(q, k, v, torch.as_tensor(np.tril(block_mask_np(layout, 64, n))))
    out = flex.flex_block_sparse_attention(q, k, v, layout, 64, causal=True, compiled=True)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    partial, full = flex.window_tiles_np(n, w)
    partial[1, 0] = False  # keys 0..127 hidden from queries 128..255
    broken = flex.block_mask_from_tiles(partial, full, n, flex.window_mask_mod(w), "cpu")
    good = flex.window_block_mask(n, w)
    assert (flex.run_flex(q, k, v, good, compiled=True)
            - flex.run_flex(q, k, v, broken, compiled=True)).abs().max() > 0.1


# ============================================================================ the GPU tier
def test_gpu_tier_needs_no_notebook_packages_and_refuses_without_cuda():
    """The tier's path imports no notebook package (nor NLTK): with those blocked, the tier and
    every library module import; on a machine without CUDA it runs nothing and exits 2."""
    blocked = list(gpu_tier.NOTEBOOK_PACKAGES) + ["nltk", "IPython"]
    code = f"""
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import minattn
for m in pkgutil.walk_packages(minattn.__path__, "minattn."):
    importlib.import_module(m.name)
from minattn.course import gpu_tier
rc = gpu_tier.main(["--no-tests"])
assert not [name for name in sys.modules if name.split(".")[0] in {blocked!r}]
sys.exit(rc)
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=120)
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the tier would run the lessons")
    assert result.returncode == 2, result.stderr
    assert "no CUDA device" in result.stdout


def test_gpu_tier_collects_only_test_files_that_need_no_notebook_package():
    """An H200's own Python had no nbformat: `pytest -m cuda tests` stopped at collecting the
    page tests. The tier collects the files with cuda tests, and none of them (nor the helpers
    every test file loads) imports a notebook package or NLTK at its top."""
    files = gpu_tier.cuda_test_files()
    names = {p.name for p in files}
    assert {"test_flex_compiled.py", "test_gpu_dispatch.py", "test_xl_decoder.py"} <= names
    assert not names & {"test_course_pages.py", "test_runner_signals.py"}
    blocked = set(gpu_tier.NOTEBOOK_PACKAGES) | {"nltk", "IPython"}
    for path in [*files, REPO_ROOT / "tests" / "conftest.py", REPO_ROOT / "tests" / "expect.py"]:
        body = ast.parse(path.read_text(encoding="utf-8")).body
        top = {a.name.split(".")[0] for node in body if isinstance(node, ast.Import)
               for a in node.names}
        top |= {node.module.split(".")[0] for node in body
                if isinstance(node, ast.ImportFrom) and node.module}
        assert not top & blocked, f"{path.name} imports {sorted(top & blocked)} at its top"


def test_gpu_tier_full_all_runs_every_lesson_in_full_after_the_smoke_runs(capsys):
    """make test-gpu FULL=all: the cuda tests, every lesson in smoke mode, then every lesson in
    full mode (listed without running anything, on any machine)."""
    assert gpu_tier.main(["--list", "--full", "all"]) == 0
    lessons = [p.relative_to(REPO_ROOT) for p in gpu_tier.lesson_paths()]
    assert len(lessons) >= 7
    assert capsys.readouterr().out.splitlines() == (
        [f"tests  pytest -m cuda ({len(gpu_tier.cuda_test_files())} files of tests/ with cuda "
         "tests)"] + [f"smoke  {p}" for p in lessons]
        + [f"full   {p}" for p in lessons])
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "$(if $(FULL),--full $(FULL))" in makefile


def test_gpu_tier_counts_a_lesson_ok_only_when_it_ran_on_cuda(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_tier, "REPO_ROOT", tmp_path)
    script = tmp_path / "fake.py"
    for text, ok, why in (("[fake] SMOKE mode on cuda", True, ""),
                          ("[fake] SMOKE mode on cpu, 1 torch thread(s)", False,
                           "did not run on cuda"),
                          ("raise SystemExit(3)", False, "exit 3")):
        script.write_text(f"print({text!r})" if not text.startswith("raise") else text)
        result = gpu_tier.run_lesson(script, tmp_path, full=False, timeout=60)
        assert result[0] == ok and why in result[2]
    env = gpu_tier.lesson_env(tmp_path, full=False)
    assert env["MINATTN_DEVICE"] == "cuda" and env["MINATTN_SMOKE"] == "1"
    assert "MINATTN_SMOKE" not in gpu_tier.lesson_env(tmp_path, full=True)


# ============================================================================ to the host
def _host_helpers(device):
    """The library's helpers that turn tensors into NumPy, given tensors on `device` (and one
    that requires grad): heatmap, global_idx, a block layout, windows, a list of 0-dim tensors."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minattn.checks import check_global_idx, check_windows
    from minattn.contract import as_numpy
    from minattn.course.plots import heatmap
    from minattn.sparse import block_sparse_attend

    weights = torch.rand(3, 4, device=device, requires_grad=True)
    fig, ax = plt.subplots()
    image = heatmap(ax, weights * 1)
    np.testing.assert_allclose(image.get_array(), weights.detach().cpu().numpy())
    plt.close(fig)
    np.testing.assert_array_equal(check_global_idx(torch.tensor([7, 2], device=device), 10), [2, 7])
    assert check_windows(torch.tensor([1, 5], device=device), 2) == [1, 5]
    layout = torch.eye(5, dtype=torch.bool, device=device)
    q, k, v = _qkv((1, 40, 4), device=device)
    out = block_sparse_attend(layout, 8)(q, k, v)
    ref, _ = attention_torch(q, k, v, torch.as_tensor(block_mask_np(np.eye(5, dtype=bool), 8, 40),
                                                      device=device))
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    ratios = [torch.tensor(0.5, device=device), torch.tensor(1.5, device=device)]
    assert float(np.mean(as_numpy(ratios))) == 1.0


def test_host_helpers_take_tensors_that_numpy_cannot_read():
    _host_helpers(torch.device("cpu"))


@pytest.mark.cuda
def test_host_helpers_take_cuda_tensors():
    _host_helpers(torch.device("cuda"))


# ============================================================================ on a GPU
CUDA_ATOL = 2e-4  # float32 kernels against a float64 reference of the same inputs


def _assert_cuda_matches_dense(kernel, mask, shape, seed=0, dtype=torch.float32):
    """kernel(q, k, v) on CUDA in float32: output and gradients equal dense masked attention
    computed in float64 from the same inputs."""
    cuda = torch.device("cuda")
    q, k, v = _qkv(shape, seed, dtype=dtype, device=cuda, grad=True)
    grad_out = torch.randn(q.shape, dtype=dtype, device=cuda)
    out = kernel(q, k, v)
    assert out.dtype == dtype and out.device == q.device
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    ref, _ = attention_torch(q64, k64, v64, torch.as_tensor(mask, device=cuda))
    ref_grads = torch.autograd.grad(ref, (q64, k64, v64), grad_out.double())
    torch.testing.assert_close(out.double(), ref, rtol=CUDA_ATOL, atol=CUDA_ATOL)
    for g, r, name in zip(grads, ref_grads, "qkv"):
        torch.testing.assert_close(g.double(), r, rtol=CUDA_ATOL, atol=CUDA_ATOL,
                                   msg=f"grad of {name}")


@pytest.mark.cuda
@pytest.mark.parametrize("n", [1000, FLEX_F32 + 37])  # the dense route, then flex
@pytest.mark.parametrize("options", WINDOW_CASES)
def test_window_dispatch_on_cuda_matches_dense(n, options):
    route = flex.choose_kernel(torch.device("cuda"), n, torch.float32, 64)
    assert route == ("dense" if n < FLEX_F32 else "flex")
    mask = _window_mask(n, 64, options.get("dilation", 1), options.get("causal", False),
                        options.get("global_idx", ()))
    _assert_cuda_matches_dense(
        lambda q, k, v: window_attention_routed_fast_torch(q, k, v, 64, **options), mask,
        (1, 2, n, 64))


@pytest.mark.cuda
@pytest.mark.parametrize("n", [1000, FLEX_F32 + 37])
@pytest.mark.parametrize("causal", [False, True])
def test_block_sparse_dispatch_on_cuda_matches_dense(n, causal):
    block = 64
    layout = bigbird_layout_np(-(-n // block), 1, 1, 1, seed=0)
    layout[2] = False  # empty query rows: zeros, and finite gradients
    mask = block_mask_np(layout, block, n)
    _assert_cuda_matches_dense(lambda q, k, v: block_sparse_attention_routed_fast_torch(
        q, k, v, layout, block, causal), np.tril(mask) if causal else mask, (1, 2, n, 64))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1000, flex.MULTISCALE_FLEX_FROM[torch.float32] + 37])
def test_multiscale_dispatch_on_cuda_matches_the_reference(n, dtype):
    """The dense route (one masked call) and the flex route (one call, per-head windows, per
    sequence tiles with padding), forward and backward, against the float64 reference: float32
    to CUDA_ATOL; bfloat16 within 3 % of each tensor's norm (its rounding, ~0.4 % per value)."""
    cuda = torch.device("cuda")
    route = flex.choose_kernel(cuda, n, dtype, 64, pattern="multiscale")
    assert route == ("dense" if n < flex.MULTISCALE_FLEX_FROM[dtype] else "flex")
    ws = [3, 3, n // 16, n // 16, n // 8, n // 4, n // 2, n - 1]
    q, k, v = _qkv((2, 8, n, 64), dtype=torch.float32, device=cuda)
    q, k, v = (x.to(dtype).requires_grad_() for x in (q, k, v))
    pad = padding_mask_torch(torch.tensor([n, n // 3], device=cuda), n)

    def close(x, ref, what):
        if dtype == torch.float32:
            torch.testing.assert_close(x.double(), ref, rtol=CUDA_ATOL, atol=CUDA_ATOL, msg=what)
        else:
            err = ((x.double() - ref).norm() / ref.norm()).item()
            assert err <= 3e-2, f"{what}: relative error {err:.3g}"

    for mask in (None, pad):
        out = multiscale_attention_routed_fast_torch(q, k, v, ws, mask)
        q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
        ref, _ = multiscale_attention_torch(q64, k64, v64, ws, mask)
        close(out, ref, "output")
        grad_out = torch.randn_like(out)
        for g, r, name in zip(torch.autograd.grad(out, (q, k, v), grad_out),
                              torch.autograd.grad(ref, (q64, k64, v64), grad_out.double()),
                              "qkv"):
            close(g, r, f"grad of {name}")


@pytest.mark.cuda
def test_flex_at_any_length_on_cuda_with_short_last_tile():
    """Compiled flex directly (whatever the decision), N not a multiple of the tile, bfloat16
    and float32, forward and backward."""
    n, w = 300, 20
    mask = _window_mask(n, w, 2, True, [150])
    _assert_cuda_matches_dense(lambda q, k, v: flex.flex_window_attention(
        q, k, v, w, dilation=2, causal=True, global_idx=[150]), mask, (2, 2, n, 32))
    cuda = torch.device("cuda")
    q, k, v = _qkv((1, 2, 4096, 64), dtype=torch.bfloat16, device=cuda)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=torch.as_tensor(_window_mask(4096, 128),
                                                                   device=cuda))
    out = flex.flex_window_attention(q, k, v, 128)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)  # bfloat16 rounding


@pytest.mark.cuda
def test_measured_scales_come_back_to_the_host():
    """Lesson 03's helpers that move tensors to NumPy work on CUDA models (same numbers)."""
    from minattn.course.multiscale import TransformerBaseline
    from minattn.multiscale import MultiScaleTransformer

    x = torch.randn(3, 20, 5, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([20, 12, 7])
    for make in (lambda: MultiScaleTransformer(5, 16, [[1, 3, 19, 19]] * 2, 2),
                 lambda: TransformerBaseline(5, 16, 4, 2, 2, max_len=20)):
        torch.manual_seed(0)
        model = make().double().eval()
        cpu = model.measured_scales(x.double(), lengths)
        gpu = model.cuda().measured_scales(x.double().cuda(), lengths.cuda())
        assert isinstance(gpu, np.ndarray)
        np.testing.assert_allclose(gpu, cpu, rtol=1e-9, atol=1e-9)
