"""Exercise 5.1 with the mask left out of the softmax: padded source positions get weight."""
import numpy as np
import torch

from minattn.attention import softmax_np, softmax_torch

EXERCISE = "5.1"
EXPECT = "padded source positions get weight"


def luong_attention_np(s, h, W_a, mask=None, uniform=False):
    scores = np.einsum("btd,kde,bne->bktn", s, W_a, h)
    if uniform:
        scores = np.zeros_like(scores)
    alpha = softmax_np(scores)
    return np.einsum("bktn,bnd->btd", alpha, h), alpha


def luong_attention_torch(s, h, W_a, mask=None, uniform=False):
    scores = torch.einsum("btd,kde,bne->bktn", s, W_a, h)
    if uniform:
        scores = torch.zeros_like(scores)
    alpha = softmax_torch(scores)
    return torch.einsum("bktn,bnd->btd", alpha, h), alpha
