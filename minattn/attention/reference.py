"""Scaled dot-product attention and multi-head attention — NumPy reference, then PyTorch.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d + M) V

    q: (..., Lq, d)    k: (..., Lk, d)    v: (..., Lk, dv)    mask: broadcastable to (..., Lq, Lk)
    output: (..., Lq, dv)                 weights: (..., Lq, Lk)

The mask is boolean, True = "may attend". Masked scores become -inf before the softmax; a
query row with no allowed key gets zero weights and a zero output (not NaN), in the forward
and in the backward pass. A float mask is refused: PyTorch uses both 0/1 and additive 0/−inf
float masks, and reading one as the other silently moves the weight onto the masked keys
(convert: `additive == 0`, `zero_one > 0`). Whatever the mask hides — the queries of a row
that sees no key, the keys and values no query sees, the scores of masked pairs — may hold
garbage (NaN, inf: padding often does) and never reaches a result; everything it lets count
must be finite (`tools.utils` states the contract of every function).

`online_attention_np` computes the same output block by block with a running max and sum
(the online softmax of fused kernels), never storing the weights.

Read the NumPy functions first: they state the math. Each `*_torch` function below repeats
its NumPy twin line for line, so autograd can check our hand-written backward.

The input checks are in `checks.py`; `attention_fast_torch` (PyTorch's fused kernel, no
weights) in `fast.py`; the trainable `MultiHeadAttention` and lesson 01's demo models in
`model.py`; lesson 01's tasks in `data.py`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..checks import (
    check_array,
    check_finite,
    check_same_dtype,
    check_size,
    describe,
    fail,
    shape_str,
)
from .checks import (
    check_additive_inputs,
    check_attention_inputs,
    check_heads,
    check_lengths,
    check_mha_inputs,
    check_mha_params,
    check_softmax_inputs,
    check_table_sizes,
    visible_inputs,
    visible_mha_inputs,
)


# ============================================================================ NumPy reference
def softmax_np(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis, stable for any finite input, with an optional boolean mask.

    softmax(x)_j = exp(x_j - m) / Σ_j' exp(x_j' - m),  m = max_j x_j   (m cancels, overflow doesn't)

    Masked entries (mask False) get weight 0. A row with every entry masked gets all zeros.
    """
    check_softmax_inputs(scores, mask, np.ndarray)
    # BEGIN EXERCISE 1.1 implement: stable masked softmax over the last axis (~15 min)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # an all-masked row has max -inf
    exp = np.exp(scores - row_max)  # exp(-inf) = 0: masked entries vanish
    total = exp.sum(axis=-1, keepdims=True)
    return exp / np.where(total == 0.0, 1.0, total)  # 0 / 1 = 0 for all-masked rows
    # END EXERCISE


def attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None,
                 scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention.

    Args:
        q: (..., Lq, d) queries;  k: (..., Lk, d) keys;  v: (..., Lk, dv) values.
        mask: bool, broadcastable to (..., Lq, Lk); True = may attend.
        scale: multiplies the scores; default 1/√d.
    Returns:
        output (..., Lq, dv) and weights (..., Lq, Lk).
    """
    check_attention_inputs(q, k, v, mask, scale)
    q, k, v = visible_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # BEGIN EXERCISE 1.2 implement: scores, masked softmax, weighted sum of values (~10 min)
    scores = (q @ np.swapaxes(k, -1, -2)) * scale  # (..., Lq, Lk)
    weights = softmax_np(scores, mask)  # (..., Lq, Lk), rows sum to 1 (or 0)
    output = weights @ v  # (..., Lq, dv)
    return output, weights
    # END EXERCISE


def online_attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                        mask: np.ndarray | None = None, scale: float | None = None,
                        block: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """`attention_np`'s output, computed over blocks of `block` keys with an *online softmax*:
    the (Lq, Lk) weights are never stored (Milakov & Gimelshein 2018; FlashAttention's forward).

    Per query row it keeps a running max m, a running sum ℓ of e^(s − m) and an unnormalised
    output O. For each block of keys, with scores S_b and m' = max(m, rowmax S_b):
        ℓ ← ℓ·e^(m − m') + rowsum e^(S_b − m'),    O ← O·e^(m − m') + e^(S_b − m') V_b
    (e^(m − m') rescales what was summed against the old max). Finally O/ℓ. Also returns the
    row statistic a fused backward keeps instead of P: lse = m + log ℓ (..., Lq), so that
    P = e^(S − lse); −inf on a row that sees no key (whose output is 0).
    """
    check_attention_inputs(q, k, v, mask, scale)
    block = check_size("block", block, 1)
    q, k, v = visible_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if mask is not None:
        mask = np.broadcast_to(mask, q.shape[:-1] + k.shape[-2:-1])  # (..., Lq, Lk)
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=q.dtype)  # (..., Lq, 1) running max
    ell = np.zeros(q.shape[:-1] + (1,), dtype=q.dtype)  # (..., Lq, 1) running sum
    out = np.zeros(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)  # (..., Lq, dv) unnormalised
    for start in range(0, k.shape[-2], block):
        keys = slice(start, start + block)
        s = (q @ np.swapaxes(k[..., keys, :], -1, -2)) * scale  # (..., Lq, b)
        if mask is not None:
            s = np.where(mask[..., keys], s, -np.inf)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        shift = np.where(np.isfinite(m_new), m_new, 0.0)  # a row with no key so far: any shift
        p = np.exp(s - shift)  # (..., Lq, b), masked entries 0
        rescale = np.exp(m - shift)  # e^(m − m'): 0 on the first block a row sees
        ell = ell * rescale + p.sum(axis=-1, keepdims=True)
        out = out * rescale + p @ v[..., keys, :]
        m = m_new
    lse = np.where(ell > 0, m + np.log(np.where(ell > 0, ell, 1.0)), -np.inf)[..., 0]
    return out / np.where(ell == 0, 1.0, ell), lse


def attention_backward_np(grad_out: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                          mask: np.ndarray | None = None, scale: float | None = None
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of a scalar loss w.r.t. q, k, v, given grad_out = ∂loss/∂output (..., Lq, dv).

    With S = scale·QKᵀ, P = softmax(S), O = PV and G = ∂loss/∂O:
        ∂V = Pᵀ G
        ∂P = G Vᵀ
        ∂S = P ⊙ (∂P − rowsum(∂P ⊙ P))      (the softmax Jacobian, applied row by row)
        ∂Q = scale · ∂S K        ∂K = scale · ∂Sᵀ Q
    Masked entries have P = 0, so ∂S = 0 there: no gradient flows through a masked edge.
    """
    check_attention_inputs(q, k, v, mask, scale)
    check_array("grad_out", grad_out, "float", like=np.ndarray)
    if grad_out.shape != q.shape[:-1] + (v.shape[-1],):
        fail("grad_out must have the output's shape", shape_str(q.shape[:-1] + (v.shape[-1],)),
             shape_str(grad_out.shape))
    check_same_dtype(q=q, grad_out=grad_out)
    check_finite("grad_out", grad_out)
    q, k, v = visible_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    _, weights = attention_np(q, k, v, mask, scale)  # recompute P (as FlashAttention does)
    # BEGIN EXERCISE 1.3 implement: attention backward: dq, dk, dv from grad_out (~30 min)
    grad_v = np.swapaxes(weights, -1, -2) @ grad_out  # (..., Lk, dv)
    grad_weights = grad_out @ np.swapaxes(v, -1, -2)  # (..., Lq, Lk)
    row_dot = (grad_weights * weights).sum(axis=-1, keepdims=True)  # (..., Lq, 1)
    grad_scores = weights * (grad_weights - row_dot)  # (..., Lq, Lk)
    grad_q = scale * grad_scores @ k  # (..., Lq, d)
    grad_k = scale * np.swapaxes(grad_scores, -1, -2) @ q  # (..., Lk, d)
    # END EXERCISE
    return grad_q, grad_k, grad_v


def additive_scores_np(q: np.ndarray, k: np.ndarray, w_q: np.ndarray, w_k: np.ndarray,
                       v_a: np.ndarray) -> np.ndarray:
    """Additive (Bahdanau) scores: s_ij = v_aᵀ tanh(W_q q_i + W_k k_j), a small MLP per pair.

    q: (..., Lq, dq), k: (..., Lk, dk) — the sizes may differ; w_q: (h, dq), w_k: (h, dk),
    v_a: (h,). Returns scores (..., Lq, Lk), to feed to `softmax_np` like q·k/√d. Unlike a dot
    product it needs an (Lq, Lk, h) intermediate — one reason dot-product attention won.
    """
    check_additive_inputs(q, k, w_q, w_k, v_a)
    hidden = (q @ w_q.T)[..., :, None, :] + (k @ w_k.T)[..., None, :, :]  # (..., Lq, Lk, h)
    return np.tanh(hidden) @ v_a  # (..., Lq, Lk)


def split_heads_np(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, N, H·dh) -> (B, H, N, dh)."""
    num_heads = check_heads(x, num_heads, np.ndarray)
    B, N, D = x.shape
    return x.reshape(B, N, num_heads, D // num_heads).transpose(0, 2, 1, 3)


def merge_heads_np(x: np.ndarray) -> np.ndarray:
    """(B, H, N, dh) -> (B, N, H·dh)."""
    check_array("x", x, None, ndim=4, hint="(B, H, N, dh)", like=np.ndarray)
    B, H, N, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * dh)


def multi_head_attention_np(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                            params: dict[str, np.ndarray], num_heads: int,
                            mask: np.ndarray | None = None,
                            key_padding_mask: np.ndarray | None = None
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head attention, the NumPy reference of `MultiHeadAttention`.

    MHA(X_q, X_k, X_v) = concat_h(Attention(X_q W_qʰ, X_k W_kʰ, X_v W_vʰ)) W_o

    Args:
        query: (B, Lq, D);  key, value: (B, Lk, D).
        params: 'w_q', 'w_k', 'w_v', 'w_o' of shape (D, D) stored as torch's nn.Linear does
            (y = x @ w.T + b), and biases 'b_q', 'b_k', 'b_v', 'b_o' (D,) — see
            `MultiHeadAttention.numpy_params()`.
        mask: bool, (Lq, Lk) or broadcastable to (B, H, Lq, Lk); True = may attend.
        key_padding_mask: bool (B, Lk), True on real keys. See `check_mha_inputs` for why a
            (B, Lk) padding mask goes here and not in `mask`.
    Returns:
        output (B, Lq, D) and per-head weights (B, H, Lq, Lk).
    """
    check_mha_params(params, query)
    mask = check_mha_inputs(query, key, value, num_heads, params["w_q"].shape[1], mask,
                            key_padding_mask, dtype=params["w_q"].dtype)
    query, key, value = visible_mha_inputs(query, key, value, mask)
    q = split_heads_np(query @ params["w_q"].T + params["b_q"], num_heads)  # (B, H, Lq, dh)
    k = split_heads_np(key @ params["w_k"].T + params["b_k"], num_heads)  # (B, H, Lk, dh)
    v = split_heads_np(value @ params["w_v"].T + params["b_v"], num_heads)  # (B, H, Lk, dh)
    heads, weights = attention_np(q, k, v, mask)
    output = merge_heads_np(heads) @ params["w_o"].T + params["b_o"]  # (B, Lq, D)
    return output, weights


# ============================================================================ PyTorch
def softmax_torch(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Torch twin of `softmax_np` (differentiable; all-masked rows give zeros, no NaN)."""
    check_softmax_inputs(scores, mask, torch.Tensor)
    # BEGIN EXERCISE 1.1 implement: the same softmax in torch, line for line (~5 min)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True).detach()  # m cancels: no gradient needed
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(scores - row_max)
    total = exp.sum(dim=-1, keepdim=True)
    return exp / torch.where(total == 0, torch.ones_like(total), total)
    # END EXERCISE


def attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    mask: torch.Tensor | None = None, scale: float | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of `attention_np`: returns output (..., Lq, dv) and weights (..., Lq, Lk).

    This explicit path materialises the (Lq, Lk) weights — use it when you want to look at
    them. `attention_fast_torch` (fast.py) gives the same output without storing them.
    """
    check_attention_inputs(q, k, v, mask, scale, like=torch.Tensor)
    q, k, v = visible_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # BEGIN EXERCISE 1.2 implement: the same attention forward in torch (~5 min)
    scores = (q @ k.transpose(-1, -2)) * scale  # (..., Lq, Lk)
    weights = softmax_torch(scores, mask)
    return weights @ v, weights
    # END EXERCISE


def online_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           mask: torch.Tensor | None = None, scale: float | None = None,
                           block: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of `online_attention_np`: output (..., Lq, dv) and lse (..., Lq), block by
    block with a running max and sum, never storing the (Lq, Lk) weights."""
    check_attention_inputs(q, k, v, mask, scale)
    block = check_size("block", block, 1)
    q, k, v = visible_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if mask is not None:
        mask = mask.expand(q.shape[:-1] + k.shape[-2:-1])  # (..., Lq, Lk)
    m = q.new_full(q.shape[:-1] + (1,), float("-inf"))
    ell = q.new_zeros(q.shape[:-1] + (1,))
    out = q.new_zeros(q.shape[:-1] + v.shape[-1:])
    for start in range(0, k.shape[-2], block):
        keys = slice(start, start + block)
        s = (q @ k[..., keys, :].transpose(-1, -2)) * scale
        if mask is not None:
            s = s.masked_fill(~mask[..., keys], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True).detach())  # m cancels in O/ℓ
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(s - shift)
        rescale = torch.exp(m - shift)
        ell = ell * rescale + p.sum(dim=-1, keepdim=True)
        out = out * rescale + p @ v[..., keys, :]
        m = m_new
    lse = torch.where(ell > 0, m + torch.log(torch.where(ell > 0, ell, torch.ones_like(ell))),
                      torch.full_like(ell, float("-inf")))[..., 0]
    return out / torch.where(ell == 0, torch.ones_like(ell), ell), lse


def additive_scores_torch(q: torch.Tensor, k: torch.Tensor, w_q: torch.Tensor,
                          w_k: torch.Tensor, v_a: torch.Tensor) -> torch.Tensor:
    """Torch twin of `additive_scores_np`: v_aᵀ tanh(W_q q_i + W_k k_j) -> (..., Lq, Lk)."""
    check_additive_inputs(q, k, w_q, w_k, v_a)
    hidden = (q @ w_q.T)[..., :, None, :] + (k @ w_k.T)[..., None, :, :]  # (..., Lq, Lk, h)
    return torch.tanh(hidden) @ v_a  # (..., Lq, Lk)


def split_heads_torch(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, N, H·dh) -> (B, H, N, dh)."""
    num_heads = check_heads(x, num_heads, torch.Tensor)
    B, N, D = x.shape
    return x.view(B, N, num_heads, D // num_heads).transpose(1, 2)


def merge_heads_torch(x: torch.Tensor) -> torch.Tensor:
    """(B, H, N, dh) -> (B, N, H·dh)."""
    check_array("x", x, None, ndim=4, hint="(B, H, N, dh)", like=torch.Tensor)
    B, H, N, dh = x.shape
    return x.transpose(1, 2).reshape(B, N, H * dh)


# ============================================================================ mask helpers
def causal_mask_np(n_queries: int, n_keys: int | None = None) -> np.ndarray:
    """(Lq, Lk) bool, True where key j <= query i, bottom-right aligned: when Lk > Lq the
    queries are the last Lq of the Lk positions (a cache of earlier keys is prepended), so
    query i sits at position i + (Lk - Lq)."""
    n_queries = check_size("n_queries", n_queries)
    n_keys = n_queries if n_keys is None else check_size("n_keys", n_keys)
    i = np.arange(n_queries)[:, None] + (n_keys - n_queries)
    j = np.arange(n_keys)[None, :]
    return j <= i


def causal_mask_torch(n_queries: int, n_keys: int | None = None, device=None) -> torch.Tensor:
    """Torch twin of `causal_mask_np` (bottom-right aligned), made on `device`."""
    n_queries = check_size("n_queries", n_queries)
    n_keys = n_queries if n_keys is None else check_size("n_keys", n_keys)
    i = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)
    j = torch.arange(n_keys, device=device)[None, :]
    return j <= i


def padding_mask_np(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """(B,) lengths -> (B, 1, 1, max_len) bool, True on real tokens; broadcasts over heads
    and queries."""
    lengths = np.asarray(lengths) if isinstance(lengths, (list, tuple)) else lengths
    max_len = check_lengths(lengths, max_len, np.ndarray)
    keys = np.arange(max_len)
    return (keys[None, :] < np.asarray(lengths)[:, None])[:, None, None, :]


def padding_mask_torch(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Torch twin of `padding_mask_np`."""
    max_len = check_lengths(lengths, max_len, torch.Tensor)
    keys = torch.arange(max_len, device=lengths.device)
    return (keys[None, :] < lengths[:, None])[:, None, None, :]


# ============================================================================ positions
# Vaswani et al. 2017, "Attention Is All You Need", §3.5: lesson 01's position table, which
# Transformer-XL (lesson 04) reuses to encode distances.
def sinusoid_np(n_positions: int, d_model: int, clamp_len: int | None = None) -> np.ndarray:
    """(n_positions, d_model) table R: row δ encodes the position (lesson 01) or the distance
    (lesson 04) δ = 0, 1, ...

    R_δ = [sin(δ ω_0), …, sin(δ ω_{D/2−1}), cos(δ ω_0), …, cos(δ ω_{D/2−1})],  ω_k = 10000^(−2k/D)
    (sines then cosines, the layout of Transformer-XL's original implementation).
    clamp_len = c: every distance beyond c gets the row of c, R_δ = R_min(δ, c) — the original
    code's `--clamp_len`, used when a model is evaluated with a longer memory than it was
    trained with, so that it never meets an encoding it has not seen.
    """
    n_positions, d_model = check_table_sizes(n_positions, d_model, clamp_len)
    inv_freq = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)  # (D/2,)
    delta = np.arange(n_positions)
    if clamp_len is not None:
        delta = np.minimum(delta, clamp_len)
    angles = delta[:, None] * inv_freq[None, :]  # (P, D/2)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)


def sinusoid_torch(n_positions: int, d_model: int, device=None, dtype=torch.float32,
                   clamp_len: int | None = None):
    """Torch twin of `sinusoid_np`, made on `device` in `dtype`."""
    n_positions, d_model = check_table_sizes(n_positions, d_model, clamp_len)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        fail("dtype", "a floating torch dtype such as torch.float32", describe(dtype))
    inv_freq = 1.0 / 10000 ** (torch.arange(0, d_model, 2, device=device, dtype=dtype) / d_model)
    delta = torch.arange(n_positions, device=device, dtype=dtype)
    if clamp_len is not None:
        delta = delta.clamp(max=clamp_len)
    angles = delta[:, None] * inv_freq[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
