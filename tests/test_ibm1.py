"""IBM Model 1: the readable reference (minattn/ibm1.py) by hand, against brute force
and NLTK; its torch twin; the fast path (minattn/fast/ibm1.py) equal to the reference; the
bag-of-words proxy's gradient at initialisation; bad input.

Direction everywhere: source x = input (English), target y = output (German); t(y | x).
NLTK's AlignedSent takes (words=target, mots=source), which `ibm1.nltk_bitext` handles.
"""

import itertools

import numpy as np
import pytest
import torch

from minattn import ibm1
from minattn.course.lstm_attention import dictionary_corpus, permutation_corpus
from minattn.fast import ibm1 as ibm1_fast

# NLTK's documented example (nltk/translate/ibm1.py docstring): English source, German target.
SRC = [["the", "house", "is", "small"], ["the", "house", "is", "big"],
       ["the", "book", "is", "small"], ["the", "house"], ["the", "book"], ["a", "book"]]
TGT = [["klein", "ist", "das", "haus"], ["das", "haus", "ist", "ja", "groß"],
       ["das", "buch", "ist", "ja", "klein"], ["das", "haus"], ["das", "buch"], ["ein", "buch"]]


def random_corpus(rng, n_pairs=150, n_src=9, n_tgt=7, max_len=7):
    """Small vocabularies and long-ish sentences: plenty of repeated words on both sides."""
    src = [[f"s{k}" for k in rng.integers(0, n_src, rng.integers(1, max_len))]
           for _ in range(n_pairs)]
    tgt = [[f"t{k}" for k in rng.integers(0, n_tgt, rng.integers(1, max_len))]
           for _ in range(n_pairs)]
    return src, tgt


def nltk_model(src, tgt, iterations):
    from nltk.translate import IBMModel1

    bitext = ibm1.nltk_bitext(src, tgt)
    return IBMModel1(bitext, iterations), bitext


def nltk_viterbi(bitext):
    """NLTK's alignments in ibm1.viterbi_np's format: one array per pair, -1 = NULL."""
    return [np.array([-1 if i is None else i for _, i in sorted(s.alignment)]) for s in bitext]


# ----------------------------------------------------------------------------- count table
def test_count_table_by_hand():
    # pair 1: x = (a, b), y = (A, A) -> C(a, A) += 2 * 1/2, C(b, A) += 2 * 1/2
    # pair 2: x = (a,),   y = (B,)   -> C(a, B) += 1
    bx = ibm1.make_bitext([["a", "b"], ["a"]], [["A", "A"], ["B"]], null=False)
    C = ibm1.count_table_np(bx)
    a, b, A, B = bx.src_index["a"], bx.src_index["b"], bx.tgt_index["A"], bx.tgt_index["B"]
    assert C[a, A] == 1.0 and C[b, A] == 1.0 and C[a, B] == 1.0 and C[b, B] == 0.0
    assert C.sum() == 3.0  # one unit per target token
    bn = ibm1.make_bitext([["a", "b"]], [["A"]])
    assert np.allclose(ibm1.count_table_np(bn)[:, 0], 1 / 3)  # NULL (row 0) is one more word


def test_count_table_of_the_documented_example():
    # what lesson 06 says: C(book, das) = 1/4 + 1/2, C(book, buch) = 1/4 + 1/2 + 1/2;
    # a tie for house
    bx = ibm1.make_bitext(SRC, TGT, null=False)
    C = ibm1.count_table_np(bx)
    at = lambda x, y: C[bx.src_index[x], bx.tgt_index[y]]
    assert at("book", "das") == 0.75 and at("book", "buch") == 1.25
    assert at("house", "das") == at("house", "haus") == 1.0


