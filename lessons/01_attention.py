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
# # Lesson 01 — Scaled dot-product attention and multi-head attention
#
# Attention is a *soft dictionary lookup*. Each query asks "which of these keys look like me?",
# turns the answers into weights that sum to one, and returns the weighted average of the values
# stored under those keys. Every mechanism in this course — sparse windows, multi-scale heads,
# Transformer-XL's memory, the LSTM decoder's attention — is this one operation with a different
# choice of *who may look at whom*.
#
# In this lesson you will:
# 1. compute attention by hand on three tokens and check it against the library;
# 2. see why the scores are divided by $\sqrt{d}$ — row by row, not only on average;
# 3. meet the older *additive* score (Bahdanau) beside the dot product;
# 4. derive the backward pass, and the one-line identity that lets FlashAttention skip storing
#    the weights;
# 5. meet the PyTorch version, multi-head attention, and PyTorch's own modules;
# 6. see what attention cannot know on its own — the order of its inputs — and give it
#    positions: a task that fails without them and is solved with them;
# 7. train a model on **associative recall**, a task that needs content-based lookup, and
#    watch each query find its key while a model that only averages the pairs stays at the
#    level of guessing;
# 8. measure what attention costs as sequences grow, and which of PyTorch's kernels stores what;
# 9. compare attention with recurrence and convolution the way the Transformer paper did, and
#    meet the quantity lesson 02 is built on: the maximum path length.
#
# Every function is written twice: a NumPy reference (`*_np`) that states the math, and a
# PyTorch twin (`*_torch`, or an `nn.Module`) that runs on a GPU. Every paper claim the lesson
# tests is printed with the paper's number beside ours and a verdict computed from the numbers
# (`minattn/tools/verdict.py` states the rule).

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from minattn.attention import (
    MultiHeadAttention,
    additive_scores_np,
    additive_scores_torch,
    attention_backward_np,
    attention_fast_torch,
    attention_np,
    attention_torch,
    causal_mask_np,
    causal_mask_torch,
    multi_head_attention_np,
    softmax_np,
)
from minattn.plots import heatmap, plot_curves
from minattn.tools.lesson import Lesson, show
from minattn.tools.utils import set_seed
from minattn.tools.verdict import combine, compare, same, versus

lesson = Lesson("01_attention")  # on a CPU: one torch thread (see Lesson)

# %% [markdown]
# ## 1. From dot products to weights
#
# Queries $Q \in \mathbb{R}^{L_q \times d}$, keys $K \in \mathbb{R}^{L_k \times d}$, values
# $V \in \mathbb{R}^{L_k \times d_v}$:
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d}}\right)V,
# \qquad \mathrm{softmax}(s)_j = \frac{e^{s_j}}{\sum_{j'} e^{s_{j'}}}.$$
#
# Row $i$ of $S = QK^\top/\sqrt d$ scores query $i$ against every key; the softmax turns the row
# into weights $P_{ij} \ge 0$ with $\sum_j P_{ij} = 1$; the output row $i$ is $\sum_j P_{ij} V_j$.
#
# The softmax must never overflow: $e^{1000}$ is `inf` in float64. Subtracting the row maximum
# $m$ first changes nothing mathematically ($e^{s_j - m}/\sum e^{s_{j'} - m}$ — the $e^{-m}$
# cancels) and keeps every exponent $\le 0$. A **mask** (True = may attend) sets forbidden scores to
# $-\infty$, whose exponential is exactly 0; a row with *no* allowed key returns zeros rather than
# $0/0 = $ NaN.

# %%
show(softmax_np)
show(attention_np)

# %% [markdown]
# **A three-token example you can check by hand.** Take $d = 2$ and three tokens whose query
# and key vectors are equal. "the" and "cat" point in different directions; "sat" $= (1, 1)$
# overlaps with both:
#
# | token | $q = k$ | $v$ |
# |---|---|---|
# | the | (1, 0) | (1, 0, 0) |
# | cat | (0, 1) | (0, 1, 0) |
# | sat | (1, 1) | (0, 0, 1) |
#
# Query "the" scores the keys $(1, 0, 1)/\sqrt 2 = (0.707, 0, 0.707)$: it matches itself and
# "sat" equally well and "cat" not at all. The softmax exponentiates and normalises —
# $e^{0.707} : e^0 : e^{0.707} = 2.03 : 1 : 2.03$ — so "the" splits its weight evenly between
# itself and "sat" and still gives "cat" about half as much as either: a softmax never gives
# exactly zero. Since the values are one-hot, the output row *is* the weight row. Query "sat"
# scores $(1, 1, 2)/\sqrt 2$ and puts the most weight on itself.

# %%
tokens = ["the", "cat", "sat"]
q = k = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
v = np.eye(3)
out, weights = attention_np(q, k, v)
by_hand = np.array([np.exp(0.5 ** 0.5), 1.0, np.exp(0.5 ** 0.5)])
by_hand /= by_hand.sum()
print("scores of 'the':", (q[0] @ k.T / np.sqrt(2)).round(3),
      " e^score:", np.exp(q[0] @ k.T / np.sqrt(2)).round(2))
print("weights of 'the':", weights[0].round(3), " by hand:", by_hand.round(3))
print("weights of 'sat':", weights[2].round(3))
assert np.allclose(weights[0], by_hand) and np.allclose(out, weights)

fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), layout="constrained")
heatmap(axes[0], weights, tokens, tokens, title="softmax(QKᵀ/√d)", annotate=True, vmax=1)
causal_weights = attention_np(q, k, v, mask=causal_mask_np(3))[1]
image = heatmap(axes[1], causal_weights, tokens, tokens, title="with a causal mask", annotate=True,
                vmax=1)
fig.colorbar(image, ax=axes, label="attention weight", shrink=0.9)
fig.suptitle("Who attends to whom: rows are queries, columns keys")
lesson.savefig(fig, "three_tokens")

# %% [markdown]
# On the right, a **causal mask** (query $i$ may see keys $j \le i$) — the mask of every language
# model. Masked weights are exactly zero and each row still sums to one.
#
# Two edge cases that break naive code: huge scores, and rows with nothing to attend to.

# %%
huge = softmax_np(np.array([1e4, 0.0, -1e4]))
empty_row = attention_np(q, k, v, mask=np.array([[False, False, False]] + [[True] * 3] * 2))[0][0]
print("softmax of (1e4, 0, -1e4):", huge, "— finite")
print("output of a query that may see no key:", empty_row, "— zeros, not NaN")

# %% [markdown]
# ## 2. Why divide by $\sqrt d$?
#
# If the entries of $q$ and $k$ are independent with mean 0 and variance 1, then
# $q \cdot k = \sum_{m=1}^{d} q_m k_m$ is a sum of $d$ terms of variance 1: its variance is $d$
# (Vaswani et al., "Attention Is All You Need", 2017, §3.2.1 and its footnote 4). Dividing by
# $\sqrt d$ brings the scores back to unit variance for every $d$. First the variance itself,
# measured on independent batches of random pairs (they play the part of seeds: their spread
# is the sampling error the verdict weighs):

# %%
rng = set_seed(0)
n_batches, batch_pairs = lesson.size(full=20, smoke=2), lesson.size(full=10_000, smoke=1_000)
variances = [(rng.standard_normal((batch_pairs, 64)) * rng.standard_normal((batch_pairs, 64)))
             .sum(-1).var() for _ in range(n_batches)]
