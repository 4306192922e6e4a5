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
# # Lesson 05 — Attention in an LSTM encoder–decoder, and how it is learned
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
# Where the data gives no KTIW to learn, attention has little to follow — and a network that
# can express a task perfectly may fail to learn it. In this lesson you will
# 1. write the LSTM and Luong attention in NumPy beside their torch twins, and the authors'
#    copy model (their code is public) from the same pieces;
# 2. derive, in two lines, why gradient descent pulls attention toward where the probe points;
# 3. train copy models on permutations as the authors did, and watch one distribution learn and
#    another fail (the paper's §3.3), with the two stages of training in one plot;
# 4. try to rescue a failing model with more heads (§5.2; at the paper's scale).
#
# Lesson 06 explains the failure with count tables; lesson 08 returns to this model's probe and
# measures how well attention agrees with it on real data.
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
# The **lexical probe** asks "what if the model attended only to position $i$?":
# $\beta_{ti} = p_t(y_t)$ computed with $c_t := h_i$.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from tqdm import tqdm

from minattn.attention import softmax_torch
from minattn.course.lesson import Lesson, show, show_table
from minattn.course.lstm_attention import (
    LEARNED,
    CopyTask,
    alignment,
    copy_metrics,
    distinct_combinations,
    draw_heads,
    head_status,
    learned,
    learned_at,
    no_attention_ceiling,
    sample_heads,
    train_copy,
    with_heads,
)
from minattn.course.plots import heatmap, plot_table
from minattn.course.stats import all_of, compare, not_run, power, rate, rates, sometimes, versus
from minattn.course.utils import set_seed
from minattn.ibm1 import count_table_np, make_bitext
from minattn.lstm_attention import (
    OfficialSeq2Seq,
    lexical_probe_np,
    lstm_cell_np,
    lstm_np,
    luong_attention_np,
    luong_attention_torch,
    output_gradient_np,
    output_np,
    output_torch,
    projected_attention_np,
    score_gradient_np,
)

lesson = Lesson("05_lstm_attention")  # on a CPU: one torch thread (see Lesson)
rng = set_seed(lesson.seed(0))  # every seed goes through lesson.seed: MINATTN_SEED=100 reruns
T0, CPU0 = time.perf_counter(), time.process_time()
SMALL = "a smoke run's sizes" if lesson.smoke else ""  # smoke sizes cannot contradict a claim

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
# NumPy cell agrees with `nn.LSTMCell` and our loop with `nn.LSTM` to rounding error:
# `tests/test_lstm_attention.py` checks both in float64, and
# `tests/test_lstm_attention_official.py` checks the copy model of this lesson against these
# NumPy pieces.

# %%
show(lstm_cell_np)
show(lstm_np)

# %% [markdown]
# ## 2. The attention step and the output network
#
# Luong's "general" score compares the decoder state $s_t$ with every encoder state $h_i$
# through a matrix $W_a$, the softmax turns the scores into weights, and the context is the
# weighted average of the encoder states. For one decoder state, the three lines are:

# %%
s_t = np.array([1.0, 0.0])                       # one decoder state (H = 2)
h = np.array([[1.0, 0.0], [0.0, 1.0]])           # encoder states h_1, h_2 (one per row)
W_a = np.eye(2)
e = np.array([s_t @ W_a @ h_i for h_i in h])     # e_ti = s_tᵀ W_a h_i
alpha = np.exp(e - e.max()) / np.exp(e - e.max()).sum()   # α_t = softmax_i(e_t)
c_t = alpha @ h                                  # c_t = Σ_i α_ti h_i
print("scores e =", e, " α =", alpha.round(4), " c =", c_t.round(4))
assert np.allclose(alpha, [np.e / (np.e + 1), 1 / (np.e + 1)])

# %% [markdown]
# The scores are $(1, 0)$, so $\alpha = (e, 1)/(e + 1) \approx (0.731, 0.269)$, and with these
# two encoder states the context is that same vector. The library's `luong_attention_np` does
# the same for a batch of sentences, all decoder positions and $K$ heads at once (the heads'
# contexts summed), with lesson 01's masked softmax: padded source positions get weight 0. The
# same three lines, on random states, against it:

# %%
demo = np.random.default_rng(lesson.seed(1))
S, Hs, Wk = demo.normal(size=(3, 4)), demo.normal(size=(5, 4)), demo.normal(size=(4, 4))
ours = []
for s_row in S:                                  # one decoder position t at a time
    e = np.array([s_row @ Wk @ h_i for h_i in Hs])
    alpha = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
    ours.append(alpha @ Hs)
context, _ = luong_attention_np(S[None], Hs[None], Wk[None])
print(f"the three lines vs luong_attention_np: max |diff| = "
      f"{np.abs(np.array(ours) - context[0]).max():.1e}")
assert np.allclose(ours, context[0], atol=1e-12)
show(luong_attention_np, luong_attention_torch)
show(output_np)

# %% [markdown]
# ### The authors' model
#
# The copy experiments below use the model of the authors' code (`SequenceCopying/seq2seq_model.py`
# and `multihead.py`, github.com/Sea-Snell/AttentionDynamics). It is the model above with four
# differences:
#
# * **one embedding table** for input and output, and one vocabulary: the words, `<eos>` and
#   `<sos>`;
# * the decoder **starts from the encoder's final state** $(h_n, c_n)$, so it knows something
#   about the input before it attends;
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
# names and shapes, time-major), loads its weights into ours (`seq2seq_official_to_ours`) and
# checks logits, attention and probe in float64, and checks the whole model against the NumPy
# pieces.

# %%
show(projected_attention_np)
show(OfficialSeq2Seq)

