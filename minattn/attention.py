"""Scaled dot-product and multi-head attention (lesson 01): the NumPy reference, its torch twin
line for line, then the trainable `MultiHeadAttention` and lesson 01's small demo models.

Vaswani et al., "Attention Is All You Need" (2017), §3.2:

    Attention(Q, K, V) = softmax(Q Kᵀ / √d + M) V                         (§3.2.1, eq. 1)
    MultiHead(X_q, X_k, X_v) = [head_1; …; head_H] W_O,
        head_h = Attention(X_q W_Qʰ, X_k W_Kʰ, X_v W_Vʰ)                    (§3.2.2)
    PE(p, 2k) = sin(p ω_k),  PE(p, 2k + 1) = cos(p ω_k),  ω_k = 10000^(−2k/D)    (§3.5)
        (we store the sines first, then the cosines: the same table, columns permuted)

Shapes: q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv), mask broadcastable to (..., Lq, Lk);
output (..., Lq, dv), weights (..., Lq, Lk). Multi-head inputs are (B, N, D), heads
(B, H, N, dh) with dh = D/H.

Conventions (the course's, stated once):
  * masks are bool, True = "may attend" (PyTorch SDPA's convention). Masked scores become −inf
    before the softmax; a query row with no allowed key gets zero weights and a zero output,
    not NaN, forward and backward. A float mask is refused: 0/1 and additive 0/−inf float
    masks are both in use, and reading one as the other moves the weight onto the masked keys
    (convert: `additive == 0`, `zero_one > 0`);
  * what a mask hides (the queries of a row that sees no key, keys no query sees) may hold
    garbage (NaN in padding) and never reaches a result;
  * causal masks are bottom-right aligned: with Lk > Lq the queries are the last Lq positions.

Every public function checks its inputs first (`@checked(...)`, minattn/contract.py; the rules
a spec cannot say are in minattn/checks.py, section "attention") and refuses bad input with
ValueError("<argument>: expected ..., got ..."); the body starts with the math.

`online_attention_np` computes the same output block by block with a running max and sum (the
online softmax of FlashAttention's forward), `attention_backward_np` the gradients by hand.
PyTorch's fused kernel is `MultiHeadAttention`'s `flash` branch below, and
`minattn.fast.attention.attention_fast_torch` for a caller who wants it as a function.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import checks as c
from .checks import POSITIONS
from .contract import checked, hide


# ============================================================================ NumPy reference
@checked(scores="float* (..., N)", mask="bool? ~(..., N)", rules=[c.scores_count_where_allowed])
def softmax_np(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis, stable for any finite input, with an optional boolean mask.

    softmax(x)_j = exp(x_j - m) / Σ_j' exp(x_j' - m),  m = max_j x_j   (m cancels, overflow doesn't)

    Masked entries (mask False) get weight 0. A row with every entry masked gets all zeros.
    """
    # BEGIN EXERCISE 1.1 implement: stable masked softmax over the last axis (~15 min)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # an all-masked row has max -inf
    exp = np.exp(scores - row_max)  # exp(-inf) = 0: masked entries vanish
    total = exp.sum(axis=-1, keepdims=True)
    return exp / np.where(total == 0.0, 1.0, total)  # 0 / 1 = 0 for all-masked rows
    # END EXERCISE


def hide_unseen(q, k, v, mask):
    """q, k, v with what `mask` hides set to 0: the queries of rows that see no key, the keys
    and values no query sees (NumPy or torch). What a mask hides may hold garbage (NaN in
    padding): it is selected away (`hide`), since multiplying it by a weight of 0 keeps NaN."""
    if mask is None:
        return q, k, v
    rows_seen = mask.any(-1)[..., None]  # (..., Lq, 1): the query sees some key
    keys_seen = mask.any(-2)[..., None]  # (..., Lk, 1): some query sees the key
    return hide(q, rows_seen), hide(k, keys_seen), hide(v, keys_seen)


def hide_unseen_tokens(query, key, value, mask):
    """`hide_unseen` for multi-head attention's (B, N, D) inputs and a mask of up to 4 axes
    (B, H, Lq, Lk): a token is hidden when no head sees it."""
    if mask is None:
        return query, key, value
    m = mask[(None,) * (4 - mask.ndim)]  # (B|1, H|1, Lq|1, Lk|1)
    rows_seen = m.any(-1).any(1)[..., None]  # (B|1, Lq|1, 1)
    keys_seen = m.any(-2).any(1)[..., None]  # (B|1, Lk|1, 1)
    return hide(query, rows_seen), hide(key, keys_seen), hide(value, keys_seen)