print(f"d = 64: variance of q·k over {n_batches} batches of {batch_pairs:,} pairs: mean "
      f"{np.mean(variances):.2f}, from {min(variances):.1f} to {max(variances):.1f}; "
      f"of q·k/√d: {np.mean(variances) / 64:.3f}")
lesson.claim("q·k of independent unit-variance entries has variance d, hence the 1/√d",
             paper="variance d_k (Vaswani et al. 2017, §3.2.1, footnote 4)",
             ours=f"{np.mean(variances):.1f} at d = 64 "
                  f"({n_batches} batches of {batch_pairs:,} pairs)",
             why="sampling error only", verdict=same(variances, 64.0))

# %% [markdown]
# The paper's reason for the scaling: "for large values of $d_k$, the dot products grow large
# in magnitude, pushing the softmax function into regions where it has extremely small
# gradients". Two gradients matter. The softmax's own Jacobian,
# $J = \partial P / \partial S = \mathrm{diag}(P) - PP^\top$, says how much a change of the
# scores moves the weights; the gradient that reaches the query,
# $\partial P / \partial q = J K c$ (with $c = 1/\sqrt d$, or $c = 1$ without scaling), is what
# teaches $W_Q$ where to look. Its row $j$ is $c\,P_j (k_j - \bar k)$, $\bar k = \sum_j P_j k_j$.
#
# Averages would mislead here: a saturated softmax is *almost always* silent and *rarely*
# sensitive (when two keys nearly tie), so we look at every row — the median, the share of rows
# whose Jacobian is below $10^{-3}$, and the mean — for random queries, 64 keys each, the same
# queries and keys scaled and unscaled.

# %%
def softmax_rows(d, rng, n_queries=100, n_keys=64):
    """Random unit-variance queries q (n, d), each with its own keys k (n, n_keys, d). For the
    scaled (q·k/√d) and raw (q·k) scores, per query row: the largest weight, the Jacobian norm
    ‖∂P/∂S‖ and the norm of the gradient that reaches the query ‖∂P/∂q‖ (Frobenius norms)."""
    q = rng.standard_normal((n_queries, d))
    k = rng.standard_normal((n_queries, n_keys, d))
    rows = {}
    for scaled in (True, False):
        c = 1 / np.sqrt(d) if scaled else 1.0
        p = softmax_np(np.einsum("nd,nkd->nk", q, k) * c)  # (n, n_keys)
        # ‖diag(p) - p pᵀ‖_F² = Σ p² - 2 Σ p³ + (Σ p²)²  (rounding: ~1e-8, far below what we read)
        s2, s3 = (p ** 2).sum(-1), (p ** 3).sum(-1)
        jacobian = np.sqrt(np.clip(s2 - 2 * s3 + s2 ** 2, 0, None))
        k_bar = np.einsum("nk,nkd->nd", p, k)  # Σ_j p_j k_j
        # ‖k_j - k̄‖² = ‖k_j‖² - 2 k_j·k̄ + ‖k̄‖², without an (n, n_keys, d) temporary
        spread = (np.einsum("nkd,nkd->nk", k, k) - 2 * np.einsum("nkd,nd->nk", k, k_bar)
                  + (k_bar ** 2).sum(-1, keepdims=True))
        to_q = c * np.sqrt(np.clip(np.einsum("nk,nk->n", p ** 2, spread), 0, None))
        rows[scaled] = dict(max_weight=p.max(-1), jacobian=jacobian, to_q=to_q)
    return rows


from minattn.tools.tables import print_table

dims = [2, 8, 32, 128, 512, 2048]
n_seeds, per_seed = lesson.size(full=5, smoke=2), lesson.size(full=100, smoke=20)
by_seed = {d: [softmax_rows(d, rng, per_seed) for _ in range(n_seeds)] for d in dims}


def pooled(d, scaled, name):
    return np.concatenate([seed[scaled][name] for seed in by_seed[d]])


summary = {scaled: {"largest weight": [], "median ‖J‖": [], "share ‖J‖<1e-3": [],
                    "mean ‖J‖": [], "median ‖∂P/∂q‖": [], "mean ‖∂P/∂q‖": []}
           for scaled in (True, False)}
for d in dims:
    for scaled in (True, False):
        jac, to_q = pooled(d, scaled, "jacobian"), pooled(d, scaled, "to_q")
        for name, value in (("largest weight", pooled(d, scaled, "max_weight").mean()),
                            ("median ‖J‖", np.median(jac)), ("share ‖J‖<1e-3", (jac < 1e-3).mean()),
                            ("mean ‖J‖", jac.mean()), ("median ‖∂P/∂q‖", np.median(to_q)),
                            ("mean ‖∂P/∂q‖", to_q.mean())):
            summary[scaled][name].append(value)
print(f"{n_seeds * per_seed} queries per d, 64 keys each; /√d: scaled scores, raw: q·k")
print_table([{"d": d, **{f"{name} {kind}": f"{summary[scaled][name][i]:.3g}"
                         for name in summary[True]
                         for kind, scaled in (("/√d", True), ("raw", False))}}
             for i, d in enumerate(dims)],
            ["d"] + [f"{name} {kind}" for name in summary[True] for kind in ("/√d", "raw")])
top = dims[-1]
median_ratio = summary[True]["median ‖J‖"][-1] / summary[False]["median ‖J‖"][-1]
to_q_ratio = summary[True]["median ‖∂P/∂q‖"][-1] / summary[False]["median ‖∂P/∂q‖"][-1]
print(f"\nat d = {top}, without scaling: {summary[False]['share ‖J‖<1e-3'][-1]:.0%} of the rows "
      f"have ‖J‖ < 1e-3 (scaled: {summary[True]['share ‖J‖<1e-3'][-1]:.0%}); the median row's "
      f"Jacobian is {median_ratio:.1e}× smaller than with scaling, and the median gradient "
      f"reaching q {to_q_ratio:.1e}× smaller — while the *mean* gradient reaching q is "
      f"{summary[False]['mean ‖∂P/∂q‖'][-1] / summary[True]['mean ‖∂P/∂q‖'][-1]:.1f}× *larger*")
medians = {scaled: [np.median(seed[scaled]["jacobian"]) for seed in by_seed[top]]
           for scaled in (True, False)}
lesson.claim("without 1/√d, large d pushes the softmax into regions of extremely small gradients",
             paper="qualitative, no number (Vaswani et al. 2017, §3.2.1)",
             ours=f"median ‖∂softmax/∂scores‖ {np.mean(medians[False]):.1e} unscaled vs "
             f"{np.mean(medians[True]):.2f} scaled at d = {top} (64 keys); "
             f"{summary[False]['share ‖J‖<1e-3'][-1]:.0%} of unscaled rows below 1e-3",
             why="random q and k, not a trained model's; the mean gradient reaching q is larger "
            "unscaled, carried by the few unsaturated rows",
             verdict=compare(medians[False], medians[True], expect="<"))

fig, axes = plt.subplots(1, 3, figsize=(13, 3.9), layout="constrained")
panels = [("largest weight", ["largest weight"], False),
          ("‖∂softmax/∂scores‖ per row", ["median ‖J‖", "mean ‖J‖"], True),
          ("‖∂softmax/∂q‖ per row (the gradient reaching q)",
           ["median ‖∂P/∂q‖", "mean ‖∂P/∂q‖"], True)]
