"""Lesson 03's head analysis: what trained heads do with their windows.

A head's measured scale (`reference.measured_scale_np`) says how far it looks; compared with
uniform attention under the same mask it says whether the head learned anything:

    uniform_weights    even weights over what each query may see: a head that learned nothing
    departure          the total-variation distance from those uniform weights
    drop_keys          weights without some keys, renormalised (attention sinks taken out)
    head_statistics_torch   scale, uniform scale and departure of every head of a model
    pretrained_head_scales  the scales of a pretrained BERT-style encoder's heads
"""

from __future__ import annotations

import numpy as np
import torch

from ..checks import fail, shape_str
from ..encoder import encode_batch
from .reference import measured_scale_torch


# ============================================================================ NumPy reference
def uniform_weights_np(mask: np.ndarray) -> np.ndarray:
    """The reference a trained head is compared with: attention spread evenly over the keys
    each query may see. mask (..., N, N) bool -> weights (..., N, N) float64; a row that may see
    nothing gets zeros. Its measured scale is what a head that learned nothing would show."""
    allowed = np.asarray(mask, dtype=np.float64)
    return allowed / np.maximum(allowed.sum(-1, keepdims=True), 1)


def drop_keys_np(weights: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Attention weights (B, H, N, N) with the keys where keep (B, N) is False removed and each
    row renormalised over the keys kept (a row left with nothing: zeros). Used to take
    attention sinks such as BERT's [CLS] and [SEP] out of a measured scale."""
    w = weights * np.asarray(keep, dtype=weights.dtype)[:, None, None, :]
    total = w.sum(-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0)


def departure_np(weights: np.ndarray, mask: np.ndarray,
                 query_mask: np.ndarray | None = None) -> np.ndarray:
    """How far each head is from uniform attention inside what it may see: the total-variation
    distance ½ Σ_j |a_ij − u_ij| (0: uniform, near 1: all weight where uniform puts almost
    none), averaged over the queries (and the batch) as `measured_scale_np` averages.

    weights (B, H, N, N), mask bool broadcastable to them, query_mask (B, N) or None -> (H,).
    A head can keep the uniform head's scale and still depart from it (by picking words).
    """
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    tv = 0.5 * np.abs(weights - uniform_weights_np(np.broadcast_to(mask, weights.shape))).sum(-1)
    if query_mask is None:
        return tv.mean(axis=(0, 2))
    keep = np.asarray(query_mask, dtype=np.float64)[:, None, :]
    return (tv * keep).sum(axis=(0, 2)) / np.maximum(keep.sum(axis=(0, 2)), 1)


# ============================================================================ PyTorch
def uniform_weights_torch(mask: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Torch twin of `uniform_weights_np`: (..., N, N) bool -> even weights over allowed keys."""
    allowed = mask.to(dtype)
    return allowed / allowed.sum(-1, keepdim=True).clamp(min=1)


def departure_torch(weights: torch.Tensor, mask: torch.Tensor,
                    query_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Torch twin of `departure_np`: (H,) mean total-variation distance from uniform attention."""
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    flat = uniform_weights_torch(mask.expand(weights.shape), weights.dtype)
    tv = 0.5 * (weights - flat).abs().sum(-1)  # (B, H, N)
    if query_mask is None:
        return tv.mean(dim=(0, 2))
    keep = query_mask.to(weights.dtype)[:, None, :]
    return (tv * keep).sum(dim=(0, 2)) / keep.sum(dim=(0, 2)).clamp(min=1)


def drop_keys_torch(weights: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Torch twin of `drop_keys_np`: (B, H, N, N) weights without the keys where keep (B, N)
    is False, rows renormalised."""
    w = weights * keep.to(weights.dtype)[:, None, None, :]
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / total.clamp(min=torch.finfo(w.dtype).tiny), 0.0)


def head_statistics_torch(weights, masks, lengths=None) -> dict[str, np.ndarray]:
    """Torch-only, for trained models: per-layer weights (B, H, 1 + N, 1 + N) and what each
    query could see -> (L, H) arrays over the real queries (the node and the first `lengths`
    tokens):
        "scale"          the measured scale (`measured_scale_torch`);
        "uniform_scale"  the scale of uniform attention under the same mask: what the head
                         would show had it learned nothing;
        "departure"      the distance from that uniform attention (`departure_torch`).
    """
    n = weights[0].shape[-1]
    keep = None if lengths is None else \
        torch.arange(n, device=weights[0].device)[None] < lengths[:, None] + 1
    stats = {"scale": [], "uniform_scale": [], "departure": []}
    for w, m in zip(weights, masks):
        flat = uniform_weights_torch(m.expand(w.shape), w.dtype)
        stats["scale"].append(measured_scale_torch(w, keep).cpu().numpy())
        stats["uniform_scale"].append(measured_scale_torch(flat, keep).cpu().numpy())
        stats["departure"].append(departure_torch(w, m, keep).cpu().numpy())
    return {k: np.stack(v) for k, v in stats.items()}


@torch.no_grad()
def pretrained_head_scales(encoder, tokenizer, texts: list[str], batch_size: int = 64
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The scale of every head of a pretrained BERT-style encoder (`encoder.MiniLMEncoder`), per
    sentence, with the attention sinks [CLS] and [SEP] taken out.

    BERT heads park much of their weight on [CLS] and [SEP] (an "attention sink": a no-op
    target), which sit at both ends and would make every head look wide. So the first and the
    last real token are removed as keys and as queries, and each query's weights are
    renormalised over the words that are left (`drop_keys_torch`).
    Returns (S, L, H) measured scales and (S, L, H) the scales of uniform attention over the
    same words (the reference: a head that attends evenly to the whole sentence).
    """
    device = next(encoder.parameters()).device
    measured, uniform = [], []
    for start in range(0, len(texts), batch_size):
        ids, mask = encode_batch(tokenizer, texts[start:start + batch_size], device)
        _, weights = encoder.run(ids, mask, need_weights=True)  # L × (B, H, N, N)
        n = ids.shape[1]
        pos = torch.arange(n, device=device)[None]
        words = mask & (pos > 0) & (pos < mask.sum(1, keepdim=True) - 1)  # no [CLS], no [SEP]
        flat = uniform_weights_torch(words[:, None, None, :].expand(-1, 1, n, n))
        for b in range(ids.shape[0]):
            keep = words[b:b + 1]
            measured.append([measured_scale_torch(drop_keys_torch(w[b:b + 1], keep), keep)
                             .cpu().numpy() for w in weights])
            uniform.append([measured_scale_torch(flat[b:b + 1], keep).cpu().numpy()
                            .repeat(weights[0].shape[1])] * len(weights))
    return np.array(measured), np.array(uniform)