@checked(q="float* (..., Lq, d)", k="float* (..., Lk, d)", v="float* (..., Lk, dv)",
         mask="bool? ~(..., Lq, Lk)", scale="number?", rules=[c.seen_finite])
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
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    q, k, v = hide_unseen(q, k, v, mask)  # what the mask hides may hold garbage
    # BEGIN EXERCISE 1.2 implement: scores, masked softmax, weighted sum of values (~10 min)
    scores = (q @ np.swapaxes(k, -1, -2)) * scale  # (..., Lq, Lk)
    weights = softmax_np(scores, mask)  # (..., Lq, Lk), rows sum to 1 (or 0)
    output = weights @ v  # (..., Lq, dv)
    return output, weights
    # END EXERCISE


@checked(q="float* (..., Lq, d)", k="float* (..., Lk, d)", v="float* (..., Lk, dv)",
         mask="bool? ~(..., Lq, Lk)", scale="number?", block="int >= 1", rules=[c.seen_finite])
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
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    q, k, v = hide_unseen(q, k, v, mask)  # what the mask hides may hold garbage
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


@checked(q="float* (..., Lq, d)", k="float* (..., Lk, d)", v="float* (..., Lk, dv)",
         mask="bool? ~(..., Lq, Lk)", scale="number?", grad_out="float (..., Lq, dv)",
         rules=[c.seen_finite])
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
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    q, k, v = hide_unseen(q, k, v, mask)  # what the mask hides may hold garbage
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


@checked(q="float (..., Lq, dq)", k="float (..., Lk, dk)", w_q="float (h, dq)",
         w_k="float (h, dk)", v_a="float (h)")
def additive_scores_np(q: np.ndarray, k: np.ndarray, w_q: np.ndarray, w_k: np.ndarray,
                       v_a: np.ndarray) -> np.ndarray:
    """Additive (Bahdanau) scores: s_ij = v_aᵀ tanh(W_q q_i + W_k k_j), a small MLP per pair.

    q: (..., Lq, dq), k: (..., Lk, dk) — the sizes may differ; w_q: (h, dq), w_k: (h, dk),
    v_a: (h,). Returns scores (..., Lq, Lk), to feed to `softmax_np` like q·k/√d. Unlike a dot
    product it needs an (Lq, Lk, h) intermediate — one reason dot-product attention won.
    """
    hidden = (q @ w_q.T)[..., :, None, :] + (k @ w_k.T)[..., None, :, :]  # (..., Lq, Lk, h)
    return np.tanh(hidden) @ v_a  # (..., Lq, Lk)


@checked(x="real (B, N, D)", num_heads="int >= 1, divides D")
def split_heads_np(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, N, H·dh) -> (B, H, N, dh): the heads become a batch axis."""
    B, N, D = x.shape
    return x.reshape(B, N, num_heads, D // num_heads).transpose(0, 2, 1, 3)


@checked(x="real (B, H, N, dh)")
def merge_heads_np(x: np.ndarray) -> np.ndarray:
    """(B, H, N, dh) -> (B, N, H·dh): the heads side by side again."""
    B, H, N, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * dh)


@checked(query="float* (B, Lq, D)", key="float* (B, Lk, D)", value="float* (B, Lk, D)",
         num_heads="int >= 1, divides D", mask="bool? ~(B, H, Lq, Lk)",
         key_padding_mask="bool? (B, Lk)", rules=[c.mha_params, c.mha_masks])
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
        key_padding_mask: bool (B, Lk), True on real keys, folded into `mask` (see
            `check_mha_inputs` for why a (B, Lk) padding mask goes here).
    Returns:
        output (B, Lq, D) and per-head weights (B, H, Lq, Lk).
    """
    if key_padding_mask is not None:  # (B, Lk) -> (B, 1, 1, Lk): every head, every query
        padding = key_padding_mask[:, None, None, :]
        mask = padding if mask is None else mask & padding
    query, key, value = hide_unseen_tokens(query, key, value, mask)
    q = split_heads_np(query @ params["w_q"].T + params["b_q"], num_heads)  # (B, H, Lq, dh)
    k = split_heads_np(key @ params["w_k"].T + params["b_k"], num_heads)  # (B, H, Lk, dh)
    v = split_heads_np(value @ params["w_v"].T + params["b_v"], num_heads)  # (B, H, Lk, dh)
    heads, weights = attention_np(q, k, v, mask)
    output = merge_heads_np(heads) @ params["w_o"].T + params["b_o"]  # (B, Lq, D)
    return output, weights