for ax, (title, names, logy) in zip(axes, panels):
    for name in names:
        for scaled, color in ((True, "C0"), (False, "C3")):
            ax.plot(dims, summary[scaled][name], "o-" if name.startswith(("median", "largest"))
                    else "s:", color=color, label=(f"{name.split()[0]}, " if len(names) > 1 else "")
                    + ("q·k/√d" if scaled else "q·k"))
    ax.set(xscale="log", xlabel="d", title=title, yscale="log" if logy else "linear")
    ax.set_xticks(dims, [str(d) for d in dims])
    if logy:  # one tick per decade (and no minor ticks: placing those is slow)
        low = min(min(summary[s_][name]) for s_ in (True, False) for name in names)
        ax.set_yticks(10.0 ** np.arange(np.floor(np.log10(low)), 1))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_locator(plt.NullLocator())
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle("Unscaled scores saturate the softmax as d grows: most rows go silent, "
             "a few stay loud")
lesson.savefig(fig, "why_sqrt_d")

# %% [markdown]
# With scaling, every curve is flat: attention behaves the same at $d = 2$ and $d = 2048$.
# Without it, the weights collapse onto one key (the left panel) and the learning signal splits
# in two populations. The typical row — the median, solid red — is saturated and passes almost
# nothing back: at large $d$ most rows fall below $10^{-3}$ (printed above). A few rows whose top
# two keys nearly tie stay sensitive, and they carry the mean (dotted). The gradient reaching $q$
# even looks *larger* on average without scaling — $\partial S/\partial q = K$ has rows of norm
# about $\sqrt d$ instead of 1 — but it comes from those few rows only; the median query gets
# next to nothing. Scaling keeps every row in the regime where it learns. (The paper's sentence
# is about the typical row; judged by the mean alone it would look only mildly true.)
#
# ## 3. Another way to score: additive attention
#
# The dot product is not the only way to score a query against a key. The first attention in
# neural translation (Bahdanau, Cho and Bengio, 2015) scored each pair with a small MLP:
#
# $$s_{ij} = v_a^\top \tanh\!\big(W_q\, q_i + W_k\, k_j\big),\qquad
# W_q \in \mathbb{R}^{h \times d_q},\ W_k \in \mathbb{R}^{h \times d_k},\ v_a \in \mathbb{R}^h,$$
#
# then the same softmax and weighted sum of values. Queries and keys may even have different
# sizes. Luong, Pham and Manning (2015) replaced it by dot products ($q^\top k$, or
# $q^\top W k$), and the Transformer by the scaled dot product, "much faster and more
# space-efficient in practice" (Vaswani et al., §3.2.1): a dot-product score is one matrix
# product, while the additive score must build an $L_q \times L_k \times h$ tensor before
# reducing it. Lesson 05's LSTM translator uses these scores; lesson 04 keeps the dot product
# but splits it into a content term and a position term.

# %%
show(additive_scores_np)

# %%
rng = set_seed(2)
h = 4
w_q, w_k, v_a = rng.standard_normal((h, 2)), rng.standard_normal((h, 2)), rng.standard_normal(h)
scores = additive_scores_np(q, k, w_q, w_k, v_a)  # the three tokens of section 1
scores_torch = additive_scores_torch(*(torch.tensor(a) for a in (q, k, w_q, w_k, v_a)))
err = np.abs(scores - scores_torch.numpy()).max()
print("additive weights of the three tokens (random W_q, W_k, v_a):\n", softmax_np(scores).round(3))
print(f"NumPy vs torch additive scores (float64): {err:.1e}")
assert err < 1e-12

# %% [markdown]
# With untrained weights the additive weights mean nothing yet; what matters is the cost. Both
# scores for $N$ queries and $N$ keys with $d = h = 64$, one head, timed side by side (each
# repeat runs both, so a busy machine slows both alike) and their extra memory measured:

# %%
from minattn.tools.bench import peak_memory, time_interleaved
from minattn.tools.tables import fmt_bytes, fmt_time

n = lesson.size(full=512, smoke=64)
gen = torch.Generator().manual_seed(0)
qs, ks = (torch.randn(n, 64, generator=gen).to(lesson.device) for _ in range(2))
w_q, w_k = (torch.randn(64, 64, generator=gen).to(lesson.device) / 8 for _ in range(2))
v_a = torch.randn(64, generator=gen).to(lesson.device)
score_fns = {"dot": lambda: qs @ ks.T / 8,
             "additive": lambda: additive_scores_torch(qs, ks, w_q, w_k, v_a)}
repeats = [time_interleaved(score_fns, repeats=1, warmup=int(r == 0), device=lesson.device)
           for r in range(lesson.size(full=5, smoke=3))]
ratios = [t["additive"] / t["dot"] for t in repeats]
score_memory = {name: peak_memory(fn, lesson.device) or 0.0 for name, fn in score_fns.items()}
memory_ratio = score_memory["additive"] / max(score_memory["dot"], 1.0)
print(f"N = {n}: dot-product scores {fmt_time(np.median([t['dot'] for t in repeats]))}, "
      f"additive {fmt_time(np.median([t['additive'] for t in repeats]))}; additive / dot per "
      f"repeat: " + ", ".join(f"{r:.0f}×" for r in ratios))
print(f"extra memory: dot {fmt_bytes(score_memory['dot'])}, additive "
      f"{fmt_bytes(score_memory['additive'])} ({memory_ratio:.0f}×; its N×N×h intermediate "
      f"alone is {fmt_bytes(n * n * 64 * 4)}, the scores {fmt_bytes(n * n * 4)})")
lesson.claim("dot-product attention is much faster and more space-efficient than additive "
             "attention",
             paper="qualitative, no number (Vaswani et al. 2017, §3.2.1)",
             ours=f"scores {np.median(ratios):.0f}× faster, {memory_ratio:.0f}× less extra memory "
             f"(N = {n}, d = h = 64, {lesson.device.type})",
             why="one head, float32; the ratios depend on the hardware",
             verdict=combine(versus(ratios, 1.0, ">"), versus(memory_ratio, 1.0, ">")))

# %% [markdown]
# ## 4. The backward pass, by hand
#
# Training needs $\partial\ell/\partial Q$, $\partial\ell/\partial K$, $\partial\ell/\partial V$
# given $G = \partial\ell/\partial O$. Follow the forward pass backwards,
# $S = cQK^\top$ (with $c = 1/\sqrt d$), $P = \mathrm{softmax}(S)$, $O = PV$:
#
# * $O = PV$ is a matrix product, so $\partial V = P^\top G$ and $\partial P = G V^\top$.
# * Each row of $P$ is a softmax of the same row of $S$, with Jacobian
#   $\partial P_{ij}/\partial S_{il} = P_{ij}(\delta_{jl} - P_{il})$. Contracting with $\partial P$:
#   $$\partial S_{il} = P_{il}\Big(\partial P_{il} - \sum_j \partial P_{ij} P_{ij}\Big).$$
#   The row sum is one number per query: the backward pass never needs an $L_k \times L_k$ matrix.
# * $S = cQK^\top$ gives $\partial Q = c\, \partial S\, K$ and $\partial K = c\, \partial S^\top Q$.
#
# A masked entry has $P_{il} = 0$, so $\partial S_{il} = 0$: no gradient flows through an edge
# the mask removed.

# %%
show(attention_backward_np)

# %%
rng = set_seed(1)
q, k, v = (rng.standard_normal((2, 4, 5, 8)), rng.standard_normal((2, 4, 7, 8)),
           rng.standard_normal((2, 4, 7, 6)))
