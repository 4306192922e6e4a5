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
# # Lesson 04 — Transformer-XL: a memory across segments, and positions that are distances
#
# A Transformer language model reads a fixed window. Train it on a long text cut into segments
# of $L$ characters and two things go wrong. Nothing flows between segments, so the model can
# never use anything more than $L$ characters back; and the first characters of each segment
# are predicted from almost no context at all (*context fragmentation*). At evaluation, a
# fixed-window model can avoid the second problem only by sliding its window one character at
# a time — recomputing all $L$ positions for every single prediction.
#
# Transformer-XL (Dai et al., 2019, "Transformer-XL: Attentive Language Models Beyond a
# Fixed-Length Context") keeps the hidden states of the previous segment as a **memory**, with
# the gradient stopped, and lets every layer attend over [memory ; segment]. Information then
# travels one segment further back with every layer. For that to work, positions must be
# **relative**: "position 3" means nothing when the memory and the segment each start at 0,
# but "3 characters back" always means the same.
#
# The paper makes two changes at once — the memory and the relative positions — and its
# ablation (its Tables 6 and 7) separates them. So will we. In this lesson you will:
# 1. write the relative attention score as four terms and check them by hand (NumPy);
# 2. compute the same scores with the *relative shift*, one matrix product and a reshape;
# 3. add the memory and check that reading segment by segment equals reading the text at once;
# 4. predict how far back an XL can see, and draw which states one token reaches (Fig. 2);
# 5. train, on characters of the Penn Treebank, a vanilla Transformer, the same model with
#    relative positions but no memory, and Transformer-XL — and split XL's gain between them;
# 6. evaluate with a longer memory than in training, on text and on a task built so that it
#    can pay off, with and without clamping the distances (`clamp_len`);
# 7. see what a token can *see* against what the model *learns* to use, and test whether the
#    stop-gradient is to blame;
# 8. measure evaluation with a memory against recomputing the window for every character, and
#    (9) run the training script on several processes or machines (DDP).
#
# Run time: about 9 minutes of one CPU thread, most of it training nine language models (three
# models, three seeds); `MINATTN_SMOKE=1`: seconds. `MINATTN_SCALE=paper` sets the sizes of the
# authors' enwik8 base model and budget (days on GPUs) and runs the whole copy-distance sweep.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from minattn.attention import causal_mask_np
from minattn.course.data import DatasetMissing, load_lm_text
from minattn.course.estimates import estimate
from minattn.course.lesson import Lesson, show
from minattn.course.plots import heatmap
from minattn.course.tables import print_table
from minattn.course.train import count_parameters, train
from minattn.course.utils import set_seed
from minattn.xl import (
    RelMultiHeadAttention,
    TransformerXL,
    VanillaLM,
    XLLayer,
    bigram_bpc,
    char_corpus,
    claims,
    delayed_copy,
    eval_speed,
    lm_segment,
    lm_streams,
    recall_by_class,
    rel_attention_fast_torch,
    rel_attention_np,
    rel_attention_torch,
    rel_shift_np,
    relative_distances_np,
    sinusoid_np,
    synthetic_text,
    update_memory_torch,
)
from minattn.xl.train import (
    dependency_cone,
    evaluate_bpc,
    evaluate_bpc_sliding,
    farthest_visible,
    generate,
    lm_loss,
    recurrent_lm_loss,
    stream_accuracy,
    stream_predictions,
)

lesson = Lesson("04_xl")  # on a CPU: one torch thread (see Lesson)

# %% [markdown]
# ## 1. Relative attention, term by term
#
# The queries are the $L$ segment positions; the keys are the $M + L$ positions of
# [memory ; segment]. Query $i$ sits at position $M + i$, so its distance to key $j$ is
# $\delta_{ij} = M + i - j$, and it may look at key $j$ only if $\delta_{ij} \ge 0$ (the
# course's bottom-right causal mask). With $R_\delta$ a sinusoid encoding of the distance
# $\delta$, $r_\delta = W_R R_\delta$ its projection in one head, and two learned vectors
# $u, v$ per head, the score is
#
# $$A_{ij} = \underbrace{q_i^\top k_j}_{(a)\ \text{content}}
#          + \underbrace{q_i^\top r_{\delta_{ij}}}_{(b)\ \text{content-dependent position}}
#          + \underbrace{u^\top k_j}_{(c)\ \text{global content bias}}
#          + \underbrace{v^\top r_{\delta_{ij}}}_{(d)\ \text{global position bias}},
# \qquad \mathrm{out}_i = \sum_{j:\ \delta_{ij}\ge 0}
# \mathrm{softmax}_j\!\Big(\tfrac{A_{ij}}{\sqrt{d_h}}\Big)\, v_j .$$
#
# Compared with lesson 01, (a) is the usual score; (b) replaces "query meets the absolute
# position of key $j$" by "query meets the distance to key $j$"; (c) and (d) replace the
# query in those two terms by a vector that is the same for every query — "some keys are
# interesting wherever I stand", "some distances are interesting whoever I am".
#
# The NumPy reference gathers $r_{\delta_{ij}}$ for every pair and writes the four terms out:

# %%
show(rel_attention_np)
print(relative_distances_np(3, 5))  # 3 queries, 2 memory slots + 3 segment positions

# %% [markdown]
# Row $i$ of the distance table counts down from $M + i$ to $0$ along the keys, and goes
# negative in the future — the causal mask removes exactly those entries.
#
# A check by hand: one query, one memory key and one segment key, and $q = k = 0$, so only
# term (d) is left. With $r_0 = (0, 0)$, $r_1 = (1, 1)$ and $v = (\sqrt 2, 0)$: the memory key
# (distance 1) scores $\sqrt2 \cdot 1/\sqrt{2} = 1$ and the query's own position (distance 0)
# scores $0$, so the weights are $e/(e+1)$ and $1/(e+1)$.

# %%
q, k = np.zeros((1, 1, 1, 2)), np.zeros((1, 1, 2, 2))
values = np.array([[[[1.0, 0.0], [0.0, 1.0]]]])
r = np.array([[[0.0, 0.0], [1.0, 1.0]]])  # (H, P, dh): r_0, r_1
out, weights = rel_attention_np(q, k, values, r, np.zeros((1, 2)), np.array([[math.sqrt(2), 0.0]]))
print("weights:", weights[0, 0, 0].round(4), " by hand:",
      np.round([np.e / (np.e + 1), 1 / (np.e + 1)], 4))
assert np.allclose(weights[0, 0, 0], [np.e / (np.e + 1), 1 / (np.e + 1)])

# %% [markdown]
# The torch twin repeats the reference line for line; in float64 they agree to rounding:

# %%
rng = set_seed(0)
B, H, Lq, M, dh = 2, 4, 6, 5, 8
arrays = (rng.normal(size=(B, H, Lq, dh)), rng.normal(size=(B, H, M + Lq, dh)),
          rng.normal(size=(B, H, M + Lq, dh)), rng.normal(size=(H, M + Lq, dh)),
          rng.normal(size=(H, dh)), rng.normal(size=(H, dh)))
out_np, w_np = rel_attention_np(*arrays)
out_t, w_t = rel_attention_torch(*map(torch.tensor, arrays))
err = max(np.abs(out_np - out_t.numpy()).max(), np.abs(w_np - w_t.numpy()).max())
print(f"NumPy vs torch (float64): max |difference| = {err:.1e}")
assert err < 1e-12