@checked(n_queries="int", n_keys="int?")
def causal_mask_np(n_queries: int, n_keys: int | None = None) -> np.ndarray:
    """(Lq, Lk) bool, True where key j <= query i, bottom-right aligned: when Lk > Lq the
    queries are the last Lq of the Lk positions (a cache of earlier keys is prepended), so
    query i sits at position i + (Lk - Lq)."""
    n_keys = n_queries if n_keys is None else n_keys
    i = np.arange(n_queries)[:, None] + (n_keys - n_queries)
    j = np.arange(n_keys)[None, :]
    return j <= i


@checked(max_len="int", rules=[c.lengths_np])
def padding_mask_np(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """(B,) lengths -> (B, 1, 1, max_len) bool, True on real tokens; broadcasts over heads
    and queries."""
    lengths = np.asarray(lengths)  # a list of lengths too
    keys = np.arange(max_len)
    return (keys[None, :] < lengths[:, None])[:, None, None, :]


# Lesson 01's position table, which Transformer-XL (lesson 04) reuses to encode distances.
@checked(n_positions="int", d_model="int, even", clamp_len="int?")
def sinusoid_np(n_positions: int, d_model: int, clamp_len: int | None = None) -> np.ndarray:
    """(n_positions, d_model) table R: row δ encodes the position (lesson 01) or the distance
    (lesson 04) δ = 0, 1, ...

    R_δ = [sin(δ ω_0), …, sin(δ ω_{D/2−1}), cos(δ ω_0), …, cos(δ ω_{D/2−1})],  ω_k = 10000^(−2k/D)
    (sines then cosines, the layout of Transformer-XL's original implementation; the paper
    interleaves them, the same table with its columns permuted).
    clamp_len = c: every distance beyond c gets the row of c, R_δ = R_min(δ, c) — the original
    code's `--clamp_len`, used when a model is evaluated with a longer memory than it was
    trained with, so that it never meets an encoding it has not seen.
    """
    inv_freq = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)  # (D/2,)
    delta = np.arange(n_positions)
    if clamp_len is not None:
        delta = np.minimum(delta, clamp_len)
    angles = delta[:, None] * inv_freq[None, :]  # (P, D/2)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)


