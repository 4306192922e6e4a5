"""Synthetic tasks shared by the lessons. Each returns tensors on the device you ask for and
takes a torch.Generator, so a batch is the same every run."""

from __future__ import annotations

import numpy as np
import torch

from .tools.utils import fail


def associative_recall(batch_size: int, n_pairs: int, n_keys: int, n_values: int,
                       generator: torch.Generator, device="cpu") -> dict[str, torch.Tensor]:
    """Associative recall: a set of (key, value) pairs, then every key again as a query.

    The model must answer each query with the value stored next to that key. Keys in one
    example are distinct (so every query has one answer); values may repeat. Queries list the
    example's keys in a fresh random order, so position cannot give the answer away.

    Returns a dict of int64 tensors:
        keys    (B, P)  key symbol of each pair, in [0, n_keys)
        values  (B, P)  value symbol of each pair, in [0, n_values)
        queries (B, P)  the same keys, shuffled
        targets (B, P)  the value paired with each query
        source  (B, P)  index of the pair holding each query's answer (what attention should find)
    """
    if n_pairs > n_keys:
        fail("associative_recall needs distinct keys", f"n_pairs <= n_keys ({n_keys})",
             f"n_pairs={n_pairs}")
    if min(batch_size, n_pairs, n_values) <= 0:
        fail("associative_recall sizes", "positive batch_size, n_pairs, n_values",
             f"{batch_size}, {n_pairs}, {n_values}")
    # Distinct keys per example: the first n_pairs entries of a random permutation.
    keys = torch.rand(batch_size, n_keys, generator=generator).argsort(dim=1)[:, :n_pairs]
    values = torch.randint(0, n_values, (batch_size, n_pairs), generator=generator)
    source = torch.rand(batch_size, n_pairs, generator=generator).argsort(dim=1)
    queries = keys.gather(1, source)
    targets = values.gather(1, source)
    batch = dict(keys=keys, values=values, queries=queries, targets=targets, source=source)
    return {name: t.to(device) for name, t in batch.items()}


CLS, SYMBOL_A, SYMBOL_B = 0, 1, 2  # the tokens of `two_halves`


