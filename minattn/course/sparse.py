"""Lesson 02's task, training, measurements and figures: what serves the lesson and is not the
mechanism (that is minattn/sparse.py, its kernels minattn/fast/sparse.py).

    two_halves               the long-range task: do both halves of a sequence lean the same way?
    heard_by_position_0      how much of each half the pattern carries to position 0 in L layers
    keys_per_query           mean keys per query of patterns at growing N, and the growth exponent
    train_two_halves         one SparseClassifier run on the task (tqdm bar, held-out accuracy)
    time_forward             interleaved forward timings, one per repeat, on the lesson's device
    growth_exponents         the slope of log(time) against log N, one per repeat
    plot_*                   the lesson's figures
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from ..contract import check_size, fail
from ..sparse import SparseClassifier, reach_np, sliding_window_mask_np
from .bench import time_repeats
from .train import train
from .utils import set_seed

CLS, SYMBOL_A, SYMBOL_B = 0, 1, 2  # the tokens of `two_halves`


# ============================================================================ the task
def two_halves(batch_size: int, n: int, generator: torch.Generator, device="cpu"
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Do both halves of a long sequence lean the same way? (lesson 02's long-range task)

    Token 0 is a [CLS] marker; every other token is A with probability p₁ in the first half and
    p₂ in the second, where p₁, p₂ are 1/4 or 3/4 independently. The label is 1 iff p₁ = p₂
    (balanced). A classifier reading token 0 must gather evidence from *both* halves.

    Returns tokens (B, N) int64 in {CLS, SYMBOL_A, SYMBOL_B} and labels (B,) int64, on the
    device asked for; the generator makes a batch the same every run.
    """
    batch_size, n = check_size("batch_size", batch_size, 1), check_size("n", n, 3)
    p1, p2 = (torch.randint(0, 2, (batch_size,), generator=generator) for _ in range(2))
    first_half = torch.arange(n) < n // 2
    prob_a = torch.where(first_half, 0.25 + 0.5 * p1[:, None], 0.25 + 0.5 * p2[:, None])
    tokens = torch.where(torch.rand(batch_size, n, generator=generator) < prob_a,
                         SYMBOL_A, SYMBOL_B)
    tokens[:, 0] = CLS
    return tokens.to(device), (p1 == p2).long().to(device)


def heard_by_position_0(*layer_masks: np.ndarray) -> tuple[int, int]:
    """How many tokens of the first and of the second half reach position 0 through the
    layers (one (N, N) mask per layer, the union of its heads)."""
    reached = reach_np(*layer_masks)[CLS]
    half = len(reached) // 2
    return int(reached[:half].sum()), int(reached[half:].sum())


def keys_per_query(patterns: dict, sizes) -> tuple[dict, dict]:
    """patterns: name -> (n -> (N, N) mask). Returns keys[name][n], the mean keys per query,
    and the exponent a of keys ∝ N^a, fitted on log-log axes over the sizes."""
    keys = {name: {n: float(make(n).sum(1).mean()) for n in sizes}
            for name, make in patterns.items()}
    exponent = {name: float(np.polyfit(np.log(sizes), np.log([k[n] for n in sizes]), 1)[0])
                for name, k in keys.items()}
    return keys, exponent


# ============================================================================ training
def train_two_halves(attend, seed: int, steps: int, held_out, *, n: int, batch: int,
                     d_model: int, heads: int, layers: int, device, eval_at=(), lr=3e-3,
                     curve=(), curve_size: int = 256, desc: str = "") -> dict:
    """One SparseClassifier (vocab 3: CLS, A, B) trained with AdamW on fresh `two_halves`
    batches of the run's own generator; held-out accuracy at the steps in eval_at and at the
    end, and on the first curve_size held-out sequences only at the other steps in `curve`
    (they draw a curve, they decide nothing). attend: a kernel, or one per layer."""
    set_seed(seed)
    model = SparseClassifier(3, n, d_model, heads, layers, attend).to(device)
    train_gen = torch.Generator().manual_seed(seed)
    at = [0]  # the step trained last: evaluate() runs after it

    def batch_of(step):
        at[0] = step
        return two_halves(batch, n, train_gen, device)

    def evaluate():  # 128 sequences at a time: the same logits, a fraction of the memory
        whole = at[0] == steps or at[0] in eval_at
        tokens, labels = held_out if whole else (t[:curve_size] for t in held_out)
        with torch.no_grad():
            predicted = torch.cat([model(x).argmax(-1) for x in tokens.split(128)])
            return {"accuracy": (predicted == labels).float().mean().item()}

    return train(model, batch_of,
                 lambda m, x, y: F.cross_entropy(m(x), y), steps=steps, lr=lr,
                 evaluate=evaluate, eval_at=set(eval_at) | set(curve) | {steps}, desc=desc)


