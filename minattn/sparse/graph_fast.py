"""A pattern's diameter by breadth-first search: `patterns.diameter_np`, fast.

`hops_np` states the idea: one layer after another, a boolean matrix product, N³ work per
layer. A sparse mask has far fewer edges than N², and a breadth-first search from every token
costs N × (number of edges) in all, which lets lesson 02 measure diameters of patterns with
thousands of tokens in a fraction of a second. tests/test_sparse.py checks it equals
`diameter_np`.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from .patterns import check_square_mask


def diameter_fast_np(mask: np.ndarray) -> float:
    """`diameter_np` by breadth-first search (scipy.sparse.csgraph).

    mask: (N, N) bool, mask[i, j] = True is an edge j -> i. Returns the number of layers after
    which every i has heard from every j it could (every j, or every j <= i for a causal
    mask); inf when some such pair is never connected.
    """
    check_square_mask(mask)
    n = mask.shape[0]
    # dist[j, i]: the fewest edges j -> ... -> i (inf if none): the search runs along mask.T
    dist = shortest_path(csr_matrix(mask.T), method="D", unweighted=True)
    causal = not np.triu(mask, k=1).any()
    targets = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    return float(dist.T[targets].max())
