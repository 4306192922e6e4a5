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
# Transformer-XL (Dai et al., 2019) keeps the hidden states of the previous segment as a
# **memory**, with the gradient stopped, and lets every layer attend over [memory ; segment].
# Information then travels one segment further back with every layer. For that to work,
# positions must be **relative**: "position 3" means nothing when the memory and the segment
# each start at 0, but "3 characters back" always means the same.
#
# In this lesson you will:
# 1. write the relative attention score as four terms and check them by hand (NumPy);
# 2. compute the same scores with the *relative shift*, one matrix product and a reshape;
# 3. add the memory and check that reading segment by segment equals reading the text at once;
# 4. train a vanilla Transformer and a Transformer-XL of the same size on characters of the
#    Penn Treebank, and evaluate XL with a memory longer than the one it was trained with;
# 5. predict how far back an XL can see, measure it, and test it on a copy task;
# 6. measure evaluation with a memory against recomputing the window for every character;
# 7. see how the training script runs on several processes or machines (DDP).
#
# Run time: about 3 minutes of CPU time on a 2-core machine, most of it training the two
# language models (on a machine busy with other jobs, up to 12 minutes of waiting);
# `MINATTN_SMOKE=1`: about 10 seconds of CPU time.

# %%
import math

import numpy as np
import torch
import matplotlib.pyplot as plt

from minattn.tools.lesson import Lesson, show
from minattn.tools.utils import set_seed
from minattn.tools.train import train
from minattn.tools.data import DatasetMissing, load_lm_text
from minattn.plots import heatmap, plot_curves
from minattn.attention import causal_mask_np
from minattn.xl import (relative_distances_np, rel_attention_np, rel_attention_torch,
                        update_memory_torch, XLLayer, TransformerXL, RelMultiHeadAttention)
from minattn.xl_fast import rel_shift_np, rel_attention_fast_torch, eval_speed
from minattn.models import VanillaLM, count_parameters
from minattn.xl_train import (recurrent_lm_loss, evaluate_bpc, generate, farthest_visible,
                              stream_accuracy)
from minattn.tasks import char_corpus, lm_streams, lm_segment, synthetic_text, delayed_copy

L = Lesson("04_xl")  # on a CPU: one torch thread (see Lesson)

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
# \qquad \mathrm{out}_i = \sum_{j:\ \delta_{ij}\ge 0} \mathrm{softmax}_j\!\Big(\tfrac{A_{ij}}{\sqrt{d_h}}\Big)\, v_j .$$
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
print("weights:", weights[0, 0, 0].round(4), " by hand:", np.round([np.e / (np.e + 1), 1 / (np.e + 1)], 4))
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
L.savefig(fig, "memory_and_distances")

# %% [markdown]
# ## 4. Characters of the Penn Treebank: vanilla vs XL at equal segment length
#
# Two models of the same size — embedding, 2 layers, tied output — read the training text as
# 32 parallel streams, one segment of each per step. The vanilla model has absolute
# sinusoidal positions and reads every segment on its own; XL carries a memory of the same
# length as its segment. One training loop serves both (`recurrent_lm_loss` carries the
# memory; the vanilla model returns none). Validation reads the validation text in order,
# segment after segment, the same way.

# %%
SEG = L.size(full=32, smoke=16)
MEM = SEG
STEPS = L.size(full=600, smoke=30)
D_MODEL = L.size(full=128, smoke=32)
try:
    texts = [load_lm_text("ptb", "train"), load_lm_text("ptb", "valid")]
    corpus = "Penn Treebank characters"
except DatasetMissing as err:
    print(f"{err}\n-> using a synthetic text instead (numbers will differ from the ones quoted)")
    texts = [synthetic_text(2_000_000, rng), synthetic_text(200_000, rng)]
    corpus = "synthetic text"
chars, (train_ids, valid_ids) = char_corpus(texts)
train_streams = lm_streams(train_ids, 32).to(L.device)
valid_streams = lm_streams(valid_ids, 16)[:, : L.size(full=2_561, smoke=257)].to(L.device)
print(f"{corpus}: {len(train_ids):,} training characters, vocabulary {len(chars)}; "
      f"validation on {valid_streams.numel():,} characters")

torch.manual_seed(0)
models = {"vanilla": VanillaLM(len(chars), D_MODEL, 4, 2),
          "XL": TransformerXL(len(chars), D_MODEL, 4, 2, mem_len=MEM)}
