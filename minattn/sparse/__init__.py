"""Sparse attention (lesson 02): who may attend to whom, and kernels whose cost grows with N.

Read top down:

    patterns.py   the NumPy references: each pattern as an (N, N) mask, and its graph view
    graph_fast.py the graph view's diameter by breadth-first search (for large N)
    blocked.py    the blocked idea (blocks of queries, one band mask) and the core's forward
    backward.py   a hand-written backward for the window core: training in O(N·w) memory
    kernels.py    window (plain, dilated, global) and block-sparse attention in O(N·w)
    flex.py       FlexAttention block masks for the patterns (the CUDA fast path)
    compiled.py   compiled FlexAttention, and no silent eager fallback
    dispatch.py   who runs what: the readable kernels, fused SDPA or FlexAttention
    model.py      lesson 02's layers and classifier
    data.py       lesson 02's long-range task
    claims.py     the paper claims lesson 02 tests, each decided from its raw numbers
"""

from .backward import CHUNK_SCORES, WindowAttentionFunction, window_attention_backward_torch
from .blocked import (
    band_mask_torch,
    band_np,
    blocked_window_attention_torch,
    check_window_args,
    unfold_blocks_torch,
    window_forward_torch,
)
from .data import CLS, SYMBOL_A, SYMBOL_B, two_halves
from .dispatch import (
    DENSE_MAX,
    FLEX_FROM,
    KERNELS,
    choose_kernel,
    dense_block_sparse_attention,
    dense_window_attention,
    kernel_policy,
    routed_block_sparse_attention,
    routed_multiscale_attention,
    routed_window_attention,
)
from .flex import (
    flex_available,
    flex_block_sparse_attention,
    flex_multiscale_attention,
    flex_window_attention,
)
from .graph_fast import diameter_fast_np
from .kernels import (
    block_sparse_attention_torch,
    dilated_window_attention_torch,
    global_window_attention_torch,
    sliding_window_attention_torch,
    window_attention_torch,
)
from .model import SparseClassifier, block_sparse_attend, window_attend
from .patterns import (
    bigbird_layout_np,
    bigbird_layouts_np,
    bigbird_mask_np,
    block_layout_np,
    block_mask_np,
    check_global_idx,
    check_int,
    check_square_mask,
    check_windows,
    diameter_np,
    dilated_window_mask_np,
    fixed_masks_np,
    global_mask_np,
    hops_np,
    random_mask_np,
    reach_np,
    sliding_window_mask_np,
    strided_masks_np,
    union_np,
)

__all__ = [
    "CHUNK_SCORES", "WindowAttentionFunction", "window_attention_backward_torch",
    "band_mask_torch", "band_np", "blocked_window_attention_torch", "check_window_args",
    "unfold_blocks_torch", "window_forward_torch", "CLS", "SYMBOL_A", "SYMBOL_B", "two_halves",
    "DENSE_MAX", "FLEX_FROM", "KERNELS", "choose_kernel", "dense_block_sparse_attention",
    "dense_window_attention", "kernel_policy", "routed_block_sparse_attention",
    "routed_multiscale_attention", "routed_window_attention", "flex_available",
    "flex_block_sparse_attention", "flex_multiscale_attention", "flex_window_attention",
    "block_sparse_attention_torch", "dilated_window_attention_torch",
    "global_window_attention_torch", "sliding_window_attention_torch", "window_attention_torch",
    "SparseClassifier", "block_sparse_attend", "window_attend", "bigbird_layout_np",
    "bigbird_layouts_np", "bigbird_mask_np", "block_layout_np", "block_mask_np",
    "check_global_idx", "check_int", "check_square_mask", "check_windows", "diameter_fast_np",
    "diameter_np", "dilated_window_mask_np", "fixed_masks_np", "global_mask_np", "hops_np",
    "random_mask_np", "reach_np", "sliding_window_mask_np", "strided_masks_np", "union_np",
]
