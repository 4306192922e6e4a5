"""Exercise 1.1's torch twin written with NumPy calls on the tensor's values: it returns a
NumPy array (and no gradient could flow)."""
import numpy as np

EXERCISE = "1.1"
EXPECT = "softmax_torch returned a NumPy array; the torch twin must return a tensor"


def softmax_torch(scores, mask=None):
    x = np.asarray(scores)
    if mask is not None:
        x = np.where(np.asarray(mask), x, -np.inf)
    exp = np.exp(x - x.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)
