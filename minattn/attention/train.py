"""Training lesson 01's demo models on its two tasks, one run per call (a model and its
`History`), each evaluated on a fixed held-out set the caller gives:

    train_reversal   a `PositionReader` on reversal (positions: none, sinusoid or learned)
    train_recall     `RecallAttention` or `RecallMeanPool` on associative recall

plus what the lesson reads off a run: `steps_to` (the first evaluated step at which a metric
reached a target) and `most_frequent_value_accuracy` (the best a model blind to which value
sat with which key can do on recall).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..checks import check_size, fail
from ..course.train import History, train
from ..course.utils import set_seed
from .data import associative_recall, reversal
from .model import PositionReader


def reversal_loss(model, tokens, targets):
    """Cross-entropy of every position's symbol logits: tokens, targets (B, N)."""
    return F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())


def recall_loss(model, batch):
    """Cross-entropy of every question's value logits; batch from `associative_recall`."""
    logits = model(batch["queries"], batch["keys"], batch["values"])  # (B, Q, n_values)
    return F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten())


def recall_accuracy(model, batch) -> float:
    """Share of the questions answered with the right value."""
    logits = model(batch["queries"], batch["keys"], batch["values"])
    return (logits.argmax(-1) == batch["targets"]).float().mean().item()


def most_frequent_value_accuracy(batch, n_values: int) -> float:
    """Accuracy of answering every question with the value that occurs most often among the
    example's pairs: the best a model blind to which value sat with which key can do (tied
    values count equally, so ties do not matter)."""
    counts = F.one_hot(batch["values"], n_values).sum(1)  # (B, n_values)
    guess = counts.argmax(-1, keepdim=True)  # (B, 1)
    return (batch["targets"] == guess).float().mean().item()


def steps_to(history: History, target: float, key: str = "accuracy") -> int | None:
    """The first evaluated step at which `history[key]` reached `target` (None: never)."""
    if key not in history:
        fail("history", f"a History with evaluations of {key!r}", f"keys {sorted(history)}")
    return next((s for s, a in zip(history[f"{key}_step"], history[key]) if a >= target), None)


def train_reversal(positions: str, seed: int, held_out, *, n_symbols: int, steps: int,
                   eval_every: int, batch_size: int = 128, lr: float = 3e-3, device="cpu"):
    """One `PositionReader` trained on fresh reversal batches of the held-out set's length N.

    held_out: (tokens, targets) (B, N) from `reversal`, on `device`. The seed fixes the
    initialisation and the training batches. Returns (model, History with 'accuracy')."""
    tokens, targets = held_out
    steps, eval_every = check_size("steps", steps, 1), check_size("eval_every", eval_every, 1)
    n = tokens.shape[1]
    set_seed(seed)
    model = PositionReader(n_symbols, n, positions).to(device)
    gen = torch.Generator().manual_seed(seed)

    def evaluate():
        return {"accuracy": (model(tokens).argmax(-1) == targets).float().mean().item()}

    history = train(model, lambda step: reversal(batch_size, n, n_symbols, gen, device),
                    reversal_loss, steps=steps, lr=lr, evaluate=evaluate, eval_every=eval_every,
                    desc=f"{positions}, seed {seed}")
    return model, history


def train_recall(model_class, seed: int, held_out: dict, *, n_keys: int, n_values: int,
                 steps: int, eval_every: int, batch_size: int = 128, lr: float = 3e-3,
                 device="cpu"):
    """One recall model (`RecallAttention` or `RecallMeanPool`) trained on fresh batches with
    the held-out set's number of pairs. Returns (model, History with 'accuracy')."""
    steps, eval_every = check_size("steps", steps, 1), check_size("eval_every", eval_every, 1)
    n_pairs = held_out["keys"].shape[1]
    set_seed(seed)
    model = model_class(n_keys, n_values).to(device)
    gen = torch.Generator().manual_seed(seed)
    history = train(model, lambda step: (associative_recall(batch_size, n_pairs, n_keys, n_values,
                                                            gen, device),),
                    recall_loss, steps=steps, lr=lr, eval_every=eval_every,
                    evaluate=lambda: {"accuracy": recall_accuracy(model, held_out)},
                    desc=f"{model_class.__name__}, seed {seed}")
    return model, history
