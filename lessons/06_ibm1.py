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
# # Lesson 06 — IBM Model 1 and the bag-of-words proxy: why attention learns what it learns
#
# Lesson 05 trains an LSTM translator with attention and finds something odd: it learns to copy
# a permutation of 40 words sampled from 60, but often *fails* to copy a permutation of the same
# 40 words every time — although the second task looks easier. Snell, Zhong, Klein and
# Steinhardt ("Approximating How Single Head Attention Learns", 2021; our seed `002_*`) explain
# it like this:
#
# 1. early in training the attention is nearly uniform, so what the network learns first is
#    *which output word each input word predicts* ("knowledge to translate individual words",
#    KTIW);
# 2. attention is then pulled towards the input positions whose words predict the output well;
# 3. KTIW early on is learned like a **bag-of-words proxy** whose gradient at initialisation is
#    the **co-occurrence count table** $C(x, y)$ — the first step of the classical **IBM Model 1**
#    word aligner (Brown et al., 1993).
#
# So: where the count table is flat, nothing tells the network which input word matters, and
# attention has nothing to follow. In this lesson you will
# 1. build count tables and see that the 40-of-40 table is flat;
# 2. implement IBM Model 1's EM (exercises 6.1, 6.2), vectorised over the whole corpus, and
#    reproduce NLTK's implementation to 1e-12;
# 3. align English and German Bible verses with it;
# 4. measure the proxy's gradient at initialisation and compare it with the count table.
#
# **Direction, once and for all.** The *source* $x$ is the **input** sentence (English here), the
# *target* $y$ is the **output** sentence (German). $t(y \mid x)$ is the probability that input word
# $x$ produces output word $y$. NLTK writes `AlignedSent(words=target, mots=source)` — the target
# first; `ibm1.nltk_bitext(sources, targets)` does that swap for you, in one place.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from minattn import ibm1, plots, tasks
from minattn.tools.lesson import Lesson, show
from minattn.tools.utils import set_seed

L = Lesson("06_ibm1")
rng = set_seed(0)

# %% [markdown]
# ## 1. The count table
#
# For every sentence pair $(x^m, y^m)$, every output token $y$ of $y^m$ and every input token
# $x$ of $x^m$, add $1/|x^m|$:
#
# $$C(x, y) = \sum_m \sum_{j=1}^{|y^m|} \sum_{i=1}^{|x^m|} \frac{[x^m_i = x]\,[y^m_j = y]}{|x^m|}.$$
#
# Each output token spreads one unit of "credit" evenly over the input tokens of its sentence —
# exactly what uniform attention does. The library stores only the $(x, y)$ that co-occur
# (a *sparse* table: on the Bible, 3 million of the 300 million cells).
#
# Word order plays no part, so each pair is just two **bags of words**: its distinct output
# words $y$ (with counts $k_y$) and its distinct input words $x$ (with counts $c_x$). The whole
# corpus lives in flat arrays with one **point** per (distinct $y$, distinct $x$) of the same
# pair, each knowing its row $y$, its multiplicity $c_x$ and its table entry. Counting is then one
# `np.bincount` — no loop over sentences.

# %%
show(ibm1.make_bitext)
show(ibm1.count_table_np)

# NLTK's documented example: 6 English (source) / German (target) pairs.
EX_SRC = [["the", "house", "is", "small"], ["the", "house", "is", "big"],
          ["the", "book", "is", "small"], ["the", "house"], ["the", "book"], ["a", "book"]]
EX_TGT = [["klein", "ist", "das", "haus"], ["das", "haus", "ist", "ja", "groß"],
          ["das", "buch", "ist", "ja", "klein"], ["das", "haus"], ["das", "buch"], ["ein", "buch"]]
ex = ibm1.make_bitext(EX_SRC, EX_TGT, null=False)
C_ex = ibm1.to_dense(ibm1.count_table_np(ex), ex)[1:]            # row 0 is NULL (unused here)
print("C(x, y) on the 6-pair example (rows x, columns y):")
print("          " + " ".join(f"{y:>6}" for y in ex.tgt_vocab))
for x, row in zip(ex.src_vocab[1:], C_ex):
    print(f"{x:>8}  " + " ".join(f"{v:6.2f}" for v in row))
