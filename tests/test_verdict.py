"""The course's verdict rule (minattn/tools/verdict.py) on numbers whose verdict is known."""

import numpy as np
import pytest
import torch

from minattn.tools.verdict import (
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    combine,
    compare,
    estimate,
    rate,
    same,
    versus,
)


def test_a_difference_counts_beyond_twice_its_standard_error():
    assert compare([0.84, 0.85, 0.83], [0.55, 0.56, 0.54]).verdict == REPRODUCED
    assert compare([0.84, 0.85, 0.83], [0.55, 0.56, 0.54], expect="<").verdict == NOT_REPRODUCED
    assert compare([0.60, 0.50, 0.70], [0.55, 0.56, 0.54]).verdict == NOT_REPRODUCED  # noise
    assert compare(0.2, 0.1, paper_gap=0.5).verdict == PARTLY  # right way, under half the gap
    assert versus([0.9, 0.92], 0.5).verdict == REPRODUCED
    assert same([63.8, 64.3, 63.9], 64.0).verdict == REPRODUCED
    assert same(1e-3, 0.0, tolerance=1e-9).verdict == NOT_REPRODUCED
    assert combine(versus(1.0, 0.0), versus(0.0, 1.0)).verdict == PARTLY
    assert rate(10, 10).se > 0 and rate(0, 10).mean == 0


def test_numpy_and_torch_scalars_are_deterministic_numbers():
    for x in (np.float32(0.5), np.int64(3), np.array(2.5), torch.tensor(0.25), 7):
        e = estimate(x)
        assert e.se == 0 and e.n == 1 and e.mean == float(x)
    assert estimate(np.array([1.0, 3.0])).mean == 2.0  # per-seed values as an array


@pytest.mark.parametrize("bad", [[1.0], [1.0, float("nan")], float("inf"), "0.5", True])
def test_bad_numbers_are_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        estimate(bad)
