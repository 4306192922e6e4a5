"""Transformer-XL (Dai et al. 2019): segment recurrence and relative positions — NumPy
reference, then its PyTorch twin (the modules are in `model.py`).

A long text is cut into segments of L tokens. Layer n of the next segment attends over its
own segment *and* the previous hidden states of layer n−1, kept as a memory of M positions
whose gradient is stopped (SG):

    h̃ⁿ⁻¹ = [SG(memⁿ⁻¹) ; hⁿ⁻¹]               (B, M + L, D): memory first, then the segment
    q = hⁿ⁻¹ W_q,   k = h̃ⁿ⁻¹ W_k,   v = h̃ⁿ⁻¹ W_v      (queries: the segment only)

Absolute positions would clash (position 0 of every segment looks alike), so the scores use
the *distance* i − j between query i and key j instead, with a sinusoid table R (row δ = the
encoding of distance δ) and two learned per-head vectors u, v:

    A_ij = q_iᵀk_j + q_iᵀ W_R R_{i−j} + uᵀk_j + vᵀ W_R R_{i−j}         (a) (b) (c) (d)
    out_i = Σ_j softmax_j(A_ij / √dh) v_j         over the causal keys j ≤ i

The queries are the last L of the M + L positions (the course's bottom-right causal
convention, `attention.causal_mask_np(L, M + L)`), so query i sits at position M + i and its
distance to key j is δ_ij = M + i − j ≥ 0. Distances below zero are the future: masked.

Read `rel_attention_np` first: the four terms, one gather per (i, j). `rel_attention_torch`
repeats it line for line. The modules (`model.py`) use the relative-shift fast path of
`fast.py`, which is tested equal to this explicit reference.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..attention import (
    causal_mask_np,
    causal_mask_torch,
    merge_heads_np,
    sinusoid_np,
    softmax_np,
    softmax_torch,
    split_heads_np,
)
from ..checks import (
    check_array,
    check_finite,
    check_number,
    check_same_device,
    check_same_dtype,
    check_size,
    describe,
    fail,
    shape_str,
)


# ============================================================================ input checks
def check_rel_inputs(q, k, v, r, u_bias, v_bias) -> None:
    """q (B, H, Lq, dh), k and v (B, H, Lk, dh), r (H, P, dh) with P >= Lk, biases (H, dh).

    Works on NumPy arrays and torch tensors alike: one library, one floating dtype, one device,
    finite (every key is seen by the last query, so nothing here is hidden by the mask).
    """
    like = torch.Tensor if isinstance(q, torch.Tensor) else np.ndarray
    arrays = dict(q=q, k=k, v=v, r=r, u_bias=u_bias, v_bias=v_bias)
    for name, x in arrays.items():
        check_array(name, x, "float", like=like)
    check_same_dtype(**arrays)
    check_same_device(**arrays)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        fail("q, k, v must be (B, H, N, dh)", "4-dimensional arrays",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    B, H, Lq, dh = q.shape
    if k.shape != v.shape or k.shape[:2] != (B, H) or k.shape[3] != dh:
        fail("k and v must match q's batch, heads and head size", f"(B={B}, H={H}, Lk, {dh})",
             f"k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    Lk = k.shape[2]
    if Lq == 0 or Lk < Lq or B == 0:
        fail("queries must be the last Lq of the Lk key positions (memory first)",
             "0 < Lq <= Lk and B > 0", f"Lq={Lq}, Lk={Lk}, B={B}")
    if r.ndim != 3 or r.shape[0] != H or r.shape[2] != dh:
        fail("r (projected relative encodings) has the wrong shape", f"(H={H}, P, {dh})",
             shape_str(r.shape))
    if r.shape[1] < Lk:
        fail("the relative-position table is too short", f"at least Lk = {Lk} distances "
             f"(0 .. {Lk - 1})", f"{r.shape[1]} rows")
    for name, b in (("u_bias", u_bias), ("v_bias", v_bias)):
        if tuple(b.shape) != (H, dh):
            fail(f"{name} has the wrong shape", f"(H, dh) = ({H}, {dh})", shape_str(b.shape))
    for name, x in dict(arrays, r=r[:, :Lk]).items():  # rows of r past Lk are never read
        check_finite(name, x)


def check_memory_update(memory, hidden, mem_len: int) -> int:
    """hidden (B, L, D); memory None or (B, M, D) of hidden's library, dtype and device;
    mem_len an integer >= 0. Returns mem_len."""
    check_array("hidden", hidden, "float", ndim=3, hint="(B, L, D)")
    if memory is not None:
        check_array("memory", memory, "float", ndim=3, hint="(B, M, D)", like=type(hidden)
                    if isinstance(hidden, torch.Tensor) else np.ndarray)
        if memory.shape[0] != hidden.shape[0] or memory.shape[2] != hidden.shape[2]:
            fail("memory", f"(B, M, D) = ({hidden.shape[0]}, M, {hidden.shape[2]}) like hidden",
                 describe(memory))
        check_same_dtype(memory=memory, hidden=hidden)
        check_same_device(memory=memory, hidden=hidden)
    return check_size("mem_len", mem_len)

# ============================================================================ NumPy reference
def relative_distances_np(n_queries: int, n_keys: int) -> np.ndarray:
    """(Lq, Lk) int: δ_ij = (Lk − Lq) + i − j, the distance from key j back to query i.

    Negative where j lies in query i's future (exactly where `causal_mask_np` is False).
    """
    n_queries, n_keys = check_size("n_queries", n_queries), check_size("n_keys", n_keys)
    i = np.arange(n_queries)[:, None] + (n_keys - n_queries)
    return i - np.arange(n_keys)[None, :]


def rel_attention_np(q, k, v, r, u_bias, v_bias, scale=None):
    """Relative-position causal attention, the four terms written out for every (i, j).

    Args:
        q: (B, H, Lq, dh) queries of the segment;  k, v: (B, H, Lk, dh) over [memory ; segment].
        r: (H, P, dh) projected encodings r_δ = W_R R_δ per head, row δ = distance δ, P >= Lk.
        u_bias, v_bias: (H, dh) the learned u and v of each head.
    Returns:
        output (B, H, Lq, dh) and weights (B, H, Lq, Lk).
    """
    check_rel_inputs(q, k, v, r, u_bias, v_bias)
    Lq, Lk = q.shape[2], k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else check_number("scale", scale)
    delta = relative_distances_np(Lq, Lk)  # (Lq, Lk)
    r_ij = r[:, np.maximum(delta, 0)]  # (H, Lq, Lk, dh): r_{i−j} gathered for every pair
    u = u_bias[None, :, None, :]  # (1, H, 1, dh): the same u for every batch row and query
    term_a = q @ np.swapaxes(k, -1, -2)  # q_iᵀ k_j           content
    term_b = np.einsum("bhid,hijd->bhij", q, r_ij)  # q_iᵀ r_{i−j}       content-dependent position
    term_c = u @ np.swapaxes(k, -1, -2)  # uᵀ k_j             global content bias
    term_d = np.einsum("hd,hijd->hij", v_bias, r_ij)[None]  # vᵀ r_{i−j}   global position bias
    scores = (term_a + term_b + term_c + term_d) * scale  # (B, H, Lq, Lk)
    weights = softmax_np(scores, causal_mask_np(Lq, Lk))  # future keys masked
    return weights @ v, weights


def rel_multi_head_attention_np(x, memory, params, num_heads, clamp_len=None):
    """Relative multi-head attention of one layer, the reference of `RelMultiHeadAttention`.

    Args:
        x: (B, L, D) the segment;  memory: (B, M, D) or None (M = 0).
        params: 'w_q', 'w_k', 'w_v', 'w_r', 'w_o' (D, D) stored as nn.Linear does (y = x @ w.T,
            no biases) and 'u_bias', 'v_bias' (H, dh) — see `RelMultiHeadAttention.numpy_params`.
        clamp_len: None, or c: distances beyond c are encoded as c (`sinusoid_np`).
    Returns:
        output (B, L, D) and weights (B, H, L, M + L).
    """
    check_rel_params(params)
    D = params["w_q"].shape[1]
    check_layer_inputs(x, memory, D, num_heads, dtype=params["w_q"].dtype)
    context = x if memory is None else np.concatenate([memory, x], axis=1)  # (B, M + L, D)
    q = split_heads_np(x @ params["w_q"].T, num_heads)  # (B, H, L, dh)
    k = split_heads_np(context @ params["w_k"].T, num_heads)  # (B, H, M + L, dh)
    v = split_heads_np(context @ params["w_v"].T, num_heads)
    R = sinusoid_np(context.shape[1], D, clamp_len)  # (M + L, D): distances 0 .. M + L − 1
    r = split_heads_np((R @ params["w_r"].T)[None], num_heads)[0]  # (H, M + L, dh)
    heads, weights = rel_attention_np(q, k, v, r, params["u_bias"], params["v_bias"])
    return merge_heads_np(heads) @ params["w_o"].T, weights


def update_memory_np(memory, hidden, mem_len: int):
    """The next memory: the last `mem_len` positions of [memory ; hidden] (B, ·, D).

    memory may be None (the first segment). mem_len = 0 keeps nothing: (B, 0, D).
    """
    mem_len = check_memory_update(memory, hidden, mem_len)
    # BEGIN EXERCISE 4.2 implement: the memory update, last mem_len of [memory ; hidden] (~5 min)
    both = hidden if memory is None else np.concatenate([memory, hidden], axis=1)
    start = max(both.shape[1] - mem_len, 0)  # not both[:, -mem_len:]: -0 would keep everything
    return both[:, start:]
    # END EXERCISE


REL_PARAMS = ("w_q", "w_k", "w_v", "w_r", "w_o", "u_bias", "v_bias")


def check_rel_params(params) -> None:
    """The arrays of `RelMultiHeadAttention.numpy_params()`: (D, D) weights, (H, dh) biases."""
    if not isinstance(params, dict) or any(n not in params for n in REL_PARAMS):
        missing = [n for n in REL_PARAMS if n not in params] if isinstance(params, dict) else []
        fail("params", f"a dict with {', '.join(REL_PARAMS)} "
             "(RelMultiHeadAttention.numpy_params())",
             f"a dict without {missing}" if missing else describe(params))
    for name in REL_PARAMS:
        check_array(f"params['{name}']", params[name], "float", ndim=2, like=np.ndarray)
        check_finite(f"params['{name}']", params[name])
    D = params["w_q"].shape[1]
    for name in REL_PARAMS[:5]:
        if params[name].shape != (D, D):
            fail(f"params['{name}']", f"shape ({D}, {D})", shape_str(params[name].shape))


def check_layer_inputs(x, memory, d_model: int, num_heads: int, dtype=None) -> None:
    """x (B, L, D) and memory (B, M, D) or None; shared by NumPy and torch. dtype: the
    weights' dtype, which the inputs must have."""
    num_heads = check_size("num_heads", num_heads, 1)
    check_array("x", x, "float", hint="(B, L, D)")
    if memory is not None:
        check_array("memory", memory, "float", hint="(B, M, D)", like=torch.Tensor
                    if isinstance(x, torch.Tensor) else np.ndarray)
    if x.ndim != 3 or x.shape[-1] != d_model or x.shape[0] == 0 or x.shape[1] == 0:
        fail("the segment has the wrong shape", f"(B, L, {d_model}) with B, L > 0",
             shape_str(x.shape))
    if memory is not None:
        if memory.ndim != 3 or memory.shape[0] != x.shape[0] or memory.shape[2] != d_model:
            fail("the memory does not fit the segment", f"(B={x.shape[0]}, M, D={d_model})",
                 shape_str(memory.shape))
        check_same_device(x=x, memory=memory)
        check_same_dtype(x=x, memory=memory)
    if d_model % num_heads or d_model % 2:
        fail("d_model must split evenly into heads and be even", "d_model % num_heads == 0",
             f"d_model={d_model}, num_heads={num_heads}")
    if dtype is not None and x.dtype != dtype:
        fail("x", f"dtype {str(dtype).removeprefix('torch.')}, the weights' (cast the inputs "
             "or the module)", describe(x))
    check_finite("x", x)
    if memory is not None:
        check_finite("memory", memory)