# ----------------------------------------------------------------------------- reference EM
@pytest.mark.exercise("6.1")
def test_e_step_by_hand():
    # x = (a, b) -> y = (A, B) and x = (a,) -> y = (A,), no NULL, t = 1/2 everywhere:
    # pair 1 splits each output over a and b (1/2 each), pair 2 gives A wholly to a.
    bx = ibm1.make_bitext([["a", "b"], ["a"]], [["A", "B"], ["A"]], null=False)
    counts, loglik = ibm1.e_step_np(ibm1.uniform_table_np(bx), bx)
    a, b, A, B = bx.src_index["a"], bx.src_index["b"], bx.tgt_index["A"], bx.tgt_index["B"]
    assert counts[a, A] == 1.5 and counts[a, B] == 0.5 and counts[b, A] == counts[b, B] == 0.5
    assert loglik == pytest.approx(3 * np.log(0.5))   # p(y_j | x) = 1/2 for each of 3 outputs
    # second step from t(A|a) = 3/4, t(B|a) = 1/4, t(A|b) = t(B|b) = 1/2: posteriors 3/5, 1/3
    t = ibm1.m_step_np(counts)
    counts, _ = ibm1.e_step_np(t, bx)
    assert counts[a, A] == pytest.approx(1 + 3 / 5) and counts[b, B] == pytest.approx(2 / 3)


@pytest.mark.exercise("6.1")
@pytest.mark.parametrize("mode", ["textbook", "nltk"])
def test_e_step_against_brute_force_over_alignments(rng, mode):
    # p(y | x) = Σ over every alignment a of Π_j t(y_j | x_{a_j}) / n^J, enumerated; the expected
    # count of (x, y) is the posterior-weighted number of links x -> y.
    src, tgt = random_corpus(rng, n_pairs=6, max_len=4)
    bx = ibm1.make_bitext(src, tgt)
    t = rng.uniform(0.1, 1.0, (len(bx.src_vocab), len(bx.tgt_vocab)))
    _check_count_mass(t, bx, mode)
    counts, loglik = ibm1.e_step_np(t, bx, mode)
    expected, ll = np.zeros_like(t), 0.0
    for x, y in bx.pairs():
        w = ibm1.token_weights_np(y, mode)
        aligns = list(itertools.product(range(len(x)), repeat=len(y)))
        probs = np.array([np.prod([t[x[i], y[j]] for j, i in enumerate(a)]) for a in aligns])
        for a, p in zip(aligns, probs / probs.sum()):
            for j, i in enumerate(a):
                expected[x[i], y[j]] += w[j] * p
        ll += w @ np.log(t[np.ix_(x, y)].sum(axis=0) / len(x))    # per token, Σ_i t / n
        if mode == "textbook":
            assert np.log(probs.sum() / len(x) ** len(y)) == pytest.approx(
                (np.log(t[np.ix_(x, y)].sum(axis=0) / len(x))).sum())
    np.testing.assert_allclose(counts, expected, rtol=1e-12, atol=1e-15)
    assert loglik == pytest.approx(ll, rel=1e-12)
    assert counts.sum() == pytest.approx(sum(ibm1.token_weights_np(y, mode).sum() for y in bx.tgt))


def _check_count_mass(t, bx, mode):
    """Each output word y_j hands out its weight w_j over the source words: the counts of one
    pair add up to Σ_j w_j. A pair off by that measure says which slip it is: with no cell
    named twice, the posteriors' normalisation; with one, the additions that did not land."""
    off = []
    for m in range(bx.n_pairs):
        x, y = bx.pair(m)
        alone = ibm1.Bitext(bx.src_vocab, bx.tgt_vocab, [bx.src[m]], [bx.tgt[m]], bx.null)
        mass = ibm1.e_step_np(t, alone, mode)[0].sum()
        want = ibm1.token_weights_np(y, mode).sum()
        if not np.isclose(mass, want, rtol=1e-12):
            twice = len(set(x)) < len(x) or len(set(y)) < len(y)
            off.append((twice, f"pair {m}'s counts add up to {mass:.4f}, not Σ_j w_j = {want:.4f}"))
    for twice, where in sorted(off):
        assert twice, (f"{where}: the posteriors a_ji of each output word y_j must sum to 1 over "
                       "the source words x_i (NULL included)")
        raise AssertionError(f"{where}; a word repeated in the pair names a cell twice, and "
                             "counts[x, y] += ... keeps one of its additions: np.add.at adds "
                             "them all")


