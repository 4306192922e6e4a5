"""Synthetic tasks shared by the lessons. Each returns tensors on the device you ask for and
takes a torch.Generator, so a batch is the same every run."""

from __future__ import annotations


import numpy as np
import torch

from .tools.utils import check_array, check_size, describe, fail


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
    batch_size, n_keys = check_size("batch_size", batch_size, 1), check_size("n_keys", n_keys, 1)
    n_pairs, n_values = check_size("n_pairs", n_pairs, 1), check_size("n_values", n_values, 1)
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


def reversal(batch_size: int, n: int, n_symbols: int, generator: torch.Generator,
             device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Reverse a sequence: the answer at position i is the symbol at position n − 1 − i.

    Each example is n distinct symbols of [0, n_symbols) in a random order. A model blind to
    order knows only its own symbol and the set of all n, so position i can do no better than
    guess one of the n − 1 others: accuracy 1/(n − 1), exactly (the symbols are distinct).

    Returns tokens (B, N) and targets (B, N) = tokens reversed, int64.
    """
    if batch_size <= 0 or n < 2 or n > n_symbols:
        fail("reversal sizes", "batch_size >= 1 and 2 <= n <= n_symbols",
             f"batch_size={batch_size}, n={n}, n_symbols={n_symbols}")
    tokens = torch.rand(batch_size, n_symbols, generator=generator).argsort(dim=1)[:, :n]
    return tokens.to(device), tokens.flip(1).to(device)


CLS, SYMBOL_A, SYMBOL_B = 0, 1, 2  # the tokens of `two_halves`


def two_halves(batch_size: int, n: int, generator: torch.Generator, device="cpu"
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Do both halves of a long sequence lean the same way? (lesson 02's long-range task)

    Token 0 is a [CLS] marker; every other token is A with probability p₁ in the first half and
    p₂ in the second, where p₁, p₂ are 1/4 or 3/4 independently. The label is 1 iff p₁ = p₂
    (balanced). A classifier reading token 0 must gather evidence from *both* halves.

    Returns tokens (B, N) int64 in {CLS, SYMBOL_A, SYMBOL_B} and labels (B,) int64.
    """
    batch_size, n = check_size("batch_size", batch_size, 1), check_size("n", n, 3)
    if batch_size <= 0 or n < 3:
        fail("two_halves sizes", "batch_size >= 1 and n >= 3", f"batch_size={batch_size}, n={n}")
    p1, p2 = (torch.randint(0, 2, (batch_size,), generator=generator) for _ in range(2))
    first_half = torch.arange(n) < n // 2
    prob_a = torch.where(first_half, 0.25 + 0.5 * p1[:, None], 0.25 + 0.5 * p2[:, None])
    tokens = torch.where(torch.rand(batch_size, n, generator=generator) < prob_a,
                         SYMBOL_A, SYMBOL_B)
    tokens[:, 0] = CLS
    return tokens.to(device), (p1 == p2).long().to(device)


# ==== lesson 03: multi-scale attention
def effective_scale_task(batch_size: int, n: int, d: int, k: int, generator: torch.Generator,
                         device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The effective-scale task of Guo et al. (2020): which distances must a model bridge?

    a_1, ..., a_N ∈ R^d with entries ~ U(0, 1); the target is Σ_{i=1}^{K} a_i ⊙ a_{N−i+1}: the
    i-th token from the front must meet the i-th from the back, across distances N − 1, N − 3,
    ..., N − 2K + 1. Small K needs only the longest distances; K = N/2 every distance.

    Returns x (B, N, d) float32 and y (B, d).
    """
    batch_size, n = check_size("batch_size", batch_size, 1), check_size("n", n, 1)
    d, k = check_size("d", d, 1), check_size("k", k, 1)
    if batch_size <= 0 or d <= 0 or n < 2 or not 1 <= k <= n // 2:
        fail("effective_scale_task sizes", "batch_size, d >= 1, n >= 2 and 1 <= k <= n // 2",
             f"batch_size={batch_size}, n={n}, d={d}, k={k}")
    x = torch.rand(batch_size, n, d, generator=generator)
    y = (x[:, :k] * x.flip(1)[:, :k]).sum(1)  # a_i ⊙ a_{N-i+1}, i = 1..K
    return x.to(device), y.to(device)


PARTNER_X, PARTNER_Y, PARTNER_Z, PARTNER_FILLER = 1, 2, 3, 4  # token ids; fillers 4, 5, ...


def partner_task(size: int, n: int, pairs: int, rng: np.random.Generator, n_fillers: int = 8,
                 gap: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Lesson 03's task that needs a small scale *and* a large one.

    Every sequence of n tokens holds `pairs` (odd) tokens X, each right next to a partner, Y or
    Z, on a random side (XY or YX: windows see distance, not direction, so the rule must not
    depend on it). Label 1 if more X stand next to a Y than next to a Z. The vote is always
    as close as it can be: (pairs + 1) / 2 against (pairs − 1) / 2.
    Lone Y and Z fill up both to `pairs` each, so the bag of tokens is the same for both labels:
    only *which token stands next to which* tells them apart (a local pattern: ω >= 1), and
    only counting the pairs over the whole sequence decides the vote (a global count). Between
    any two units (pair or lone token) lie at least `gap` filler tokens (ids 4 .. 4 +
    n_fillers − 1), so a window of ω <= gap around an X holds its partner and nothing else.

    Returns tokens (size, n) int64 (no padding) and labels (size,) int64.
    """
    units_len = 3 * pairs  # 2 per pair, 1 per lone token (there are `pairs` lone tokens)
    if size < 1 or pairs < 1 or pairs % 2 == 0 or n < units_len + gap * (2 * pairs - 1):
        fail("partner_task sizes", "size >= 1, an odd number of pairs, and n >= 3·pairs + "
             "gap·(2·pairs − 1)", f"size={size}, n={n}, pairs={pairs}, gap={gap}")
    tokens = np.empty((size, n), dtype=np.int64)
    labels = rng.integers(0, 2, size)
    x, y, z = PARTNER_X, PARTNER_Y, PARTNER_Z
    for b in range(size):
        with_y = pairs // 2 + int(labels[b])  # the majority partner wins by one pair
        units = [[x, y] for _ in range(with_y)] + [[x, z] for _ in range(pairs - with_y)]
        units = [u[::-1] if rng.random() < 0.5 else u for u in units]  # XY or YX
        units += [[y]] * (pairs - with_y) + [[z]] * with_y  # lone tokens: pairs Y and Z in all
        units = [units[i] for i in rng.permutation(len(units))]
        spare = n - units_len - gap * (len(units) - 1)  # fillers beyond the minimum gaps
        extra = np.diff(np.concatenate([[0], np.sort(rng.integers(0, spare + 1, len(units))),
                                        [spare]]))  # a random split into len(units) + 1 gaps
        row = []
        for i, unit in enumerate(units):
            row += [PARTNER_FILLER] * (int(extra[i]) + (gap if i else 0)) + unit
        row += [PARTNER_FILLER] * int(extra[-1])
        tokens[b] = row
    fillers = tokens == PARTNER_FILLER
    tokens[fillers] += rng.integers(0, n_fillers, int(fillers.sum()))
    return torch.from_numpy(tokens), torch.from_numpy(labels)


GLOVE_PAD, GLOVE_UNK = 0, 1  # the first two rows of `glove_corpus`'s embedding matrix


def glove_corpus(splits: dict[str, list[str]], vocab: list[str], vectors: np.ndarray,
                 max_len: int) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """Sentences -> GloVe word ids, for the lesson-03 sentiment models.

    `splits` maps a split name to its sentences; each is tokenized (`tools.data.tokenize`) and
    cut to `max_len` words. Only the words that occur get a row: the embedding matrix is
    [GLOVE_PAD = 0 ; GLOVE_UNK = 0 (words GloVe lacks) ; the GloVe vector of each word that occurs].
    Returns {split: (ids (n, max_len) int64, lengths (n,) int64)} and the matrix (V, 50).
    """
    check_array("vectors", vectors, "float", ndim=2, hint="(V, dim)", like=np.ndarray)
    if len(vocab) != vectors.shape[0]:
        fail("vectors", f"one row per word of vocab ({len(vocab)})", describe(vectors))
    max_len = check_size("max_len", max_len, 1)
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
            ids[b, :len(s)] = torch.tensor([row.get(w, GLOVE_UNK) for w in s], dtype=torch.long)
        out[name] = (ids, torch.tensor([max(len(s), 1) for s in sents]))
    return out, torch.from_numpy(matrix)
