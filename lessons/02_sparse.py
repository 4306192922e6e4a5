# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lesson 02 — Sparse attention patterns, and kernels whose cost grows linearly
#
# Dense attention lets every token look at every other: $N^2$ scores for $N$ tokens. At
# $N = 65{,}536$ that is 4.3 billion scores per head — 16 GiB as float32 (the first code cell
# prints both).
# Longformer, BigBird and the Sparse Transformer keep the attention formula of lesson 01 and
# change only *who may look at whom*: each query gets a fixed number of keys, so the cost grows
# like $N$.
#
# In this lesson you will:
# 1. draw every classic pattern as a boolean mask and read it as "who can see whom";
# 2. treat a pattern as a graph and count the layers information needs to cross the sequence —
#    and see why global tokens and random edges shrink that number;
# 3. meet two kernels that compute sparse attention *without* ever building the $N \times N$
#    mask, check them against dense masked attention, and measure their cost;
# 4. train small models on sequences of 512 tokens whose label needs both ends: the window
#    alone fails, a window plus one global token succeeds with fewer keys per query, and random
#    edges (BigBird) get there more slowly.
#
# Run time: about 6 minutes on a quiet 2-core CPU (20 on a busy one), most of it training the
# small models of section 5 (`MINATTN_SMOKE=1`: about 20 seconds).

# %%
import time

import numpy as np
import torch
import torch.nn.functional as F
import matplotlib.pyplot as plt

from minattn.tools.lesson import Lesson, show
from minattn.plots import heatmap, plot_curves
from minattn.tools.utils import set_seed
from minattn.attention import attention_torch
from minattn.sparse import (sliding_window_mask_np, dilated_window_mask_np, global_mask_np,
                            random_mask_np, bigbird_layout_np, bigbird_mask_np, strided_masks_np,
                            fixed_masks_np, union_np, hops_np, diameter_np)
from minattn.sparse_kernels import (window_attention_torch, blocked_window_attention_torch,
                                    sliding_window_attention_torch, window_forward_torch,
                                    dilated_window_attention_torch, block_sparse_attention_torch)
from minattn.models import SparseClassifier, window_attend, block_sparse_attend
from minattn.tasks import two_halves, CLS
from minattn.tools.train import train

L = Lesson("02_sparse")  # on a CPU: one torch thread (see Lesson)

n_big = 65_536
print(f"dense attention at N = {n_big:,}: {n_big ** 2 / 1e9:.1f} billion scores per head, "
      f"{4 * n_big ** 2 / 2 ** 30:.0f} GiB as float32")

# %% [markdown]
# ## 1. A pattern is a mask
#
# Lesson 01 computed
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt d} + M\right) V,
# \qquad M_{ij} = \begin{cases} 0 & \text{if query } i \text{ may attend to key } j \\
# -\infty & \text{otherwise.}\end{cases}$$
#
# A sparse pattern is nothing but a choice of $M$: a boolean $N \times N$ matrix, row $i$ =
# query, column $j$ = key, **True = may attend**. The course's conventions (stated once in
# `minattn/sparse.py`): positions $0 \dots N-1$; the window half-width $w$ is one-sided,
# $|i - j| \le w$ gives $2w + 1$ keys; *causal* intersects a pattern with $j \le i$.
#
# **Careful when reading the papers:** Longformer and BigBird write $w$ for the *full* width of
# the window ($w/2$ tokens on each side; BigBird's figure shows "$w = 3$": the token and one
# neighbour on each side). Our $w$ is the half-width, so their $w$ is about $2w$ here.
#
# | pattern | query $i$ may see key $j$ when | keys per query | from |
# |---|---|---|---|
# | sliding window | $\lvert i-j\rvert \le w$ | $2w+1$ | Longformer |
# | dilated window | $\lvert i-j\rvert \le w\delta$ and $\delta \mid i-j$ | $2w+1$ over a span $\delta$ times wider | Longformer |
# | global tokens $G$ | $i \in G$ or $j \in G$ | $\lvert G\rvert$ more (all $N$ for $i \in G$) | Longformer |
# | random | $j$ among $r$ keys drawn for $i$ | $r$ | BigBird |
# | BigBird | window + global + random, on blocks of $b$ tokens | $\approx(2w_b+1+g+r)\,b$, $w_b$, $g$, $r$: window, global and random blocks | BigBird |
# | strided (2 heads) | $0 \le i-j < l$ ; $\; l \mid i-j,\ j \le i$ | $l$ ; $\approx N/l$ | Sparse Transformer |
# | fixed (2 heads) | same length-$l$ block, $j\le i$ ; $\; j \bmod l \ge l-c,\ j\le i$ | $\le l$ ; $\approx cN/l$ | Sparse Transformer |
#
# The sliding window is exercise 2.1; here is the library's version:

# %%
show(sliding_window_mask_np)
print(sliding_window_mask_np(6, 1).astype(int))
print("causal:\n", sliding_window_mask_np(6, 1, causal=True).astype(int))

# %% [markdown]
# ### The gallery
# Every pattern at $N = 32$. Read a row as one query: its dark cells are the tokens it sees.

# %%
N_GAL = 32
local, strided = strided_masks_np(N_GAL, 6)
block_head, summary_head = fixed_masks_np(N_GAL, 8, 2)
gallery = {
    "sliding window, w=3": sliding_window_mask_np(N_GAL, 3),
    "causal window, w=3": sliding_window_mask_np(N_GAL, 3, causal=True),
    "dilated, w=3, δ=3": dilated_window_mask_np(N_GAL, 3, 3),
    "window w=3 ∪ global {0, 16}": union_np(sliding_window_mask_np(N_GAL, 3),
                                           global_mask_np(N_GAL, [0, 16])),
    "random, r=3 per query": random_mask_np(N_GAL, 3, seed=0),
    "BigBird blocks of 4\n(window 1 + global 1 + random 1)": bigbird_mask_np(N_GAL, 4, seed=0),
    "strided l=6: local head": local,
    "strided l=6: strided head": strided,
    "fixed l=8, c=2: both heads": union_np(block_head, summary_head),
}
fig, axes = plt.subplots(3, 3, figsize=(11, 11), layout="constrained")
for ax, (title, mask) in zip(axes.flat, gallery.items()):
    heatmap(ax, mask, title=f"{title}\n{mask.sum() / N_GAL:.1f} keys/query", cmap="Greys", vmax=1)
L.savefig(fig, "mask_gallery")
for title, mask in gallery.items():
    print(f"{title.splitlines()[0]:<32} keys per query: {mask.sum() / N_GAL:5.1f} of {N_GAL}")

# %% [markdown]
# What to notice:
# * the **window** is a band: a token sees its neighbours and nothing else;
# * **dilation** keeps $2w+1$ keys but spreads them: the band becomes every third diagonal, and
#   tokens of different residues $i \bmod \delta$ never meet (in one layer or a hundred);
# * **global** tokens are a full row *and* a full column: everyone reads them, they read everyone;
# * **BigBird** is the window, global and random ideas on blocks of $b$ tokens, because
#   hardware likes dense $b \times b$ tiles;
# * the **Sparse Transformer** heads are causal: one head reads the recent past, the other
#   every $l$-th token (strided) or the last $c$ "summary" columns of each block (fixed).

# %% [markdown]
# ## 2. Patterns as graphs: how many layers until everyone has heard from everyone?
#
# Read mask[i, j] = True as an edge $j \to i$: in one layer, information moves from token $j$
# to token $i$. Stacking $L$ layers composes the edges, and the residual connection keeps what
# a token already knew, so "$j$ reaches $i$ within $L$ layers" is the boolean matrix power
#
# $$R_L = (M \lor I)^L .$$
#
# A dense mask reaches everything in one layer. A window of half-width $w$ moves information $w$
# positions per layer, so crossing a sequence of length $N$ takes $\lceil (N-1)/w \rceil$ layers.
# A single global token cuts that to 2 (any $j \to g \to i$). Random edges make the graph a
# *small world* (Watts & Strogatz, cited by BigBird): a handful of long-range shortcuts make
# the typical distance grow like $\log N$ rather than $N$.