@pytest.mark.exercise("6.1")
def test_alignment_matrix_is_the_e_step_posterior(rng):
    bx = ibm1.make_bitext(*random_corpus(rng, n_pairs=5))
    t = rng.uniform(0.1, 1.0, (len(bx.src_vocab), len(bx.tgt_vocab)))
    for m in range(bx.n_pairs):
        a = ibm1.alignment_matrix_np(t, bx, m)
        x, y = bx.pair(m)
        assert a.shape == (len(y), len(x)), (
            f"the shapes differ: {a.shape} vs {(len(y), len(x))}: (output words, source words)")
        assert np.allclose(a.sum(axis=1), 1.0), (
            "the posteriors a_ji of each output word y_j must sum to 1 over the source words x_i "
            "(NULL included): normalise each row of the (J, n) table")
        # the counts e_step_np adds for pair m alone are exactly these posteriors
        alone = ibm1.Bitext(bx.src_vocab, bx.tgt_vocab, [bx.src[m]], [bx.tgt[m]], True)
        counts, _ = ibm1.e_step_np(t, alone)
        expected = np.zeros_like(t)
        np.add.at(expected, (x[None, :], y[:, None]), a)
        np.testing.assert_allclose(counts, expected, rtol=1e-13)


@pytest.mark.exercise("6.2")
def test_m_step_normalises_each_source_word(rng):
    counts = rng.uniform(0.0, 2.0, (6, 5))
    counts[2, 3] = 0.0
    t = ibm1.m_step_np(counts)
    np.testing.assert_allclose(t.sum(axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(t[4], counts[4] / counts[4].sum(), rtol=1e-14)
    floored = ibm1.m_step_np(np.where(np.arange(5) == 0, 1e-30, counts), floor=1e-12)
    assert np.all(floored[:, 0] == 1e-12) and floored[2, 3] == 0.0   # floor only where counted
    assert np.all(ibm1.m_step_np(np.zeros((2, 3))) == 0.0)            # an empty row stays 0


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
@pytest.mark.parametrize("null", [False, True])
def test_one_em_step_from_uniform_is_the_normalised_count_table(rng, null):
    bx = ibm1.make_bitext(*random_corpus(rng, n_pairs=60), null=null)
    t, _ = ibm1.em_np(bx, 1)
    C = ibm1.count_table_np(bx)
    rows = C.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(t, np.divide(C, rows, out=np.zeros_like(C), where=rows > 0),
                               rtol=0, atol=1e-14)


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
@pytest.mark.parametrize("mode", ["textbook", "nltk"])
def test_likelihood_never_decreases(rng, mode):
    # nltk mode is EM on the objective where a word repeated k times in a sentence counts 1/k
    _, history = ibm1.em_np(ibm1.make_bitext(*random_corpus(rng, n_pairs=60)), 12, mode=mode)
    steps = np.diff(history)
    assert np.all(steps >= -1e-9 * np.abs(history[:-1])), steps
    assert history[-1] > history[0]


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
def test_recovers_a_hidden_dictionary():
    rng = np.random.default_rng(3)
    src, tgt, dictionary = dictionary_corpus(300, 20, rng, n_function=3)
    bx = ibm1.make_bitext(src, tgt)
    best = lambda t, x: ibm1.top_translations_np(t, bx, x, 1)[0][0]
    t, _ = ibm1.em_np(bx, 15)
    wrong = {x: best(t, x) for x, y in dictionary.items() if x in bx.src_index and best(t, x) != y}
    assert not wrong, wrong
    one_step, _ = ibm1.em_np(bx, 1)  # the raw counts alone are not enough: EM is doing work
    assert not all(best(one_step, x) == y for x, y in dictionary.items() if x in bx.src_index)


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
def test_flat_permutation_corpus_has_nothing_to_learn():
    # 40-of-40 copying (Snell et al. 2021, §3.3): every pair holds the same word set, so C and
    # EM stay flat
    rng = np.random.default_rng(0)
    bx = ibm1.make_bitext(*permutation_corpus(30, 8, 8, rng), null=False)
    t, _ = ibm1.em_np(bx, 10)
    assert np.allclose(t[1:], 1 / 8, atol=1e-12)
    bx = ibm1.make_bitext(*permutation_corpus(150, 8, 12, rng), null=False)  # 8-of-12
    t, _ = ibm1.em_np(bx, 10)
    assert all(ibm1.top_translations_np(t, bx, x, 1)[0][0] == x for x in bx.src_vocab[1:])


# ----------------------------------------------------------------------------- NLTK parity
@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
def test_nltk_mode_reproduces_nltk_documented_example():
    bx = ibm1.make_bitext(SRC, TGT)  # ours first: an exercise stubbed out fails before NLTK runs
    t, _ = ibm1.em_np(bx, 5, mode="nltk")
    model, bitext = nltk_model(SRC, TGT, 5)
    theirs = ibm1.nltk_table_np(model, bx)
    np.testing.assert_allclose(t[t > 0], theirs[t > 0], rtol=0, atol=1e-12)
    # the numbers printed in NLTK's docstring; t(y | x) = translation_table[y][x]
    at = lambda x, y: round(t[bx.src_index[x], bx.tgt_index[y]], 3)
    assert (at("book", "buch"), at("book", "das"), at(None, "buch"), at(None, "ja")) == (
        0.889, 0.062, 0.113, 0.073)
    ours = ibm1.viterbi_np(t, bx)
    assert all(np.array_equal(a, b) for a, b in zip(ours, nltk_viterbi(bitext)))
    assert list(ours[2]) == [0, 1, 2, 2, 3]


def test_start_table_is_nltks(rng):
    src, tgt = random_corpus(rng, n_pairs=40)
    model, _ = nltk_model(src, tgt, 0)
    bx, fb = ibm1.make_bitext(src, tgt), ibm1_fast.index_bitext(src, tgt)
    np.testing.assert_array_equal(ibm1.uniform_table_np(bx), ibm1.nltk_table_np(model, bx))
    np.testing.assert_array_equal(ibm1_fast.uniform_table_fast_np(fb),
                                  ibm1_fast.nltk_table_fast_np(model, fb))


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
@pytest.mark.parametrize("iterations", [1, 6])
def test_nltk_mode_reproduces_nltk_on_a_random_corpus(rng, iterations):
    src, tgt = random_corpus(rng, n_pairs=80)
    bx = ibm1.make_bitext(src, tgt)
    t, _ = ibm1.em_np(bx, iterations, mode="nltk")
    model, bitext = nltk_model(src, tgt, iterations)
    support = ibm1.count_table_np(bx) > 0                     # every co-occurring pair
    np.testing.assert_allclose(t[support], ibm1.nltk_table_np(model, bx)[support],
                               rtol=0, atol=1e-12)
    assert all(np.array_equal(a, b) for a, b in zip(ibm1.viterbi_np(t, bx), nltk_viterbi(bitext)))


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
def test_textbook_mode_differs_from_nltk_only_through_repeated_target_words(rng):
    src, tgt = random_corpus(rng, n_pairs=60)
    bx = ibm1.make_bitext(src, tgt)
    assert np.abs(ibm1.em_np(bx, 4)[0] - ibm1.em_np(bx, 4, mode="nltk")[0]).max() > 1e-3
    bx = ibm1.make_bitext(src, [list(dict.fromkeys(y)) for y in tgt])   # no repeats: they agree
    np.testing.assert_allclose(ibm1.em_np(bx, 4)[0], ibm1.em_np(bx, 4, mode="nltk")[0],
                               rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- torch twin
@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
@pytest.mark.parametrize("mode, null", [("textbook", False), ("textbook", True), ("nltk", True)])
def test_torch_em_matches_numpy(rng, mode, null):
    bx = ibm1.make_bitext(*random_corpus(rng, n_pairs=60), null=null)
    t_np, h_np = ibm1.em_np(bx, 5, mode=mode)
    t_pt, h_pt = ibm1.em_torch(bx, 5, mode=mode, device="cpu")
    assert t_pt.dtype == torch.float64
    np.testing.assert_allclose(t_pt.numpy(), t_np, rtol=0, atol=1e-13)
    np.testing.assert_allclose(h_pt, h_np, rtol=1e-12)


@pytest.mark.cuda
def test_torch_em_on_cuda(rng):
    bx = ibm1.make_bitext(*random_corpus(rng, n_pairs=60))
    t_gpu, _ = ibm1.em_torch(bx, 5, mode="nltk", device="cuda")
    np.testing.assert_allclose(t_gpu.cpu().numpy(), ibm1.em_np(bx, 5, mode="nltk")[0],
                               rtol=0, atol=1e-12)
    fb = ibm1_fast.index_bitext(*random_corpus(rng))
    t_fast, _ = ibm1_fast.em_fast_torch(fb, 5, mode="nltk", device="cuda")
    np.testing.assert_allclose(t_fast, ibm1_fast.em_fast_np(fb, 5, mode="nltk")[0], rtol=0,
                               atol=1e-12)


# ----------------------------------------------------------------------------- fast path
@pytest.mark.parametrize("null", [False, True])
def test_packed_sort_and_general_path_index_the_same(rng, monkeypatch, null):
    # index_bitext packs each point into one int64 when the fields fit (PACK_BITS); with no bits
    # to spare it takes the general path (argsort + gathers). Both must give the same arrays.
    src, tgt = random_corpus(rng, n_pairs=80)
    fast = ibm1_fast.index_bitext(src, tgt, null=null)
    monkeypatch.setattr(ibm1_fast, "PACK_BITS", 0)
    slow = ibm1_fast.index_bitext(src, tgt, null=null)
    for name, value in vars(fast).items():
        if isinstance(value, np.ndarray):
            other = getattr(slow, name)
            assert value.dtype == other.dtype and np.array_equal(value, other), name
    # seg_entry (computed on first use) in corpus order by hand: entry of (x, y) per point
    key_entry = {(x, y): e for e, (x, y) in enumerate(zip(fast.entry_src, fast.entry_tgt))}
    bag = lambda m: fast.src_bag_word[fast.src_bag_start[m]:fast.src_bag_start[m + 1]]
    expected = [key_entry[(x, y)] for y, m in zip(fast.row_word, fast.row_pair)
                for x in [0] * null + list(bag(m))]                  # NULL first, then the bag
    np.testing.assert_array_equal(fast.seg_entry, expected)
    # the points in EM order are sorted by entry, ties (the same entry) in corpus order
    assert np.all(np.diff(fast.point_entry) >= 0)
    assert np.all(np.diff(fast.point_row)[np.diff(fast.point_entry) == 0] > 0)
    em = np.lexsort((fast.point_row, fast.point_entry))
    corpus_row = np.repeat(np.arange(len(fast.row_word)), np.diff(fast.seg_start))
    corpus = np.lexsort((corpus_row, fast.seg_entry))
    np.testing.assert_array_equal(fast.point_entry[em], fast.seg_entry[corpus])
    np.testing.assert_array_equal(fast.point_row[em], corpus_row[corpus])
    np.testing.assert_array_equal(fast.point_mult[em], fast.seg_mult[corpus])


@pytest.mark.exercise("6.2")  # runs full EM (reference and fast): needs 6.1 too
@pytest.mark.parametrize("mode, null", [("textbook", False), ("textbook", True), ("nltk", True)])
def test_fast_path_equals_the_reference(rng, mode, null):
    src, tgt = random_corpus(rng, n_pairs=100)
    bx, fb = ibm1.make_bitext(src, tgt, null=null), ibm1_fast.index_bitext(src, tgt, null=null)
    assert fb.src_vocab == bx.src_vocab and fb.tgt_vocab == bx.tgt_vocab   # the same word ids
    dense = lambda v: ibm1_fast.to_dense_np(v, fb)
    np.testing.assert_allclose(dense(ibm1_fast.count_table_fast_np(fb)), ibm1.count_table_np(bx),
                               rtol=0, atol=1e-13)
    t_ref, h_ref = ibm1.em_np(bx, 6, mode=mode)
    t_fast, h_fast = ibm1_fast.em_fast_np(fb, 6, mode=mode)
    np.testing.assert_allclose(dense(t_fast), t_ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(h_fast, h_ref, rtol=1e-13)
    for m in range(0, bx.n_pairs, 7):
        np.testing.assert_allclose(ibm1_fast.alignment_matrix_fast_np(t_fast, fb, m),
                                   ibm1.alignment_matrix_np(t_ref, bx, m), rtol=0, atol=1e-13)
    ref_a, fast_a = ibm1.viterbi_np(t_ref, bx), ibm1_fast.viterbi_fast_np(t_fast, fb)
    np.testing.assert_array_equal(fast_a, np.concatenate(ref_a))
    assert all(np.array_equal(a, b) for a, b in zip(ibm1_fast.split_pairs_np(fast_a, fb), ref_a))
    x = bx.src_vocab[2]
    assert [y for y, _ in ibm1_fast.top_translations_fast_np(t_fast, fb, x)] == [
        y for y, _ in ibm1.top_translations_np(t_ref, bx, x)]
    np.testing.assert_allclose(ibm1_fast.rows_np(t_fast, fb, [x]), t_ref[[bx.src_index[x]]])


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
@pytest.mark.parametrize("mode", ["textbook", "nltk"])
def test_fast_torch_matches_fast_numpy(rng, mode):
    fb = ibm1_fast.index_bitext(*random_corpus(rng))
    t_np, h_np = ibm1_fast.em_fast_np(fb, 5, mode=mode)
    t_pt, h_pt = ibm1_fast.em_fast_torch(fb, 5, mode=mode, device="cpu")
    np.testing.assert_allclose(t_pt, t_np, rtol=0, atol=1e-13)
    np.testing.assert_allclose(h_pt, h_np, rtol=1e-12)


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
@pytest.mark.parametrize("iterations", [1, 6])
def test_fast_path_reproduces_nltk_on_a_random_corpus(rng, iterations):
    src, tgt = random_corpus(rng, n_pairs=120)
    fb = ibm1_fast.index_bitext(src, tgt)
    t, _ = ibm1_fast.em_fast_np(fb, iterations, mode="nltk")
    model, bitext = nltk_model(src, tgt, iterations)
    # the same support: every co-occurring pair, NULL included
    nltk_support = {(x, y) for y, row in model.translation_table.items() for x in row}
    assert nltk_support == {(fb.src_vocab[x], fb.tgt_vocab[y])
                            for x, y in zip(fb.entry_src, fb.entry_tgt)}
    np.testing.assert_allclose(t, ibm1_fast.nltk_table_fast_np(model, fb), rtol=0, atol=1e-12)
    ours = ibm1_fast.split_pairs_np(ibm1_fast.viterbi_fast_np(t, fb), fb)
    assert all(np.array_equal(a, b) for a, b in zip(ours, nltk_viterbi(bitext)))


# ----------------------------------------------------------------------------- the proxy
def test_proxy_velocity_is_the_rate_of_change_of_the_logits():
    rng = np.random.default_rng(0)
    bx = ibm1.make_bitext(*dictionary_corpus(40, 8, rng)[:2], null=False)
    xbar, ycount = (torch.as_tensor(a) for a in ibm1.bag_matrices_np(bx))
    torch.manual_seed(0)
    model = ibm1.BagOfWordsProxy(xbar.shape[1], ycount.shape[1], 16).double()
    velocity = ibm1.proxy_logit_velocity_torch(model, xbar, ycount)
    before = model.word_logits().detach()
    lr = 1e-8  # a small gradient-descent step approximates the flow to first order
    ibm1.proxy_loss_torch(model, xbar, ycount).backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    change = (model.word_logits().detach() - before) / lr
    torch.testing.assert_close(change, velocity, rtol=1e-5, atol=1e-5)


def test_proxy_gradient_approaches_the_count_prediction_as_d_grows():
    rng = np.random.default_rng(1)
    bx = ibm1.make_bitext(*dictionary_corpus(150, 15, rng, n_function=2)[:2], null=False)
    small = np.mean([ibm1.proxy_agreement_torch(bx, 8, seed)[0] for seed in range(3)])
    r, measured, predicted = ibm1.proxy_agreement_torch(bx, 2048, 0)
    assert r > 0.98 and small < r - 0.1, (small, r)
    slope = (measured * predicted).sum() / (predicted ** 2).sum()
    assert slope == pytest.approx(1.0, abs=0.1)  # dθ/dt → 2 (C − mean_y C)


def test_proxy_prediction_is_zero_on_a_flat_table():
    bx = ibm1.make_bitext(*permutation_corpus(20, 6, 6, np.random.default_rng(0)),
                          null=False)
    assert np.abs(ibm1.proxy_prediction_np(ibm1.count_table_np(bx))).max() < 1e-12
    r, measured, _ = ibm1.proxy_agreement_torch(bx, 256, 0)
    assert np.isnan(r) and np.abs(measured).max() > 0   # only finite-d noise moves the logits


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("make", [ibm1.make_bitext, ibm1_fast.index_bitext])
@pytest.mark.parametrize("src, tgt, message", [
    ([], [], "^sources: expected at least one sentence pair"),
    ([["a"]], [["A"], ["B"]], "^targets: expected as many target sentences"),
    ([["a"], []], [["A"], ["B"]], "source sentence 1 as a non-empty list"),
    ([["a"]], [[]], "target sentence 0 as a non-empty list"),
    (["a b"], [["A"]], "source sentence 0 as a non-empty list.*got str"),
])
def test_bad_corpus(make, src, tgt, message):
    with pytest.raises(ValueError, match=message):
        make(src, tgt)


def test_bad_table_and_mode():
    bx, fb = ibm1.make_bitext(SRC, TGT), ibm1_fast.index_bitext(SRC, TGT)
    reference = (ibm1.e_step_np, ibm1.em_np, ibm1.top_translations_np, ibm1.uniform_table_np)
    fast = (ibm1_fast.e_step_fast_np, ibm1_fast.em_fast_np, ibm1_fast.top_translations_fast_np,
            ibm1_fast.uniform_table_fast_np)
    for (e_step, em, top_translations, uniform_table), corpus in ((reference, bx), (fast, fb)):
        with pytest.raises(ValueError, match="^t: expected"):
            e_step(np.ones(3), corpus)
        with pytest.raises(ValueError, match="^mode: expected one of textbook, nltk"):
            em(corpus, 1, mode="giza")
        with pytest.raises(ValueError, match="^x: expected a word of the source vocabulary"):
            top_translations(uniform_table(corpus), corpus, "haus")  # a target word
    with pytest.raises(ValueError, match="^counts: expected float \\(E,\\)"):
        ibm1_fast.m_step_fast_np(np.ones((2, 2)), fb)
    with pytest.raises(ValueError, match="of this corpus"):
        ibm1.e_step_torch(torch.ones(3, 3, dtype=torch.float64), bx)
    for em, make in ((ibm1.em_np, ibm1.make_bitext),
                     (ibm1_fast.em_fast_np, ibm1_fast.index_bitext)):
        with pytest.raises(ValueError, match="NULL"):
            em(make(SRC, TGT, null=False), 1, mode="nltk")
    with pytest.raises(ValueError, match="no NULL"):
        ibm1.proxy_agreement_torch(bx, 8)


# ----------------------------------------------------------------------------- real data
@pytest.mark.realdata
@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
def test_fast_path_reproduces_nltk_on_bible_verses():
    data = pytest.importorskip("minattn.course.data")
    if not data.available("bible"):
        pytest.skip("Bible corpus not fetched (python data_scripts/bible.py)")
    pairs = data.load_parallel(pair="en-de")[:300]
    src = [data.tokenize(en) for en, _ in pairs]     # source x = English (input)
    tgt = [data.tokenize(de) for _, de in pairs]     # target y = German (output)
    fb = ibm1_fast.index_bitext(src, tgt)  # ours first, as above
    t, _ = ibm1_fast.em_fast_np(fb, 5, mode="nltk")
    model, bitext = nltk_model(src, tgt, 5)
    np.testing.assert_allclose(t, ibm1_fast.nltk_table_fast_np(model, fb), rtol=0, atol=1e-12)
    ours = ibm1_fast.viterbi_fast_np(t, fb)
    theirs = np.concatenate(nltk_viterbi(bitext))
    # Viterbi choices agree except where two words tie in exact arithmetic (rounding decides)
    for j in np.flatnonzero(ours != theirs):
        m = int(np.searchsorted(fb.tgt_start, j, side="right") - 1)
        y = tgt[m][j - fb.tgt_start[m]]
        pick = [None if c < 0 else src[m][c] for c in (ours[j], theirs[j])]
        values = [t[ibm1_fast.entry_index(fb, x, y)] for x in pick]
        assert abs(values[0] - values[1]) <= 1e-12, (y, pick, values)
    assert np.mean(ours == theirs) > 0.99