def two_halves(batch_size: int, n: int, generator: torch.Generator, device="cpu"
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Do both halves of a long sequence lean the same way? (lesson 02's long-range task)

    Token 0 is a [CLS] marker; every other token is A with probability p₁ in the first half and
    p₂ in the second, where p₁, p₂ are 1/4 or 3/4 independently. The label is 1 iff p₁ = p₂
    (balanced). A classifier reading token 0 must gather evidence from *both* halves.

    Returns tokens (B, N) int64 in {CLS, SYMBOL_A, SYMBOL_B} and labels (B,) int64.
    """
    if batch_size <= 0 or n < 3:
        fail("two_halves sizes", "batch_size >= 1 and n >= 3", f"batch_size={batch_size}, n={n}")
    p1, p2 = (torch.randint(0, 2, (batch_size,), generator=generator) for _ in range(2))
    first_half = torch.arange(n) < n // 2
    prob_a = torch.where(first_half, 0.25 + 0.5 * p1[:, None], 0.25 + 0.5 * p2[:, None])
    tokens = torch.where(torch.rand(batch_size, n, generator=generator) < prob_a,
                         SYMBOL_A, SYMBOL_B)
    tokens[:, 0] = CLS
    return tokens.to(device), (p1 == p2).long().to(device)


# ============================================================================ corpora for lessons 05, 06
def dictionary_corpus(n_pairs: int, n_words: int, rng: np.random.Generator,
                      length=(4, 10), n_function: int = 0):
    """Pairs built from a hidden one-to-one dictionary x_k -> y_{π(k)}: each target sentence is
    the word-by-word translation of its source, shuffled, plus up to 2 target-only 'function
    words' f_* (nothing to align to but NULL). Words follow a Zipf law. Returns (src, tgt, π)."""
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


def permutation_corpus(n_pairs: int, n_types: int, n_vocab: int, rng: np.random.Generator,
                       offset: int = 0):
    """Copying data of seed §3.3: x = a random permutation of n_types words sampled from a vocabulary
    of n_vocab ('40-of-40' when equal, '40-of-60' control), and y = x."""
    src = [[f"w{offset + int(k):02d}" for k in rng.permutation(rng.choice(n_vocab, n_types,
                                                                          replace=False))]
           for _ in range(n_pairs)]
    return src, [list(s) for s in src]


def two_sets_corpus(n_pairs: int, n_types: int, rng: np.random.Generator):
    """Mixture of permutations of two disjoint word sets (seed §3.3): half of the pairs copy a
    permutation of w00..w(n-1), half one of wn..w(2n-1)."""
    a, _ = permutation_corpus(n_pairs // 2, n_types, n_types, rng)
    b, _ = permutation_corpus(n_pairs - n_pairs // 2, n_types, n_types, rng, offset=n_types)
    order = rng.permutation(n_pairs)
    src = [(a + b)[i] for i in order]
    return src, [list(s) for s in src]


# ============================================================================ lesson 03: multi-scale attention
def effective_scale_task(batch_size: int, n: int, d: int, k: int, generator: torch.Generator,
                         device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The effective-scale task of Guo et al. (2020): which distances must a model bridge?

    a_1, ..., a_N ∈ R^d with entries ~ U(0, 1); the target is Σ_{i=1}^{K} a_i ⊙ a_{N−i+1}: the
    i-th token from the front must meet the i-th from the back, across distances N − 1, N − 3,
    ..., N − 2K + 1. Small K needs only the longest distances; K = N/2 every distance.

    Returns x (B, N, d) float32 and y (B, d).
    """
    if batch_size <= 0 or d <= 0 or n < 2 or not 1 <= k <= n // 2:
        fail("effective_scale_task sizes", "batch_size, d >= 1, n >= 2 and 1 <= k <= n // 2",
             f"batch_size={batch_size}, n={n}, d={d}, k={k}")
    x = torch.rand(batch_size, n, d, generator=generator)
    y = (x[:, :k] * x.flip(1)[:, :k]).sum(1)  # a_i ⊙ a_{N-i+1}, i = 1..K
    return x.to(device), y.to(device)


PAD, UNK = 0, 1  # the first two rows of `glove_corpus`'s embedding matrix


def glove_corpus(splits: dict[str, list[str]], vocab: list[str], vectors: np.ndarray,
                 max_len: int) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """Sentences -> GloVe word ids, for the lesson-03 sentiment models.

    `splits` maps a split name to its sentences; each is tokenized (`tools.data.tokenize`) and
    cut to `max_len` words. Only the words that occur get a row: the embedding matrix is
    [PAD = 0 ; UNK = 0 (words GloVe lacks) ; the GloVe vector of each word that occurs].
    Returns {split: (ids (n, max_len) int64, lengths (n,) int64)} and the matrix (V, 50).
    """
    from .tools.data import tokenize

    if max_len < 1:
        fail("max_len", "an int >= 1", repr(max_len))
    index = {w: i for i, w in enumerate(vocab)}
    tokens = {name: [tokenize(s)[:max_len] for s in texts] for name, texts in splits.items()}
    used = sorted({index[w] for sents in tokens.values() for s in sents for w in s if w in index})
    row = {vocab[i]: 2 + r for r, i in enumerate(used)}
    matrix = np.concatenate([np.zeros((2, vectors.shape[1]), np.float32), vectors[used]])
    out = {}
    for name, sents in tokens.items():
        ids = torch.zeros(len(sents), max_len, dtype=torch.long)
        for b, s in enumerate(sents):
            ids[b, :len(s)] = torch.tensor([row.get(w, UNK) for w in s], dtype=torch.long)
        out[name] = (ids, torch.tensor([max(len(s), 1) for s in sents]))
    return out, torch.from_numpy(matrix)


def length_batches(lengths: torch.Tensor, batch_size: int, generator: torch.Generator
                   ) -> list[torch.Tensor]:
    """Index batches of sentences of similar length (less padding, same examples): sort by
    length (random order among equal lengths), cut into batches, shuffle the batches."""
    if batch_size < 1 or lengths.ndim != 1:
        fail("length_batches", "(n,) lengths and batch_size >= 1",
             f"lengths {tuple(lengths.shape)}, batch_size={batch_size}")
    jitter = torch.rand(len(lengths), generator=generator)
    order = torch.argsort(lengths.double() + 0.5 * jitter)
    batches = list(order.split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator)]