def accuracy_at(history, step: int) -> float:
    """Held-out accuracy at the evaluation at `step`."""
    return history["accuracy"][history["accuracy_step"].index(step)]


# ============================================================================ timing
def time_forward(fns: dict, repeats: int, device) -> dict:
    """{name: [seconds, one per repeat]}: each function called once outside the clock (a GPU
    compiles, caches warm), then all called in turn, `repeats` times, without gradients. On a
    CPU the one thread's CPU time (robust when the machine is shared), on a GPU the wall clock
    between two synchronisations."""
    clock = time.perf_counter if torch.device(device).type == "cuda" else time.process_time
    with torch.no_grad():
        return time_repeats(fns, repeats, warmup=1, device=device, timer=clock)


def growth_exponents(times: dict) -> list[float]:
    """times: {N: [seconds per repeat]} -> the slope b of log(time) against log N, one per
    repeat (time ∝ N^b)."""
    sizes = sorted(times)
    repeats = {len(times[n]) for n in sizes}
    if len(repeats) != 1 or len(sizes) < 2:
        fail("times", "the same number of repeats at two sizes or more", repr(repeats))
    return [float(np.polyfit(np.log(sizes), np.log([max(times[n][r], 1e-9) for n in sizes]),
                             1)[0]) for r in range(repeats.pop())]


# ============================================================================ figures
# matplotlib is imported by the functions that draw: every pytest run imports this module
# for its training code (tests/bad_calls.py), half a second less without pyplot.
def plot_gallery(lesson, gallery: dict, n: int) -> None:
    """Every pattern of the gallery as a 3 × 3 grid of masks, with its keys per query."""
    import matplotlib.pyplot as plt

    from .plots import heatmap

    fig, axes = plt.subplots(3, 3, figsize=(11, 11.5), layout="constrained")
    for ax, (title, mask) in zip(axes.flat, gallery.items()):
        heatmap(ax, mask, title=f"{title}\n{mask.sum() / n:.1f} keys/query", cmap="Greys", vmax=1)
    lesson.savefig(fig, "mask_gallery")


def plot_graph(lesson, sizes, world, fits, laws, reach, n_layers) -> None:
    """Left: diameters of a window with random edges against N, with the best lines in each
    law; right: the share of connected pairs after L layers, per pattern."""
    import matplotlib.pyplot as plt

    from .plots import decade_ticks

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    xs = np.geomspace(sizes[0], sizes[-1], 100)
    axes[0].plot(np.repeat(sizes, len(world)), np.ravel(np.transpose(world)), "o", color="0.6",
                 alpha=0.5, label="one random draw")
    for law, g in laws.items():
        axes[0].plot(xs, np.polyval(fits[law], g(xs)), label=f"best line in {law}")
    axes[0].set(xscale="log", xlabel="sequence length N", ylabel="diameter (layers)",
                title="window + random keys: diameter vs N", ylim=(0, 1.3 * np.max(world)))
    decade_ticks(axes[0], sizes)
    for name, fractions in reach.items():
        axes[1].plot(range(1, len(fractions) + 1), fractions, marker=".", label=name)
    axes[1].set(xlabel="number of layers L", ylabel="fraction of pairs (i, j) connected",
                title=f"who has heard from whom after L layers (N={n_layers})", ylim=(0, 1.05))
    for ax in axes:
        ax.grid(alpha=0.3, which="major")
        ax.legend(fontsize=8, loc="lower right")
    lesson.savefig(fig, "graph_hops")