# %% [markdown]
# ## 3. Why attention follows the probe
#
# The probe $\beta_{ti}$ feeds $h_i$ in place of the context: it asks how well the model would
# predict the right word if it attended only to $i$. When the attention *is* one-hot on $i$,
# the probe and the model's output are the same number (the tests check this).
#
# Why should attention move toward positions the probe likes? Take one head. The loss depends
# on the scores $e_t$ only through $c_t = \sum_j \alpha_{tj} h_j$; call
# $u_t = \partial \log p_t(y_t) / \partial c_t$ the direction in which moving the context raises
# the probability of the right word. With the softmax's Jacobian
# $\partial\alpha_{tj}/\partial e_{ti} = \alpha_{tj}(\delta_{ij} - \alpha_{ti})$:
#
# $$\frac{\partial \log p_t(y_t)}{\partial e_{ti}} = \sum_j (u_t\cdot h_j)\,\alpha_{tj}(\delta_{ij}
# - \alpha_{ti}) = \alpha_{ti}\Big(u_t\cdot h_i - \sum_j \alpha_{tj}\, u_t\cdot h_j\Big).$$
#
# $u_t\cdot h_i$ is the first-order gain in $\log p_t(y_t)$ from moving the context to $h_i$ — a
# linearised lexical probe. So a gradient step raises the score of every position whose probe
# beats the attention-weighted average, in proportion to the attention it already has: with
# nearly uniform attention, all positions move, toward where the probe points. When the probe
# is flat (no position predicts $y_t$ better than another) the gradient is zero, whatever
# attention would be right. (In the authors' model, whose context is $P r_t + p$ with
# $r_t = \sum_j \alpha_{tj} h_j$, read $u_t$ as the gradient with respect to $r_t$; the two lines
# do not change.) Below, $u$ from the output network written out (no autograd), the formula,
# and torch's autograd on a small random head.

# %%
show(lexical_probe_np)
show(output_gradient_np)
show(score_gradient_np)
demo = np.random.default_rng(lesson.seed(1))
s_d, h_d, W_d = demo.normal(size=(1, 3, 4)), demo.normal(size=(1, 5, 4)), demo.normal(size=(4, 4))
g_d = [demo.normal(size=shape) for shape in [(6, 8), (6,), (7, 6), (7,)]]  # W1, b1, W2, b2
y_d = demo.integers(0, 7, size=(1, 3))
e_d = torch.einsum("btd,de,bne->btn", *map(torch.from_numpy, (s_d, W_d, h_d))).requires_grad_()
alpha_d = softmax_torch(e_d)
log_p = output_torch(alpha_d @ torch.from_numpy(h_d), torch.from_numpy(s_d),
                     *map(torch.from_numpy, g_d)).log_softmax(-1)
(autograd_d,) = torch.autograd.grad(log_p.gather(-1, torch.from_numpy(y_d)[..., None]).sum(), e_d)
alpha_np = alpha_d.detach().numpy()
u_d = output_gradient_np(alpha_np @ h_d, s_d, y_d, *g_d)
formula_d = score_gradient_np(alpha_np, h_d, u_d)
print(f"∂ log p / ∂e by the formula vs torch's autograd: max |diff| = "
      f"{np.abs(formula_d - autograd_d.numpy()).max():.1e}")
assert np.abs(formula_d - autograd_d.numpy()).max() < 1e-12
gain_d = np.einsum("btd,bnd->btn", u_d, h_d)[0, 0]
print("output word 1: u·h_i − Σ_j α_j u·h_j =", (gain_d - alpha_np[0, 0] @ gain_d).round(3),
      "\n               ∂ log p / ∂e_i       =", formula_d[0, 0].round(3), "(same signs)")

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
# word $y$?" has no answer from co-occurrence, so KTIW cannot get a head start, and by section 3
# attention then has little pull toward the right word. In 40-of-60 a word co-occurs with
# itself more than with others.
#
# We train the authors' model the way their `seq2seq.py` does: Adam at learning rate 1e-3, no
# gradient clipping, a fresh batch of random pairs every step, 200 steps, token accuracy on fresh
# pairs every 10 steps; a run has **learned** when an evaluation exceeds 0.95 (the criterion of
# their `multihead.py`), and stops there. On a 2-core CPU full mode uses hidden size 128 and
# batch 8 (the table gives the rest); `MINATTN_SCALE=paper` runs their sizes (meant for a GPU).
#
# **How many runs.** The paper says 40-of-40 *sometimes* fails; we take "sometimes" to mean that
# each outcome, failing and learning within the budget, happens in more than one run in ten
# (an outcome rarer than that is "rarely"). Deciding that either way takes 36 runs: with fewer,
# even 0 failures of $n$ leaves a failure rate of 0.1 inside the exact 95 % interval. So full
# mode trains 36 seeds of 40-of-40.
#
# **Late or never: judged on the attention.** The paper's claim is that the *attention* fails
# to learn. A 40-of-40 run that has not learned by step 200 may be stuck, or merely slow, so
# those runs train on to a **horizon fixed here, before the run**: the longer budget in the
# table (twice the authors' in full mode), whatever their accuracy does on the way. At the
# horizon we measure what the attention does: the mean weight it puts on the right word (the
# input position of the word to write, on 20 fresh pairs). A failure is **lasting** if that
# weight is still below one half, **late** if the attention has found the right word by then.
# The slope of the accuracy plays no part: a curve can climb for hundreds of steps while the
# attention sits on the wrong words. How long a failure lasts is the course's own question,
# not the paper's, so the claim is tagged as ours: more than half of the runs that failed
# within the authors' budget are lasting (an exact rate test against one half). The line below
# the table gives the test's power for the numbers of failures the runs might give: its chance
# of "reproduced" if three failures in four last, and of "contradicted" if one in four does.
# With about half of the 36 runs failing, that chance is only about one half: the claim is
# underpowered at full mode's budget (twice the runs, to double the failures, would not fit in
# the budget). That line gives the power at our design's shares; the claim's row gives it at
# the share the runs measured.

# %%
HIDDEN = lesson.size(full=128, smoke=16, paper=256)
BATCH = lesson.size(full=8, smoke=8, paper=128)
STEPS = lesson.size(full=200, smoke=4, paper=200)     # the authors' budget
LONG = lesson.size(full=400, smoke=8, paper=1000)     # the horizon of 40-of-40 failures
EVAL_EVERY = lesson.size(full=10, smoke=2, paper=10)
EVAL_PAIRS = lesson.size(full=50, smoke=8, paper=50)
TRACK = lesson.size(full=8, smoke=2, paper=50)  # pairs on which the probe is also measured
SEEDS = {"40-of-60": lesson.seeds(lesson.size(full=8, smoke=2, paper=20)),
         "40-of-40": lesson.seeds(lesson.size(full=36, smoke=3, paper=36))}
