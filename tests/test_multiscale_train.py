"""Lesson 03's training runs (minattn/course/multiscale.py): seeded functions of their model
and seed; the sentence classifier keeps its best development epoch. (The lesson run without its
data is in tests/test_lessons.py, beside the other lesson runs.)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from minattn.course.multiscale import (
    effective_scale_task,
    fit_effective_scale,
    fit_partner,
    fit_sentences,
    partner_task,
    right_per_sentence,
)
from minattn.multiscale import MultiScaleTransformer, ScaleAllocation, allocate_scales_np


def test_a_batch_without_padding_gives_what_full_lengths_give():
    """No lengths (nothing padded, the kernel's cached band mask) and lengths = N everywhere
    (a key-padding mask that hides nothing) are the same model."""
    torch.manual_seed(0)
    model = MultiScaleTransformer(6, 10, [[1, 3], [2, 8]], 3).double()
    x = torch.randn(4, 9, 6, dtype=torch.float64)
    full = torch.full((4,), 9)
    assert torch.allclose(model(x), model(x, full), atol=1e-12)
    short = torch.tensor([9, 5, 9, 2])
    assert not torch.allclose(model(x), model(x, short))


def _sentences(n, rng):
    """Token ids (n, 8) with lengths 3..8; label 1 when token 2 occurs."""
    lengths = torch.from_numpy(rng.integers(3, 9, n))
    ids = torch.from_numpy(rng.integers(2, 6, (n, 8)))
    ids[torch.arange(8)[None] >= lengths[:, None]] = 0
    return ids, lengths, (ids == 2).any(1).long()


def _text_model(seed):
    torch.manual_seed(seed)
    return MultiScaleTransformer(4, 8, ScaleAllocation(allocate_scales_np(2, 5, 2, 0.5)), 2,
                                 embedding=nn.Embedding(6, 4, padding_idx=0))


def test_fit_sentences_keeps_its_best_epoch_and_repeats_itself():
    rng = np.random.default_rng(0)
    data = {s: _sentences(n, rng) for s, n in (("train", 64), ("valid", 32), ("test", 40))}
    results = []
    for _ in range(2):
        model = _text_model(0)
        epoch, right, valid = fit_sentences(model, data, epochs=3, seed=0, batch_size=16,
                                            progress=False)
        assert 1 <= epoch <= 3 and right.shape == (40,) and right.dtype == bool
        assert len(valid) == 3 and valid[epoch - 1] == max(valid) > max(valid[:epoch - 1] + [-1])
        assert np.array_equal(right, right_per_sentence(model, data["test"]))
        results.append((epoch, right))
    assert results[0][0] == results[1][0] and np.array_equal(results[0][1], results[1][1])


def test_the_synthetic_runs_are_seeded():
    test_pairs = partner_task(16, 32, 3, np.random.default_rng(1))
    test_reach = effective_scale_task(16, 12, 4, 1, torch.Generator().manual_seed(1))
    out = []
    for _ in range(2):
        torch.manual_seed(0)
        pair = MultiScaleTransformer(8, 8, [[3, 16]], 2, max_pool=False,
                                     embedding=nn.Embedding(12, 8))
        torch.manual_seed(0)
        flex = MultiScaleTransformer(4, 8, [[3, 6]] * 2, 4, max_len=12, max_pool=False)
        history = fit_effective_scale(flex, 0, 4, test_reach, eval_every=2,
                                      stop=lambda h: True, progress=False)
        out.append((fit_partner(pair, 0, 3, test_pairs, 32, 3, progress=False),
                    history["nmse"]))
    assert out[0] == out[1] and len(out[0][1]) == 1  # stopped after its first evaluation
