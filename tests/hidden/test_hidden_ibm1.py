"""Teacher-only probes for lesson 06's exercises (IBM Model 1)."""

import numpy as np
import pytest
import torch

from minattn import ibm1
from minattn.course.lstm_attention import dictionary_corpus, permutation_corpus
from minattn.fast import ibm1 as ibm1_fast


@pytest.mark.exercise("6.1")
def test_e_step_with_repeated_words_on_both_sides_and_null():
    # c_x > 1 and k_y > 1 in one pair: each source POSITION is a candidate, each target token
    # counts once (textbook) or 1/k (nltk). Checked against the per-position formula written out.
    bx = ibm1.make_bitext([["a", "a", "b"]], [["A", "A", "B"]])
    rng = np.random.default_rng(0)
    t = rng.uniform(0.1, 1.0, (len(bx.src_vocab), len(bx.tgt_vocab)))
    x, y = bx.pair(0)
    for mode, w in (("textbook", [1, 1, 1]), ("nltk", [0.5, 0.5, 1])):
        counts, loglik = ibm1.e_step_np(t, bx, mode)
        expected, ll = np.zeros_like(t), 0.0
        for j, yj in enumerate(y):
            Z = sum(t[xi, yj] for xi in x)
            for xi in x:
                expected[xi, yj] += w[j] * t[xi, yj] / Z
            ll += w[j] * np.log(Z / len(x))
        np.testing.assert_allclose(counts, expected, rtol=1e-13)
        assert loglik == pytest.approx(ll, rel=1e-13)


@pytest.mark.exercise("6.1")
def test_e_step_leaves_its_input_alone_and_keeps_dtype():
    bx = ibm1.make_bitext(*dictionary_corpus(20, 6, np.random.default_rng(1))[:2])
    t = ibm1.uniform_table_np(bx)
    before = t.copy()
    ibm1.e_step_np(t, bx)
    assert np.array_equal(t, before)
    t32 = torch.as_tensor(t, dtype=torch.float32)
    counts, _ = ibm1.e_step_torch(t32, bx)
    assert counts.dtype == torch.float32
    np.testing.assert_allclose(counts.numpy(), ibm1.e_step_np(t, bx)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.exercise("6.2")
def test_m_step_leaves_counts_alone_and_fast_path_agrees():
    rng = np.random.default_rng(2)
    src, tgt = dictionary_corpus(40, 8, rng)[:2]
    bx, fb = ibm1.make_bitext(src, tgt), ibm1_fast.index_bitext(src, tgt)
    counts = ibm1.e_step_np(ibm1.uniform_table_np(bx), bx)[0]
    before = counts.copy()
    t = ibm1.m_step_np(counts, floor=1e-12)
    assert np.array_equal(counts, before)
    sparse = counts[fb.entry_src, fb.entry_tgt]
    np.testing.assert_allclose(ibm1_fast.m_step_fast_np(sparse, fb, 1e-12),
                               t[fb.entry_src, fb.entry_tgt],
                               rtol=1e-14)


@pytest.mark.exercise("6.4")
def test_em_race_answer_matches_a_fresh_run():
    from minattn.course.answers import ibm1 as answers

    bx = ibm1_fast.index_bitext(*permutation_corpus(500, 40, 50, np.random.default_rng(5)),
                           null=False)
    diag = np.array([ibm1_fast.entry_index(bx, w, w) for w in bx.src_vocab[1:]])
    t = ibm1_fast.uniform_table_fast_np(bx)
    for step in range(1, 41):
        t = ibm1_fast.m_step_fast_np(ibm1_fast.e_step_fast_np(t, bx)[0], bx)
        if t[diag].mean() > 0.5:
            break
    assert abs(answers.em_race_40_of_50() - step) <= 1


# ----------------------------------------------------------------------------- answer (6.3)
@pytest.mark.exercise("6.3")
def test_prediction_zero_gradient_tables():
    from minattn.course.answers import ibm1 as answers

    assert answers.zero_gradient_tables() == {"a"}
