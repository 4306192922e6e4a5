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
# # Lesson 05 — Attention in an LSTM translator, and how it is learned
#
# Before Transformers, attention was a module bolted onto a recurrent encoder–decoder: the
# decoder, about to write output word $t$, looks back over the encoder's states and takes a
# weighted average of them. Trained attention maps look like word alignments — "Film" attends to
# "movie" — and nobody told the network to do that. **Why does attention end up on the right
# words, and when does it fail to?**
#
# Snell, Zhong, Klein and Steinhardt ("Approximating How Single Head Attention Learns", 2021)
# answer with a two-stage story (their §1 and §2):
#
# 1. early in training attention is nearly **uniform**, so the network first learns *which
#    output word each input word predicts* — "knowledge to translate individual words" (KTIW),
#    measured by a **lexical probe** $\beta$;
# 2. attention is then pulled toward the input positions whose words predict the output well.
#
# Where the data gives no KTIW to learn, attention has nothing to follow — and a network that can
# express a task perfectly may fail to learn it. In this lesson you will
# 1. write the LSTM and Luong attention in NumPy, check them against `torch.nn.LSTM`, and build
#    the authors' exact model (their code is public) from the same pieces;
# 2. build the lexical probe and the **agreement metric** between attention and probe;
# 3. train copy models on permutations as the authors did, and watch one distribution learn and
#    another fail (the paper's §3.3) — with the count tables that predict it (lesson 06 explains
#    them) and the two stages of training in one plot;
# 4. rescue a failing model with more heads (§5.2), test a hidden assumption (§6.1), and measure
#    attention–probe agreement on real sentiment and translation data (§3.1–3.2).
#
# ### The model (the paper's §2.1–2.2, eqs. 1–4)
# Input $x_1..x_n$ with encoder states $h_i$, output $y_1..y_m$ with decoder states $s_t$
# (the decoder reads $y_{t-1}$: teacher forcing).
#
# $$e_{ti} = s_t^\top W_a h_i,\qquad \alpha_t = \mathrm{softmax}_i(e_t),\qquad
# c_t = \sum_i \alpha_{ti} h_i,\qquad p_t = \mathrm{softmax}\big(g([c_t; s_t])\big),$$
#
# with $g(z) = W_2 \tanh(W_1 z + b_1) + b_2$ and loss $-\sum_t \log p_t(y_t)$. With $H$ heads,
# each has its own $W_a^h$ and the contexts are summed: $c_t = \sum_h \sum_i \alpha^h_{ti} h_i$.
#
# The **lexical probe** asks "what if the model attended only to position $i$?":
# $\beta_{ti} = p_t(y_t)$ computed with $c_t := h_i$. The **agreement** $A(a, b)$ of two score
# vectors over the $n$ input positions is 1 when the top position of $a$ is among the top
# $\lceil 5\% \cdot n \rceil$ positions of $b$, averaged over all output words.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from minattn import ibm1, lstm_attention as la, plots, tasks
from minattn import lstm_attention_copy as lc, lstm_attention_official as lo
from minattn.tools.data import DatasetMissing, load_parallel, load_sentiment, tokenize
from minattn.tools.lesson import Lesson, show
from minattn.tools.tables import print_table
from minattn.tools.train import train
from minattn.tools.utils import set_seed
from minattn.tools.verdict import combine, compare, rate, same, versus

L = Lesson("05_lstm_attention")  # on a CPU: one torch thread (see Lesson)
rng = set_seed(0)
T0 = time.perf_counter()
CPU0 = time.process_time()

# %% [markdown]
# ## 1. The LSTM, written out
#
# One step of an LSTM keeps a cell $c$ and an output $h$; four gates (input $i$, forget $f$,
# candidate $g$, output $o$) come from one matrix product:
#
# $$[i; f; g; o] = W x + U h + b,\qquad c' = \sigma(f)\odot c + \sigma(i)\odot\tanh(g),\qquad
# h' = \sigma(o)\odot\tanh(c').$$
#
# PyTorch stores the four gates' weights stacked in that order, so given the same weights our
# NumPy cell must agree with `nn.LSTMCell` and our loop with `nn.LSTM` to rounding error.

# %%
show(la.lstm_cell_np)
show(la.lstm_np)

torch.manual_seed(0)
ref_lstm = torch.nn.LSTM(3, 4, batch_first=True).double()
W = [p.detach().numpy() for p in (ref_lstm.weight_ih_l0, ref_lstm.weight_hh_l0,
                                   ref_lstm.bias_ih_l0, ref_lstm.bias_hh_l0)]
x_demo = rng.normal(size=(2, 5, 3))
out_np, (h_np, c_np) = la.lstm_np(x_demo, *W)
out_ref, (h_ref, c_ref) = ref_lstm(torch.from_numpy(x_demo))
err_lstm = np.abs(out_np - out_ref.detach().numpy()).max()
cell = torch.nn.LSTMCell(3, 4).double()
cell.load_state_dict({k.replace("_l0", ""): v for k, v in ref_lstm.state_dict().items()})
h1, c1 = cell(torch.from_numpy(x_demo[:, 0]))
err_cell = np.abs(h1.detach().numpy() - out_np[:, 0]).max()
print(f"NumPy LSTM vs nn.LSTM: max |diff| = {err_lstm:.1e};  first step vs nn.LSTMCell: "
      f"{err_cell:.1e}")
assert err_lstm < 1e-12 and err_cell < 1e-12

# %% [markdown]
# ## 2. The attention step and the output network
#
# A tiny case by hand: one decoder state $s = (1, 0)$, two encoder states $h_1 = (1, 0)$,
# $h_2 = (0, 1)$ and $W_a = I$. The scores are $(1, 0)$, so $\alpha = (e, 1)/(e + 1)
# \approx (0.731, 0.269)$ and the context is that same vector. The softmax is lesson 01's
# (`attention.softmax_np`), with its mask convention: padded source positions get weight 0.

# %%
show(la.luong_attention_np)
show(la.output_np)
context, alpha = la.luong_attention_np(np.array([[[1.0, 0.0]]]),
                                       np.array([[[1.0, 0.0], [0.0, 1.0]]]), np.eye(2)[None])
print("α =", alpha[0, 0, 0].round(4), " c =", context[0, 0].round(4))
assert np.allclose(alpha[0, 0, 0], [math.e / (math.e + 1), 1 / (math.e + 1)])

# %% [markdown]
# The torch twin reads line for line like the reference. The trainable `Seq2SeqAttention` runs the
# encoder and the decoder each as one `nn.LSTM` call (teacher forcing, no "input feeding", so the
# decoder does not wait for the attention of the previous step) and starts the decoder from a
# zero state — a *choice*: the decoder sees the source only through attention. We check the whole
# model, in float64, against the NumPy pieces put together.

# %%
show(la.luong_attention_torch)
s_demo, h_demo, W_demo = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 5, 6)), rng.normal(size=(2, 6, 6))
mask_demo = np.array([[True] * 5, [True] * 3 + [False] * 2])
c_np_, a_np_ = la.luong_attention_np(s_demo, h_demo, W_demo, mask_demo)
c_t_, a_t_ = la.luong_attention_torch(*(torch.from_numpy(v) for v in (s_demo, h_demo, W_demo)),
                                      torch.from_numpy(mask_demo))
err_attn = max(np.abs(c_t_.numpy() - c_np_).max(), np.abs(a_t_.numpy() - a_np_).max())

torch.manual_seed(0)
tiny = la.Seq2SeqAttention(7, 6, hidden=5, embed=4, heads=2).double()
src_demo, tin_demo = torch.randint(0, 7, (2, 5)), torch.randint(0, 6, (2, 3))
logits_demo, _ = tiny(src_demo, tin_demo, torch.from_numpy(mask_demo))
npw = lambda p: p.detach().numpy()  # noqa: E731
h_ref_, _ = la.lstm_np(npw(tiny.src_embed.weight)[src_demo.numpy()],
                       *map(npw, (tiny.encoder.weight_ih_l0, tiny.encoder.weight_hh_l0,
                                  tiny.encoder.bias_ih_l0, tiny.encoder.bias_hh_l0)))
s_ref_, _ = la.lstm_np(npw(tiny.tgt_embed.weight)[tin_demo.numpy()],
                       *map(npw, (tiny.decoder.weight_ih_l0, tiny.decoder.weight_hh_l0,
                                  tiny.decoder.bias_ih_l0, tiny.decoder.bias_hh_l0)))
