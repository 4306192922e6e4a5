"""Exercise 7.1's torch twin written with NumPy calls: it returns a NumPy array."""
import numpy as np

EXERCISE = "7.1"
EXPECT = "mean_pool_torch returned a NumPy array; the torch twin must return a tensor"


def mean_pool_torch(states, mask):
    real = np.asarray(mask)[..., None]
    return np.where(real, np.asarray(states), 0.0).sum(axis=1) / real.sum(axis=1)
