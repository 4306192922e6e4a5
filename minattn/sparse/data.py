"""Lesson 02's long-range task. It returns tensors on the device you ask for and takes a
torch.Generator, so a batch is the same every run."""

from __future__ import annotations

import torch

from ..checks import check_size, fail

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
