"""Lesson 03's training runs: the two synthetic tasks and the sentence classifiers.

    fit_partner            a model on the partner task -> test accuracy
    fit_effective_scale    a model on the effective-scale task -> History of its test error
    fit_sentences          a classifier on GloVe ids, best development epoch kept
                           -> (that epoch, which test sentences it gets right)

Each run is a function of its model (built under `torch.manual_seed(seed)` by the caller) and
its seed, which also draws its training batches: the same seed gives the same numbers.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from ..course.train import History, length_batches, train
from .data import effective_scale_task, partner_task


def _adamw(model, lr):
    """AdamW with its multi-tensor update: on a CPU the default updates one tensor at a time,
    which costs these small models a few percent of every step."""
    return torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)


def fit_partner(model, seed: int, steps: int, test: tuple[torch.Tensor, torch.Tensor],
                n: int, pairs: int, batch_size: int = 32, lr: float = 3e-3,
                desc: str = "partner", progress: bool = True) -> float:
    """Train `model` on fresh `partner_task` batches (drawn from `seed`) with cross-entropy for
    `steps` steps; returns its accuracy on `test` = (tokens (M, n), labels (M,))."""
    device = next(model.parameters()).device
    rng = np.random.default_rng(10 + seed)
    x_test, y_test = (t.to(device) for t in test)

    def evaluate():
        return {"acc": (model(x_test).argmax(-1) == y_test).float().mean().item()}

    history = train(model, lambda step: tuple(t.to(device) for t in partner_task(
        batch_size, n, pairs, rng)), lambda m, x, y: F.cross_entropy(m(x), y), steps=steps,
        optimizer=_adamw(model, lr), evaluate=evaluate, eval_every=steps, desc=desc,
        progress=progress)
    return history.last("acc")


def fit_effective_scale(model, seed: int, steps: int, test: tuple[torch.Tensor, torch.Tensor],
                        k: int = 1, batch_size: int = 32, lr: float = 3e-3,
                        eval_every: int = 250, stop=None, desc: str = "effective scale",
                        progress: bool = True) -> History:
    """Train `model` on fresh `effective_scale_task` batches (N and d from `test`, drawn from
    `seed`) with the MSE for up to `steps` steps; history["nmse"] is the test MSE / Var(target)
    every `eval_every` steps (1 = predicting the mean). `stop(history)` -> True ends training
    early (asked after each evaluation)."""
    x_test, y_test = test
    _, n, d = x_test.shape
    gen = torch.Generator().manual_seed(1 + seed)
    variance = y_test.var().item()

    def evaluate():
        return {"nmse": F.mse_loss(model(x_test), y_test).item() / variance}

    return train(model, lambda step: effective_scale_task(batch_size, n, d, k, gen,
                                                          x_test.device),
                 lambda m, x, y: F.mse_loss(m(x), y), steps=steps, optimizer=_adamw(model, lr),
                 evaluate=evaluate, eval_every=eval_every, stop=stop, desc=desc,
                 progress=progress)


def _batch(split, idx, device):
    """One batch of a split (ids, lengths, labels), cut to its longest sentence: N = that."""
    ids, lengths, labels = split
    length = lengths[idx]
    return (ids[idx, :int(length.max())].to(device), length.to(device), labels[idx].to(device))


@torch.no_grad()
def right_per_sentence(model, split, batch_size: int = 256) -> np.ndarray:
    """(n,) bool: which sentences of `split` = (ids (n, N), lengths (n,), labels (n,)) the
    model classifies right (batches of similar length; eval mode)."""
    model.eval()
    device = next(model.parameters()).device
    right = torch.zeros(len(split[1]), dtype=torch.bool)
    for idx in length_batches(split[1], batch_size, torch.Generator().manual_seed(0)):
        x, length, y = _batch(split, idx, device)
        right[idx] = (model(x, length).argmax(-1) == y).cpu()
    return right.numpy()


def fit_sentences(model, data: dict, epochs: int, seed: int, batch_size: int = 64,
                  lr: float = 3e-3, desc: str = "sentences", progress: bool = True
                  ) -> tuple[int, np.ndarray, list[float]]:
    """Train a sentence classifier for `epochs` epochs of `data["train"]` (batches of similar
    length, shuffled from `seed`), check `data["valid"]` after each epoch and keep the epoch
    with the best accuracy there (the model is left with its weights).

    data: {"train" | "valid" | "test": (ids (n, N) int64, lengths (n,), labels (n,))}.
    Returns the best epoch (1-based), which test sentences it gets right ((n_test,) bool) and
    the development accuracy after each epoch.
    """
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    batches = [b for _ in range(epochs) for b in length_batches(data["train"][1], batch_size,
                                                                gen)]
    valid: list[float] = []  # accuracy on data["valid"] after each epoch
    best = {}

    def evaluate():
        acc = float(right_per_sentence(model, data["valid"]).mean())
        if not valid or acc > max(valid):  # the first epoch of the best accuracy is kept
            best.update(epoch=len(valid) + 1, state=copy.deepcopy(model.state_dict()))
        valid.append(acc)
        return {"valid": acc}

    train(model, lambda step: _batch(data["train"], batches[step - 1], device),
          lambda m, x, length, y: F.cross_entropy(m(x, length), y), steps=len(batches),
          optimizer=_adamw(model, lr), eval_every=len(batches) // epochs, evaluate=evaluate,
          desc=desc, progress=progress)
    model.load_state_dict(best["state"])
    return best["epoch"], right_per_sentence(model, data["test"]), valid
