"""Lesson 05's data (Snell et al. 2021): the copying corpora — permutations ('40-of-40',
'40-of-60'), two disjoint word sets, a hidden dictionary, and the same as token ids framed as
in the authors' code. Lesson 06 (IBM Model 1) reads the same corpora: the paper compares
attention with IBM Model 1 on them; lesson 08 falls back on the dictionary corpus offline.
Each function takes a NumPy generator, so a corpus is the same every run."""

from __future__ import annotations

import numpy as np

from ..checks import check_size, describe, fail


# ================================================================= copying corpora (lessons 05, 06)
def dictionary_corpus(n_pairs: int, n_words: int, rng: np.random.Generator,
                      length=(4, 10), n_function: int = 0):
    """Pairs built from a hidden one-to-one dictionary x_k -> y_{π(k)}: each target sentence is
    the word-by-word translation of its source, shuffled, plus up to 2 target-only 'function
    words' f_* (nothing to align to but NULL). Words follow a Zipf law. Returns (src, tgt, π)."""
    n_pairs, n_words = check_size("n_pairs", n_pairs, 1), check_size("n_words", n_words, 1)
    check_length_range(length)
    perm = rng.permutation(n_words)
    freq = 1.0 / np.arange(1, n_words + 1)
    src, tgt = [], []
    for _ in range(n_pairs):
        ks = rng.choice(n_words, size=rng.integers(length[0], length[1] + 1), p=freq / freq.sum())
        ys = [f"y{perm[k]:02d}" for k in ks]
        if n_function:
            ys += [f"f{int(f)}" for f in rng.integers(0, n_function, size=rng.integers(0, 3))]
        src.append([f"x{k:02d}" for k in ks])
        tgt.append([ys[i] for i in rng.permutation(len(ys))])
    return src, tgt, {f"x{k:02d}": f"y{perm[k]:02d}" for k in range(n_words)}


def check_length_range(length) -> None:
    """length: (low, high) sentence lengths, integers with 1 <= low <= high."""
    if not (isinstance(length, (tuple, list)) and len(length) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in length)
            and 1 <= length[0] <= length[1]):
        fail("length", "(low, high) integers with 1 <= low <= high", describe(length))


def permutation_corpus(n_pairs: int, n_types: int, n_vocab: int, rng: np.random.Generator,
                       offset: int = 0):
    """Copying data of Snell et al. (2021), §3.3: x = a random permutation of n_types words
    sampled from a vocabulary of n_vocab ('40-of-40' when equal, '40-of-60' control), and y = x."""
    n_pairs, n_vocab = check_size("n_pairs", n_pairs, 1), check_size("n_vocab", n_vocab, 1)
    n_types = check_size("n_types", n_types, 1)
    if n_types > n_vocab:
        fail("n_types", f"at most n_vocab = {n_vocab} (distinct words)", f"{n_types}")
    src = [[f"w{offset + int(k):02d}" for k in rng.permutation(rng.choice(n_vocab, n_types,
                                                                          replace=False))]
           for _ in range(n_pairs)]
    return src, [list(s) for s in src]


def two_sets_corpus(n_pairs: int, n_types: int, rng: np.random.Generator):
    """Mixture of permutations of two disjoint word sets (Snell et al. 2021, §3.3): half of the
    pairs copy a permutation of w00..w(n-1), half one of wn..w(2n-1)."""
    n_pairs, n_types = check_size("n_pairs", n_pairs, 2), check_size("n_types", n_types, 1)
    a, _ = permutation_corpus(n_pairs // 2, n_types, n_types, rng)
    b, _ = permutation_corpus(n_pairs - n_pairs // 2, n_types, n_types, rng, offset=n_types)
    order = rng.permutation(n_pairs)
    src = [(a + b)[i] for i in order]
    return src, [list(s) for s in src]


def copy_ids(n_pairs: int, n_types: int, n_words: int, rng: np.random.Generator,
             n_sets: int = 1, order=None) -> tuple[np.ndarray, np.ndarray, int]:
    """Copy data as token ids, framed as in the authors' code (`SequenceCopying/seq2seq.py`):
    the input x is n_types distinct words drawn from n_words, in random order, then <eos>; the
    output is <sos>, the same words, <eos>.

    n_sets=2: each pair draws its words from one of two disjoint sets of n_words words (chosen
    at random per pair) — the mixture of §3.3. order (n_types,): output word t is x_order[t]
    (the permutation function of §6.2) instead of x_t.
    Ids: words 0 .. W−1 (W = n_sets · n_words), <eos> = W, <sos> = W + 1; the vocabulary is the
    W + 2 ids, every one of them used. Returns src (n, n_types + 1), tgt (n, n_types + 2), W + 2.
    """
    if min(n_pairs, n_types, n_sets) < 1 or n_types > n_words:
        fail("copy_ids sizes", "n_pairs, n_sets >= 1 and 1 <= n_types <= n_words",
             f"n_pairs={n_pairs}, n_types={n_types}, n_words={n_words}, n_sets={n_sets}")
    # a random subset, shuffled
    words = np.argsort(rng.random((n_pairs, n_words)), axis=1)[:, :n_types]
    words = words + n_words * rng.integers(0, n_sets, size=(n_pairs, 1))
    eos, sos = n_sets * n_words, n_sets * n_words + 1
    out = words
    if order is not None:
        order = np.asarray(order)
        if sorted(order.tolist()) != list(range(n_types)):
            fail("copy_ids order", f"a permutation of 0..{n_types - 1}", repr(order))
        out = words[:, order]
    column = lambda v: np.full((n_pairs, 1), v)  # noqa: E731
    src = np.concatenate([words, column(eos)], axis=1)
    tgt = np.concatenate([column(sos), out, column(eos)], axis=1)
    return src, tgt, n_sets * n_words + 2
