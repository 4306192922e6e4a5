"""Lesson 01's synthetic tasks. Each returns tensors on the device you ask for and takes a
torch.Generator, so a batch is the same every run."""

from __future__ import annotations

import torch

from ..checks import check_size, fail


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
