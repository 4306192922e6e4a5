"""Why attention divides its scores by √d (Vaswani et al. 2017, §3.2.1): how sensitive each
softmax row is to its scores, with and without the scaling, measured row by row on random
queries and keys (lesson 01, section 5).

For one query q with keys k_1..k_n and weights P = softmax(c q·k) (c = 1/√d, or 1 unscaled):

    J = ∂P/∂S = diag(P) − P Pᵀ                      how much the scores move the weights
    ∂P/∂q = J K c,   row j: c P_j (k_j − k̄),  k̄ = Σ_j P_j k_j     the gradient reaching q

Their Frobenius norms are computed in closed form, without an (n, n) or (n, n_keys, d) array.
"""

from __future__ import annotations

import numpy as np

from ..checks import check_size, fail
from .reference import softmax_np


def softmax_rows_np(d: int, rng: np.random.Generator, n_queries: int = 100,
                    n_keys: int = 64) -> dict[bool, dict[str, np.ndarray]]:
    """Random unit-variance queries q (n_queries, d), each with its own keys (n_keys, d). For
    the scaled (key True: q·k/√d) and raw (key False: q·k) scores, per query row (n_queries,):
    'max_weight' the largest weight, 'jacobian' ‖∂P/∂S‖ and 'to_q' ‖∂P/∂q‖ (Frobenius norms)."""
    d, n_queries, n_keys = (check_size(name, value, 1) for name, value in
                            (("d", d), ("n_queries", n_queries), ("n_keys", n_keys)))
    if not isinstance(rng, np.random.Generator):
        fail("rng", "a numpy.random.Generator (np.random.default_rng(seed))", repr(rng)[:60])
    q = rng.standard_normal((n_queries, d))
    k = rng.standard_normal((n_queries, n_keys, d))
    rows = {}
    for scaled in (True, False):
        c = 1 / np.sqrt(d) if scaled else 1.0
        p = softmax_np(np.einsum("nd,nkd->nk", q, k) * c)  # (n, n_keys)
        # ‖diag(p) − p pᵀ‖_F² = Σ p² − 2 Σ p³ + (Σ p²)²   (rounding: ~1e-8, far below what we read)
        s2, s3 = (p ** 2).sum(-1), (p ** 3).sum(-1)
        jacobian = np.sqrt(np.clip(s2 - 2 * s3 + s2 ** 2, 0, None))
        k_bar = np.einsum("nk,nkd->nd", p, k)  # Σ_j p_j k_j
        # ‖k_j − k̄‖² = ‖k_j‖² − 2 k_j·k̄ + ‖k̄‖², without an (n, n_keys, d) temporary
        spread = (np.einsum("nkd,nkd->nk", k, k) - 2 * np.einsum("nkd,nd->nk", k, k_bar)
                  + (k_bar ** 2).sum(-1, keepdims=True))
        to_q = c * np.sqrt(np.clip(np.einsum("nk,nk->n", p ** 2, spread), 0, None))
        rows[scaled] = dict(max_weight=p.max(-1), jacobian=jacobian, to_q=to_q)
    return rows
