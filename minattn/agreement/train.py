"""Training for lesson 08's Table 2: runs that record attention and probe at the authors'
checkpoints, and the table's rows from those records (`metric.agreement_row_np`).

The authors (`classification/utils.py`, `translation/utils.py`) train with Adam and no gradient
clipping, evaluate at steps 0, 10, 50, 100, 150, 200, 250 and then every 250 (classification)
or 0, 50, 100, 500, 1000, 1500 and then every 2000 (translation), and keep at each checkpoint
the attention α and the probe β on one validation set, with the performance.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import torch

from ..checks import check_size
from ..course.train import length_batches, train
from .metric import agreement_row_np


def checkpoints(steps: int, early, every: int) -> list[int]:
    """The authors' evaluation schedule: the `early` steps, then every `every` steps, the last."""
    steps, every = check_size("steps", steps, 1), check_size("every", every, 1)
    return sorted({s for s in early if s <= steps} | set(range(every, steps + 1, every)) | {steps})


def recorded_run(model: torch.nn.Module, batch_fn: Callable, loss_fn: Callable, steps: int,
                 at: list[int], measure: Callable, lr: float, desc: str) -> dict:
    """Train (Adam, no clipping, as the authors) and keep, at every checkpoint in `at`, what
    `measure(model)` returns: the attention α and probe β (M, T, N) on the validation set and
    the performance. Returns {"alpha": (C, M, T, N), "beta": (C, M, T, N), "perf": (C,)}."""
    record = {"alpha": [], "beta": [], "perf": []}

    def evaluate():
        for key, value in zip(record, measure(model)):
            record[key].append(value)
        return {"perf": record["perf"][-1]}

    # `train`'s AdamW without weight decay is Adam
    train(model, batch_fn, loss_fn, steps, lr=lr, clip=None, evaluate=evaluate, eval_at=at,
          desc=desc)
    return {key: np.stack(values) for key, values in record.items()}


def table2_rows(standard: list[dict], uniform: dict, key_mask=None, row_mask=None) -> list[dict]:
    """One Table-2 row per choice of gold: standard run g gives α*, the runs after it
    (cyclically) are the re-seeded ones, the first of them gives β (`agreement_row_np`)."""
    return [agreement_row_np(standard[g], standard[g + 1:] + standard[:g], uniform, key_mask,
                             row_mask) for g in range(len(standard))]


def length_batches_forever(lengths, size: int, seed: int) -> Iterator[torch.Tensor]:
    """Mini-batches of indices of similar lengths (less padding), reshuffled every epoch."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        yield from length_batches(torch.as_tensor(lengths), size, generator)