# "book" appears in 3 pairs: "das buch" gets 1/2 + 1/2 + 1/5 from them, "buch" 1/2 + 1/2 + 1/5 too.
assert np.isclose(C_ex.sum(), len(ex.tgt_ids))                     # one unit per output token

# %% [markdown]
# The raw counts cannot tell "book" → *buch* from "book" → *das*: both co-occur equally often.
# Telling them apart is what EM (section 3) is for. First, the tasks of lesson 05.
#
# ## 2. Count tables of the permutation tasks: nothing to learn from a flat table
#
# * **40-of-40**: every input is a permutation of the same 40 words, output = input. Every pair
#   contains every word once, so $C(x, y) = M/40$ for *all* $(x, y)$: flat.
# * **40-of-60**: 40 words sampled from 60, permuted. A word co-occurs with itself in every pair
#   it appears in, with any other word only when both were sampled: the diagonal stands out.
# * **two disjoint sets**: half the pairs permute set A, half set B. Two flat blocks — inside a
#   block, nothing to learn again.

# %%
n_perm = L.size(full=2000, smoke=200)
copy_tasks = {"40-of-40 (flat)": tasks.permutation_corpus(n_perm, 40, 40, rng),
         "40-of-60 (control)": tasks.permutation_corpus(n_perm, 40, 60, rng),
         "two disjoint sets of 20": tasks.two_sets_corpus(n_perm, 20, rng)}
fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
perm_bitexts = {}
for ax, (name, (src, tgt)) in zip(axes, copy_tasks.items()):
    bx = ibm1.make_bitext(src, tgt, null=False)
    perm_bitexts[name] = bx
    words = sorted(bx.src_vocab[1:])                                # same order on both axes
    rows = [bx.src_index[w] for w in words]
    cols = [bx.tgt_index[w] for w in words]
    C = ibm1.to_dense(ibm1.count_table_np(bx), bx)[np.ix_(rows, cols)]
    t1 = C / C.sum(axis=1, keepdims=True)                            # = one EM step (section 3)
    other = ~np.eye(len(t1), dtype=bool) & (C > 0)                  # co-occurring y != x
    diag, off = np.diag(t1).mean(), t1[other].mean()
    print(f"{name:25s} t(x | x) = {diag:.4f}, t(y | x) for co-occurring y != x = {off:.4f}, "
          f"ratio {diag / off:.2f}")
    plots.plot_table(ax, t1, None, None, title=f"{name}\nC(x, y) / Σ_y' C(x, y')",
                    vmax=2.5 / len(words))
    ax.set_xticks([]), ax.set_yticks([])
L.savefig(fig, "count_tables_permutations")

# %% [markdown]
# The 40-of-40 table is exactly uniform (ratio 1.00): the data never says which input word an
# output word came from. The 40-of-60 control has a clear diagonal (a word always co-occurs with
# itself, with another word only when both were sampled: ratio about $1/(40/60) \approx 1.5$), and the
# mixture is two flat blocks (ratio 1.00 inside a block).
#
# ## 3. IBM Model 1 and its EM
#
# IBM Model 1 generates each output word by picking an input position uniformly (or the empty
# word NULL, for output words with no input counterpart) and translating that one word:
#
# $$p(y^m \mid x^m) = \prod_{j=1}^{|y^m|} \frac{1}{|x^m| + 1} \sum_{i=0}^{|x^m|} t(y_j \mid x_i),
# \qquad x_0 = \text{NULL}.$$
#
# (the constant length term is left out). EM alternates two steps.
#
# **E-step** — the posterior that output word $j$ came from input position $i$, and the
# expected number of times $x$ produced $y$:
#
# $$a_{ji} = \frac{t(y_j \mid x_i)}{Z_j},\quad Z_j = \sum_{i'} t(y_j \mid x_{i'}),\qquad
# \mathrm{count}(x, y) = \sum_m \sum_{j, i:\, x_i = x,\, y_j = y} a_{ji}
# = t(y \mid x) \sum_{j, i:\, x_i = x,\, y_j = y} \frac{1}{Z_j}.$$
#
# **M-step** — renormalise per input word: $t(y \mid x) = \mathrm{count}(x, y) / \sum_{y'} \mathrm{count}(x, y')$.
#
# The posterior $a_{ji}$ has the shape of an attention map — output position $j$ (a query)
# spreads weight over input positions $i$ (keys) — and it grows with $t(y_j \mid x_i)$: the
# alignment is pulled to the input word that best *translates* $y_j$. That is the paper's picture
# of attention in one formula.
#
# Starting from a uniform $t$, $a_{ji} = 1/(|x^m|+1)$, so **one EM step from uniform gives the
# normalised count table** (with NULL counted as one more input word). The vectorised E-step
# works in "entry order": the points are sorted by table entry once, so reading $t$ is
# sequential, and $Z_j$ and the counts are each one `np.bincount`.

