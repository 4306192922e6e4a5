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
#   $l$-th token (or a few "summary" tokens of every block), and chooses $l \approx \sqrt N$:
#   each query sees a number of keys that grows like $\sqrt N$, and the cost like $N\sqrt N$ —
#   far below $N^2$, but not linear.
#
# In this lesson you will:
# 1. write the patterns as boolean masks, compute attention with one, and count how the keys
#    per query grow with $N$;
# 2. treat a pattern as a graph and count the layers information needs to cross the sequence —
#    lesson 01's *maximum path length*;
# 3. train small models on sequences of 512 tokens whose label needs both ends, and watch the
#    graph decide which patterns can learn it;
# 4. meet a kernel that computes window attention *without* ever building the $N \times N$
#    mask, check it against the mask, and measure its cost;
# 5. see where these patterns run today (Longformer, Mistral, Gemma 2, BigBird);
# 6. open the kernels (an appendix): exact end blocks, dilation, global tokens, block-sparse
#    tiles and a hand-written backward.

# %%
import numpy as np
import torch

from minattn.attention import attention_np, attention_torch
from minattn.course.lesson import Lesson, show, show_table
from minattn.course.sparse import (
    CLS,
    accuracy_at,
    growth_exponents,
    heard_by_position_0,
    keys_per_query,
    plot_blocked_window,
    plot_cost,
    plot_gallery,
    plot_graph,
    plot_training,
    time_forward,
    train_two_halves,
    two_halves,
)
from minattn.course.stats import Gate, all_of, compare, rates, versus, within
from minattn.fast.flex import (
    block_sparse_attention_routed_fast_torch,
    window_attention_routed_fast_torch,
)
from minattn.fast.sparse import (
    band_mask_torch,
    block_sparse_attention_fast_torch,
    blocked_window_attention_torch,
    diameter_fast_np,
    dilated_window_attention_fast_torch,
    global_window_attention_fast_torch,
    sliding_window_attention_fast_torch,
    window_attention_backward_torch,
    window_attention_fast_torch,
    window_forward_torch,
)
from minattn.sparse import (
    SparseClassifier,
    bigbird_layout_np,
    bigbird_layouts_np,
    bigbird_mask_np,
    block_mask_np,
    block_sparse_attend,
    block_sparse_attention_torch,
    dilated_window_mask_np,
    fixed_masks_np,
    global_mask_np,
    hops_np,
    random_mask_np,
    sliding_window_mask_np,
    strided_masks_np,
    union_np,
    window_attend,
    window_attention_np,
    window_attention_torch,
)

lesson = Lesson("02_sparse")  # on a CPU: one torch thread (see Lesson)

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
# query, column $j$ = key, **True = may attend**. The course's conventions (stated once, in the
# docstring of `minattn/sparse.py`): positions $0 \dots N-1$; the window half-width $w$ is
# one-sided, $|i - j| \le w$ gives $2w + 1$ keys; *causal* intersects a pattern with $j \le i$.
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
# The window is one line of NumPy: a column of query positions against a row of key positions.
# Fed to lesson 01's `attention_np` as its mask, it *is* sliding-window attention — the
# library's reference, `window_attention_np`, does exactly that:

# %%
n, w = 6, 1
i, j = np.arange(n)[:, None], np.arange(n)[None, :]  # queries as a column, keys as a row
# BEGIN EXERCISE 2.1 shown: window = sliding_window_mask_np(n, w)
window = np.abs(i - j) <= w  # (N, N): query i sees key j
# END EXERCISE
print(window.astype(int), "\ncausal:\n", (window & (j <= i)).astype(int))
assert (window == sliding_window_mask_np(n, w)).all()
assert (window & (j <= i) == sliding_window_mask_np(n, w, causal=True)).all()

n_chk, w_chk = 37, 3
rng = np.random.default_rng(lesson.seed(0))
q, k, v = rng.standard_normal((3, 2, n_chk, 8))  # (B, N, d) each
# BEGIN EXERCISE 2.1 shown: window = sliding_window_mask_np(n_chk, w_chk)
window = np.abs(np.arange(n_chk)[:, None] - np.arange(n_chk)[None, :]) <= w_chk
# END EXERCISE
out, _ = attention_np(q, k, v, window)  # lesson 01's attention, the window as its mask
err = np.abs(out - window_attention_np(q, k, v, w_chk)).max()
print(f"attention_np with the window as its mask vs window_attention_np: max |diff| = {err:.1e}")
assert err == 0

# %% [markdown]
# The strided heads are Child et al.'s $A^{(1)}_i = \{t, t+1, \dots, i\}$ with
# $t = \max(0, i - l)$ and $A^{(2)}_i = \{j : (i - j) \bmod l = 0\}$; the fixed heads are
# $A^{(1)}_i = \{j : \lfloor j/l \rfloor = \lfloor i/l \rfloor\}$ and
# $A^{(2)}_i = \{j : j \bmod l \in \{l - c, \dots, l - 1\}\}$, with $c$ a constant
# hyper-parameter (they use $c$ of 8 to 32 for $l$ of 128 or 256; "Generating Long Sequences
# with Sparse Transformers", 2019, §4.3).
#
# ### The gallery
# Every pattern at $N = 128$ — long enough that the sparse ones look sparse. Read a row as one
# query: its dark cells are the tokens it sees. The Sparse Transformer's stride is
# $l = 11 \approx \sqrt{128}$.

