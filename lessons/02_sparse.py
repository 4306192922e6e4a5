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
# prints both). Longformer, BigBird and the Sparse Transformer keep the attention formula of
# lesson 01 and change only *who may look at whom*:
#
# * **Longformer** and **BigBird** give each query a window of $w$ neighbours plus a few global
#   and random keys — a number that does not grow with $N$ — so the cost grows like $N \cdot w$:
#   linearly in $N$;
# * the **Sparse Transformer** splits attention over two heads, the recent past and every
#   $l$-th token, and chooses the stride $l \approx \sqrt N$: query $i$ sees about $l + i/l$ keys
#   — about $2\sqrt N$ for the last query, $\tfrac32\sqrt N$ on average — and the cost grows like
#   $N\sqrt N$: far below $N^2$, but not linear.
#
# In this lesson you will:
# 1. draw every classic pattern as a boolean mask, and count how its keys per query grow with $N$;
# 2. treat a pattern as a graph and count the layers information needs to cross the sequence —
#    lesson 01's *maximum path length* — and see why global tokens, random edges and the Sparse
#    Transformer's two heads shrink it;
# 3. train small models on sequences of 512 tokens whose label needs both ends, and watch the
#    graph argument decide which patterns can learn it;
# 4. meet a kernel that computes window attention *without* ever building the $N \times N$
#    mask, check it against dense masked attention, and measure its cost;
# 5. see where these patterns run today (Longformer, Mistral, Gemma 2) and why each chose its own;
# 6. open the kernels: exact end blocks, dilation, global tokens, block-sparse tiles and a
#    hand-written backward.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from minattn.attention import attention_torch
from minattn.course.bench import sync
from minattn.course.lesson import Lesson, show
from minattn.course.plots import heatmap, plot_curves
from minattn.course.tables import print_table
from minattn.course.train import train
from minattn.course.utils import set_seed
from minattn.sparse import (
    CLS,
    SparseClassifier,
    bigbird_layout_np,
    bigbird_layouts_np,
    bigbird_mask_np,
    block_mask_np,
    block_sparse_attend,
    block_sparse_attention_torch,
    blocked_window_attention_torch,
    claims,
    diameter_fast_np,
    dilated_window_attention_torch,
    dilated_window_mask_np,
    fixed_masks_np,
    global_mask_np,
    global_window_attention_torch,
    hops_np,
    random_mask_np,
    reach_np,
    sliding_window_attention_torch,
    sliding_window_mask_np,
    strided_masks_np,
    two_halves,
    union_np,
    window_attend,
    window_attention_torch,
    window_forward_torch,
)

lesson = Lesson("02_sparse")  # on a CPU: one torch thread (see Lesson)

n_big = 65_536
print(f"dense attention at N = {n_big:,}: {n_big ** 2 / 1e9:.1f} billion scores per head, "
      f"{4 * n_big ** 2 / 2 ** 30:.0f} GiB as float32")


def decade_ticks(ax, xs, ys=None):
    """Log axes labelled at the given values (and powers of two), without minor ticks: they
    are slow to place and add nothing to these plots."""
    ax.set_xticks(xs, [str(x) for x in xs])
    if ys is not None:
        ax.set_yticks(ys, [str(y) for y in ys])
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_locator(plt.NullLocator())

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
# `minattn/sparse/patterns.py`): positions $0 \dots N-1$; the window half-width $w$ is one-sided,
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
# | strided (2 heads) | $0 \le i-j \le l$ ; $\; l \mid i-j,\ j \le i$ | $l+1$ ; $\approx i/l$ | Sparse Transformer |
# | fixed (2 heads) | same length-$l$ block, $j\le i$ ; $\; j \bmod l \ge l-c,\ j\le i$ | $\le l$ ; $\approx c\,i/l$ | Sparse Transformer |
#
# The strided heads are Child et al.'s $A^{(1)}_i = \{t, t+1, \dots, i\}$ with
# $t = \max(0, i - l)$ and $A^{(2)}_i = \{j : (i - j) \bmod l = 0\}$ ("Generating Long Sequences
# with Sparse Transformers", 2019, §4.3). The sliding window is exercise 2.1; here is the
# library's version:

# %%
show(sliding_window_mask_np)
print(sliding_window_mask_np(6, 1).astype(int))
print("causal:\n", sliding_window_mask_np(6, 1, causal=True).astype(int))

# %% [markdown]
# ### The gallery
# Every pattern at $N = 128$ — long enough that the sparse ones look sparse. Read a row as one
# query: its dark cells are the tokens it sees. The Sparse Transformer's stride is
# $l = 11 \approx \sqrt{128}$.

# %%
N_GAL = 128
STRIDE_GAL = round(N_GAL ** 0.5)
local, strided = strided_masks_np(N_GAL, STRIDE_GAL)
block_head, summary_head = fixed_masks_np(N_GAL, 16, 4)
gallery = {
    "sliding window, w=4": sliding_window_mask_np(N_GAL, 4),
    "causal window, w=4": sliding_window_mask_np(N_GAL, 4, causal=True),
    "dilated, w=4, δ=3": dilated_window_mask_np(N_GAL, 4, 3),
    "window w=4 ∪ global {0, 64}": union_np(sliding_window_mask_np(N_GAL, 4),
                                           global_mask_np(N_GAL, [0, 64])),
    "random, r=4 per query": random_mask_np(N_GAL, 4, seed=0),
    "BigBird, blocks of 4\n(window 1 + global 1 + random 1)": bigbird_mask_np(N_GAL, 4, seed=0),
    f"strided l={STRIDE_GAL}: local head": local,
    f"strided l={STRIDE_GAL}: strided head": strided,
    "fixed l=16, c=4: both heads": union_np(block_head, summary_head),
}
fig, axes = plt.subplots(3, 3, figsize=(11, 11.5), layout="constrained")
for ax, (title, mask) in zip(axes.flat, gallery.items()):
    heatmap(ax, mask, title=f"{title}\n{mask.sum() / N_GAL:.1f} keys/query", cmap="Greys", vmax=1)
lesson.savefig(fig, "mask_gallery")
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
#
# **How the cost grows.** What matters for cost is how the keys per query grow with $N$. The
# same patterns at growing $N$, counted on the library's masks: a window and BigBird keep a fixed
# number of keys (cost $\propto N$), the strided pair with $l = \sqrt N$ grows like $\sqrt N$ (cost
# $\propto N\sqrt N$), dense attention like $N$ (cost $\propto N^2$). The exponent $a$ in
# keys per query $\propto N^a$ is fitted on the counts. The strided pair's count is not the same
# for every query: the strided head of query $i$ reads about $i/l$ keys, so early queries see
# about $\sqrt N$ keys and the last one about $2\sqrt N$ — the printout gives the mean and the
# last query's count in units of $\sqrt N$.