# ============================================================================ PyTorch twins
@checked(scores="float* (..., N)", mask="bool? ~(..., N)", rules=[c.scores_count_where_allowed])
def softmax_torch(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Torch twin of `softmax_np` (differentiable; all-masked rows give zeros, no NaN)."""
    # BEGIN EXERCISE 1.1 implement: the same softmax in torch, line for line (~5 min)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True).detach()  # m cancels: no gradient needed
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(scores - row_max)
    total = exp.sum(dim=-1, keepdim=True)
    return exp / torch.where(total == 0, torch.ones_like(total), total)
    # END EXERCISE


@checked(q="float* (..., Lq, d)", k="float* (..., Lk, d)", v="float* (..., Lk, dv)",
         mask="bool? ~(..., Lq, Lk)", scale="number?", rules=[c.seen_finite])
def attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    mask: torch.Tensor | None = None, scale: float | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of `attention_np`: returns output (..., Lq, dv) and weights (..., Lq, Lk).

    This explicit path materialises the (Lq, Lk) weights — use it when you want to look at
    them. PyTorch's fused kernel gives the same output without storing them
    (`MultiHeadAttention`'s flash branch, `minattn.fast.attention.attention_fast_torch`).
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    q, k, v = hide_unseen(q, k, v, mask)  # what the mask hides may hold garbage
    # BEGIN EXERCISE 1.2 implement: the same attention forward in torch (~5 min)
    scores = (q @ k.transpose(-1, -2)) * scale  # (..., Lq, Lk)
    weights = softmax_torch(scores, mask)
    return weights @ v, weights
    # END EXERCISE


@checked(q="float* (..., Lq, d)", k="float* (..., Lk, d)", v="float* (..., Lk, dv)",
         mask="bool? ~(..., Lq, Lk)", scale="number?", block="int >= 1", rules=[c.seen_finite])
def online_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           mask: torch.Tensor | None = None, scale: float | None = None,
                           block: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of `online_attention_np`: output (..., Lq, dv) and lse (..., Lq), block by
    block with a running max and sum, never storing the (Lq, Lk) weights."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    q, k, v = hide_unseen(q, k, v, mask)  # what the mask hides may hold garbage
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


@checked(q="float (..., Lq, dq)", k="float (..., Lk, dk)", w_q="float (h, dq)",
         w_k="float (h, dk)", v_a="float (h)")
def additive_scores_torch(q: torch.Tensor, k: torch.Tensor, w_q: torch.Tensor,
                          w_k: torch.Tensor, v_a: torch.Tensor) -> torch.Tensor:
    """Torch twin of `additive_scores_np`: v_aᵀ tanh(W_q q_i + W_k k_j) -> (..., Lq, Lk)."""
    hidden = (q @ w_q.T)[..., :, None, :] + (k @ w_k.T)[..., None, :, :]  # (..., Lq, Lk, h)
    return torch.tanh(hidden) @ v_a  # (..., Lq, Lk)


@checked(x="real (B, N, D)", num_heads="int >= 1, divides D")
def split_heads_torch(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, N, H·dh) -> (B, H, N, dh)."""
    B, N, D = x.shape
    return x.view(B, N, num_heads, D // num_heads).transpose(1, 2)


@checked(x="real (B, H, N, dh)")
def merge_heads_torch(x: torch.Tensor) -> torch.Tensor:
    """(B, H, N, dh) -> (B, N, H·dh)."""
    B, H, N, dh = x.shape
    return x.transpose(1, 2).reshape(B, N, H * dh)


@checked(n_queries="int", n_keys="int?")
def causal_mask_torch(n_queries: int, n_keys: int | None = None, device=None) -> torch.Tensor:
    """Torch twin of `causal_mask_np` (bottom-right aligned), made on `device`."""
    n_keys = n_queries if n_keys is None else n_keys
    i = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)
    j = torch.arange(n_keys, device=device)[None, :]
    return j <= i


@checked(lengths="int (B?,) <= max_len", max_len="int")
def padding_mask_torch(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Torch twin of `padding_mask_np`."""
    keys = torch.arange(max_len, device=lengths.device)
    return (keys[None, :] < lengths[:, None])[:, None, None, :]


@checked(n_positions="int", d_model="int, even", clamp_len="int?", rules=[c.floating_dtype])
def sinusoid_torch(n_positions: int, d_model: int, device=None, dtype=torch.float32,
                   clamp_len: int | None = None):
    """Torch twin of `sinusoid_np`, made on `device` in `dtype`."""
    inv_freq = 1.0 / 10000 ** (torch.arange(0, d_model, 2, device=device, dtype=dtype) / d_model)
    delta = torch.arange(n_positions, device=device, dtype=dtype)
    if clamp_len is not None:
        delta = delta.clamp(max=clamp_len)
    angles = delta[:, None] * inv_freq[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


# ============================================================================ modules
class MultiHeadAttention(nn.Module):
    """Multi-head attention (batch first), the trainable twin of `multi_head_attention_np`.

    forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D), mask=None, need_weights=False,
            key_padding_mask=None) -> output (B, Lq, D), weights (B, H, Lq, Lk) or None

    mask: bool (Lq, Lk) or 4 axes broadcastable to (B, H, Lq, Lk); key_padding_mask: bool
    (B, Lk), True on real keys (a 2-axis mask that could be either is refused: see
    `check_mha_inputs`). `torch.nn.MultiheadAttention` averages weights over heads by default
    (compare with `weights.mean(1)`), and its masks mean the opposite (True = blocked).

    The kernel, chosen in view in `forward`:
      attend   a kernel `(q, k, v, mask) -> out`, all (B, H, ·, dh), replaces attention while
               the projections stay (sparse windows in lesson 02, per-head scales in lesson 03);
               it returns no weights;
      flash    (default True) PyTorch's fused `F.scaled_dot_product_attention` when no weights
               are asked for: the same output, and on a fused kernel the (Lq, Lk) weights are
               never stored (nanoGPT's `if self.flash:`);
      else     the explicit `attention_torch`, which returns the per-head weights.
    """

    @checked(d_model="int >= 1", num_heads="int >= 1, divides d_model")
    def __init__(self, d_model: int, num_heads: int, bias: bool = True, attend=None,
                 flash: bool = True):
        super().__init__()
        self.d_model, self.num_heads = d_model, num_heads
        self.attend, self.flash = attend, flash
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    @checked(query="float* (B, Lq, self.d_model) like self.q_proj",
             key="float?* (B, Lk, self.d_model)", value="float?* (B, Lk, self.d_model)",
             mask="bool? ~(B, H, Lq, Lk)", need_weights="bool", key_padding_mask="bool? (B, Lk)",
             rules=[c.mha_module_call])
    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None,
                value: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                need_weights: bool = False, key_padding_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        key = query if key is None else key  # self-attention by default
        value = key if value is None else value
        if key_padding_mask is not None:  # (B, Lk) -> (B, 1, 1, Lk): every head, every query
            padding = key_padding_mask[:, None, None, :]
            mask = padding if mask is None else mask & padding
        query, key, value = hide_unseen_tokens(query, key, value, mask)
        q = split_heads_torch(self.q_proj(query), self.num_heads)  # (B, H, Lq, dh)
        k = split_heads_torch(self.k_proj(key), self.num_heads)  # (B, H, Lk, dh)
        v = split_heads_torch(self.v_proj(value), self.num_heads)  # (B, H, Lk, dh)
        weights = None
        if self.attend is not None:  # another lesson's kernel
            heads = self.attend(q, k, v, mask)
        elif self.flash and not need_weights:  # PyTorch's fused kernel: no weights stored
            if mask is None:
                heads = F.scaled_dot_product_attention(q, k, v)
            else:  # a row that sees no key: opened for the kernel (no NaN), then set to 0
                seen = mask.any(dim=-1, keepdim=True)  # (B|1, H|1, Lq, 1)
                heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~seen)
                heads = heads.masked_fill(~seen, 0.0)
        else:  # the explicit path: the (Lq, Lk) weights of every head, to look at
            heads, weights = attention_torch(q, k, v, mask)
        return self.out_proj(merge_heads_torch(heads)), weights  # (B, Lq, D)

    def extra_repr(self) -> str:
        kernel = ("sdpa" if self.flash else "explicit") if self.attend is None else \
            getattr(self.attend, "__name__", self.attend)
        return f"d_model={self.d_model}, num_heads={self.num_heads}, attend={kernel}"

    def numpy_params(self) -> dict[str, np.ndarray]:
        """The weights as float64 NumPy arrays, keyed as `multi_head_attention_np` expects."""
        params = {}
        for short, layer in (("q", self.q_proj), ("k", self.k_proj), ("v", self.v_proj),
                             ("o", self.out_proj)):
            params[f"w_{short}"] = layer.weight.detach().cpu().double().numpy()
            bias = layer.bias if layer.bias is not None else torch.zeros(self.d_model)
            params[f"b_{short}"] = bias.detach().cpu().double().numpy()
        return params

    @torch.no_grad()
    @checked(rules=[c.torch_mha_module])
    def load_from_torch(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a `torch.nn.MultiheadAttention` (same d_model, heads, bias)."""
        w_q, w_k, w_v = mha.in_proj_weight.chunk(3)  # stacked [W_q; W_k; W_v]
        for layer, w in ((self.q_proj, w_q), (self.k_proj, w_k), (self.v_proj, w_v)):
            layer.weight.copy_(w)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if self.q_proj.bias is not None:
            for layer, b in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_bias.chunk(3)):
                layer.bias.copy_(b)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self