# %%
N_GAL = 128
STRIDE_GAL = round(N_GAL ** 0.5)
gallery = {
    "sliding window, w=4": sliding_window_mask_np(N_GAL, 4),
    "causal window, w=4": sliding_window_mask_np(N_GAL, 4, causal=True),
    "dilated, w=4, δ=3": dilated_window_mask_np(N_GAL, 4, 3),
    "window w=4 ∪ global {0, 64}": union_np(sliding_window_mask_np(N_GAL, 4),
                                           global_mask_np(N_GAL, [0, 64])),
    "random, r=4 per query": random_mask_np(N_GAL, 4, seed=lesson.seed(0)),
    "BigBird, blocks of 4\n(window 1 + global 1 + random 1)": bigbird_mask_np(
        N_GAL, 4, seed=lesson.seed(0)),
    f"strided l={STRIDE_GAL}: local head": strided_masks_np(N_GAL, STRIDE_GAL)[0],
    f"strided l={STRIDE_GAL}: strided head": strided_masks_np(N_GAL, STRIDE_GAL)[1],
    "fixed l=16, c=4: both heads": union_np(*fixed_masks_np(N_GAL, 16, 4)),
}
plot_gallery(lesson, gallery, N_GAL)
show_table([{"pattern": title.splitlines()[0], "keys per query": f"{mask.sum() / N_GAL:.1f}"}
            for title, mask in gallery.items()], ["pattern", "keys per query"])

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
# same patterns at growing $N$, counted on the library's masks, with the exponent $a$ of
# keys per query $\propto N^a$ fitted on the counts. With $l = \sqrt N$ the strided pair gives
# query $i$ about $l + i/l$ keys, and the fixed pair about $l/2 + c\,i/l$ — both grow like
# $\sqrt N$ *when $c$ is a constant*. Tie $c$ to the block length instead ($c = l/4$) and the
# summary head alone gives the last query about $N/4$ keys: the last row of the table shows
# that pattern growing like $N$, no better than dense attention's growth.