ctx_ref_, _ = la.luong_attention_np(s_ref_, h_ref_, npw(tiny.W_a), mask_demo)
err_model = np.abs(npw(logits_demo) - la.output_np(ctx_ref_, s_ref_,
                                                    *map(npw, tiny.output_params()))).max()
print(f"attention torch vs NumPy: {err_attn:.1e};  whole model vs NumPy pieces: {err_model:.1e}")
assert err_attn < 1e-12 and err_model < 1e-10


# %% [markdown]
# ### The authors' model
#
# The copy experiments below use the model of the authors' code (`SequenceCopying/seq2seq_model.py`
# and `multihead.py`, github.com/Sea-Snell/AttentionDynamics). It differs from the one above in
# four places:
#
# * **one embedding table** for input and output, and one vocabulary: the words, `<eos>` and
#   `<sos>`;
# * the decoder **starts from the encoder's final state** $(h_n, c_n)$ instead of zeros, so it
#   knows something about the input before it attends;
# * the scores use a **biased query**, $q_t = A s_t + a$ and $e_{ti} = q_t^\top h_i$ — that is
#   $s_t^\top A^\top h_i + a^\top h_i$: Luong's general attention with $W_a = A^\top$, plus a
#   term $a^\top h_i$ that favours some input states whatever $t$ is;
# * the context passes through a second linear map, $c_t = P \sum_i \alpha_{ti} h_i + p$.
#
# With $K$ heads each has its own $(A_k, a_k, P_k, p_k)$ and the contexts are **averaged**,
# $c_t = \frac1K \sum_k \big(P_k \sum_i \alpha^k_{ti} h_i + p_k\big)$, as `multihead.py` does
# (`torch.mean`). The paper's §5.2 says *summed*; we follow the code, which produced the paper's
# Fig. 6. (A sum is $K$ times the mean: the same family of models from a different starting
# point.) The lexical probe attends every head to position $i$:
# $c_t := \frac1K\sum_k (P_k h_i + p_k)$, the authors' `get_state_scores2_one_off`.
#
# `tests/test_lstm_attention_official.py` re-creates the authors' module layout (their parameter
# names and shapes, time-major), loads its weights into ours (`official_to_ours`) and checks
# logits, attention and probe in float64. Here, the whole model against the NumPy pieces:

# %%
show(lo.projected_attention_np)
show(lo.OfficialSeq2Seq)
torch.manual_seed(0)
tiny_o = lo.OfficialSeq2Seq(7, hidden=5, heads=2).double()
src_o, tin_o = torch.randint(0, 7, (2, 5)), torch.randint(0, 7, (2, 3))
logits_o, _ = tiny_o(src_o, tin_o)
lstm_weights = lambda m: map(npw, (m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0,  # noqa: E731
                                   m.bias_hh_l0))
emb_o = npw(tiny_o.embedding.weight)
h_o, final_o = la.lstm_np(emb_o[src_o.numpy()], *lstm_weights(tiny_o.encoder))
s_o, _ = la.lstm_np(emb_o[tin_o.numpy()], *lstm_weights(tiny_o.decoder), state=final_o)
ctx_o, _ = lo.projected_attention_np(s_o, h_o, *map(npw, tiny_o.head_params()))
err_o = np.abs(npw(logits_o) - la.output_np(ctx_o, s_o, *map(npw, tiny_o.output_params()))).max()
print(f"the authors' model (2 heads, decoder started from the encoder) vs NumPy pieces: {err_o:.1e}")
assert err_o < 1e-10

# %% [markdown]
# ## 3. The lexical probe and the agreement metric
#
# The probe $\beta_{ti}$ feeds $h_i$ in place of the context: it asks how well the model would
# predict the right word if it attended only to $i$. When the attention *is* one-hot on $i$, the
# probe and the model's output are the same number (the tests check this). Agreement compares
# two rankings of positions coarsely: does the top position of $a$ land in the top 5% of $b$?
# For a random $a$ it does with probability $\lceil 0.05 n \rceil / n$ — the **random baseline**,
# a bit above 5% because of the rounding up (for $n = 10$ it is 10%).

# %%
show(la.lexical_probe_np)
show(la.agreement_np)
print("A(a, b) with a's top at b's best of 20 positions:",
      la.agreement_np(np.eye(20)[7], -np.abs(np.arange(20) - 7.0)))
print("random baseline for lengths 10, 20, 40:",
      [la.agreement_baseline_np([n]) for n in (10, 20, 40)])

# %% [markdown]
# ## 4. Learning to copy a permutation (the paper's §3.3), as the authors ran it
#
# The task could not be simpler: the output is the input. Each input is a random order of
# 40 words, then `<eos>`; the decoder reads `<sos>` and the words and must write the words and
# `<eos>`. Two distributions:
#
# * **40-of-40**: always the same 40 word types, permuted;
# * **40-of-60**: 40 types sampled from 60, then permuted (the control).
#
# In 40-of-40 every sentence pair contains every word once: "which input word predicts output
# word $y$?" has no answer from co-occurrence, so KTIW cannot get a head start, and the theory
# predicts attention may never get going. In 40-of-60 a word co-occurs with itself more than with
# others.
#
# We train the authors' model the way their `seq2seq.py` does: Adam at learning rate 1e-3, no
# gradient clipping, a fresh batch of random pairs every step, 200 steps, token accuracy on fresh
# pairs every 10 steps; a run has **learned** when an evaluation exceeds 0.95 (the criterion of
# their `multihead.py`), and stops there. The table below lists their settings beside this run's.
# On a 2-core CPU full mode uses hidden size 128 and batch 16 — a thirty-second of the authors'
# compute per step — so that enough seeds fit in minutes; `MINATTN_SCALE=paper` runs their sizes
# and all 20 seeds (meant for a GPU).

# %%
show(lc.train_copy)
HIDDEN = L.size(full=128, smoke=16, paper=256)
BATCH = L.size(full=16, smoke=8, paper=128)
STEPS = L.size(full=200, smoke=6, paper=200)
EVAL_EVERY, EVAL_PAIRS = L.size(full=10, smoke=2, paper=10), L.size(full=50, smoke=8, paper=50)
TRACK = L.size(full=8, smoke=2, paper=50)  # pairs on which the probe is also measured
N_SEEDS = L.size(full=8, smoke=2, paper=20)
COPY = {"40-of-60": lc.CopyTask("40-of-60", 40, 60), "40-of-40": lc.CopyTask("40-of-40", 40, 40)}

print_table([
    {"setting": "hidden size = embedding size", "authors' code": "256", "this run": HIDDEN},
    {"setting": "embedding", "authors' code": "one table for input and output", "this run": "the same"},
    {"setting": "decoder start", "authors' code": "the encoder's final (h, c)", "this run": "the same"},
    {"setting": "attention", "authors' code": "query Linear(H, H) with bias; context through "
     "Linear(H, H)", "this run": "the same"},
    {"setting": "vocabulary", "authors' code": "the words + <eos> + <sos>",
     "this run": ", ".join(f"{t.vocab} ({t})" for t in COPY.values())},
    {"setting": "data", "authors' code": "fresh random pairs every step; x <eos> -> <sos> x <eos>",
     "this run": "the same"},
    {"setting": "optimiser", "authors' code": "Adam, lr 1e-3, no clipping", "this run": "the same"},
    {"setting": "batch", "authors' code": "128", "this run": BATCH},
    {"setting": "steps", "authors' code": "200", "this run": STEPS},
    {"setting": "evaluation", "authors' code": "token accuracy (<eos> included) on 50 fresh pairs "
     "every 10 steps", "this run": f"the same: {EVAL_PAIRS} pairs every {EVAL_EVERY} steps"},
    {"setting": "learned", "authors' code": f"accuracy > {lc.LEARNED} at an evaluation",
     "this run": "the same (the run stops there)"},
    {"setting": "seeds", "authors' code": "20", "this run": N_SEEDS}],
    ["setting", "authors' code", "this run"])

