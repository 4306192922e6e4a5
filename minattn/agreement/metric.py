"""The agreement metric A(a, b), and the paper's Table 2 computed with it the way the authors
compute it (lesson 08).

    agreement A(a, b)           1 if argmax_i a_i is among the top ⌈5%·n⌉ positions of b

Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns" (2021),
§3.1-3.2 and appendix A.7; the recipe is that of the authors' `classification/utils.py`
(`fetch_stats`, `passing_idx`) and `translation/utils.py`, rewritten here for arrays.

Several models are trained and evaluated at the same checkpoints τ on one validation set:
    gold       a standard model; its attention at its best-performance checkpoint is α*
    others     standard models from other seeds: attention α^τ, probe β^τ, performance P^τ
    uniform    the same architecture with attention frozen uniform: its probe β^uf,τ

    A(α, β^uf) = max_τ A(α*, β^uf,τ)      the probe of a model that never learned attention
    A(α, β)    = max_τ A(α*, β^τ)          the probe of a standard model of *another* seed
    curve(τ)   = mean over `others` of A(α*, α^τ), with their mean performance P(τ)
    ξ(α, b)    = P(τ) at the first τ where curve(τ) > A(α, b)      (None: never)
    A_rand     = mean over the counted output words of ⌈5%·n⌉ / n   (a random argmax)

Why the maximum over checkpoints: the agreement first rises, then falls as training goes on
(the paper's appendix A.7), so the authors report its best value, like a dev-set result.
"""

from __future__ import annotations

import numpy as np
import torch

from ..checks import (
    check_array,
    check_finite,
    check_number,
    check_same_device,
    describe,
    fail,
    shape_str,
)


# ========================================================== the metric (NumPy, then its torch twin)
def check_agreement(a, b, mask):
    """a, b (..., N) of one shape, library and device; mask None or bool broadcastable to it
    with at least one real position per row; a and b finite on the real positions. Returns
    the mask, broadcast."""
    like = torch.Tensor if isinstance(a, torch.Tensor) else np.ndarray
    check_array("a", a, None, like=like)
    check_array("b", b, None, like=like)
    if a.shape != b.shape or a.ndim < 1:
        fail("agreement needs two score arrays of one shape", "a, b (..., N)",
             f"{shape_str(a.shape)} and {shape_str(b.shape)}")
    check_same_device(a=a, b=b, mask=mask)
    if mask is None:
        mask = torch.ones_like(a, dtype=torch.bool) if like is torch.Tensor else \
            np.ones(a.shape, bool)
    else:
        check_array("mask", mask, "bool", like=like, hint="(..., N), True = real position")
        try:
            mask = mask.expand(a.shape) if like is torch.Tensor else np.broadcast_to(mask, a.shape)
        except (RuntimeError, ValueError):
            fail("mask", f"a bool mask broadcastable to {shape_str(a.shape)}", describe(mask))
    if a.shape[-1] == 0 or not bool(mask.any(-1).all()):
        fail("mask", "at least one real position in every row", "a row with none")
    check_finite("a", a, where=mask)
    check_finite("b", b, where=mask)
    return mask


