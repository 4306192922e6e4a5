"""Transformer-XL's fast path: the relative shift (no gather) — tested equal to `rel_attention_np`.

The explicit reference gathers r_{i−j} for every (i, j): an (H, Lq, Lk, dh) tensor. The trick
of the original implementation computes the position scores for every query against every
*distance* with one matrix product, then slides row i by a different amount so that column j
lands on distance δ_ij = (Lk − Lq) + i − j:

    BD[i, c] = (q_i + v)ᵀ r_{Lk−1−c}      columns ordered by distance Lk−1, …, 1, 0   (Lq, Lk)
    shifted[i, j] = BD[i, j + Lq − 1 − i]                 = (q_i + v)ᵀ r_{δ_ij}

Row i moves left by Lq − 1 − i. The shift is one pad and two reshapes: put a zero column in
front (Lq, Lk + 1), read the same memory as (Lk + 1, Lq), drop the first row, read it back
as (Lq, Lk). Entries with δ_ij < 0 (the future) come out as junk — the causal mask hides them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import causal_mask_torch
from ..checks import check_array, check_number
from .reference import check_rel_inputs


def rel_shift_np(scores: np.ndarray) -> np.ndarray:
    """(..., Lq, Lk) with columns ordered by distance Lk−1 … 0 -> (..., Lq, Lk) with column j =
    distance (Lk − Lq) + i − j for row i (valid where that is >= 0, junk elsewhere)."""
    check_array("scores", scores, None, min_ndim=2, hint="(..., Lq, Lk)", like=np.ndarray)
    # BEGIN EXERCISE 4.1 implement: the relative shift — pad a column, reshape, drop a row (~15 min)
    *lead, Lq, Lk = scores.shape
    padded = np.concatenate([np.zeros((*lead, Lq, 1), scores.dtype), scores], axis=-1)
    padded = padded.reshape(*lead, Lk + 1, Lq)  # the same numbers, read with a new row length
    return padded[..., 1:, :].reshape(*lead, Lq, Lk)
    # END EXERCISE


def rel_shift_torch(scores: torch.Tensor) -> torch.Tensor:
    """Torch twin of `rel_shift_np` (differentiable)."""
    check_array("scores", scores, None, min_ndim=2, hint="(..., Lq, Lk)", like=torch.Tensor)
    # BEGIN EXERCISE 4.1 implement: the relative shift — pad a column, reshape, drop a row (~15 min)
    *lead, Lq, Lk = scores.shape
    padded = F.pad(scores, (1, 0))  # (..., Lq, Lk + 1)
    padded = padded.reshape(*lead, Lk + 1, Lq)
    return padded[..., 1:, :].reshape(*lead, Lq, Lk)
    # END EXERCISE


def rel_attention_fast_torch(q, k, v, r, u_bias, v_bias, scale=None) -> torch.Tensor:
    """Torch-only fast path of `rel_attention_np` (same arguments; returns the output only).

    (a) + (c) = (q + u)ᵀ k is plain attention, so it goes to PyTorch's fused kernel; the
    position terms (b) + (d) = (q + v)ᵀ r arrive as an additive float mask built with the
    relative shift (future keys at −inf).
    """
    check_rel_inputs(q, k, v, r, u_bias, v_bias)
    Lq, Lk = q.shape[2], k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else check_number("scale", scale)
    r_by_column = r[:, :Lk].flip(1)  # (H, Lk, dh): column c holds distance Lk − 1 − c
    position = (q + v_bias[None, :, None, :]) @ r_by_column.transpose(-1, -2)  # (B, H, Lq, Lk)
    position = rel_shift_torch(position) * scale  # column j = distance δ_ij
    future = ~causal_mask_torch(Lq, Lk, device=q.device)
    position = position.masked_fill(future, float("-inf"))  # every row keeps key 0: no NaN
    return F.scaled_dot_product_attention(q + u_bias[None, :, None, :], k, v,
                                          attn_mask=position, scale=scale)
