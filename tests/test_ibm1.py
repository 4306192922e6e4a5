"""IBM Model 1 (minattn/ibm1.py): count table, EM, NLTK parity, dictionary recovery, torch
parity, the bag-of-words proxy's gradient at initialisation, bad input.

Direction everywhere: source x = input, target y = output; t(y | x). NLTK's AlignedSent takes
(words=target, mots=source), which `ibm1.nltk_bitext` handles.
"""

import numpy as np
import pytest
import torch

from minattn import bitext, ibm1, tasks

# NLTK's documented example (nltk/translate/ibm1.py docstring): English source, German target.
SRC = [["the", "house", "is", "small"], ["the", "house", "is", "big"],
       ["the", "book", "is", "small"], ["the", "house"], ["the", "book"], ["a", "book"]]
TGT = [["klein", "ist", "das", "haus"], ["das", "haus", "ist", "ja", "groß"],
       ["das", "buch", "ist", "ja", "klein"], ["das", "haus"], ["das", "buch"], ["ein", "buch"]]


def random_corpus(rng, n_pairs=150, n_src=9, n_tgt=7, max_len=7):
    """Small vocabularies and long-ish sentences: plenty of repeated words on both sides."""
    src = [[f"s{k}" for k in rng.integers(0, n_src, rng.integers(1, max_len))] for _ in range(n_pairs)]
    tgt = [[f"t{k}" for k in rng.integers(0, n_tgt, rng.integers(1, max_len))] for _ in range(n_pairs)]
    return src, tgt


def nltk_model(src, tgt, iterations):
    from nltk.translate import IBMModel1

    bitext = ibm1.nltk_bitext(src, tgt)
    return IBMModel1(bitext, iterations), bitext


# ----------------------------------------------------------------------------- indexing
@pytest.mark.parametrize("null", [False, True])
def test_packed_sort_and_general_path_index_the_same(rng, monkeypatch, null):
    # make_bitext packs each point into one int64 when the fields fit (PACK_BITS); with no bits
    # to spare it takes the general path (argsort + gathers). Both must give the same arrays.
    src, tgt = random_corpus(rng, n_pairs=80)
    fast = ibm1.make_bitext(src, tgt, null=null)
    monkeypatch.setattr(bitext, "PACK_BITS", 0)
    slow = ibm1.make_bitext(src, tgt, null=null)
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
    same = np.diff(fast.point_entry) == 0
    assert np.all(np.diff(fast.point_row)[same] > 0)
    # corpus order and EM order hold the same points
    em = np.lexsort((fast.point_row, fast.point_entry))
    corpus_row = np.repeat(np.arange(len(fast.row_word)), np.diff(fast.seg_start))
    corpus = np.lexsort((corpus_row, fast.seg_entry))
    np.testing.assert_array_equal(fast.point_entry[em], fast.seg_entry[corpus])
    np.testing.assert_array_equal(fast.point_row[em], corpus_row[corpus])
    np.testing.assert_array_equal(fast.point_mult[em], fast.seg_mult[corpus])


# ----------------------------------------------------------------------------- count table
def test_count_table_by_hand():
    # pair 1: x = (a, b), y = (A, A) -> C(a, A) += 2 * 1/2, C(b, A) += 2 * 1/2
    # pair 2: x = (a,),   y = (B,)   -> C(a, B) += 1
    bx = ibm1.make_bitext([["a", "b"], ["a"]], [["A", "A"], ["B"]], null=False)
    dense = ibm1.to_dense(ibm1.count_table_np(bx), bx)
    a, b, A, B = bx.src_index["a"], bx.src_index["b"], bx.tgt_index["A"], bx.tgt_index["B"]
    assert dense[a, A] == 1.0 and dense[b, A] == 1.0 and dense[a, B] == 1.0 and dense[b, B] == 0.0
    assert dense.sum() == 3.0  # one unit per target token
    bn = ibm1.make_bitext([["a", "b"]], [["A"]])
    with_null = ibm1.to_dense(ibm1.count_table_np(bn), bn)
    assert np.allclose(with_null[:, 0], 1 / 3)  # NULL (row 0) is one more source word


def test_sparse_table_stores_only_cooccurring_pairs():
    bx = ibm1.make_bitext([["a", "b"], ["c"]], [["A"], ["C", "D"]], null=False)
    pairs = {(bx.src_vocab[x], bx.tgt_vocab[y]) for x, y in zip(bx.entry_src, bx.entry_tgt)}
    assert pairs == {("a", "A"), ("b", "A"), ("c", "C"), ("c", "D")}


