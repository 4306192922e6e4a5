"""Exercise 4.1 dropping the last row of the reshaped table instead of the first."""
import numpy as np
import torch.nn.functional as F

EXERCISE = "4.1"
EXPECT = "drop the first row of the reshaped table, not the last"


def rel_shift_np(scores):
    *lead, Lq, Lk = scores.shape
    padded = np.concatenate([np.zeros((*lead, Lq, 1), scores.dtype), scores], axis=-1)
    padded = padded.reshape(*lead, Lk + 1, Lq)
    return padded[..., :-1, :].reshape(*lead, Lq, Lk)


def rel_shift_torch(scores):
    *lead, Lq, Lk = scores.shape
    padded = F.pad(scores, (1, 0)).reshape(*lead, Lk + 1, Lq)
    return padded[..., :-1, :].reshape(*lead, Lq, Lk)