ATTENDS = 0.5  # a failure is late if its attention has this much weight on the right word
DESIGN = 0.75  # a share of lasting failures the claim should be able to see (and 1 - it)
COPY = {"40-of-60": CopyTask("40-of-60", 40, 60), "40-of-40": CopyTask("40-of-40", 40, 40)}
show(train_copy)
show_table([
    {"setting": "hidden size = embedding size", "authors' code": "256", "this run": HIDDEN},
    {"setting": "embedding, decoder start, attention", "authors' code": "shared; the encoder's "
     "final (h, c); biased query, projected context", "this run": "the same"},
    {"setting": "vocabulary", "authors' code": "the words + <eos> + <sos>",
     "this run": ", ".join(f"{t.vocab} ({t})" for t in COPY.values())},
    {"setting": "data", "authors' code": "fresh random pairs every step; x <eos> -> <sos> x <eos>",
     "this run": "the same"},
    {"setting": "optimiser", "authors' code": "Adam, lr 1e-3, no clipping", "this run": "the same"},
    {"setting": "batch", "authors' code": "128", "this run": BATCH},
    {"setting": "steps", "authors' code": "200",
     "this run": f"{STEPS}; 40-of-40 runs not learned by then go on to {LONG}, learned or "
     "not"},
    {"setting": "evaluation", "authors' code": "token accuracy (<eos> included) on 50 fresh pairs "
     "every 10 steps", "this run": f"the same: {EVAL_PAIRS} pairs every {EVAL_EVERY} steps"},
    {"setting": "learned", "authors' code": f"accuracy > {LEARNED} at an evaluation",
     "this run": f"the same (the run stops there, if by step {STEPS})"},
    {"setting": "seeds", "authors' code": "not given",
     "this run": ", ".join(f"{len(s)} ({name})" for name, s in SEEDS.items())}],
    ["setting", "authors' code", "this run"])
