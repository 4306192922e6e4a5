"""Exercise 2.1 with |i - j| < w: the window one key short on each side."""
import numpy as np

EXERCISE = "2.1"
EXPECT = "|i - j| = w is inside the window"


def sliding_window_mask_np(n, w, causal=False):
    i, j = np.ogrid[:n, :n]
    mask = np.abs(i - j) < w
    if causal:
        mask &= j <= i
    return mask


def dilated_window_mask_np(n, w, dilation, causal=False):
    i, j = np.ogrid[:n, :n]
    mask = (np.abs(i - j) < w * dilation) & ((i - j) % dilation == 0)
    if causal:
        mask &= j <= i
    return mask
