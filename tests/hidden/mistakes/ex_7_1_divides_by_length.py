"""Exercise 7.1 dividing the sum of the real tokens by the length L, padding included."""
import numpy as np

EXERCISE = "7.1"
EXPECT = "divide by the number of real tokens"


def mean_pool_np(states, mask):
    return np.where(mask[..., None], states, 0.0).sum(axis=1) / states.shape[1]