# %% [markdown]
# **The vocabulary is the task's.** As in the authors' code, the output layer has one class per
# word that occurs, plus `<eos>` and `<sos>` (never a target): 42 classes for 40-of-40, 62 for
# 40-of-60. Classes that never occur as targets are not harmless: a model that has them spends
# its early steps pushing their logits down, a dynamic that has nothing to do with attention.
# The assertion below checks that every class but `<sos>` occurs as a target.
#
# **The no-attention ceiling.** A decoder that ignores the input order can still be clever: it
# knows (under teacher forcing) which words it has already written, and on 40-of-40 which 40
# words exist. Guessing among the words not yet written, at output position $t$ it is right with
# probability $1/(40 - t)$, and on average over the 40 positions with $H_{40}/40$, where
# $H_n = 1 + \frac12 + \dots + \frac1n$ — plus the final `<eos>`, always right. A run stuck at
# this line has learned which words to write, but not *where to look*. (The decoder starts from
# the encoder's final state, so a model can carry a little of the order past the line even
# without attention.)

# %%
show(lo.no_attention_ceiling)
for task in COPY.values():
    _, _, y = task.sample(2000, np.random.default_rng(0))
    targets = set(torch.unique(y).tolist())
    assert targets == set(range(task.vocab - 1)), f"{task}: output classes that never occur"
    print(f"{task}: {task.vocab} classes = {task.vocab - 2} words + <eos> + <sos>; "
          f"{len(targets)} of them occur as targets (all but <sos>)")
CEILING = lo.no_attention_ceiling(40)
print(f"no-attention ceiling on 40-of-40: H_40/40 = {lo.no_attention_ceiling(40, eos=False):.3f} "
      f"over the words, {CEILING:.3f} with <eos> (what the accuracy below counts)")


# %%
def copy_run(task, seed, uniform=False, stop=True):
    """One run: the seed fixes the model's initialisation and the batches."""
    torch.manual_seed(seed)
    model = lo.OfficialSeq2Seq(task.vocab, HIDDEN, uniform=uniform).to(L.device)
    hist = lc.train_copy(model, task, seed, STEPS, BATCH, eval_every=EVAL_EVERY,
                         eval_pairs=EVAL_PAIRS, stop_above=lc.LEARNED if stop else None,
                         track=TRACK)
    return model, hist


cpu = time.process_time()
runs = {}
for task in COPY.values():
    for seed in tqdm(range(N_SEEDS), desc=f"{task}, {N_SEEDS} seeds"):
        runs[task.name, seed] = copy_run(task, seed)


def learned_steps(name, n):
    """Per seed: the step at which the run learned (a run that never did counts as
    STEPS + EVAL_EVERY, the next evaluation it did not get)."""
    return [lc.learned_at(runs[name, s][1]) or STEPS + EVAL_EVERY for s in range(n)]


success = {name: sum(lc.learned(runs[name, s][1]) for s in range(N_SEEDS)) for name in COPY}
for name in COPY:
    finals = [round(max(runs[name, s][1]["accuracy"]), 3) for s in range(N_SEEDS)]
    print(f"{name}: learned in {success[name]} of {N_SEEDS} seeds within {STEPS} steps; step "
          f"learned per seed: {[lc.learned_at(runs[name, s][1]) for s in range(N_SEEDS)]}; "
          f"best accuracy per seed: {finals}")
print(f"[CPU time of the copy runs: {time.process_time() - cpu:.0f} s]")

# %%
fig, ax = plt.subplots(figsize=(8.5, 4.8))
for name, color in [("40-of-60", "tab:blue"), ("40-of-40", "tab:red")]:
    for s in range(N_SEEDS):
        h = runs[name, s][1]
        ax.plot(h["step"], h["accuracy"], color=color, alpha=0.7,
                label=f"{name}: learned in {success[name]} of {N_SEEDS} seeds" if s == 0 else None)
ax.axhline(lc.LEARNED, color="gray", ls=":", lw=1, label=f"learned: accuracy > {lc.LEARNED}")
ax.axhline(CEILING, color="black", ls="--", lw=1,
           label=f"no-attention ceiling (H_40 + 1)/41 = {CEILING:.3f}")
ax.set(xlabel="training step", ylabel="token accuracy on fresh pairs", ylim=(0, 1.02),
       title=f"Copying permutations, the authors' model (hidden {HIDDEN}, batch {BATCH}); "
             "a run stops once learned")
ax.grid(alpha=0.3)
ax.legend(loc="center right", fontsize=9)
L.savefig(fig, "copy_curves")

# %% [markdown]
# Compare any stalled run with the dashed line: a run stuck there has learned which words to
# write but not where to look for the next one.
#
# What did the two kinds of run learn to attend to? Below, the attention of the first 40-of-60
# model and of the 40-of-40 model that ended worst, on one fresh pair. Copying needs the
# diagonal (the last row is `<eos>`).

# %%
worst = min(range(N_SEEDS), key=lambda s: max(runs["40-of-40", s][1]["accuracy"]))
fig, axes = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
for ax, (name, seed) in zip(axes, [("40-of-60", 0), ("40-of-40", worst)]):
    model, hist = runs[name, seed]
    src, tgt_in, _ = COPY[name].sample(1, np.random.default_rng(99), L.device)
    model.eval()
    with torch.no_grad():
        _, att = model(src, tgt_in)
    im = plots.heatmap(ax, att[0, 0].cpu(), vmax=1.0,
                       title=f"{name}, seed {seed} (best accuracy {max(hist['accuracy']):.2f})")
    ax.set(xlabel="input position i", ylabel="output position t")
fig.colorbar(im, ax=axes, shrink=0.8, label="α_ti")
L.savefig(fig, "copy_attention")

# %% [markdown]
# A model that learned attends along the diagonal; the title of each panel gives its best
# accuracy, so you can tell whether the right one is a run that learned or one that stalled.
#
# One more distribution from the paper: a **mixture of two disjoint sets** (§3.3, Fig. 3 right,
# and appendix A.3). Each pair permutes either words 0–39 or words 40–79, so sentences keep their
# length of 40. The model can tell from the first word which set a sentence uses, but inside a
# set the count table is flat again.

# %%
N_EXTRA = L.size(full=2, smoke=2, paper=20)
EXTRA = {"two sets of 40": lc.CopyTask("two sets of 40", 40, 40, n_sets=2)}
cpu = time.process_time()
for task in EXTRA.values():
    for seed in tqdm(range(N_EXTRA), desc=f"{task}, {N_EXTRA} seeds"):
        runs[task.name, seed] = copy_run(task, seed)
    success[task.name] = sum(lc.learned(runs[task.name, s][1]) for s in range(N_EXTRA))
    print(f"{task}: learned in {success[task.name]} of {N_EXTRA} seeds; step learned per seed "
          f"{[lc.learned_at(runs[task.name, s][1]) for s in range(N_EXTRA)]}; best accuracy per "
          f"seed {[round(max(runs[task.name, s][1]['accuracy']), 3) for s in range(N_EXTRA)]}")
print(f"[CPU time of these runs: {time.process_time() - cpu:.0f} s]")

# %% [markdown]
# ## 5. Why: the count tables, and the two stages of training
#
# Lesson 06 builds IBM Model 1's **count table**: every output token spreads one unit of credit
# evenly over the input tokens of its sentence, $C(x, y) \mathrel{+}= 1/|x^m|$ — exactly what
# uniform attention "sees". The paper's §4.1 (eq. 15) shows that the bag-of-words proxy of its
# §2.3 — uniform attention, word embeddings instead of hidden states, one linear layer — starts
# by learning $C(x, y)$ minus its row mean. Here are the tables of the three tasks, normalised
# per input word, with the number of runs that learned (`<eos>` and `<sos>` left out) — and, as
# a fourth, the table of a task the paper's §6.2 uses against its own story: the **permutation
# function** $y_t = x_{\pi(t)}$ for one fixed random $\pi$ on 40-of-60 words. Its table is
# exactly that of copying (the same words on both sides), so KTIW *is* learnable, yet the paper
# reports that the model always fails to learn it: attention must learn a non-monotonic pattern,
# and "LSTM has a built-in inductive bias to learn monotonic attention". A count table cannot
# see order; lesson 06's summary comes back to this.

# %%
def count_table(src, tgt):
    """Dense C(x, y) (rows: input words, columns: output words, both in sorted order)."""
    bx = ibm1.make_bitext(src, tgt, null=False)
    words = sorted(bx.src_vocab[1:])
    C = ibm1.count_table_np(bx)                    # (V_x, V_y), row 0 = NULL (unused here)
    return C[np.ix_([bx.src_index[w] for w in words], [bx.tgt_index[w] for w in words])]


