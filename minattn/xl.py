"""Transformer-XL (Dai et al. 2019): segment recurrence and relative positions — NumPy
reference, then its PyTorch twin, then the modules.

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
repeats it line for line. The modules use the relative-shift fast path of `xl_fast.py`, which
is tested equal to this explicit reference.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .attention import (causal_mask_np, causal_mask_torch, check_table_sizes,
                        merge_heads_np, merge_heads_torch, sinusoid_np, sinusoid_torch, softmax_np,
                        softmax_torch, split_heads_np, split_heads_torch)
from .tools.utils import (check_array, check_finite, check_ids, check_number, check_same_device,
                          check_same_dtype, check_size, describe, fail, shape_str)


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
    # BEGIN EXERCISE 4.2 implement: the memory update — keep the last mem_len states of [memory ; hidden] (~5 min)
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
    """Torch twin of `rel_attention_np` (explicit gather; `xl_fast` has the fast path)."""
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
    # BEGIN EXERCISE 4.2 implement: the memory update — keep the last mem_len states of [memory ; hidden] (~5 min)
    both = hidden if memory is None else torch.cat([memory, hidden], dim=1)
    start = max(both.shape[1] - mem_len, 0)
    return both[:, start:].detach()
    # END EXERCISE


# ============================================================================ modules
class RelMultiHeadAttention(nn.Module):
    """Relative multi-head attention over [memory ; segment], twin of `rel_multi_head_attention_np`.

    forward(x (B, L, D), memory (B, M, D) or None, need_weights=False, clamp_len=None)
        -> output (B, L, D), weights (B, H, L, M + L) or None

    need_weights=True runs the explicit `rel_attention_torch`; otherwise the relative-shift
    fast path `xl_fast.rel_attention_fast_torch` (same numbers, no O(L·(M+L)·dh) gather).
    The original implementation fuses q, k, v into one `qkv_net` and shares u, v between
    layers; here each layer has its own (see `xl_fast.from_official_state_dict`).
    """

    def __init__(self, d_model: int, num_heads: int, max_len: int = 4096):
        super().__init__()
        d_model, num_heads = check_size("d_model", d_model, 1), check_size("num_heads", num_heads, 1)
        max_len = check_size("max_len", max_len, 1)
        if d_model % num_heads or d_model % 2:
            fail("d_model must split evenly into heads and be even", "d_model % num_heads == 0",
                 f"d_model={d_model}, num_heads={num_heads}")
        self.d_model, self.num_heads, self.max_len = d_model, num_heads, max_len
        dh = d_model // num_heads
        self.q_proj, self.k_proj, self.v_proj, self.r_proj, self.out_proj = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(5))
        self.u_bias = nn.Parameter(torch.zeros(num_heads, dh))  # u: content bias
        self.v_bias = nn.Parameter(torch.zeros(num_heads, dh))  # v: position bias

    def forward(self, x, memory=None, need_weights: bool = False, clamp_len: int | None = None):
        check_layer_inputs(x, memory, self.d_model, self.num_heads, dtype=self.q_proj.weight.dtype)
        check_same_device(x=x, memory=memory, weights=self.q_proj.weight)
        context = x if memory is None else torch.cat([memory, x], dim=1)  # (B, M + L, D)
        Lk = context.shape[1]
        if Lk > self.max_len:
            fail("more positions than the relative-position table holds",
                 f"M + L <= max_len = {self.max_len}", f"M + L = {Lk}")
        q = split_heads_torch(self.q_proj(x), self.num_heads)  # (B, H, L, dh)
        k = split_heads_torch(self.k_proj(context), self.num_heads)  # (B, H, M + L, dh)
        v = split_heads_torch(self.v_proj(context), self.num_heads)
        R = sinusoid_torch(Lk, self.d_model, x.device, x.dtype, clamp_len)  # (M + L, D)
        r = split_heads_torch(self.r_proj(R)[None], self.num_heads)[0]  # (H, M + L, dh)
        if need_weights:
            heads, weights = rel_attention_torch(q, k, v, r, self.u_bias, self.v_bias)
        else:
            from .xl_fast import rel_attention_fast_torch  # (xl_fast imports this file)
            heads, weights = rel_attention_fast_torch(q, k, v, r, self.u_bias, self.v_bias), None
        return self.out_proj(merge_heads_torch(heads)), weights

    def numpy_params(self) -> dict:
        """The weights as float64 NumPy arrays, keyed as `rel_multi_head_attention_np` expects."""
        get = lambda t: t.detach().cpu().double().numpy()  # noqa: E731
        params = {f"w_{s}": get(getattr(self, f"{s}_proj").weight) for s in "qkvr"}
        params.update(w_o=get(self.out_proj.weight), u_bias=get(self.u_bias),
                      v_bias=get(self.v_bias))
        return params


class XLLayer(nn.Module):
    """One Transformer-XL layer: relative attention over [memory ; x], then a ReLU FFN.

    pre_norm=True:  x + Attn(LN(x), LN(mem)), then x + FFN(LN(x))   (trains easily when small)
    pre_norm=False: LN(x + Attn(x, mem)),     then LN(x + FFN(x))   (the paper's layout)
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, pre_norm: bool = True,
                 max_len: int = 4096):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = RelMultiHeadAttention(d_model, num_heads, max_len)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, memory=None, need_weights: bool = False, clamp_len: int | None = None):
        if self.pre_norm:
            mem = None if memory is None else self.norm1(memory)
            out, weights = self.attention(self.norm1(x), mem, need_weights, clamp_len)
            x = x + out
            return x + self.ff(self.norm2(x)), weights
        out, weights = self.attention(x, memory, need_weights, clamp_len)
        x = self.norm1(x + out)
        return self.norm2(x + self.ff(x)), weights


