"""Lesson 03's figures: each draws on the axes it is given and returns nothing.

    draw_head_scales       a pretrained encoder's measured scale per head and per layer
    draw_model             the Multi-Scale Transformer's windows around one query, layer by layer
    draw_head_statistics   trained vs untrained heads: how far they look, how far from uniform
    draw_band_pieces       the band kernel's plan: which piece computes each query-key pair
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from ..course.plots import heatmap
from .fast import PIECE_KINDS


def draw_head_scales(axes, head_mean: np.ndarray, uniform: float) -> None:
    """Two panels: the (L, H) table of each head's mean scale, and per layer the range over
    the heads, their mean and the scale of uniform attention (`uniform`)."""
    layers, heads = head_mean.shape
    image = heatmap(axes[0], head_mean, xlabels=range(1, heads + 1),
                    ylabels=range(1, layers + 1), annotate=True, vmax=float(head_mean.max()),
                    title="measured scale of each head (tokens)")
    axes[0].set(xlabel="head", ylabel="layer")
    axes[0].figure.colorbar(image, ax=axes[0], label="measured scale (tokens)")
    x = np.arange(1, layers + 1)
    axes[1].fill_between(x, head_mean.min(1), head_mean.max(1), alpha=0.25,
                         label=f"range over the {heads} heads")
    axes[1].plot(x, head_mean.mean(1), "o-", label="mean over the heads")
    axes[1].axhline(uniform, color="black", ls=":", label="uniform attention over the words")
    axes[1].set(xlabel="layer", ylabel="measured scale (tokens)", title="per layer", xticks=x)
    axes[1].legend(fontsize=8, loc="lower right")
    axes[1].grid(alpha=0.3)


def draw_model(ax, windows: list[list[int]], n: int) -> None:
    """Layers bottom to top: in each, the window of every head around one query token (black)
    of a sentence of n tokens after the node (red); on top, the classifier's inputs."""
    query = n // 2
    colours = plt.get_cmap("viridis")(np.linspace(0.1, 0.9, len(windows[0])))
    for layer, ws in enumerate(windows):
        base = 1.4 * layer
        for t in range(n + 1):
            ax.add_patch(Rectangle((t - 0.4, base), 0.8, 0.3,
                                   color="tab:red" if t == 0 else "lightgrey"))
        ax.add_patch(Rectangle((query - 0.4, base), 0.8, 0.3, color="black"))
        for h, (w, c) in enumerate(zip(ws, colours)):
            lo, hi = max(0, query - w), min(n, query + w)
            y = base + 0.45 + 0.15 * h
            ax.plot([lo - 0.4, hi + 0.4], [y, y], color=c, lw=3, solid_capstyle="butt")
            ax.text(hi + 0.7, y, f"ω={w}", fontsize=7, va="center")
        ax.text(-1.2, base + 0.15, f"layer {layer + 1}", ha="right", va="center", fontsize=9)
    top = 1.4 * len(windows)
    ax.add_patch(Rectangle((-0.4, top), 0.8, 0.3, color="tab:red"))
    ax.add_patch(Rectangle((0.6, top), n - 0.2, 0.3, color="tab:blue", alpha=0.4))
    ax.text(n / 2, top + 0.15, "max-pool over the tokens", ha="center", va="center", fontsize=9)
    ax.text(-0.6, top + 0.15, "node", ha="right", va="center", fontsize=9, color="tab:red")
    for x_from in (0, n / 2):
        ax.add_patch(FancyArrowPatch((x_from, top + 0.35), (n / 2, top + 0.9), arrowstyle="->",
                                     mutation_scale=12))
    ax.text(n / 2, top + 1.0, "MLP([node ; max-pool]) -> class", ha="center", fontsize=9)
    ax.set(xlim=(-5, n + 4), ylim=(-0.3, top + 1.4),
           xlabel="position (0 = classification node, then the tokens)")
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)


def draw_head_statistics(axes, heads: dict[str, dict[str, np.ndarray]],
                         markers: dict[str, str]) -> None:
    """Every head of each model (`heads[name]`, `heads[name + ", untrained"]`: the (L, H)
    arrays of `head_statistics_torch`), filled when trained, hollow when not: left, measured
    scale against uniform attention's; right, departure from uniform."""
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    for name, marker in markers.items():
        for trained, fill in ((False, "none"), (True, None)):
            st = heads[name if trained else name + ", untrained"]
            for layer, colour in zip(range(len(st["scale"])), colours):
                axes[0].scatter(st["uniform_scale"][layer], st["scale"][layer], marker=marker,
                                facecolors=fill or colour, edgecolors=colour, s=40,
                                label=f"{name}, layer {layer + 1}" if trained else None)
                axes[1].scatter(st["uniform_scale"][layer], st["departure"][layer],
                                marker=marker, facecolors=fill or colour, edgecolors=colour, s=40)
    top = max(st["uniform_scale"].max() for st in heads.values()) * 1.05
    axes[0].plot([0, top], [0, top], color="black", ls=":", lw=1, label="= uniform in the window")
    xlabel = "scale of uniform attention in the head's window (tokens)"
    axes[0].set(xlabel=xlabel, ylabel="measured scale (tokens)",
                title="how far: measured vs uniform")
    axes[1].set(xlabel=xlabel, ylabel="departure from uniform (TV distance)",
                title="which words: departure")
    axes[0].legend(fontsize=7, loc="upper left")
    for ax in axes:
        ax.grid(alpha=0.3)


def draw_band_pieces(ax, pieces: np.ndarray, chunk: int, window: int) -> None:
    """The (N, N) plan of `band_pieces_np` (kind 1..4 of `PIECE_KINDS`, 0 = outside the band),
    with the chunks of `chunk` queries marked."""
    n = pieces.shape[0]
    colours = ["white", "tab:blue", "tab:orange", "tab:green", "tab:red"]
    ax.imshow(pieces, cmap=ListedColormap(colours), vmin=-0.5, vmax=4.5, interpolation="nearest")
    for a in range(chunk, n, chunk):
        ax.axhline(a - 0.5, color="grey", lw=0.6)
    labels = {"all": "full block (no mask)",
              "lower": "right edge of the band: causal (t ≤ r)",
              "upper": "left edge of the band: causal read backwards (t ≥ r)",
              "mask": "edge cut short by an end of the sequence (masked)"}
    ax.legend(handles=[Patch(color=c, label=labels[kind])
                       for c, kind in zip(colours[1:], PIECE_KINDS)], loc="upper center",
              bbox_to_anchor=(0.5, -0.12), fontsize=7)
    ax.set(xlabel="key j", ylabel=f"query i (grey lines: chunks of c = {chunk})",
           title=f"the band kernel's pieces, N = {n}, ω = {window}")