n_table = L.size(full=2000, smoke=200)
PERMUTED = lc.CopyTask("permute by π (40-of-60)", 40, 60,
                       order=np.random.default_rng(7).permutation(40))
fig, axes = plt.subplots(1, 4, figsize=(19, 4.6), constrained_layout=True)
for ax, task in zip(axes, [*COPY.values(), *EXTRA.values(), PERMUTED]):
    src_ids, _, tgt_ids = task.sample(n_table, np.random.default_rng(5))
    C = count_table([[f"w{k:02d}" for k in row] for row in src_ids[:, :-1].tolist()],
                    [[f"w{k:02d}" for k in row] for row in tgt_ids[:, :-1].tolist()])
    t1 = C / C.sum(1, keepdims=True)
    ratio = np.diag(t1).mean() / t1[~np.eye(len(t1), dtype=bool) & (C > 0)].mean()
    n_runs = N_SEEDS if task.name in COPY else N_EXTRA
    learned_in = (f"learned in {success[task.name]} of {n_runs} runs" if task.name in success
                  else "not trained here (§6.2: always fails)")
    print(f"{task.name:25s} diagonal / co-occurring off-diagonal = {ratio:.2f}; {learned_in}")
    im = plots.plot_table(ax, t1, None, None, vmax=0.05, title=f"{task}\n{learned_in}")
    ax.set_xticks([]), ax.set_yticks([])
fig.colorbar(im, ax=axes, shrink=0.8, label="C(x, y) / Σ_y' C(x, y')")
L.savefig(fig, "count_tables")

# %% [markdown]
# The 40-of-40 table is flat: every word co-occurs with every other word exactly as often as
# with itself, so the table says nothing about which input word an output word comes from. The
# mixture is two flat blocks. The 40-of-60 control and the permutation function have their
# diagonal (lesson 06 derives its height, 59/39 of the rest).

# %%
steps_60, steps_40 = learned_steps("40-of-60", N_SEEDS), learned_steps("40-of-40", N_SEEDS)
steps_mix = learned_steps("two sets of 40", N_EXTRA)
print(f"step learned (never: {STEPS + EVAL_EVERY}) — 40-of-60: {steps_60}; 40-of-40: {steps_40}; "
      f"two sets of 40: {steps_mix}")
L.claim("copying permutations of 40 words sampled from 60 learns every time",
        "every time (§3.3, Fig. 3 blue); perfect within 300 steps (§6.2)",
        f"learned in {success['40-of-60']} of {N_SEEDS} seeds within {STEPS} steps",
        f"hidden {HIDDEN}, batch {BATCH} (the authors: 256, 128)",
        verdict=same(rate(success["40-of-60"], N_SEEDS), 1.0))
L.claim("copying permutations of the same 40 words sometimes fails (and sometimes learns)",
        "sometimes fails (§3.3, Fig. 3 red), sometimes learns (§5.2); seed count not given",
        f"learned in {success['40-of-40']} of {N_SEEDS} seeds within {STEPS} steps",
        f"hidden {HIDDEN}, batch {BATCH}; 'sometimes': the success rate is above 0 and below 1",
        verdict=combine(versus(rate(success["40-of-40"], N_SEEDS), 0.0, ">"),
                        versus(rate(success["40-of-40"], N_SEEDS), 1.0, "<")))
L.claim("without co-occurrence signal learning comes later: 40-of-40 learns later than 40-of-60",
        "KTIW hard to learn, so attention is learned late or never (§3.3, Fig. 3)",
        f"step learned {np.mean(steps_40):.0f} vs {np.mean(steps_60):.0f} on average "
        f"({N_SEEDS} seeds each; never = {STEPS + EVAL_EVERY})",
        "a run that never learns counts as learning at the next evaluation: a lower bound",
        verdict=compare(steps_40, steps_60, ">"))
L.claim("a mixture of permutations of two disjoint sets is learned later than 40-of-60, like 40-of-40",
        "the same qualitative conclusion (§3.3, Fig. 3 right; appendix A.3)",
        f"learned in {success['two sets of 40']} of {N_EXTRA} seeds; step learned "
        f"{np.mean(steps_mix):.0f} vs {np.mean(steps_60):.0f} for 40-of-60",
        f"sentences of 40 words from 2 × 40 types; {N_EXTRA} seeds",
        verdict=compare(steps_mix, steps_60, ">"))

# %% [markdown]
# ### The two stages, watched
#
# The paper's story is about *order*: the lexical probe (KTIW) is learned first, attention
# follows it, and the output gets right last. Every run above also recorded, every 10 steps, how
# often the attention's top position and the probe's top position hold the word to output (the
# "right word"; chance is 1 in 41). Below, the first seed of each distribution, with two more
# runs: the same model with its attention **frozen uniform** (nothing but KTIW can be learned
# there, the setting of the paper's §3.2).

# %%
N_UNIFORM = L.size(full=2, smoke=2, paper=5)
cpu = time.process_time()
uniform_runs = {(name, s): copy_run(COPY[name], s, uniform=True, stop=False)[1]
                for name in COPY for s in tqdm(range(N_UNIFORM), desc=f"{name}, frozen uniform")}
print(f"[CPU time of the frozen-uniform runs: {time.process_time() - cpu:.0f} s]")

fig, axes = plt.subplots(1, 2, figsize=(14, 5), sharey=True, constrained_layout=True)
styles = {"accuracy": ("token accuracy", "black"), "attention": ("attention on the right word",
          "tab:orange"), "probe": ("probe (KTIW) on the right word", "tab:green")}
for ax, name in zip(axes, COPY):
    h, hu = runs[name, 0][1], uniform_runs[name, 0]
    for key, (label, color) in styles.items():
        ax.plot(h["step"], h[key], color=color, lw=2, label=label)
    for key in ("accuracy", "probe"):
        ax.plot(hu["step"], hu[key], color=styles[key][1], lw=1.2, ls="--",
                label=f"{styles[key][0]}, attention frozen uniform")
    ax.axhline(CEILING, color="gray", ls=":", lw=1, label=f"no-attention ceiling {CEILING:.3f}")
    ax.set(xlabel="training step", title=f"{name}, seed 0", xlim=(0, STEPS), ylim=(0, 1.02))
    ax.grid(alpha=0.3)
axes[0].set_ylabel("fraction of output tokens")
axes[1].legend(loc="upper left", fontsize=8)
L.savefig(fig, "two_stages")


def first_above(hist, key, level=0.5):
    """The first evaluated step where hist[key] exceeds `level` (never: STEPS + EVAL_EVERY)."""
    return next((s for s, v in zip(hist["step"], hist[key]) if v > level), STEPS + EVAL_EVERY)


order = {name: [(first_above(runs[name, s][1], "probe"), first_above(runs[name, s][1], "attention"))
                for s in range(N_SEEDS)] for name in COPY}
for name, pairs in order.items():
    print(f"{name}: first step with probe > 0.5 and with attention > 0.5, per seed: {pairs}")
probe_mean = {name: [np.mean(uniform_runs[name, s]["probe"]) for s in range(N_UNIFORM)]
              for name in COPY}
for name in COPY:
    hu = [uniform_runs[name, s] for s in range(N_UNIFORM)]
    print(f"{name}, attention frozen uniform ({N_UNIFORM} seeds): probe on the right word "
          f"averaged over the run {np.mean(probe_mean[name]):.3f}, at its best "
          f"{np.mean([max(h['probe']) for h in hu]):.3f}; final accuracy "
          f"{np.mean([h['accuracy'][-1] for h in hu]):.3f}")
# within a run: how many steps attention comes after the probe (runs where neither crosses 0.5
# say nothing about the order and are left out)
lead = [a - p for name in COPY for p, a in order[name] if min(p, a) <= STEPS]
if len(lead) < 2:  # (smoke runs are too short for either to cross: keep every run)
    lead = [a - p for name in COPY for p, a in order[name]]
print(f"steps by which attention follows the probe, per run where either crosses 0.5: {lead}")
L.claim("KTIW is learned before attention (the two stages)",
        "early: KTIW from co-occurrence; later: attention follows it (§1, §2.2, Fig. 1)",
        f"attention crosses 0.5 {np.mean(lead):.0f} steps after the probe on average "
        f"({sum(x > 0 for x in lead)} of {len(lead)} runs later, {sum(x < 0 for x in lead)} earlier)",
        "our measure: how often the top position holds the right word; paired within each run",
        verdict=versus(lead, 0.0, ">"))