# %% [markdown]
# ## 2. The relative shift: every distance with one matrix product
#
# The gather builds an $(H, L, M+L, d_h)$ tensor — $L$ times more than the keys themselves.
# The original implementation avoids it. Order the encodings by distance $M+L-1, \dots, 1, 0$
# and compute $(q_i + v)^\top r$ for *every* query against *every* distance: one matrix
# product, an $(L, M+L)$ table whose column $c$ holds distance $M+L-1-c$. The entry that query
# $i$ needs in column $j$ sits $L-1-i$ columns to the right, a different amount for every row.
# Sliding each row is a trick of memory layout: put one zero column in front, read the same
# numbers as a table of $M+L+1$ rows of $L$, drop the first row, and read them back as
# $(L, M+L)$. Watch it on a table that holds the distances themselves:

# %%
show(rel_shift_np)
Lq_demo, Lk_demo = 3, 5
by_column = np.broadcast_to(np.arange(Lk_demo - 1, -1, -1.0), (Lq_demo, Lk_demo))
print("columns ordered by distance:\n", by_column)
print("after the shift:\n", rel_shift_np(by_column))
causal = causal_mask_np(Lq_demo, Lk_demo)
assert (rel_shift_np(by_column)[causal] == relative_distances_np(Lq_demo, Lk_demo)[causal]).all()

# %% [markdown]
# Where the distance is negative (the future) the shift leaves junk from the neighbouring row;
# the causal mask hides it. The fast path splits the score: (a) + (c) $= (q + u)^\top k$ is
# ordinary attention and goes to PyTorch's fused kernel, (b) + (d) $= (q+v)^\top r$, shifted,
# arrives as an additive mask. It must equal the explicit gather on every unmasked position,
# gradients included:

# %%
explicit = [torch.tensor(a, requires_grad=True) for a in arrays]
fast = [torch.tensor(a, requires_grad=True) for a in arrays]
out_e, _ = rel_attention_torch(*explicit)
out_f = rel_attention_fast_torch(*fast)
grads_e = torch.autograd.grad(out_e.square().sum(), explicit)
grads_f = torch.autograd.grad(out_f.square().sum(), fast)
err_out = (out_e - out_f).abs().max().item()
err_grad = max((a - b).abs().max().item() for a, b in zip(grads_e, grads_f))
print(f"explicit vs relative shift: outputs {err_out:.1e}, gradients {err_grad:.1e}")
assert err_out < 1e-12 and err_grad < 1e-12

# %% [markdown]
# ## 3. The memory
#
# Each layer keeps the inputs it saw in the last $M$ positions, detached from the graph (the
# stop-gradient: training never back-propagates into the previous segment, so a step costs
# the same however long the text):

# %%
show(update_memory_torch)
show(TransformerXL.forward)

# %% [markdown]
# For one layer this is exact: reading segment 2 with the memory of segment 1 gives the same
# outputs as reading the last $M + L$ positions in one pass — the relative positions make the
# memory indistinguishable from text that is simply there. Below, one layer in float64:

# %%
torch.manual_seed(0)
layer = XLLayer(16, 2, 32).double()
x1, x2 = torch.randn(1, 8, 16, dtype=torch.float64), torch.randn(1, 8, 16, dtype=torch.float64)
M_demo = 5
by_segment, _ = layer(x2, update_memory_torch(None, x1, M_demo))
one_pass, _ = layer(torch.cat([x1[:, -M_demo:], x2], dim=1))
err = (by_segment - one_pass[:, M_demo:]).abs().max().item()
print(f"segment by segment vs one pass: {err:.1e}")
assert err < 1e-12

# %% [markdown]
# With several layers the two differ on purpose: in the pass over [memory ; segment] the
# memory positions would see only each other, while in XL they were computed with *their*
# own memory. That is how information climbs back one segment per layer.
#
# The attention weights of a small untrained layer show the structure: every query sees the
# $M$ memory keys and the segment up to itself (`need_weights=True` runs the explicit path):

# %%
attn = RelMultiHeadAttention(16, 2).double()
_, w_demo = attn(x2, x1[:, -M_demo:], need_weights=True)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
delta = relative_distances_np(8, 8 + M_demo).astype(float)
delta[delta < 0] = np.nan
im = heatmap(axes[0], delta, title="distance δ = M + i − j (blank: future)", cmap="magma_r",
             vmax=np.nanmax(delta))
fig.colorbar(im, ax=axes[0], label="δ")
im = heatmap(axes[1], w_demo[0, 0].detach().numpy(), title="weights of head 0 (untrained)")
fig.colorbar(im, ax=axes[1], label="attention weight")
for ax in axes:
    ax.axvline(M_demo - 0.5, color="cyan", lw=1.5)
    ax.set_xticks(range(0, 8 + M_demo, 2))
    ax.set_xlabel(f"key: {M_demo} memory | 8 segment positions")
    ax.set_ylabel("query (segment position)")
lesson.savefig(fig, "memory_and_distances")

# %% [markdown]
# ## 4. How far back can XL see?
#
# In one layer, the last token of a segment sees its own segment and the memory. The memory
# holds states of the layer below, and *they* saw their own memory one segment further back,
# and so on down the layers. **Predict before you run the next cell**: a 2-layer XL with
# segments of 16 and a memory of 16 — how many tokens back can the *last* token of a segment
# see? (Exercise 4.3 asks you to write it down, with the reason.) The cell measures it on
# untrained models of 1, 2 and 3 layers: it changes each earlier token, one at a time, and
# watches which changes reach the last token's prediction.

# %%
reach = {}
for n_layers in (1, 2, 3):
    torch.manual_seed(0)
    probe = TransformerXL(16, 32, 2, n_layers, mem_len=16)
    reach[n_layers] = farthest_visible(probe, seg_len=16, mem_len=16, n_segments=6,
                                       vocab_size=16)
    print(f"{n_layers} layer(s): the last token of a segment sees {reach[n_layers]} tokens back "
          f"(L − 1 + N·M = {(16 - 1) + n_layers * 16})")  # its own segment, then M per layer
lesson.claim("the longest dependency grows linearly with the depth, O(N × L)",
             "Dai et al. 2019, §3.2 and Fig. 2: O(N × L) for N layers and segments of L (= M)",
             "measured reach " + ", ".join(f"{reach[n]} for {n} layer(s)" for n in reach)
             + " with L = M = 16", "an exact count on an untrained model: no noise",
             verdict=claims.reach_grows_with_depth(layers=list(reach), reach=list(reach.values()),
                                                   seg_len=16, mem_len=16))

# %% [markdown]
# The paper draws this as a cone (its Fig. 2): a token reaches, in layer $n$, the positions
# up to $n$ memories further on. We can measure the whole cone: change one token and record
# which hidden states — at which layer and position — change. Three layers, segments of 8
# and a memory of 8, the token at position 2 changed:

# %%
show(dependency_cone)
CONE_SEG, CONE_SEGMENTS, CONE_AT = 8, 5, 2
torch.manual_seed(0)
cones = {"vanilla (each segment alone)": dependency_cone(VanillaLM(16, 32, 2, 3), CONE_SEG,
                                                         CONE_SEGMENTS, CONE_AT, 16),
         "Transformer-XL (memory 8)": dependency_cone(TransformerXL(16, 32, 2, 3, mem_len=8),
                                                      CONE_SEG, CONE_SEGMENTS, CONE_AT, 16)}