class TransformerXL(nn.Module):
    """A Transformer-XL language model: embedding (×√D), L `XLLayer`s, tied output.

    forward(tokens (B, L), memories=None, mem_len=None, need_weights=False, clamp_len=None,
            stop_gradient=True) -> logits (B, L, V), new memories (, weights per layer)

    `memories` is a list with one (B, M, D) tensor per layer (the inputs that layer saw in the
    previous segments), or None at the start of a text. The returned memories are detached
    (the paper's stop-gradient SG); feed them to the next call. `mem_len` overrides the memory
    length (e.g. longer at evaluation than in training); `clamp_len` (default: the one given
    to the constructor, None = no clamping) encodes every distance beyond it as that distance,
    as the original code's `--clamp_len`. `stop_gradient=False` leaves the new memories in
    the graph, for an experiment that back-propagates into the previous segment.

    Layers are pre-norm by default (LayerNorm before attention and FFN, and once at the end),
    which trains small models without a warm-up; `pre_norm=False` is the paper's post-norm.
    """

    def __init__(self, vocab_size: int, d_model: int = 128, num_heads: int = 4,
                 num_layers: int = 2, d_ff: int | None = None, mem_len: int = 64,
                 pre_norm: bool = True, max_len: int = 4096, clamp_len: int | None = None):
        super().__init__()
        vocab_size, d_model = check_size("vocab_size", vocab_size, 1), check_size("d_model", d_model, 1)
        num_layers, mem_len = check_size("num_layers", num_layers, 1), check_size("mem_len", mem_len)
        if d_ff is not None:
            d_ff = check_size("d_ff", d_ff, 1)
        check_table_sizes(0, d_model, clamp_len)
        self.d_model, self.mem_len, self.vocab_size = d_model, mem_len, vocab_size
        self.clamp_len = clamp_len
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)  # ×√D below: unit scale
        self.layers = nn.ModuleList(XLLayer(d_model, num_heads, d_ff or 4 * d_model, pre_norm,
                                            max_len) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, tokens, memories=None, mem_len: int | None = None,
                need_weights: bool = False, clamp_len: int | None = None,
                stop_gradient: bool = True):
        mem_len = self.mem_len if mem_len is None else check_size("mem_len", mem_len)
        clamp_len = self.clamp_len if clamp_len is None else clamp_len
        if memories is None:
            memories = [None] * len(self.layers)
        if not isinstance(memories, (list, tuple)) or len(memories) != len(self.layers):
            fail("memories", f"a list with one memory per layer ({len(self.layers)}), or None",
                 describe(memories))
        check_array("tokens", tokens, "int", ndim=2, hint="(B, L) token ids", like=torch.Tensor)
        check_ids("tokens", tokens, self.vocab_size)
        for memory in memories:
            if memory is not None and (not isinstance(memory, torch.Tensor) or memory.ndim != 3
                                       or memory.shape[0] != tokens.shape[0]
                                       or memory.shape[2] != self.d_model):
                fail("memories", f"None or (B, M, D) = ({tokens.shape[0]}, M, {self.d_model}) "
                     "tensors, as the last call returned them", describe(memory))
        check_same_device(tokens=tokens, weights=self.embedding.weight)
        h = self.embedding(tokens) * math.sqrt(self.d_model)  # (B, L, D)
        new_memories, all_weights = [], []
        for layer, memory in zip(self.layers, memories):
            kept = update_memory_torch(memory, h, mem_len)  # what layer n saw, detached (SG)
            if not stop_gradient:  # the same states, left in the graph
                both = h if memory is None else torch.cat([memory, h], dim=1)
                kept = both[:, both.shape[1] - kept.shape[1]:]
            new_memories.append(kept)
            h, weights = layer(h, memory, need_weights, clamp_len)
            all_weights.append(weights)
        h = self.final_norm(h)
        logits = h @ self.embedding.weight.T + self.out_bias  # tied input/output embedding
        return (logits, new_memories, all_weights) if need_weights else (logits, new_memories)