L.claim("under frozen uniform attention KTIW is learned on 40-of-60, not on 40-of-40",
        "KTIW learns under uniform attention (§3.2); the proxy provably cannot on 40-of-40 (§3.3)",
        f"probe on the right word, run average {np.mean(probe_mean['40-of-60']):.2f} vs "
        f"{np.mean(probe_mean['40-of-40']):.2f}",
        f"{N_UNIFORM} seeds each", verdict=compare(probe_mean["40-of-60"], probe_mean["40-of-40"], ">"))

# %% [markdown]
# What to look for. On 40-of-60 (left) the probe's top position finds the right word within a
# few dozen steps, and the probe of the frozen-uniform model (dashed green) rises exactly as
# fast at first: this KTIW comes from co-occurrence, no attention needed. Attention on the right
# word rises next, and the token accuracy follows it. On 40-of-40 (right) the frozen-uniform
# probe stays near the floor: with a flat count table there is nothing to learn without
# attention. The standard 40-of-40 run differs from it only in that its attention may move —
# and when its probe does rise, it still rises before attention: a little non-uniform attention
# gives a little KTIW, which pulls attention further. That loop has to start from the noise of
# the initialisation instead of from co-occurrence, which is why it starts late, or not within
# the budget. The two verdicts above test both halves over every seed.

# %% [markdown]
# ## 6. More heads rescue a bad initialisation (§5.2)
#
# One head can already express copying, so more heads add no expressiveness — but each head is
# another draw of the initial attention. The paper calls a head initialisation **good** if a
# model with that single head learns, **bad** if not, and combines them. Its `multihead.py` does
# this on **one fixed base network** (embedding, LSTMs, output network, drawn once):
#
# 1. draw a candidate head — its own query map $(A, a)$ and context map $(P, p)$ — and train the
#    base network with it alone, once per data seed (three in their code): the head is *good*
#    if every run learns within 200 steps, *bad* if every run ends below 0.6, and thrown away
#    otherwise (rejection sampling: 20 good and 20 bad heads);
# 2. build 8-head models on the same base network, contexts averaged: (1) eight bad heads,
#    (2) one good head and seven bad ones, (3) eight fresh random heads — 50 combinations each,
#    each trained once — and count how many converge.
#
# The paper: (1) fails, (2) converges, (3) converges with high probability. That is a far
# larger computation than the copy runs above, so full mode runs a smaller version — fewer
# heads per model, one data seed to judge a head, a small pool and a few combinations per
# scenario (the table below) — and `MINATTN_SCALE=paper` runs the authors' numbers. As the base
# network we take the initial network of the first seed whose single-head 40-of-40 run did not
# learn in section 4 (its own head is replaced): on such a base bad heads are common enough to
# be found within the budget. One more difference: `multihead.py`'s base network uses GRU cells
# and two embedding tables; we keep the LSTM model of section 4, the architecture the paper's
# §5.2 describes.

# %%
show(lc.head_status)
K = L.size(full=3, smoke=2, paper=8)
JUDGE_SEEDS = L.size(full=(0,), smoke=(0,), paper=(0, 1, 2))
N_GOOD, N_BAD = L.size(full=2, smoke=1, paper=20), L.size(full=K + 1, smoke=K + 1, paper=20)
MAX_CANDIDATES = L.size(full=12, smoke=3, paper=400)
COMBOS = L.size(full=3, smoke=2, paper=50)
MH_EVAL = L.size(full=100, smoke=8, paper=400)
print_table([
    {"setting": "heads per model", "authors' code": "8", "this run": K},
    {"setting": "data seeds to judge a head", "authors' code": "3", "this run": len(JUDGE_SEEDS)},
    {"setting": "good / bad heads kept", "authors' code": "20 / 20", "this run": f"{N_GOOD} / {N_BAD}"},
    {"setting": "combinations per scenario", "authors' code": "50", "this run": COMBOS},
    {"setting": "random heads", "authors' code": "drawn from a pool of 30", "this run": "fresh draws"},
    {"setting": "evaluation", "authors' code": "one fixed set of 400 pairs",
     "this run": f"one fixed set of {MH_EVAL} pairs"},
    {"setting": "base network", "authors' code": "GRU, two embedding tables",
     "this run": f"the LSTM model of section 4, hidden {HIDDEN}"},
    {"setting": "contexts of the heads", "authors' code": "averaged", "this run": "averaged"}],
    ["setting", "authors' code", "this run"])

task = COPY["40-of-40"]
failed = [s for s in range(N_SEEDS) if not lc.learned(runs["40-of-40", s][1])]
BASE_SEED = failed[0] if failed else 0
torch.manual_seed(BASE_SEED)  # that run's initial network; its head is replaced below
base = lo.OfficialSeq2Seq(task.vocab, HIDDEN).to(L.device)
print(f"base network: the initial network of 40-of-40 seed {BASE_SEED} of section 4 "
      f"({'did not learn' if failed else 'no seed failed; the first seed'})")
mh_kw = dict(steps=STEPS, batch=BATCH, eval_every=EVAL_EVERY,
             eval_set=task.sample(MH_EVAL, np.random.default_rng(2021), L.device))
cpu = time.process_time()
bar = tqdm(total=MAX_CANDIDATES, desc="judging candidate heads")
good, bad, statuses = lc.sample_heads(base, task, N_GOOD, N_BAD, MAX_CANDIDATES, seed=0,
                                      seeds=JUDGE_SEEDS, progress=lambda *_: bar.update(1),
                                      **mh_kw)
bar.close()
print(f"{len(statuses)} candidate heads judged: {statuses.count('good')} good, "
      f"{statuses.count('bad')} bad, {statuses.count(None)} neither; kept {len(good)} good and "
      f"{len(bad)} bad [{time.process_time() - cpu:.0f} s CPU]")
judged = [x for x in statuses if x is not None]
bad_share = judged.count("bad") / max(len(judged), 1)
print(f"on this base a judged head is bad {bad_share:.2f} of the time: {K} independent heads "
      f"are all bad with probability about {bad_share ** K:.2f}")
if L.smoke and not good:  # no run learns in a few steps: a bad head stands in for a good one
    good = [bad.pop()]
    print("smoke mode: no head can learn in a few steps; a bad head stands in for a good one")

# %%
pick = np.random.default_rng(0)
fresh = torch.Generator().manual_seed(1)
some_bad = lambda k: [bad[i] for i in pick.choice(len(bad), k, replace=False)]  # noqa: E731
scenarios = {  # different combinations only: the same heads in another order are the same model
    f"{K} bad": lc.distinct_combinations(lambda: some_bad(K), COMBOS) if len(bad) >= K else [],
    f"1 good + {K - 1} bad": lc.distinct_combinations(
        lambda: [good[pick.integers(len(good))]] + some_bad(K - 1), COMBOS)
    if good and len(bad) >= K - 1 else [],
    f"{K} random": [lc.draw_heads(K, HIDDEN, fresh, L.device) for _ in range(COMBOS)]}
cpu = time.process_time()
multi = {name: [lc.train_copy(lc.with_heads(base, heads), task, 0, stop_above=lc.LEARNED, **mh_kw)
                for heads in tqdm(combos, desc=name)] for name, combos in scenarios.items()}
converged = {name: sum(lc.learned(h) for h in hists) for name, hists in multi.items()}
for name, hists in multi.items():
    print(f"{name:18s} converged in {converged[name]} of {len(hists)} different combinations; "
          f"step learned {[lc.learned_at(h) for h in hists]}; best accuracy "
          f"{[round(max(h['accuracy']), 3) for h in hists]}")
print(f"[CPU time of the multi-head models: {time.process_time() - cpu:.0f} s]")

fig, ax = plt.subplots(figsize=(8.5, 4.8))
for (name, hists), color in zip(multi.items(), ["tab:red", "tab:blue", "tab:green"]):
    for k, h in enumerate(hists):
        ax.plot(h["step"], h["accuracy"], color=color, alpha=0.75,
                label=f"{name}: {converged[name]} of {len(hists)} converged" if k == 0 else None)
