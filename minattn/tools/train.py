"""A small training loop with a tqdm bar and a history, shared by every lesson."""

from __future__ import annotations

from typing import Callable, Iterable

import torch
from tqdm import tqdm


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
          eval_at: Iterable[int] | None = None) -> History:
    """Train `model` with AdamW for `steps` steps.

    Args:
        batch_fn: step -> batch (a tuple passed as `loss_fn(model, *batch)`).
        loss_fn: (model, *batch) -> scalar loss tensor.
        evaluate: () -> {metric: value}, called every `eval_every` steps and at the end
            (under torch.no_grad, with the model in eval mode).
        eval_at: evaluate at exactly these steps instead (0 = before the first update).
    Returns:
        History with 'loss' every step and each metric of `evaluate`.
    """
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    history = History(step=[])
    eval_at = None if eval_at is None else set(eval_at)
    if evaluate is not None and eval_at is not None and 0 in eval_at:
        model.eval()
        with torch.no_grad():
            history.log(0, **evaluate())
    bar = tqdm(range(1, steps + 1), desc=desc, disable=not progress, mininterval=0.5)
    for step in bar:
        model.train()
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
    return history
