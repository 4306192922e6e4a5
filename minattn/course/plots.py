"""Plot helpers shared by the lessons: attention maps, training curves (one run or every seed of
several arms), log axes ticked at chosen values, count and alignment tables.

Every attention-like matrix is drawn the same way: rows = queries (targets), columns = keys
(sources).
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.ticker import NullLocator

from ..contract import as_numpy


def heatmap(ax, weights, xlabels=None, ylabels=None, title=None, cmap="viridis",
            annotate=False, vmin=0.0, vmax=None):
    """Draw a (rows, cols) weight matrix with token labels; returns the image.

    Rows are queries, columns are keys, as in every attention map of the course.
    """
    w = as_numpy(weights, dtype=float)  # a tensor may live on the GPU
    im = ax.imshow(w, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if xlabels is not None:
        ax.set_xticks(range(len(xlabels)), [str(t) for t in xlabels],
                      rotation=90 if len(xlabels) > 8 else 0)
    if ylabels is not None:
        ax.set_yticks(range(len(ylabels)), [str(t) for t in ylabels])
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center",
                        color="white" if w[i, j] < 0.6 * (vmax or w.max() or 1) else "black",
                        fontsize=8)
    if title:
        ax.set_title(title)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    return im


def decade_ticks(ax, xs, ys=None):
    """Log axes labelled at the given values, without minor ticks (slow to place)."""
    ax.set_xticks(xs, [str(x) for x in xs])
    if ys is not None:
        ax.set_yticks(ys, [f"{y:g}" for y in ys])
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_locator(NullLocator())


def ticks_125(lo: float, hi: float) -> list[float]:
    """Tick values 1, 2 and 5 × 10^k between lo and hi (0 < lo <= hi; the powers of ten alone
    where hi / lo >= 30), widened by one value on each side when fewer than two fall inside: a
    log axis shorter than a decade still gets labels (matplotlib labels only powers of ten)."""
    k = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    grid = [m * 10.0 ** e for e in k for m in ((1, 2, 5) if hi < 30 * lo else (1,))]
    inside = [g for g in grid if lo <= g <= hi]
    if len(inside) < 2:
        inside = [max(g for g in grid if g <= lo), *inside, min(g for g in grid if g >= hi)]
    return [float(f"{g:.3g}") for g in sorted(set(inside))]


def running_mean_np(values, window: int) -> np.ndarray:
    """Trailing mean of the last `window` values at every step (fewer at the start):
    out[t] = mean(values[max(0, t - window + 1) .. t])."""
    x = np.asarray(values, dtype=float)
    if window < 1 or x.ndim != 1:
        raise ValueError(f"running_mean_np: expected a 1-d sequence and window >= 1, got shape "
                         f"{x.shape} and window={window}")
    total = np.cumsum(np.concatenate([[0.0], x]))
    start = np.maximum(np.arange(1, x.size + 1) - window, 0)
    return (total[1:] - total[start]) / (np.arange(1, x.size + 1) - start)


def plot_curves(ax, histories: dict, key: str, title=None, ylabel=None,
                smooth: int | None = None):
    """Plot `history[key]` against `history['step']` for several named runs on one axis.

    `histories` maps a label to a `minattn.train.History` (or any dict with those lists).
    smooth: draw the raw curve faintly and its running mean over `smooth` steps on top.
    """
    for label, hist in histories.items():
        steps = hist.get(f"{key}_step", hist["step"])
        if smooth:
            (raw,) = ax.plot(steps, hist[key], alpha=0.2, lw=0.8)
            ax.plot(steps, running_mean_np(hist[key], smooth), color=raw.get_color(), lw=1.8,
                    label=label)
        else:
            ax.plot(steps, hist[key], label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel or (f"{key} (running mean over {smooth} steps)" if smooth else key))
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()


def plot_runs(ax, runs: dict, key: str = "accuracy", title=None, ylabel=None, colors=None):
    """Every run of several arms on one axis: `runs` maps an arm's label to a list of Histories
    (one per seed), each drawn as a thin line in its arm's colour, the arm labelled once with
    its number of runs. Seeds stay visible, so the spread is never hidden behind a mean."""
    for i, (label, histories) in enumerate(runs.items()):
        color = colors[i] if colors else f"C{i}"
        for j, hist in enumerate(histories):
            ax.plot(hist[f"{key}_step"], hist[key], color=color, lw=1, alpha=0.75,
                    label=f"{label} ({len(histories)} runs)" if j == 0 else None)
    ax.set(xlabel="training step", ylabel=ylabel or key, title=title)
    ax.grid(alpha=0.3)


def plot_table(ax, table, src_labels, tgt_labels, title=None, vmax=None):
    """A (V_x, V_y) count or translation table: rows = source words x, columns = target words y."""
    im = heatmap(ax, table, xlabels=tgt_labels, ylabels=src_labels, title=title, vmax=vmax)
    ax.set_xlabel("target y (output)")
    ax.set_ylabel("source x (input)")
    return im


def plot_alignment(ax, matrix, src_tokens, tgt_tokens, title=None, null: bool | None = None):
    """A (|y|, |x|) alignment (or attention) matrix: rows = target positions (queries),
    columns = source positions (keys), the orientation of every attention map in the course.
    `null` (default: inferred from the width) prepends a NULL column label."""
    src_tokens = list(src_tokens)
    if null or (null is None and np.shape(matrix)[1] == len(src_tokens) + 1):
        src_tokens = ["NULL"] + src_tokens
    im = heatmap(ax, matrix, xlabels=src_tokens, ylabels=list(tgt_tokens), title=title, vmax=1.0)
    ax.set_xlabel("source x (input)")
    ax.set_ylabel("target y (output)")
    return im