ax.axhline(CEILING, color="gray", ls=":", lw=1, label=f"no-attention ceiling {CEILING:.3f}")
ax.set(xlabel="training step", ylabel="token accuracy (fixed evaluation set)", ylim=(0, 1.02),
       title=f"40-of-40 copying, {K} heads on one base network (a run stops once learned)")
ax.grid(alpha=0.3)
ax.legend(loc="center right", fontsize=9)
L.savefig(fig, "multi_head")

parts, said = [], []
bad_name, good_name, random_name = scenarios
if multi[bad_name] and multi[good_name]:
    parts.append(compare(rate(converged[good_name], len(multi[good_name])),
                         rate(converged[bad_name], len(multi[bad_name])), ">"))
if multi[bad_name]:
    parts.append(compare(rate(converged[random_name], len(multi[random_name])),
                         rate(converged[bad_name], len(multi[bad_name])), ">"))
    said = [f"{name}: {converged[name]} of {len(h)}" for name, h in multi.items()]
if parts:
    L.claim(f"{K} averaged heads on one base network: all bad fails, one good converges, "
            "random converges with high probability",
            "8 bad: fails; 1 good + 7 bad: converges; 8 random: converges w.h.p. (§5.2, Fig. 6)",
            "; ".join(said) + " converged",
            f"{K} heads, {len(JUDGE_SEEDS)} judging seed(s), {COMBOS} combinations per scenario; "
            "both parts: the scenario converges more often than all-bad",
            verdict=combine(*parts))
else:
    print(f"fewer than {K} bad heads among {len(statuses)} candidates: the scenarios cannot be "
          "built, so the claim is not tested in this run")

# %% [markdown]
# Read the verdict against the design. A good head was good *on this base network*, alone; the
# question is whether it still wins when it shares the averaged context with bad heads — its
# read-out enters the context with weight $1/K$ — and whether a few random draws usually
# include a good one. That second part depends on $K$: all $K$ random heads are bad with the
# probability printed after the rejection sampling, which the paper's eight heads make small
# and our three do not. In full mode each scenario has only a few combinations, drawn from a
# small pool, so the rule needs a clear difference between the scenarios to call it; paper
# scale runs the authors' 50 combinations of 8 heads from pools of 20.

# %% [markdown]
# ## 7. Does a hidden state stay local? The keyword task (§6.1)
#
# The probe assumes $h_i$ speaks about word $x_i$. Test it on a classifier
# ($e_i = v^\top\tanh(W h_i + b)$, $\alpha = \mathrm{softmax}(e)$,
# $P(\text{pos}) = \sigma(w^\top\sum_i\alpha_i h_i + b_0)$) whose attention is **frozen uniform**.
# A sequence of 20 words from $\{1..100\}$ is positive iff the keyword 1 occurs (once). On
# positive held-out sequences we track the log-odds $w^\top h_i + b_0$ the model would output if
# it attended only to the keyword position $k$, to $k+1$, to the last position — and the model's
# own uniform log-odds. A "local" hidden state predicts: keyword highest. An LSTM carries
# information forward, though, and nothing stops the evidence from flowing to the last state.

# %%
show(la.AttentionClassifier)
KW_LEN, KW_VOCAB = 20, 100
KW_STEPS = L.size(full=3000, smoke=30)
kw_rng = np.random.default_rng(3)
kw_x, kw_y, kw_pos = tasks.keyword_task(512, KW_LEN, KW_VOCAB, np.random.default_rng(4))
pos_rows = np.flatnonzero((kw_y == 1) & (kw_pos < KW_LEN - 1))  # keyword not last: k+1 exists
kw_x_t = torch.tensor(kw_x, device=L.device)
torch.manual_seed(0)
kw_model = la.AttentionClassifier(KW_VOCAB + 1, hidden=64, uniform=True).to(L.device)


def kw_batch(step):
    x, y, _ = tasks.keyword_task(32, KW_LEN, KW_VOCAB, kw_rng)
    return torch.tensor(x, device=L.device), torch.tensor(y, device=L.device).float()


def kw_loss(model, x, y):
    return F.binary_cross_entropy_with_logits(model(x)[0], y)


def kw_eval():
    z_pos = kw_model.position_logits(kw_x_t)[pos_rows].cpu().numpy()  # (P, N)
    k = kw_pos[pos_rows]
    rows = np.arange(len(pos_rows))
    return {"keyword k": z_pos[rows, k].mean(), "next k+1": z_pos[rows, k + 1].mean(),
            "uniform": kw_model(kw_x_t)[0][pos_rows].mean().item(),
            "last": z_pos[:, -1].mean(),
            "acc": ((kw_model(kw_x_t)[0] > 0).cpu().numpy() == kw_y).mean()}


kw_hist = train(kw_model, kw_batch, kw_loss, KW_STEPS, lr=1e-3, evaluate=kw_eval,
                eval_every=L.size(full=50, smoke=10), desc="keyword, uniform attention")
fig, ax = plt.subplots(figsize=(8, 4.6))
for key in ["keyword k", "next k+1", "uniform", "last"]:
    ax.plot(kw_hist[f"{key}_step"], kw_hist[key], label=key)
ax.set(xlabel="training step", ylabel="mean log-odds on positive sequences",
       title="Frozen uniform attention: what each position alone would say")
ax.grid(alpha=0.3)
ax.legend()
L.savefig(fig, "keyword_logodds")
early = next(i for i, a in enumerate(kw_hist["acc"]) if a >= 0.75) if max(kw_hist["acc"]) >= 0.75 else 0
for when, i in [("when accuracy first reaches 75%", early), ("at the end", -1)]:
    vals = {k: kw_hist[k][i] for k in ["keyword k", "next k+1", "uniform", "last"]}
    print(f"{when} (step {kw_hist['acc_step'][i]}): " + ", ".join(f"{k} {v:+.2f}" for k, v in vals.items()))
end_order = sorted(["keyword k", "next k+1", "uniform", "last"], key=lambda k: -kw_hist[k][-1])
L.claim("keyword task, frozen uniform attention: keyword position wins early, last position "
        "wins after long training", "early: keyword > next > uniform; late: last largest (Fig. 7)",
        f"order at step {KW_STEPS}: {' > '.join(end_order)}",
        "20 words, 100 types, hidden 64; the paper's n and vocabulary were lost in extraction")

# %% [markdown]
# In our run the last position is ahead from the first checkpoint on, and the keyword position
# is never the largest: the paper's early phase (keyword first) does not show at our checkpoint
# spacing, while its late phase (last position largest) does. A unidirectional LSTM carries the
# keyword forward into every later state, and the last state is the one that has read the whole
# sequence; under uniform attention nothing pushes the evidence to stay where the keyword was.
# The lexical probe's assumption — $h_i$ speaks about $x_i$ — is an approximation.
#
# ## 8. Attention agrees with the probe on real data (§3.1–3.2)
#
# Now the paper's Table 2 at small scale. For each dataset we train
# * a standard model (attention $\alpha$, probe $\beta$) — also the reference $\alpha^*$;
# * the same architecture with attention **frozen uniform** (its probe $\beta^{\mathrm{uf}}$);
# * the standard model again from another seed, evaluated along the way, for the
#   **contextualised agreement** $\xi(\beta)$: the performance at the first checkpoint $\tau$ where
#   $A(\alpha^\tau, \alpha^*) \ge A(\beta, \alpha^*)$ — "the probe agrees with the attention as much
#   as an attention that already reaches this accuracy".
#
# and report $A(\alpha, \beta)$, $A(\alpha, \beta^{\mathrm{uf}})$, the random baseline and $\xi$
# on held-out data. Sentiment: the Rotten Tomatoes sentences SST was built from (classification,
# accuracy). Translation: English → German Bible verses (token accuracy), standing in for
# Multi30k.

# %%
show(la.contextualized_agreement)


def sentiment_data(n_train, n_valid):
    try:
        train_set, valid_set = load_sentiment("train"), load_sentiment("valid")
    except DatasetMissing as err:
        print(f"real sentiment data missing ({err}); fallback: the keyword task as 'sentiment'")
        x, y, _ = tasks.keyword_task(n_train + n_valid, 20, 100, np.random.default_rng(8))
        sents = [[str(w) for w in row] for row in x]
        return (sents[:n_train], y[:n_train]), (sents[n_train:], y[n_train:])
    # the file lists positive sentences first: shuffle before taking a subset
    out = []
    for split, n in [(train_set, n_train), (valid_set, n_valid)]:
        keep = np.random.default_rng(0).permutation(len(split.texts))[:n]
        out.append(([tokenize(split.texts[i]) for i in keep], split.labels[keep]))
    return out