# %%
show(ibm1.e_step_np)
show(ibm1.m_step_np)
show(ibm1.em_np)

ex = ibm1.make_bitext(EX_SRC, EX_TGT)                           # with NULL from here on
t_one, _ = ibm1.em_np(ex, 1)
C = ibm1.count_table_np(ex)
C_norm = C / np.bincount(ex.entry_src, weights=C)[ex.entry_src]
print(f"one EM step from uniform vs the normalised count table: max |diff| = "
      f"{np.abs(t_one - C_norm).max():.1e}")

# %% [markdown]
# Now watch EM sharpen the table on the 6-pair example. "book" → *buch* wins because *das* is
# already explained by "the" in the other pairs: EM's competition between explanations is what
# the raw counts lack. The log-likelihood can only go up.

# %%
shown = [0, 1, 2, 3, 5, 10]
tables, t, loglik = {}, ibm1.uniform_table(ex), []
for it in range(max(shown) + 1):
    if it in shown:
        tables[it] = ibm1.to_dense(t, ex)
    counts, ll = ibm1.e_step_np(t, ex)
    t = ibm1.m_step_np(counts, ex)
    loglik.append(ll)
print("log-likelihood per iteration:", " ".join(f"{v:.2f}" for v in loglik))
assert np.all(np.diff(loglik) >= -1e-9)

src_labels = ["NULL"] + ex.src_vocab[1:]
fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), constrained_layout=True)
for ax, (it, table) in zip(axes.ravel(), tables.items()):
    im = plots.plot_table(ax, table, src_labels, ex.tgt_vocab, vmax=1.0,
                         title=f"t(y | x) after {it} EM steps")
fig.colorbar(im, ax=axes, shrink=0.6, label="t(y | x)  (0 where x and y never co-occur)")
L.savefig(fig, "em_iterations")
print("top translations of 'book':", ibm1.top_translations(t, ex, "book"))

# %% [markdown]
# ### Textbook mode and NLTK mode
#
# `nltk.translate.IBMModel1` is the reference most people reach for. `mode="nltk"` reproduces it
# exactly; the differences from the textbook algorithm are conventions, not bugs, but they change
# the numbers:
#
# | | textbook (`mode="textbook"`) | NLTK (`mode="nltk"`) |
# |---|---|---|
# | NULL word | optional (`null=`) | always |
# | start value | any constant (we use $1/|V_y|$) | $1/|V_y|$ |
# | M-step | $t = \mathrm{count}/\sum$ | $\max(t, 10^{-12})$ |
# | output word repeated $k$ times in a sentence | each token counts | the $k$ tokens share one count ($1/k$ each: NLTK normalises per word *type*) |
# | $t(y \mid x)$ for $x, y$ that never co-occur | not stored (0) | $1/|V_y|$, never updated |
#
# With repeats NLTK's EM still increases a likelihood — the one in which each output word *type*
# of a sentence is generated once. Below: our NLTK mode against NLTK itself, and the numbers
# NLTK's documentation prints.

# %%
from nltk.translate import IBMModel1  # noqa: E402  (the reference implementation)

nltk_bitext = ibm1.nltk_bitext(EX_SRC, EX_TGT)                 # AlignedSent(words=y, mots=x)
nltk_model = IBMModel1(nltk_bitext, 5)
t_nltk_mode, _ = ibm1.em_np(ex, 5, mode="nltk")
print(f"ours (nltk mode) vs NLTK, 5 iterations: max |diff| = "
      f"{np.abs(t_nltk_mode - ibm1.table_from_nltk(nltk_model, ex)).max():.1e}")
