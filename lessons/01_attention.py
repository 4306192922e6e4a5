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
# 2. see why the scores are divided by $\sqrt{d}$;
# 3. meet the older *additive* score (Bahdanau) beside the dot product;
# 4. derive the backward pass and check it against PyTorch's autograd;
# 5. meet the PyTorch version, multi-head attention, and PyTorch's own modules;
# 6. see what attention cannot know on its own: the order of its inputs;
# 7. train a model on **associative recall**, a task that needs content-based lookup, and
#    watch each query find its key while a model that only averages the pairs stays at the
#    level of guessing;
# 8. measure what attention costs as sequences grow.
#
# Every function is written twice: a NumPy reference (`*_np`) that states the math, and a
# PyTorch twin (`*_torch`, or an `nn.Module`) that runs on a GPU. Run time: about a minute on a
# 2-core laptop CPU (`MINATTN_SMOKE=1`: a few seconds).

# %%
import numpy as np
import torch
import torch.nn.functional as F
import matplotlib.pyplot as plt

from minattn.tools.lesson import Lesson, show
from minattn.plots import heatmap, plot_curves
from minattn.tools.utils import set_seed
from minattn.attention import (softmax_np, attention_np, attention_backward_np, attention_torch,
                               fast_attention_torch, multi_head_attention_np, MultiHeadAttention,
                               causal_mask_np, causal_mask_torch, additive_scores_np,
                               additive_scores_torch)

L = Lesson("01_attention")  # on a CPU: one torch thread (see Lesson)

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
L.savefig(fig, "three_tokens")

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
# (the argument of Vaswani et al., "Attention Is All You Need", 2017, §3.2.1). Without scaling,
# scores spread out as $\sqrt d$ grows, the softmax saturates towards a one-hot vector, and its
# Jacobian $\partial P / \partial S = \mathrm{diag}(P) - PP^\top$ goes to zero — the gradient that
# should teach the model where to look vanishes. Dividing by $\sqrt d$ keeps the scores at unit
# variance for every $d$. First the variance itself, then its consequences: random queries and
# keys, 64 keys per query, 500 queries per $d$ (100 in smoke mode).

# %%
rng = set_seed(0)
n_samples = L.size(full=200_000, smoke=2_000)
dot = (rng.standard_normal((n_samples, 64)) * rng.standard_normal((n_samples, 64))).sum(-1)
print(f"d = 64: variance of q·k = {dot.var():.1f}, of q·k/√d = {(dot / 8).var():.3f} "
      f"({n_samples:,} random pairs)")
L.claim("q·k of independent unit-variance entries has variance d, hence the 1/√d",
        paper="variance d_k (Vaswani et al. 2017, §3.2.1, footnote 4)",
        ours=f"{dot.var():.1f} at d = 64 ({n_samples:,} samples)", why="sampling error only")


# %%
def softmax_statistics(d, scaled, rng, n_queries=500, n_keys=64):
    """Mean entropy (in nats), max weight and Jacobian norm of softmax(q·k [/√d]) rows."""
    q = rng.standard_normal((n_queries, 1, d))
    k = rng.standard_normal((n_queries, n_keys, d))
    scores = (q @ k.transpose(0, 2, 1))[:, 0] / (np.sqrt(d) if scaled else 1.0)
    p = softmax_np(scores)
    entropy = -(p * np.log(np.clip(p, 1e-300, None))).sum(-1)
    # ||diag(p) - p pᵀ||_F² = Σ p_j² - 2 Σ p_j³ + (Σ p_j²)²
    s2, s3 = (p ** 2).sum(-1), (p ** 3).sum(-1)
    jacobian = np.sqrt(np.clip(s2 - 2 * s3 + s2 ** 2, 0, None))  # clip rounding below 0
    return entropy.mean(), p.max(-1).mean(), jacobian.mean()


dims = [2, 8, 32, 128, 512, 2048]
n_queries = L.size(full=500, smoke=100)
stats = {scaled: np.array([softmax_statistics(d, scaled, rng, n_queries) for d in dims])
         for scaled in (True, False)}