mask = rng.random((2, 4, 5, 7)) < 0.7
grad_out = rng.standard_normal((2, 4, 5, 6))

q_t, k_t, v_t = (torch.tensor(a, requires_grad=True) for a in (q, k, v))  # float64
out_t, _ = attention_torch(q_t, k_t, v_t, torch.tensor(mask))
out_t.backward(torch.tensor(grad_out))
ours = attention_backward_np(grad_out, q, k, v, mask)
for name, g_ours, g_torch in zip("qkv", ours, (q_t.grad, k_t.grad, v_t.grad)):
    err = np.abs(g_ours - g_torch.numpy()).max()
    print(f"max |d{name} ours - d{name} autograd| = {err:.1e}")
    assert err < 1e-12

# %% [markdown]
# Agreement to rounding: the hand-derived gradient *is* what autograd computes.
#
# **The identity FlashAttention rests on.** The row sum $\sum_j \partial P_{ij} P_{ij}$ seems to
# need the whole row $i$ of $P$. It does not. With $\partial P_{ij} = G_i \cdot V_j$,
#
# $$\sum_j \partial P_{ij}\, P_{ij} = G_i \cdot \sum_j P_{ij} V_j = G_i \cdot O_i ,$$
#
# one dot product of two vectors of size $d_v$ that the forward pass already has. FlashAttention
# (Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with
# IO-Awareness", Appendix B) computes $D_i = \mathrm{rowsum}(\partial O \odot O)$ once, before
# its backward loop, then walks over blocks of keys, recomputing each block of $P$ from $Q$, $K$
# and the saved row statistics — so the $L_q \times L_k$ matrix is never stored, forward or
# backward. Our `attention_backward_np` recomputes $P$ too, but whole. The identity, checked on
# the example above:

# %%
out_np, weights_np = attention_np(q, k, v, mask)
row_sum_p = ((grad_out @ np.swapaxes(v, -1, -2)) * weights_np).sum(-1)  # rowsum(∂P ⊙ P), ∂P = G Vᵀ
row_sum_o = (grad_out * out_np).sum(-1)  # rowsum(G ⊙ O): no P needed
identity_err = np.abs(row_sum_p - row_sum_o).max()
print(f"max |rowsum(∂P ⊙ P) - rowsum(∂O ⊙ O)| over {row_sum_o.size} query rows: {identity_err:.1e}")
lesson.claim("the backward's row sum needs only O and dO: rowsum(dP ⊙ P) = rowsum(dO ⊙ O)",
             paper="D_i = rowsum(dO_i ∘ O_i) (Dao et al. 2022, FlashAttention, Appendix B)",
             ours=f"max difference {identity_err:.1e} over {row_sum_o.size} masked rows (float64)",
             why="an identity: rounding only", verdict=same(identity_err, 0.0, tolerance=1e-12))

# %% [markdown]
# ## 5. The PyTorch version, and PyTorch's own
#
# The torch twin repeats the NumPy function line for line, so autograd differentiates exactly
# the math above. It materialises the $L_q \times L_k$ weights, which we want when we look at them.
# When we do not, `F.scaled_dot_product_attention` (SDPA) computes the same output. SDPA is a
# dispatcher over several *backends*: fused kernels that never store the weights — FlashAttention
# on the CPU, FlashAttention and a "memory-efficient" kernel on CUDA — and a plain *math*
# backend, the fallback for inputs no fused kernel accepts, which materialises them like ours.
# `torch.nn.attention.sdpa_kernel` restricts the choice; section 8 uses it to measure which
# backend stores what.

# %%
show(attention_torch)
show(attention_fast_torch)

# %%
out_np, _ = attention_np(q, k, v, mask)
out_torch, _ = attention_torch(*(torch.tensor(a) for a in (q, k, v, mask)))
err64 = np.abs(out_np - out_torch.numpy()).max()
print(f"NumPy vs torch (float64):          {err64:.1e}")
q32, k32, v32 = (torch.tensor(a, dtype=torch.float32) for a in (q, k, v))
sdpa = F.scaled_dot_product_attention(q32, k32, v32, attn_mask=torch.tensor(mask))
ours32, _ = attention_torch(q32, k32, v32, torch.tensor(mask))
err32 = (ours32 - sdpa).abs().max().item()
print(f"ours vs F.scaled_dot_product_attention (float32): {err32:.1e}")
assert err64 < 1e-12 and err32 < 1e-5  # float64: rounding only; float32: ~1e-7 relative

# %% [markdown]
# ### Multi-head attention
#
# One attention compares tokens in one way. Multi-head attention runs $H$ attentions side by
# side, each on its own learned projection of size $d_h = D/H$, and mixes the results:
#
# $$\mathrm{MHA}(X_q, X_k, X_v) = \big[\mathrm{head}_1; \dots; \mathrm{head}_H\big] W_O,\qquad
# \mathrm{head}_h = \mathrm{Attention}(X_q W_Q^h,\ X_k W_K^h,\ X_v W_V^h).$$
#
# In code the $H$ projections are one $D \times D$ matrix whose output is reshaped from
# `(B, N, D)` to `(B, H, N, d_h)`: the heads become a batch axis, and attention runs on all of
# them at once. The module uses the fused SDPA path unless you ask for the weights.

# %%
show(MultiHeadAttention.forward)

# %%
torch.manual_seed(0)
ours = MultiHeadAttention(d_model=32, num_heads=4)
theirs = torch.nn.MultiheadAttention(32, 4, batch_first=True)
ours.load_from_torch(theirs)  # same weights
x = torch.randn(2, 10, 32)
allowed = causal_mask_torch(10)
expected, expected_w = theirs(x, x, x, attn_mask=~allowed)  # their mask: True = blocked
got, got_w = ours(x, mask=allowed, need_weights=True)
err_out = (got - expected).abs().max().item()
err_w = (got_w.mean(1) - expected_w).abs().max().item()
print(f"vs nn.MultiheadAttention: output {err_out:.1e}, head-averaged weights {err_w:.1e}")
out_np, _ = multi_head_attention_np(x.double().numpy(), x.double().numpy(), x.double().numpy(),
                                    ours.numpy_params(), 4, allowed.numpy())
err_np = np.abs(out_np - got.double().detach().numpy()).max()
print(f"NumPy multi-head reference (float64) vs module (float32): {err_np:.1e}")
assert max(err_out, err_w, err_np) < 1e-5

# %% [markdown]
# ## 6. What attention does not know: order
#
# Nothing in $\mathrm{softmax}(QK^\top/\sqrt d)V$ refers to positions. Shuffle the input tokens
# and every query still sees the same set of keys and values: its output is unchanged, and it
# simply moves with its token. Self-attention is **permutation equivariant**,
# $\mathrm{MHA}(PX) = P\,\mathrm{MHA}(X)$ for any permutation matrix $P$ — and cross-attention
# from fixed queries is invariant to the order of the keys. Checked on the module above:

# %%
torch.manual_seed(1)
mha = MultiHeadAttention(d_model=32, num_heads=4).double()
x = torch.randn(2, 10, 32, dtype=torch.float64)
perm = torch.randperm(10)
with torch.no_grad():
    err_equi = (mha(x[:, perm])[0] - mha(x)[0][:, perm]).abs().max().item()
    queries = torch.randn(2, 3, 32, dtype=torch.float64)
    err_inv = (mha(queries, x[:, perm])[0] - mha(queries, x)[0]).abs().max().item()
