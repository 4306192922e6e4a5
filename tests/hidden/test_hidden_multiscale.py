"""Teacher-only probes for lesson 03's exercises (removed from student copies)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minattn.course.answers.multiscale import uniform_window_scale
from minattn.multiscale import (
    allocate_scales_np,
    measured_scale_np,
    scale_mask_np,
    scale_mask_torch,
)
from minattn.sparse import sliding_window_mask_np


def _inverse_cdf_counts(heads, scales, layers, alpha):
    """The allocation rule head by head: head h takes the first scale whose cumulative share
    exceeds h / N' (an independent restatement, no ceil)."""
    rows = []
    for layer in range(layers):
        t = 1.0 - 2.0 * layer / (layers - 1) if layers > 1 else 1.0
        z = np.array([alpha * (scales - 1 - k) * t for k in range(scales)])
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        cum = np.cumsum(p)
        row = np.zeros(scales, dtype=int)
        for h in range(heads):
            row[int(np.argmax(cum > h / heads + 1e-12))] += 1
        rows.append(row)
    return np.array(rows)


@pytest.mark.exercise("3.2")
@pytest.mark.parametrize("heads,scales,layers,alpha", [(12, 4, 4, 0.7), (6, 6, 2, -1.3),
                                                        (9, 5, 5, 2.0), (10, 5, 3, 0.5)])
def test_hidden_allocation_matches_head_by_head_rule(heads, scales, layers, alpha):
    np.testing.assert_array_equal(allocate_scales_np(heads, scales, layers, alpha),
                                  _inverse_cdf_counts(heads, scales, layers, alpha))


@pytest.mark.exercise("3.2")
def test_hidden_allocation_returns_integers():
    counts = allocate_scales_np(10, 5, 3, 0.5)
    assert np.issubdtype(counts.dtype, np.integer) and counts.shape == (3, 5)


@pytest.mark.exercise("3.1")
def test_hidden_scale_mask_edge_cases():
    assert scale_mask_np(1, [0]).tolist() == [[[True]]]
    big = scale_mask_np(6, [100, 0])
    assert big[0].all() and (big[1] == np.eye(6, dtype=bool)).all()
    assert scale_mask_torch(6, [2, 0]).dtype == torch.bool
    assert scale_mask_np(6, np.array([2, 1])).shape == (2, 6, 6)


# ============================================================================ answer (3.3)
@pytest.mark.exercise("3.3")
def test_predicted_scale_of_a_uniform_head():
    n, w = 40, 3
    allowed = sliding_window_mask_np(n, w)[None, None].astype(float)  # (1, 1, N, N)
    uniform = allowed / allowed.sum(-1, keepdims=True)
    interior = np.zeros((1, n), dtype=bool)
    interior[0, w:n - w] = True  # queries whose whole window fits
    assert measured_scale_np(uniform, interior)[0] == pytest.approx(uniform_window_scale(),
                                                                    abs=1e-12)
