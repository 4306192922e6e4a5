"""Transformer-XL's fast path: the relative shift (no gather) — tested equal to `xl.rel_attention_np`.

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

from .attention import causal_mask_torch
from .tools.utils import check_array, check_number, check_size
from .xl import check_rel_inputs


def rel_shift_np(scores: np.ndarray) -> np.ndarray:
    """(..., Lq, Lk) with columns ordered by distance Lk−1 … 0 -> (..., Lq, Lk) with column j =
    distance (Lk − Lq) + i − j for row i (valid where that is >= 0, junk elsewhere)."""
    check_array("scores", scores, None, min_ndim=2, hint="(..., Lq, Lk)", like=np.ndarray)
    # BEGIN EXERCISE 4.1 implement: the relative shift — pad a zero column, reshape, drop a row, reshape (~15 min)
    *lead, Lq, Lk = scores.shape
    padded = np.concatenate([np.zeros((*lead, Lq, 1), scores.dtype), scores], axis=-1)
    padded = padded.reshape(*lead, Lk + 1, Lq)  # the same numbers, read with a new row length
    return padded[..., 1:, :].reshape(*lead, Lq, Lk)
    # END EXERCISE


def rel_shift_torch(scores: torch.Tensor) -> torch.Tensor:
    """Torch twin of `rel_shift_np` (differentiable)."""
    check_array("scores", scores, None, min_ndim=2, hint="(..., Lq, Lk)", like=torch.Tensor)
    # BEGIN EXERCISE 4.1 implement: the relative shift — pad a zero column, reshape, drop a row, reshape (~15 min)
    *lead, Lq, Lk = scores.shape
    padded = F.pad(scores, (1, 0))  # (..., Lq, Lk + 1)
    padded = padded.reshape(*lead, Lk + 1, Lq)
    return padded[..., 1:, :].reshape(*lead, Lq, Lk)
    # END EXERCISE


def rel_attention_fast_torch(q, k, v, r, u_bias, v_bias, scale=None) -> torch.Tensor:
    """Torch-only fast path of `xl.rel_attention_np` (same arguments; returns the output only).

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


# ============================================================================ cached evaluation
@torch.no_grad()
def eval_speed(context: int, d_model: int = 128, num_heads: int = 4, num_layers: int = 2,
               vocab_size: int = 50, seg_len: int = 128, repeats: int = 3, device="cpu",
               seed: int = 0) -> dict[str, float]:
    """Tokens per second when every prediction sees (at least) `context` earlier tokens.

    * 'vanilla, recompute': a `VanillaLM` predicts one token from a window of the last
      `context` tokens, and the window slides by one for the next token — all of it recomputed.
    * 'XL, cached': a `TransformerXL` of the same size reads `seg_len` tokens per call with a
      memory of `context` hidden states per layer (the paper's evaluation): token i of the
      segment sees context + i earlier tokens, and nothing is computed twice.
    * 'XL, one token at a time': the same memory, one new token per call (as in sampling).
    Untrained weights (speed does not depend on them); batch 1; medians of interleaved repeats.
    """
    from .models import VanillaLM
    from .tools.bench import time_interleaved

    for name, value, low in (("context", context, 1), ("seg_len", seg_len, 1),
                             ("repeats", repeats, 1), ("vocab_size", vocab_size, 1)):
        check_size(name, value, low)
    from .xl import TransformerXL

    torch.manual_seed(seed)
    vanilla = VanillaLM(vocab_size, d_model, num_heads, num_layers).to(device).eval()
    xl = TransformerXL(vocab_size, d_model, num_heads, num_layers, mem_len=context,
                       max_len=context + seg_len).to(device).eval()
    g = torch.Generator().manual_seed(seed)
    window = torch.randint(0, vocab_size, (1, context), generator=g).to(device)
    segment = torch.randint(0, vocab_size, (1, seg_len), generator=g).to(device)
    _, memories = xl(window)  # a full memory of `context` states per layer
    times = time_interleaved({
        "vanilla, recompute": lambda: vanilla(window),  # 1 token predicted
        "XL, cached": lambda: xl(segment, memories),  # seg_len tokens predicted
        "XL, one token at a time": lambda: xl(segment[:, :1], memories),  # 1 token predicted
    }, repeats, device=device)
    return {"vanilla, recompute": 1 / times["vanilla, recompute"],
            "XL, cached": seg_len / times["XL, cached"],
            "XL, one token at a time": 1 / times["XL, one token at a time"]}
