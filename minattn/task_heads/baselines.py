"""Reference lines for lesson 07's heads: what a pair classifier reads (`pair_features`), the
best threshold on a zero-shot score, a converged linear probe on frozen features, and
dropping one token (to see what a head relies on).
"""

from __future__ import annotations

import numpy as np
import torch

from ..checks import fail, shape_str
from .reference import check_token_states


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """What a pair classifier reads: [u, v, |u − v|, u ⊙ v], (B, D) x 2 -> (B, 4D)
    (Sentence-BERT's (u, v, |u − v|) plus the element-wise product)."""
    if u.shape != v.shape or u.ndim != 2:
        fail("pair_features needs two (B, D) tensors of the same shape", "u (B, D), v (B, D)",
             f"u {shape_str(u.shape)}, v {shape_str(v.shape)}")
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


def best_threshold(scores, labels) -> float:
    """The threshold t that classifies `scores > t` as 1 with the highest accuracy on these
    (training) labels: a zero-shot score (e.g. a cosine) turned into a classifier.
    Candidates are the midpoints between consecutive sorted scores (and both ends)."""
    scores, labels = np.asarray(scores, float), np.asarray(labels).astype(bool)
    if scores.ndim != 1 or scores.shape != labels.shape or len(scores) < 2:
        fail("best_threshold needs two vectors of the same length >= 2",
             "scores (N,), labels (N,)", f"{shape_str(scores.shape)}, {shape_str(labels.shape)}")
    s = np.sort(scores)
    candidates = np.concatenate([[s[0] - 1], (s[1:] + s[:-1]) / 2, [s[-1] + 1]])
    accuracy = [((scores > t) == labels).mean() for t in candidates]
    return float(candidates[int(np.argmax(accuracy))])


class LinearProbe:
    """A linear read-out of frozen features, trained to convergence: the reference line that a
    trained head should at least reach.

    kind "logistic": P(y = 1) = σ(w · x̂ + b) by L-BFGS on the mean log-loss + l2/2 · |w|²;
    kind "least_squares": ŷ = w · x̂ + b, ridge regression in closed form (same penalty).
    x̂ = features standardised with the training mean and std. Float64 on the inputs' device.
    fit(x (N, F), y (N,)) -> self;  score(x) -> (N,) logit or prediction (float64 tensor).
    """

    def __init__(self, kind: str = "logistic", l2: float = 1e-3, max_iter: int = 500):
        if kind not in ("logistic", "least_squares"):
            fail("unknown LinearProbe kind", "'logistic' or 'least_squares'", repr(kind))
        if not l2 > 0:
            fail("LinearProbe needs a positive l2 penalty", "l2 > 0", f"l2 = {l2}")
        self.kind, self.l2, self.max_iter = kind, l2, max_iter

    def _standardise(self, x: torch.Tensor) -> torch.Tensor:
        return (x.double() - self.mu) / self.sd

    def fit(self, x: torch.Tensor, y: torch.Tensor) -> "LinearProbe":
        if x.ndim != 2 or y.shape != x.shape[:1]:
            fail("LinearProbe.fit needs features (N, F) and targets (N,)", "x (N, F), y (N,)",
                 f"x {shape_str(x.shape)}, y {shape_str(y.shape)}")
        x = x.double()
        self.mu, self.sd = x.mean(0), x.std(0).clamp_min(1e-8)
        xs, y = self._standardise(x), y.double()
        n, f = xs.shape
        if self.kind == "least_squares":  # [w; b] = (X̃ᵀX̃ + n·l2·I')⁻¹ X̃ᵀ y, b free
            xa = torch.cat([xs, torch.ones(n, 1, dtype=xs.dtype, device=xs.device)], dim=1)
            penalty = torch.eye(f + 1, dtype=xs.dtype, device=xs.device) * n * self.l2
            penalty[-1, -1] = 0
            wb = torch.linalg.solve(xa.T @ xa + penalty, xa.T @ y)
            self.w, self.b = wb[:-1], wb[-1]
            return self
        w = torch.zeros(f, dtype=xs.dtype, device=xs.device, requires_grad=True)
        b = torch.zeros((), dtype=xs.dtype, device=xs.device, requires_grad=True)
        opt = torch.optim.LBFGS([w, b], lr=1, max_iter=self.max_iter, tolerance_grad=1e-9,
                                tolerance_change=1e-12, history_size=20,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(xs @ w + b, y) \
                + 0.5 * self.l2 * (w * w).sum()
            loss.backward()
            return loss

        opt.step(closure)
        self.w, self.b = w.detach(), b.detach()
        return self

    def score(self, x: torch.Tensor) -> torch.Tensor:
        return self._standardise(x) @ self.w + self.b


def drop_token(states: torch.Tensor, mask: torch.Tensor, index
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Remove token `index[b]` from sentence b (an intervention: does the prediction move
    without it?). states (B, L, D), mask (B, L) right-padded, index (B,) of real tokens other
    than the first -> states (B, L − 1, D), mask (B, L − 1), still right-padded."""
    check_token_states(states, mask)
    index = torch.as_tensor(index, device=states.device).reshape(-1)
    lengths = mask.sum(dim=1)
    if len(index) != len(states) or bool(((index < 1) | (index >= lengths)).any()):
        fail("drop_token needs one real token per sentence, not the first",
             f"{len(states)} indices in [1, length)", f"{index.tolist()} for lengths "
             f"{lengths.tolist()}")
    positions = torch.arange(states.shape[1], device=states.device)
    keep = positions[None, :] != index[:, None]  # (B, L): exactly one False per row
    return (states[keep].view(len(states), -1, states.shape[2]),
            mask[keep].view(len(states), -1))