print(f"{'d':>6} | {'entropy /√d':>11} {'raw':>6} | {'max w /√d':>9} {'raw':>6} | {'Jacobian /√d':>12} {'raw':>6}")
for i, d in enumerate(dims):
    print(f"{d:>6} | {stats[True][i, 0]:11.3f} {stats[False][i, 0]:6.3f} | "
          f"{stats[True][i, 1]:9.3f} {stats[False][i, 1]:6.3f} | {stats[True][i, 2]:12.3f} {stats[False][i, 2]:6.3f}")
shrink = stats[False][-1, 2] / stats[True][-1, 2]
print(f"at d = {dims[-1]}: the unscaled Jacobian is {shrink:.2f} of the scaled one")
L.claim("without 1/√d, large d pushes the softmax into regions of extremely small gradients",
        paper="qualitative, no number (Vaswani et al. 2017, §3.2.1)",
        ours=f"Jacobian norm {shrink:.2f}× the scaled one at d = {dims[-1]} (64 keys)",
        why="random q and k, not a trained model's")

fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), layout="constrained")
titles = ["entropy of the weights (nats)", "largest weight", "‖∂softmax/∂scores‖"]
for col, title in enumerate(titles):
    for scaled, style in ((True, "o-"), (False, "s--")):
        axes[col].plot(dims, stats[scaled][:, col], style, label="q·k/√d" if scaled else "q·k")
    axes[col].set_xscale("log", base=2)
    axes[col].set_xlabel("d")
    axes[col].set_title(title)
    axes[col].grid(alpha=0.3)
axes[0].axhline(np.log(64), color="gray", lw=0.8, ls=":", label="uniform over 64 keys")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3)
fig.suptitle("Unscaled scores saturate the softmax as d grows; scaled ones do not")
L.savefig(fig, "why_sqrt_d")

# %% [markdown]
# With scaling, all three curves are flat: attention behaves the same at $d = 2$ and $d = 2048$.
# Without it, the weights collapse onto one key (read the largest weight in the raw column), and
# the Jacobian — the size of the learning signal reaching the scores — first rises a little
# (moderately sharp weights are the most sensitive) and then falls well below the scaled
# softmax's, and it keeps falling as $d$ grows.
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
# space-efficient in practice" (Vaswani et al.): a dot-product score is one matrix product,
# while the additive score must build an $L_q \times L_k \times h$ tensor before reducing it.
# Lesson 05's LSTM translator uses these scores; lesson 04 keeps the dot product but splits it
# into a content term and a position term.

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
# scores for $N$ queries and $N$ keys with $d = h = 64$, one head, timed side by side:

# %%
from minattn.tools.bench import time_interleaved
from minattn.tools.tables import fmt_bytes, fmt_time

n = L.size(full=512, smoke=64)
gen = torch.Generator().manual_seed(0)
qs, ks = (torch.randn(n, 64, generator=gen).to(L.device) for _ in range(2))
w_q, w_k = (torch.randn(64, 64, generator=gen).to(L.device) / 8 for _ in range(2))
v_a = torch.randn(64, generator=gen).to(L.device)
times = time_interleaved({"dot": lambda: qs @ ks.T / 8,
                          "additive": lambda: additive_scores_torch(qs, ks, w_q, w_k, v_a)},
                         repeats=L.size(full=5, smoke=2), device=L.device)
ratio = times["additive"] / times["dot"]
print(f"N = {n}: dot-product scores {fmt_time(times['dot'])}, "
      f"additive {fmt_time(times['additive'])} "
      f"({ratio:.0f}× slower); additive's N×N×h intermediate: {fmt_bytes(n * n * 64 * 4)} "
      f"vs {fmt_bytes(n * n * 4)} of scores")
