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

Read the NumPy functions first: they state the math. Each `*_torch` function below repeats
its NumPy twin line for line, so autograd can check our hand-written backward.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .tools.utils import (check_array, check_finite, check_mask, check_ndim, check_number,
                          check_same_device, check_same_dtype, check_size, describe, fail, hide,
                          shape_str)


# ============================================================================ input checks
def check_attention_inputs(q, k, v, mask=None, scale=None) -> None:
    """Raise ValueError (expected vs given) unless q, k, v and mask fit together.

    Works on NumPy arrays and torch tensors alike (it looks at the type, .shape, .dtype and
    .device): q, k, v of one library, one floating dtype, one device.
    """
    like = torch.Tensor if isinstance(q, torch.Tensor) else np.ndarray
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_array(name, x, "float", like=like)
        check_ndim(name, x, 2, "(..., N, d)")
    check_same_dtype(q=q, k=k, v=v)
    check_same_device(q=q, k=k, v=v, mask=mask)
    if scale is not None:
        check_number("scale", scale)
    if q.shape[-1] != k.shape[-1]:
        fail("q and k must have the same feature size d (last axis)",
             f"k of shape (..., Lk, {q.shape[-1]})", f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        fail("k and v must have the same number of keys Lk (second-to-last axis)",
             f"v of shape (..., {k.shape[-2]}, dv)", f"k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        fail("q, k and v must share their leading (batch, head) axes",
             "equal shapes before the last two axes",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    if q.shape[-1] == 0:
        fail("q", "a feature size d >= 1 (last axis; the scale is 1/sqrt(d))", describe(q))
    if q.shape[-2] == 0 or k.shape[-2] == 0 or (q.ndim > 2 and 0 in q.shape[:-2]):
        fail("empty input", "at least one query, one key and one batch element",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    check_mask(mask, tuple(q.shape[:-1]) + (k.shape[-2],), like=like)


def visible_inputs(q, k, v, mask=None):
    """q, k, v with what the mask hides set to 0 — the queries of rows that see no key, the
    keys and values that no query sees — after checking that the rest is finite.

    Selected, not multiplied, so garbage under the mask (NaN in padding) cannot leak into the
    output or the gradients. NumPy and torch alike; returns the three arrays.
    """
    if mask is not None:
        rows_seen = mask.any(-1)[..., None]  # (..., Lq, 1): the query sees some key
        keys_seen = mask.any(-2)[..., None]  # (..., Lk, 1): some query sees the key
        q, k, v = hide(q, rows_seen), hide(k, keys_seen), hide(v, keys_seen)
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_finite(name, x)
    return q, k, v


def check_softmax_inputs(scores, mask, like) -> None:
    """Scores: a float array of the right library; mask: bool, broadcastable to the scores.
    Where the mask allows, a score must not be NaN or +inf (exp(+inf − max) is NaN); −inf is
    a weight of exactly 0."""
    check_array("scores", scores, "float", min_ndim=1, hint="(..., N)", like=like)
    check_same_device(scores=scores, mask=mask)
    check_mask(mask, tuple(scores.shape), like=like)
    check_finite("scores", scores, where=mask, minus_inf_ok=True)


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
    # END EXERCISE
    return output, weights


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


def check_additive_inputs(q, k, w_q, w_k, v_a) -> None:
    """q (..., Lq, dq), k (..., Lk, dk), w_q (h, dq), w_k (h, dk), v_a (h,) must fit together,
    in one library, dtype and device, finite."""
    like = torch.Tensor if isinstance(q, torch.Tensor) else np.ndarray
    for name, x in (("q", q), ("k", k), ("w_q", w_q), ("w_k", w_k), ("v_a", v_a)):
        check_array(name, x, "float", like=like)
    check_ndim("q", q, 2, "(..., Lq, dq)")
    check_ndim("k", k, 2, "(..., Lk, dk)")
    check_same_dtype(q=q, k=k, w_q=w_q, w_k=w_k, v_a=v_a)
    check_same_device(q=q, k=k, w_q=w_q, w_k=w_k, v_a=v_a)
    if w_q.ndim != 2 or w_k.ndim != 2 or v_a.ndim != 1 or not (
            w_q.shape[0] == w_k.shape[0] == v_a.shape[0]):
        fail("additive attention weights do not fit", "w_q (h, dq), w_k (h, dk), v_a (h,)",
             f"w_q {shape_str(w_q.shape)}, w_k {shape_str(w_k.shape)}, v_a {shape_str(v_a.shape)}")
    if q.shape[-1] != w_q.shape[1] or k.shape[-1] != w_k.shape[1]:
        fail("w_q / w_k must match the feature sizes of q / k", f"w_q (h, {q.shape[-1]}), "
             f"w_k (h, {k.shape[-1]})", f"w_q {shape_str(w_q.shape)}, w_k {shape_str(w_k.shape)}")
    if q.shape[:-2] != k.shape[:-2]:
        fail("q and k must share their leading axes", "equal shapes before the last two axes",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    for name, x in (("q", q), ("k", k), ("w_q", w_q), ("w_k", w_k), ("v_a", v_a)):
        check_finite(name, x)


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


def check_heads(x, num_heads, like) -> int:
    """x (B, N, D) of `like`'s library and num_heads >= 1 dividing D; returns num_heads."""
    check_array("x", x, None, ndim=3, hint="(B, N, H·dh)", like=like)
    num_heads = check_size("num_heads", num_heads, 1)
    if x.shape[-1] % num_heads:
        fail("num_heads", f"a divisor of the width D = {x.shape[-1]}", f"{num_heads}")
    return num_heads


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


MHA_PARAMS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")


def check_mha_params(params, query) -> None:
    """The eight arrays of `MultiHeadAttention.numpy_params()`: (D, D) weights, (D,) biases."""
    if not isinstance(params, dict) or any(n not in params for n in MHA_PARAMS):
        missing = [n for n in MHA_PARAMS if n not in params] if isinstance(params, dict) else []
        fail("params", f"a dict with {', '.join(MHA_PARAMS)} (MultiHeadAttention.numpy_params())",
             f"a dict without {missing}" if missing else describe(params))
    D = params["w_q"].shape[-1] if hasattr(params["w_q"], "shape") else -1
    for name in MHA_PARAMS:
        check_array(f"params['{name}']", params[name], "float", like=np.ndarray)
        want = (D, D) if name.startswith("w") else (D,)
        if tuple(params[name].shape) != want:
            fail(f"params['{name}']", f"shape {shape_str(want)}", shape_str(params[name].shape))
        check_finite(f"params['{name}']", params[name])


def check_mha_inputs(query, key, value, num_heads: int, d_model: int, mask=None,
                     key_padding_mask=None, dtype=None):
    """(B, Lq, D), (B, Lk, D), (B, Lk, D) with D = d_model; shared by NumPy and torch.

    Returns the one mask to attend with (None, or bool broadcastable to (B, H, Lq, Lk)), made of
      mask              (Lq, Lk), or 4 axes broadcastable to (B, H, Lq, Lk); and
      key_padding_mask  (B, Lk), True on real keys.
    A 2-axis `mask` is (Lq, Lk), shared by the batch. When B == Lq a (B, Lk) padding mask has
    that very shape and would be read as (Lq, Lk) — each sequence masked with another's
    padding — so a 2-axis mask is refused then: pass `mask[None, None]` for an (Lq, Lk) mask,
    `key_padding_mask=` for a padding mask. A 3-axis mask is refused always: (B, Lq, Lk) and
    (H, Lq, Lk) cannot be told apart. dtype: the dtype the inputs must have (the weights').
    """
    like = torch.Tensor if isinstance(query, torch.Tensor) else np.ndarray
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_array(name, x, "float", like=like)
        if x.ndim != 3 or x.shape[-1] != d_model or 0 in x.shape:
            fail(f"{name} has the wrong shape", f"(B, N, {d_model}) with B, N > 0",
                 shape_str(x.shape))
    if not (query.shape[0] == key.shape[0] == value.shape[0]):
        fail("query, key and value must have the same batch size B",
             "equal first axes", f"{query.shape[0]}, {key.shape[0]}, {value.shape[0]}")
    if key.shape[1] != value.shape[1]:
        fail("key and value must have the same length Lk", f"value of length {key.shape[1]}",
             f"{value.shape[1]}")
    check_same_dtype(query=query, key=key, value=value)
    if dtype is not None and query.dtype != dtype:
        fail("query", f"dtype {str(dtype).removeprefix('torch.')}, the weights' (cast the "
             "inputs or the module)", describe(query))
    check_same_device(query=query, key=key, value=value, mask=mask,
                      key_padding_mask=key_padding_mask)
    B, Lq, Lk = query.shape[0], query.shape[1], key.shape[1]
    check_mask(mask, (B, num_heads, Lq, Lk), like=like)
    if mask is not None and (mask.ndim == 3 or mask.ndim == 2 and B == Lq > 1):
        fail("mask", "(Lq, Lk) written as mask[None, None] when B == Lq, 4 axes (B, H, Lq, Lk) "
             "(1 where shared), or a (B, Lk) padding mask as key_padding_mask=",
             f"an ambiguous {mask.ndim}-axis mask {shape_str(mask.shape)} with B={B}, "
             f"H={num_heads}, Lq={Lq}")
    if key_padding_mask is not None:
        check_array("key_padding_mask", key_padding_mask, "bool", like=like,
                    hint="(B, Lk), True on real keys")
        if tuple(key_padding_mask.shape) != (B, Lk):
            fail("key_padding_mask", f"shape (B, Lk) = ({B}, {Lk}), True on real keys",
                 describe(key_padding_mask))
        padding = key_padding_mask[:, None, None, :]
        mask = padding if mask is None else mask & padding
    return mask


def visible_mha_inputs(query, key, value, mask):
    """`visible_inputs` for the (B, N, D) inputs of multi-head attention: the query rows that
    see no key in any head, and the key/value rows that no query sees, set to 0; the rest
    checked finite."""
    if mask is not None:
        m = mask[(None,) * (4 - mask.ndim)]  # (B|1, H|1, Lq|1, Lk|1)
        rows_seen = m.any(-1).any(1)[..., None]  # (B|1, Lq|1, 1)
        keys_seen = m.any(-2).any(1)[..., None]  # (B|1, Lk|1, 1)
        query, key, value = hide(query, rows_seen), hide(key, keys_seen), hide(value, keys_seen)
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_finite(name, x)
    return query, key, value


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
    them. `fast_attention_torch` gives the same output without storing them.
    """
    check_attention_inputs(q, k, v, mask, scale)
    q, k, v = visible_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # BEGIN EXERCISE 1.2 implement: the same attention forward in torch (~5 min)
    scores = (q @ k.transpose(-1, -2)) * scale  # (..., Lq, Lk)
    weights = softmax_torch(scores, mask)
    return weights @ v, weights
    # END EXERCISE


def additive_scores_torch(q: torch.Tensor, k: torch.Tensor, w_q: torch.Tensor,
                          w_k: torch.Tensor, v_a: torch.Tensor) -> torch.Tensor:
    """Torch twin of `additive_scores_np`: v_aᵀ tanh(W_q q_i + W_k k_j) -> (..., Lq, Lk)."""
    check_additive_inputs(q, k, w_q, w_k, v_a)
    hidden = (q @ w_q.T)[..., :, None, :] + (k @ w_k.T)[..., None, :, :]  # (..., Lq, Lk, h)
    return torch.tanh(hidden) @ v_a  # (..., Lq, Lk)


def fast_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         mask: torch.Tensor | None = None, scale: float | None = None,
                         is_causal: bool = False) -> torch.Tensor:
    """Torch-only: the output of `attention_np` through PyTorch's fused kernel (no weights).

    F.scaled_dot_product_attention runs a fused kernel (flash; on CUDA also memory-efficient)
    when one accepts the inputs, and then the (Lq, Lk) matrix is never stored; otherwise its
    math backend stores it, like `attention_torch` (lesson 01, section 8, measures both). Two
    differences from our convention are patched here:
    a fully masked row comes back as NaN from some kernels (we return zeros), and causality
    is bottom-right aligned as in `causal_mask_torch` — the Lq queries are the *last* Lq
    positions of the Lk keys, as when a cache or memory of earlier keys is prepended. (SDPA's
    own `is_causal` is top-left aligned; we use it only when Lq == Lk, where the two agree.)
    Give `is_causal=True` or a mask, not both.
    """
    check_attention_inputs(q, k, v, mask, scale)
    if is_causal and mask is not None:
        fail("fast_attention_torch takes a mask or is_causal=True, not both",
             "one of them (fold causality into the mask with causal_mask_torch)",
             f"mask {shape_str(mask.shape)} and is_causal=True")
    if is_causal and q.shape[-2] != k.shape[-2]:
        mask = causal_mask_torch(q.shape[-2], k.shape[-2], device=q.device)
    q, k, v = visible_inputs(q, k, v, mask)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    has_key = mask.any(dim=-1, keepdim=True)  # (..., Lq, 1): does the row see any key?
    # Open the empty rows so the kernel sees finite numbers (no NaN in forward or backward),
    # then zero their output.
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~has_key, scale=scale)
    return out.masked_fill(~has_key, 0.0)


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


class MultiHeadAttention(nn.Module):
    """Multi-head attention (batch first), the trainable twin of `multi_head_attention_np`.

    forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D), mask=None, need_weights=False,
            key_padding_mask=None) -> output (B, Lq, D), weights (B, H, Lq, Lk) or None

    mask: bool (Lq, Lk) or 4 axes broadcastable to (B, H, Lq, Lk); key_padding_mask: bool
    (B, Lk), True on real keys (a 2-axis mask that could be either is refused: see
    `check_mha_inputs`).

    With need_weights=False `F.scaled_dot_product_attention` runs (fast, and O(N) memory when
    it picks a fused kernel); with need_weights=True the explicit path runs and returns
    per-head weights.
    `torch.nn.MultiheadAttention` averages weights over heads by default: use
    `weights.mean(1)` to compare. Its masks mean the opposite (True = blocked) — ours follow
    SDPA (True = may attend).

    The extension seam: `attend(q, k, v, mask) -> out`, all (B, H, ·, dh), replaces the
    attention kernel (sparse windows in lesson 02, per-head scales in lesson 03, ...) while the
    projections stay the same. A custom kernel returns no weights.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, attend=None):
        super().__init__()
        d_model, num_heads = check_size("d_model", d_model, 1), check_size("num_heads", num_heads, 1)
        if d_model % num_heads != 0:
            fail("d_model must split evenly into heads", "d_model divisible by num_heads",
                 f"d_model={d_model}, num_heads={num_heads}")
        self.d_model, self.num_heads = d_model, num_heads
        self.attend = attend  # None: scaled dot-product attention (fused or explicit)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None,
                value: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                need_weights: bool = False, key_padding_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        key = query if key is None else key  # self-attention by default
        value = key if value is None else value
        mask = check_mha_inputs(query, key, value, self.num_heads, self.d_model, mask,
                                key_padding_mask, dtype=self.q_proj.weight.dtype)
        check_same_device(query=query, weights=self.q_proj.weight)
        query, key, value = visible_mha_inputs(query, key, value, mask)
        q = split_heads_torch(self.q_proj(query), self.num_heads)  # (B, H, Lq, dh)
        k = split_heads_torch(self.k_proj(key), self.num_heads)  # (B, H, Lk, dh)
        v = split_heads_torch(self.v_proj(value), self.num_heads)  # (B, H, Lk, dh)
        if self.attend is not None:
            if need_weights:
                fail("need_weights with a custom attend kernel", "need_weights=False",
                     f"need_weights=True with attend={self.attend}")
            heads, weights = self.attend(q, k, v, mask), None
        elif need_weights:
            heads, weights = attention_torch(q, k, v, mask)
        else:
            heads, weights = fast_attention_torch(q, k, v, mask), None
        return self.out_proj(merge_heads_torch(heads)), weights

    def extra_repr(self) -> str:
        kernel = "sdpa" if self.attend is None else getattr(self.attend, "__name__", self.attend)
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
    def load_from_torch(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a `torch.nn.MultiheadAttention` (same d_model and heads)."""
        if not isinstance(mha, nn.MultiheadAttention):
            fail("mha", "a torch.nn.MultiheadAttention", describe(mha))
        if mha.embed_dim != self.d_model or mha.num_heads != self.num_heads:
            fail("nn.MultiheadAttention does not match", f"d_model={self.d_model}, "
                 f"heads={self.num_heads}", f"embed_dim={mha.embed_dim}, heads={mha.num_heads}")
        w_q, w_k, w_v = mha.in_proj_weight.chunk(3)  # stacked [W_q; W_k; W_v]
        for layer, w in ((self.q_proj, w_q), (self.k_proj, w_k), (self.v_proj, w_v)):
            layer.weight.copy_(w)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        ours_bias, theirs_bias = self.q_proj.bias is not None, mha.in_proj_bias is not None
        if ours_bias != theirs_bias:
            fail("bias settings differ", f"nn.MultiheadAttention(bias={ours_bias})",
                 f"nn.MultiheadAttention(bias={theirs_bias})")
        if ours_bias:
            for layer, b in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_bias.chunk(3)):
                layer.bias.copy_(b)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self


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


def check_lengths(lengths, max_len: int, like) -> int:
    """lengths: (B,) integers in [0, max_len]; max_len an integer >= 0. Returns max_len."""
    max_len = check_size("max_len", max_len)
    check_array("lengths", lengths, "int", ndim=1, hint="(B,) integers", like=like)
    if lengths.shape[0] and (int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        fail("lengths", f"integers in [0, max_len = {max_len}]",
             f"lengths from {int(lengths.min())} to {int(lengths.max())}")
    return max_len


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