# ----------------------------------------------------------------------------- EM
@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
@pytest.mark.parametrize("null", [False, True])
def test_one_em_step_from_uniform_is_the_normalised_count_table(rng, null):
    src, tgt = random_corpus(rng)
    bx = ibm1.make_bitext(src, tgt, null=null)
    t, _ = ibm1.em_np(bx, 1)
    dense_c = ibm1.to_dense(ibm1.count_table_np(bx), bx)
    rows = dense_c.sum(axis=1, keepdims=True)
    expected = np.divide(dense_c, rows, out=np.zeros_like(dense_c), where=rows > 0)
    np.testing.assert_allclose(ibm1.to_dense(t, bx), expected, rtol=0, atol=1e-14)


@pytest.mark.exercise("6.1")
def test_e_step_counts_are_posteriors(rng):
    src, tgt = random_corpus(rng, n_pairs=20)
    bx = ibm1.make_bitext(src, tgt)
    t = rng.uniform(0.1, 1.0, len(bx.entry_src))
    counts, loglik = ibm1.e_step_np(t, bx)
    assert counts.sum() == pytest.approx(len(bx.tgt_ids))  # each target token spreads one unit
    # the same counts and likelihood from the per-pair alignment matrices, one pair at a time
    expected = np.zeros_like(counts)
    ll = 0.0
    for m in range(bx.n_pairs):
        entries = ibm1.position_entries(bx, m)          # (|y|, 1 + |x|), by position
        post = ibm1.alignment_matrix_np(t, bx, m)
        np.add.at(expected, entries.ravel(), post.ravel())
        ll += np.log(t[entries].mean(axis=1)).sum()
    np.testing.assert_allclose(counts, expected, rtol=1e-12)
    assert loglik == pytest.approx(ll, rel=1e-12)
    assert loglik == pytest.approx(ibm1.sentence_log_prob_np(t, bx).sum(), rel=1e-12)


@pytest.mark.exercise("6.2")
def test_m_step_normalises_each_source_word(rng):
    bx = ibm1.make_bitext(*random_corpus(rng, n_pairs=30))
    counts = rng.uniform(0.0, 2.0, len(bx.entry_src))
    t = ibm1.m_step_np(counts, bx)
    sums = np.bincount(bx.entry_src, weights=t)
    assert np.allclose(sums, 1.0)
    dense = ibm1.to_dense(counts, bx)
    np.testing.assert_allclose(ibm1.to_dense(t, bx)[3], dense[3] / dense[3].sum(), rtol=1e-13)
    floored = ibm1.m_step_np(np.where(np.arange(len(counts)) == 0, 0.0, counts), bx, floor=1e-12)
    assert floored[0] == 1e-12


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
@pytest.mark.parametrize("mode", ["textbook", "nltk"])
def test_likelihood_never_decreases(rng, mode):
    # nltk mode is EM on the objective where a word repeated k times in a sentence counts 1/k
    src, tgt = random_corpus(rng)
    _, history = ibm1.em_np(ibm1.make_bitext(src, tgt), 15, mode=mode)
    steps = np.diff(history)
    assert np.all(steps >= -1e-9 * np.abs(history[:-1])), steps
    assert history[-1] > history[0]


@pytest.mark.exercise("6.2")  # runs full EM: needs 6.1 too
def test_recovers_a_hidden_dictionary():
    rng = np.random.default_rng(3)
    src, tgt, dictionary = tasks.dictionary_corpus(600, 25, rng, n_function=3)
    bx = ibm1.make_bitext(src, tgt)
    t, _ = ibm1.em_np(bx, 15)
    wrong = {x: ibm1.top_translations(t, bx, x, 1)[0][0] for x, y in dictionary.items()
             if x in bx.src_index and ibm1.top_translations(t, bx, x, 1)[0][0] != y}
    assert not wrong, wrong
    one_step, _ = ibm1.em_np(bx, 1)  # the raw counts alone are not enough: EM is doing work
    first = [ibm1.top_translations(one_step, bx, x, 1)[0][0] == y for x, y in dictionary.items()
             if x in bx.src_index]
    assert not all(first)