L.claim("dot-product attention is much faster and more space-efficient than additive attention",
        paper="qualitative, no number (Vaswani et al. 2017, §3.2.1)",
        ours=f"scores {ratio:.0f}× faster, 64× less memory (an N×N×h intermediate vs N×N "
             f"scores; N = {n}, d = h = 64, {L.device.type})",
        why="one head, float32; the ratio depends on the hardware")

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
# the mask removed. (FlashAttention computes exactly these formulas, block by block, recomputing
# $P$ instead of storing it — as our function does.)

# %%
show(attention_backward_np)

# %%
rng = set_seed(1)
q, k, v = rng.standard_normal((2, 4, 5, 8)), rng.standard_normal((2, 4, 7, 8)), rng.standard_normal((2, 4, 7, 6))
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
# Agreement to ~1e-16: the hand-derived gradient *is* what autograd computes.
#
# ## 5. The PyTorch version, and PyTorch's own
#
# The torch twin repeats the NumPy function line for line, so autograd differentiates exactly
# the math above. It materialises the $L_q \times L_k$ weights, which we want when we look at them.
# When we do not, `F.scaled_dot_product_attention` (SDPA) computes the same output with a fused
# kernel that never stores the weights — $O(N)$ memory instead of $O(N^2)$.

# %%
show(attention_torch)
show(fast_attention_torch)

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
err_out, err_w = (got - expected).abs().max().item(), (got_w.mean(1) - expected_w).abs().max().item()
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
# So "dog bites man" and "man bites dog" look the same to attention alone. Models that care
# about order add it to the input: a position embedding added to each token (the Transformer's
# sinusoids), or a position term inside the score (lesson 04's relative positions); lesson 03's
# model deliberately uses none. The task below is a *set* lookup, where order carries no
# information, so one attention layer without positions suits it.
#
# ## 7. A task that needs content lookup: associative recall
#
# The model sees a set of **(key, value) pairs** — "c→7, q→2, a→7, …" — and then every key again
# as a question: "what was stored under q?". Keys are distinct in an example, values may repeat,
# and the questions come in a random order, so neither position nor frequency gives the answer
# away. To answer, a model must **find the pair whose key matches the question and read its
# value**: content-based lookup, which is what attention does in one step.
#
# Each pair is one token, $e_{\text{key}} + e_{\text{value}}$; each question is $e_{\text{key}}$.
# The attention model is one multi-head attention layer from the questions to the pairs, and a
# linear read-out. The baseline has the same embeddings and a larger MLP, but sees the pairs
# only through their **mean** — which keeps *which* keys and values occur and loses *which value
# sat next to which key*. Without that binding the best it can do is to guess the value that
# occurs most often among the pairs; we compute that floor on the held-out set.

# %%
from minattn.tasks import associative_recall
from minattn.models import RecallAttention, RecallMeanPool, count_parameters
from minattn.tools.train import train

show(associative_recall)
show(RecallAttention)