# ---------------------------------------------------------------------- lesson 01's demo models
class RecallAttention(nn.Module):
    """Associative recall with one cross-attention layer.

    Each pair (key, value) is one token: E_key[key] + E_val[value]. Each query is E_key[query].
    The queries attend over the pair tokens; the attended vector is read out as value logits.

        queries (B, Q), keys (B, P), values (B, P) -> logits (B, Q, n_values)
    """

    def __init__(self, n_keys: int, n_values: int, d_model: int = 64, num_heads: int = 1):
        super().__init__()
        self.key_embedding = nn.Embedding(n_keys, d_model)
        self.value_embedding = nn.Embedding(n_values, d_model)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, n_values))

    @checked(queries="int (B, Q) < self.key_embedding", keys="int (B, P) < self.key_embedding",
             values="int (B, P) < self.value_embedding")
    def forward(self, queries, keys, values, need_weights: bool = False):
        pairs = self.key_embedding(keys) + self.value_embedding(values)  # (B, P, D)
        asked = self.key_embedding(queries)  # (B, Q, D)
        found, weights = self.attention(asked, pairs, pairs, need_weights=need_weights)
        logits = self.readout(found)  # (B, Q, n_values)
        return (logits, weights) if need_weights else logits


class RecallMeanPool(nn.Module):
    """The same task without attention: every query sees the *mean* of the pair tokens.

    Averaging keeps which keys and which values occur but loses which value sat next to which
    key, so no amount of training can recover the binding — the point of the comparison.
    An MLP of about the attention model's size reads [query; mean].
    """

    def __init__(self, n_keys: int, n_values: int, d_model: int = 64):
        super().__init__()
        self.key_embedding = nn.Embedding(n_keys, d_model)
        self.value_embedding = nn.Embedding(n_values, d_model)
        self.mlp = nn.Sequential(nn.Linear(2 * d_model, 2 * d_model), nn.ReLU(),
                                 nn.Linear(2 * d_model, d_model), nn.LayerNorm(d_model),
                                 nn.Linear(d_model, n_values))

    @checked(queries="int (B, Q) < self.key_embedding", keys="int (B, P) < self.key_embedding",
             values="int (B, P) < self.value_embedding")
    def forward(self, queries, keys, values):
        pairs = self.key_embedding(keys) + self.value_embedding(values)  # (B, P, D)
        summary = pairs.mean(dim=1, keepdim=True)  # (B, 1, D): order and binding are gone
        asked = self.key_embedding(queries)  # (B, Q, D)
        return self.mlp(torch.cat([asked, summary.expand_as(asked)], dim=-1))