fig, axes = plt.subplots(2, 1, figsize=(9, 4.2), sharex=True)
for ax, (name, cone) in zip(axes, cones.items()):
    ax.imshow(cone, origin="lower", cmap="Blues", vmin=0, vmax=1.3, aspect="auto")
    for b in range(1, CONE_SEGMENTS):
        ax.axvline(b * CONE_SEG - 0.5, color="gray", lw=1)
    ax.plot(CONE_AT, 0, "r*", ms=12, label="the changed token")
    ax.set_yticks(range(cone.shape[0]), ["input"] + [f"layer {n}" for n in range(1, cone.shape[0])])
    ax.set_title(f"{name}: states that change (blue)", fontsize=10)
    last = {n: int(np.flatnonzero(row).max()) for n, row in enumerate(cone)}
    print(f"{name}: the farthest changed position per layer {last}")
axes[0].legend(loc="upper right", fontsize=8)
axes[-1].set_xlabel(f"position (segments of {CONE_SEG}, separated by grey lines)")
lesson.savefig(fig, "dependency_cone")

# %% [markdown]
# The vanilla model's cone stops at the end of the token's segment, at every layer. XL's
# widens by one memory per layer — and not in layer 0: the input itself is never mixed. A
# reach of $N \cdot M$ is what the architecture *allows*; whether training *uses* it is a
# different question (sections 6 and 7).
#
# ## 5. Characters of the Penn Treebank: where does XL's gain come from?
#
# Three models of the same size — embedding, 2 layers, tied output — read the training text as
# 32 parallel streams, one segment of each per step, once per seed (seeds printed below):
#
# * **vanilla**: absolute sinusoidal positions added to the input, every segment read alone;
# * **relative, no memory**: Transformer-XL's attention (relative positions, $u$, $v$) trained
#   with a memory of 0 — the paper's "no recurrence" rows;
# * **XL**: the same, trained with a memory as long as its segment.
#
# Our layers are **pre-norm** (a LayerNorm before attention and before the feed-forward
# network, and one at the end), which trains small models without a warm-up; the paper's
# are post-norm (the official scripts leave `--pre_lnorm` off). `TransformerXL(pre_norm=False)`
# is the paper's layout, tested equal to a re-creation of the authors' module.
#
# Then we evaluate them the ways the paper does: the vanilla model on each segment alone, and
# with the paper's evaluation of its vanilla baseline (Al-Rfou et al.), a window of $L$
# characters that slides by one character per prediction, so that every character sees
# $L - 1$ characters before it; the relative model alone and with a memory it was never
# trained with; XL with its memory and without.

# %%
SEG = lesson.size(full=32, smoke=16, paper=512)
MEM = SEG
STEPS = lesson.size(full=600, smoke=6, paper=400_000)
D_MODEL, N_HEADS, N_LAYERS = lesson.size(full=(128, 4, 2), smoke=(32, 4, 2), paper=(512, 8, 12))
BATCH = lesson.size(full=32, smoke=4, paper=22)
LR = lesson.size(full=2e-3, smoke=2e-3, paper=2.5e-4)
LM_SEEDS = lesson.size(full=[0, 1, 2], smoke=[0, 1], paper=[0, 1, 2])
VALID = lesson.size(full=384, smoke=64, paper=16_384)  # characters per validation stream
EVAL_MEMS = lesson.size(full=[0, 8, 16, 32, 64, 128, 256], smoke=[0, 8, 16, 64],
                        paper=[0, 128, 256, 512, 1024, 2048, 4096])  # XL's memory at evaluation
rng = set_seed(0)
NAMES = {"enwik8": "enwik8", "ptb": "Penn Treebank characters"}
texts, texts_synthetic = None, False
for name in (["enwik8"] if lesson.scale == "paper" else []) + ["ptb"]:
    try:
        texts, corpus = [load_lm_text(name, "train"), load_lm_text(name, "valid")], NAMES[name]
        break
    except DatasetMissing as err:
        print(err)
if texts is None:
    print("-> using a synthetic text instead (numbers will differ from a real text's)")
    texts = [synthetic_text(2_000_000, rng), synthetic_text(200_000, rng)]
    corpus, texts_synthetic = "synthetic text", True
chars, (train_ids, valid_ids) = char_corpus(texts)
train_streams = lm_streams(train_ids, BATCH).to(lesson.device)
valid_streams = lm_streams(valid_ids, 16)[:, : VALID + 1].to(lesson.device)
print(f"{corpus}: {len(train_ids):,} training characters, vocabulary {len(chars)}; "
      f"validation on {valid_streams.shape[0]} × {VALID:,} characters; seeds {LM_SEEDS}")

print_table([
    dict(setting="layers, d_model, heads, d_inner", theirs="12, 512, 8, 2048",
         large="24, 1024, 8, 3072", ours=f"{N_LAYERS}, {D_MODEL}, {N_HEADS}, {4 * D_MODEL}"),
    dict(setting="layer norm", theirs="post-norm", large="post-norm", ours="pre-norm"),
    dict(setting="training: segment (tgt_len), memory (mem_len)", theirs="512, 512",
         large="768, 768", ours=f"{SEG}, {MEM}"),
    dict(setting="training: batch, steps, learning rate", theirs="22, 400,000, 2.5e-4",
         large="64, 400,000, 2.5e-4", ours=f"{BATCH}, {STEPS:,}, {LR:g}"),
    dict(setting="training loss", theirs="full", large="full", ours="full"),
    dict(setting="dropout", theirs="0.1", large="0.15", ours="none"),
    dict(setting="evaluation: segment, memory", theirs="80, 2,100", large="128, 3,800",
         ours=f"{SEG}, 0 to {EVAL_MEMS[-1]}"),
    dict(setting="evaluation: clamp_len", theirs="820", large="1,000",
         ours=f"none or {MEM + SEG - 1}"),
    dict(setting="evaluation: same_length", theirs="on", large="on", ours="off"),
], ["setting", "theirs", "large", "ours"])
print("theirs / large: the official pytorch/run_enwik8_base.sh / run_enwik8_large.sh (kimiyoung/"
      "transformer-xl)\nfull loss: cross-entropy at every position of a segment (half loss: its "
      "second half only)\nsame_length on: every character attends to exactly mem_len positions; "
      "off: character i of a segment attends to mem_len + i + 1")
fallback = "a synthetic text: no corpus was fetched (make data)" if texts_synthetic else ""

VARIANTS = {"vanilla": lambda: VanillaLM(len(chars), D_MODEL, N_HEADS, N_LAYERS),
            "relative, no memory": lambda: TransformerXL(len(chars), D_MODEL, N_HEADS, N_LAYERS,
                                                         mem_len=0, max_len=17 * MEM + SEG),
            "XL": lambda: TransformerXL(len(chars), D_MODEL, N_HEADS, N_LAYERS, mem_len=MEM,
                                        max_len=17 * MEM + SEG)}

# %% [markdown]
# Before training, a question: an untrained model that guesses uniformly over the vocabulary
# pays $\log_2 V$ bits per character. What do ours pay? The embedding is multiplied by
# $\sqrt{D}$ (as in the paper), so the input character's vector dominates the residual
# stream; the output layer is the same embedding matrix (tied), and after the final
# LayerNorm the state still points at the input character — whose logit then stands about
# $\sqrt{D}$ above the others. The untrained model is confident that every character repeats:

# %%
x0, y0 = lm_segment(valid_streams, 0, SEG)
for name, make in VARIANTS.items():
    torch.manual_seed(LM_SEEDS[0])
    model = make().to(lesson.device).eval()
    with torch.no_grad():
        logits, _ = model(x0)
    probs = logits.softmax(-1)
    own = logits.gather(-1, x0[..., None])[..., 0]
    gap = (own - (logits.sum(-1) - own) / (logits.shape[-1] - 1)).mean().item()
    print(f"untrained {name}: {lm_loss(logits, y0).item() / math.log(2):.1f} bits per character; "
          f"probability on the character it reads {probs.gather(-1, x0[..., None]).mean():.2f}; "
          f"its logit above the others' mean by {gap:.1f} (√D = {math.sqrt(D_MODEL):.1f})")