n_40 = len(SEEDS["40-of-40"])
for n in sorted({max(1, n_40 // 4), max(1, n_40 // 2), max(1, 3 * n_40 // 4)}):
    design = power(rate(n, n, 0.5, ">"), effect=DESIGN)  # a rate test's power needs only n
    print(f"lasting failures, before the runs: with {n} failures of {n_40} runs, "
          f"'reproduced' has chance {design.reproduced:.2f} if a share {DESIGN} last, "
          f"'contradicted' {design.contradicted:.2f} if {1 - DESIGN} do (line: {ATTENDS} of "
          f"the attention on the right word at step {LONG})")

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
show(no_attention_ceiling)
for task in COPY.values():
    _, _, y = task.sample(2000, np.random.default_rng(lesson.seed(0)))
    targets = set(torch.unique(y).tolist())
    assert targets == set(range(task.vocab - 1)), f"{task}: output classes that never occur"
    print(f"{task}: {task.vocab} classes = {task.vocab - 2} words + <eos> + <sos>; "
          f"{len(targets)} of them occur as targets (all but <sos>)")
CEILING = no_attention_ceiling(40)
print(f"no-attention ceiling on 40-of-40: H_40/40 = {no_attention_ceiling(40, eos=False):.3f} "
      f"over the words, {CEILING:.3f} with <eos> (what the accuracy below counts)")


# %%
def copy_run(task, seed, steps, uniform=False, stop=True, stop_by=None):
    """One run: the seed fixes the model's initialisation and the batches. It stops once
    learned (stop), if by step `stop_by` (None: any step)."""
    torch.manual_seed(seed)
    model = OfficialSeq2Seq(task.vocab, HIDDEN, uniform=uniform).to(lesson.device)
    hist = train_copy(model, task, seed, steps, BATCH, eval_every=EVAL_EVERY,
                      eval_pairs=EVAL_PAIRS, stop_above=LEARNED if stop else None,
                      stop_by=stop_by, track=TRACK)
    return model, hist


def failed_within(hist, steps=None):
    """Not learned by step `steps` (default: the authors' budget)."""
    a = learned_at(hist)
    return a is None or a > (steps or STEPS)


def where_it_looks(model, task):
    """alignment() on 20 fresh pairs: offset of the top position, its correlation, weight."""
    src, tgt_in, _ = task.sample(20, np.random.default_rng(lesson.seed(98)), lesson.device)
    return alignment(model, task, src, tgt_in)


cpu = time.process_time()
hists, looks = {name: [] for name in COPY}, {}
for name, task in COPY.items():
    for seed in tqdm(SEEDS[name], desc=f"{task}, {len(SEEDS[name])} seeds"):
        model, hist = (copy_run(task, seed, LONG, stop_by=STEPS) if name == "40-of-40"
                       else copy_run(task, seed, STEPS))
        hists[name].append(hist)
        if failed_within(hist) or seed == SEEDS[name][0]:  # at the horizon: looked at below
            looks[name, seed] = where_it_looks(model, task)
at = {name: [learned_at(h) for h in hists[name]] for name in COPY}
within = {name: sum(a is not None and a <= STEPS for a in at[name]) for name in COPY}
for name in COPY:
    print(f"{name}: learned in {within[name]} of {len(SEEDS[name])} seeds within {STEPS} steps; "
          f"step learned per seed: {at[name]}")
print(f"[CPU time of the copy runs: {time.process_time() - cpu:.0f} s]")

# %%
fig, ax = plt.subplots(figsize=(8.5, 4.8))
for name, color in [("40-of-60", "tab:blue"), ("40-of-40", "tab:red")]:
    for s, h in enumerate(hists[name]):
        ax.plot(h["step"], h["accuracy"], color=color, alpha=0.5,
                label=f"{name}: learned in {within[name]} of {len(SEEDS[name])} within {STEPS} "
                      "steps" if s == 0 else None)
ax.axvline(STEPS, color="gray", lw=1, label=f"the authors' budget, {STEPS} steps")
ax.axhline(LEARNED, color="gray", ls=":", lw=1, label=f"learned: accuracy > {LEARNED}")
ax.axhline(CEILING, color="black", ls="--", lw=1,
           label=f"no-attention ceiling (H_40 + 1)/41 = {CEILING:.3f}")
ax.set(xlabel="training step", ylabel="token accuracy on fresh pairs", ylim=(0, 1.02),
       title=f"Copying permutations, the authors' model (hidden {HIDDEN}, batch {BATCH}); "
             f"a run stops once learned by step {STEPS}")
ax.grid(alpha=0.3)
ax.legend(loc="center right", fontsize=9)
lesson.savefig(fig, "copy_curves")

# %% [markdown]
# **What a failed run learned.** A run that did not learn might sit at the dashed line (it
# knows which words to write, not where to look), or it might be doing something else. For
# every 40-of-40 run that had not learned within the authors' budget, the lines below give its
# accuracy there and at the horizon, and where its attention looks at the horizon on fresh
# pairs: the mean *offset* of the attention's top position from the right word (positive:
# after it), the *correlation* of that top position with the right one over all output words
# (near 1 for a diagonal, shifted or not; near 0 for no order at all), and the weight on the
# right word itself, the claim's measure. An offset near $+k$ with a high correlation is a
# **shifted alignment**: the model attends $k$ words after the word it writes. One possible
# route: the encoder reads left to right, so its state at position $i + k$ still remembers
# $x_i$, and attention placed $k$ words late can still copy through the LSTM's memory — a slow
# detour that the accuracy climbs along. The summary line below counts the failed runs on such
# a shifted diagonal, so it says whether these runs show that route. The heatmap shows the
# attention of the first 40-of-60 run and of the failed run that ended lowest.

# %%
failed = {s: h for s, h in zip(SEEDS["40-of-40"], hists["40-of-40"]) if failed_within(h)}
is_lasting = {s: looks["40-of-40", s]["on_right"] < ATTENDS for s in failed}
for s, h in failed.items():
    look, a = looks["40-of-40", s], learned_at(h)
    print(f"40-of-40 seed {s}: accuracy {h['accuracy'][h['step'].index(STEPS)]:.3f} at step "
          f"{STEPS}, {h['accuracy'][-1]:.3f} at step {h['step'][-1]} (ceiling {CEILING:.3f}"
          f"{f'; learned at step {a}' if a else ''}); attention offset {look['offset']:+.1f}, "
          f"correlation {look['corr']:.2f}, weight on the right word {look['on_right']:.3f}: "
          f"{'lasting' if is_lasting[s] else 'late'}")
if failed:
    diagonal = [s for s in failed if looks["40-of-40", s]["corr"] > 0.5]
    shifted = [s for s in diagonal if abs(looks["40-of-40", s]["offset"]) >= 2]
    others = [looks["40-of-40", s] for s in failed if s not in diagonal]
    print(f"{len(failed)} runs not learned in {STEPS} steps; at step {LONG}: "
          f"{sum(not failed_within(h, LONG) for h in failed.values())} learned, "
          f"{sum(h['accuracy'][-1] > CEILING for h in failed.values())} above the no-attention "
          f"ceiling; {len(diagonal)} attend along a diagonal (correlation > 0.5), {len(shifted)} "
          f"of them shifted by 2 positions or more; {len(others)} with no alignment yet" +
          (f" (mean offset {np.mean([o['offset'] for o in others]):+.1f}, mean weight on the "
           f"right word {np.mean([o['on_right'] for o in others]):.3f})" if others else "") +
          f". Weight on the right word: {min(looks['40-of-40', s]['on_right'] for s in failed):.3f}"
          f" to {max(looks['40-of-40', s]['on_right'] for s in failed):.3f}; "
          f"{sum(is_lasting.values())} of {len(failed)} below {ATTENDS} (lasting). For "
          f"comparison, the first 40-of-60 run at its end: "
          f"{looks['40-of-60', SEEDS['40-of-60'][0]]['on_right']:.3f}")
fig, axes = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
worst = min(failed, key=lambda s: failed[s]["accuracy"][-1]) if failed else SEEDS["40-of-40"][0]
for ax, (name, seed) in zip(axes, [("40-of-60", SEEDS["40-of-60"][0]), ("40-of-40", worst)]):
    look = looks[name, seed]
    im = heatmap(ax, look["attention"][0, 0].cpu(), vmax=1.0,
                 title=f"{name}, seed {seed}: attention offset {look['offset']:+.1f}, "
                       f"correlation {look['corr']:.2f}")
    ax.set(xlabel="input position i", ylabel="output position t")
fig.colorbar(im, ax=axes, shrink=0.8, label="α_ti")
lesson.savefig(fig, "copy_attention")

# %% [markdown]
# Read the lines above before the claims: a failed run can end above the no-attention
# ceiling, its accuracy higher than at step 200, and yet put almost no weight on the right
# word — the accuracy says that something is being learned, the attention's weight says
# whether it is the alignment. That is why the lasting-or-late claim below is decided on the
# weight at the horizon fixed before the run, and its power is printed before it.

# %% [markdown]
# The claims of this section, each decided by the rule from the numbers above. "Every time"
# cannot be measured; a success rate above 0.6 can, and 8 of 8 runs would put the exact 95 %
# lower bound above it. A 40-of-40 run that never learned counts as learning at the evaluation
# after the horizon, a lower bound, which only makes "later" harder to show. Steps to a
# threshold are skewed (a few runs take far longer than most), so "later" is decided on their
# logarithm: the ratio of geometric means against 1.

# %%
EVERY_TIME, MATERIAL = 0.6, 0.1  # fixed before the runs (see the text above)
print(f"'every time': a success rate above {EVERY_TIME}; 'sometimes': each outcome at a rate "
      f"above {MATERIAL} (40-of-40, {len(SEEDS['40-of-40'])} runs)")
k_failed = len(SEEDS["40-of-40"]) - within["40-of-40"]
steps_60 = [a or STEPS + EVAL_EVERY for a in at["40-of-60"]]  # never: the next evaluation
steps_40 = [a or LONG + EVAL_EVERY for a in at["40-of-40"]]
lasting = rate(sum(is_lasting.values()), len(failed), 0.5, ">") if failed else None
few = "" if not failed or "contradicted" in lasting.reachable else f"only {len(failed)} runs failed"
kw = dict(why=f"hidden {HIDDEN}, batch {BATCH} (the authors: 256, 128)", confirm_only=SMALL)
lesson.claim("40-of-60 copying learns every time", paper="every time (§3.3, Fig. 3 blue)", **kw,
             test=rate(within["40-of-60"], len(SEEDS["40-of-60"]), EVERY_TIME, ">"),
             effect=1.0, kind="paper",
             reproduced=f"Its success rate is above {EVERY_TIME}.", contradicted="It often fails.")
lesson.claim("40-of-40 copying sometimes fails, sometimes learns", paper="sometimes fails (§3.3, "
             "Fig. 3 red), sometimes learns (§5.2)", **kw, reproduced="Each outcome in more than "
             "1 run in 10.", test=sometimes(k_failed, len(SEEDS["40-of-40"]), MATERIAL),
             effect=None, kind="paper", contradicted="One outcome is rarer than 1 run in 10.")
if failed:
    design = power(lasting, effect=DESIGN)  # our design's shares: the paper gives none
    print(f"the lasting-failures claim at these {len(failed)} failures: 'reproduced' has chance "
          f"{design.reproduced:.2f} if a share {DESIGN} last, 'contradicted' "
          f"{design.contradicted:.2f} if {1 - DESIGN} do")
    lasting_said = dict(  # the measure and horizon (why), the earlier rule and its outcome
        why=f"lasting: under {ATTENDS} of the attention on the right word at step {LONG} (the "
            f"horizon fixed before the run), in a run not learned by step {STEPS}; hidden "
            f"{HIDDEN}, batch {BATCH}", paper="the learning of the attention fails (§3.3)",
        changed_after_run="the definition: 'lasting' was 'not learned by step 300 and accuracy "
        "flat over its last 100 steps' (the slope test), which gave contradicted, 0/18 lasting, "
        "at seeds 0 and +100; on the same runs 'not learned by step 300' gives 14/18 and 16/18. "
        f"Decided now on the attention's weight on the right word at step {LONG}",
        reproduced=f"In most failures the attention is still off the right word at step {LONG}.",
        contradicted=f"In most failures the attention has found the right word by step {LONG}: "
        "they are late.")
    lesson.claim("the 40-of-40 failures are lasting, not late", test=lasting, kind="ours",
                 effect=None, confirm_only=SMALL or few, **lasting_said)
lesson.claim("40-of-40 learns later than 40-of-60", **kw, effect=None, kind="paper",
             test=compare(steps_40, steps_60, ">", log=True),
             paper="KTIW hard to learn, so attention is learned late or never (§3.3, Fig. 3)",
             reproduced="40-of-40 learns later (or never).", contradicted="It learns earlier.")

# %% [markdown]
# **A mixture of two disjoint sets** (§3.3, Fig. 3 right, and appendix A.3): each pair permutes
# either words 0–39 or words 40–79, so sentences keep their length of 40. The model can tell
# from the first word which set a sentence uses, but inside a set the count table is flat again
# (next section). A decoder that knows the set but not which words remain scores
# $(40 \cdot \frac1{40} + 1)/41$ (printed below); one that also knows which words remain reaches
# the no-attention ceiling. Full mode trains one mixture run over the longer budget and prints
# its accuracy curve and the first steps at which it passes those two lines (by 0.01); the line
# under it says what the curve shows. `MINATTN_SCALE=paper` trains four runs for 1,000 steps and
# decides the paper's claim (learned later than 40-of-60).

# %%
MIX_SEEDS = lesson.seeds(lesson.size(full=1, smoke=1, paper=4), start=1000)
MIX = CopyTask("two sets of 40", 40, 40, n_sets=2)
KNOWS_SET = (40 * (1 / 40) + 1) / 41
mix = [copy_run(MIX, s, LONG)[1] for s in tqdm(MIX_SEEDS, desc=f"{MIX}")]
for s, h in zip(MIX_SEEDS, mix):
    every = max(1, len(h["step"]) // 10)
    print(f"{MIX}, seed {s}: accuracy by step " + ", ".join(
        f"{st}: {a:.3f}" for st, a in list(zip(h["step"], h["accuracy"]))[::every]) +
        f"; learned at {learned_at(h)} (lines: knows the set {KNOWS_SET:.3f}, "
        f"ceiling {CEILING:.3f})")
    passed = [learned_at(h, line + 0.01) for line in (KNOWS_SET, CEILING)]
    print(f"  first above the 'knows the set' line at step {passed[0]}, above the no-attention "
          f"ceiling at step {passed[1]} (None: never): " + (
              "it does not know the set yet, let alone which of its words remain"
              if passed[0] is None else "it knows the set, not yet which of its words remain"
              if passed[1] is None else "it is past the no-attention ceiling, which order "
              "carried in its states can pass too: its accuracy alone does not say it attends"))
mixture = dict(paper="the same conclusion (§3.3, Fig. 3 right; A.3)", kind="paper", effect=None)
if lesson.scale == "paper":
    lesson.claim("the two-set mixture is learned later than 40-of-60", **kw, **mixture,
                 reproduced="It is, as 40-of-40 is.", test=compare(
                     [learned_at(h) or LONG + EVAL_EVERY for h in mix], steps_60, ">", log=True),
                 contradicted="The mixture is learned earlier than 40-of-60.")
else:  # one run decides nothing: the claim needs the paper scale's runs
    lesson.claim("the two-set mixture is learned later than 40-of-60", **mixture,
                 test=not_run("paper scale"), why=f"full mode trains {len(mix)} mixture run")

# %% [markdown]
# ## 5. Why: the count tables, and the two stages of training
#
# Lesson 06 builds IBM Model 1's **count table**: every output token spreads one unit of credit
# evenly over the input tokens of its sentence, $C(x, y) \mathrel{+}= 1/|x^m|$ — exactly what
# uniform attention "sees". The paper's §4.1 (eq. 15) shows that the bag-of-words proxy of its
# §2.3 — uniform attention, word embeddings instead of hidden states, one linear layer — starts
# by learning $C(x, y)$ minus its row mean. Here are the tables of the copying tasks, normalised
# per input word (`<eos>` and `<sos>` left out) — and, as a fourth, the table of a task the
# paper's §6.2 uses against its own story: the **permutation function** $y_t = x_{\pi(t)}$ for
# one fixed random $\pi$ on 40-of-60 words. Its table is exactly that of copying (the same words
# on both sides), so KTIW *is* learnable, yet the paper reports that the model always fails to
# learn it: attention must learn a non-monotonic pattern, and "LSTM has a built-in inductive
# bias to learn monotonic attention". A count table cannot see order; lesson 06's summary comes
# back to this.

# %%
def count_table(src, tgt):
    """Dense C(x, y) (rows: input words, columns: output words, both in sorted order)."""
    bitext = make_bitext(src, tgt, null=False)
    words = sorted(bitext.src_vocab[1:])
    C = count_table_np(bitext)                    # (V_x, V_y), row 0 = NULL (unused here)
    return C[np.ix_([bitext.src_index[w] for w in words], [bitext.tgt_index[w] for w in words])]


n_table = lesson.size(full=2000, smoke=200)
PERMUTED = CopyTask("permute by π (40-of-60)", 40, 60,
                    order=np.random.default_rng(lesson.seed(7)).permutation(40))
said = {name: f"learned in {within[name]} of {len(SEEDS[name])} runs within {STEPS} steps"
        for name in COPY}
said.update({MIX.name: f"learned at step {learned_at(mix[0])} (one run)",
             PERMUTED.name: "not trained here (§6.2: always fails)"})
fig, axes = plt.subplots(1, 4, figsize=(19, 4.6), constrained_layout=True)
for ax, task in zip(axes, [*COPY.values(), MIX, PERMUTED]):
    src_ids, _, tgt_ids = task.sample(n_table, np.random.default_rng(lesson.seed(5)))
    C = count_table([[f"w{k:02d}" for k in row] for row in src_ids[:, :-1].tolist()],
                    [[f"w{k:02d}" for k in row] for row in tgt_ids[:, :-1].tolist()])
    t1 = C / C.sum(1, keepdims=True)
    ratio = np.diag(t1).mean() / t1[~np.eye(len(t1), dtype=bool) & (C > 0)].mean()
    print(f"{task.name:25s} diagonal / co-occurring off-diagonal = {ratio:.2f}; {said[task.name]}")
    im = plot_table(ax, t1, None, None, vmax=0.05, title=f"{task}\n{said[task.name]}")
    ax.set_xticks([]), ax.set_yticks([])
fig.colorbar(im, ax=axes, shrink=0.8, label="C(x, y) / Σ_y' C(x, y')")
lesson.savefig(fig, "count_tables")

# %% [markdown]
# The 40-of-40 table is flat: every word co-occurs with every other word exactly as often as
# with itself, so the table says nothing about which input word an output word comes from. The
# mixture is two flat blocks. The 40-of-60 control and the permutation function have their
# diagonal (lesson 06 derives its height, 59/39 of the rest).
#
# ### The two stages, watched
#
# The paper's story is about *order*: the lexical probe (KTIW) is learned first, attention
# follows it, and the output gets right last. Every run above also recorded, every 10 steps, how
# often the attention's top position and the probe's top position hold the word to output (the
# "right word"; chance is 1 in 41): `copy_metrics`, where the probe is section 3's
# $\beta_{ti}$, the probability of the right word if attention put all its weight on input
# position $i$ (on a few pairs: it runs the output network once per position). Below, the
# first seed of each distribution, with the same model and seeds with attention **frozen
# uniform** (the setting of the paper's §3.2: attention cannot move, so what the model learns
# comes through the probe's KTIW and the order its states carry).

# %%
show(copy_metrics)
UNIFORM_SEEDS = lesson.seeds(lesson.size(full=3, smoke=2, paper=5))
cpu = time.process_time()
uniform_runs = {(name, s): copy_run(COPY[name], s, STEPS, uniform=True, stop=False)[1]
                for name in COPY for s in tqdm(UNIFORM_SEEDS, desc=f"{name}, frozen uniform")}
print(f"[CPU time of the frozen-uniform runs: {time.process_time() - cpu:.0f} s]")
fig, axes = plt.subplots(1, 2, figsize=(14, 5), sharey=True, constrained_layout=True)
styles = {"accuracy": ("token accuracy", "black"), "attention": ("attention on the right word",
          "tab:orange"), "probe": ("probe (KTIW) on the right word", "tab:green")}
for ax, name in zip(axes, COPY):
    h, hu = hists[name][0], uniform_runs[name, UNIFORM_SEEDS[0]]
    for key, (label, color) in styles.items():
        ax.plot(h["step"], h[key], color=color, lw=2, label=label)
    for key in ("accuracy", "probe"):
        ax.plot(hu["step"], hu[key], color=styles[key][1], lw=1.2, ls="--",
                label=f"{styles[key][0]}, attention frozen uniform")
    ax.axhline(CEILING, color="gray", ls=":", lw=1, label=f"no-attention ceiling {CEILING:.3f}")
    ax.set(xlabel="training step", title=f"{name}, seed {SEEDS[name][0]}", xlim=(0, STEPS),
           ylim=(0, 1.02))
    ax.grid(alpha=0.3)
axes[0].set_ylabel("fraction of output tokens")
axes[1].legend(loc="upper left", fontsize=8)
lesson.savefig(fig, "two_stages")


# %%
def first_above(hist, key, level=0.5):
    """The first evaluated step where hist[key] exceeds `level` (None: never)."""
    return next((s for s, v in zip(hist["step"], hist[key]) if v > level), None)


leads = {name: [] for name in COPY}  # per run: the attention's first step above 0.5 minus
for name in COPY:  # the probe's
    for h in hists[name]:
        probe, attention = first_above(h, "probe"), first_above(h, "attention")
        if probe is not None or attention is not None:  # neither crossed: the run says nothing
            never = h["step"][-1] + EVAL_EVERY  # the evaluation after the run ended
            leads[name].append((attention or never) - (probe or never))
lead = [d for name in COPY for d in leads[name]]  # the claim pools both tasks' runs
if lesson.smoke and len(lead) < 2:  # smoke runs are too short to cross: placeholders
    lead = [0, 0]  # that only exercise the claim's code (a smoke run decides nothing)
print("steps by which attention follows the probe, per run where either crosses 0.5: "
      + "; ".join(f"{name} {leads[name]}" for name in COPY))
probe_end = {name: [uniform_runs[name, s]["probe"][-1] for s in UNIFORM_SEEDS] for name in COPY}
for name in COPY:
    final = [round(uniform_runs[name, s]["accuracy"][-1], 3) for s in UNIFORM_SEEDS]
    print(f"{name}, attention frozen uniform ({len(UNIFORM_SEEDS)} seeds): probe on the right "
          f"word at step {STEPS}: {[round(p, 3) for p in probe_end[name]]} (chance 1/41 = "
          f"{1 / 41:.3f}); final accuracy {final}")
if len(lead) >= 2:
    lesson.claim("KTIW is learned before attention", test=versus(lead, 0.0, ">"), **kw,
                 kind="paper", effect=None,
                 paper="early KTIW from co-occurrence, then attention follows it (§1, §2.2)",
                 reproduced="In run after run the probe finds the right word first.",
                 contradicted="The attention finds the right word before the probe does.")
lesson.claim("with attention frozen uniform, KTIW is learned on 40-of-60, far less on 40-of-40",
             paper="KTIW under uniform attention (§3.2); not on 40-of-40 (§3.3)", **kw,
             kind="paper", effect=None,
             test=compare(probe_end["40-of-60"], probe_end["40-of-40"], ">"), contradicted="The "
             "probe learns as much on 40-of-40.", reproduced="Co-occurrence teaches the probe.")

# %% [markdown]
# What to look for. On 40-of-60 (left) the probe's top position finds the right word within a
# few dozen steps, and the probe of the frozen-uniform model (dashed green) rises as fast at
# first: this KTIW comes from co-occurrence, no attention needed. Attention on the right word
# rises next, and the token accuracy follows it.
#
# On 40-of-40 (right) the bag-of-words proxy has nothing to learn, but the LSTM is not a bag of
# words: its states carry order, so even with attention frozen uniform its probe can creep above
# chance — the values printed at step 200 say how far, and the frozen-uniform claim how far
# below 40-of-60's. By section 3 a weak, noisy probe gives attention a weak, noisy pull. The
# standard 40-of-40 run differs from the frozen one only in that its attention may move.
# *Hypothesis* (this lesson does not test it): a little non-uniform attention gives a little
# KTIW, which pulls attention further — a loop that here starts from the noise of the
# initialisation instead of from co-occurrence, which would explain why it starts late, or not
# within the budget. The probe-before-attention claim pools every copy run above in which
# either crosses 0.5, 40-of-60 and 40-of-40 alike; whether the probe still leads on 40-of-40
# alone is not tested on its own, but its runs are listed apart above.

# %% [markdown]
# ## 6. More heads, more draws of the starting attention (§5.2)
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
# The paper: (1) fails, (2) converges, (3) converges with high probability. Comparing two such
# counts by Fisher's exact test takes at least four combinations per scenario before either
# outcome can come out (with three, not even 3 of 3 against 0 of 3 is significant), and finding
# the bad heads they need costs a full failed run each: more than full mode's minutes on a CPU.
# So the study runs at `MINATTN_SCALE=paper` (the authors' numbers; smoke mode runs a toy
# version to test the code), and full mode does not test its claim.
#
# As the base network we take the initial network of the first seed whose single-head 40-of-40
# run did not learn within 200 steps in section 4 (its own head is replaced), and we judge heads
# on that run's own data seed: whether a run fails depends on the data order as well as on the
# initialisation, and with both from a failing run bad heads are common enough to be found
# within the budget. The combinations are then trained on *another* data seed, so a head is not
# "bad" (or "good") for the very batches it is later tested on — which also tests whether a
# head's badness carries over to new data. `multihead.py`'s base network uses GRU cells and two
# embedding tables; we keep the LSTM model of section 4, the architecture the paper's §5.2
# describes.

# %%
show(head_status)
MULTI = lesson.scale != "full"  # the study's sizes below are the paper's (smoke: a toy)
K = lesson.size(full=8, smoke=2, paper=8)
N_JUDGE = lesson.size(full=3, smoke=1, paper=3)  # data seeds that judge a head
N_GOOD, N_BAD = lesson.size(full=20, smoke=1, paper=20), lesson.size(full=20, smoke=3, paper=20)
MAX_CANDIDATES = lesson.size(full=400, smoke=3, paper=400)
COMBOS = lesson.size(full=50, smoke=2, paper=50)
MH_EVAL = lesson.size(full=400, smoke=8, paper=400)
if MULTI:
    show_table([
        {"setting": "heads per model", "authors' code": "8", "this run": K},
        {"setting": "data seeds to judge a head", "authors' code": "3",
         "this run": f"{N_JUDGE}: the failing run's own first, never the combinations' seed"},
        {"setting": "good / bad heads kept", "authors' code": "20 / 20",
         "this run": f"{N_GOOD} / {N_BAD}"},
        {"setting": "combinations per scenario", "authors' code": "50", "this run": COMBOS},
        {"setting": "random heads", "authors' code": "drawn from a pool of 30",
         "this run": "fresh draws"},
        {"setting": "budget; evaluation", "authors' code": "200 steps; one fixed set of 400 pairs",
         "this run": f"{STEPS} steps; one fixed set of {MH_EVAL} pairs"},
        {"setting": "base network", "authors' code": "GRU, two embedding tables",
         "this run": f"the LSTM model of section 4, hidden {HIDDEN}"}],
        ["setting", "authors' code", "this run"])
else:
    print("full mode: the multi-head study runs at MINATTN_SCALE=paper only (see the text); "
          "its claim is not tested here")

# %%
if MULTI:
    task = COPY["40-of-40"]
    failing = [s for s, a in zip(SEEDS["40-of-40"], at["40-of-40"]) if a is None or a > STEPS]
    BASE_SEED = failing[0] if failing else SEEDS["40-of-40"][0]
    JUDGE_SEEDS = tuple(BASE_SEED + i for i in range(N_JUDGE))  # that run's data seed first
    COMBO_SEED = BASE_SEED + 10_000  # the combinations' data: none of the judges'
    torch.manual_seed(BASE_SEED)  # that run's initial network; its head is replaced below
    base = OfficialSeq2Seq(task.vocab, HIDDEN).to(lesson.device)
    mh_kw = dict(steps=STEPS, batch=BATCH, eval_every=EVAL_EVERY, eval_set=task.sample(
        MH_EVAL, np.random.default_rng(lesson.seed(2021)), lesson.device))
    bar = tqdm(total=MAX_CANDIDATES, desc="judging candidate heads")
    good, bad, statuses = sample_heads(base, task, N_GOOD, N_BAD, MAX_CANDIDATES,
                                       seed=lesson.seed(0), seeds=JUDGE_SEEDS,
                                       progress=lambda *_: bar.update(1), **mh_kw)
    bar.close()
    print(f"base network: the initial network of 40-of-40 seed {BASE_SEED}; heads judged on "
          f"data seed(s) {list(JUDGE_SEEDS)}, combinations trained on {COMBO_SEED}. "
          f"{len(statuses)} candidates: {statuses.count('good')} good, {statuses.count('bad')} "
          f"bad, {statuses.count(None)} neither; kept {len(good)} good and {len(bad)} bad")
    if lesson.smoke and not good:  # nothing learns in a few steps: a bad head stands in
        good = [bad.pop()]

# %%
if MULTI:
    pick, fresh = np.random.default_rng(lesson.seed(0)), torch.Generator().manual_seed(
        lesson.seed(1))

    def some_bad(k):
        """k different bad heads, drawn at random."""
        return [bad[i] for i in pick.choice(len(bad), k, replace=False)]

    scenarios = {  # different combinations only: the same heads in another order are one model
        f"{K} bad": distinct_combinations(lambda: some_bad(K), COMBOS) if len(bad) >= K else [],
        f"1 good + {K - 1} bad": distinct_combinations(
            lambda: [good[pick.integers(len(good))]] + some_bad(K - 1), COMBOS)
        if good and len(bad) >= K - 1 else [],
        f"{K} random": [draw_heads(K, HIDDEN, fresh, lesson.device) for _ in range(COMBOS)]}
    multi = {name: [train_copy(with_heads(base, heads), task, COMBO_SEED, stop_above=LEARNED,
                               **mh_kw) for heads in tqdm(combos, desc=name)]
             for name, combos in scenarios.items()}
    converged_n = {name: sum(learned(h) for h in hs) for name, hs in multi.items()}
    for name, hs in multi.items():
        print(f"{name:18s} converged in {converged_n[name]} of {len(hs)} combinations; step "
              f"converged {[learned_at(h) for h in hs]} (budget {STEPS})")
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    for (name, hs), color in zip(multi.items(), ["tab:red", "tab:blue", "tab:green"]):
        for k, h in enumerate(hs):
            ax.plot(h["step"], h["accuracy"], color=color, alpha=0.6,
                    label=f"{name}: {converged_n[name]} of {len(hs)}" if k == 0 else None)
    ax.axhline(CEILING, color="gray", ls=":", lw=1, label=f"no-attention ceiling {CEILING:.3f}")
    ax.set(xlabel="training step", ylabel="token accuracy (fixed evaluation set)", ylim=(0, 1.02),
           title=f"40-of-40 copying, {K} heads on one base network")
    ax.grid(alpha=0.3)
    ax.legend(loc="center right", fontsize=9)
    lesson.savefig(fig, "multi_head")

# %%
heads_claim = dict(claim=f"{K} averaged heads: one good among bad, or {K} random, beat all bad",
                   paper="8 bad fail; 1 good + 7 bad converge; 8 random converge w.h.p. (§5.2, "
                   "Fig. 6)", kind="paper", effect=None)
if not MULTI:  # the study's runs cost more than full mode's minutes (see the text)
    lesson.claim(**heads_claim, test=not_run("paper scale"),
                 why="the multi-head study runs at MINATTN_SCALE=paper only")
if MULTI:
    bad_name, good_name, random_name = scenarios
    counts = {name: (converged_n[name], len(multi[name])) for name in multi}
    kw["why"] = f"{K} heads on one base network, judged on data seed(s) {list(JUDGE_SEEDS)}"
    if multi[bad_name] and multi[good_name]:
        lesson.claim(**heads_claim, **kw, test=all_of({
            "one good converges more": rates(*counts[good_name], *counts[bad_name], ">"),
            "random heads converge more": rates(*counts[random_name], *counts[bad_name], ">")}))
    if not (multi[bad_name] and multi[good_name]):
        print("not tested: the rejection sampling found too few good or bad heads")

# %% [markdown]
# Read the outcome against the design. A good head was good *on this base network*, alone, on
# other data; the question is whether it still wins when it shares the averaged context with bad
# heads — its read-out enters the context with weight $1/K$ — and whether a few random draws
# usually include a good one: all $K$ random heads are bad with probability (share of bad
# heads)$^K$, which the paper's eight heads make small.

# %% [markdown]
# ## Summary
#
# What this run found, claim by claim (each finding is printed in its cell, above):

# %%
lesson.summary()

# %% [markdown]
# And what the lesson built along the way:
#
# * An LSTM encoder–decoder with Luong attention, written twice (NumPy, torch) and checked
#   against `nn.LSTM` and against each other in the tests; the authors' variant (shared
#   embedding, decoder started from the encoder, biased query, projected and averaged
#   contexts) built from the same pieces and checked against a re-creation of their module
#   layout.
# * The lexical probe $\beta$ asks what the model would say attending to one position only, and
#   the scores' gradient $\alpha_{ti}(u_t\cdot h_i - \sum_j \alpha_{tj} u_t\cdot h_j)$ says why
#   attention drifts toward where a (linearised) probe points.
# * Copying a permutation looks trivial, but with a flat count table (40-of-40) co-occurrence
#   gives the probe little to learn and attention little to follow. Before reading anything
#   into a stalled run, size the output layer to the task, compare the run with the
#   no-attention ceiling, and look at *where* its attention sits, at a horizon fixed before
#   the run: a rising accuracy does not say that the attention is being learned. Lesson 06
#   explains *why* a flat table gives no signal; lesson 08 measures how well attention agrees
#   with the probe on real data.
# * The multi-head study keeps one base network and varies only the heads' initialisations:
#   heads add no expressiveness there, only more draws of the starting attention.

# %% [markdown]
# ## Exercises
#
# **5.1 — the Luong attention step (implement, ~10 min).** In a student copy
# (`python -m minattn.course.classroom student DIR`), `luong_attention_np` and its torch twin in
# `minattn/lstm_attention.py` raise `NotImplementedError`. Compute the scores
# $s_t^\top W^k_a h_i$ for every head $k$, the masked softmax (lesson 01's `softmax_np`: if
# exercise 1.1 is handed out too, this one waits on it), and the summed context. Check:
# `pytest tests/test_lstm_attention.py --exercises 5.1`.
#
# **5.2 — the scores' gradient (implement, ~10 min).** Implement `score_gradient_np`, section
# 3's two lines: $\alpha_{ti}(u_t\cdot h_i - \sum_j \alpha_{tj}\, u_t\cdot h_j)$, with the masked
# positions at zero. The test compares it with torch's autograd. Then: what is the gradient when
# the attention is one-hot, and why does that make a confidently wrong attention hard to undo?
# Check with `--exercises 5.2`.
#
# **5.3 — predict, then run (predict, ~15 min).** Three copy corpora (output = input), from
# `minattn.course.lstm_attention`:
# (A) `permutation_corpus(n, 30, 45, rng)` — 30 words sampled from 45, permuted;
# (B) `two_sets_corpus(n, 15, rng)` — a permutation of words 0–14 or of words 15–29;
# (C) `permutation_corpus(n, 15, 30, rng)` — 15 words sampled from 30, permuted.
# Compute their count tables with `count_table` (section 5) and predict which one a copy model
# will learn least often within 200 steps: write "A", "B" or "C" in
# `least_often_learned_corpus` of `minattn/course/answers/lstm_attention.py`
# (`make exercises EX=5.3` says whether it is answered; the teacher's tests check it). Then run
# it: `copy_run` (section 4) on `CopyTask("A", 30, 45)`, `CopyTask("B", 15, 15, n_sets=2)` and
# `CopyTask("C", 15, 30)`, a few seeds each (a few minutes on a CPU), and compare the curves
# with your prediction.

# %%
print(f"lesson time: {time.perf_counter() - T0:.0f} s wall, {time.process_time() - CPU0:.0f} s CPU")