histories = {}
for name, model in models.items():
    model.to(L.device)
    print(f"{name}: {count_parameters(model):,} parameters")
    histories[name] = train(
        model, lambda step: lm_segment(train_streams, step - 1, SEG), recurrent_lm_loss(),
        STEPS, lr=2e-3, eval_every=L.size(full=150, smoke=15), desc=name,
        evaluate=lambda: {"valid_bpc": evaluate_bpc(model, valid_streams, SEG)})
    histories[name]["bpc"] = [v / math.log(2) for v in histories[name]["loss"]]
bpc = {name: h.last("valid_bpc") for name, h in histories.items()}
print("validation bits per character: " + ", ".join(f"{n} {v:.3f}" for n, v in bpc.items()))

# %% [markdown]
# XL has one extra matrix per layer ($W_R$) and the two vectors $u, v$. The learning curves:

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
plot_curves(axes[0], histories, "bpc", title="training loss", ylabel="bits per character")
axes[0].set_ylim(top=5)  # the first steps start near 15 bits
plot_curves(axes[1], histories, "valid_bpc", title="validation", ylabel="bits per character")
L.savefig(fig, "lm_curves")

# %% [markdown]
# ### A longer memory at evaluation than in training
#
# Nothing in XL's weights depends on the memory length: the relative encodings exist for any
# distance. So we can evaluate with more memory than XL was trained with. (The vanilla model
# cannot: its absolute positions stop at its segment length.)

# %%
eval_mems = L.size(full=[0, 16, 32, 64, 128, 256, 512], smoke=[0, 16, 64])
bpc_by_mem = {m: evaluate_bpc(models["XL"], valid_streams, SEG, mem_len=m) for m in eval_mems}
for m, v in bpc_by_mem.items():
    print(f"XL evaluated with memory {m:4d}: {v:.3f} bpc")
fig, ax = plt.subplots(figsize=(6, 3.6))
ax.plot(eval_mems, list(bpc_by_mem.values()), "o-", label="Transformer-XL")
ax.axhline(bpc["vanilla"], color="gray", ls="--", label="vanilla (no memory)")
ax.axvline(MEM, color="C1", ls=":", label=f"memory in training ({MEM})")
ax.set_xscale("symlog", linthresh=16)
ax.set_xlim(0, eval_mems[-1] * 1.3)
ax.set_xticks(eval_mems, [str(m) for m in eval_mems])
ax.set_xlabel("memory length at evaluation")
ax.set_ylabel("validation bits per character")
ax.legend()
L.savefig(fig, "bpc_vs_memory")
best_mem = min(bpc_by_mem, key=bpc_by_mem.get)
L.claim("Transformer-XL beats a vanilla Transformer of the same size at equal segment length",
        "enwik8: 12L XL 1.06 bpc vs 12L Transformer (Al-Rfou et al.) 1.11",
        f"{corpus}, 2 layers d={D_MODEL}, segment {SEG}: XL {bpc['XL']:.3f} vs vanilla "
        f"{bpc['vanilla']:.3f} bpc", f"{STEPS} steps of 32×{SEG} characters on a CPU, not "
        "days on GPUs; our vanilla reads each segment alone (the paper's baseline slides its window)")
L.claim("a longer memory at evaluation than in training helps",
        "enwik8: memory 784 in training, 3,800 at evaluation",
        f"trained with {MEM}; {bpc_by_mem[MEM]:.3f} bpc at {MEM}, {bpc_by_mem[best_mem]:.3f} at "
        f"{best_mem}", "a 2-layer model trained for minutes barely uses context beyond its "
        "training memory; the paper's deep models were trained on long contexts")

# %% [markdown]
# Read the curve in two parts. From no memory to the training memory it falls steeply: the
# memory is where XL's advantage comes from (compare the point at memory 0 with the vanilla
# line — exercise 4.4). Past the training memory it is flat: a longer memory does not hurt —
# the relative encodings work at distances never seen in training — but this small model,
# trained for minutes, gains next to nothing from it. The paper's gains from a longer
# evaluation memory came from deep models trained with long memories.

# %% [markdown]
# Samples, each from the same validation prompt: XL reads it once and then one character at a
# time with a memory of 256 characters; the vanilla model recomputes a window of its segment
# length for every character.

# %%
prompt = valid_ids[:SEG][None].to(L.device)
decode = lambda ids: "".join(chars[i] for i in ids)  # noqa: E731
print("prompt:", repr(decode(prompt[0].tolist())))
for name, model in models.items():
    g = torch.Generator().manual_seed(1)
    context = 256 if name == "XL" else SEG
    sample = generate(model, prompt, L.size(full=240, smoke=20), g, context=context)
    print(f"\n{name}:", repr(decode(sample[0, SEG:].tolist())))