print(f"uniform guessing: log2({len(chars)}) = {math.log2(len(chars)):.2f} bits per character")

# %% [markdown]
# Training first unlearns that echo, which is why the curves below start so high. Now the
# training runs, one per model and seed:

# %%
models, curves = {}, {}
for name, make in VARIANTS.items():
    for seed in LM_SEEDS:
        torch.manual_seed(seed)
        model = make().to(lesson.device)
        if seed == LM_SEEDS[0]:
            print(f"{name}: {count_parameters(model):,} parameters")
        history = train(model, lambda step: lm_segment(train_streams, step - 1, SEG),
                        recurrent_lm_loss(), STEPS, lr=LR, desc=f"{name}, seed {seed}")
        models[name, seed] = model
        curves[name, seed] = np.array(history["loss"]) / math.log(2)

fig, ax = plt.subplots(figsize=(7, 3.8))
smooth = max(STEPS // 60, 1)
for k, name in enumerate(VARIANTS):
    per_step = np.mean([curves[name, s] for s in LM_SEEDS], axis=0)
    ax.plot(np.arange(1, STEPS + 1), per_step, color=f"C{k}", lw=0.6, alpha=0.35)
    half_width = [min(smooth // 2, t // 4) for t in range(STEPS)]  # narrow where it falls fast
    averaged = [per_step[max(t - h, 0):t + h + 1].mean() for t, h in enumerate(half_width)]
    ax.plot(np.arange(1, STEPS + 1), averaged, color=f"C{k}",
            label=f"{name} (mean of {len(LM_SEEDS)} seeds)")
ax.axhline(math.log2(len(chars)), color="gray", ls=":", label="uniform guessing")
ax.set_yscale("log")
ax.set_yticks([2, 3, 4, 6, 10, 15], ["2", "3", "4", "6", "10", "15"])
ax.set_xscale("symlog", linthresh=10)
ax.set_xlim(1, STEPS)
ax.set_xlabel("training step (linear up to 10, then logarithmic)")
ax.set_ylabel("training loss (bits per character)")
ax.set_title(f"training loss: every step (faint) and a moving average (up to {smooth} steps)",
             fontsize=10)
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
lesson.savefig(fig, "lm_curves")

# %%
show(evaluate_bpc_sliding)  # every evaluation reads the same validation characters
CLAMP = MEM + SEG - 1  # the largest distance XL met in training
LONG, ALONE = 4 * MEM, "memory 0 (each segment alone)"
bpc = {}  # (model, evaluation, seed) -> bits per character of each validation stream
for seed in LM_SEEDS:
    vanilla, relative, xl = (models[name, seed] for name in VARIANTS)
    score = lambda model, seg=SEG, **kw: evaluate_bpc(model, valid_streams, seg,  # noqa: E731
                                                        per_stream=True, **kw)
    bpc["vanilla", "each segment alone", seed] = score(vanilla)
    bpc["vanilla", "window sliding by one", seed] = evaluate_bpc_sliding(
        vanilla, valid_streams, SEG, per_stream=True)
    bpc["vanilla", f"segments of {2 * SEG} alone", seed] = score(vanilla, 2 * SEG)
    bpc["relative, no memory", f"memory {MEM}, clamp_len {SEG - 1}", seed] = score(
        relative, mem_len=MEM, clamp_len=SEG - 1)
    for m in EVAL_MEMS:
        for name, model in (("relative, no memory", relative), ("XL", xl)):
            bpc[name, ALONE if m == 0 else f"memory {m}", seed] = score(model, mem_len=m)
        if m > MEM:
            bpc["XL", f"memory {m}, clamp_len {CLAMP}", seed] = score(xl, mem_len=m,
                                                                       clamp_len=CLAMP)


per_seed = lambda name, how: [float(bpc[name, how, s].mean()) for s in LM_SEEDS]  # noqa: E731
per_stream = lambda name, how: [bpc[name, how, s] for s in LM_SEEDS]  # noqa: E731 (claims pair)
T6, T2 = "paper: Table 6, WikiText-103 ppl", "paper: Table 2, enwik8 bpc"
PAPER_ROWS = {  # Table 6: 128M-parameter models; full or half loss as named
    ("vanilla", "each segment alone"): {T6: "30.97 (absolute, half loss)"},
    ("vanilla", "window sliding by one"): {T2: "1.11 (Al-Rfou et al.)"},
    ("relative, no memory", ALONE): {T6: "29.59 full loss · 30.10 half"},
    ("relative, no memory", f"memory {MEM}"): {T6: "29.02 (full, attention 260)"},
    ("XL", f"memory {MEM}"): {T6: "27.02 (full loss)"},
    ("XL", f"memory {LONG}"): {T6: "26.77 (full, attention 500)", T2: "1.06 (memory 2,100)"},
}
rows = []
for name, how in [("vanilla", "each segment alone"), ("vanilla", "window sliding by one"),
                  ("relative, no memory", ALONE), ("relative, no memory", f"memory {MEM}"),
                  ("relative, no memory", f"memory {MEM}, clamp_len {SEG - 1}"),
                  ("XL", ALONE), ("XL", f"memory {MEM}"), ("XL", f"memory {LONG}")]:
    values = per_seed(name, how)
    rows.append({"model": name, "trained with memory": MEM if name == "XL" else 0,
                 "evaluated": how, "per seed": ", ".join(f"{v:.3f}" for v in values),
                 "mean ± SE": str(estimate(values)), T6: "", T2: "",
                 **PAPER_ROWS.get((name, how), {})})
print_table(rows, list(rows[0]))
bigram = bigram_bpc(train_ids, valid_streams, len(chars))
print(f"on the same characters: uniform guessing {math.log2(len(chars)):.3f} bpc, the bigram "
      f"model of the training text {bigram:.3f} bpc")

mean = lambda name, how: float(np.mean(per_seed(name, how)))  # noqa: E731
vanilla_alone, relative_alone = mean("vanilla", "each segment alone"), mean(
    "relative, no memory", ALONE)
relative_mem, xl_mem = mean("relative, no memory", f"memory {MEM}"), mean("XL", f"memory {MEM}")
gain = vanilla_alone - xl_mem
print(f"\nXL's gain over the vanilla model, both reading segments of {SEG}: {gain:.3f} bpc, "
      "made of")
for what, part in [("relative positions, no memory (trained and read alone)",
                    vanilla_alone - relative_alone),
                   (f"+ a memory of {MEM} at evaluation, never trained with",
                    relative_alone - relative_mem),
                   ("+ training with that memory", relative_mem - xl_mem)]:
    print(f"  {what:56s} {part:+.3f} ({part / gain:+.0%})")
longer = mean("vanilla", f"segments of {2 * SEG} alone")
print(f"the vanilla model reading segments of {2 * SEG} alone (positions it never trained on): "
      f"{longer:.3f} bpc, {'worse' if longer > vanilla_alone else 'better'} than "
      f"{vanilla_alone:.3f} for segments of {SEG}")

why_scale = (f"{STEPS} steps of {BATCH}×{SEG} characters on a CPU, {N_LAYERS} layers of "
             f"{D_MODEL}, against 400K steps of 128M-parameter models on GPUs")
lesson.claim("relative positions beat absolute ones, without recurrence",
             "Table 6 (WikiText-103, no recurrence, half loss): relative 30.10 vs absolute "
             "(Vaswani et al.) 30.97 ppl",
             f"{corpus}, each segment alone, full loss: relative {relative_alone:.3f} vs vanilla "
             f"{vanilla_alone:.3f} bpc", why_scale + "; full loss, where the paper's absolute "
             "encodings needed the half loss",
             verdict=claims.relative_beats_absolute(
                 relative=per_stream("relative, no memory", ALONE),
                 vanilla=per_stream("vanilla", "each segment alone"),
                 xl=per_stream("XL", f"memory {MEM}"), bigram=bigram), fallback=fallback)
lesson.claim("the recurrence improves on the same model without it",
             "Table 6 (full loss, PPL init): 27.02 with vs 29.59 without; Table 7 (One Billion "
             "Word, no long-range dependency): 25.2 vs 27.1 ppl",
             f"XL with memory {MEM} {xl_mem:.3f} vs relative, each segment alone "
             f"{relative_alone:.3f} bpc", why_scale,
             verdict=claims.recurrence_beats_no_recurrence(
                 xl=per_stream("XL", f"memory {MEM}"),
                 relative_alone=per_stream("relative, no memory", ALONE), bigram=bigram),
             fallback=fallback)
lesson.claim("most of the recurrence's gain comes from training with the memory, not from the "
             "memory at evaluation",
             "Table 6 (full loss): without recurrence 29.59 read alone, 29.02 given attention 260 "
             f"at evaluation; with it 27.02 ppl: training gives {claims.TRAINING_SHARE:.0%} of "
             "the gain (log perplexity)",
             f"memory {MEM} at evaluation: XL {xl_mem:.3f} vs relative trained without memory "
             f"{relative_mem:.3f}, read alone {relative_alone:.3f} bpc", why_scale,
             verdict=claims.training_gives_most_of_recurrence_gain(
                 xl=per_stream("XL", f"memory {MEM}"),
                 relative_memory=per_stream("relative, no memory", f"memory {MEM}"),
                 relative_alone=per_stream("relative, no memory", ALONE), bigram=bigram),
             fallback=fallback)
lesson.claim("Transformer-XL beats a vanilla Transformer of the same size evaluated with a sliding "
             "window",
             "Table 2 (enwik8, 12 layers): XL 1.06 (memory 2,100) vs Al-Rfou et al. 1.11 bpc",
             f"XL, memory {LONG}, {mean('XL', f'memory {LONG}'):.3f} vs vanilla, window of {SEG} "
             f"sliding by one, {mean('vanilla', 'window sliding by one'):.3f} bpc", why_scale,
             verdict=claims.xl_beats_sliding_window(
                 xl=per_stream("XL", f"memory {LONG}"),
                 sliding=per_stream("vanilla", "window sliding by one"), bigram=bigram),
             fallback=fallback)

# %% [markdown]
# Read the table from the top: the vanilla model read alone and with the paper's sliding
# window (every character sees $L - 1$ before it, for $L$ positions of work per character);
# the relative model, never trained with a memory, read alone and then given a memory of $M$
# — distances it never met (the clamped row gives every distance beyond $L-1$ the encoding of
# $L-1$); XL with no memory, its own, and a longer one.
#
# Under the table: two baselines on the same characters — uniform guessing, and the bigram
# model of the training text, which knows only which character follows which; every run must
# beat the bigram model before its arm is compared (the claims' gate). Then XL's gain split
# into three steps: the relative positions by themselves, a memory at evaluation given to a
# model never trained with one, and *training* with the memory on top. The paper's Table 6
# measures the same steps on WikiText-103 with 128M-parameter models, in word-level
# perplexity — another corpus and unit, so compare directions and shares, not numbers. Its
# relative-vs-absolute rows use the **half loss** (cross-entropy on the second half of each
# segment only, so no prediction trains on a very short context), since absolute encodings
# worked well only with it; its XL rows and all of ours use the **full loss**. Table 2
# (enwik8, bits per character) reads the vanilla baseline with its sliding window; Table 7
# repeats the recurrence ablation on a corpus without long-range dependencies. The vanilla
# model has no memory to lengthen; reading longer segments, it meets absolute positions it
# never trained on — the last line printed before the claims compares the two. (Exercise
# 4.4 asks about the row "XL, memory 0": XL trained with a memory and read without it.)
#
# Samples from one validation prompt: XL reads it once, then one character at a time with a
# memory of 256; the vanilla model recomputes a window of its segment length per character.

# %%
prompt = valid_ids[:SEG][None].to(lesson.device)
decode = lambda ids: "".join(chars[i] for i in ids)  # noqa: E731
print("prompt:", repr(decode(prompt[0].tolist())))
for name in ("vanilla", "XL"):
    g = torch.Generator().manual_seed(1)
    context = 256 if name == "XL" else SEG
    sample = generate(models[name, LM_SEEDS[0]], prompt, lesson.size(full=240, smoke=20), g,
                      context=context)
    print(f"\n{name}:", repr(decode(sample[0, SEG:].tolist())))

# %% [markdown]
# ## 6. A longer memory at evaluation than in training
#
# Nothing in XL's weights depends on the memory length: the relative encodings exist for any
# distance. So XL can be evaluated with more memory than it was trained with — the paper
# trains its large enwik8 model with segments and memories of 768 and evaluates with a memory
# of 3,800 (the settings table above; the lecture's "784" is its attention length in
# training, not its memory). A longer memory also means distances the model never met in
# training, and the official evaluation does not trust the sinusoids to extrapolate: it
# **clamps** them (`--clamp_len`), giving every distance beyond $c$ the encoding of $c$:
#
# $$R_\delta \;\to\; R_{\min(\delta,\,c)} .$$
#
# In our code it is one line of the sinusoid table:

# %%
show(sinusoid_np)
print("distances 0..5 clamped at 3 (first sine column):",
      sinusoid_np(6, 4, clamp_len=3)[:, 0].round(3))

# %% [markdown]
# On the Penn Treebank, with and without clamping at the largest distance XL met in training
# ($M + L - 1$):

# %%
fig, ax = plt.subplots(figsize=(7, 3.8))
at = lambda name, m: mean(name, ALONE if m == 0 else f"memory {m}")  # noqa: E731
ax.plot(EVAL_MEMS, [at("XL", m) for m in EVAL_MEMS], "o-", color="C2", label="Transformer-XL")
long_mems = [m for m in EVAL_MEMS if m > MEM]
ax.plot(long_mems, [mean("XL", f"memory {m}, clamp_len {CLAMP}") for m in long_mems], "s--",
        color="C3", label=f"Transformer-XL, clamp_len {CLAMP}")
ax.plot(EVAL_MEMS, [at("relative, no memory", m) for m in EVAL_MEMS], "^:", color="C1",
        label="relative, trained without memory, + memory at evaluation")
ax.axhline(vanilla_alone, color="C0", ls="--", label="vanilla, each segment alone")
ax.axhline(mean("vanilla", "window sliding by one"), color="C0", ls=":",
           label="vanilla, window sliding by one")
ax.axvline(MEM, color="gray", ls=":", lw=1)
ax.text(MEM, 0.5, " memory in training (XL)", rotation=90, va="center", fontsize=8, color="gray",
        transform=ax.get_xaxis_transform())
ax.set_xscale("symlog", linthresh=max(EVAL_MEMS[1], 1))
ax.set_xlim(-EVAL_MEMS[1] / 4, EVAL_MEMS[-1] * 1.3)
ax.set_xticks(EVAL_MEMS, [str(m) for m in EVAL_MEMS])
ax.set_xlabel("memory length at evaluation")
ax.set_ylabel(f"validation bits per character (mean of {len(LM_SEEDS)} seeds)")
ax.legend(fontsize=8, loc="center right")
lesson.savefig(fig, "bpc_vs_memory")
for m in EVAL_MEMS:
    clamped = (f" | clamp_len {CLAMP}: {mean('XL', f'memory {m}, clamp_len {CLAMP}'):.3f}"
               if m > MEM else "")
    print(f"memory {m:4d} at evaluation: XL {at('XL', m):.3f} bpc{clamped} | relative, trained "
          f"without memory, {at('relative, no memory', m):.3f}")
first = EVAL_MEMS[1]
print(f"XL's memory at evaluation: {at('XL', 0) - at('XL', first):+.3f} bpc "
      f"from memory 0 to {first}, {at('XL', first) - at('XL', MEM):+.3f} "
      f"from {first} to {MEM}, {at('XL', MEM) - at('XL', LONG):+.3f} from {MEM} to {LONG}")
lesson.claim("a longer memory at evaluation than in training lowers the perplexity",
             "Table 6 (full loss): 27.02 at the training length → 26.77 at attention 500 (128M); "
             "23.43 → 23.09 at 640 (151M)",
             f"{corpus}, trained with {MEM}: {xl_mem:.3f} bpc at memory {MEM}, "
             f"{mean('XL', f'memory {LONG}'):.3f} at {LONG}", why_scale,
             verdict=claims.longer_memory_lowers_bpc(
                 long=per_stream("XL", f"memory {LONG}"),
                 training=per_stream("XL", f"memory {MEM}"),
                 bigram=bigram, long_memory=LONG, training_memory=MEM), fallback=fallback)

# %% [markdown]
# The line printed above splits what the memory gives XL. The first few characters repair
# context fragmentation: the first characters of a segment are no longer predicted from
# nothing (Table 7 isolates this on a corpus without long-range dependencies). The dotted
# curve, the relative model never trained with a memory but given one at evaluation, lies as
# far from XL's as *training* with the memory is worth. What lies beyond the training memory
# helps only a model that has learned dependencies that long, however the distances are
# encoded; a 2-layer model trained for minutes on characters may not have. A test that *can*
# show the claim needs a model that has learned to fetch something by content within the
# training memory, and then a dependency farther back than that memory.
#
# **Recall by class.** A stream of filler symbols in which, now and then, a symbol of one of
# 16 classes is *written*; some distance later comes a *read* of that class, and the target is
# the symbol written (one of 8 per class). Writes of one class are far apart, so the answer is
# found by its content — the class — wherever it is; a model that cannot reach the write can
# still name the class, and is right one time in 8. We train XL with segments of 16 and a
# memory of 32 on reads 1 to 32 characters after their write — always within reach — and then
# test on reads 48 to 128 characters after, with the training memory and with longer ones.

# %%
show(recall_by_class)
R_SEG, R_MEM, (R_STEPS, R_BATCH) = 16, 32, lesson.size(full=(300, 32), smoke=(4, 4))
R_SEEDS = [0, 1]  # the claims pair over the test reads too: their spread adds to the runs'
R_VOCAB = 16 * (8 + 1) + 8
R_TRAIN = recall_by_class(R_BATCH, R_SEG * R_STEPS + R_SEG, 1, R_MEM,
                          torch.Generator().manual_seed(0), device=lesson.device)
R_TESTS = {"near (1–32)": recall_by_class(R_BATCH, R_SEG * lesson.size(full=30, smoke=10), 1, R_MEM,
                                          torch.Generator().manual_seed(1), device=lesson.device),
           "far (48–128)": recall_by_class(R_BATCH, R_SEG * lesson.size(full=60, smoke=10),
                                           R_MEM + R_SEG, 4 * R_MEM,
                                           torch.Generator().manual_seed(2), device=lesson.device)}
TRAINING_MEMORY = f"memory {R_MEM} (training)"
R_EVALS = {TRAINING_MEMORY: dict(mem_len=R_MEM),
           f"memory {2 * R_MEM}": dict(mem_len=2 * R_MEM),
           f"memory {4 * R_MEM}": dict(mem_len=4 * R_MEM),
           f"memory {4 * R_MEM}, clamp_len {R_MEM + R_SEG - 1}": dict(mem_len=4 * R_MEM,
                                                                    clamp_len=R_MEM + R_SEG - 1)}
recall_acc, recall_hits = {}, {}
for seed in R_SEEDS:
    torch.manual_seed(seed)
    model = TransformerXL(R_VOCAB, 64, 4, 2, mem_len=R_MEM).to(lesson.device)
    part = lambda step: slice((step - 1) * R_SEG, step * R_SEG)  # noqa: E731
    train(model, lambda step: (R_TRAIN.tokens[:, part(step)], R_TRAIN.targets[:, part(step)]),
          recurrent_lm_loss(), R_STEPS, lr=3e-3, desc=f"recall, seed {seed}",
          progress=not lesson.smoke)
    for test_name, test in R_TESTS.items():
        for eval_name, kwargs in R_EVALS.items():
            predicted = stream_predictions(model, test.tokens, R_SEG, **kwargs)
            n = predicted.shape[1]
            read = test.targets[:, :n] != -100
            hit = (predicted == test.targets[:, :n])[read]
            index = (torch.arange(n, device=read.device) % R_SEG).expand_as(read)[read]
            recall_acc[test_name, eval_name, seed] = hit.float().mean().item()
            recall_hits[test_name, eval_name, seed] = (test.distance[:, :n][read].cpu(),
                                                       index.cpu(), hit.cpu())
rows = [{"reads": t, "evaluated with": e,
         "per seed": ", ".join(f"{recall_acc[t, e, s]:.3f}" for s in R_SEEDS),
         "mean ± SE": str(estimate([recall_acc[t, e, s] for s in R_SEEDS]))}
        for t in R_TESTS for e in R_EVALS]
print_table(rows, list(rows[0]))
print(f"chance, knowing the class: {1 / 8:.3f}")

fig, ax = plt.subplots(figsize=(7, 3.8))
bins = np.arange(0, 4 * R_MEM + 9, 8)
for k, eval_name in enumerate(R_EVALS):
    d, _, hit = (torch.cat([recall_hits[t, eval_name, s][j] for t in R_TESTS for s in R_SEEDS])
                 .numpy() for j in range(3))
    which = np.digitize(d, bins)
    centres = [(bins[i - 1] + bins[i]) / 2 for i in np.unique(which)]
    ax.plot(centres, [hit[which == i].mean() for i in np.unique(which)], "o-" if k < 3 else "x--",
            color=f"C{k}", label=eval_name, ms=4)
ax.axvspan(0, R_MEM, color="gray", alpha=0.12, label="distances trained on")
ax.axvspan(R_MEM + R_SEG, 2 * R_MEM + R_SEG - 1, color="C0", alpha=0.08,
           label=f"only two layers reach (memory {R_MEM})")
ax.axhline(1 / 8, color="gray", ls=":", label="chance, knowing the class")
ax.set_xlabel("distance from the read back to its write")
ax.set_ylabel(f"accuracy ({len(R_SEEDS)} seeds)")
ax.set_ylim(0, 1.05)
ax.legend(fontsize=8, loc="center right")
lesson.savefig(fig, "recall_by_distance")

far, near, long_eval = "far (48–128)", "near (1–32)", f"memory {4 * R_MEM}"
acc = lambda t, e: [recall_acc[t, e, s] for s in R_SEEDS]  # noqa: E731
hits = lambda e: [recall_hits[far, e, s][2].float() for s in R_SEEDS]  # noqa: E731
d, i, _ = recall_hits[far, TRAINING_MEMORY, R_SEEDS[0]]  # the same reads for every seed
only_two = (d > R_MEM + i) & (d <= 2 * R_MEM + i)  # beyond one layer's reach, within two's
two_layer = [h[only_two] for h in hits(TRAINING_MEMORY)]
print(f"far reads within two layers' reach but not one's, with the training memory "
      f"({int(only_two.sum())} reads): accuracy per seed "
      + ", ".join(f"{h.mean():.3f}" for h in two_layer))
lesson.claim("a model trained with a short memory uses a longer one at evaluation",
             "§4.2: backpropagation length 128 in training, attention length 640 at test; Table 6",
             f"recall by class, reads 48–128 back: accuracy {np.mean(acc(far, long_eval)):.3f} "
             f"with memory {4 * R_MEM} vs {np.mean(acc(far, TRAINING_MEMORY)):.3f} with the "
             f"training memory {R_MEM}", "a synthetic task built so that a longer memory pays off",
             verdict=claims.short_trained_uses_long_memory(
                 long=hits(long_eval), training=hits(TRAINING_MEMORY),
                 near=acc(near, TRAINING_MEMORY), long_memory=4 * R_MEM, training_memory=R_MEM))
lesson.claim("information climbs one memory further back per layer, and training uses it",
             "§3.2 and Fig. 2: the reach grows as O(N × L) — what the architecture allows",
             f"recall by class, training memory {R_MEM}: far reads only two layers reach "
             f"{np.mean([h.mean() for h in two_layer]):.3f} (chance {1 / 8:.3f})",
             "the lesson's question: training never asked for two-layer recall",
             verdict=claims.two_layer_recall(two_layer=two_layer, chance=1 / 8,
                                             near=acc(near, TRAINING_MEMORY)))

# %% [markdown]
# Read each curve against its reach. With a memory of $m$, the read at index $i$ of its
# segment sees $m + i$ back in one layer and $2m + i$ through two (section 4). With the
# training memory no far read is within one layer's reach, but those up to $2M + i$ back are
# within two layers' reach: a model that passed each write up through the lower layer's
# memory could answer them. Nothing in training asked for that — every training read lay
# within one layer's reach — so their accuracy against chance measures whether training
# found the two-layer path on its own.
# With $2M$ some far reads come within one layer's reach, with $4M$ all of them: a model that
# fetches by content then answers at distances it never met in training. The clamped row
# differs from the raw one only in the encodings of distances beyond $M + L - 1$, so the gap
# between them is what those unseen encodings cost; on text, where position matters more, a
# model asked to reach far past its training distances can be hurt by them, and clamping is
# the official code's guard.
#
# ## 7. Seeing is not learning: the copy task
#
# A copy task: a stream of random symbols (16 of them), and at every position the model must
# output the symbol `distance` places back. Segments have 16 tokens; XL gets a memory of 32.
# Chance is 1/16.

# %%
C_SEG, C_MEM, (C_STEPS, C_BATCH) = 16, 32, lesson.size(full=(300, 32), smoke=(5, 4))
copy_data = {}


def train_copy(name, distance, seed, stop_gradient=True):
    """Train one model on the copy task; its accuracy at each index of a segment."""
    if distance not in copy_data:
        g = torch.Generator().manual_seed(distance)
        copy_data[distance] = (
            delayed_copy(C_BATCH, C_SEG * C_STEPS + C_SEG, distance, 16, g, lesson.device),
            delayed_copy(2 * C_BATCH, C_SEG * 12, distance, 16, g, lesson.device))
    (tokens, targets), (test_tokens, test_targets) = copy_data[distance]
    torch.manual_seed(seed)
    model = (VanillaLM(16, 64, 2, 2) if name == "vanilla"
             else TransformerXL(16, 64, 2, 2, mem_len=C_MEM)).to(lesson.device)
    part = lambda step: slice((step - 1) * C_SEG, step * C_SEG)  # noqa: E731
    train(model, lambda step: (tokens[:, part(step)], targets[:, part(step)]),
          recurrent_lm_loss(stop_gradient), C_STEPS, lr=3e-3, progress=not lesson.smoke,
          desc=f"{name}{'' if stop_gradient else ' without SG'}, distance {distance}, seed {seed}")
    return stream_accuracy(model, test_tokens, test_targets, C_SEG, by_position=True)


distances = {"vanilla": lesson.size(full=[8, 24], smoke=[8]),
             "XL": lesson.size(full=[24, 40, 56], smoke=[8, 40], paper=[8, 24, 40, 56])}
copy_acc = {(name, d): train_copy(name, d, 0) for name in distances for d in distances[name]}
for (name, d), acc in copy_acc.items():
    print(f"{name:7s} distance {d:2d}: accuracy {np.nanmean(acc):.2f}")
fig, ax = plt.subplots(figsize=(6, 3.6))
for name in distances:
    ax.plot(distances[name], [np.nanmean(copy_acc[name, d]) for d in distances[name]], "o-",
            label=name)
ax.axhline(1 / 16, color="gray", ls=":", label="chance")
ax.axvline(C_SEG, color="C0", ls="--", lw=1, label="segment length")
ax.axvline(C_MEM, color="C1", ls="--", lw=1, label="XL memory")
ax.set_xlabel("copy distance (tokens back)")
ax.set_ylabel("test accuracy")
ax.set_ylim(0, 1.05)
ax.legend(fontsize=8)
lesson.savefig(fig, "copy_accuracy")

# %% [markdown]
# Read the plot against the two limits. The vanilla model can copy only what lies inside its
# own segment — at a short distance, only at positions far enough into the segment. In one
# layer, XL's token at index $k$ of its segment sees $k + M$ tokens back; past the memory,
# only the positions far enough into their segment reach the source in one layer, although
# *every* position could see it through two layers (section 4). The table below splits the
# positions that way.
#
# Why is the two-layer path not learned? One explanation: using it needs the lower layer to
# have fetched the token earlier, into a state that now sits in the memory — and the
# stop-gradient means that lower layer never receives a training signal for that job. That is
# a claim we can test. Train the distance-40 copy again, but without the stop-gradient for one
# segment: every step reads the previous segment again and keeps it in the graph, so the loss
# reaches the states that become the memory (`recurrent_lm_loss(stop_gradient=False)`). Then
# compare, over the seeds, the accuracy on the positions only two layers can reach
# (index $< 40 - M$):

# %%
SG_DISTANCE, SG_SEEDS = 40, [0, 1]  # the claim's tolerance is half the one-layer gap
two_hop = SG_DISTANCE - C_MEM  # positions with index < this need two layers
sg_acc = {(True, 0): copy_acc["XL", SG_DISTANCE]} if ("XL", SG_DISTANCE) in copy_acc else {}
for seed in SG_SEEDS:
    for stop_gradient in (True, False):
        if (stop_gradient, seed) not in sg_acc:
            sg_acc[stop_gradient, seed] = train_copy("XL", SG_DISTANCE, seed, stop_gradient)
rows = [{"training": "with SG (the paper)" if sg else "without SG for one segment", "seed": seed,
         f"index < {two_hop} (two layers)": f"{np.nanmean(acc[:two_hop]):.3f}",
         f"index ≥ {two_hop} (one layer)": f"{np.nanmean(acc[two_hop:]):.3f}"}
        for (sg, seed), acc in sorted(sg_acc.items(), key=lambda kv: (not kv[0][0], kv[0][1]))]
print_table(rows, list(rows[0]))
hop = lambda sg, part: [float(np.nanmean(sg_acc[sg, s][part])) for s in SG_SEEDS]  # noqa: E731
lesson.claim("the stop-gradient is what keeps the two-layer path unlearned",
             "§3.2 trains with the stop-gradient; that it blocks this path is the lesson's "
             "hypothesis, not the paper's",
             f"copy at distance {SG_DISTANCE}, positions only two layers reach: "
             f"{np.mean(hop(False, slice(None, two_hop))):.3f} without SG vs "
             f"{np.mean(hop(True, slice(None, two_hop))):.3f} with it",
             "a synthetic task; the gradient flows one segment back, not further",
             verdict=claims.stop_gradient_blocks_two_layer_path(
                 without_sg=hop(False, slice(None, two_hop)),
                 with_sg=hop(True, slice(None, two_hop)),
                 one_layer=hop(True, slice(two_hop, None)), chance=1 / 16))

# %% [markdown]
# What the test can show: if the two-layer positions rise once the gradient flows, the
# stop-gradient was what kept the lower layer from storing the token; if they stay where they
# were, something else blocks the path — for instance that the lower layer must store a token
# at a distance its own prediction never asks for, a solution gradient descent has to find
# through many weights at once, while the one-layer path already serves half the positions.
# Recall by class (section 6) asks the same question of a task that needs a lookup by content.
#
# ## 8. Cost: a memory instead of recomputing
#
# To predict each character from $C$ characters of context, a fixed-window model must slide
# its window one character at a time and recompute all $C$ positions per prediction. XL reads
# a segment of 128 characters per call, each seeing at least $C$ earlier characters through
# the memory. Untrained models of the section-5 size, batch 1, interleaved repeats (on a
# CPU, the time one thread spends working, which other programs on the machine do not
# inflate); each repeat gives one speed-up ratio:

# %%
speed_contexts = lesson.size(full=[128, 1024], smoke=[64, 128])
ratios = {}
for c in speed_contexts:
    s = eval_speed(c, repeats=lesson.size(full=7, smoke=3), device=lesson.device, per_repeat=True,
                   timer=time.process_time if lesson.device.type == "cpu" else time.perf_counter)
    ratios[c] = [xl / v for xl, v in zip(s["XL, cached"], s["vanilla, recompute"])]
    print(f"context {c:5d}: vanilla recomputing {np.median(s['vanilla, recompute']):8,.1f} "
          f"tokens/s | XL cached {np.median(s['XL, cached']):9,.0f} tokens/s | "
          f"{estimate(ratios[c])}× faster | XL one token per call "
          f"{np.median(s['XL, one token at a time']):6,.0f} tokens/s")
short, long = speed_contexts
lesson.claim("evaluation with a memory is much faster (> 10×) than recomputing the context, "
             "more so the longer the context",
             "Table 9 (GPU): 363× at attention length 800, up to 1,874× at 3,800",
             f"{np.mean(ratios[long]):,.0f}× at context {long}, {np.mean(ratios[short]):,.0f}× at "
             f"{short} (CPU time per token, d=128, 2 layers)",
             "smaller model and context; a CPU; the ratio grows with the context",
             verdict=claims.cached_evaluation_much_faster(
                 short=ratios[short], long=ratios[long], short_context=short, long_context=long,
                 much=10.0))

# %% [markdown]
# Recomputing costs the whole window per character while XL pays for each position once, so
# the saving grows with the context. Reading one token per call (as when sampling) keeps only
# part of it: XL's memory holds hidden states, not keys and values, so every call projects
# the whole memory again — cheaper than recomputing all layers, far from the segment rate.
#
# ## 9. Training on many processes: DDP
#
# `python -m minattn.xl.train` trains this language model on a real corpus (PTB, Shakespeare,
# or enwik8 once fetched) and runs unchanged under `torchrun`. The global batch of streams is
# split across processes: each rank reads its own rows of the text and carries those rows'
# memory, DDP averages the gradients, so W processes take the same steps as one process with
# the whole batch (the tests check this with two CPU processes). Rank 0 writes the checkpoint
# atomically, with every rank's memory, so `--resume` continues exactly.
#
# ```bash
# python -m minattn.xl.train --data ptb --steps 2000 --out runs/xl             # one process
# torchrun --standalone --nproc_per_node=8 -m minattn.xl.train --data enwik8 --out runs/xl
# ```
# (several machines: the module's docstring gives the `torchrun --nnodes` line.)
# A tiny run, here in this process (its checkpoint goes to a temporary folder):

# %%
import tempfile  # noqa: E402

from minattn.xl.train import main as xl_train_main  # noqa: E402

run_dir = tempfile.TemporaryDirectory()
result = xl_train_main(["--data", "synthetic", "--max-chars", "20000", "--steps", "20",
                        "--batch", "4", "--seg", "16", "--mem", "16", "--d-model", "32",
                        "--heads", "2", "--log-every", "10", "--eval-segments", "5",
                        "--device", "cpu", "--out", run_dir.name])
run_dir.cleanup()

# %% [markdown]
# ## Summary
#
# What this run found, claim by claim: each sentence is the one its claim's rule chose for
# the outcome the numbers above gave.

# %%
lesson.summary()

# %% [markdown]
# And what the lesson showed along the way:
#
# * Transformer-XL keeps, per layer, the last $M$ hidden states as a memory with the gradient
#   stopped; every layer attends over [memory ; segment], so the reach grows by one memory
#   per layer — measured above as a cone of changed states, as in the paper's Fig. 2.
# * Positions enter as distances: $A_{ij} = q_i^\top k_j + q_i^\top r_{\delta_{ij}} + u^\top k_j
#   + v^\top r_{\delta_{ij}}$. The relative shift computes all of (b) + (d) with one product and
#   a reshape, equal to the explicit gather. `clamp_len` gives every distance beyond $c$ the
#   encoding of $c$, as the official evaluation does.
# * The ablation splits XL's gain over a vanilla Transformer into the steps of the paper's
#   Table 6 — relative positions, a memory at evaluation, training with the memory — on
#   characters, in bits. A longer memory at evaluation pays off only where something the model
#   learned to fetch lies beyond the training memory, as in recall by class.
# * What a token can *see* ($N \cdot M$ back) need not be what the model *learns* to use:
#   recall by class and the copy task, with and without the stop-gradient, measure the gap.
#   Evaluation with a memory pays once per position; recomputing pays the window per position.
#
# ## Exercises
#
# * **4.1 implement** (~15 min) — the relative shift, `rel_shift_np` and `rel_shift_torch` in
#   `minattn/xl/fast.py`. Check: `pytest --exercises 4.1`.
# * **4.2 implement** (~5 min) — the memory update, `update_memory_np` and
#   `update_memory_torch` in `minattn/xl/reference.py` (careful with $M = 0$). Check:
#   `pytest --exercises 4.2`.
# * **4.3 predict** (~10 min) — `farthest_token_back` in `minattn/course/answers/xl.py`: how many
#   tokens back can the last token of a segment see, with 2 layers, $S = M = 16$? Write the
#   general formula for $M = S$ in a comment, then check with section 4.
# * **4.4 experiment** (~5 min) — in section 5, compare XL read without its memory ("XL,
#   memory 0") with the vanilla model: is it better or worse? Both read each segment alone
#   then. Report the difference XL(memory 0) − vanilla, means over the seeds, in
#   `experiment_memory_zero_gap` in `minattn/course/answers/xl.py`. Then compare XL(memory 0) with
#   the relative model trained without memory: what did training with a memory do to the
#   model's reading of a segment alone?