print(f"self-attention, shuffled input vs shuffled output: {err_equi:.1e}")
print(f"cross-attention, keys shuffled vs not:             {err_inv:.1e}")
assert err_equi < 1e-12 and err_inv < 1e-12

# %% [markdown]
# So "dog bites man" and "man bites dog" look the same to attention alone. The Transformer adds
# a **positional encoding** to each token's embedding (Vaswani et al., §3.5): row $p$ of a fixed
# table, sines and cosines of the position at geometrically spaced frequencies,
#
# $$\mathrm{PE}_{p,\,k} = \sin(p\,\omega_k),\quad \mathrm{PE}_{p,\,D/2 + k} = \cos(p\,\omega_k),
# \qquad \omega_k = 10000^{-2k/D},\quad k = 0 \dots D/2 - 1 .$$
#
# (The paper interleaves the sines and cosines, $2k$ and $2k+1$; the library puts all sines
# first, as Transformer-XL's code does — the same table with its columns permuted, which
# changes nothing for a model that multiplies it by learned matrices.) The library has it
# once: lesson 04 uses the same table for *distances*.

# %%
from minattn.attention import sinusoid_np, sinusoid_torch

show(sinusoid_np)
n_pos, d_pe = 64, 32
pe = sinusoid_np(n_pos, d_pe)
pe_err = np.abs(pe - sinusoid_torch(n_pos, d_pe, dtype=torch.float64).numpy()).max()
print(f"sinusoid table ({n_pos} positions × {d_pe}): NumPy vs torch (float64) {pe_err:.1e}")

# %% [markdown]
# The paper chose sinusoids because "for any fixed offset $k$, $\mathrm{PE}_{p+k}$ can be
# represented as a linear function of $\mathrm{PE}_p$" — so a model can learn to attend by
# relative position. The linear function is a rotation of each (sine, cosine) pair by the angle
# $k\,\omega_j$: $\sin((p+k)\omega) = \sin(p\omega)\cos(k\omega) + \cos(p\omega)\sin(k\omega)$,
# and likewise for the cosine. One matrix $M_k$, the same for every $p$:

# %%
offset = 3
omega = 1.0 / 10000 ** (np.arange(0, d_pe, 2) / d_pe)  # ω_j, as in the formula above
c_k, s_k = np.diag(np.cos(offset * omega)), np.diag(np.sin(offset * omega))
rotation = np.block([[c_k, -s_k], [s_k, c_k]])  # [sin | cos] @ M_k = [sin' | cos']
shift_err = np.abs(pe[:-offset] @ rotation - pe[offset:]).max()
print(f"PE[p + {offset}] = PE[p] @ M_{offset} for all {n_pos - offset} positions: "
      f"largest difference {shift_err:.1e}")
lesson.claim("sinusoids make PE(p + k) a linear function of PE(p)",
             paper="stated as the reason for sinusoids (Vaswani et al. 2017, §3.5)",
             ours=f"one rotation matrix maps every PE(p) to PE(p + {offset}): "
             f"difference {shift_err:.1e}",
             why="an identity: rounding only", verdict=same(shift_err, 0.0, tolerance=1e-12))

fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
image = ax.imshow(pe.T, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
ax.set(xlabel="position p", ylabel="dimension (sines, then cosines)",
       title=f"sinusoidal positional encoding, D = {d_pe}: in each half, fast waves on top")
fig.colorbar(image, ax=ax, label="PE value")
lesson.savefig(fig, "sinusoids")

# %% [markdown]
# **A task that needs order: reversal.** Each example is $N$ distinct symbols in a random order;
# the answer at position $i$ is the symbol at position $N - 1 - i$. The model is one self-attention
# layer with a single head, then a linear read-out of each position's attended vector
# (`PositionReader`). Without positions it can know only its own symbol and the *set* of
# symbols, so the best it can do is to guess one of the $N - 1$ others: accuracy exactly
# $1/(N-1)$. With the sinusoids added to the embeddings, query $i$ can find key $N - 1 - i$ —
# reflecting $p \mapsto N - 1 - p$ is, like the shift above, a linear map of the table. A third
# model learns its own table of positions instead, as the paper also tried (its Table 3, row E).

# %%
from minattn.attention import PositionReader, RecallAttention, RecallMeanPool, reversal
from minattn.tools.train import count_parameters, train

show(PositionReader)

N_REV, N_SYMBOLS = lesson.size(full=16, smoke=8), 32
REV_STEPS, REV_SEEDS = lesson.size(full=300, smoke=6), lesson.size(full=[0, 1, 2], smoke=[0, 1])
rev_floor = 1 / (N_REV - 1)
rev_held_out = reversal(lesson.size(full=1024, smoke=128), N_REV, N_SYMBOLS,
                        torch.Generator().manual_seed(10_000), lesson.device)


def reversal_loss(model, tokens, targets):
    return F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())


def reversal_run(positions, seed):
    set_seed(seed)
    model = PositionReader(N_SYMBOLS, N_REV, positions).to(lesson.device)
    gen = torch.Generator().manual_seed(seed)

    def evaluate():
        tokens, targets = rev_held_out
        return {"accuracy": (model(tokens).argmax(-1) == targets).float().mean().item()}

    history = train(model, lambda step: reversal(128, N_REV, N_SYMBOLS, gen, lesson.device),
                    reversal_loss, steps=REV_STEPS, lr=3e-3, evaluate=evaluate,
                    eval_every=max(REV_STEPS // 15, 3), desc=f"positions={positions}, seed {seed}")
    return model, history


rev_runs = {pos: [reversal_run(pos, seed) for seed in REV_SEEDS]
            for pos in PositionReader.POSITIONS}
rev_acc = {pos: [h.last("accuracy") for _, h in runs] for pos, runs in rev_runs.items()}
print(f"\nreversal of N = {N_REV} distinct symbols, held-out accuracy after {REV_STEPS} steps "
      f"(a model blind to order: 1/(N-1) = {rev_floor:.3f})")
print(f"{'positions':<10}" + "".join(f"{'seed ' + str(s):>9}" for s in REV_SEEDS) + f"{'mean':>9}")
for pos, accs in rev_acc.items():
    print(f"{pos:<10}" + "".join(f"{a:>9.3f}" for a in accs) + f"{np.mean(accs):>9.3f}")
lesson.claim("attention needs position information injected to use the order of a sequence",
             paper="no recurrence, no convolution: 'we must inject some information about the "
              "position' (Vaswani et al. 2017, §3.5)",
             ours=f"reversal accuracy {np.mean(rev_acc['sinusoid']):.3f} with sinusoids, "
             f"{np.mean(rev_acc['none']):.3f} without (the order-blind line 1/(N-1) = "
             f"{rev_floor:.3f}); N = {N_REV}, one head",
             why="a synthetic task where every answer depends on order",
             verdict=combine(compare(rev_acc["sinusoid"], rev_acc["none"], expect=">"),
                        same(rev_acc["none"], rev_floor, tolerance=0.01)))
lesson.claim("learned positional embeddings perform nearly as well as sinusoids",
             paper="dev BLEU 25.7 learned vs 25.8 sinusoids, perplexity 4.92 both (newstest2013; "
              "Vaswani et al. 2017, Table 3, row E vs base)",
             ours=f"reversal accuracy {np.mean(rev_acc['learned']):.3f} learned vs "
             f"{np.mean(rev_acc['sinusoid']):.3f} sinusoids after {REV_STEPS} steps",
             why="a one-layer synthetic task, not translation; 'nearly' read as within 0.01 "
                 "accuracy",
             verdict=same(rev_acc["learned"], rev_acc["sinusoid"], tolerance=0.01))

# %%
fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), layout="constrained",
                         gridspec_kw=dict(width_ratios=[1.3, 1, 1]))