def agreement_np(a, b, mask=None):
    """A(a, b) per row: 1.0 if argmax_i a_i is among the top ⌈5%·n⌉ positions of b, else 0.0.

    a, b (..., N) scores over n positions (mask (..., N) bool: True = real position; n = its
    count per row). Ties in b count in favour (only strictly larger values outrank). -> (...,)
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    mask = check_agreement(a, b, None if mask is None else np.asarray(mask))
    # BEGIN EXERCISE 8.1 implement: the agreement metric A(a, b) (~10 min)
    n = mask.sum(-1)
    k = np.ceil(0.05 * n)  # the top 5%, at least one position
    best = np.where(mask, a, -np.inf).argmax(-1)  # (...,) argmax of a over real positions
    b_best = np.take_along_axis(b, best[..., None], -1)
    rank = (np.where(mask, b, -np.inf) > b_best).sum(-1)  # positions of b strictly above it
    return (rank < k).astype(float)
    # END EXERCISE


def agreement_baseline_np(lengths):
    """Expected A(a, b) when argmax a is a uniformly random position: mean of ⌈5%·n⌉ / n."""
    n = np.asarray(lengths)
    if n.size == 0 or n.dtype.kind not in "iu" or (n < 1).any():
        fail("agreement baseline lengths", "a non-empty list of integer lengths >= 1",
             repr(lengths))
    n = n.astype(float)
    return float(np.mean(np.ceil(0.05 * n) / n))


def contextualized_agreement(agreements, performances, threshold):
    """ξ (paper §3.1, eq. 11): the performance at the first checkpoint whose agreement
    *exceeds* `threshold` (strictly, as the authors' `passing_idx`), or None if none does.

    agreements[τ] = A(α*, α^τ) of re-seeded runs at checkpoint τ (averaged over the runs),
    performances[τ] their performance there; threshold = e.g. A(α*, β^uf). ξ reads: "the
    probe agrees with α* as well as an attention that has reached this performance".
    """
    if len(agreements) != len(performances) or not len(agreements):
        fail("contextualized agreement curves", "two non-empty lists of one length",
             f"{len(agreements)} and {len(performances)}")
    threshold = check_number("threshold", threshold)
    for name, values in (("agreements", agreements), ("performances", performances)):
        for value in values:
            check_number(name, value)
    # BEGIN EXERCISE 8.2 implement: the contextualised agreement ξ (~10 min)
    for a, p in zip(agreements, performances):
        if a > threshold:
            return float(p)
    return None
    # END EXERCISE


def agreement_torch(a, b, mask=None):
    """Twin of agreement_np."""
    mask = check_agreement(a, b, mask)
    # BEGIN EXERCISE 8.1 implement: the agreement metric, torch twin
    k = torch.ceil(0.05 * mask.sum(-1))
    neg = torch.tensor(float("-inf"), dtype=a.dtype, device=a.device)
    best = torch.where(mask, a, neg).argmax(-1, keepdim=True)
    rank = (torch.where(mask, b, neg) > b.gather(-1, best)).sum(-1)
    return (rank < k).to(a.dtype)
    # END EXERCISE


# ============================================================================ Table 2

def mean_agreement_np(a, b, key_mask=None, row_mask=None) -> float:
    """A(a, b) averaged over every counted output word of a validation set (paper eq. 10).

    a, b (..., M, T, N): scores of M examples, T output words each (classification: T = 1),
    over N input positions; key_mask (M, N) or (M, T, N) bool: the real input positions;
    row_mask (M, T) bool: the output words that count (real, and e.g. not <unk>).
    Leading axes (checkpoints, say) are kept: returns a float, or an array of those axes.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.ndim < 3:
        fail("mean agreement needs two score arrays of one shape", "a, b (..., M, T, N)",
             f"{shape_str(a.shape)} and {shape_str(b.shape)}")
    M, T, N = a.shape[-3:]
    keys = np.ones((M, T, N), bool) if key_mask is None else np.asarray(key_mask, bool)
    keys = keys[:, None, :] if keys.ndim == 2 else keys
    rows = np.ones((M, T), bool) if row_mask is None else np.asarray(row_mask, bool)
    if keys.shape not in ((M, T, N), (M, 1, N)) or rows.shape != (M, T) or not rows.any():
        fail("agreement masks", f"key_mask (M, N) or (M, T, N) and row_mask (M, T) with "
             f"M, T, N = {M}, {T}, {N} and at least one counted row",
             f"{shape_str(keys.shape)} and {shape_str(rows.shape)}")
    per_row = agreement_np(a, b, np.broadcast_to(keys, (M, T, N)))  # (..., M, T)
    result = per_row[..., rows].mean(-1)
    return float(result) if np.ndim(result) == 0 else result


def random_baseline_np(key_mask, row_mask=None) -> float:
    """A_rand: the expected A(a, b) when a's argmax is a uniformly random real position,
    averaged over the counted output words (key_mask (M, N) or (M, T, N), row_mask (M, T))."""
    keys = np.asarray(key_mask, bool)
    n = keys.sum(-1)  # (M,) or (M, T)
    rows = np.ones(n.shape if n.ndim == 2 else (len(n), 1), bool) if row_mask is None \
        else np.asarray(row_mask, bool)
    n = np.broadcast_to(n if n.ndim == 2 else n[:, None], rows.shape)
    return agreement_baseline_np(n[rows])


def agreement_row_np(gold: dict, others: list[dict], uniform: dict, key_mask=None,
                     row_mask=None) -> dict:
    """One row of the paper's Table 2 from recorded runs (see the module docstring).

    gold, each of others, uniform: dicts with "alpha" and "beta" (C, M, T, N) (attention and
    probe at C checkpoints, the same for every run) and "perf" (C,). β of `others[0]` gives
    A(α, β); the ξ curve averages all `others` (the authors: 5 re-seeded runs for
    classification, 1 for translation).
    Returns {"A(α, β^uf)", "A(α, β)", "A_rand", "ξ(α, β^uf)", "ξ(α, β)", "P*", "best",
    "curve", "curve_perf"}; a ξ is None when the curve never exceeds its threshold.
    """
    if not others:
        fail("agreement_row_np others", "at least one re-seeded standard run", "none")
    runs = [gold, *others, uniform]
    C = len(gold["perf"])
    for run in runs:
        if np.shape(run["alpha"]) != np.shape(gold["alpha"]) or len(run["perf"]) != C \
                or np.shape(run["beta"]) != np.shape(gold["alpha"]):
            fail("agreement_row_np runs", f"alpha and beta {shape_str(np.shape(gold['alpha']))}"
                 f" and perf ({C},) in every run", f"alpha {shape_str(np.shape(run['alpha']))}, "
                 f"beta {shape_str(np.shape(run['beta']))}, perf ({len(run['perf'])},)")
    best = int(np.argmax(gold["perf"]))  # the first best checkpoint, as np.argmax in theirs
    alpha_star = np.asarray(gold["alpha"])[best]

    def agree_over_checkpoints(scores):  # A(α*, scores^τ) for every τ -> (C,)
        star = np.broadcast_to(alpha_star, np.shape(scores))
        return mean_agreement_np(star, scores, key_mask, row_mask)

    curve = np.mean([agree_over_checkpoints(run["alpha"]) for run in others], axis=0)
    curve_perf = np.mean([run["perf"] for run in others], axis=0)
    a_uf = float(agree_over_checkpoints(uniform["beta"]).max())
    a_beta = float(agree_over_checkpoints(others[0]["beta"]).max())
    M, T, N = np.shape(gold["alpha"])[-3:]
    keys = np.ones((M, N), bool) if key_mask is None else key_mask
    return {"A(α, β^uf)": a_uf, "A(α, β)": a_beta,
            "A_rand": random_baseline_np(keys, row_mask),
            "ξ(α, β^uf)": contextualized_agreement(curve, curve_perf, a_uf),
            "ξ(α, β)": contextualized_agreement(curve, curve_perf, a_beta),
            "P*": float(gold["perf"][best]), "best": best, "curve": curve,
            "curve_perf": curve_perf}
