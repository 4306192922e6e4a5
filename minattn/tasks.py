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


# ==== lesson 05: attention in LSTM seq2seq (keyword task, vocabularies and padded token ids)
def keyword_task(batch_size: int, length: int, n_vocab: int, rng: np.random.Generator,
                 keyword: int = 1):
    """Keyword classification of seed 002 §6.1: `length` words drawn uniformly from
    {1..n_vocab}; positive iff the keyword occurs (exactly once in a positive sequence), half
    of each batch positive (rejection sampling). Returns numpy int64 tokens (B, N), labels (B,)
    and the keyword's position (B,) (-1 in negatives)."""
    if batch_size < 2 or batch_size % 2 or length < 2 or n_vocab < 2:
        fail("keyword_task sizes", "even batch_size >= 2, length >= 2, n_vocab >= 2",
             f"{batch_size}, {length}, {n_vocab}")
    rows = {0: [], 1: []}
    while min(len(r) for r in rows.values()) < batch_size // 2:
        x = rng.integers(1, n_vocab + 1, size=(batch_size, length))
        hits = (x == keyword).sum(1)
        for seq, k in zip(x, hits):
            if k <= 1 and len(rows[int(k)]) < batch_size // 2:
                rows[int(k)].append(seq)
    tokens = np.stack(rows[0] + rows[1])
    labels = np.repeat([0, 1], batch_size // 2)
    order = rng.permutation(batch_size)
    tokens, labels = tokens[order], labels[order]
    where = np.where(labels == 1, (tokens == keyword).argmax(1), -1)
    return tokens, labels, where


PAD, UNK, BOS = "<pad>", "<unk>", "<bos>"


def build_vocab(sentences, max_size: int | None = None, min_count: int = 1) -> dict[str, int]:
    """Word -> id, specials first (<pad> = 0, <unk> = 1, <bos> = 2), then by frequency."""
    from collections import Counter

    counts = Counter(w for s in sentences for w in s)
    words = [w for w, c in counts.most_common(max_size) if c >= min_count]
    return {w: i for i, w in enumerate([PAD, UNK, BOS] + words)}


def encode(sentences, vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Padded ids (M, max length) (unknown words -> <unk>, padding <pad> = 0) and lengths (M,)."""
    lengths = np.array([len(s) for s in sentences])
    if len(sentences) == 0 or lengths.min() == 0:
        fail("encode needs sentences", "a non-empty list of non-empty sentences",
             f"{len(sentences)} sentences, shortest {lengths.min() if len(lengths) else '-'}")
    ids = np.full((len(sentences), lengths.max()), vocab[PAD], dtype=np.int64)
    for m, s in enumerate(sentences):
        ids[m, :len(s)] = [vocab.get(w, vocab[UNK]) for w in s]
    return ids, lengths
