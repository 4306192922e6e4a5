"""Training and probing lesson 07's read-outs: batches of similar length, training until the
validation score stops improving, and the deletion test of what a head reads.

    Task               a task's data: its splits, text lengths, targets, loss and metric
    by_length, predict evaluation in chunks of similar length, in the order asked
    fit                train until converged (validation plateau) or the cap, keep the best
    finetune           LP-FT's second stage: trainable top layers under a trained read-out
    drop_effects       |Δp| when the token a head weighs most, or a random one, is removed,
                       for the head's model and for models that never saw its weights
    per_run, mean_std, results_table   fit's results over seeds, summarised
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
import torch

from ..checks import check_size, fail
from ..course.train import KeepBest, length_batches, train, warmup_linear
from .baselines import drop_token
from .reference import pearson_loss_torch


@dataclass(frozen=True)
class Task:
    """A task's data, by row index: `splits` {"train", "val", "test"} -> rows (np arrays);
    `lengths` (N,) tokens per row (for batches of similar length); `targets` (N,) tensor;
    `kind` "classify" (logits (B, C) or (B,) -> accuracy) or "correlate" (scores -> Pearson r);
    `loss` (pred, target) -> scalar."""

    splits: dict
    lengths: np.ndarray
    targets: torch.Tensor
    kind: str
    loss: Callable

    def __post_init__(self):
        if set(self.splits) != {"train", "val", "test"} or self.kind not in ("classify",
                                                                               "correlate"):
            fail("Task", "splits train/val/test and kind 'classify' or 'correlate'",
                 f"splits {sorted(self.splits)}, kind {self.kind!r}")

    def decide(self, pred: torch.Tensor) -> torch.Tensor:
        return pred.argmax(-1) if pred.ndim == 2 else (pred > 0).long()

    def score(self, pred: torch.Tensor, rows) -> float:
        """Accuracy, or Pearson r for a correlate task, of predictions `pred` on `rows`."""
        y = self.targets[rows]
        if self.kind == "correlate":
            return -pearson_loss_torch(pred.double(), y.double()).item()
        return (self.decide(pred) == y.long()).double().mean().item()

    def items(self, pred: torch.Tensor, rows) -> list | None:
        """Per row 1.0 where the decision is right (None for a correlation: no mean over rows)."""
        if self.kind == "correlate":
            return None
        return (self.decide(pred) == self.targets[rows].long()).double().cpu().tolist()


def by_length(rows, lengths, chunk: int = 64) -> list:
    """Positions in `rows`, sorted by their texts' lengths and cut into chunks of `chunk`: little
    padding in each batch."""
    chunk = check_size("chunk", chunk, 1)
    order = np.argsort(np.asarray(lengths)[rows], kind="stable")
    return [order[i:i + chunk] for i in range(0, len(order), chunk)]


def predict(forward: Callable, inputs: Callable, rows, lengths, chunk: int = 64) -> torch.Tensor:
    """forward(*inputs(rows)) in chunks of similar length, returned in the order of `rows`."""
    chunks = by_length(rows, lengths, chunk)
    out = torch.cat([forward(*inputs(rows[part])) for part in chunks])
    return out[torch.as_tensor(np.argsort(np.concatenate(chunks)), device=out.device)]


def fit(model: torch.nn.Module, task: Task, inputs: Callable, forward: Callable, seed: int,
        batch_size: int, epochs: float, checks: int = 2, patience: int = 3,
        optimizer: torch.optim.Optimizer | None = None, schedule: Callable | None = None,
        chunk: int = 64, clock: Callable[[], float] = time.process_time,
        check_start: bool = False) -> dict:
    """Train `model` on the task's training rows until it converges, and test it.

    Batches of `batch_size` rows of similar length (`length_batches`, the same for every model
    of this `seed`); AdamW at 1e-3 unless an `optimizer` (and `schedule`) is given. The
    validation score is checked `checks` times per epoch; the run has *converged* when
    `patience` checks in a row bring no better one, and stops; at `epochs` it stops anyway,
    not converged. The best weights are kept; with `check_start` the starting weights are
    validated too (step 0), so a run that finds nothing better keeps them and reports
    best_step 0. inputs(rows) -> the model's inputs;
    forward(model, *inputs) -> predictions. Returns test (the score), items (per test row),
    val (the best validation score), converged, steps, best_step, per_epoch, seconds (the
    training steps alone, validation apart), history and the model.
    """
    train_rows = task.splits["train"]
    generator = torch.Generator().manual_seed(seed)
    per_epoch = int(np.ceil(len(train_rows) / check_size("batch_size", batch_size, 1)))
    lengths = torch.as_tensor(task.lengths[train_rows])
    batches = [train_rows[b.numpy()] for _ in range(int(np.ceil(epochs)))
               for b in length_batches(lengths, batch_size, generator)]
    batches = batches[:max(1, int(epochs * per_epoch))]
    spent = [0.0]

    def evaluate(rows):
        with torch.no_grad():
            return predict(lambda *x: forward(model, *x), inputs, rows, task.lengths, chunk)

    def validate():
        t = clock()
        value = task.score(evaluate(task.splits["val"]), task.splits["val"])
        spent[0] += clock() - t
        return {"val": value}

    keep = KeepBest(model, "val", patience)
    every = max(1, per_epoch // checks)
    t0 = clock()
    history = train(model, lambda step: (*inputs(batches[step - 1]),
                                         task.targets[batches[step - 1]]),
                    lambda m, *batch: task.loss(forward(m, *batch[:-1]), batch[-1]),
                    len(batches), lr=1e-3, optimizer=optimizer, schedule=schedule,
                    evaluate=validate, eval_every=every, stop=keep, progress=False,
                    eval_at=[*range(0, len(batches), every), len(batches)] if check_start
                    else None)
    seconds = clock() - t0 - spent[0]
    keep.restore()
    model.eval()
    pred = evaluate(task.splits["test"])
    return dict(test=task.score(pred, task.splits["test"]),
                items=task.items(pred, task.splits["test"]), val=keep.best,
                converged=keep.misses >= patience, steps=history["step"][-1],
                best_step=keep.best_step, per_epoch=per_epoch, seconds=seconds,
                history=history, model=model)


def finetune(model: torch.nn.Module, readout: torch.nn.Module, task: Task, inputs: Callable,
             forward: Callable, seed: int, batch_size: int, epochs: float, encoder_lr: float,
             head_lr: float, checks: int = 3, patience: int = 3, **kw) -> dict:
    """Stage 2 of LP-FT: `model` (a read-out over trainable top layers `model.encoder`) starts
    from the trained `readout` of stage 1 (every weight but the encoder's is copied), and both
    train with AdamW (the encoder at `encoder_lr`, the rest at `head_lr`, weight decay 0.01),
    a linear warm-up over the first 10 % of the cap and linear decay to it, until converged
    (`fit`; gradients clipped at 1). The stage-1 weights are validated first (step 0): a run
    whose best_step is 0 found nothing better than stage 1. Returns fit's dict."""
    loaded = model.load_state_dict(readout.state_dict(), strict=False)
    if loaded.unexpected_keys or any(not k.startswith("encoder.") for k in loaded.missing_keys):
        fail("finetune: the stage-1 read-out does not match the model",
             "the same read-out, with model.encoder the only new part",
             f"missing {loaded.missing_keys[:3]}, unexpected {loaded.unexpected_keys[:3]}")
    tuned = {id(p) for p in model.encoder.parameters()}
    optimizer = torch.optim.AdamW(
        [{"params": list(model.encoder.parameters()), "lr": encoder_lr},
         {"params": [p for p in model.parameters() if id(p) not in tuned], "lr": head_lr}],
        weight_decay=0.01)
    steps = max(1, int(epochs * np.ceil(len(task.splits["train"]) / batch_size)))
    return fit(model, task, inputs, forward, seed, batch_size, epochs, checks, patience,
               optimizer=optimizer, schedule=warmup_linear(max(1, steps // 10), steps),
               check_start=True, **kw)


def drop_effects(chunks: Iterable, generator: torch.Generator) -> dict:
    """What removing one token does, per item: the token the head weighs most ("top") and a
    random other real token ("random"; never the first token).

    chunks: (x (B, L, D), mask (B, L), weights (B, L) of the head, {name: prob(x, mask)}) per
    batch, prob giving each model's probability with x's tokens changed and the rest kept.
    Returns {(name, "top" | "random"): (N,) |Δp|} and {("weight", ...): (N,) a/(1 − a)} of
    the removed token's weight a: the factor by which a read-out z = Σ a_i v_i moves,
    |Δz| = a/(1 − a)·|v − z|, whatever the token means.
    """
    out: dict = {}
    for x, mask, weights, probs in chunks:
        n = mask.sum(1)
        if bool((n < 3).any()):
            fail("drop_effects needs sentences of 3 tokens or more", "lengths >= 3",
                 f"{n.min().item()}")
        w = weights.masked_fill(~mask, -1.0).clone()
        w[:, 0] = -1.0
        top = w.argmax(1)
        rand = (torch.rand(len(n), generator=generator).to(x.device) * (n - 2)).long() + 1
        rand = rand + (rand >= top).long()  # 1 .. n-1 without the top token
        before = {name: prob(x, mask) for name, prob in probs.items()}
        for token, index in (("top", top), ("random", rand)):
            a = weights.gather(1, index[:, None])[:, 0]
            out.setdefault(("weight", token), []).append((a / (1 - a)).cpu())
            for name, prob in probs.items():
                change = (prob(*drop_token(x, mask, index)) - before[name]).abs()
                out.setdefault((name, token), []).append(change.cpu())
    return {key: torch.cat(values).numpy() for key, values in out.items()}


def per_run(results: dict, task: str, arm: str, key: str = "test") -> list:
    """results[(task, arm, seed)][key], one value per seed, in the order the runs were made."""
    return [r[key] for (t, a, _), r in results.items() if (t, a) == (task, arm)]


def mean_std(values) -> str:
    """'mean ± std' over runs to 3 decimals; '-' when there is none."""
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}" if len(values) else "-"


def results_table(results: dict, task: str, arms, lines: dict) -> None:
    """Print each arm of `task` in `results` {(task, arm, seed): fit's dict}: test score (mean ±
    std over seeds), runs converged, epochs to the best validation score, CPU seconds of
    training per run, and the distance to each reference line {name: score}."""
    print(f"{task:10s} {'read-out':17s} {'test (mean ± std)':>18s} {'converged':>9s} "
          f"{'best epoch':>10s} {'s/run':>6s}  " + "  ".join(f"{'vs ' + k:>18s}" for k in lines))
    for arm in arms:
        runs = [r for (t, a, _), r in results.items() if (t, a) == (task, arm)]
        score, flags = np.mean([r["test"] for r in runs]), [r["converged"] for r in runs]
        epoch = np.mean([r["best_step"] / r["per_epoch"] for r in runs])
        print(f"{'':10s} {arm:17s} {mean_std([r['test'] for r in runs]):>18s} "
              f"{f'{sum(flags)} of {len(flags)}':>9s} {epoch:10.1f} "
              f"{np.mean([r['seconds'] for r in runs]):6.0f}  " + "  ".join(
                  f"{score - v:+10.3f} ({'below' if score < v else 'above'})"
                  for v in lines.values()))
