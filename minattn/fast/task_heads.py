"""A fast path for `task_heads.AttentionPool` with one layer: the same numbers, less work.

A single read-out layer has one query, the first token's. It never needs the key
k_i = W_k ñ_i + b_k or the value v_i = W_v h_i of every token (ñ = LN(h)). Per head h:

    score_hi = q_h · k_hi / √d_h = (W_k^hᵀ q_h) · ñ_i / √d_h + q_h · b_k^h     (the last term
                                                     is the same for every i: softmax drops it)
    Σ_i a_hi v_hi = W_v^h (Σ_i a_hi h_i) + b_v^h                          (Σ_i a_hi = 1)

So each sentence needs H vectors u_h = W_k^hᵀ q_h, the scores u_h · ñ_i, a weighted mean of the
raw states per head, and one value projection per head: O(L·D·H) work per sentence instead of
the O(L·D²) of projecting every token. Tested equal to the reference (float64) in
tests/test_task_heads.py; measured in benchmarks/task_heads.py (benchmarks/README.md).
"""

from __future__ import annotations

import math

import torch

from .. import checks as c
from ..attention import MultiHeadAttention
from ..contract import checked, hide
from ..task_heads import attention_pool_np, layer_norm_torch  # noqa: F401 (the reference)


@checked(states="float (B, L, mha.d_model) like mha.q_proj where mask", mask="bool (B, L)",
         rules=[c.right_padded])
def attention_pool_fast_torch(states: torch.Tensor, mask: torch.Tensor, mha: MultiHeadAttention,
                              normalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch-only fast path of `task_heads.attention_pool_np` with one layer (`mha`), the
    first token's query: states (B, L, D), mask (B, L) bool -> z (B, D), read-out attention
    (B, H, L)."""
    states = hide(states, mask[..., None])  # padding may hold garbage: zeroed
    B, L, D = states.shape
    H, dh = mha.num_heads, D // mha.num_heads
    n = layer_norm_torch(states) if normalize else states  # (B, L, D)
    q = mha.q_proj(n[:, 0]).view(B, H, dh)  # (B, H, dh): the first token's query only
    u = torch.einsum("bhe,hed->bhd", q, mha.k_proj.weight.view(H, dh, D))  # (B, H, D)
    scores = torch.einsum("bhd,bld->bhl", u, n) / math.sqrt(dh)  # (B, H, L); q·b_k dropped
    weights = torch.softmax(scores.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
    mean_h = torch.einsum("bhl,bld->bhd", weights, states)  # (B, H, D): per-head weighted mean
    v = torch.einsum("bhd,hed->bhe", mean_h, mha.v_proj.weight.view(H, dh, D))  # (B, H, dh)
    if mha.v_proj.bias is not None:
        v = v + mha.v_proj.bias.view(H, dh)
    return mha.out_proj(v.reshape(B, D)), weights
