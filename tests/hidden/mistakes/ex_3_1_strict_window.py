"""Exercise 3.1 with |i - j| < ω_h: each head's window one key short on each side."""
import numpy as np

EXERCISE = "3.1"
EXPECT = "|i - j| = w is inside the window"


def scale_mask_np(n, windows, n_global=0):
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    mask = np.abs(i - j)[None] < np.array(windows)[:, None, None]
    mask[:, :n_global, :] = True
    mask[:, :, :n_global] = True
    return mask
