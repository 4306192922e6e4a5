"""Exercise 4.1 with the zero column padded on the right of the scores instead of the left."""
import numpy as np
import torch

EXERCISE = "4.1"
EXPECT = "the zero column goes on the left"


def rel_shift_np(scores):
    *lead, Lq, Lk = scores.shape
    padded = np.concatenate([scores, np.zeros((*lead, Lq, 1), scores.dtype)], axis=-1)
    padded = padded.reshape(*lead, Lk + 1, Lq)
    return padded[..., 1:, :].reshape(*lead, Lq, Lk)


def rel_shift_torch(scores):
    *lead, Lq, Lk = scores.shape
    padded = torch.cat([scores, scores.new_zeros((*lead, Lq, 1))], dim=-1)
    padded = padded.reshape(*lead, Lk + 1, Lq)
    return padded[..., 1:, :].reshape(*lead, Lq, Lk)
