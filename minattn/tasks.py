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


# ==== lesson 04: Transformer-XL — character streams and the delayed copy
def char_corpus(texts: list[str]) -> tuple[list[str], list[torch.Tensor]]:
    """Character vocabulary of texts[0] (the training text) and every text as int64 ids.

    Characters of later texts (validation, test) missing from the training text map to the
    first symbol of the vocabulary; with PTB or Shakespeare there are none.
    """
    chars = sorted(set(texts[0]))
    index = {c: i for i, c in enumerate(chars)}
    table = np.zeros(max(map(ord, "".join(set("".join(texts))))) + 1, dtype=np.int64)
    for c, i in index.items():
        table[ord(c)] = i
    return chars, [torch.from_numpy(table[np.frombuffer(t.encode("utf-32-le"), np.uint32)])
                   for t in texts]


def lm_streams(ids: torch.Tensor, n_streams: int) -> torch.Tensor:
    """Cut a long (N,) text into n_streams contiguous rows (n_streams, N // n_streams).

    Row b is one continuous stretch of the text: segment s of row b follows segment s − 1 of
    the same row, which is what a Transformer-XL memory needs (batch row b carries row b's
    memory). Data-parallel training gives each process its own rows.
    """
    if ids.ndim != 1 or n_streams <= 0 or len(ids) < 2 * n_streams:
        fail("lm_streams needs a long 1-D text", f"(N,) with N >= {2 * max(n_streams, 1)}",
             f"{tuple(ids.shape)} cut into {n_streams} streams")
    length = len(ids) // n_streams
    return ids[: n_streams * length].view(n_streams, length)


def lm_segment(streams: torch.Tensor, index: int, seg_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-character targets of segment `index` (wrapping around the streams).

    Returns x (B, seg_len) and y (B, seg_len) with y[:, t] = the character after x[:, t].
    """
    n_segments = (streams.shape[1] - 1) // seg_len
    if n_segments <= 0:
        fail("streams too short for one segment", f"length > {seg_len}", f"{streams.shape[1]}")
    start = (index % n_segments) * seg_len
    return streams[:, start:start + seg_len], streams[:, start + 1:start + seg_len + 1]


def synthetic_text(n_chars: int, rng: np.random.Generator) -> str:
    """Offline fallback text: Zipf-distributed made-up words, and every sentence ends by
    repeating its first word (a dependency a few dozen characters long)."""
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa"]
    words = ["".join(rng.choice(syllables, size=rng.integers(1, 4))) for _ in range(300)]
    p = 1.0 / np.arange(1, len(words) + 1)
    out, size = [], 0
    while size < n_chars:
        sentence = list(rng.choice(words, size=rng.integers(4, 12), p=p / p.sum()))
        line = " ".join(sentence + [sentence[0]]) + " .\n"
        out.append(line)
        size += len(line)
    return "".join(out)[:n_chars]


def delayed_copy(batch_size: int, length: int, distance: int, n_symbols: int,
                 generator: torch.Generator, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """A stream of random symbols; the target at position t is the symbol at t − distance.

    Returns tokens (B, length) and targets (B, length) int64, targets = -100 (ignored by
    cross-entropy) where t < distance. A model that cannot see `distance` tokens back is at
    chance, 1 / n_symbols.
    """
    if min(batch_size, length, distance, n_symbols) <= 0 or distance >= length:
        fail("delayed_copy sizes", "positive sizes and distance < length",
             f"batch_size={batch_size}, length={length}, distance={distance}, "
             f"n_symbols={n_symbols}")
    tokens = torch.randint(0, n_symbols, (batch_size, length), generator=generator)
    targets = torch.full_like(tokens, -100)
    targets[:, distance:] = tokens[:, :-distance]
    return tokens.to(device), targets.to(device)