for x, y in [("book", "buch"), ("book", "das"), (None, "buch"), (None, "ja")]:
    print(f"  t({y} | {x or 'NULL'}) = {t_nltk_mode[ibm1.entry_index(ex, x, y)]:.3f}"
          f"   (NLTK's docstring: {nltk_model.translation_table[y][x]:.3f})")
viterbi = ibm1.alignments(ex, ibm1.viterbi_np(t_nltk_mode, ex))
print("Viterbi alignment of pair 2, (target j, source i):", viterbi[2],
      "| NLTK:", sorted(nltk_bitext[2].alignment))

# %% [markdown]
# ## 4. A real corpus: English → German Bible verses
#
# 31,102 verses of the World English Bible and a German Bible, aligned verse by verse
# (`minattn.tools.data.load_parallel`, fetched by `python data_scripts/fetch_all.py`). Without the
# data the lesson falls back to a synthetic corpus built from a hidden dictionary.

# %%
n_verses = L.size(full=None, smoke=1500)
iterations = L.size(full=10, smoke=5)
try:
    from minattn.tools.data import DatasetMissing, load_parallel, tokenize
    try:
        pairs = load_parallel(pair="en-de")
        pairs = pairs if n_verses is None else pairs[:n_verses]
        sources = [tokenize(en) for en, _ in pairs]
        targets = [tokenize(de) for _, de in pairs]
        corpus_name = f"Bible en→de, {len(pairs):,} verses"
        common = ["god", "lord", "king", "son", "father", "house", "land", "people", "day",
                  "water", "bread", "heaven", "earth", "man", "woman", "brother"]
    except DatasetMissing as exc:
        raise ImportError(exc) from exc
except ImportError as exc:
    print(f"Bible corpus unavailable ({str(exc).splitlines()[0]}); using a synthetic "
          f"dictionary corpus instead.")
    sources, targets, _ = tasks.dictionary_corpus(L.size(full=5000, smoke=800), 60, rng,
                                                 n_function=5)
    corpus_name = "synthetic dictionary corpus"
    common = [f"x{k:02d}" for k in range(12)]

start = time.perf_counter()
bible = ibm1.make_bitext(sources, targets)
t_index = time.perf_counter() - start
start = time.perf_counter()
t_bible, ll_bible = ibm1.em_np(bible, iterations)
t_em = time.perf_counter() - start
print(f"{corpus_name}: {len(bible.src_vocab) - 1:,} English / {len(bible.tgt_vocab):,} German "
      f"words, {len(bible.point_entry):,} alignment points, {len(bible.entry_src):,} stored "
      f"table entries ({len(bible.entry_src) / ((len(bible.src_vocab)) * len(bible.tgt_vocab)):.2%}"
      f" of the dense table)")
print(f"indexing {t_index:.2f} s, {iterations} EM iterations {t_em:.2f} s; log-likelihood "
      f"{ll_bible[0]:.4g} -> {ll_bible[-1]:.4g}")

common = [w for w in common if w in bible.src_index]
print("\ntop translations t(y | x):")
for x in common:
    best = ibm1.top_translations(t_bible, bible, x, 3)
    print(f"  {x:>8} -> " + ", ".join(f"{y} {p:.2f}" for y, p in best))

# %% [markdown]
# The torch version of the EM step is the same computation with `index_add_` in place of
# `np.bincount`; it runs on a GPU when there is one. Same numbers:

# %%
show(ibm1.em_step_torch)
t_torch, _ = ibm1.em_torch(bible, iterations, device=L.device)
print(f"torch ({L.device}) vs NumPy after {iterations} iterations: max |diff| = "
      f"{np.abs(t_torch - t_bible).max():.1e}")

# %% [markdown]
# ### The count table against the trained table
#
# Rows: common English words; columns: their EM translations plus the four most frequent German
# tokens. One EM step (the normalised count table, left) spreads each row over the frequent
# tokens — ",", *und*, "." and *der* co-occur with everything. EM (right) explains those by
# ",", "and", "." and "the" (and NULL), and each row concentrates on its translation.

# %%
t_first, _ = ibm1.em_np(bible, 1)
rows = [bible.src_index[x] for x in common]
frequent = np.argsort(-np.bincount(bible.tgt_ids))[:4]
cols = list(dict.fromkeys([bible.tgt_index[ibm1.top_translations(t_bible, bible, x, 1)[0][0]]
                           for x in common] + list(frequent)))
