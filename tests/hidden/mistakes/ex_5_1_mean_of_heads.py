"""Exercise 5.1 averaging the heads' contexts instead of summing them."""
import numpy as np
import torch

from minattn.attention import softmax_np, softmax_torch

EXERCISE = "5.1"
EXPECT = "the heads' contexts are averaged"


def luong_attention_np(s, h, W_a, mask=None, uniform=False):
    scores = np.einsum("btd,kde,bne->bktn", s, W_a, h)
    if uniform:
        scores = np.zeros_like(scores)
    alpha = softmax_np(scores, None if mask is None else mask[:, None, None, :])
    return np.einsum("bktn,bnd->bktd", alpha, h).mean(axis=1), alpha


def luong_attention_torch(s, h, W_a, mask=None, uniform=False):
    scores = torch.einsum("btd,kde,bne->bktn", s, W_a, h)
    if uniform:
        scores = torch.zeros_like(scores)
    alpha = softmax_torch(scores, None if mask is None else mask[:, None, None, :])
    return torch.einsum("bktn,bnd->bktd", alpha, h).mean(dim=1), alpha