def test_flat_permutation_corpus_has_nothing_to_learn():
    # 40-of-40 copying (seed §3.3): every pair holds the same word set, so C and EM stay flat
    rng = np.random.default_rng(0)
    bx = ibm1.make_bitext(*tasks.permutation_corpus(50, 10, 10, rng), null=False)
    t, _ = ibm1.em_np(bx, 10)
    assert np.allclose(t, 0.1, atol=1e-12)
    bx = ibm1.make_bitext(*tasks.permutation_corpus(200, 10, 15, rng), null=False)  # 10-of-15
    t, _ = ibm1.em_np(bx, 10)
    assert all(ibm1.top_translations(t, bx, x, 1)[0][0] == x for x in bx.src_vocab[1:])


# ----------------------------------------------------------------------------- NLTK parity
def test_nltk_mode_reproduces_nltk_documented_example():
    model, bitext = nltk_model(SRC, TGT, 5)
    bx = ibm1.make_bitext(SRC, TGT)
    t, _ = ibm1.em_np(bx, 5, mode="nltk")
    np.testing.assert_allclose(t, ibm1.table_from_nltk(model, bx), rtol=0, atol=1e-12)
    # the numbers printed in NLTK's docstring; t(y | x) = translation_table[y][x]
    assert round(t[ibm1.entry_index(bx, "book", "buch")], 3) == 0.889
    assert round(t[ibm1.entry_index(bx, "book", "das")], 3) == 0.062
    assert round(t[ibm1.entry_index(bx, None, "buch")], 3) == 0.113
    assert round(t[ibm1.entry_index(bx, None, "ja")], 3) == 0.073
    ours = ibm1.alignments(bx, ibm1.viterbi_np(t, bx))
    assert [set(a) for a in ours] == [set(s.alignment) for s in bitext]
    assert ours[2] == [(0, 0), (1, 1), (2, 2), (3, 2), (4, 3)]


@pytest.mark.parametrize("iterations", [0, 1, 6])
def test_nltk_mode_reproduces_nltk_on_a_random_corpus(rng, iterations):
    src, tgt = random_corpus(rng, n_pairs=120)
    model, bitext = nltk_model(src, tgt, iterations)
    bx = ibm1.make_bitext(src, tgt)
    t, _ = ibm1.em_np(bx, iterations, mode="nltk")
    # same support (every co-occurring pair, NULL included) and the same values
    nltk_support = {(x, y) for y, row in model.translation_table.items() for x in row}
    ours = {(bx.src_vocab[x], bx.tgt_vocab[y]) for x, y in zip(bx.entry_src, bx.entry_tgt)}
    if iterations:
        assert nltk_support == ours
    np.testing.assert_allclose(t, ibm1.table_from_nltk(model, bx), rtol=0, atol=1e-12)
    ours = ibm1.alignments(bx, ibm1.viterbi_np(t, bx))
    assert [set(a) for a in ours] == [set(s.alignment) for s in bitext]


def test_textbook_mode_differs_from_nltk_only_through_repeated_target_words(rng):
    src, tgt = random_corpus(rng, n_pairs=60)
    bx = ibm1.make_bitext(src, tgt)
    t_book, _ = ibm1.em_np(bx, 4, mode="textbook")
    t_nltk, _ = ibm1.em_np(bx, 4, mode="nltk")
    assert np.abs(t_book - t_nltk).max() > 1e-3  # repeats are weighted differently
    unique = [list(dict.fromkeys(y)) for y in tgt]  # no repeats: the modes agree
    bx = ibm1.make_bitext(src, unique)
    np.testing.assert_allclose(ibm1.em_np(bx, 4)[0], ibm1.em_np(bx, 4, mode="nltk")[0],
                               rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- torch
@pytest.mark.parametrize("mode", ["textbook", "nltk"])
def test_torch_em_matches_numpy(rng, mode):
    bx = ibm1.make_bitext(*random_corpus(rng))
    t_np, h_np = ibm1.em_np(bx, 5, mode=mode)
    t_pt, h_pt = ibm1.em_torch(bx, 5, mode=mode, device="cpu")
    np.testing.assert_allclose(t_pt, t_np, rtol=0, atol=1e-13)
    np.testing.assert_allclose(h_pt, h_np, rtol=1e-12)


@pytest.mark.cuda
def test_torch_em_on_cuda(rng):
    bx = ibm1.make_bitext(*random_corpus(rng))
    t_gpu, _ = ibm1.em_torch(bx, 5, mode="nltk", device="cuda")
    np.testing.assert_allclose(t_gpu, ibm1.em_np(bx, 5, mode="nltk")[0], rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- the proxy
def test_proxy_velocity_is_the_rate_of_change_of_the_logits():
    rng = np.random.default_rng(0)
    bx = ibm1.make_bitext(*tasks.dictionary_corpus(40, 8, rng)[:2], null=False)
    xbar, ycount = (torch.as_tensor(a) for a in ibm1.bag_matrices(bx))
    torch.manual_seed(0)
    model = ibm1.BagOfWordsProxy(xbar.shape[1], ycount.shape[1], 16).double()
    velocity = ibm1.proxy_logit_velocity(model, xbar, ycount)
    before = model.word_logits().detach()
    lr = 1e-8  # a small gradient-descent step approximates the flow to first order
    ibm1.proxy_loss(model, xbar, ycount).backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    change = (model.word_logits().detach() - before) / lr
    torch.testing.assert_close(change, velocity, rtol=1e-5, atol=1e-5)


def test_proxy_gradient_approaches_the_count_prediction_as_d_grows():
    rng = np.random.default_rng(1)
    bx = ibm1.make_bitext(*tasks.dictionary_corpus(150, 15, rng, n_function=2)[:2], null=False)
    small = np.mean([ibm1.proxy_agreement(bx, 8, seed)[0] for seed in range(3)])
    r, measured, predicted = ibm1.proxy_agreement(bx, 2048, 0)
    assert r > 0.98 and small < r - 0.1, (small, r)
    slope = (measured * predicted).sum() / (predicted ** 2).sum()
    assert slope == pytest.approx(1.0, abs=0.1)  # dθ/dt → 2 (C − mean_y C)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("src, tgt, message", [
    ([], [], "empty corpus"),
    ([["a"]], [["A"], ["B"]], "pair up"),
    ([["a"], []], [["A"], ["B"]], "source sentence 1 is empty"),
    ([["a"]], [[]], "target sentence 0 is empty"),
    (["a b"], [["A"]], "not a token list"),
])
def test_bad_corpus(src, tgt, message):
    with pytest.raises(ValueError, match=message):
        ibm1.make_bitext(src, tgt)