def plot_training(lesson, histories: dict, majority: float, n: int, smooth: int,
                  curve_size: int) -> None:
    """Training loss (raw and running mean) and held-out accuracy of one run per pattern."""
    import matplotlib.pyplot as plt

    from .plots import plot_curves

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    plot_curves(axes[0], histories, "loss", smooth=smooth,
                title="training loss (first seed): raw, faint, and its running mean")
    plot_curves(axes[1], histories, "accuracy", title=f"held-out accuracy (first seed), N={n}:\n"
                f"its first {curve_size} sequences between the steps the table reads")
    axes[1].axhline(majority, color="gray", ls=":", lw=1)
    axes[1].annotate("majority-class line", (1, majority), xycoords=("axes fraction", "data"),
                     xytext=(-4, 4), textcoords="offset points", ha="right", color="gray",
                     fontsize=8)  # at the right, where the window's curve has ended
    axes[1].set_ylim(0.3, 1.05)
    for ax in axes:
        ax.get_legend().remove()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3)  # below: covers no curve
    lesson.savefig(fig, "two_halves_training")


def plot_blocked_window(lesson, band: np.ndarray, n: int, w: int, c: int) -> None:
    """The window mask of N tokens with the key span of every block of c queries outlined, and
    the one band every block uses."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from .plots import heatmap

    fig, axes = plt.subplots(1, 2, figsize=(11, 5.2), layout="constrained",
                             gridspec_kw=dict(width_ratios=[38, 14]))
    heatmap(axes[0], sliding_window_mask_np(n, w), cmap="Greys", vmax=1,
            title=f"window w={w}, N={n}: each block of {c} queries needs only\n"
                  f"its span of {c + 2 * w} keys (outlined; grey: past the ends)")
    for b in range(n // c):
        axes[0].add_patch(Rectangle((b * c - w - 0.5, b * c - 0.5), c + 2 * w, c, fill=False,
                                    edgecolor=f"C{b % 10}", lw=2.2, clip_on=False))
    heatmap(axes[1], band, cmap="Greys", vmax=1,
            title=f"the band: one ({c} × {c + 2 * w}) mask\nfor every block")
    axes[1].set(xlabel="key t in the block's span", ylabel="query a in the block")
    axes[1].set_xticks(range(0, c + 2 * w, 2))
    axes[1].set_yticks(range(c))
    axes[0].set_xlim(-w - 0.5, n + w - 0.5)  # the spans reach past both ends (grey)
    for lo, hi in ((-w - 0.5, -0.5), (n - 0.5, n + w - 0.5)):
        axes[0].axvspan(lo, hi, color="0.85", zorder=0)
    for ax in axes:
        ax.set_aspect("equal")
    lesson.savefig(fig, "blocked_window")


def plot_cost(lesson, cost: dict, sizes, w: int) -> None:
    """The fastest forward time of each kernel against N, on log-log axes."""
    import matplotlib.pyplot as plt

    from .plots import decade_ticks, ticks_125

    fig, ax = plt.subplots(figsize=(5.5, 4), layout="constrained")
    ms = {name: [1e3 * min(t) for t in times.values()] for name, times in cost.items()}
    for name, times in cost.items():
        ax.plot(list(times), ms[name], marker="o", label=name)
    on_gpu = lesson.device.type == "cuda"
    ax.set(xscale="log", yscale="log", xlabel="sequence length N",
           ylabel=f"forward {'time' if on_gpu else 'CPU time'} (ms)",
           title=f"sliding window w={w} on {lesson.device.type}: dense vs blocked kernel")
    every = [t for m in ms.values() for t in m if t > 0]  # a log axis shows no 0
    decade_ticks(ax, sizes, ticks_125(min(every), max(every)) if every else None)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left")
    lesson.savefig(fig, "cost")
