"""Exercise 6.1 normalising the posteriors over the output words instead of the source words."""
import numpy as np

from minattn.ibm1 import check_covered, token_weights_np

EXERCISE = "6.1"
EXPECT = "must sum to 1 over the source words"


def e_step_np(t, bitext, mode="textbook"):
    counts, loglik = np.zeros_like(t), 0.0
    for x, y in bitext.pairs():
        p = t[np.ix_(x, y)].T
        Z = p.sum(axis=1)
        a = p / p.sum(axis=0, keepdims=True)
        w = token_weights_np(y, mode)
        np.add.at(counts, (x[None, :], y[:, None]), w[:, None] * a)
        loglik += float(w @ np.log(Z / len(x)))
    check_covered(t, loglik)
    return counts, loglik


def alignment_matrix_np(t, bitext, m):
    x, y = bitext.pair(m)
    p = t[np.ix_(x, y)].T
    return p / p.sum(axis=0, keepdims=True)