# %%
sizes_keys = lesson.size(full=[256, 512, 1024, 2048, 4096], smoke=[256, 512, 1024])
C_FIXED = 4  # the fixed pattern's summary columns per block: a constant, as in Child et al.
keys, exponent = keys_per_query({
    "window w=16": lambda n: sliding_window_mask_np(n, 16),
    "BigBird, blocks of 16": lambda n: bigbird_mask_np(n, 16, seed=lesson.seed(0)),
    "strided, l = √N": lambda n: union_np(*strided_masks_np(n, round(n ** 0.5))),
    f"fixed, l = √N, c = {C_FIXED}": lambda n: union_np(*fixed_masks_np(n, round(n ** 0.5),
                                                                        C_FIXED)),
    "dense": lambda n: np.ones((n, n), dtype=bool),
    "fixed, l = √N, c = l/4": lambda n: union_np(*fixed_masks_np(n, round(n ** 0.5),
                                                                 round(n ** 0.5) // 4)),
}, sizes_keys)
show_table([{"pattern": name, **{f"N = {n}": f"{keys[name][n]:.1f}" for n in sizes_keys},
             "keys ∝ N^a": f"a = {exponent[name]:.2f}", "cost": f"N^{1 + exponent[name]:.2f}"}
            for name in keys], ["pattern"] + [f"N = {n}" for n in sizes_keys]
           + ["keys ∝ N^a", "cost"])
sqrt_units = {name: [keys[name][n] / n ** 0.5 for n in sizes_keys]
              for name in ("strided, l = √N", f"fixed, l = √N, c = {C_FIXED}")}
print("keys per query in units of √N: " + "; ".join(
    f"{name} " + ", ".join(f"{x:.2f}" for x in units) for name, units in sqrt_units.items()))
for name in ("window w=16", "BigBird, blocks of 16"):
    assert exponent[name] < 0.1, name  # a fixed number of keys: cost ∝ N
for name in sqrt_units:
    assert 0.45 < exponent[name] < 0.55, name  # √N keys: cost ∝ N√N
assert exponent["fixed, l = √N, c = l/4"] > 0.85 and abs(exponent["dense"] - 1) < 1e-9

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
# 01's **maximum path length** (Vaswani et al., Table 1). Three lines compute it for a small
# window, checked against the library's `hops_np`:

# %%
n, w = 10, 2
step = sliding_window_mask_np(n, w) | np.eye(n, dtype=bool)  # M ∨ I
reach, layers = np.eye(n, dtype=bool), 0
while not reach.all():
    reach, layers = (step.astype(int) @ reach.astype(int)) > 0, layers + 1  # R_L = (M ∨ I) R_{L-1}
print(f"window w={w}, N={n}: every token has heard from every other after {layers} layers "
      f"= ⌈(N - 1)/w⌉ = {-(-(n - 1) // w)}")
assert layers == hops_np(sliding_window_mask_np(n, w)).max() == -(-(n - 1) // w)

# %% [markdown]
# A dense mask reaches everything in one layer. A window of half-width $w$ moves information
# $w$ positions per layer, so crossing a sequence of length $N$ takes $\lceil (N-1)/w \rceil$
# layers. A single global token cuts that to 2 (any $j \to g \to i$). The Sparse Transformer's
# two heads are built for the same purpose: the first head carries $j$ to a cell the second
# head reads (the position within a stride after $j$ that lies a whole number of strides before
# $i$, or its block's summary cells), the second head carries it from there to any later $i$ —
# two hops for every pair at $O(N\sqrt N)$ cost (Child et al. 2019, §4.2: $p$ factorised heads
# connect every input position to every later output position within $p$ steps).
#
# The table counts the diameters with `diameter_fast_np`, a breadth-first search from every
# token (`minattn/fast/sparse.py`; the tests check it equals `hops_np`'s count), because at
# $N = 1024$ a window needs hundreds of layers of $N^3$ matrix products. The causal patterns
# (strided, fixed) count the pairs $j \le i$ only: the future is never heard.

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
        f"fixed, l = √N, c = {C_FIXED}": union_np(*fixed_masks_np(n, stride, C_FIXED)),
    }


diameters = {}
for n in sizes_table:
    for name, mask in graph_patterns(n, seed=lesson.seed(n)).items():
        diameters.setdefault(name, []).append(diameter_fast_np(mask))
print(f"layers until every token has heard from every token it can (w = {W_GRAPH}):")
show_table([{"pattern": name, **{f"N = {n}": f"{d:.0f}" for n, d in zip(sizes_table, ds)}}
            for name, ds in diameters.items()], ["pattern"] + [f"N = {n}" for n in sizes_table])
assert diameters[f"window w={W_GRAPH}"] == [float(-(-(n - 1) // W_GRAPH)) for n in sizes_table]
for name in ("window + 1 global", "strided, l = √N", f"fixed, l = √N, c = {C_FIXED}"):
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
# Strogatz): in a random graph the diameter grows like $\log N$, not like $N$. Over seven sizes,
# a line in $\log N$ should fit the measured diameters better than a line in $\sqrt N$ or in
# $N$. The claim fits all three to a window of $w = 2$ plus 2 random keys per query, one line
# per random draw, and compares their residuals draw by draw:

# %%
sizes_world = lesson.size(full=[16, 32, 64, 128, 256, 512, 1024], smoke=[16, 32, 64, 128])
world_seeds = lesson.seeds(lesson.size(full=12, smoke=3))
world = np.array([[diameter_fast_np(sliding_window_mask_np(n, W_GRAPH)
                                    | random_mask_np(n, R_GRAPH, seed=1000 * s + n))
                   for n in sizes_world] for s in world_seeds])  # world[draw, size]
laws = {"ln N": np.log, "√N": np.sqrt, "N": lambda x: x}
x_of = {law: g(np.array(sizes_world, float)) for law, g in laws.items()}
rss = {law: [float(((d - np.polyval(np.polyfit(x, d, 1), x)) ** 2).sum()) for d in world]
       for law, x in x_of.items()}  # residuals of each draw's best line in each law
fits = {law: np.polyfit(x, world.mean(0), 1) for law, x in x_of.items()}
columns = [f"N={n}" for n in sizes_world]
show_table([{"random draw": s, **{c: f"{d:.0f}" for c, d in zip(columns, ds)}}
            for s, ds in zip(world_seeds, world)], ["random draw"] + columns)
print("a line fitted to the mean diameter: " + "; ".join(
    f"{fits[law][1]:.2f} + {fits[law][0]:.3g}·{law}" for law in laws)
      + f" (the line in ln N rises {fits['ln N'][0] * np.log(2):.2f} layers per doubling of N)")
small_world = all_of({f"a line in ln N fits better than one in {law}": versus(
    np.subtract(rss[law], rss["ln N"]), 0.0, ">") for law in ("√N", "N")})
lesson.claim("random edges make paths short: the diameter grows like log N", test=small_world,
             paper="random graphs have logarithmic shortest paths (Zaheer et al. 2020, §2)",
             reproduced="A window with random edges has a diameter that grows like log N.",
             contradicted="The diameter with random edges grows faster than log N.")

# %%
n_layers, max_layers = lesson.size(full=256, smoke=64), 12
reach = {}  # the non-causal patterns: after L layers, which pairs are connected?
for name, mask in list(graph_patterns(n_layers, seed=lesson.seed(n_layers)).items())[:5]:
    hops = hops_np(mask, max_hops=max_layers)
    reach[name] = [((hops >= 0) & (hops <= layer)).mean() for layer in range(1, max_layers + 1)]
show_table([{"pattern": name, "after 2 layers": f"{fr[1]:.3f}", "after 3 layers": f"{fr[2]:.3f}"}
            for name, fr in reach.items()], ["pattern", "after 2 layers", "after 3 layers"])
plot_graph(lesson, sizes_world, world, fits, laws, reach, n_layers)

# %% [markdown]
# On the left the measured diameters climb by less than one layer per doubling of $N$: on a
# logarithmic $N$ axis that is a straight line, which is what the best line in $\ln N$ draws,
# while the best lines in $\sqrt N$ and in $N$ bend away from the points at both ends. The right
# panel, and the table above it, give the share of pairs connected after 2 and 3 layers: a
# window-only model has connected only a small fraction of them, one global token all of them.
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
# to position 0 in $L$ hops — and the answer needs tokens from both halves. A model that hears
# only one half can do no better than always answering the held-out set's more frequent label:
# that *majority-class line*, not one half, is chance here.
#
# **Models.** The same 2-layer encoder (`SparseClassifier`: $d = 32$, 2 heads, learned
# positions, MLP, pre-norm; its attention layers are lesson 01's `MultiHeadAttention` with
# `attend=` a sparse kernel), three patterns with about the same number of keys per query:
# a window $w = 16$ (33 keys); a window $w = 15$ plus global token 0 (32 keys for an ordinary
# query); BigBird blocks of 8 — a window of one block on each side and one random block, no
# global block (at most 32 keys). As in BigBird's code, where the random blocks are drawn once
# per head (`bigbird_block_rand_mask`, one call per head) and every layer has its own seed,
# each head of each layer gets its own random blocks, drawn from the run's seed.

# %%
show(two_halves)
show(SparseClassifier)

# %%
N_SEQ = lesson.size(full=512, smoke=96)
STEPS = lesson.size(full=120, smoke=4)
LONGER = 2  # BigBird (no global token) also trains LONGER times as many steps
BATCH = lesson.size(full=16, smoke=8)
SEEDS = lesson.seeds(lesson.size(full=8, smoke=4, paper=16))  # per arm: global and BigBird
WINDOW_SEEDS = SEEDS[:lesson.size(full=4, smoke=2, paper=8)]  # the control
VOCAB, D_MODEL, HEADS, LAYERS, BB_BLOCK = 3, 32, 2, 2, 8  # tokens: CLS = 0, A = 1, B = 2
REACHED = 0.99  # a run "learned the task" when its held-out accuracy reaches this
CURVE_SIZE = lesson.size(full=256, smoke=32)  # held-out sequences read along the way (curves)
TASK = f"a synthetic task only long paths solve; 2-layer d=32 models; BigBird {LONGER}× the steps"

example, label = two_halves(4, 16, torch.Generator().manual_seed(lesson.seed(0)))
for tokens, y in zip(example, label):
    print("".join("CAB"[t] for t in tokens.tolist()), "label", y.item())
held_out = two_halves(lesson.size(full=1024, smoke=64), N_SEQ,
                      torch.Generator().manual_seed(lesson.seed(10_000)), lesson.device)
share = held_out[1].float().mean().item()
majority = max(share, 1 - share)
print(f"held-out set: {len(held_out[1])} sequences, {share:.1%} with label 1: "
      f"the majority-class line is {majority:.3f}; a run reaches {REACHED} with at most "
      f"{int((1 - REACHED) * len(held_out[1]) + 1e-9)} of them wrong")


def bigbird_layouts(seed):
    """(LAYERS, HEADS, nb, nb): every head of every layer its own random blocks."""
    return bigbird_layouts_np(-(-N_SEQ // BB_BLOCK), LAYERS, HEADS, window=1, n_global=0,
                              n_random=1, seed=seed)


layer_masks = {"window w=16": [sliding_window_mask_np(N_SEQ, 16)] * LAYERS,
               "window w=15 + global": [sliding_window_mask_np(N_SEQ, 15)
                                        | global_mask_np(N_SEQ, [CLS])] * LAYERS}
layer_masks.update({f"BigBird, run seed {s}": [union_np(*(block_mask_np(lay, BB_BLOCK, N_SEQ)
                                                          for lay in heads))
                                               for heads in bigbird_layouts(s)] for s in SEEDS})
heard = {name: heard_by_position_0(*masks) for name, masks in layer_masks.items()}
print(f"what position 0 hears within {LAYERS} layers (N = {N_SEQ}):")
show_table([{"pattern": name, "first half": a, "second half": b}
            for name, (a, b) in heard.items()], ["pattern", "first half", "second half"])
assert heard["window w=16"][1] == 0 and heard["window w=15 + global"][1] == N_SEQ // 2

# %% [markdown]
# Within two layers, position 0 of the window model hears the tokens up to position
# $2 \times 16$ and nothing of the second half (asserted above): the answer is out of its reach,
# however long it trains — it is this section's control. The global token gives position 0
# every token in one hop. BigBird's random blocks give it some tokens of *both* halves; how many
# depends on the draw, which is why each run is listed. (A layout shared by all heads and layers
# can leave position 0 deaf to a half: exercise 2.4 counts how often.)
#
# Each model trains with AdamW for the same number of steps on fresh batches; BigBird, whose
# paths run through scattered blocks, also gets `LONGER` times as many. Every run is evaluated
# after `STEPS` steps and at the end of its budget, on a held-out set of 1,024 sequences fixed
# before the run (printed above with the number of wrong answers a run may have and still reach
# the 0.99 line): on a set of 256, 0.99 would allow 2 wrong, and one or two sequences would
# decide which runs count. Held-out sequences cost evaluation only, no training. The first seed
# is also evaluated along the way, for the curves, on the first `CURVE_SIZE` of them. One run:

# %%
show(train_two_halves)

# %%
# The kernels, chosen by name: on a CPU the O(N·w) kernels of minattn/fast/sparse.py, on a GPU
# fused SDPA or FlexAttention (minattn/fast/flex.py) — the same numbers either way.
kernel, block_kernel = window_attention_routed_fast_torch, block_sparse_attention_routed_fast_torch


def run(pattern, seed, steps):
    if pattern.startswith("BigBird"):
        attend = [block_sparse_attend(lay, BB_BLOCK, kernel=block_kernel)
                  for lay in bigbird_layouts(seed)]
    else:
        attend = window_attend(16, kernel=kernel) if pattern == "window w=16" else \
            window_attend(15, global_idx=[CLS], kernel=kernel)
    curve = range(0, steps + 1, max(steps // 8, 2)) if seed == SEEDS[0] else ()
    return train_two_halves(attend, seed, steps, held_out, n=N_SEQ, batch=BATCH,
                            d_model=D_MODEL, heads=HEADS, layers=LAYERS, device=lesson.device,
                            eval_at={STEPS}, curve=curve, curve_size=CURVE_SIZE,
                            desc=f"{pattern}, seed {seed}")


arms = {"window w=16": (WINDOW_SEEDS, STEPS), "window w=15 + global": (SEEDS, STEPS),
        "BigBird window + random": (SEEDS, STEPS * LONGER)}
histories = {name: [run(name, s, steps) for s in seeds] for name, (seeds, steps) in arms.items()}
acc = {(name, step): [accuracy_at(h, step) for h in histories[name]]
       for name, (_, steps) in arms.items() for step in sorted({STEPS, steps})}
show_table([{"pattern": name, "step": step, **{f"seed {s}": f"{a:.3f}" for s, a in
                                                zip(SEEDS, accs)}, "mean": f"{np.mean(accs):.3f}"}
            for (name, step), accs in acc.items()], ["pattern", "step"]
           + [f"seed {s}" for s in SEEDS] + ["mean"])

# %% [markdown]
# **The control.** The window model cannot hear the second half, so whatever it learned, it can
# only guess at the label: its accuracy stays around the majority-class line, which the next cell
# prints beside it. It is the floor the other two are measured against, not a claim: the graph
# already decided it.

# %%
window_acc, global_acc = acc["window w=16", STEPS], acc["window w=15 + global", STEPS]
bigbird_acc = acc["BigBird window + random", STEPS * LONGER]
print(f"control, window w=16 (hears 0 of the second half): accuracy {np.mean(window_acc):.3f} "
      f"(runs from {min(window_acc):.3f} to {max(window_acc):.3f}), majority-class line "
      f"{majority:.3f}")
print("BigBird runs, second-half tokens position 0 hears -> accuracy after "
      f"{STEPS * LONGER} steps: " + ", ".join(
          f"seed {s}: {heard[f'BigBird, run seed {s}'][1]} -> {a:.3f}"
          for s, a in zip(SEEDS, bigbird_acc)))
k_global, k_bigbird = sum(a >= REACHED for a in global_acc), sum(a >= REACHED for a in bigbird_acc)
print(f"runs that reached {REACHED}: global token {k_global} of {len(SEEDS)} after {STEPS} steps; "
      f"BigBird {k_bigbird} of {len(SEEDS)} after {STEPS * LONGER} steps")
plot_training(lesson, {name: hs[0] for name, hs in histories.items()}, majority, N_SEQ,
              smooth=lesson.size(full=20, smoke=4), curve_size=CURVE_SIZE)

# %% [markdown]
# **The papers' claims.** Longformer's ablation on WikiHop (Beltagy et al. 2020, Table 11,
# development-set accuracy) isolates global attention in its rows without the extra
# projections; BigBird (Zaheer et al. 2020, §2) argues that random edges make every pair a
# few hops apart — and reports that window and random blocks *alone* fell short, which is why
# BigBird keeps global tokens. Our three tests: the global token against the window (Welch
# over runs), BigBird with twice the steps against the window, and the share of runs that
# reached the 0.99 line — global token against BigBird, Fisher's exact test on the counts.

# %%
show_table([{"Longformer variant (WikiHop dev, Table 11)": name, "accuracy": f"{a:.1f}"}
            for name, a in [("seqlen 4,096 (the full model)", 73.8),
                            ("seqlen 512, window attention only", 68.8),
                            ("no linear projections for global attention", 72.2),
                            ("no linear projections, no global attention", 65.5)]],
           ["Longformer variant (WikiHop dev, Table 11)", "accuracy"])
lesson.claim("global attention matters for long inputs", test=compare(global_acc, window_acc),
             paper="WikiHop dev 72.2 with global attention, 65.5 without (Longformer, Table 11)",
             reproduced="One global token turns a model that cannot do the task into one that can.",
             contradicted="The window alone does better than with a global token.", why=TASK)
lesson.claim("random blocks carry the far half: BigBird beats the window", why=TASK,
             test=compare(bigbird_acc, window_acc), paper="random edges make every pair a few "
             "hops apart (Zaheer et al. 2020, §2)", reproduced="With no global token, window + "
             "random blocks learn what the window alone cannot: they carry the far half.",
             contradicted="BigBird without a global token does worse than the window alone.")
lesson.claim("without global tokens, window + random blocks fall short", why=TASK,
             test=rates(k_global, len(SEEDS), k_bigbird, len(SEEDS)), paper="window + random "
             "alone fell short, so BigBird adds global tokens (Zaheer et al. 2020, §2)",
             reproduced=f"With {LONGER}× the steps, fewer BigBird runs reach {REACHED} than global-"
                        "token runs: random paths exist, but a run must learn to use them, and "
                        "a draw that reaches few far tokens caps what it can reach (the line "
                        "under the control).",
             contradicted=f"More BigBird runs reach {REACHED} than global-token runs do.")

# %% [markdown]
# **What holds on every run** is the graph: the window model never has the second half within reach,
# so it can do no better than the majority label; the global token hands position 0 every token in
# one hop; BigBird's random blocks make the paths exist, but the model must learn to route the
# evidence through two hops of scattered blocks, and how much of the far half those blocks reach
# differs from draw to draw (the line under the control puts each run's count beside its accuracy).
# That is the small-world argument at work — and its limit: random edges make paths short, about log
# N hops (the diameter of section 2), a global token makes every path two hops, one from the
# position that answers. Ours is a synthetic task built so that only long paths solve it, on a
# 2-layer model: the gap is all-or-nothing here, 72.2 vs 65.5 on WikiHop (the table above).
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
n_pic, w_pic, c_pic = 32, 3, 8
plot_blocked_window(lesson, band_mask_torch(c_pic, w_pic, w_pic).numpy(), n_pic, w_pic, c_pic)
show(blocked_window_attention_torch)

# %% [markdown]
# That function is exercise 2.2 (in `minattn/fast/sparse.py`). The outlined spans run past both
# ends of the sequence for the first and last blocks: there the blocked kernel sees zero keys,
# which the library's entry point corrects (section 7).
# `window_attention_fast_torch(q, k, v, w, dilation=, causal=, global_idx=)` is that entry
# point: the blocked kernel plus exact end blocks, dilation and global tokens; BigBird and the
# fixed pattern, defined on blocks, run on `block_sparse_attention_fast_torch`, which computes
# only the non-zero $b \times b$ tiles. The caller picks a kernel by name: the models above
# were built with `window_attend(16, kernel=window_attention_routed_fast_torch)`, which runs
# exactly this kernel on a CPU and hands the pattern to fused SDPA or FlexAttention on a GPU
# (`minattn/fast/flex.py`). Every fast kernel must compute *exactly* what the reference of
# `minattn/sparse.py` computes with the mask — outputs and gradients, in float64
# (`tests/test_sparse.py` checks many sizes). The same check, small:

# %%
gen = torch.Generator().manual_seed(lesson.seed(0))
q, k, v = (torch.randn(2, 3, n_chk, 8, dtype=torch.float64, generator=gen).requires_grad_()
           for _ in range(3))
layout = bigbird_layout_np(10, seed=lesson.seed(1))
checks = {  # name: (fast kernel, the reference it must equal)
    "window (hand-written backward)": (lambda *x: window_attention_fast_torch(*x, 3, block=8),
                                       lambda *x: window_attention_torch(*x, 3)),
    "dilated δ=2, causal": (
        lambda *x: window_attention_fast_torch(*x, 3, dilation=2, causal=True, block=8),
        lambda *x: window_attention_torch(*x, 3, dilation=2, causal=True)),
    "window + global {0, 20}": (
        lambda *x: window_attention_fast_torch(*x, 3, global_idx=[0, 20], block=8),
        lambda *x: window_attention_torch(*x, 3, global_idx=[0, 20])),
    "block-sparse BigBird": (lambda *x: block_sparse_attention_fast_torch(*x, layout, 4),
                             lambda *x: block_sparse_attention_torch(*x, layout, 4)),
}
rows = []
for name, (fast, reference) in checks.items():
    out, ref = fast(q, k, v), reference(q, k, v)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    ref_grads = torch.autograd.grad(ref.sum(), (q, k, v))
    out_err = (out - ref).abs().max().item()
    grad_err = max((g - r).abs().max().item() for g, r in zip(grads, ref_grads))
    rows.append({"kernel": name, "max |out - reference|": f"{out_err:.1e}",
                 "max |grad - reference grad|": f"{grad_err:.1e}"})
    assert out_err < 1e-12 and grad_err < 1e-12, name
show_table(rows, ["kernel", "max |out - reference|", "max |grad - reference grad|"])

# %% [markdown]
# ## 5. Cost: linear vs quadratic
#
# A small live measurement on the lesson's device: dense SDPA fed the window as an $N \times N$
# mask against the window kernel, forward only, $B=1$, $H=4$, $d=64$, $w=32$, float32, 5 calls
# each, side by side; the window kernel alone also runs at three longer lengths. On a CPU it
# counts the one thread's CPU time (robust when the machine is shared); on a GPU the wall clock
# between two synchronisations, at four times longer sequences (a GPU that is not yet busy runs
# every small size in about the same time). The growth exponent $b$ in time $\propto N^b$ is
# fitted for every repeat, so that the claim can weigh the noise — for the window kernel over
# its five largest sizes: at a few thousand tokens its fixed costs (Python, the exact end
# blocks) are still a large share of its time, and they flatten the growth. The claim needs
# dense attention to show its own $N^2$ first (a gate, fixed before the run and printed with
# the exponents): on a device that is not busy, no growth means anything.

# %%
scale = 4 if lesson.device.type == "cuda" else 1  # a GPU needs longer sequences to be busy
sizes_dense = [scale * n for n in lesson.size(full=[1024, 2048, 4096, 8192], smoke=[256, 512])]
sizes_window = sizes_dense + [scale * n for n in lesson.size(full=[16384, 32768, 65536],
                                                             smoke=[1024])]
W_COST, REPEATS, DENSE_AT_LEAST = 32, 5, 1.5  # the gate: dense time must grow as N^1.5 or more
cost = {"dense masked SDPA": {}, "window kernel": {}}  # [name][N]: seconds, one per repeat
for n in sizes_window:
    gen = torch.Generator().manual_seed(lesson.seed(n))
    qc, kc, vc = (torch.randn(1, 4, n, 64, generator=gen).to(lesson.device) for _ in range(3))
    fns = {"window kernel": lambda: window_attention_fast_torch(qc, kc, vc, W_COST)}
    if n in sizes_dense:  # beyond them dense attention's N² time and mask are not worth paying
        dense_mask = torch.from_numpy(sliding_window_mask_np(n, W_COST)).to(lesson.device)
        fns["dense masked SDPA"] = lambda: torch.nn.functional.scaled_dot_product_attention(
            qc, kc, vc, attn_mask=dense_mask)
        with torch.no_grad():  # the same numbers, in float32
            torch.testing.assert_close(fns["window kernel"](), fns["dense masked SDPA"](),
                                       rtol=1e-4, atol=1e-4)
    for name, times in time_forward(fns, REPEATS, lesson.device).items():
        cost[name][n] = times
show_table([{"N": n, **{name: f"{min(times[n]) * 1e3:.2f} ms" if n in times else "—"
                        for name, times in cost.items()}} for n in sizes_window],
           ["N", *cost])
fitted = {"dense masked SDPA": sizes_dense, "window kernel": sizes_window[-5:]}
exponents = {name: growth_exponents({n: cost[name][n] for n in ns}) for name, ns in fitted.items()}
print("time ∝ N^b, b fitted per repeat: " + "; ".join(
    f"{name} (N = {fitted[name][0]}..{fitted[name][-1]}) " + ", ".join(f"{b:.2f}" for b in bs)
    for name, bs in exponents.items()))
dense_b = float(np.mean(exponents["dense masked SDPA"]))
print(f"the gate: dense attention's mean exponent {dense_b:.2f} >= {DENSE_AT_LEAST}? "
      f"{dense_b >= DENSE_AT_LEAST}")
busy = Gate(dense_b >= DENSE_AT_LEAST, "budget", f"dense attention's time grew as "
            f"N^{dense_b:.2f}, below N^{DENSE_AT_LEAST}: too small for this device")
linear = within(exponents["window kernel"], 0.75, 1.25, gates=[busy])  # time ∝ N^b, b ≈ 1
lesson.claim("sliding-window attention scales linearly with N", paper="memory and time linear "
             "in sequence length (Beltagy et al. 2020, Longformer, §3 and Figure 1)", test=linear,
             reproduced="The window kernel's time grows about in proportion to N (its fitted "
                        "exponent within 0.75 to 1.25); the claim measures time, not memory.",
             contradicted="The window kernel's time does not grow in proportion to N here.")
plot_cost(lesson, cost, sizes_window, W_COST)

# %% [markdown]
# **Takeaway.** Once the sequence is long enough to keep the device busy, dense attention's
# time grows with $N^2$ — about ×4 per doubling of $N$ — however few keys the mask allows; the
# window kernel's grows with $N$, so the gap widens with every doubling. The full tables —
# forward and backward, peak memory, compiled FlexAttention, the block-sparse kernel, $N$ up to
# 65,536 — are measured by `benchmarks/sparse.py` (on a CPU, or a GPU with `--device cuda`) and
# kept in [benchmarks/README.md](../benchmarks/README.md).
#
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
# overwrite slot $i \bmod W$ (the authors report 8× less cache memory on 32k-token sequences at
# no loss of quality, which we do not measure). That the keys end up in the cache out of order
# does not matter: lesson 01 showed attention is invariant to the order of its keys. That the
# cache computes exactly the causal window is a fact about the algorithm, checked here with a
# cache of $w + 1$ slots for our causal window of half-width $w$:

# %%
w_roll, n_roll, d_roll = 4, 13, 8
gen = torch.Generator().manual_seed(lesson.seed(0))
q_r, k_r, v_r = (torch.randn(n_roll, d_roll, generator=gen, dtype=torch.float64) for _ in range(3))
slots = w_roll + 1
cache_k, cache_v = (torch.zeros(slots, d_roll, dtype=torch.float64) for _ in range(2))
filled = torch.zeros(slots, dtype=torch.bool)
generated = []
for t in range(n_roll):  # one token at a time, as a language model generates
    slot = t % slots  # the oldest key leaves, the newest takes its slot
    cache_k[slot], cache_v[slot], filled[slot] = k_r[t], v_r[t], True
    generated.append(attention_torch(q_r[t:t + 1], cache_k, cache_v, filled[None])[0])
reference = window_attention_torch(q_r, k_r, v_r, w_roll, causal=True)
roll_err = (torch.cat(generated) - reference).abs().max().item()
print(f"rolling cache of {slots} slots, {n_roll} generated tokens: max |cached - causal window| "
      f"= {roll_err:.1e}; the cache holds {slots} keys instead of {n_roll}")
assert roll_err < 1e-12

# %% [markdown]
# **Gemma 2: local and global layers, alternating** (Gemma Team 2024, "Gemma 2: Improving Open
# Language Models at a Practical Size", §2). Every other layer is a sliding window of 4096 tokens;
# the layers between attend globally over the whole 8192-token context. Half the layers pay the
# window's price (and keep a window-sized cache), the other half keep the one-hop path between
# any two tokens — lesson 01's trade between cost and maximum path length, made layer by layer
# instead of inside one mask. A stack of windows alone would need $N/W$ layers to connect the
# two ends; one global layer connects them at once.
#
# **BigBird** (Zaheer et al. 2020) combines all three ideas in one mask — window, global and
# random blocks — and proves that this sparse attention keeps what full attention can express
# (a universal approximator of sequence functions, Turing complete, §3) *because* of the global
# tokens: the random edges shorten paths, the global ones guarantee them.
#
# ## 7. Inside the kernels
#
# The blocked kernel of section 4 is the idea. The entry point `window_attention_fast_torch`
# wraps it in four pieces you can read now, one at a time (all in `minattn/fast/sparse.py`).
#
# **Exact end blocks.** The band is wrong only where a span runs past an end of the sequence,
# where the blocked kernel saw zero keys. `window_forward_torch` recomputes those few blocks —
# about $(w_\ell + w_r)/c + 2$ of them — with their exact masks and swaps them in: in place
# when nothing needs the blocked kernel's output for a backward pass, as a copy when autograd
# does. `sliding_window_attention_fast_torch`, the core, flattens the batch and head axes into
# one (SDPA's fast CPU kernel wants 4-d blocks) and chooses the backward.

# %%
show(window_forward_torch)
show(sliding_window_attention_fast_torch)

# %% [markdown]
# **Dilation** $\delta$ is a change of viewpoint: token $i = r + \delta p$ sees only its own
# residue class $r = i \bmod \delta$, where the dilated window is a plain window over every
# $\delta$-th token — so the dilated kernel is the core run on the $\delta$ classes as a batch.

# %%
show(dilated_window_attention_fast_torch)

# %% [markdown]
# **Global tokens** ride along as $|G|$ extra keys of every block, with an exact per-block mask
# (a global key already inside a query's window is seen once); then the $|G|$ global rows attend
# to all $N$ keys ($|G| \cdot N$ work) and replace their rows. Its backward is autograd's.

# %%
show(global_window_attention_fast_torch)

# %% [markdown]
# **Block-sparse.** BigBird and the fixed pattern are defined on blocks; a layout (`nb × nb`
# booleans) says which $b \times b$ tiles are non-zero. The kernel gathers just those $P$ tiles,
# computes their scores, and normalises each query row across its tiles with a scatter-max and
# a scatter-sum: work and memory $\propto P b^2$.

# %%
show(block_sparse_attention_fast_torch)

# %% [markdown]
# **A hand-written backward.** Autograd through the blocked kernel is correct but keeps every
# block's attention for the backward pass. When the core trains it goes through
# `WindowAttentionFunction` instead: lesson 01's backward formulas applied a few blocks at a
# time, recomputing their scores instead of storing them — the same trade FlashAttention makes
# (lesson 01's section on the backward pass). The tests check it against autograd and against
# finite differences.

# %%
show(window_attention_backward_torch)

# %% [markdown]
# ## Summary
#
# What this run found, claim by claim (each claim's row above says what its numbers showed):

# %%
lesson.summary()

# %% [markdown]
# And what the lesson showed along the way:
#
# * A sparse pattern is a boolean mask: window, dilated window, global tokens, random keys,
#   BigBird blocks, the Sparse Transformer's strided and fixed heads; attention with a pattern
#   is lesson 01's attention with that mask.
# * Windows, global tokens and BigBird's blocks give each query a fixed number of keys: cost
#   $\propto N$. The Sparse Transformer's heads with $l \approx \sqrt N$ (and, for the fixed
#   pattern, a constant number $c$ of summary cells) give $O(\sqrt N)$ keys per query: cost
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
#   equals the reference with the mask (outputs and gradients, float64).
# * Today: Longformer puts global attention on the tokens its task names, Mistral runs a
#   window with a rolling cache of $W$ slots, Gemma 2 alternates window and global layers.
#
# ## Exercises
# Build a student copy (`make student`, or `python -m minattn.course.classroom student DIR`),
# implement the marked regions, and check them with `make exercises` (or
# `python -m pytest --exercises 2.1` in the copy).
#
# * **2.1** (implement, `minattn/sparse.py`, ~10 min) `sliding_window_mask_np` and its
#   dilated twin `dilated_window_mask_np`: the $N \times N$ boolean masks $|i - j| \le w$ and
#   $|i - j| \le w\delta,\ \delta \mid i - j$, intersected with $j \le i$ when `causal`.
# * **2.2** (implement, `minattn/fast/sparse.py`, ~20 min) `blocked_window_attention_torch`,
#   the blocked forward of section 4: pad the queries to whole blocks of $c$, give each block
#   its span of $c + w_\ell + w_r$ keys and values with `unfold_blocks_torch`, and run one
#   `F.scaled_dot_product_attention` call with `band_mask_torch`. The tests compare the window
#   kernels built on it with the reference for many $N$, $w$, $\delta$ and block sizes.
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
#    unbounded $w$. What does `window_attention_fast_torch` cost for it when $l = \sqrt N$?
# 4. Mistral's rolling cache holds $W$ keys per layer. How large is the cache of a 32-layer
#    model with $W = 4096$, 8 key-value heads of size 128 in 16-bit floats — and how large
#    without the window, at 32k tokens?
