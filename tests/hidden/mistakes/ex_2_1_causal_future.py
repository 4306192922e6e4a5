"""Exercise 2.1 with the causal condition turned around: j >= i (the future) instead of j <= i."""
import numpy as np

EXERCISE = "2.1"
EXPECT = "a causal query sees the keys before it (j <= i), never after"


def sliding_window_mask_np(n, w, causal=False):
    i, j = np.ogrid[:n, :n]
    mask = np.abs(i - j) <= w
    if causal:
        mask &= j >= i
    return mask


def dilated_window_mask_np(n, w, dilation, causal=False):
    i, j = np.ogrid[:n, :n]
    mask = (np.abs(i - j) <= w * dilation) & ((i - j) % dilation == 0)
    if causal:
        mask &= j >= i
    return mask
