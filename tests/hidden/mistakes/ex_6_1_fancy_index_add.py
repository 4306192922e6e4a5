"""Exercise 6.1 adding the counts with counts[x, y] += ...: a cell a pair names twice (a word
repeated in a sentence) gets one of its additions."""
import numpy as np

from minattn.ibm1 import check_covered, token_weights_np

EXERCISE = "6.1"
EXPECT = "np.add.at"


def e_step_np(t, bitext, mode="textbook"):
    counts, loglik = np.zeros_like(t), 0.0
    for x, y in bitext.pairs():
        p = t[np.ix_(x, y)].T
        Z = p.sum(axis=1)
        a = p / Z[:, None]
        w = token_weights_np(y, mode)
        counts[x[None, :], y[:, None]] += w[:, None] * a
        loglik += float(w @ np.log(Z / len(x)))
    check_covered(t, loglik)
    return counts, loglik
