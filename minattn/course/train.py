"""A small training loop with a tqdm bar and a history, shared by every lesson."""

from __future__ import annotations

from typing import Callable, Iterable

import torch
from tqdm import tqdm

from ..contract import check_array, check_size, describe, fail


class History(dict):
    """Lists of logged values: history['step'], history['loss'], and whatever `evaluate` returns
    under history['<metric>'] with its steps in history['<metric>_step']."""

    def log(self, step: int, **values) -> None:
        for key, value in values.items():
            self.setdefault(key, []).append(float(value))
            self.setdefault(f"{key}_step", []).append(step)

    def last(self, key: str) -> float:
        return self[key][-1]


def train(model: torch.nn.Module,
          batch_fn: Callable[[int], tuple],
          loss_fn: Callable[..., torch.Tensor],
          steps: int,
          lr: float = 1e-3,
          evaluate: Callable[[], dict] | None = None,
          eval_every: int = 100,
          weight_decay: float = 0.0,
          clip: float | None = 1.0,
          desc: str = "train",
          progress: bool = True,
          eval_at: Iterable[int] | None = None,
          optimizer: torch.optim.Optimizer | None = None,
          schedule: Callable[[int], float] | None = None,
          stop: Callable[[History], bool] | None = None) -> History:
    """Train `model` with AdamW for `steps` steps.

    Args:
        batch_fn: step -> batch (a tuple passed as `loss_fn(model, *batch)`).
        loss_fn: (model, *batch) -> scalar loss tensor.
        evaluate: () -> {metric: value}, called every `eval_every` steps and at the end
            (under torch.no_grad, with the model in eval mode).
        eval_at: evaluate at exactly these steps instead (0 = before the first update).
        optimizer: used instead of AdamW(lr, weight_decay), e.g. with parameter groups.
        schedule: step -> learning-rate factor of every group (warm-up, decay; see
            `warmup_linear`), applied before each step.
        stop: History -> True to end training early, asked after each evaluation (lesson 07's
            `fit` keeps its own best weights); after one at step 0 it is told, but training
            goes on.
    Returns:
        History with 'loss' every step and each metric of `evaluate`.
    """
    opt = optimizer or torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    base_lrs = [group["lr"] for group in opt.param_groups]
    history = History(step=[])
    eval_at = None if eval_at is None else set(eval_at)
    if evaluate is not None and eval_at is not None and 0 in eval_at:
        model.eval()
        with torch.no_grad():
            history.log(0, **evaluate())
        if stop is not None:
            stop(history)  # the starting weights compete too: a run may find none better
    bar = tqdm(range(1, steps + 1), desc=desc, disable=not progress, mininterval=0.5)
    for step in bar:
        model.train()
        if schedule is not None:
            for group, base in zip(opt.param_groups, base_lrs):
                group["lr"] = base * schedule(step)
        loss = loss_fn(model, *batch_fn(step))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        history["step"].append(step)
        history.setdefault("loss", []).append(loss.item())
        due = step in eval_at if eval_at is not None else (step % eval_every == 0 or step == steps)
        if evaluate is not None and due:
            model.eval()
            with torch.no_grad():
                metrics = evaluate()
            history.log(step, **metrics)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False,
                            **{k: f"{v:.3f}" for k, v in metrics.items()})
            if stop is not None and stop(history):
                break
    return history


def warmup_linear(warmup: int, steps: int) -> Callable[[int], float]:
    """Learning-rate factor for step 1..steps: linear warm-up from 0 over `warmup` steps, then
    linear decay to 0 at `steps` (BERT's fine-tuning schedule)."""
    def factor(step: int) -> float:
        if step <= warmup:
            return step / max(warmup, 1)
        return max(0.0, (steps - step) / max(steps - warmup, 1))
    return factor


def count_parameters(model: torch.nn.Module) -> int:
    """The number of trainable parameters (those with requires_grad)."""
    if not isinstance(model, torch.nn.Module):
        fail("model", "a torch.nn.Module", describe(model))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def length_batches(lengths: torch.Tensor, batch_size: int, generator: torch.Generator
                   ) -> list[torch.Tensor]:
    """Index batches of sentences of similar length (less padding, same examples): sort by
    length (random order among equal lengths), cut into batches, shuffle the batches."""
    check_array("lengths", lengths, "int", ndim=1, hint="(n,) sentence lengths", like=torch.Tensor)
    if len(lengths) and int(lengths.min()) < 0:
        fail("lengths", "lengths >= 0", f"a minimum of {int(lengths.min())}")
    batch_size = check_size("batch_size", batch_size, 1)
    if batch_size < 1 or lengths.ndim != 1:
        fail("length_batches", "(n,) lengths and batch_size >= 1",
             f"lengths {tuple(lengths.shape)}, batch_size={batch_size}")
    jitter = torch.rand(len(lengths), generator=generator)
    order = torch.argsort(lengths.double() + 0.5 * jitter)
    batches = list(order.split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator)]