# %%
show(hops_np)

# %%
W_GRAPH, R_GRAPH = 4, 2
sizes_graph = L.size(full=[64, 128, 256, 512], smoke=[32, 64])


def graph_patterns(n):
    window = sliding_window_mask_np(n, W_GRAPH)
    return {
        f"window w={W_GRAPH}": window,
        f"window + {R_GRAPH} random": window | random_mask_np(n, R_GRAPH, seed=n),
        "window + 1 global": window | global_mask_np(n, [0]),
        f"dilated w={W_GRAPH}, δ=2 + window": window | dilated_window_mask_np(n, W_GRAPH, 2),
        "BigBird blocks of 8": bigbird_mask_np(n, 8, seed=n),
    }


diameters = {name: [] for name in graph_patterns(8)}
for n in sizes_graph:
    for name, mask in graph_patterns(n).items():
        diameters[name].append(diameter_np(mask))
print(f"layers until every token has heard from every token (w={W_GRAPH}):")
print(f"{'pattern':<28}" + "".join(f"{'N=' + str(n):>9}" for n in sizes_graph))
for name, ds in diameters.items():
    print(f"{name:<28}" + "".join(f"{d:>9.0f}" for d in ds))
window_name = f"window w={W_GRAPH}"
assert diameters[window_name] == [float(-(-(n - 1) // W_GRAPH)) for n in sizes_graph]  # ⌈(N-1)/w⌉
assert diameters["window + 1 global"] == [2.0] * len(sizes_graph)

# %%
n_layers = L.size(full=256, smoke=64)
max_layers = 12
reach = {}
for name, mask in graph_patterns(n_layers).items():
    hops = hops_np(mask, max_hops=max_layers)
    reach[name] = [((hops >= 0) & (hops <= layer)).mean() for layer in range(1, max_layers + 1)]
print(f"fraction of pairs connected after 2 and 3 layers (N={n_layers}):")
for name, fractions in reach.items():
    print(f"  {name:<28} {fractions[1]:.3f}  {fractions[2]:.3f}")

fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
styles = {"BigBird blocks of 8": dict(ls="--", marker="s", mfc="none")}  # it overlaps "global"
for name, ds in diameters.items():
    axes[0].plot(sizes_graph, ds, **styles.get(name, dict(marker="o")), label=name)
axes[0].set(xscale="log", yscale="log", xlabel="sequence length N",
            ylabel="layers until all pairs are connected", title="graph diameter vs N")
axes[0].set_xticks(sizes_graph, [str(n) for n in sizes_graph])
y_ticks = [1, 2, 4, 8, 16, 32, 64, 128]
axes[0].set_yticks(y_ticks, [str(t) for t in y_ticks])
axes[0].xaxis.set_minor_formatter(plt.NullFormatter())
axes[0].yaxis.set_minor_formatter(plt.NullFormatter())
for name, fractions in reach.items():
    axes[1].plot(range(1, max_layers + 1), fractions, **styles.get(name, dict(marker=".")),
                 label=name)
axes[1].set(xlabel="number of layers L", ylabel="fraction of pairs (i, j) connected",
            title=f"who has heard from whom after L layers (N={n_layers})", ylim=(0, 1.05))
for ax in axes:
    ax.grid(alpha=0.3, which="major")
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9)  # below the panels
L.savefig(fig, "graph_hops")

# %% [markdown]
# The table and the left panel: the window's diameter doubles with $N$ (a line of slope 1 on
# log–log axes); with two random keys per query it creeps up, the small world's $\log N$; one
# global token holds it at 2 for every $N$, and so does BigBird, whose first block is global
# (its dashed line lies on the global one). Adding a dilated window roughly halves the window's
# diameter — a constant factor, not a change of growth. The right panel is the view a model
# designer needs: after 2 or 3 layers a window-only model has connected only a small fraction of
# the pairs (printed above), while one global token connects them all in 2.

# %% [markdown]
# ## 3. Kernels that never build the $N \times N$ mask
#
# Feeding a sparse mask to dense attention is correct but pointless: the kernel still computes
# all $N^2$ scores (PyTorch's `F.scaled_dot_product_attention` even copies a boolean mask to a
# float one, $4N^2$ bytes). `minattn/sparse_kernels.py` computes the same numbers in $O(N w)$.
#
# **Blocked window.** Cut the queries into blocks of $c$. The queries $s \dots s+c-1$ of a block
# need only the keys $s-w_\ell \dots s+c-1+w_r$, where $w_\ell$ is how far a query looks back and
# $w_r$ how far ahead ($w_\ell = w_r = w$; $w_r = 0$ when causal): a span of $c + w_\ell + w_r$
# keys. An `unfold` of the padded keys gives every block its span (a view: the spans overlap in
# memory), and inside a span the window of query $a$ is the band $a \le t \le a + w_\ell + w_r$ —
# *the same small $c \times (c + w_\ell + w_r)$ mask for every block*. One batched SDPA call then
# does all blocks: $N(c + 2w)$ scores instead of $N^2$. This is exercise 2.2:

# %%
show(blocked_window_attention_torch)

# %% [markdown]
# The band is wrong only where a span runs past an end of the sequence (the blocked kernel saw
# zero keys there). The core, `sliding_window_attention_torch`, recomputes those few end blocks
# with their exact masks (`window_forward_torch`); when it trains, its backward is written by
# hand (`minattn/sparse_backward.py`): lesson 01's backward formulas applied to a few blocks
# at a time, recomputing their scores instead of storing every block's attention — the same
# trade FlashAttention makes.

# %%
show(sliding_window_attention_torch)
show(window_forward_torch)

# %% [markdown]
# Dilation $\delta$ is a change of viewpoint: token $i = r + \delta p$ sees only its own residue
# class $r = i \bmod \delta$, where the dilated window is a plain window over every $\delta$-th
# token — so the dilated kernel is the core run on the $\delta$ classes. Global tokens ride
# along as $|G|$ extra keys of every block, and the $|G|$ global rows attend to all $N$ keys
# ($|G| \cdot N$ work). `window_attention_torch(q, k, v, w, dilation=, causal=, global_idx=)` is
# the entry point that picks the right one.

# %%
show(dilated_window_attention_torch)

# %% [markdown]
# **Block-sparse.** BigBird and the fixed pattern are defined on blocks; a layout
# (`nb × nb` booleans) says which $b \times b$ tiles are non-zero. The kernel gathers just those
# $P$ tiles, computes their scores, and normalises each query row across its tiles with a
# scatter-max and a scatter-sum: work and memory $\propto P b^2$.
#
# Every kernel must compute *exactly* what lesson 01's dense attention computes with the NumPy
# mask of the same pattern — outputs and gradients, in float64 (`tests/test_sparse.py` checks
# many sizes). The same check, small:

# %%
set_seed(0)
n_chk, w_chk = 37, 3  # 37: not a multiple of any block size
q, k, v = (torch.randn(2, 3, n_chk, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
checks = {
    "window (hand-written backward)": (
        lambda: window_attention_torch(q, k, v, w_chk, block=8),
        sliding_window_mask_np(n_chk, w_chk)),
    "dilated δ=2, causal": (
        lambda: window_attention_torch(q, k, v, w_chk, dilation=2, causal=True, block=8),
        dilated_window_mask_np(n_chk, w_chk, 2, causal=True)),
    "window + global {0, 20}": (
        lambda: window_attention_torch(q, k, v, w_chk, global_idx=[0, 20], block=8),
        sliding_window_mask_np(n_chk, w_chk) | global_mask_np(n_chk, [0, 20])),
    "block-sparse BigBird": (
        lambda: block_sparse_attention_torch(q, k, v, bigbird_layout_np(10, seed=1), 4),
        bigbird_mask_np(n_chk, 4, seed=1)),
}
for name, (kernel, mask) in checks.items():
    out = kernel()
    ref, _ = attention_torch(q, k, v, torch.as_tensor(mask))
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    ref_grads = torch.autograd.grad(ref.sum(), (q, k, v))
    out_err = (out - ref).abs().max().item()
    grad_err = max((g - r).abs().max().item() for g, r in zip(grads, ref_grads))
    print(f"{name:<32} max |out - dense| = {out_err:.1e}   "
          f"max |grad - dense grad| = {grad_err:.1e}")
    assert out_err < 1e-12 and grad_err < 1e-12, name

# %% [markdown]
# ## 4. Cost: linear vs quadratic
#
# A small live measurement on your machine: dense SDPA fed the window as an $N \times N$ mask
# against the window kernel, forward only, $B=1$, $H=4$, $d=64$, $w=32$, float32, the fastest
# of 5 calls (this machine may be shared: the fastest call is the least disturbed one).

# %%
sizes_cost = L.size(full=[1024, 2048, 4096, 8192], smoke=[256, 512])
W_COST = 32
cost = {"dense masked SDPA": [], "window kernel": []}
for n in sizes_cost:
    gen = torch.Generator().manual_seed(n)
    q_c, k_c, v_c = (torch.randn(1, 4, n, 64, generator=gen) for _ in range(3))
    dense_mask = torch.from_numpy(sliding_window_mask_np(n, W_COST))  # (N, N): built once
    runs = {"dense masked SDPA": lambda: F.scaled_dot_product_attention(q_c, k_c, v_c,
                                                                         attn_mask=dense_mask),
            "window kernel": lambda: window_attention_torch(q_c, k_c, v_c, W_COST)}
    with torch.no_grad():
        torch.testing.assert_close(runs["window kernel"](), runs["dense masked SDPA"](),
                                   rtol=1e-5, atol=1e-5)  # the same numbers, in float32
        for name, fn in runs.items():
            times = []
            for _ in range(5):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            cost[name].append(min(times))
print(f"{'N':>6} {'dense':>10} {'window':>10} {'dense / window':>15}")
for n, td, tw in zip(sizes_cost, cost["dense masked SDPA"], cost["window kernel"]):
    print(f"{n:>6} {td * 1e3:>8.1f}ms {tw * 1e3:>8.1f}ms {td / tw:>14.1f}×")
growth = {name: (ts[-1] / ts[0]) ** (1 / (len(ts) - 1)) for name, ts in cost.items()}
print("time multiplied per doubling of N (geometric mean): "
      + ", ".join(f"{name} ×{g:.1f}" for name, g in growth.items()))
fig, ax = plt.subplots(figsize=(5.5, 4), layout="constrained")
for name, ts in cost.items():
    ax.plot(sizes_cost, ts, marker="o", label=name)
ax.set(xscale="log", yscale="log", xlabel="sequence length N", ylabel="forward time (s)",
       title=f"sliding window w={W_COST}: dense vs blocked kernel")
ax.set_xticks(sizes_cost, [str(n) for n in sizes_cost])
ax.xaxis.set_minor_formatter(plt.NullFormatter())
ax.grid(alpha=0.3, which="both")
ax.legend(loc="upper left")
L.savefig(fig, "cost")

# %% [markdown]
# **Takeaway.** Dense attention's time grows with $N^2$ — about ×4 per doubling of $N$ once the
# sequence is long — however few keys the mask allows; the window kernel's grows with $N$, about
# ×2 per doubling, so the gap widens with every doubling (the growth factors are printed above;
# at small $N$ fixed overheads blur them). The full tables — forward and backward, peak memory,
# compiled FlexAttention, the block-sparse kernel, $N$ up to 65,536 — are measured by
# `benchmarks/sparse.py` and kept in [benchmarks/README.md](../benchmarks/README.md).

# %% [markdown]
# ## 5. A long-sequence task where the pattern matters
#
# **Task ("two halves").** A sequence of $N$ tokens: token 0 is a `[CLS]` marker, the others
# are symbols $A$ or $B$. In the first half each symbol is $A$ with probability $p_1$, in the
# second half with probability $p_2$, each of $p_1, p_2$ being $1/4$ or $3/4$. The label is
# $[p_1 = p_2]$: "do both halves lean the same way?" (half the sequences each). The model reads
# its answer from position 0, so after $L$ layers it can only use what the pattern lets travel
# to position 0 in $L$ hops — and the answer needs tokens from both halves, i.e. from both
# ends of the sequence.
#
# **Models.** The same 2-layer encoder (`SparseClassifier`: $d = 32$, 2 heads, learned
# positions, MLP, pre-norm; its attention layers are lesson 01's `MultiHeadAttention` with
# `attend=` a sparse kernel), three patterns with about the same number of keys per query:
# a window $w = 16$ (33 keys); a window $w = 15$ plus global token 0 (32 keys for an ordinary
# query); BigBird blocks of 8 — a window of one block on each side and one random block, no
# global block (at most 32 keys).

# %%
show(two_halves)
show(SparseClassifier)

# %%
N_SEQ = L.size(full=512, smoke=64)
STEPS = L.size(full=120, smoke=8)
STEPS_LONG = L.size(full=480, smoke=16)  # BigBird: still improving at STEPS, so trained longer
BATCH = L.size(full=16, smoke=8)
SEEDS = L.size(full=[0, 1, 2], smoke=[0])
VOCAB = 3  # tokens: CLS = 0, A = 1, B = 2
BB_BLOCK, BB_SEED = 8, 0

example, label = two_halves(4, 16, torch.Generator().manual_seed(0), "cpu")
for tokens, y in zip(example, label):
    print("".join("CAB"[t] for t in tokens.tolist()), "label", y.item())

masks = {"window w=16": sliding_window_mask_np(N_SEQ, 16),
         "window w=15 + global": sliding_window_mask_np(N_SEQ, 15) | global_mask_np(N_SEQ, [CLS]),
         "BigBird window + random": bigbird_mask_np(N_SEQ, BB_BLOCK, window=1, n_global=0,
                                                    n_random=1, seed=BB_SEED)}
print(f"\nwhat position 0 can hear within 2 layers (N = {N_SEQ}):")
print(f"{'pattern':<26}{'keys of an ordinary query (max)':>33}{'first half':>12}{'second half':>13}")
heard = {}
for name, mask in masks.items():
    reached = hops_np(mask, max_hops=2)[CLS] >= 0  # (N,): tokens that reach position 0
    heard[name] = (int(reached[:N_SEQ // 2].sum()), int(reached[N_SEQ // 2:].sum()))
    print(f"{name:<26}{mask[1:].sum(1).max():>33}{heard[name][0]:>12}{heard[name][1]:>13}")


def patterns(n):
    layout = bigbird_layout_np(-(-n // BB_BLOCK), window=1, n_global=0, n_random=1, seed=BB_SEED)
    return {"window w=16": window_attend(16),
            "window w=15 + global": window_attend(15, global_idx=[CLS]),
            "BigBird window + random": block_sparse_attend(layout, BB_BLOCK)}


def classification_loss(model, tokens, labels):
    return F.cross_entropy(model(tokens), labels)


def run(pattern_name, seed, steps):
    set_seed(seed)
    model = SparseClassifier(VOCAB, N_SEQ, 32, 2, 2, patterns(N_SEQ)[pattern_name]).to(L.device)
    train_gen = torch.Generator().manual_seed(seed)
    held_out = two_halves(256, N_SEQ, torch.Generator().manual_seed(10_000), L.device)

    def evaluate():
        with torch.no_grad():
            return {"accuracy": (model(held_out[0]).argmax(-1) == held_out[1]).float().mean().item()}

    return train(model, lambda step: two_halves(BATCH, N_SEQ, train_gen, L.device),
                 classification_loss, steps=steps, lr=3e-3, evaluate=evaluate,
                 eval_every=max(steps // 12, 1), desc=f"{pattern_name}, seed {seed}")


start = time.perf_counter()
steps_of = {name: STEPS_LONG if name.startswith("BigBird") else STEPS for name in masks}
histories = {name: [run(name, seed, steps_of[name]) for seed in SEEDS] for name in masks}
print(f"trained {len(histories) * len(SEEDS)} models in {time.perf_counter() - start:.0f} s")


def accuracy_at(history, step):
    """Held-out accuracy at the last evaluation at or before `step`."""
    return max((s, a) for s, a in zip(history["accuracy_step"], history["accuracy"]) if s <= step)[1]


print(f"\nheld-out accuracy, N = {N_SEQ} (chance 0.5)")
print(f"{'pattern':<26}{'step':>6}" + "".join(f"{'seed ' + str(s):>9}" for s in SEEDS) + f"{'mean':>9}")
final = {}
for name, hs in histories.items():
    for step in sorted({STEPS, steps_of[name]}):
        accs = [accuracy_at(h, step) for h in hs]
        print(f"{name:<26}{step:>6}" + "".join(f"{a:>9.3f}" for a in accs) + f"{np.mean(accs):>9.3f}")
    final[name] = float(np.mean([h.last("accuracy") for h in hs]))

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
plot_curves(axes[0], {name: hs[0] for name, hs in histories.items()}, "loss",
            title=f"training loss (seed {SEEDS[0]})")
plot_curves(axes[1], {name: hs[0] for name, hs in histories.items()}, "accuracy",
            title=f"held-out accuracy (seed {SEEDS[0]}), N={N_SEQ}")
axes[1].axhline(0.5, color="gray", ls=":", lw=1)
axes[1].set_ylim(0.3, 1.05)
for ax in axes:
    ax.get_legend().remove()
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside lower center", ncol=3)  # below: covers no curve
L.savefig(fig, "two_halves_training")

# %% [markdown]
# **What we measured** (printed above; a second run prints the same numbers). The window-only
# model stays at chance: the table before training shows that within 2 layers position 0
# hears nothing of the second half, however long it trains (section 2: it would need
# $\lceil (N-1)/16 \rceil$ layers). One global token, at one key *less* per query, solves the task
# on every seed. The BigBird pattern (no global token) lets position 0 hear a few dozen tokens
# of *each* half within 2 layers — plenty to tell $1/4$ from $3/4$ — so what it lacks at step
# 120 is not information but training: its loss is still falling and its accuracy still
# swinging there. Trained four times longer, it climbs further (the second BigBird row) but not
# all the way to the global token's score, and its training loss keeps spiking (the green
# curve): the random paths are there, but the model must learn to route the evidence through
# two hops of scattered blocks, where the global token hands it over in one.
#
# That is the small-world argument at work — and its limit: random edges make paths short on
# *average*, a global token makes them short for *every* pair and easy to learn. It is why
# BigBird keeps global tokens *and* adds random ones (exercise 2.4 finds layouts where the
# random edges leave position 0 deaf to a whole half).
#
# **The paper's numbers.** Longformer's WikiHop ablation (development set, accuracy; from the
# seed lecture on sparse attention, which quotes Longformer's Table 11) makes the same point at
# full scale:
#
# | Longformer variant (WikiHop dev) | accuracy |
# |---|---|
# | seqlen 4,096 (the full model) | 73.8 |
# | seqlen 512, attention $n^2$ | 71.7 |
# | seqlen 512, window attention only | 68.8 |
# | no linear projections for global attention | 72.2 |
# | no linear projections, no global attention | 65.5 |
#
# Ours is a synthetic task built so that only long paths solve it, on a 2-layer model: the gap
# is all-or-nothing here, a few points there, where most answers need only local context.

# %%
L.claim("global attention matters for long inputs (Longformer WikiHop dev ablation)",
        paper="73.8 with global attention, 65.5 without (and without its projections)",
        ours=f"two-halves accuracy {final['window w=15 + global']:.3f} with one global token, "
             f"{final['window w=16']:.3f} with the window alone (N={N_SEQ}, 2 layers)",
        why="a synthetic task that only long-range paths solve; 2-layer d=32 model")
L.claim("random edges make paths short: diameter grows like log N (BigBird's small-world argument)",
        paper="O(log N) path length for random graphs (Watts & Strogatz, cited by BigBird)",
        ours=f"diameter at N={sizes_graph[0]}..{sizes_graph[-1]}: window "
             f"{[int(d) for d in diameters[window_name]]}, window + {R_GRAPH} random "
             f"{[int(d) for d in diameters[f'window + {R_GRAPH} random']]}",
        why="exact graph distances on our masks; w=4")

# %% [markdown]
# ## Summary
# * A sparse pattern is a boolean mask: window, dilated window, global tokens, random keys,
#   BigBird blocks, the Sparse Transformer's strided and fixed heads — each gives every query a
#   fixed number of keys, so the cost grows like $N$ instead of $N^2$.
# * Read as a graph, a pattern decides how many layers information needs to cross the
#   sequence: $\lceil (N-1)/w \rceil$ for a window, about $\log N$ with random edges, 2 with a
#   global token.
# * The window kernel never builds the $N \times N$ mask: blocks of queries, unfolded key spans,
#   one band mask for all blocks, exact masks for the few blocks at the ends; dilation is the
#   same kernel on residue classes; its backward recomputes a few blocks at a time.
# * Every kernel equals dense masked attention (outputs and gradients, float64); its time grows
#   linearly where dense attention's grows quadratically.
# * On a task that needs both ends of a 512-token sequence, a window alone stays at chance, one
#   global token solves it, random blocks reach it more slowly.
#
# ## Exercises
# Build a student copy (`make student`, or `python -m minattn.tools.exercises student DIR`),
# implement the marked regions, and check them with `make exercises` (or
# `python -m pytest --exercises 2.1` in the copy).
#
# * **2.1** (implement, `minattn/sparse.py`, ~10 min) `sliding_window_mask_np` and its dilated
#   twin `dilated_window_mask_np`: the $N \times N$ boolean masks $|i - j| \le w$ and
#   $|i - j| \le w\delta,\ \delta \mid i - j$, intersected with $j \le i$ when `causal` (a
#   third marked line in `minattn/sparse_kernels.py` tests the same condition for global keys).
# * **2.2** (implement, `minattn/sparse_kernels.py`, ~30 min) `blocked_window_attention_torch`:
#   pad the queries to whole blocks of $c$, give each block its span of $c + w_\ell + w_r$ keys
#   and values with `unfold_blocks_torch`, and run one `F.scaled_dot_product_attention` call
#   with `band_mask_torch`. The same idea is marked 2.2 in three more places — the exact end
#   blocks (`_end_blocks`), the global-token path, and the span bookkeeping of the backward
#   (`minattn/sparse_backward.py`); fill those in too. The tests compare the kernels with dense
#   masked attention for many $N$, $w$, $\delta$ and block sizes.
# * **2.3** (predict, `minattn/answers/sparse.py`, ~5 min) A window of half-width $w = 8$ over
#   $N = 256$ tokens: after how many layers has token 0 first heard from token 255? And with one
#   global token added, after how many layers has every token heard from every other? Answer
#   before you run `hops_np`.
# * **2.4** (experiment, `minattn/answers/sparse.py`, ~10 min) For the BigBird layout of section
#   5 (N = 512, blocks of 8, a window of one block, one random block, no global block), try the
#   layout seeds 0 … 99: for what fraction of them does position 0 hear *no* token of the second
#   half within 2 layers? What does that say about training section 5's BigBird model with a
#   fresh layout seed?
#
# To think about:
# 1. The window kernel does $c + 2w$ key lookups per query instead of $2w + 1$. Which block
#    size $c$ minimises the forward time on your machine for $w = 128$? Does the same $c$
#    minimise forward + backward? (Hint: the backward recomputes every block's scores against
#    its $c + 2w$ keys and does three more matmuls of that size per block.)
# 2. Why can a *dilated* window with $\delta = 2$ alone never carry information from an odd
#    position to token 0, however many layers it has? (Look at the gallery, then at
#    `diameter_np`.) What task would it fail?
# 3. The Sparse Transformer's strided head is a causal dilated window with $\delta = l$ and an
#    unbounded $w$. What does `window_attention_torch` cost for it when $l = \sqrt N$?