def test_bad_table_and_mode():
    bx = ibm1.make_bitext(SRC, TGT)
    with pytest.raises(ValueError, match="does not fit"):
        ibm1.e_step_np(np.ones(3), bx)
    with pytest.raises(ValueError, match="does not fit"):
        ibm1.m_step_np(np.ones((2, 2)), bx)
    with pytest.raises(ValueError, match="unknown mode"):
        ibm1.em_np(bx, 1, mode="giza")
    with pytest.raises(ValueError, match="NULL"):
        ibm1.em_np(ibm1.make_bitext(SRC, TGT, null=False), 1, mode="nltk")
    with pytest.raises(ValueError, match="unknown source word"):
        ibm1.top_translations(ibm1.uniform_table(bx), bx, "haus")  # a target word, not a source one
    with pytest.raises(ValueError, match="weights do not fit"):
        ibm1.e_step_np(ibm1.uniform_table(bx), bx, np.ones(2))


# ----------------------------------------------------------------------------- real data
@pytest.mark.realdata
def test_nltk_mode_reproduces_nltk_on_bible_verses():
    data = pytest.importorskip("minattn.tools.data")
    if not data.available("bible"):
        pytest.skip("Bible corpus not fetched (python data_scripts/bible.py)")
    pairs = data.load_parallel(pair="en-de")[:300]
    src = [data.tokenize(en) for en, _ in pairs]     # source x = English (input)
    tgt = [data.tokenize(de) for _, de in pairs]     # target y = German (output)
    model, bitext = nltk_model(src, tgt, 5)
    bx = ibm1.make_bitext(src, tgt)
    t, _ = ibm1.em_np(bx, 5, mode="nltk")
    np.testing.assert_allclose(t, ibm1.table_from_nltk(model, bx), rtol=0, atol=1e-12)
    ours = np.concatenate([[-1 if i is None else i for _, i in a]
                           for a in ibm1.alignments(bx, ibm1.viterbi_np(t, bx))])
    theirs = np.concatenate([[-1 if i is None else i for _, i in sorted(s.alignment)]
                             for s in bitext])
    # Viterbi choices agree except where two words tie in exact arithmetic (rounding decides)
    for j in np.flatnonzero(ours != theirs):
        m = int(np.searchsorted(bx.tgt_start, j, side="right") - 1)
        y = tgt[m][j - bx.tgt_start[m]]
        pick = [None if c < 0 else src[m][c] for c in (ours[j], theirs[j])]
        values = [t[ibm1.entry_index(bx, x, y)] for x in pick]
        assert abs(values[0] - values[1]) <= 1e-12, (y, pick, values)
    assert np.mean(ours == theirs) > 0.99
