"""Input checks of attention, shared by the NumPy reference, its torch twins, the fast path
and the modules: each raises ValueError saying what was expected and what was given
(`tools.utils` states the contract of every function).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..checks import (
    check_array,
    check_finite,
    check_ids,
    check_mask,
    check_ndim,
    check_number,
    check_same_device,
    check_same_dtype,
    check_size,
    describe,
    fail,
    hide,
    in_graph,
    shape_str,
)


def check_attention_inputs(q, k, v, mask=None, scale=None, like=None) -> None:
    """Raise ValueError (expected vs given) unless q, k, v and mask fit together.

    Works on NumPy arrays and torch tensors alike (it looks at the type, .shape, .dtype and
    .device): q, k, v of one library, one floating dtype, one device. `like` (np.ndarray or
    torch.Tensor) names the library a function takes; by default q's.
    """
    like = like or (torch.Tensor if isinstance(q, torch.Tensor) else np.ndarray)
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_array(name, x, "float", like=like)
        check_ndim(name, x, 2, "(..., N, d)")
    check_same_dtype(q=q, k=k, v=v)
    check_same_device(q=q, k=k, v=v, mask=mask)
    if scale is not None:
        check_number("scale", scale)
    if q.shape[-1] != k.shape[-1]:
        fail("q and k must have the same feature size d (last axis)",
             f"k of shape (..., Lk, {q.shape[-1]})",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        fail("k and v must have the same number of keys Lk (second-to-last axis)",
             f"v of shape (..., {k.shape[-2]}, dv)",
             f"k {shape_str(k.shape)}, v {shape_str(v.shape)}")
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
    output or the gradients. NumPy and torch alike; returns the three arrays. Activations of a
    training graph (`in_graph`) are returned as they are: they were computed from checked,
    finite inputs, and a key or query that the mask hides changes no output and gets no
    gradient, so the selection would only cost a read of the mask and the arrays.
    """
    if in_graph(q, k, v):
        return q, k, v
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


def check_heads(x, num_heads, like) -> int:
    """x (B, N, D) of `like`'s library and num_heads >= 1 dividing D; returns num_heads."""
    check_array("x", x, None, ndim=3, hint="(B, N, H·dh)", like=like)
    num_heads = check_size("num_heads", num_heads, 1)
    if x.shape[-1] % num_heads:
        fail("num_heads", f"a divisor of the width D = {x.shape[-1]}", f"{num_heads}")
    return num_heads


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


def check_lengths(lengths, max_len: int, like) -> int:
    """lengths: (B,) integers in [0, max_len]; max_len an integer >= 0. Returns max_len."""
    max_len = check_size("max_len", max_len)
    check_array("lengths", lengths, "int", ndim=1, hint="(B,) integers", like=like)
    if lengths.shape[0] and (int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        fail("lengths", f"integers in [0, max_len = {max_len}]",
             f"lengths from {int(lengths.min())} to {int(lengths.max())}")
    return max_len


def check_sinusoid(n_positions, d_model) -> tuple[int, int]:
    """n_positions >= 0 and an even d_model >= 0, integers."""
    n_positions, d_model = check_size("n_positions", n_positions), check_size("d_model", d_model)
    if d_model % 2:
        fail("d_model", "an even integer (a sine and a cosine per frequency)", f"{d_model}")
    return n_positions, d_model


def check_table_sizes(n_positions: int, d_model: int, clamp_len) -> tuple[int, int]:
    """`check_sinusoid`'s sizes and clamp_len None or an integer distance >= 0."""
    n_positions, d_model = check_sinusoid(n_positions, d_model)
    if clamp_len is not None and (isinstance(clamp_len, bool) or not isinstance(clamp_len, int)
                                  or clamp_len < 0):
        fail("clamp_len must be a distance", "None or an int >= 0", repr(clamp_len))
    return n_positions, d_model


def check_tokens(tokens, embedding: nn.Embedding, max_len: int | None = None) -> None:
    """tokens: (B, N) integer ids inside the embedding's vocabulary, N <= max_len, N > 0."""
    check_array("tokens", tokens, "int", ndim=2, hint="(B, N) token ids", like=torch.Tensor)
    if 0 in tokens.shape or max_len is not None and tokens.shape[1] > max_len:
        fail("tokens", f"(B, N) with 0 < N <= max_len = {max_len}" if max_len else
             "(B, N) with B, N > 0", describe(tokens))
    check_ids("tokens", tokens, embedding.num_embeddings)
    check_same_device(tokens=tokens, weights=embedding.weight)
