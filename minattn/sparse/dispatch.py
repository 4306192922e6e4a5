"""Who runs the sparse patterns where: the CUDA dispatch of the sparse and multi-scale kernels.

The kernels of `kernels.py` and `multiscale/fast.py` are written for reading and tuned
for a CPU: the window kernel's hand-written backward is a Python loop over small blocks, each a
few tiny kernel launches, which on a GPU costs more than it saves (an H100 trained through it
30-230× slower than through dense masked SDPA). PyTorch has the right tools there, and the
kernels' entry points hand their work to them (`choose_kernel` decides):

    CPU, float64, MINATTN_KERNELS=readable, or a readable-only option (block, hand_backward,
        chunk_scores) given: the readable kernels, unchanged;
    CUDA, N < FLEX_FROM: fused SDPA with the pattern's (N, N) mask (cached per N, pattern and
        device; the plain fused kernel when the window covers everything) — the dense route
        below, where the mask is small and nothing needs compiling;
    CUDA, N >= FLEX_FROM: compiled FlexAttention with the pattern's block mask (`flex.py`).

Every route equals dense masked attention on the NumPy mask of the same pattern: the tests
check the dense route forward and backward in float64 on the CPU, the dispatch points under a
stubbed decision, and every route in float32 with gradients on a GPU (`cuda`-marked).
"""

from __future__ import annotations

import contextlib
import functools
import os

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import attention_fast_torch
from ..tools.utils import check_size, fail
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

# From this N on, CUDA runs FlexAttention; below it, dense SDPA with an (N, N) mask. Measured on
# one H100 (torch 2.11, sliding window w = 128, fwd + bwd, float32): at N = 4,096 compiled flex
# took 2.9 ms and dense masked SDPA 4.5 ms. Below 4,096 nothing was measured: dense needs no
# compile per new N and its mask is at most 16 MiB there.
FLEX_FROM = 4096
DENSE_MAX = 16384  # the largest N whose (N, N) mask the dense route builds (256 MiB as bool)
READABLE_ONLY = ("block", "hand_backward", "chunk_scores")  # options only the readable kernels have
KERNELS = ("auto", "readable")
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
                  policy: str | None = None) -> str:
    """Which kernel computes a sparse pattern over N positions: "readable", "dense" or "flex".

    "readable": the kernels of kernels.py / multiscale/fast.py — on the CPU (where they
    were measured fastest, and where FlexAttention has no backward), for float64 (exact
    comparisons), and whenever the policy says so. "dense": fused SDPA with the (N, N) mask, on
    CUDA for N < FLEX_FROM (and for head sizes flex does not take, up to DENSE_MAX). "flex":
    compiled FlexAttention with a BlockMask, on CUDA from FLEX_FROM on.
    """
    device, n = torch.device(device), check_size("n", n)
    policy = _policy if policy is None else policy
    if policy not in KERNELS:
        fail("kernel policy", " or ".join(map(repr, KERNELS)), repr(policy))
    if policy == "readable" or device.type != "cuda" or dtype not in FLEX_DTYPES:
        return "readable"
    if n < FLEX_FROM:
        return "dense"
    if flex_available() and d == (dv or d) and d in FLEX_HEAD_DIMS:
        return "flex"
    return "dense" if n <= DENSE_MAX else "readable"


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
    kernel = flex_window_attention if route == "flex" else dense_window_attention
    return kernel(q, k, v, w, dilation=dilation, causal=causal, global_idx=global_idx,
                  scale=options.get("scale"))


def routed_block_sparse_attention(q, k, v, layout, block, causal=False, scale=None):
    """The dispatch of `kernels.block_sparse_attention_torch` (see
    `routed_window_attention`): an output, or None for the readable kernel."""
    route = choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1])
    if route == "readable":
        return None
    kernel = flex_block_sparse_attention if route == "flex" else dense_block_sparse_attention
    return kernel(q, k, v, layout, block, causal=causal, scale=scale)


def routed_multiscale_attention(q, k, v, windows, key_mask=None):
    """The dispatch of `multiscale.fast.multiscale_attention_fast_torch`: FlexAttention with
    per-head windows when `choose_kernel` says "flex", else None (its own grouping runs, whose
    window groups reach the dense route through `window_attention_torch`)."""
    route = choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1])
    if route != "flex":
        return None
    return flex_multiscale_attention(q, k, v, windows, key_mask)


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
