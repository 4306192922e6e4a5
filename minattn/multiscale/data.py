"""Lesson 03's tasks and corpus: the effective-scale task of Guo et al., the partner task
(a small scale and a large one) and GloVe word ids for the sentiment models. Each takes a
torch.Generator or a NumPy Generator, so a batch is the same every run."""

from __future__ import annotations

import numpy as np
import torch

from ..checks import check_array, check_size, describe, fail
from ..course.data import tokenize


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