def parallel_data(n_train, n_valid, max_len=20):
    """Training and held-out verse pairs of 3..max_len words on both sides."""
    try:
        splits = [[(tokenize(a), tokenize(b)) for a, b in load_parallel("en-de", split)]
                  for split in ("train", "valid")]
    except DatasetMissing as err:
        print(f"real parallel data missing ({err}); fallback: tasks.dictionary_corpus")
        src, tgt, _ = tasks.dictionary_corpus(2 * (n_train + n_valid), 300,
                                              np.random.default_rng(9), length=(5, 15),
                                              n_function=5)
        pairs = list(zip(src, tgt))
        splits = [pairs[:len(pairs) // 2], pairs[len(pairs) // 2:]]
    fits = [[(a, b) for a, b in pairs if 3 <= len(a) <= max_len and 3 <= len(b) <= max_len]
            for pairs in splits]
    return fits[0][:n_train], fits[1][:n_valid]


# %%
def mean_agreement(a, b, src_len, tgt_len=None):
    """Mean A(a, b) over the real output rows; a, b (B, N) (one output) or (B, T, N)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.ndim == 2:
        a, b, tgt_len = a[:, None], b[:, None], np.ones(len(a), int)
    keys = np.arange(a.shape[2])[None, None, :] < np.asarray(src_len)[:, None, None]
    rows = np.arange(a.shape[1])[None, :] < np.asarray(tgt_len)[:, None]
    return la.agreement_np(a, b, np.broadcast_to(keys, a.shape))[rows].mean()


def random_baseline(src_len, tgt_len=None):
    return la.agreement_baseline_np(np.repeat(src_len, 1 if tgt_len is None else tgt_len))


def table2_row(fit, measure, src_len, tgt_len=None):
    """Standard model (α, β), frozen-uniform model (β_uf), a re-seeded standard model tracked
    against α* = α; returns the row of agreements and the re-seeded model's curve."""
    alpha, beta, perf = measure(fit(0, False)[0])
    _, beta_uf, _ = measure(fit(1, True)[0])
    curve = fit(2, False, alpha)[1]
    row = {"A(α, β)": mean_agreement(alpha, beta, src_len, tgt_len),
           "A(α, β_uf)": mean_agreement(alpha, beta_uf, src_len, tgt_len),
           "A_rand": random_baseline(src_len, tgt_len)}
    for name, b in [("β", beta), ("β_uf", beta_uf)]:
        threshold = mean_agreement(b, alpha, src_len, tgt_len)  # A(β, α*)
        row[f"ξ({name})"], row[f"ξ({name}) reached"] = la.contextualized_agreement(
            curve["agree"], curve["perf"], threshold)
    row["P final"] = perf
    return row, curve


def batches(n, size, rng):
    """Shuffled mini-batches of indices, epoch after epoch."""
    while True:
        order = rng.permutation(n)
        for k in range(0, n - size + 1, size):
            yield order[k:k + size]


# %% [markdown]
# **Sentiment.** The attention classifier above, hidden 64, on the Rotten Tomatoes sentences
# (label: mean human score > 0).

# %%
SENT_TRAIN, SENT_VALID = L.size(full=8000, smoke=300), L.size(full=1000, smoke=100)
SENT_STEPS, SENT_EVERY = L.size(full=1500, smoke=20), L.size(full=25, smoke=5)
(s_sents, s_labels), (v_sents, v_labels) = sentiment_data(SENT_TRAIN, SENT_VALID)
sent_vocab = tasks.build_vocab(s_sents, min_count=2)
sx, _ = tasks.encode(s_sents, sent_vocab)
vx, v_len = tasks.encode(v_sents, sent_vocab)
sx, vx = torch.tensor(sx, device=L.device), torch.tensor(vx, device=L.device)
sy = torch.tensor(s_labels, device=L.device).float()
vy = torch.tensor(v_labels, device=L.device)
print(f"sentiment: {len(sx)} training / {len(vx)} held-out sentences, vocabulary {len(sent_vocab)}")


def sent_measure(model):
    model.eval()
    with torch.no_grad():
        z, alpha = model(vx, vx != 0)
    beta = model.probe(vx, vy)
    return alpha.cpu().numpy(), beta.cpu().numpy(), ((z > 0).long() == vy).float().mean().item()


def sent_fit(seed, uniform, reference=None):
    torch.manual_seed(seed)
    model = la.AttentionClassifier(len(sent_vocab), hidden=64, uniform=uniform).to(L.device)
    order = batches(len(sx), 32, np.random.default_rng(seed))

    def loss_fn(model, x, y):
        return F.binary_cross_entropy_with_logits(model(x, x != 0)[0], y)

    def track():
        alpha, _, acc = sent_measure(model)
        return {"agree": mean_agreement(alpha, reference, v_len), "perf": acc}

    hist = train(model, lambda step: (sx[(i := next(order))], sy[i]), loss_fn, SENT_STEPS,
                 evaluate=None if reference is None else track, eval_every=SENT_EVERY,
                 desc=f"sentiment seed {seed}" + (" (uniform)" if uniform else ""))
    return model, hist


sent_row, sent_curve = table2_row(sent_fit, sent_measure, v_len)

# %% [markdown]
# **Translation.** `Seq2SeqAttention` (hidden 128) on English → German Bible verses of 3–24
# words, vocabularies of the 1,500 most frequent words per side (the rest `<unk>`), performance
# = token accuracy under teacher forcing.

# %%
MT_TRAIN, MT_VALID = L.size(full=12000, smoke=300), L.size(full=120, smoke=20)
MT_STEPS, MT_EVERY = L.size(full=800, smoke=10), L.size(full=40, smoke=5)
mt_train, mt_valid = parallel_data(MT_TRAIN, MT_VALID, max_len=24)
en_vocab = tasks.build_vocab([a for a, _ in mt_train], max_size=1500)
de_vocab = tasks.build_vocab([b for _, b in mt_train], max_size=1500)
mx, _ = tasks.encode([a for a, _ in mt_train], en_vocab)
my, _ = tasks.encode([b for _, b in mt_train], de_vocab)
vmx, vm_len = tasks.encode([a for a, _ in mt_valid], en_vocab)
vmy, vt_len = tasks.encode([b for _, b in mt_valid], de_vocab)
mx, my, vmx, vmy = (torch.tensor(a, device=L.device) for a in (mx, my, vmx, vmy))
print(f"translation: {len(mx)} training / {len(vmx)} held-out verse pairs, vocabularies "
      f"{len(en_vocab)} / {len(de_vocab)}")


def mt_shift(y):
    return torch.cat([torch.full_like(y[:, :1], de_vocab[tasks.BOS]), y[:, :-1]], dim=1)


def mt_measure(model):
    model.eval()
    with torch.no_grad():
        logits, alpha = model(vmx, mt_shift(vmy), vmx != 0)
    beta = model.probe(vmx, mt_shift(vmy), vmy)
    real = vmy != 0
    acc = ((logits.argmax(-1) == vmy) & real).sum().item() / real.sum().item()
    return alpha[:, 0].cpu().numpy(), beta.cpu().numpy(), acc


def mt_fit(seed, uniform, reference=None):
    torch.manual_seed(seed)
    model = la.Seq2SeqAttention(len(en_vocab), len(de_vocab), hidden=L.size(full=128, smoke=16),
                                embed=L.size(full=64, smoke=8), uniform=uniform).to(L.device)
    order = batches(len(mx), 32, np.random.default_rng(seed))

    def loss_fn(model, x, y):
        logits, _ = model(x, mt_shift(y), x != 0)
        return F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=0)

    def track():
        model.eval()
        logits, alpha = model(vmx, mt_shift(vmy), vmx != 0)
        real = vmy != 0
        acc = ((logits.argmax(-1) == vmy) & real).sum().item() / real.sum().item()
        return {"agree": mean_agreement(alpha[:, 0].cpu().numpy(), reference, vm_len, vt_len),
                "perf": acc}

    hist = train(model, lambda step: (mx[(i := next(order))], my[i]), loss_fn, MT_STEPS,
                 evaluate=None if reference is None else track, eval_every=MT_EVERY,
                 desc=f"translation seed {seed}" + (" (uniform)" if uniform else ""))
    return model, hist


mt_row, mt_curve = table2_row(mt_fit, mt_measure, vm_len, vt_len)

# %% [markdown]
# The paper's Table 2 lost its column headers in extraction. Its rows have eight numbers: five
# agreements (in %) and three accuracies. Reading §3: the fifth column is the random baseline
# — "close to 5% but not exactly because of integer rounding", and indeed it is largest (8) for
# SST, whose sentences are the shortest; the last column is the final performance; the first is
# $A(\alpha, \beta)$, the quantity §3.1 defines first; and §3.2 claims $A(\alpha, \beta^{\mathrm{uf}})$ and
# its contextualised agreement "significantly outperform the random baseline", which we take to
# be the fourth column (the two contextualised-performance columns of the paper's table are, by
# its appendix, those of columns 1 and 4). Columns 2 and 3 belong to quantities we do not
# reproduce (by our reading, the agreement with gradient-based saliency of §5.1 and with the
# bag-of-words proxy's probe). So we compare columns 1, 4 and 5: SST 20 / 25 / 8 and Multi30k
# 31 / 49 / 7.

# %%
PAPER = {"sentiment": {"A(α, β)": 20, "A(α, β_uf)": 25, "A_rand": 8, "P final": 84},
         "translation": {"A(α, β)": 31, "A(α, β_uf)": 49, "A_rand": 7, "P final": 66}}
fig, ax = plt.subplots(figsize=(9, 4.2))
names = ["A(α, β)", "A(α, β_uf)", "A_rand"]
xs = np.arange(len(names))
for k, (label, row, paper, color) in enumerate([
        ("ours: Rotten Tomatoes", sent_row, PAPER["sentiment"], "tab:blue"),
        ("ours: Bible en→de", mt_row, PAPER["translation"], "tab:orange")]):
    ax.bar(xs + 0.2 * (2 * k - 1) - 0.05, [100 * row[n] for n in names], 0.18, color=color,
           label=label)
    ax.bar(xs + 0.2 * (2 * k - 1) + 0.13, [paper[n] for n in names], 0.18, color=color,
           alpha=0.35, hatch="//", label=label.replace("ours: Rotten Tomatoes", "paper: SST")
           .replace("ours: Bible en→de", "paper: Multi30k"))
ax.set_xticks(xs, names)
ax.set(ylabel="agreement (%)", title="Attention–probe agreement on held-out data")
ax.legend(fontsize=8)
ax.grid(alpha=0.3, axis="y")
L.savefig(fig, "agreement_table")

for data, row in [("sentiment", sent_row), ("translation", mt_row)]:
    print(f"{data:12s} " + "  ".join(
        f"{k} {100 * v:.1f}" if isinstance(v, float) and not k.startswith(("ξ", "P")) else
        (f"{k} {100 * v:.1f}%" if k.startswith(("ξ", "P")) and not k.endswith("reached")
         else f"{k} {v}") for k, v in row.items()))
for data, row, paper_name in [("sentiment", sent_row, "SST"), ("translation", mt_row, "Multi30k")]:
    p = PAPER[data]
    for key, what in [("A(α, β)", "attention–probe agreement A(α, β)"),
                      ("A(α, β_uf)", "agreement with the frozen-uniform model's probe A(α, β_uf)"),
                      ("A_rand", "random baseline A_rand")]:
        L.claim(f"{what}, {paper_name}", f"{p[key]}% ({paper_name}, Table 2)",
                f"{100 * row[key]:.1f}% ({'Rotten Tomatoes' if data == 'sentiment' else 'Bible en→de'})",
                "different data, small models trained for minutes" if key != "A_rand"
                else "depends only on the sentence lengths")
    L.claim(f"contextualised agreement ξ(β), ξ(β_uf), {paper_name}",
            {"SST": "78 / 82 (final 84)", "Multi30k": "43 / 49 (final 66)"}[paper_name]
            + ", Table 2",
            f"{100 * row['ξ(β)']:.1f} / {100 * row['ξ(β_uf)']:.1f} (final {100 * row['P final']:.1f})",
            "our models are far from converged; ξ is capped by the final performance")

# %% [markdown]
# Both agreements are far above the random baseline on both datasets, as in the paper, and the
# baseline itself matches the paper's (it depends only on sentence lengths). On sentiment our
# agreements are higher than the paper's SST numbers; on translation they are lower, most of all
# for the frozen-uniform probe. Our translation models are small and far from converged (compare
# their final token accuracy with the paper's), and Bible verses are longer and more freely
# translated than Multi30k's image captions: a sharper trained attention and probe would be
# needed to agree more. The contextualised agreements sit below the final accuracies, as in
# the paper.
#
# ## Summary
#
# * An LSTM encoder–decoder with Luong attention, written twice (NumPy, torch) and checked
#   against `nn.LSTM` and against each other to ~1e-12; the authors' variant (shared embedding,
#   decoder started from the encoder, biased query, projected and averaged contexts) built from
#   the same pieces and checked against a re-creation of their module layout.
# * The lexical probe $\beta$ asks what the model would say attending to one position only; the
#   agreement metric compares the top of two rankings, against a random baseline slightly above 5%.
# * Copying a permutation looks trivial, but with a flat count table (40-of-40) co-occurrence
#   gives the probe nothing to learn and attention nothing to follow. We ran the authors' model
#   and training as their code does, measured how often and when each distribution is learned,
#   and in which order probe and attention rise, with frozen-uniform controls. Before reading
#   anything into a stalled run, size the output layer to the task and compare the run with the
#   no-attention ceiling. Lesson 06 explains *why* a flat table gives no signal.
# * The multi-head study keeps one base network and varies only the heads' initialisations:
#   heads add no expressiveness there, only more draws of the starting attention.
# * Under frozen uniform attention the evidence of a keyword flows to later hidden states: the
#   last position, not the keyword's, ends up with the largest log-odds.
# * On real data (sentiment and translation), attention agrees with the lexical probe several
#   times more often than the random baseline — and so does the probe of a model whose attention
#   was frozen uniform: word-level knowledge is learned without attention.
#
# The verdicts of this run, claim by claim (the rule: `minattn/tools/verdict.py`):

# %%
for c in L.claims:
    print(f"{c['verdict']:15s} {c['claim']}")

# %% [markdown]
# ## Exercises
#
# **5.1 — the Luong attention step (implement, ~10 min).** In a student copy
# (`python -m minattn.tools.exercises student DIR`), `luong_attention_np` and its torch twin in
# `minattn/lstm_attention.py` raise `NotImplementedError`. Compute the scores $s_t^\top W^k_a h_i$
# for every head $k$, the masked softmax (lesson 01's), and the summed context. Check:
# `pytest tests/test_lstm_attention.py --exercises 5.1`.
#
# **5.2 — the agreement metric (implement, ~10 min).** Implement `agreement_np` and
# `agreement_torch`: the argmax of $a$ over the real positions, and whether fewer than
# $\lceil 0.05 n\rceil$ real positions of $b$ are strictly above it. Check with `--exercises 5.2`.
#
# **5.3 — predict, then run (predict, ~15 min).** Three copy corpora (output = input):
# (A) `tasks.permutation_corpus(n, 30, 45, rng)` — 30 words sampled from 45, permuted;
# (B) `tasks.two_sets_corpus(n, 15, rng)` — a permutation of words 0–14 or of words 15–29;
# (C) `tasks.permutation_corpus(n, 15, 30, rng)` — 15 words sampled from 30, permuted.
# Compute their count tables with `count_table` (section 5) and predict which one a copy model
# will fail to learn: write "A", "B" or "C" in `failing_copy_corpus` of
# `minattn/answers/lstm_attention.py` (checked by `pytest tests/test_lstm_attention.py
# --exercises 5.3`). Then run it: `copy_run` (section 4) on `lc.CopyTask("A", 30, 45)`,
# `lc.CopyTask("B", 15, 15, n_sets=2)` and `lc.CopyTask("C", 15, 30)`, a few seeds each (a few
# minutes on a CPU), and compare the curves with your prediction.

# %%
print(f"lesson time: {time.perf_counter() - T0:.0f} s wall, {time.process_time() - CPU0:.0f} s CPU")