# ============================================================================ PyTorch twin
def relative_distances_torch(n_queries: int, n_keys: int, device=None) -> torch.Tensor:
    """Torch twin of `relative_distances_np`."""
    n_queries, n_keys = check_size("n_queries", n_queries), check_size("n_keys", n_keys)
    i = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)
    return i - torch.arange(n_keys, device=device)[None, :]


def rel_attention_torch(q, k, v, r, u_bias, v_bias, scale=None):
    """Torch twin of `rel_attention_np` (explicit gather; `fast.py` has the fast path)."""
    check_rel_inputs(q, k, v, r, u_bias, v_bias)
    Lq, Lk = q.shape[2], k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else check_number("scale", scale)
    delta = relative_distances_torch(Lq, Lk, device=q.device)  # (Lq, Lk)
    r_ij = r[:, delta.clamp(min=0)]  # (H, Lq, Lk, dh)
    u = u_bias[None, :, None, :]
    term_a = q @ k.transpose(-1, -2)
    term_b = torch.einsum("bhid,hijd->bhij", q, r_ij)
    term_c = u @ k.transpose(-1, -2)
    term_d = torch.einsum("hd,hijd->hij", v_bias, r_ij)[None]
    scores = (term_a + term_b + term_c + term_d) * scale
    weights = softmax_torch(scores, causal_mask_torch(Lq, Lk, device=q.device))
    return weights @ v, weights


def update_memory_torch(memory, hidden, mem_len: int):
    """Torch twin of `update_memory_np`; the result is detached: no gradient reaches it (SG)."""
    mem_len = check_memory_update(memory, hidden, mem_len)
    # BEGIN EXERCISE 4.2 implement: the memory update, last mem_len of [memory ; hidden] (~5 min)
    both = hidden if memory is None else torch.cat([memory, hidden], dim=1)
    start = max(both.shape[1] - mem_len, 0)
    return both[:, start:].detach()
    # END EXERCISE