class PositionReader(nn.Module):
    """One self-attention layer that has to read by position (lesson 01's reversal task).

        tokens (B, N) -> logits (B, N, n_symbols)

    x = E[token] + P, with P chosen by `positions`: "none" (attention sees a bag of tokens),
    "sinusoid" (Vaswani et al.'s fixed table, `sinusoid_torch`, entries of RMS 1/√2) or
    "learned" (a trained (max_len, D) table, initialised N(0, init_std²): 0.02 by default, the
    init of GPT-2 and BERT). The token embeddings E start N(0, 1). One single-head
    self-attention layer over x; each position's attended vector is read out as symbol logits.
    """

    POSITIONS = POSITIONS

    @checked(n_symbols="int >= 1", max_len="int >= 1", positions="one of " + ", ".join(POSITIONS),
             d_model="int >= 1", init_std="number > 0", rules=[c.sinusoid_positions])
    def __init__(self, n_symbols: int, max_len: int, positions: str, d_model: int = 64,
                 init_std: float = 0.02):
        super().__init__()
        self.positions, self.max_len = positions, max_len
        self.embedding = nn.Embedding(n_symbols, d_model)
        self.table = (nn.Parameter(torch.randn(max_len, d_model) * init_std)
                      if positions == "learned" else None)
        self.attention = MultiHeadAttention(d_model, num_heads=1)
        self.readout = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, n_symbols))

    @checked(tokens="int (B, N<=self.max_len) < self.embedding")
    def forward(self, tokens: torch.Tensor, need_weights: bool = False):
        x = self.embedding(tokens)  # (B, N, D)
        n, d = x.shape[1], x.shape[2]
        if self.positions == "sinusoid":
            x = x + sinusoid_torch(n, d, device=x.device, dtype=x.dtype)  # row p codes position p
        elif self.positions == "learned":
            x = x + self.table[:n]
        found, weights = self.attention(x, need_weights=need_weights)
        logits = self.readout(found)  # (B, N, n_symbols)
        return (logits, weights) if need_weights else logits