fig, axes = plt.subplots(1, 2, figsize=(15, 6))
for ax, (table, title) in zip(axes, [(t_first, "1 EM step = normalised count table"),
                                     (t_bible, f"{iterations} EM steps")]):
    dense = ibm1.to_dense(table, bible)[np.ix_(rows, cols)]
    im = plots.plot_table(ax, dense, common, [bible.tgt_vocab[c] for c in cols],
                         title=f"{corpus_name}: {title}", vmax=dense.max())
    fig.colorbar(im, ax=ax, shrink=0.8, label="t(y | x)")
fig.tight_layout()
L.savefig(fig, "bible_tables")

# %% [markdown]
# ### Alignments of a few verses
#
# The alignment posteriors $a_{ji}$ of a trained model, drawn like attention maps (rows =
# output positions, columns = input positions, NULL first). Lesson 05 puts its LSTM's attention
# maps beside these with the same `plots.plot_alignment`.

# %%
# three short verses made of frequent words (rare names teach little)
src_freq = np.bincount(bible.src_ids, minlength=len(bible.src_vocab))
short = [m for m in range(bible.n_pairs)
         if 6 <= len(sources[m]) <= 11 and 6 <= len(targets[m]) <= 11
         and src_freq[[bible.src_index[w] for w in sources[m]]].min() >= 20][:3]
fig, axes = plt.subplots(1, len(short), figsize=(5.4 * len(short), 4.8), constrained_layout=True)
for ax, m in zip(np.atleast_1d(axes), short):
    im = plots.plot_alignment(ax, ibm1.alignment_matrix_np(t_bible, bible, m), sources[m],
                             targets[m], title=f"verse {m}: alignment posteriors")
    a = ibm1.viterbi_np(t_bible, bible)[bible.tgt_start[m]:bible.tgt_start[m + 1]]
    print(f"verse {m}: " + ", ".join(f"{y}<-{'NULL' if i < 0 else sources[m][i]}"
                                    for y, i in zip(targets[m], a)))
fig.colorbar(im, ax=axes, shrink=0.8, label="a_ji")
L.savefig(fig, "bible_alignments")

# %% [markdown]
# ## 5. The bridge to attention: the bag-of-words proxy
#
# Replace lesson 05's network by what it is early in training: attention uniform, each hidden
# state replaced by its word's embedding $E[x_i] \in \mathbb{R}^d$, one linear layer $W$:
#
# $$p^{\mathrm{px}}(y \mid x^m) = \mathrm{softmax}\Big(W \frac{1}{|x^m|}\sum_i E[x_i]\Big)_y,
# \qquad \mathcal{L} = -\sum_m \sum_j \log p^{\mathrm{px}}(y^m_j \mid x^m).$$
#
# Its knowledge of single words is the logit $\theta(x, y) = w_y^\top e_x$ ("what does input word
# $x$ alone predict"). With $E, W$ drawn i.i.d. $\mathcal N(0, 1/d)$ and trained by gradient flow,
# $\dot\theta = \dot w_y^\top e_x + w_y^\top \dot e_x$. As $d$ grows, $e_x^\top e_{x'} \to [x = x']$,
# $w_y^\top w_{y'} \to [y = y']$ and the softmax starts uniform, so each of the two terms tends to
# the same quantity and (seed §4.1, MATH.md item 7)
#
# $$\dot\theta(x, y)\big|_{t=0} \;\to\; 2\Big(C(x, y) - \frac{1}{|V_y|}\sum_{y'} C(x, y')\Big).$$
#
# The proxy starts by learning exactly the count table, minus its row mean. We measure
# $\dot\theta$ with autograd at a fresh initialisation and correlate it with the prediction over
# all $(x, y)$.

# %%
show(ibm1.BagOfWordsProxy)
show(ibm1.proxy_logit_velocity)
show(ibm1.proxy_agreement)

proxy_src, proxy_tgt, _ = tasks.dictionary_corpus(L.size(full=400, smoke=150), 30,
                                                 np.random.default_rng(1), n_function=3)