# %%
N_PAIRS, N_KEYS, N_VALUES = L.size(full=16, smoke=8), L.size(full=64, smoke=16), L.size(full=64, smoke=16)
STEPS, BATCH = L.size(full=600, smoke=40), L.size(full=128, smoke=32)

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
    model = model_class(N_KEYS, N_VALUES).to(L.device)
    train_gen = torch.Generator().manual_seed(seed)
    held_out = associative_recall(1024, N_PAIRS, N_KEYS, N_VALUES, torch.Generator().manual_seed(10_000), L.device)
    history = train(model, lambda step: (associative_recall(BATCH, N_PAIRS, N_KEYS, N_VALUES, train_gen, L.device),),
                    recall_loss, steps=STEPS, lr=3e-3, evaluate=lambda: {"accuracy": accuracy(model, held_out)},
                    eval_every=max(STEPS // 30, 1), desc=model_class.__name__)
    return model, history, held_out


attention_model, attention_history, held_out = run(RecallAttention, seed=0)
pooling_model, pooling_history, _ = run(RecallMeanPool, seed=0)
floor = most_frequent_value_accuracy(held_out)
print(f"{'model':<16} {'parameters':>10} {'held-out accuracy':>18}")
for name, model, hist in (("attention", attention_model, attention_history),
                          ("mean pooling", pooling_model, pooling_history)):
    print(f"{name:<16} {count_parameters(model):>10,} {hist.last('accuracy'):>18.3f}")
print(f"floor, always guess the most frequent value: {floor:.3f}    chance (1/{N_VALUES}): {1 / N_VALUES:.3f}")

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
L.savefig(fig, "recall_training")

# %% [markdown]
# The attention model solves the task. The pooling model, with more parameters, ends at the
# dashed line: the accuracy of always answering with the most frequent value among the pairs,
# all a model that cannot bind keys to values can reach. (This shows that *averaging* fails,
# not that every model without attention does: a recurrent network or a deep enough MLP over
# the concatenated pairs could in principle learn the binding, at a much higher cost.)
#
# Where does each question look? Below, one held-out example: rows are the questions, columns
# the pairs, ordered as they appeared; the red circles mark the pair that holds each answer.

# %%
attention_model.eval()
with torch.no_grad():
    one = {name: t[:1] for name, t in held_out.items()}
    _, w = attention_model(one["queries"], one["keys"], one["values"], need_weights=True)
weights = w[0].mean(0).cpu().numpy()  # (Q, P), averaged over heads
key_names = [f"k{key}→{val}" for key, val in zip(one["keys"][0].tolist(), one["values"][0].tolist())]
ask_names = [f"k{key}?" for key in one["queries"][0].tolist()]
fig, ax = plt.subplots(figsize=(8, 6.5), layout="constrained")
image = heatmap(ax, weights, key_names, ask_names, vmax=1,
                title="attention of each question over all the pairs\n"
                      "(red circle: the pair that holds the answer)")
ax.set_xlabel("pair (key→value), in input order")
ax.set_ylabel("question")
ax.scatter(one["source"][0].cpu().numpy(), np.arange(N_PAIRS), s=90, facecolors="none",
           edgecolors="red", lw=1.5)
fig.colorbar(image, ax=ax, label="attention weight (mean over heads)")
L.savefig(fig, "recall_attention_map")
found = (w[0].mean(0).argmax(-1) == one["source"][0]).float().mean().item()
on_answer = w[0].mean(0).gather(-1, one["source"][0][:, None]).mean().item()
print(f"share of questions whose largest weight is on the right pair: {found:.2f}; "
      f"mean weight on that pair: {on_answer:.2f}")

# %% [markdown]
# Each question puts nearly all its weight on the one pair whose key matches: the model has
# learned to use $W_Q$ and $W_K$ to compare key identities, and $W_V$ to carry the value.
#
# ## 8. What it costs
#
# The weights matrix has $L_q \times L_k$ entries. A small live measurement: one forward pass of
# our explicit `attention_torch` (which stores the weights) and of the fused
# `fast_attention_torch` (PyTorch's SDPA), B = 1, H = 4, d = 64, float32, for growing $N$.
# "Extra memory" is the peak the call needs beyond its inputs.

# %%
from minattn.tools.bench import peak_memory
from minattn.tools.tables import print_table

sizes = L.size(full=[256, 512, 1024, 2048], smoke=[64, 128])
time_, memory, rows = {}, {}, []
for n in sizes:
    gen = torch.Generator().manual_seed(n)
    qkv = [torch.randn(1, 4, n, 64, generator=gen).to(L.device) for _ in range(3)]
    fns = {"ours": lambda: attention_torch(*qkv), "SDPA": lambda: fast_attention_torch(*qkv)}
    time_[n] = time_interleaved(fns, repeats=L.size(full=5, smoke=2), device=L.device)
    memory[n] = {name: peak_memory(fn, L.device) for name, fn in fns.items()}
    rows.append({"N": n, "ours, time": fmt_time(time_[n]["ours"]),
                 "SDPA, time": fmt_time(time_[n]["SDPA"]),
                 "ours, extra memory": fmt_bytes(memory[n]["ours"]),
                 "SDPA, extra memory": fmt_bytes(memory[n]["SDPA"])})
print_table(rows, list(rows[0]))
n1, n2 = sizes[-2], sizes[-1]
grow = {name: time_[n2][name] / time_[n1][name] for name in ("ours", "SDPA")}
mem_grow = f"{memory[n2]['ours'] / memory[n1]['ours']:.1f}" if memory[n1]["ours"] else "?"
print(f"\nN {n1} -> {n2} (×2): our time ×{grow['ours']:.1f}, SDPA's time ×{grow['SDPA']:.1f}; "
      f"our memory ×{mem_grow}; 4 heads of N×N float32 weights at N = {n2}: "
      f"{fmt_bytes(16 * n2 * n2)}")

# %% [markdown]
# Read the ratios in the last line. Our memory grows with $N^2$ (×4 per doubling): it stores the
# scores and weights, $N \times N$ per head. The fused kernel never stores them — it walks over
# blocks of keys keeping a running max and sum (the "online softmax") — so its extra memory
# stays small. It still *computes* all $N^2$ scores, so its time also grows faster than $N$;
# at small $N$ fixed overheads blur the ratio. Full tables (NumPy, naive torch, ours, SDPA,
# forward and backward, longer sequences) are written by `python benchmarks/attention.py
# --markdown` to [`benchmarks/README.md`](../benchmarks/README.md). Lesson 02 makes time *and*
# memory linear, by letting each query see only a window of keys.
#
# ## Summary
# * Attention = scores (dot products), softmax (stable: subtract the max per row; masked:
#   $-\infty$, empty rows give zeros), weighted sum of values.
# * Divide by $\sqrt d$ to keep the scores at unit variance and the softmax out of saturation.
# * Additive (Bahdanau) scores, $v_a^\top\tanh(W_q q + W_k k)$, are an MLP per pair; the dot
#   product computes a score per pair with one matrix product, which is why it won.
# * The backward pass needs only $P$ and one row sum per query.
# * Multi-head attention = the same operation on $H$ learned projections, batched.
# * Attention alone ignores order (permutation equivariance); position must be added.
# * On associative recall one attention layer finds the right pair; a model that averages the
#   pairs stays at the accuracy of guessing the most frequent value.
# * Explicit attention stores $N^2$ weights; the fused kernel does not, but still does $N^2$ work.
#
# ## Exercises
# Build a student copy (`make student`, or `python -m minattn.tools.exercises student DIR`),
# work in it, and check yourself with `make exercises` (or `python -m pytest --exercises 1.1`).
#
# * **1.1** implement, ~20 min — `softmax_np` in `minattn/attention.py` (and its torch twin
#   `softmax_torch`): a numerically stable softmax over the last axis with an optional boolean
#   mask; masked entries get 0, all-masked rows give all zeros.
# * **1.2** implement, ~15 min — `attention_np` (and `attention_torch`): scores, masked softmax,
#   weighted sum of values.
# * **1.3** implement, ~30 min — `attention_backward_np`: $\partial Q$, $\partial K$,
#   $\partial V$ from $\partial O$, using the formulas of section 4.
# * **1.4** predict, ~10 min — in `minattn/answers/attention.py`: append a fourth token
#   identical to "the" to section 1's example. What total weight does query "the" put on the
#   two "the" tokens? Work it out on paper, then check with `attention_np`.
# * **1.5** experiment, ~10 min — in `minattn/answers/attention.py`: run
#   `softmax_statistics(64, True, rng, n_queries=200, n_keys=4096)` and report the mean
#   Jacobian norm of the scaled softmax over 4096 keys. Compare with 64 keys: what does a long
#   context do to the learning signal of each score?
#
# To think about:
# 1. Train `RecallAttention` with `num_heads=4`. Do all heads find the right pair?
# 2. Replace the pair tokens by two tokens per pair ("k", "v", "k", "v", …). Why does one
#    attention layer no longer suffice? (Hint: the value token must first learn which key
#    precedes it — and without positions it cannot even tell which key that is.)
# 3. The additive score has a hidden layer; can it express scores that $q^\top W k$ cannot?