plot_curves(axes[0], {pos: runs[0][1] for pos, runs in rev_runs.items()}, "accuracy",
            title=f"reversal, held-out accuracy (seed {REV_SEEDS[0]})")
axes[0].axhline(rev_floor, color="black", ls="--", lw=1, label="order-blind line 1/(N-1)")
axes[0].set_ylim(0, 1.02)
axes[0].legend(title="positions", fontsize=9)
one_example = rev_held_out[0][:1]
for ax, pos in zip(axes[1:], ("none", "sinusoid")):
    model = rev_runs[pos][0][0].eval()
    with torch.no_grad():
        _, rev_w = model(one_example, need_weights=True)
    image = heatmap(ax, rev_w[0, 0].cpu().numpy(), vmax=1,
                    title=f"positions={pos}: where output i looks")
    ax.set(xlabel="input position j", ylabel="output position i")
fig.colorbar(image, ax=axes[1:], label="attention weight", shrink=0.9)
lesson.savefig(fig, "reversal")

# %% [markdown]
# Without positions the model sits on the order-blind line for every seed: its attention map
# (middle) can only follow content, and content says nothing about where a symbol stood. With
# the sinusoids it solves the task, and its map is the anti-diagonal — output $i$ reads input
# $N - 1 - i$. Learned positions get there too, starting from random vectors (the curves show
# which learns faster). That is what "position must be added" means in practice. Other ways to
# add it: a position term inside the score (lesson 04's relative positions); lesson 03's model
# deliberately uses none. The task below is a *set* lookup, where order carries no
# information, so one attention layer without positions suits it.

# %% [markdown]
# ## 7. A task that needs content lookup: associative recall
#
# The model sees a set of **(key, value) pairs** — "c→7, q→2, a→7, …" — and then every key again
# as a question: "what was stored under q?". Keys are distinct in an example, values may repeat,
# and the questions come in a random order, so neither position nor frequency gives the answer
# away. To answer, a model must **find the pair whose key matches the question and read its
# value**: content-based lookup, which is what attention does in one step.
#
# Each pair is one token, $e_{\text{key}} + e_{\text{value}}$; each question is $e_{\text{key}}$.
# The attention model is one attention layer with a single head (`MultiHeadAttention` with
# $H = 1$) from the questions to the pairs, and a linear read-out. The baseline has the same
# embeddings and a larger MLP, but sees the pairs only through their **mean** — which keeps
# *which* keys and values occur and loses *which value sat next to which key*. Without that
# binding the best it can do is to guess the value that occurs most often among the pairs; we
# compute that floor on the held-out set.

# %%
from minattn.attention import associative_recall

show(associative_recall)
show(RecallAttention)

# %%
N_PAIRS, N_KEYS, N_VALUES = (lesson.size(full=16, smoke=8), lesson.size(full=64, smoke=16),
                             lesson.size(full=64, smoke=16))
STEPS, BATCH = lesson.size(full=600, smoke=30), lesson.size(full=128, smoke=32)

example = associative_recall(1, 6, 26, 10, torch.Generator().manual_seed(0))
letters = "abcdefghijklmnopqrstuvwxyz"
print("pairs:  ", ", ".join(f"{letters[k_]}→{v_}" for k_, v_ in zip(example["keys"][0].tolist(),
                                                                   example["values"][0].tolist())))
print("asks:   ", ", ".join(f"{letters[q_]}?" for q_ in example["queries"][0].tolist()))
print("answers:", ", ".join(str(t) for t in example["targets"][0].tolist()))


def recall_loss(model, batch):
    logits = model(batch["queries"], batch["keys"], batch["values"])  # (B, Q, n_values)
    return F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten())


def accuracy(model, batch):
    logits = model(batch["queries"], batch["keys"], batch["values"])
    return (logits.argmax(-1) == batch["targets"]).float().mean().item()


def most_frequent_value_accuracy(batch):
    """Accuracy of answering every question with the value that occurs most often among the
    example's pairs: the best a model blind to which value sat with which key can do."""
    counts = F.one_hot(batch["values"], N_VALUES).sum(1)  # (B, n_values)
    guess = counts.argmax(-1, keepdim=True)  # (B, 1): ties do not matter, tied values count equally
    return (batch["targets"] == guess).float().mean().item()


