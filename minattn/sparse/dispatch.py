"""Who runs the sparse patterns where: the CUDA dispatch of the sparse and multi-scale kernels.

The kernels of `kernels.py` and `multiscale/fast.py` are written for reading and tuned
for a CPU: the window kernel's hand-written backward is a Python loop over small blocks, each a
few tiny kernel launches, which on a GPU costs more than it saves (an H100 trained through it
30-230× slower than through dense masked SDPA). PyTorch has the right tools there, and the
kernels' entry points hand their work to them (`choose_kernel` decides):

    CPU, float64, MINATTN_KERNELS=readable, or a readable-only option (block, hand_backward,
        chunk_scores) given: the readable kernels, unchanged;
    CUDA, N < FLEX_FROM[dtype]: fused SDPA with the pattern's (N, N) mask (cached per N,
        pattern and device; the plain fused kernel when the window covers everything) — the
        dense route, where the mask is small and nothing needs compiling;
    CUDA, N >= FLEX_FROM[dtype]: compiled FlexAttention with the pattern's block mask
        (`flex.py`); where the compiler would run a call eagerly (`compiled.py`), dense SDPA up
        to DENSE_MAX with a warning that says why, above it the error.

The multi-scale layer routes the same way with its own thresholds (MULTISCALE_FLEX_FROM): one
dense SDPA call with the (H, N, N) mask, or one FlexAttention call for all heads. The
thresholds come from measurements, listed below with their source files: where they cross
depends on the dtype (bfloat16's dense SDPA is fast enough to win up to a longer N).

Every route equals dense masked attention on the NumPy mask of the same pattern: the tests
check the dense route forward and backward in float64 on the CPU, the dispatch points under a
stubbed decision (a refused flex call included), the routes against the measurements, and on a
GPU (`cuda`-marked) every route with gradients in float32 and bfloat16, and that no compiled
call falls back (tests/test_flex_compiled.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from ..checks import check_size, fail
from ..fast.attention import attention_fast_torch
from .compiled import FlexNotCompiledError
from .flex import (
    FLEX_DTYPES,
    FLEX_HEAD_DIMS,
    check_layout,
    check_self_attention,
    flex_available,
    flex_block_sparse_attention,
    flex_multiscale_attention,
    flex_window_attention,
)
from .patterns import (
    block_mask_np,
    check_global_idx,
    check_int,
    dilated_window_mask_np,
    global_mask_np,
)

# ============================================================================ measured routes
# Forward + backward, ms, on one NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, 2026-11-26, each in a
# process that had compiled nothing before; the files are in benchmarks/results/h100-2026-11-26/
# (tests/test_gpu_dispatch.py checks these numbers against them, and the routes against these).
# Sliding window w = 128, B = 1, H = 8, d = 64: dense masked SDPA and compiled FlexAttention.
WINDOW_MS = {
    ("float32", 4096): {"dense": 4.36, "flex": 2.87},  # yardstick.jsonl, its first rows
    ("float32", 16384): {"dense": 66.39, "flex": 31.61},  # yardstick.jsonl
    ("bfloat16", 4096): {"dense": 0.66, "flex": 1.54},  # sparse_bf16.json
    ("bfloat16", 16384): {"dense": 8.02, "flex": 2.25},  # sparse_bf16.json
}
# From this N on, CUDA runs FlexAttention; below it, dense SDPA with the (N, N) mask. Measured
# with head size 64; other head sizes take the same thresholds, unmeasured.
#   float32   4,096: flex was faster at both N measured. Below 4,096 nothing was measured: the
#             dense route needs no compile there, and its mask is at most 16 MiB.
#   bfloat16  8,192: dense was faster at 4,096, flex at 16,384. Their lines, interpolated on
#             log-log axes between the two, cross near N = 7,100; 8,192 is the next power of
#             two, and N = 8,192 itself is not measured yet.
#   float16   as bfloat16 (the same tensor-core rate; not measured).
FLEX_FROM = {torch.float32: 4096, torch.bfloat16: 8192, torch.float16: 8192}
# The multi-scale layer (H = 8, windows {3, 3, N/16, N/16, N/8, N/4, N/2, N/2}, B = 4, float32,
# multiscale.json): at N = 1,024 one dense SDPA call with the (H, N, N) mask took 2.23 ms, the
# per-group calls 3.59 ms, full heads 1.66 ms. Dense masked SDPA computes all N² pairs, so it
# never beats full heads; FlexAttention visits only the tiles the windows touch (about a third
# of them here). Flex from 4,096 on (there, in float32 with FlexAttention's default "ieee"
# products, it took 29.7 ms, 2.0x full heads); below, one dense call. Flex against that dense
# call at one N is not measured yet, in any dtype.
MULTISCALE_FLEX_FROM = {torch.float32: 4096, torch.bfloat16: 4096, torch.float16: 4096}
DENSE_MAX = 16384  # the largest N whose (N, N) mask the dense route builds (256 MiB as bool)
READABLE_ONLY = ("block", "hand_backward", "chunk_scores")  # options only the readable kernels have
KERNELS = ("auto", "readable")
PATTERNS = {"window": FLEX_FROM, "multiscale": MULTISCALE_FLEX_FROM}  # block layouts: "window"
_policy = os.environ.get("MINATTN_KERNELS", "auto").strip().lower() or "auto"


# ============================================================================ who runs what
@contextlib.contextmanager
def kernel_policy(policy: str):
    """`with kernel_policy("readable"):` runs the readable kernels on every device (benchmarks
    time them side by side with the dispatched ones); "auto" is the default. The environment
    variable MINATTN_KERNELS sets it for a whole run."""
    global _policy
    if policy not in KERNELS:
        fail("kernel policy", " or ".join(map(repr, KERNELS)), repr(policy))
    old, _policy = _policy, policy
    try:
        yield
    finally:
        _policy = old


def choose_kernel(device, n: int, dtype=torch.float32, d: int = 64, dv: int | None = None,
                  policy: str | None = None, pattern: str = "window") -> str:
    """Which kernel computes a sparse pattern over N positions: "readable", "dense" or "flex".

    "readable": the kernels of kernels.py / multiscale/fast.py — on the CPU (where they
    were measured fastest, and where FlexAttention has no backward), for float64 (exact
    comparisons), and whenever the policy says so. "dense": fused SDPA with the (N, N) mask, on
    CUDA for N < FLEX_FROM[dtype] (MULTISCALE_FLEX_FROM for pattern="multiscale"; and for head
    sizes flex does not take, up to DENSE_MAX). "flex": compiled FlexAttention with a BlockMask.
    """
    device, n = torch.device(device), check_size("n", n)
    policy = _policy if policy is None else policy
    if policy not in KERNELS:
        fail("kernel policy", " or ".join(map(repr, KERNELS)), repr(policy))
    if pattern not in PATTERNS:
        fail("pattern of choose_kernel", " or ".join(map(repr, PATTERNS)), repr(pattern))
    if policy == "readable" or device.type != "cuda" or dtype not in FLEX_DTYPES:
        return "readable"
    if n < PATTERNS[pattern][dtype]:
        return "dense"
    if flex_available() and d == (dv or d) and d in FLEX_HEAD_DIMS:
        return "flex"
    return "dense" if n <= DENSE_MAX else "readable"


def _flex_or_dense(flex_route, dense_route, n: int):
    """flex_route(); where the compiler refused it (FlexNotCompiledError) and N <= DENSE_MAX,
    dense_route() with a warning that says why (None when dense_route is None: the caller runs
    its dense call); above DENSE_MAX the error itself."""
    try:
        return flex_route()
    except FlexNotCompiledError as err:
        if n > DENSE_MAX:
            raise
        warnings.warn(f"{err} Dense SDPA with the (N, N) mask runs instead (N = {n:,} <= "
                      f"DENSE_MAX = {DENSE_MAX:,}).", RuntimeWarning, stacklevel=3)
        return dense_route() if dense_route is not None else None


def routed_window_attention(q, k, v, w, dilation=1, causal=False, global_idx=None,
                            options=None):
    """The dispatch of `kernels.window_attention_torch`: its output computed by fused
    SDPA or FlexAttention when `choose_kernel` picks one, else None (run the readable kernel).
    Options only the readable kernel has (block, hand_backward, chunk_scores), given a value
    other than None, keep it."""
    options = options or {}
    if any(options.get(key) is not None for key in READABLE_ONLY):
        return None
    route = choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1])
    if route == "readable":
        return None
    kw = dict(dilation=dilation, causal=causal, global_idx=global_idx, scale=options.get("scale"))
    if route == "dense":
        return dense_window_attention(q, k, v, w, **kw)
    return _flex_or_dense(lambda: flex_window_attention(q, k, v, w, **kw),
                          lambda: dense_window_attention(q, k, v, w, **kw), q.shape[-2])


def routed_block_sparse_attention(q, k, v, layout, block, causal=False, scale=None):
    """The dispatch of `kernels.block_sparse_attention_torch` (see
    `routed_window_attention`): an output, or None for the readable kernel."""
    route = choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1])
    if route == "readable":
        return None
    if route == "dense":
        return dense_block_sparse_attention(q, k, v, layout, block, causal, scale)
    return _flex_or_dense(
        lambda: flex_block_sparse_attention(q, k, v, layout, block, causal, scale),
        lambda: dense_block_sparse_attention(q, k, v, layout, block, causal, scale), q.shape[-2])


def routed_multiscale_attention(q, k, v, windows, key_mask=None):
    """The dispatch of `multiscale.fast.multiscale_attention_fast_torch`: one FlexAttention call
    for all heads, per-head windows, when `choose_kernel(..., pattern="multiscale")` says
    "flex"; else None — and the caller makes one dense SDPA call with the (H, N, N) mask where
    it says "dense" (or where the compiler refused flex), its readable kernels elsewhere."""
    route = choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1],
                          pattern="multiscale")
    if route != "flex":
        return None
    return _flex_or_dense(lambda: flex_multiscale_attention(q, k, v, windows, key_mask), None,
                          q.shape[-2])


# ============================================================================ dense route
@functools.lru_cache(maxsize=16)
def _window_mask(n, w, dilation, causal, global_idx, device):
    mask = dilated_window_mask_np(n, w, dilation)
    if global_idx:
        mask = mask | global_mask_np(n, list(global_idx))
    if causal:
        mask = np.tril(mask)
    return torch.as_tensor(mask, device=device)


def dense_window_attention(q, k, v, w: int, *, dilation: int = 1, causal: bool = False,
                           global_idx=None, scale: float | None = None) -> torch.Tensor:
    """`window_attention_torch`'s pattern as one fused SDPA call with the (N, N) mask (cached
    per N, pattern, device); the plain fused kernel when the window covers every key. Every
    query sees itself, so no row is empty."""
    check_self_attention(q, k, v)
    n = q.shape[-2]
    w, dilation = check_int("window w", w, 0), check_int("dilation", dilation, 1)
    g = tuple(int(x) for x in check_global_idx(global_idx, n))
    if dilation == 1 and w >= n - 1:  # the window is everything
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=scale)
    mask = _window_mask(n, w, dilation, bool(causal), g, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


@functools.lru_cache(maxsize=16)
def _layout_mask(layout_bytes, nb, block, n, causal, device):
    layout = np.frombuffer(layout_bytes, dtype=np.bool_).reshape(nb, nb)
    mask = block_mask_np(layout, block, n)
    return torch.as_tensor(np.tril(mask) if causal else mask, device=device)


def dense_block_sparse_attention(q, k, v, layout, block: int, causal: bool = False,
                                 scale: float | None = None) -> torch.Tensor:
    """`block_sparse_attention_torch` as one fused SDPA call with the (N, N) mask (a query
    with no allowed key gets zeros)."""
    check_self_attention(q, k, v)
    n = q.shape[-2]
    layout = check_layout(layout, block, n)
    mask = _layout_mask(layout.tobytes(), len(layout), block, n, bool(causal), q.device)
    return attention_fast_torch(q, k, v, mask=mask, scale=scale)