# %%
sizes_keys = lesson.size(full=[256, 512, 1024, 2048], smoke=[64, 128, 256])
keys, strided_rows = {}, {}  # keys[n][pattern]: mean keys per query; strided_rows[n]: (N,)
for n in sizes_keys:
    strided_pair = union_np(*strided_masks_np(n, round(n ** 0.5)))
    strided_rows[n] = strided_pair.sum(1)
    keys[n] = {"window w=16": sliding_window_mask_np(n, 16).mean() * n,
               "BigBird, blocks of 16": bigbird_mask_np(n, 16, seed=0).mean() * n,
               "strided, l = √N": strided_rows[n].mean(), "dense": float(n)}
exponent = {name: float(np.polyfit(np.log2(sizes_keys),
                                   np.log2([keys[n][name] for n in sizes_keys]), 1)[0])
            for name in keys[sizes_keys[0]]}
print_table([{"pattern": name, **{f"N = {n}": f"{keys[n][name]:.1f}" for n in sizes_keys},
              "keys ∝ N^a": f"a = {exponent[name]:.2f}", "cost": f"N^{1 + exponent[name]:.2f}"}
             for name in exponent],
            ["pattern"] + [f"N = {n}" for n in sizes_keys] + ["keys ∝ N^a", "cost"])
print("strided pair, keys per query in units of √N: mean "
      + ", ".join(f"{rows.mean() / n ** 0.5:.2f}" for n, rows in strided_rows.items())
      + "; the last query "
      + ", ".join(f"{rows[-1] / n ** 0.5:.2f}" for n, rows in strided_rows.items()))
a_strided = exponent["strided, l = √N"]
lesson.claim("strided attention with l ≈ √N costs O(N√N)",
             paper="'reduce this to O(n√n)', l ≈ √n (Child et al. 2019, abstract and §4.3)",
             ours=f"keys per query ∝ N^{a_strided:.2f} on the library's masks, N = "
                  f"{sizes_keys[0]}..{sizes_keys[-1]}: cost ∝ N^{1 + a_strided:.2f}",
             why="exact counts on the masks; l rounded to an integer",
             verdict=claims.strided_costs_n_sqrt_n(exponent=a_strided, sizes=sizes_keys))

# %% [markdown]
# ## 2. Patterns as graphs: how many layers until everyone has heard from everyone?
#
# Read mask[i, j] = True as an edge $j \to i$: in one layer, information moves from token $j$
# to token $i$. Stacking $L$ layers composes the edges, and the residual connection keeps what
# a token already knew, so "$j$ reaches $i$ within $L$ layers" is the boolean matrix power
#
# $$R_L = (M \lor I)^L .$$
#
# The number of layers after which every pair is connected is the graph's *diameter* — lesson
# 01's **maximum path length** (Vaswani et al., Table 1). A dense mask reaches everything in one
# layer. A window of half-width $w$ moves information $w$ positions per layer, so crossing a
# sequence of length $N$ takes $\lceil (N-1)/w \rceil$ layers. A single global token cuts that to
# 2 (any $j \to g \to i$). The Sparse Transformer's two heads are built for the same purpose:
# the local head carries $j$ to the next multiple of the stride, the strided (or summary) head
# carries it from there to any later $i$ — two hops for every pair at $O(N\sqrt N)$ cost
# (Child et al. 2019, §4.2: $p$ factorised heads connect every input position to every later
# output position within $p$ steps).

# %%
show(hops_np)

# %% [markdown]
# `hops_np` states the idea; the table below counts the same diameters with
# `diameter_fast_np`, a breadth-first search from every token (the tests check the two agree),
# because at $N = 1024$ a window needs hundreds of layers of $N^3$ matrix products. The causal
# patterns (strided, fixed) count the pairs $j \le i$ only: the future is never heard.

# %%
W_GRAPH, R_GRAPH = 2, 2
sizes_table = lesson.size(full=[64, 256, 1024], smoke=[64, 256])


