"""Exercise 1.2 with the 1/√d scale forgotten (in both twins)."""
import math

import numpy as np

from minattn.attention import softmax_np, softmax_torch

EXERCISE = "1.2"
EXPECT = "the scores are not divided by √d (d = 16): your weights are those of scale 1"


def attention_np(q, k, v, mask=None, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2)
    weights = softmax_np(scores, mask)
    return weights @ v, weights


def attention_torch(q, k, v, mask=None, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-1, -2)
    weights = softmax_torch(scores, mask)
    return weights @ v, weights
