"""Teacher-only probes for lesson 08's exercises (minattn/agreement.py, answers)."""

import numpy as np
import pytest
import torch

from minattn import agreement as ag


@pytest.mark.exercise("8.1")
def test_hidden_agreement_ties_and_rounding():
    # n = 40: top ⌈2⌉ = 2 positions; n = 41: ⌈2.05⌉ = 3
    b = np.arange(40.0)
    assert ag.agreement_np(np.eye(40)[38], b) == 1.0 and ag.agreement_np(np.eye(40)[37], b) == 0.0
    assert ag.agreement_np(np.eye(41)[38], np.arange(41.0)) == 1.0
    # ties in b: a tie with the best counts as top
    assert ag.agreement_np(np.eye(5)[1], np.array([3.0, 3.0, 0, 0, 0])) == 1.0
    # masked positions never count, even if b is huge there
    mask = np.array([True, True, True, False])
    assert ag.agreement_np(np.array([0, 0, 1.0, 0]), np.array([0, 0, 1.0, 9.0]), mask) == 1.0
    t = ag.agreement_torch(torch.tensor([0, 0, 1.0, 0]), torch.tensor([0, 0, 1.0, 9.0]),
                           torch.tensor(mask))
    assert t.item() == 1.0


@pytest.mark.exercise("8.2")
def test_hidden_contextualized_agreement_takes_the_first_crossing_not_the_best():
    # the curve crosses at the second checkpoint, dips, and crosses again: ξ is the first
    assert ag.contextualized_agreement([0.2, 0.6, 0.4, 0.7], [50, 60, 70, 80], 0.5) == 60.0
    assert ag.contextualized_agreement([0.5, 0.5], [1.0, 2.0], 0.5) is None  # never above
    assert isinstance(ag.contextualized_agreement([0.9], [np.int64(3)], 0.1), float)


@pytest.mark.exercise("8.3")
def test_predicted_one_way_keyword_leader():
    from minattn.course.answers.agreement import CHOICES, one_way_keyword_leader

    assert one_way_keyword_leader() in CHOICES
    assert one_way_keyword_leader() == "after"