def graph_patterns(n, seed):
    window, stride = sliding_window_mask_np(n, W_GRAPH), round(n ** 0.5)
    return {
        f"window w={W_GRAPH}": window,
        f"window + {R_GRAPH} random": window | random_mask_np(n, R_GRAPH, seed=seed),
        "window + 1 global": window | global_mask_np(n, [0]),
        "window + dilated δ=2": window | dilated_window_mask_np(n, W_GRAPH, 2),
        "BigBird, blocks of 8": bigbird_mask_np(n, 8, seed=seed),
        "strided, l = √N": union_np(*strided_masks_np(n, stride)),
        "fixed, l = √N, c = l/4": union_np(*fixed_masks_np(n, stride, stride // 4)),
    }


diameters = {}
for n in sizes_table:
    for name, mask in graph_patterns(n, seed=n).items():
        diameters.setdefault(name, []).append(diameter_fast_np(mask))
print(f"layers until every token has heard from every token it can (w = {W_GRAPH}):")
print_table([{"pattern": name, **{f"N = {n}": f"{d:.0f}" for n, d in zip(sizes_table, ds)}}
             for name, ds in diameters.items()], ["pattern"] + [f"N = {n}" for n in sizes_table])
assert diameters[f"window w={W_GRAPH}"] == [float(-(-(n - 1) // W_GRAPH)) for n in sizes_table]
for name in ("window + 1 global", "strided, l = √N", "fixed, l = √N, c = l/4"):
    assert diameters[name] == [2.0] * len(sizes_table), name

# %% [markdown]
# The window's diameter grows with $N$; a global token, BigBird (whose first block is global)
# and both Sparse Transformer patterns hold it at 2 for every $N$; a dilated window beside the
# plain one roughly halves the window's diameter — a constant factor, not a change of growth.
#
# **Why two Sparse Transformer patterns?** They connect the same pairs in two hops, but the
# strided head reads *relative* offsets $i - l, i - 2l, \dots$. For data with a period that
# matches the stride — an image's rows, where the token $l$ back is the pixel above, or music —
# that is exactly the right neighbour. For text, where the position of what matters has no
# period, Child et al. (§4.3) found the strided pattern could fail to route information, and
# introduced the *fixed* pattern: every query reads the same summary columns at the end of each
# block, so a block's content always travels through the same cells. Their results follow the
# split: strided models on CIFAR-10, ImageNet 64 and classical music, a fixed model on enwik8's
# text (Child et al. 2019, §7).
#
# **The small world.** Random edges shorten paths too (Zaheer et al. 2020, §2, after Watts &
# Strogatz): in a random graph the diameter grows like $\log N$, not like $N$. Over four sizes or
# more, a line in $\log N$ should fit the measured diameters better than a line in $\sqrt N$ or
# in $N$ — the claim below fits all three to a window of $w = 2$ plus 2 random keys per query,
# on several random draws (one line per draw):

# %%
sizes_world = lesson.size(full=[16, 32, 64, 128, 256, 512, 1024], smoke=[16, 32, 64, 128])
world_seeds = lesson.size(full=list(range(12)), smoke=[0, 1])
world = [[diameter_fast_np(sliding_window_mask_np(n, W_GRAPH)
                           | random_mask_np(n, R_GRAPH, seed=1000 * s + n))
          for n in sizes_world] for s in world_seeds]  # world[seed][size]
print(f"diameter, window w={W_GRAPH} + {R_GRAPH} random keys per query:")
print(f"{'random seed':<12}" + "".join(f"{'N=' + str(n):>8}" for n in sizes_world))
for s, ds in zip(world_seeds, world):
    print(f"{s:<12}" + "".join(f"{d:>8.0f}" for d in ds))
laws = {"ln N": np.log, "√N": np.sqrt, "N": lambda x: x}
mean_world = np.mean(world, axis=0)
fits = {law: np.polyfit(g(np.array(sizes_world, float)), mean_world, 1) for law, g in laws.items()}
print("a line fitted to the mean diameter: " + "; ".join(
    f"{fits[law][1]:.2f} + {fits[law][0]:.3g}·{law}" for law in laws)
      + f" (the line in ln N rises {fits['ln N'][0] * np.log(2):.2f} layers per doubling of N)")
lesson.claim("random edges make paths short: the diameter grows like log N",
             paper="random graphs have logarithmic shortest paths (Zaheer et al. 2020, §2, the "
                   "small-world argument after Watts & Strogatz)",
             ours=f"window w={W_GRAPH} + {R_GRAPH} random: diameter {mean_world[0]:.1f} at N = "
                  f"{sizes_world[0]}, {mean_world[-1]:.1f} at N = {sizes_world[-1]} (mean of "
                  f"{len(world_seeds)} draws); lines in log N, √N and N fitted per draw",
             why="exact graph distances on our masks, one random draw per seed",
             verdict=claims.small_world_diameter_grows_like_log_n(sizes=sizes_world,
                                                                  diameters=world))

# %%
n_layers, max_layers = lesson.size(full=256, smoke=64), 12
reach = {}  # the non-causal patterns: after L layers, which pairs are connected?
for name, mask in list(graph_patterns(n_layers, seed=n_layers).items())[:5]:
    hops = hops_np(mask, max_hops=max_layers)
    reach[name] = [((hops >= 0) & (hops <= layer)).mean() for layer in range(1, max_layers + 1)]
print(f"fraction of pairs connected after 2 and 3 layers (N={n_layers}):")
for name, fractions in reach.items():
    print(f"  {name:<28} {fractions[1]:.3f}  {fractions[2]:.3f}")

fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
xs = np.geomspace(sizes_world[0], sizes_world[-1], 100)
axes[0].plot(np.repeat(sizes_world, len(world_seeds)), np.ravel(np.transpose(world)), "o",
             color="0.6", alpha=0.5, label="one random draw")
for law, g in laws.items():
    axes[0].plot(xs, np.polyval(fits[law], g(xs)), label=f"best line in {law}")
axes[0].set(xscale="log", xlabel="sequence length N", ylabel="diameter (layers)",
            title=f"window w={W_GRAPH} + {R_GRAPH} random keys: diameter vs N",
            ylim=(0, 1.3 * max(map(max, world))))
decade_ticks(axes[0], sizes_world)
for name, fractions in reach.items():
    axes[1].plot(range(1, max_layers + 1), fractions, marker=".", label=name)
axes[1].set(xlabel="number of layers L", ylabel="fraction of pairs (i, j) connected",
            title=f"who has heard from whom after L layers (N={n_layers})", ylim=(0, 1.05))
for ax in axes:
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=8, loc="lower right")
lesson.savefig(fig, "graph_hops")

# %% [markdown]
# On the left the measured diameters climb by less than one layer per doubling of $N$: on a
# logarithmic $N$ axis that is a straight line, which is what the best line in $\ln N$ draws,
# while the best lines in $\sqrt N$ and in $N$ bend away from the points at both ends. The right
# panel is the view a model designer needs: after 2 or 3 layers a window-only model has
# connected only a small fraction of the pairs (printed above), while one global token connects
# them all in 2.
#
# ## 3. A long-sequence task where the pattern matters
#
# The graph argument predicts which models *can* learn a task whose answer needs both ends of
# a long sequence. This section trains them.
#
# **Task ("two halves").** A sequence of $N$ tokens: token 0 is a `[CLS]` marker, the others
# are symbols $A$ or $B$. In the first half each symbol is $A$ with probability $p_1$, in the
# second half with probability $p_2$, each of $p_1, p_2$ being $1/4$ or $3/4$. The label is
# $[p_1 = p_2]$: "do both halves lean the same way?" (half the sequences each). The model reads
# its answer from position 0, so after $L$ layers it can only use what the pattern lets travel
# to position 0 in $L$ hops — and the answer needs tokens from both halves, i.e. from both
# ends of the sequence. A model that hears only one half can do no better than always answering
# the held-out set's more frequent label: that *majority-class line*, not 0.5, is chance here.
#
# **Models.** The same 2-layer encoder (`SparseClassifier`: $d = 32$, 2 heads, learned
# positions, MLP, pre-norm; its attention layers are lesson 01's `MultiHeadAttention` with
# `attend=` a sparse kernel), three patterns with about the same number of keys per query:
# a window $w = 16$ (33 keys); a window $w = 15$ plus global token 0 (32 keys for an ordinary
# query); BigBird blocks of 8 — a window of one block on each side and one random block, no
# global block (at most 32 keys). As in BigBird's code, where the random blocks are drawn once
# per head (`bigbird_block_rand_mask`, one call per head) and every layer has its own seed,
# each head of each layer gets its own random blocks, drawn from the run's seed
# (`bigbird_layouts_np`).

# %%
show(two_halves)
show(SparseClassifier)

# %%
N_SEQ = lesson.size(full=512, smoke=96)
STEPS = lesson.size(full=120, smoke=8)
LONGER = 2  # BigBird (no global token) also trains LONGER times as many steps
BATCH = lesson.size(full=16, smoke=8)
SEEDS = lesson.size(full=[0, 1, 2, 3], smoke=[0, 1], paper=list(range(12)))
VOCAB, D_MODEL, HEADS, LAYERS = 3, 32, 2, 2  # tokens: CLS = 0, A = 1, B = 2
BB_BLOCK = 8

example, label = two_halves(4, 16, torch.Generator().manual_seed(0), "cpu")
for tokens, y in zip(example, label):
    print("".join("CAB"[t] for t in tokens.tolist()), "label", y.item())
held_out = two_halves(lesson.size(full=256, smoke=64), N_SEQ,
                      torch.Generator().manual_seed(10_000), lesson.device)
share = held_out[1].float().mean().item()
majority = max(share, 1 - share)
print(f"held-out set: {len(held_out[1])} sequences, {share:.1%} with label 1: "
      f"the majority-class line is {majority:.3f}")


def bigbird_layouts(seed):
    """(LAYERS, HEADS, nb, nb): every head of every layer its own random blocks."""
    return bigbird_layouts_np(-(-N_SEQ // BB_BLOCK), LAYERS, HEADS, window=1, n_global=0,
                              n_random=1, seed=seed)


def heard_by_position_0(*layer_masks):
    """How many tokens of the first and of the second half reach position 0 through the
    layers (one (N, N) mask per layer, the union of its heads)."""
    reached = reach_np(*layer_masks)[CLS]
    return int(reached[:N_SEQ // 2].sum()), int(reached[N_SEQ // 2:].sum())


def bigbird_layer_masks(layouts):
    return [union_np(*(block_mask_np(layout, BB_BLOCK, N_SEQ) for layout in heads))
            for heads in layouts]


window_mask = sliding_window_mask_np(N_SEQ, 16)
global_mask = sliding_window_mask_np(N_SEQ, 15) | global_mask_np(N_SEQ, [CLS])
print(f"\nwhat position 0 can hear within {LAYERS} layers (N = {N_SEQ}):")
print(f"{'pattern':<28}{'keys of an ordinary query (max)':>33}{'first half':>12}"
      f"{'second half':>13}")
heads_of = {"window w=16": [[window_mask]] * LAYERS,  # [layer][head] -> (N, N) mask
            "window w=15 + global": [[global_mask]] * LAYERS}
heads_of.update({f"BigBird, run seed {s}": [[block_mask_np(layout, BB_BLOCK, N_SEQ)
                                             for layout in layer] for layer in bigbird_layouts(s)]
                 for s in SEEDS})
heard = {}  # pattern -> (first-half, second-half) tokens that reach position 0
for name, heads in heads_of.items():
    heard[name] = heard_by_position_0(*(union_np(*layer) for layer in heads))
    most = max(mask[1:].sum(1).max() for layer in heads for mask in layer)  # one head's keys
    print(f"{name:<28}{most:>33}{heard[name][0]:>12}{heard[name][1]:>13}")

# One layout shared by every head and layer, against one per head and per layer, over more draws:
draws = range(1000, 1000 + lesson.size(full=50, smoke=5))
shared = [heard_by_position_0(*[bigbird_layer_masks(bigbird_layouts(s)[:1, :1])[0]] * LAYERS)[1]
          for s in draws]
per_head = [heard_by_position_0(*bigbird_layer_masks(bigbird_layouts(s)))[1] for s in draws]
print(f"second-half tokens position 0 hears, over {len(draws)} layout draws: one shared layout "
      f"median {np.median(shared):.0f} (fewest {min(shared)}); a layout per head and layer "
      f"median {np.median(per_head):.0f} (fewest {min(per_head)})")

# %% [markdown]
# Within two layers, position 0 of the window model hears the tokens up to position
# $2 \times 16$ and nothing of the second half: the answer is out of its reach, however long it
# trains. The global token gives position 0 every token in one hop. BigBird's random blocks give
# it some tokens of *both* halves — how many depends on the draw, which is why each run prints
# its own. A layout shared by all heads and layers can leave position 0 almost deaf to a half
# (exercise 2.4 counts how often it hears nothing at all); one layout per head and per layer
# spreads the random blocks, and position 0 hears far more.
#
# Each model trains with AdamW for the same number of steps on fresh batches; BigBird, whose
# paths run through scattered blocks, also gets `LONGER` times as many. Only the first seed
# is evaluated along the way (for the curves); the others at the two budgets.

# %%
def kernels(pattern, seed):
    if pattern == "window w=16":
        return window_attend(16)
    if pattern == "window w=15 + global":
        return window_attend(15, global_idx=[CLS])
    return [block_sparse_attend(layout, BB_BLOCK) for layout in bigbird_layouts(seed)]


def classification_loss(model, tokens, labels):
    return F.cross_entropy(model(tokens), labels)


def run(pattern, seed, steps):
    set_seed(seed)
    model = SparseClassifier(VOCAB, N_SEQ, D_MODEL, HEADS, LAYERS, kernels(pattern, seed))
    model = model.to(lesson.device)
    train_gen = torch.Generator().manual_seed(seed)

    def evaluate():
        with torch.no_grad():
            right = model(held_out[0]).argmax(-1) == held_out[1]
            return {"accuracy": right.float().mean().item()}

    every = max(STEPS // 6 if steps == STEPS else steps // 8, 2)
    curve = set(range(0, steps + 1, every)) if seed == SEEDS[0] else set()
    return train(model, lambda step: two_halves(BATCH, N_SEQ, train_gen, lesson.device),
                 classification_loss, steps=steps, lr=3e-3, evaluate=evaluate,
                 eval_at=curve | {STEPS, steps}, desc=f"{pattern}, seed {seed}")


patterns = ["window w=16", "window w=15 + global", "BigBird window + random"]
steps_of = {name: STEPS * (LONGER if name.startswith("BigBird") else 1) for name in patterns}
histories = {name: [run(name, seed, steps_of[name]) for seed in SEEDS] for name in patterns}


def accuracy_at(history, step):
    """Held-out accuracy at the evaluation at `step`."""
    return history["accuracy"][history["accuracy_step"].index(step)]


print(f"\nheld-out accuracy, N = {N_SEQ} (majority-class line {majority:.3f})")
print(f"{'pattern':<26}{'step':>6}" + "".join(f"{'seed ' + str(s):>9}" for s in SEEDS)
      + f"{'mean':>9}")
acc = {}  # acc[(pattern, step)]: one accuracy per seed
for name, hs in histories.items():
    for step in sorted({STEPS, steps_of[name]}):
        acc[name, step] = [accuracy_at(h, step) for h in hs]
        print(f"{name:<26}{step:>6}" + "".join(f"{a:>9.3f}" for a in acc[name, step])
              + f"{np.mean(acc[name, step]):>9.3f}")
window_acc, global_acc = acc["window w=16", STEPS], acc["window w=15 + global", STEPS]
bigbird_early, bigbird_acc = (acc["BigBird window + random", step]
                              for step in (STEPS, STEPS * LONGER))
print("BigBird runs, second-half tokens position 0 hears -> accuracy after "
      f"{STEPS * LONGER} steps: " + ", ".join(
          f"seed {s}: {heard[f'BigBird, run seed {s}'][1]} -> {a:.3f}"
          for s, a in zip(SEEDS, bigbird_acc)))
lesson.claim("a window too narrow for 2 layers to cross the sequence stays at the majority line",
             paper="a stack of L window layers has a receptive field of L·w tokens (Beltagy et "
                   "al. 2020, Longformer, §3.1)",
             ours=f"window w=16, 2 layers, N = {N_SEQ}: accuracy {np.mean(window_acc):.3f} "
                  f"against the majority line {majority:.3f}; the same model with a global "
                  f"token {np.mean(global_acc):.3f}",
             why=f"{len(SEEDS)} seeds, {STEPS} steps each; a constant prediction scores "
                 f"{1 - majority:.3f} or {majority:.3f}",
             verdict=claims.window_alone_stays_at_majority(window_acc=window_acc,
                                                           majority=majority,
                                                           control_acc=global_acc))
lesson.claim("random blocks without a global token carry the far half: BigBird learns the task",
             paper="random edges make every pair of tokens a few hops apart (Zaheer et al. 2020, "
                   "§2)",
             ours=f"BigBird window + random, no global: {np.mean(bigbird_acc):.3f} after "
                  f"{STEPS * LONGER} steps (majority line {majority:.3f})",
             why="layouts drawn per head and per layer from each run's seed",
             verdict=claims.random_blocks_carry_the_far_half(
                 correct=[round(a * len(held_out[1])) for a in bigbird_acc],
                 items=len(held_out[1]), majority=majority))
lesson.claim("without global tokens, window + random blocks fall short",
             paper="window and random blocks alone fell short of full attention, so BigBird "
                   "adds global tokens (Zaheer et al. 2020, §2)",
             ours=f"after {STEPS} steps: global token {np.mean(global_acc):.3f}, BigBird "
                  f"{np.mean(bigbird_early):.3f}; BigBird after {STEPS * LONGER} steps "
                  f"{np.mean(bigbird_acc):.3f}",
             why="a synthetic task that only long paths solve; 2-layer d=32 models",
             verdict=claims.random_blocks_fall_short_of_global(
                 global_acc=global_acc, bigbird_equal=bigbird_early, bigbird_long=bigbird_acc,
                 longer=LONGER))

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
plot_curves(axes[0], {name: hs[0] for name, hs in histories.items()}, "loss",
            title=f"training loss (seed {SEEDS[0]}): raw, faint, and its running mean",
            smooth=lesson.size(full=20, smoke=4))
plot_curves(axes[1], {name: hs[0] for name, hs in histories.items()}, "accuracy",
            title=f"held-out accuracy (seed {SEEDS[0]}), N={N_SEQ}")
axes[1].axhline(majority, color="gray", ls=":", lw=1)
axes[1].annotate("majority-class line", (0, majority), xytext=(2, -12),
                 textcoords="offset points", color="gray", fontsize=8)
axes[1].set_ylim(0.3, 1.05)
for ax in axes:
    ax.get_legend().remove()
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside lower center", ncol=3)  # below: covers no curve
lesson.savefig(fig, "two_halves_training")

# %% [markdown]
# **What holds on every run** is the graph: the window model never has the second half within
# reach, so it can do no better than the majority label; the global token hands position 0
# every token in one hop; BigBird's random blocks make the paths exist, but the model must
# learn to route the evidence through two hops of scattered blocks, and how much of the far
# half those blocks reach differs from draw to draw (the line under the table puts each run's
# count beside its accuracy).
#
# That is the small-world argument at work — and its limit: random edges make paths short on
# *average* and over many draws, a global token makes them short for *every* pair, one hop
# from the position that answers. BigBird keeps global tokens *and* adds random ones.
#
# **The paper's numbers.** Longformer's ablation on WikiHop (Beltagy et al. 2020, Table 11,
# development-set accuracy) makes the same point at full scale; the rows that isolate global
# attention are "no linear projections" with and without it:

# %%
longformer_table11 = [("seqlen 4,096 (the full model)", 73.8),
                      ("seqlen 512, attention n²", 71.7),
                      ("seqlen 512, window attention only", 68.8),
                      ("no linear projections for global attention", 72.2),
                      ("no linear projections, no global attention", 65.5)]
print_table([{"Longformer variant (WikiHop dev, Table 11)": name, "accuracy": f"{a:.1f}"}
             for name, a in longformer_table11],
            ["Longformer variant (WikiHop dev, Table 11)", "accuracy"])
lesson.claim("global attention matters for long inputs",
             paper="WikiHop dev accuracy 72.2 with global attention, 65.5 without (both without "
                   "its linear projections; Beltagy et al. 2020, Longformer, Table 11)",
             ours=f"two-halves accuracy {np.mean(global_acc):.3f} with one global token, "
                  f"{np.mean(window_acc):.3f} with the window alone (N = {N_SEQ}, 2 layers)",
             why="a synthetic task that only long-range paths solve; 2-layer d=32 model",
             verdict=claims.global_attention_matters(global_acc=global_acc,
                                                     window_acc=window_acc))

# %% [markdown]
# Ours is a synthetic task built so that only long paths solve it, on a 2-layer model: the gap
# is all-or-nothing here, a few points there, where most answers need only local context.
#
# ## 4. A kernel that never builds the $N \times N$ mask
#
# Feeding a sparse mask to dense attention is correct but pointless: the kernel still computes
# all $N^2$ scores (PyTorch's `F.scaled_dot_product_attention` even copies a boolean mask to a
# float one, $4N^2$ bytes). The idea that avoids it, for a window:
#
# **Blocked window.** Cut the queries into blocks of $c$. The queries $s \dots s+c-1$ of a block
# need only the keys $s-w_\ell \dots s+c-1+w_r$, where $w_\ell$ is how far a query looks back and
# $w_r$ how far ahead ($w_\ell = w_r = w$; $w_r = 0$ when causal): a *span* of $c + w_\ell + w_r$
# keys. Inside a span the window of query $a$ is the band $a \le t \le a + w_\ell + w_r$ — *the
# same small $c \times (c + w_\ell + w_r)$ mask for every block*. So: pad the queries to whole
# blocks, give every block its span of keys and values (an `unfold` of the padded keys: a view,
# the spans overlap in memory), and run one batched SDPA call over all blocks with the band as
# its mask — $N(c + w_\ell + w_r)$ scores instead of $N^2$. Below, the window mask of $N = 32$,
# $w = 3$ with the span of every block of $c = 8$ outlined, and the one band every block uses:

# %%
from matplotlib.patches import Rectangle

from minattn.sparse import band_mask_torch

n_pic, w_pic, c_pic = 32, 3, 8
fig, axes = plt.subplots(1, 2, figsize=(11, 5.2), layout="constrained",
                         gridspec_kw=dict(width_ratios=[38, 14]))
heatmap(axes[0], sliding_window_mask_np(n_pic, w_pic), cmap="Greys", vmax=1,
        title=f"window w={w_pic}, N={n_pic}: each block of {c_pic} queries needs only\n"
              f"its span of {c_pic + 2 * w_pic} keys (outlined; grey: past the ends)")
for b, color in zip(range(n_pic // c_pic), ("C0", "C1", "C2", "C3")):
    start = b * c_pic
    axes[0].add_patch(Rectangle((start - w_pic - 0.5, start - 0.5), c_pic + 2 * w_pic, c_pic,
                                fill=False, edgecolor=color, lw=2.2, clip_on=False))
heatmap(axes[1], band_mask_torch(c_pic, w_pic, w_pic).numpy(), cmap="Greys", vmax=1,
        title=f"the band: one ({c_pic} × {c_pic + 2 * w_pic}) mask\nfor every block")
axes[1].set(xlabel="key t in the block's span", ylabel="query a in the block")
axes[1].set_xticks(range(0, c_pic + 2 * w_pic, 2))
axes[1].set_yticks(range(c_pic))
axes[0].set_xlim(-w_pic - 0.5, n_pic + w_pic - 0.5)  # the spans reach past both ends (grey)
for lo, hi in ((-w_pic - 0.5, -0.5), (n_pic - 0.5, n_pic + w_pic - 0.5)):
    axes[0].axvspan(lo, hi, color="0.85", zorder=0)
for ax in axes:
    ax.set_aspect("equal")
lesson.savefig(fig, "blocked_window")

# %% [markdown]
# The outlined spans run past both ends of the sequence for the first and last blocks: there
# the blocked kernel sees zero keys, which the library's entry point corrects (section 7). This
# function is exercise 2.2:

# %%
show(blocked_window_attention_torch)

# %% [markdown]
# `window_attention_torch(q, k, v, w, dilation=, causal=, global_idx=)` is the entry point the
# models use: the blocked kernel plus exact end blocks, dilation and global tokens (section 7
# opens them). BigBird and the fixed pattern are defined on blocks, and run on a block-sparse
# kernel that computes only the non-zero $b \times b$ tiles. Every kernel must compute *exactly*
# what lesson 01's dense attention computes with the NumPy mask of the same pattern — outputs
# and gradients, in float64 (`tests/test_sparse.py` checks many sizes). The same check, small:

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
# ## 5. Cost: linear vs quadratic
#
# A small live measurement on the lesson's device: dense SDPA fed the window as an $N \times N$
# mask against the window kernel, forward only, $B=1$, $H=4$, $d=64$, $w=32$, float32, 5 calls
# each, side by side; the window kernel alone also runs at two longer lengths. On a CPU it
# counts the one thread's CPU time (robust when the machine is shared); on a GPU the wall clock
# between two synchronisations, at four times longer sequences (a GPU that is not yet busy runs
# every small size in about the same time). The table shows the fastest call. The growth
# exponent $b$ in time $\propto N^b$ is fitted for every repeat, so that the verdict can weigh
# the noise — for the window kernel over its four largest sizes: at a few thousand tokens its
# fixed costs (Python, the exact end blocks) are still a large share of its time, and they
# flatten the growth.

# %%
on_gpu = lesson.device.type == "cuda"
scale = 4 if on_gpu else 1  # a GPU needs longer sequences to be busy
sizes_dense = [scale * n for n in lesson.size(full=[1024, 2048, 4096, 8192], smoke=[256, 512])]
sizes_window = sizes_dense + [scale * n for n in lesson.size(full=[16384, 32768], smoke=[1024])]
W_COST, REPEATS = 32, 5
clock = time.perf_counter if on_gpu else time.process_time
cost = {"dense masked SDPA": {}, "window kernel": {}}  # [name][N]: seconds, one per repeat
for n in sizes_window:
    gen = torch.Generator().manual_seed(n)
    q_c, k_c, v_c = (torch.randn(1, 4, n, 64, generator=gen).to(lesson.device) for _ in range(3))
    runs = {"window kernel": lambda: window_attention_torch(q_c, k_c, v_c, W_COST)}
    if n in sizes_dense:  # beyond them dense attention's N² time and mask are not worth paying
        dense_mask = torch.from_numpy(sliding_window_mask_np(n, W_COST)).to(lesson.device)
        runs["dense masked SDPA"] = lambda: F.scaled_dot_product_attention(
            q_c, k_c, v_c, attn_mask=dense_mask)
    with torch.no_grad():
        outs = [fn() for fn in runs.values()]  # a first call outside the clock (a GPU compiles)
        if len(outs) == 2:  # the same numbers, in float32
            torch.testing.assert_close(outs[0], outs[1], rtol=1e-4, atol=1e-4)
        for _ in range(REPEATS):
            for name, fn in runs.items():
                sync(lesson.device)
                start = clock()
                fn()
                sync(lesson.device)
                cost[name].setdefault(n, []).append(clock() - start)
print(f"forward time on {lesson.device}, the fastest of {REPEATS} calls:")
print(f"{'N':>6} {'dense':>10} {'window':>10} {'dense / window':>15}")
for n in sizes_window:
    tw = min(cost["window kernel"][n])
    dense = ratio = "—"  # not timed at this length
    if n in cost["dense masked SDPA"]:
        td = min(cost["dense masked SDPA"][n])
        dense, ratio = f"{td * 1e3:.2f}ms", f"{td / tw:.1f}×"
    print(f"{n:>6} {dense:>10} {tw * 1e3:>8.2f}ms {ratio:>15}")
fitted = {"dense masked SDPA": sizes_dense, "window kernel": sizes_window[-4:]}
time_exponent = {name: [float(np.polyfit(np.log(ns), np.log([max(cost[name][n][r], 1e-9)
                                                              for n in ns]), 1)[0])
                        for r in range(REPEATS)]
                 for name, ns in fitted.items()}
print("time ∝ N^b, b fitted per repeat: " + "; ".join(
    f"{name} (N = {fitted[name][0]}..{fitted[name][-1]}) " + ", ".join(f"{b:.2f}" for b in bs)
    for name, bs in time_exponent.items()))
lesson.claim("sliding-window attention scales linearly with N where full attention is quadratic",
             paper="memory and time linear in sequence length (Beltagy et al. 2020, Longformer, §3 "
                   "and Figure 1)",
             ours=f"time ∝ N^{np.median(time_exponent['window kernel']):.2f} for the window "
                  f"kernel (N = {fitted['window kernel'][0]}..{sizes_window[-1]}), "
                  f"N^{np.median(time_exponent['dense masked SDPA']):.2f} for dense masked SDPA "
                  f"(N = {sizes_dense[0]}..{sizes_dense[-1]}); w = {W_COST}, forward, "
                  f"{lesson.device}",
             why="the window kernel's exponent is fitted at its largest sizes, where its fixed "
                 "overheads no longer flatten the growth",
             verdict=claims.window_time_grows_linearly(
                 window_exponent=time_exponent["window kernel"],
                 dense_exponent=time_exponent["dense masked SDPA"]))
fig, ax = plt.subplots(figsize=(5.5, 4), layout="constrained")
for name, times in cost.items():
    ax.plot(list(times), [min(t) for t in times.values()], marker="o", label=name)
ax.set(xscale="log", yscale="log", xlabel="sequence length N",
       ylabel=f"forward {'time' if on_gpu else 'CPU time'} (s)",
       title=f"sliding window w={W_COST} on {lesson.device.type}: dense vs blocked kernel")
decade_ticks(ax, sizes_window)
ax.grid(alpha=0.3, which="both")
ax.legend(loc="upper left")
lesson.savefig(fig, "cost")

# %% [markdown]
# **Takeaway.** Once the sequence is long enough to keep the device busy, dense attention's
# time grows with $N^2$ — $b \approx 2$, about ×4 per doubling of $N$ — however few keys the mask
# allows; the window kernel's grows with $N$, $b \approx 1$, so the gap widens with every
# doubling. The full tables — forward and backward, peak memory, compiled FlexAttention, the
# block-sparse kernel, $N$ up to 65,536 — are measured by `benchmarks/sparse.py` (on a CPU,
# or a GPU with `--device cuda`) and kept in [benchmarks/README.md](../benchmarks/README.md).

# %% [markdown]
# ## 6. Where these patterns run today, and why each was chosen
#
# **Longformer: global tokens chosen by the task** (Beltagy et al. 2020, §3.1, §5). A sliding
# window in every layer, and global attention on the few tokens the *task* says must see
# everything: the `[CLS]` token for classification, every question token for question answering
# (WikiHop, TriviaQA). The window gives local context at linear cost; the global tokens are the
# task's own read-out and query, given two-hop access to the whole document — exactly the role of
# position 0 in section 3. Which tokens are global is the task's choice, not something the
# model learns, and global attention gets its own query, key and value projections (the
# "linear projections" of Table 11). For character-level language modelling the authors vary
# the window across layers (small windows low, large high) and dilate a few heads of the top
# layers to reach further at the same cost.
#
# **Mistral 7B: a sliding window and a rolling cache** (Jiang et al. 2023, §2). Every layer is a
# causal window of $W = 4096$ tokens, and the path argument of section 2 recovers the long range:
# each layer moves information $W$ tokens further, so 32 layers span about $32 W$ tokens. The
# window's real payoff is at generation time. A model normally keeps the keys and values of every
# past token (the "KV cache"), which grows with the sequence; a window never looks further back
# than $W$, so a **rolling buffer** of $W$ slots suffices — the keys and values of step $i$
# overwrite slot $i \bmod W$. The authors report 8× less cache memory on 32k-token sequences at
# no loss of quality. That the keys end up in the cache out of order does not matter: lesson
# 01 showed attention is invariant to the order of its keys (the position lives in the vectors
# themselves). Checked, with a cache of $w + 1$ slots for our causal window of half-width $w$:

# %%
w_roll, n_roll, d_roll = 4, 13, 8
gen = torch.Generator().manual_seed(0)
q_r, k_r, v_r = (torch.randn(n_roll, d_roll, generator=gen, dtype=torch.float64) for _ in range(3))
slots = w_roll + 1
cache_k = torch.zeros(slots, d_roll, dtype=torch.float64)
cache_v = torch.zeros(slots, d_roll, dtype=torch.float64)
filled = torch.zeros(slots, dtype=torch.bool)
generated = []
for step in range(n_roll):  # one token at a time, as a language model generates
    slot = step % slots  # the oldest key leaves, the newest takes its slot
    cache_k[slot], cache_v[slot], filled[slot] = k_r[step], v_r[step], True
    generated.append(attention_torch(q_r[step:step + 1], cache_k, cache_v, filled[None])[0])
rolling = torch.cat(generated)
reference = window_attention_torch(q_r[None], k_r[None], v_r[None], w_roll, causal=True)[0]
roll_err = (rolling - reference).abs().max().item()
print(f"rolling cache of {slots} slots, {n_roll} generated tokens: max |cached - window kernel| = "
      f"{roll_err:.1e}; the cache holds {slots} keys instead of {n_roll}")
lesson.claim("a sliding window needs a key-value cache of W slots only (a rolling buffer)",
             paper="cache of fixed size W, slot i mod W: 8× less cache memory at 32k tokens, "
              "W = 4096, "
              "quality unchanged (Jiang et al. 2023, Mistral 7B, §2)",
             ours=f"generation through a {slots}-slot rolling cache equals the causal "
             "window kernel "
             f"(max difference {roll_err:.1e}, float64)",
             why="an exact equivalence on random vectors; quality at scale not measured",
             verdict=claims.rolling_cache_equals_window(max_error=roll_err))

# %% [markdown]
# **Gemma 2: local and global layers, alternating** (Gemma Team 2024, "Gemma 2: Improving Open
# Language Models at a Practical Size", §2). Every other layer is a sliding window of 4096 tokens;
# the layers between attend globally over the whole 8192-token context. Half the layers pay the
# window's price (and keep a window-sized cache), the other half keep the one-hop path between
# any two tokens — the trade of lesson 01's section 9, made layer by layer instead of inside one
# mask. A stack of windows alone would need $N/W$ layers to connect the two ends; one global
# layer connects them at once.
#
# **BigBird** (Zaheer et al. 2020) combines all three ideas in one mask — window, global and
# random blocks — and proves that this sparse attention keeps what full attention can express
# (a universal approximator of sequence functions, Turing complete, §3) *because* of the global
# tokens: the random edges shorten paths, the global ones guarantee them.
#
# ## 7. Inside the kernels
#
# The blocked kernel of section 4 is the idea. The library's entry point wraps it in four pieces
# you can read now, one at a time.
#
# **Exact end blocks.** The band is wrong only where a span runs past an end of the sequence,
# where the blocked kernel saw zero keys. `window_forward_torch` recomputes those few blocks —
# about $(w_\ell + w_r)/c + 2$ of them — with their exact masks and swaps them in: in place
# when nothing needs the blocked kernel's output for a backward pass, as a copy when autograd
# does. `sliding_window_attention_torch`, the core, flattens the batch and head axes into one
# (SDPA's fast CPU kernel wants 4-d blocks) and chooses the backward.

# %%
show(window_forward_torch)
show(sliding_window_attention_torch)

# %% [markdown]
# **Dilation** $\delta$ is a change of viewpoint: token $i = r + \delta p$ sees only its own
# residue class $r = i \bmod \delta$, where the dilated window is a plain window over every
# $\delta$-th token — so the dilated kernel is the core run on the $\delta$ classes as a batch.

# %%
show(dilated_window_attention_torch)

# %% [markdown]
# **Global tokens** ride along as $|G|$ extra keys of every block, with an exact per-block mask
# (a global key already inside a query's window is seen once); then the $|G|$ global rows attend
# to all $N$ keys ($|G| \cdot N$ work) and replace their rows. Its backward is autograd's.

# %%
show(global_window_attention_torch)

# %% [markdown]
# **Block-sparse.** BigBird and the fixed pattern are defined on blocks; a layout (`nb × nb`
# booleans) says which $b \times b$ tiles are non-zero. The kernel gathers just those $P$ tiles,
# computes their scores, and normalises each query row across its tiles with a scatter-max and
# a scatter-sum: work and memory $\propto P b^2$.

# %%
show(block_sparse_attention_torch)

# %% [markdown]
# **A hand-written backward.** Autograd through the blocked kernel is correct but keeps every
# block's attention for the backward pass. When the core trains it goes through
# `minattn/sparse/backward.py` instead: lesson 01's backward formulas applied a few blocks at a
# time, recomputing their scores instead of storing them — the same trade FlashAttention makes
# (lesson 01, section 4). The tests check it against autograd and against finite differences.

# %%
from minattn.sparse import window_attention_backward_torch

show(window_attention_backward_torch)

# %% [markdown]
# ## Summary
#
# What this run found, claim by claim: each sentence is the one its claim's rule chose for the
# outcome the numbers above gave.

# %%
lesson.summary()

# %% [markdown]
# And what the lesson showed along the way:
#
# * A sparse pattern is a boolean mask: window, dilated window, global tokens, random keys,
#   BigBird blocks, the Sparse Transformer's strided and fixed heads.
# * Windows, global tokens and BigBird's blocks give each query a fixed number of keys: cost
#   $\propto N$. The Sparse Transformer's strided heads with $l \approx \sqrt N$ give query $i$
#   about $l + i/l$ keys — $2\sqrt N$ for the last query, $\tfrac32\sqrt N$ on average: cost
#   $\propto N\sqrt N$.
# * Read as a graph, a pattern decides how many layers information needs to cross the
#   sequence — the maximum path length: $\lceil (N-1)/w \rceil$ for a window, 2 with a global
#   token, 2 for both Sparse Transformer patterns (strided for periodic data such as images
#   and music, fixed for text), and a number that grows slowly with $N$ with random edges.
# * On a task that needs both ends of a 512-token sequence, a 2-layer window model has the
#   answer out of reach; one global token puts it one hop away; BigBird's random blocks, drawn
#   per head and per layer, make paths through scattered blocks that the model must learn to use.
# * The window kernel never builds the $N \times N$ mask: blocks of queries, unfolded key spans,
#   one band mask for all blocks; exact masks for the few blocks at the ends; dilation is the
#   same kernel on residue classes; its backward recomputes a few blocks at a time. Every kernel
#   equals dense masked attention (outputs and gradients, float64).
# * Today: Longformer puts global attention on the tokens its task names, Mistral runs a
#   window with a rolling cache of $W$ slots, Gemma 2 alternates window and global layers.
#
# ## Exercises
# Build a student copy (`make student`, or `python -m minattn.course.classroom student DIR`),
# implement the marked regions, and check them with `make exercises` (or
# `python -m pytest --exercises 2.1` in the copy).
#
# * **2.1** (implement, `minattn/sparse/patterns.py`, ~10 min) `sliding_window_mask_np` and its
#   dilated twin `dilated_window_mask_np`: the $N \times N$ boolean masks $|i - j| \le w$ and
#   $|i - j| \le w\delta,\ \delta \mid i - j$, intersected with $j \le i$ when `causal` (a
#   third marked line in `minattn/sparse/kernels.py` tests the same condition for global keys).
# * **2.2** (implement, `minattn/sparse/blocked.py`, ~20 min) `blocked_window_attention_torch`,
#   the blocked forward of section 4: pad the queries to whole blocks of $c$, give each block
#   its span of $c + w_\ell + w_r$ keys and values with `unfold_blocks_torch`, and run one
#   `F.scaled_dot_product_attention` call with `band_mask_torch`. The tests compare the window
#   kernels built on it with dense masked attention for many $N$, $w$, $\delta$ and block sizes.
# * **2.3** (predict, `minattn/course/answers/sparse.py`, ~5 min) A window of half-width
#   $w = 8$ over $N = 256$ tokens: after how many layers has token 0 first heard from token
#   255? And with one global token added, after how many layers has every token heard from
#   every other? Answer before you run `hops_np`.
# * **2.4** (experiment, `minattn/course/answers/sparse.py`, ~10 min) Take section 3's BigBird
#   pattern (N = 512, blocks of 8, a window of one block, one random block, no global block)
#   with *one* layout shared by every head and layer, and try the layout seeds 0 … 99: for what
#   fraction of them does position 0 hear *no* token of the second half within 2 layers? What
#   does that say about a model whose heads and layers all share one layout, and why does
#   section 3 draw one per head and per layer?
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
# 4. Mistral's rolling cache holds $W$ keys per layer. How large is the cache of a 32-layer
#    model with $W = 4096$, 8 key-value heads of size 128 in 16-bit floats — and how large
#    without the window, at 32k tokens?