proxy_bx = ibm1.make_bitext(proxy_src, proxy_tgt, null=False)
dims = L.size(full=[4, 16, 64, 256, 1024, 4096], smoke=[8, 64, 512])
seeds = L.size(full=5, smoke=2)
corr = np.array([[ibm1.proxy_agreement(proxy_bx, d, s)[0] for s in range(seeds)] for d in dims])
print("correlation of dθ/dt with 2(C - mean_y C) over all (x, y), mean ± std over seeds:")
for d, r in zip(dims, corr):
    print(f"  d = {d:5d}: r = {r.mean():.3f} ± {r.std():.3f}")

fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
for ax, d in zip(axes[:2], [dims[0], dims[-1]]):
    r, measured, predicted = ibm1.proxy_agreement(proxy_bx, d, 0)
    ax.scatter(predicted.ravel(), measured.ravel(), s=4, alpha=0.5)
    lim = np.abs(predicted).max() * 1.1
    ax.plot([-lim, lim], [-lim, lim], "k--", lw=1, label="measured = predicted")
    ax.set(xlabel="predicted 2(C(x,y) − mean_y' C(x,y'))", ylabel="measured dθ(x,y)/dt at init",
           title=f"d = {d}: r = {r:.3f}")
    ax.legend()
axes[2].errorbar(dims, corr.mean(axis=1), yerr=corr.std(axis=1), marker="o", capsize=3)
axes[2].set(xscale="log", xlabel="embedding size d", ylabel="correlation r",
            title="the prediction becomes exact as d grows")
axes[2].grid(alpha=0.3)
fig.tight_layout()
L.savefig(fig, "proxy_gradient")

# %% [markdown]
# And the permutation tasks: on 40-of-40 the prediction is exactly zero, so the proxy's word
# logits do not move on average — the diagonal ("x predicts x") gets no head start over the rest.
# On 40-of-60 it does.

# %%
d_perm = L.size(full=1024, smoke=256)
for name, bx in perm_bitexts.items():
    if "two" in name:
        continue
    _, measured, _ = ibm1.proxy_agreement(bx, d_perm, 0)
    same = np.array([[bx.src_vocab[1:][i] == bx.tgt_vocab[j] for j in range(len(bx.tgt_vocab))]
                     for i in range(len(bx.src_vocab) - 1)])
    print(f"{name:20s} d = {d_perm}: mean dθ/dt on the diagonal {measured[same].mean():+8.3f}, "
          f"off it {measured[~same].mean():+8.3f}")

# %% [markdown]
# ## What we learned
#
# * The count table $C(x, y)$ is what uniform attention "sees": each output token credits all
#   input tokens of its sentence equally. One EM step of IBM Model 1 from uniform is the
#   normalised count table; more EM steps let input words compete to explain each output word.
# * The bag-of-words proxy's word logits start moving at a rate $2(C - \text{row mean})$ — the
#   correlation we measured (full mode, 5 seeds) goes from about 0.4 at $d = 4$ to 0.99 at
#   $d = 1024$ and 0.998 at $d = 4096$.
# * Where $C$ is flat (40-of-40 copying, each block of the two-set mixture) the first-order
#   signal is zero: KTIW is not learned early, attention has nothing to be attracted to, and
#   lesson 05's copying can fail. Where $C$ has structure (40-of-60), it learns.
# * The paper's claims here are qualitative (its Figure 4 draws these tables); what we
#   reproduce is the flat/structured contrast and the $d \to \infty$ limit of the gradient.
#
# ## Exercises
#
# **6.1 — the E-step.** In a student copy (`python -m minattn.tools.exercises student DIR`),
# `minattn/ibm1.py::e_step_np` raises `NotImplementedError`. Compute $Z_j$, the expected counts
# and the log-likelihood with `np.take` and `np.bincount` only — no loop over sentences.
# Check: `pytest tests/test_ibm1.py --exercises`.
#
# **6.2 — the M-step.** Implement `m_step_np`: normalise the counts of each source word $x$ over
# all $y$ and apply the floor. The tests of 6.2 run the full EM, so they need 6.1 as well.
#
# **6.3 — think.** (a) Why can EM never break the symmetry of the 40-of-40 table, whatever the
# number of iterations? (b) Drop NULL (`make_bitext(..., null=False)`) on the Bible: what do
# *und* and *die* align to now? (c) In NLTK mode a German word repeated twice in one verse
# counts once. Construct a 2-pair corpus where this changes the Viterbi alignment.