# %% [markdown]
# ## 5. How far back can XL see?
#
# In one layer, the last token of a segment sees its own segment and the memory. The memory
# holds states of the layer below, and *they* saw their own memory one segment further back,
# and so on down the layers. **Predict before you run the next cell**: a 2-layer XL with
# segments of 16 and a memory of 16 — how many tokens back can the *last* token of a segment
# see? (Exercise 4.3 asks you to write it down, with the reason.) The cell measures it on an
# untrained model: it changes each earlier token, one at a time, and watches which changes
# reach the last token's prediction.

# %%
torch.manual_seed(0)
probe = TransformerXL(16, 32, 2, 2, mem_len=16)
print("measured: the last token of a segment sees",
      farthest_visible(probe, seg_len=16, mem_len=16, n_segments=6, vocab_size=16), "tokens back")

# %% [markdown]
# Seeing is not the same as learning. A copy task makes the difference visible: a stream of
# random symbols (16 of them), and at every position the model must output the symbol
# `distance` places back. Segments have 16 tokens; XL gets a memory of 32. Chance is 1/16.

# %%
C_SEG, C_MEM, C_STEPS = 16, 32, L.size(full=300, smoke=20)
distances = L.size(full=[8, 24, 40, 56], smoke=[8, 24])
copy_acc = {"vanilla": [], "XL": []}
for distance in distances:
    g = torch.Generator().manual_seed(distance)
    tokens, targets = delayed_copy(32, C_SEG * C_STEPS + C_SEG, distance, 16, g, L.device)
    test_tokens, test_targets = delayed_copy(64, C_SEG * 12, distance, 16, g, L.device)
    for name in copy_acc:
        torch.manual_seed(0)
        model = (VanillaLM(16, 64, 2, 2) if name == "vanilla"
                 else TransformerXL(16, 64, 2, 2, mem_len=C_MEM)).to(L.device)
        part = lambda step: slice((step - 1) * C_SEG, step * C_SEG)  # noqa: E731
        train(model, lambda step: (tokens[:, part(step)], targets[:, part(step)]),
              recurrent_lm_loss(), C_STEPS, lr=3e-3, desc=f"{name}, distance {distance}",
              progress=not L.smoke)
        copy_acc[name].append(stream_accuracy(model, test_tokens, test_targets, C_SEG))
    print(f"distance {distance:2d}: vanilla {copy_acc['vanilla'][-1]:.2f}, XL {copy_acc['XL'][-1]:.2f}")
fig, ax = plt.subplots(figsize=(6, 3.6))
for name, accs in copy_acc.items():
    ax.plot(distances, accs, "o-", label=name)
ax.axhline(1 / 16, color="gray", ls=":", label="chance")
ax.axvline(C_SEG, color="C0", ls="--", lw=1, label="segment length")
ax.axvline(C_MEM, color="C1", ls="--", lw=1, label="XL memory")
ax.set_xlabel("copy distance (tokens back)")
ax.set_ylabel("test accuracy")
ax.set_ylim(0, 1.05)
ax.legend(fontsize=8)
L.savefig(fig, "copy_accuracy")

# %% [markdown]
# Read the plot against the two limits. The vanilla model copies only what lies inside its
# own segment — at a short distance, only at positions far enough into the segment — and is
# at chance beyond. XL copies perfectly as long as one layer reaches the token: a token at
# index $k$ of its segment sees $k + M$ tokens back in a single layer. Past the memory, only
# the positions far enough into their segment still reach it in one layer — hence partial
# accuracy — although *every* position could see the token through two layers (the
# measurement above). Using the two-layer path would need the lower layer to have fetched the
# token earlier, into a state that now sits in the memory; the stop-gradient means that lower
# layer never received a training signal for that job.
#
# ## 6. Cost: a memory instead of recomputing
#
# To predict each character from $C$ characters of context, a fixed-window model must slide
# its window one character at a time and recompute all $C$ positions per prediction. XL reads
# a segment of 128 characters per call, each seeing at least $C$ earlier characters through
# the memory. Untrained models of the section-4 size, batch 1, interleaved repeats:

# %%
speed_contexts = L.size(full=[128, 1024], smoke=[64])
for c in speed_contexts:
    s = eval_speed(c, repeats=L.size(full=3, smoke=1), device=L.device)
    ratio = s["XL, cached"] / s["vanilla, recompute"]
    print(f"context {c:5d}: vanilla recomputing {s['vanilla, recompute']:8,.1f} tokens/s | "
          f"XL cached {s['XL, cached']:9,.0f} tokens/s | {ratio:6,.0f}× faster | XL one token "
          f"per call {s['XL, one token at a time']:6,.0f} tokens/s")
L.claim("evaluation with a memory is much faster than recomputing the context",
        "up to 1,874× at context 3,800 (GPU)",
        f"{ratio:,.0f}× at context {c} (CPU, 1 thread, d=128, 2 layers)",
        "smaller model and context; a CPU; the ratio grows with the context")

# %% [markdown]
# The takeaway: the saving grows with the context, because recomputing costs the whole window
# per character while XL pays for each position once. Reading one token per call (as when
# sampling) keeps only part of the saving: XL's memory holds hidden states, not keys and
# values, so every call projects the whole memory again — cheaper than recomputing all layers,
# but far from the segment-at-a-time rate.
#
# ## 7. Training on many processes: DDP
#
# `python -m minattn.xl_train` trains this language model on a real corpus (PTB, Shakespeare,
# or enwik8 once fetched) and runs unchanged under `torchrun`. The global batch of streams is
# split across processes: each rank reads its own rows of the text and carries those rows'
# memory, DDP averages the gradients, so W processes take the same steps as one process with
# the whole batch (the tests check this with two CPU processes). Rank 0 writes the checkpoint
# atomically, with every rank's memory, so `--resume` continues exactly.
#
# ```bash
# python -m minattn.xl_train --data ptb --steps 2000 --out runs/xl             # one process
# torchrun --standalone --nproc_per_node=8 -m minattn.xl_train --data enwik8 --out runs/xl
# torchrun --nnodes=2 --nproc_per_node=8 --rdzv_id=xl --rdzv_backend=c10d \
#          --rdzv_endpoint=HOST0:29500 -m minattn.xl_train --data enwik8 --out runs/xl
# ```
# A tiny run, here in this process (its checkpoint goes to a temporary folder):

# %%
import tempfile  # noqa: E402

from minattn.xl_train import main as xl_train_main  # noqa: E402

run_dir = tempfile.TemporaryDirectory()
result = xl_train_main(["--data", "synthetic", "--max-chars", "20000", "--steps", "20",
                        "--batch", "4", "--seg", "16", "--mem", "16", "--d-model", "32",
                        "--heads", "2", "--log-every", "10", "--eval-segments", "5",
                        "--device", "cpu", "--out", run_dir.name])
run_dir.cleanup()

# %% [markdown]
# ## Summary
#
# * Transformer-XL keeps, per layer, the last $M$ hidden states as a memory with the gradient
#   stopped; every layer attends over [memory ; segment], so the reach grows with the depth.
# * Positions enter as distances: $A_{ij} = q_i^\top k_j + q_i^\top r_{i-j} + u^\top k_j +
#   v^\top r_{i-j}$. The relative shift computes all of (b) + (d) with one product and a
#   reshape, equal to the explicit gather.
# * At equal segment length the memory lowers the bits per character, and a memory longer
#   than in training can be used at evaluation without retraining.
# * What a token can *see* (the receptive field) and what the model *learns* to use differ:
#   the stop-gradient makes long multi-hop paths hard to learn.
# * Evaluation with a memory pays once per position; recomputing a window pays the window per
#   position.
#
# ## Exercises
#
# * **4.1 implement** (~15 min) — the relative shift, `rel_shift_np` and `rel_shift_torch` in
#   `minattn/xl_fast.py`. Check: `pytest --exercises 4.1`.
# * **4.2 implement** (~5 min) — the memory update, `update_memory_np` and
#   `update_memory_torch` in `minattn/xl.py` (careful with $M = 0$). Check:
#   `pytest --exercises 4.2`.
# * **4.3 predict** (~10 min) — `farthest_token_back` in `minattn/answers/xl.py`: how many
#   tokens back can the last token of a segment see, with 2 layers, $S = M = 16$? Write the
#   general formula for $M = S$ in a comment, then check with section 5.
# * **4.4 experiment** (~5 min) — in section 4, evaluate the trained XL with memory 0: is it
#   better or worse than the vanilla model? Both read each segment alone then. Report the
#   difference XL(memory 0) − vanilla in `experiment_memory_zero_gap` in
#   `minattn/answers/xl.py`.