def run(model_class, seed):
    """Train one model on fresh batches; evaluate on a fixed held-out set."""
    set_seed(seed)
    model = model_class(N_KEYS, N_VALUES).to(lesson.device)
    train_gen = torch.Generator().manual_seed(seed)
    held_out = associative_recall(lesson.size(full=1024, smoke=128), N_PAIRS, N_KEYS, N_VALUES,
                                  torch.Generator().manual_seed(10_000), lesson.device)
    history = train(model, lambda step: (associative_recall(BATCH, N_PAIRS, N_KEYS, N_VALUES,
                                                            train_gen, lesson.device),),
                    recall_loss, steps=STEPS, lr=3e-3,
                    evaluate=lambda: {"accuracy": accuracy(model, held_out)},
                    eval_every=max(STEPS // 30, 5), desc=model_class.__name__)
    return model, history, held_out


attention_model, attention_history, held_out = run(RecallAttention, seed=0)
pooling_model, pooling_history, _ = run(RecallMeanPool, seed=0)
floor = most_frequent_value_accuracy(held_out)
print(f"{'model':<16} {'parameters':>10} {'held-out accuracy':>18}")
for name, model, hist in (("attention", attention_model, attention_history),
                          ("mean pooling", pooling_model, pooling_history)):
    print(f"{name:<16} {count_parameters(model):>10,} {hist.last('accuracy'):>18.3f}")
print(f"floor, always guess the most frequent value: {floor:.3f}    "
      f"chance (1/{N_VALUES}): {1 / N_VALUES:.3f}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.9), layout="constrained")
curves = {"attention": attention_history, "mean pooling": pooling_history}
plot_curves(axes[0], curves, "loss", title="training loss", logy=True)
plot_curves(axes[1], curves, "accuracy", title="held-out accuracy")
axes[1].axhline(floor, color="black", ls="--", lw=1, label=f"most frequent value ({floor:.3f})")
axes[1].axhline(1 / N_VALUES, color="gray", ls=":", lw=1, label=f"chance ({1 / N_VALUES:.3f})")
axes[1].set_ylim(0, 1.02)
for ax in axes:
    ax.get_legend().remove()
fig.legend(*axes[1].get_legend_handles_labels(), loc="outside lower center", ncol=4)
lesson.savefig(fig, "recall_training")

# %% [markdown]
# The attention model solves the task (the table above). The pooling model, with more
# parameters, ends at the dashed line: the accuracy of always answering with the most frequent
# value among the pairs, all a model that cannot bind keys to values can reach. (This shows that
# *averaging* fails, not that every model without attention does: a recurrent network or a deep
# enough MLP over the concatenated pairs could in principle learn the binding, at a much higher
# cost.)
#
# Where does each question look? Below, one held-out example: rows are the questions, columns
# the pairs, ordered as they appeared; the red circles mark the pair that holds each answer.

# %%
attention_model.eval()
with torch.no_grad():
    one = {name: t[:1] for name, t in held_out.items()}
    _, w = attention_model(one["queries"], one["keys"], one["values"], need_weights=True)
weights = w[0, 0]  # (Q, P): the single head's weights
key_names = [f"k{key}→{val}"
             for key, val in zip(one["keys"][0].tolist(), one["values"][0].tolist())]
ask_names = [f"k{key}?" for key in one["queries"][0].tolist()]
fig, ax = plt.subplots(figsize=(8, 6.5), layout="constrained")
image = heatmap(ax, weights.cpu().numpy(), key_names, ask_names, vmax=1,
                title="attention of each question over all the pairs\n"
                      "(red circle: the pair that holds the answer)")
ax.set_xlabel("pair (key→value), in input order")
ax.set_ylabel("question")
ax.scatter(one["source"][0].cpu().numpy(), np.arange(N_PAIRS), s=90, facecolors="none",
           edgecolors="red", lw=1.5)
fig.colorbar(image, ax=ax, label="attention weight (the one head)")
lesson.savefig(fig, "recall_attention_map")
found = (weights.argmax(-1) == one["source"][0]).float().mean().item()
on_answer = weights.gather(-1, one["source"][0][:, None]).mean().item()
print(f"share of questions whose largest weight is on the right pair: {found:.2f}; "
      f"mean weight on that pair: {on_answer:.2f}")

# %% [markdown]
# Each question puts nearly all its weight on the one pair whose key matches (the numbers
# above): the model has learned to use $W_Q$ and $W_K$ to compare key identities, and $W_V$ to
# carry the value.
#
# ## 8. What it costs
#
# The weights matrix has $L_q \times L_k$ entries. A small live measurement: one forward pass of
# our explicit `attention_torch` (which stores the weights) and of `attention_fast_torch`
# (PyTorch's SDPA), B = 1, H = 4, d = 64, float32, for growing $N$. "Extra memory" is the peak
# the call needs beyond its inputs; "bytes / N²" divides it by $N^2$ — for a quadratic cost it
# settles on a constant. SDPA's memory is measured three times: as it dispatches by default,
# restricted to its fused kernels, and restricted to its math backend.

# %%
from torch.nn.attention import SDPBackend, sdpa_kernel

FUSED = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]


def sdpa_on(backends, qkv):
    """SDPA restricted to `backends` (sdpa_kernel raises if none of them takes these inputs)."""
    def call():
        with sdpa_kernel(backends):
            return attention_fast_torch(*qkv)
    return call


sizes = lesson.size(full=[256, 512, 1024, 2048], smoke=[64, 128])
time_, memory, rows = {}, {}, []
for n in sizes:
    gen = torch.Generator().manual_seed(n)
    qkv = [torch.randn(1, 4, n, 64, generator=gen).to(lesson.device) for _ in range(3)]
    fns = {"ours": lambda: attention_torch(*qkv), "SDPA": lambda: attention_fast_torch(*qkv)}
    time_[n] = time_interleaved(fns, repeats=lesson.size(full=5, smoke=2), device=lesson.device)
    memory[n] = {name: peak_memory(fn, lesson.device) or 0.0 for name, fn in fns.items()}
    for name, backends in (("SDPA fused", FUSED), ("SDPA math", [SDPBackend.MATH])):
        try:
            memory[n][name] = peak_memory(sdpa_on(backends, qkv), lesson.device) or 0.0
        except RuntimeError:  # no kernel of that kind takes these inputs
            memory[n][name] = None
    rows.append({"N": n, "ours, time": fmt_time(time_[n]["ours"]),
                 "SDPA, time": fmt_time(time_[n]["SDPA"]),
                 "ours, memory": fmt_bytes(memory[n]["ours"]),
                 "ours, bytes / N²": f"{memory[n]['ours'] / n ** 2:.1f}",
                 "SDPA default": fmt_bytes(memory[n]["SDPA"]),
                 "SDPA fused only": fmt_bytes(memory[n]["SDPA fused"]),
                 "SDPA math only": fmt_bytes(memory[n]["SDPA math"]),
                 "math, bytes / N²": (f"{memory[n]['SDPA math'] / n ** 2:.1f}"
                                      if memory[n]["SDPA math"] is not None else "—")})
print_table(rows, list(rows[0]))
n1, n2 = sizes[-2], sizes[-1]
grow = {name: time_[n2][name] / time_[n1][name] for name in ("ours", "SDPA")}
per_head = memory[n2]["ours"] / n2 ** 2 / (4 * 4)  # 4 heads, 4 bytes per float32
print(f"\nN {n1} -> {n2} (×2): our time ×{grow['ours']:.1f}, SDPA's time ×{grow['SDPA']:.1f}")
print(f"at N = {n2} our memory is {memory[n2]['ours'] / n2 ** 2:.1f} bytes per N², i.e. "
      f"{per_head:.1f} float32 N×N arrays per head alive at once")
fused_ok = memory[n2]["SDPA fused"] is not None
default_is_fused = fused_ok and abs(memory[n2]["SDPA"] - memory[n2]["SDPA fused"]) < \
    0.25 * max(memory[n2]["SDPA math"] or 0.0, 1.0)
default_kind = "fused kernel" if default_is_fused else "math backend"
print(f"a fused SDPA kernel takes these inputs on {lesson.device.type}: {fused_ok}; "
      f"the default call needed the memory of the {default_kind}")


# The exponent a of memory ∝ N^a over the last doubling: at small N the resident-set peaks are
# blurred by page granularity and allocator reuse (a quadratic cost gives 2, a linear one 1).
mem_slope = {name: float(np.log2(max(memory[n2][name], 4096.0) / max(memory[n1][name], 4096.0)))
             for name in ("ours", "SDPA")}
print(f"memory ∝ N^a from N = {n1} to {n2}: ours a = {mem_slope['ours']:.2f}, "
      f"SDPA (default) a = {mem_slope['SDPA']:.2f}")
lesson.claim("exact attention with extra memory linear in N, never storing the N×N matrix",
             paper="O(N) additional memory (Dao et al. 2022, FlashAttention, Theorem 1)",
             ours=f"extra memory ∝ N^{mem_slope['SDPA']:.2f} for SDPA's default (fused) kernel vs "
             f"N^{mem_slope['ours']:.2f} for the explicit path, N = {n1} -> {n2} "
             f"({lesson.device.type})",
             why="CPU resident-set peaks include allocator overheads; 'linear' read as an exponent "
            "under 1.5, quadratic as over 1.5",
             verdict=combine(versus(mem_slope["SDPA"], 1.5, "<"),
                             versus(mem_slope["ours"], 1.5, ">")))

# %% [markdown]
# Read the bytes / N² column: for our explicit path it settles on a constant — three float32
# arrays of $N \times N$ per head live at once at the peak (the scores, their exponentials and
# the weights; the last lines above), so memory grows like $N^2$, ×4 per doubling. SDPA's default
# call here ran a fused kernel: it walks over blocks of keys keeping a running max and sum (the
# "online softmax") and never stores the weights, so its extra memory stays small. That is a
# property of the *kernel*, not of SDPA: restricted to its math backend — what PyTorch falls back
# to when no fused kernel accepts the inputs — SDPA stores $N^2$ numbers too (the last column).
# Even the fused kernel still *computes* all $N^2$ scores, so its time grows faster than $N$; at
# small $N$ fixed overheads blur the ratio. Full tables (NumPy, naive torch, ours, SDPA, forward
# and backward, longer sequences) are written by `python benchmarks/attention.py --markdown` to
# [`benchmarks/README.md`](../benchmarks/README.md).
#
# ## 9. Attention, recurrence, convolution: the maximum path length
#
# The Transformer paper argued for self-attention with three numbers per layer type (Vaswani et
# al., Table 1): the work per layer, the operations that must run one after another, and the
# **maximum path length** — how many layers a signal needs to travel between the two most
# distant positions. Short paths make long-range dependencies easier to learn. Treat a layer as
# a graph, an edge $j \to i$ wherever position $i$ reads position $j$; the maximum path length is
# that graph's diameter (lesson 02, section 2, computes it for every sparse pattern). Measured on
# the graphs of three layers — dense self-attention, self-attention restricted to a window of
# $r$ positions, and a recurrent layer, whose step $i$ reads step $i - 1$:

# %%
from minattn.sparse import diameter_np, sliding_window_mask_np

r_half = 4  # the restricted layer sees |i - j| <= 4: a neighbourhood of r = 9 positions
path_sizes = lesson.size(full=[32, 64, 128], smoke=[16, 32])
graphs = {"self-attention": lambda n: np.ones((n, n), dtype=bool),
          "recurrent": lambda n: sliding_window_mask_np(n, 1, causal=True),
          f"self-attention (restricted, r = {2 * r_half + 1})":
              lambda n: sliding_window_mask_np(n, r_half)}
paths = {name: [diameter_np(make(n)) for n in path_sizes] for name, make in graphs.items()}
paper_rows = {"self-attention": ("O(n²·d)", "O(1)", "O(1)"),
              "recurrent": ("O(n·d²)", "O(n)", "O(n)"),
              "convolutional": ("O(k·n·d²)", "O(1)", "O(log_k(n))"),
              f"self-attention (restricted, r = {2 * r_half + 1})": ("O(r·n·d)", "O(1)", "O(n/r)")}
path_slope = {name: float(np.polyfit(np.log2(path_sizes), np.log2(ps), 1)[0])
              for name, ps in paths.items()}
table_rows = []
for name, (work, sequential, path) in paper_rows.items():
    row = {"layer": name, "work per layer": work, "sequential ops": sequential,
           "max path length (paper)": path}
    for n, p in zip(path_sizes, paths.get(name, [None] * len(path_sizes))):
        row[f"measured, n = {n}"] = "—" if p is None else f"{p:.0f}"
    row["growth n^a"] = f"a = {path_slope[name]:.2f}" if name in path_slope else "—"
    table_rows.append(row)
print_table(table_rows, list(table_rows[0]))
lesson.claim("maximum path length: O(1) for self-attention, O(n/r) restricted to r neighbours, "
             "O(n) recurrent",
             paper="Vaswani et al. 2017, Table 1",
             ours=f"graph diameters grow as n^a: a = {path_slope['self-attention']:.2f}, "
             f"{path_slope[f'self-attention (restricted, r = {2 * r_half + 1})']:.2f}, "
             f"{path_slope['recurrent']:.2f} (n = {path_sizes[0]}..{path_sizes[-1]})",
             why="exact distances on the layers' graphs; the convolution row is not measured",
             verdict=combine(same(path_slope["self-attention"], 0.0, tolerance=0.1),
                        same(path_slope[f"self-attention (restricted, r = {2 * r_half + 1})"],
                             1.0, tolerance=0.1),
                        same(path_slope["recurrent"], 1.0, tolerance=0.1)))

# %% [markdown]
# Dense self-attention connects every pair in one layer at $O(n^2)$ work; a recurrent layer
# needs $n - 1$ steps that cannot run in parallel. Restricting attention to a window buys
# linear work at the price of a path that grows like $n/r$ — the trade every sparse pattern of
# lesson 02 negotiates. Global tokens and random edges (lesson 02) are ways to keep the work
# near linear *and* the path short.
#
# ## Summary
# * Attention = scores (dot products), softmax (stable: subtract the max per row; masked:
#   $-\infty$, empty rows give zeros), weighted sum of values.
# * Divide by $\sqrt d$ to keep the scores at unit variance: without it, most softmax rows
#   saturate and pass almost no gradient back, while a few near-ties carry the average.
# * Additive (Bahdanau) scores, $v_a^\top\tanh(W_q q + W_k k)$, are an MLP per pair; the dot
#   product computes a score per pair with one matrix product, which is why it won.
# * The backward pass needs only $P$ and one row sum per query, and that row sum equals
#   $\mathrm{rowsum}(\partial O \odot O)$ — which is why FlashAttention never stores $P$.
# * Multi-head attention = the same operation on $H$ learned projections, batched.
# * Attention alone ignores order (permutation equivariance): a task that needs order sits at
#   the order-blind line until positions are added, and sinusoids or learned positions solve it.
# * On associative recall one attention head finds the right pair; a model that averages the
#   pairs stays at the accuracy of guessing the most frequent value.
# * Explicit attention stores $N^2$ weights, and so does SDPA's math backend; its fused kernels do
#   not, but still do $N^2$ work.
# * Self-attention's maximum path length is 1 at $O(n^2)$ work; lesson 02 shortens the work and
#   keeps the path short.
#
# ## Exercises
# Build a student copy (`make student`, or `python -m minattn.classroom student DIR`),
# work in it, and check yourself with `make exercises` (or `python -m pytest --exercises 1.1`).
#
# * **1.1** implement, ~20 min — `softmax_np` in `minattn/attention/reference.py` (and its torch
#   twin `softmax_torch`): a numerically stable softmax over the last axis with an optional
#   boolean mask; masked entries get 0, all-masked rows give all zeros.
# * **1.2** implement, ~15 min — `attention_np` (and `attention_torch`): scores, masked softmax,
#   weighted sum of values.
# * **1.3** implement, ~30 min — `attention_backward_np`: $\partial Q$, $\partial K$,
#   $\partial V$ from $\partial O$, using the formulas of section 4.
# * **1.4** predict, ~10 min — in `minattn/answers/attention.py`: append a fourth token
#   identical to "the" to section 1's example. What total weight does query "the" put on the
#   two "the" tokens? Work it out on paper, then check with `attention_np`.
# * **1.5** experiment, ~10 min — in `minattn/answers/attention.py`: run
#   `softmax_rows(64, rng, n_queries=200, n_keys=4096)` and report the mean Jacobian norm of
#   the scaled softmax over 4096 keys, `rows[True]["jacobian"].mean()`. Compare with 64 keys:
#   what does a long context do to the learning signal of each score?
#
# To think about:
# 1. Train `RecallAttention` with `num_heads=4`. Do all heads find the right pair?
# 2. Replace the pair tokens by two tokens per pair ("k", "v", "k", "v", …). Why does one
#    attention layer no longer suffice? (Hint: the value token must first learn which key
#    precedes it — and without positions it cannot even tell which key that is.)
# 3. The additive score has a hidden layer; can it express scores that $q^\top W k$ cannot?
# 4. Train `PositionReader` with sinusoids on reversal at $N = 16$, then test it at $N = 12$.
#    Why does it fail, although the paper hoped sinusoids "may allow the model to extrapolate
#    to sequence lengths longer than the ones encountered during training"? (Hint: the map the
#    model learned is a reflection about $(N-1)/2$.)
