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
# Snell, Zhong, Klein and Steinhardt ("Approximating How Single Head Attention Learns", 2021;
# our seed `002_*`) answer with a two-stage story:
#
# 1. early in training attention is nearly **uniform**, so the network first learns *which
#    output word each input word predicts* — "knowledge to translate individual words" (KTIW),
#    measured by a **lexical probe** $\beta$;
# 2. attention is then pulled toward the input positions whose words predict the output well.
#
# Where the data gives no KTIW to learn, attention has nothing to follow — and a network that can
# express a task perfectly may fail to learn it. In this lesson you will
# 1. write the LSTM and Luong attention in NumPy and check them against `torch.nn.LSTM`;
# 2. build the lexical probe and the **agreement metric** between attention and probe;
# 3. train copy models on permutations and watch one distribution learn and another fail
#    (the paper's §3.3), with the count tables that predict it (lesson 06 explains them);
# 4. rescue a failing model with more heads (§5.2), test a hidden assumption (§6.1), and measure
#    attention–probe agreement on real sentiment and translation data (§3.1–3.2).
#
# ### The model (MATH.md items 1–5)
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
from minattn.tools.data import DatasetMissing, load_parallel, load_sentiment, tokenize
from minattn.tools.lesson import Lesson, show
from minattn.tools.train import train
from minattn.tools.utils import set_seed

L = Lesson("05_lstm_attention")  # on a CPU: one torch thread (see Lesson)
rng = set_seed(0)
T0 = time.perf_counter()

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
# ## 4. Learning to copy a permutation (the paper's §3.3)
#
# The task could not be simpler: the output is the input. Each input is a random order of
# 40 words. Two distributions:
#
# * **40-of-40**: always the same 40 word types, permuted;
# * **40-of-60**: 40 types sampled from 60, then permuted (the control).
#
# In 40-of-40 every sentence pair contains every word once: "which input word predicts output
# word $y$?" has no answer from co-occurrence, so KTIW cannot get a head start, and the theory
# predicts attention may never get going. In 40-of-60 a word co-occurs with itself more than with
# others. We train one-layer unidirectional LSTMs (the paper: hidden 256; here hidden 128 and
# embeddings 64, to fit 30-odd runs into a few CPU minutes) with Adam at learning rate 1e-3,
# batch 32, fresh batches every step, and count a run as **learned** if its token accuracy on 64
# held-out pairs reaches 99%.

# %%
HIDDEN, EMBED, BATCH, LR = L.size(full=128, smoke=32), L.size(full=64, smoke=16), 32, 1e-3
STEPS = L.size(full=500, smoke=12)
EVAL_EVERY = L.size(full=10, smoke=4)
N_SEEDS = L.size(full=10, smoke=2)
BOS = 60  # output vocabulary: the 60 words w00..w59, then <bos>
PERM = np.random.default_rng(7).permutation(40)  # π of the permutation function


def to_ids(sentences):
    return torch.tensor([[int(w[1:]) for w in s] for s in sentences], device=L.device)


def sample(task, n, rng):
    """(src, tgt) token ids (n, 40) of one of the copy tasks ((n, 20) for the two sets)."""
    if task == "40-of-40":
        src, tgt = tasks.permutation_corpus(n, 40, 40, rng)
    elif task == "40-of-60":
        src, tgt = tasks.permutation_corpus(n, 40, 60, rng)
    elif task == "two sets of 20":
        src, tgt = tasks.two_sets_corpus(n, 20, rng)
    elif task == "permute by π (40-of-60)":
        src, _ = tasks.permutation_corpus(n, 40, 60, rng)
        tgt = [[s[k] for k in PERM] for s in src]  # y_t = x_π(t)
    return to_ids(src), to_ids(tgt)


def shift(tgt):
    return torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], dim=1)


def copy_loss(model, src, tgt):
    logits, _ = model(src, shift(tgt))
    return F.cross_entropy(logits.flatten(0, 1), tgt.flatten())


def token_accuracy(model, src, tgt):
    logits, _ = model(src, shift(tgt))
    return (logits.argmax(-1) == tgt).float().mean().item()


def new_model(seed, heads=1):
    torch.manual_seed(seed)
    return la.Seq2SeqAttention(60, 61, hidden=HIDDEN, embed=EMBED, heads=heads).to(L.device)


def run_copy(task, seed, model=None, steps=STEPS):
    """Train one copy model with Adam; the seed fixes its initialisation and its batches.

    A plain loop rather than `train`: a run stops as soon as it is learned (99% held-out token
    accuracy), which saves most of the budget on the runs that learn."""
    model = model or new_model(seed)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    data_rng = np.random.default_rng(seed)
    held_out = sample(task, 64, np.random.default_rng(10_000 + seed))
    hist = {"step": [0], "accuracy": [0.0]}
    for step in range(1, steps + 1):
        model.train()
        loss = copy_loss(model, *sample(task, BATCH, data_rng))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % EVAL_EVERY == 0 or step == steps:
            model.eval()
            with torch.no_grad():
                hist["step"].append(step)
                hist["accuracy"].append(token_accuracy(model, *held_out))
            if hist["accuracy"][-1] >= 0.99:
                break
    return model, hist


def learned(hist):
    return hist["accuracy"][-1] >= 0.99


runs = {}
for task in ["40-of-60", "40-of-40"]:
    for seed in tqdm(range(N_SEEDS), desc=task):
        runs[task, seed] = run_copy(task, seed)
success = {task: np.mean([learned(runs[task, s][1]) for s in range(N_SEEDS)])
           for task in ["40-of-60", "40-of-40"]}
for task, rate in success.items():
    first = [h["step"][-1] if learned(h) else None
             for _, h in (runs[task, s] for s in range(N_SEEDS))]
    print(f"{task}: {rate:.0%} of {N_SEEDS} seeds reach 99% token accuracy within {STEPS} steps;"
          f" step first reached per seed: {first}")

# %%
fig, ax = plt.subplots(figsize=(8, 4.6))
for task, color in [("40-of-60", "tab:blue"), ("40-of-40", "tab:red")]:
    for s in range(N_SEEDS):
        h = runs[task, s][1]
        ax.plot(h["step"], h["accuracy"], color=color, alpha=0.6,
                label=f"{task} ({success[task]:.0%} learned)" if s == 0 else None)
ax.axhline(0.99, color="gray", ls=":", lw=1)
ax.set(xlabel="training step", ylabel="held-out token accuracy",
       title=f"Copying permutations: {N_SEEDS} seeds each (a run stops once learned)")
ax.grid(alpha=0.3)
ax.legend()
L.savefig(fig, "copy_curves")

# %% [markdown]
# Every 40-of-60 run learns, all at about the same step; no 40-of-40 run gets there within the
# budget — their accuracy only creeps up. The paper saw some 40-of-40 runs succeed; with a longer
# budget some of ours might too, but the contrast between the two distributions, whose sentences
# look alike, is stark.
#
# What did the two kinds of run learn to attend to? Below, the attention of one 40-of-60 model
# and of the 40-of-40 model that ended worst, on one held-out pair. Copying needs the diagonal.

# %%
worst = min(range(N_SEEDS), key=lambda s: runs["40-of-40", s][1]["accuracy"][-1])
fig, axes = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
for ax, (task, seed) in zip(axes, [("40-of-60", 0), ("40-of-40", worst)]):
    model = runs[task, seed][0]
    src, tgt = sample(task, 1, np.random.default_rng(99))
    with torch.no_grad():
        _, att = model(src, shift(tgt))
    im = plots.heatmap(ax, att[0, 0].cpu(), title=f"{task}, seed {seed}: attention α", vmax=1.0)
    ax.set(xlabel="input position i", ylabel="output position t")
fig.colorbar(im, ax=axes, shrink=0.8, label="α_ti")
L.savefig(fig, "copy_attention")

# %% [markdown]
# The 40-of-60 model attends along the diagonal, as copying needs. The stalled 40-of-40 model has
# put its attention on a few fixed input positions, whatever the output position.
#
# Two more distributions from the paper. A **mixture of two disjoint sets** (half the pairs permute
# words 0–19, half words 20–39): the model can tell which set a sentence uses, but inside a set
# the count table is flat again. And the **permutation function** $y_t = x_{\pi(t)}$ for one
# fixed random $\pi$, on the easy 40-of-60 distribution: the count table is exactly that of
# copying (the same words on both sides), so KTIW *is* learnable — yet attention must learn a
# non-monotonic pattern, and the paper reports it always fails (§6.2: "LSTM has a built-in
# inductive bias to learn monotonic attention").

# %%
N_EXTRA = L.size(full=2, smoke=1)
for task in ["two sets of 20", "permute by π (40-of-60)"]:
    for seed in tqdm(range(N_EXTRA), desc=task):
        runs[task, seed] = run_copy(task, seed)
    success[task] = np.mean([learned(runs[task, s][1]) for s in range(N_EXTRA)])
    print(f"{task}: {success[task]:.0%} of {N_EXTRA} seeds learned; final accuracies "
          f"{[round(runs[task, s][1]['accuracy'][-1], 3) for s in range(N_EXTRA)]}")

# %% [markdown]
# Neither of the two extra distributions is learned within the budget either. The two-set mixture
# does make progress (its sentences are half as long), far more slowly than 40-of-60.
#
# ## 5. The count tables predict it
#
# Lesson 06 builds IBM Model 1's **count table**: every output token spreads one unit of credit
# evenly over the input tokens of its sentence, $C(x, y) \mathrel{+}= 1/|x^m|$ — exactly what
# uniform attention "sees". Its gradient argument shows that early in training a bag-of-words
# model learns $C(x, y)$ minus its row mean. Here are the tables of the four tasks, normalised
# per input word, next to the fraction of runs that learned.

# %%
def count_table(src, tgt):
    """Dense C(x, y) (rows: input words, columns: output words, both in sorted order)."""
    bx = ibm1.make_bitext(src, tgt, null=False)
    words = sorted(bx.src_vocab[1:])
    C = ibm1.count_table_np(bx)                    # (V_x, V_y), row 0 = NULL (unused here)
    return C[np.ix_([bx.src_index[w] for w in words], [bx.tgt_index[w] for w in words])]


n_table = L.size(full=2000, smoke=200)
fig, axes = plt.subplots(1, 4, figsize=(19, 4.6), constrained_layout=True)
for ax, task in zip(axes, ["40-of-40", "40-of-60", "two sets of 20", "permute by π (40-of-60)"]):
    src_ids, tgt_ids = sample(task, n_table, np.random.default_rng(5))
    C = count_table([[f"w{k:02d}" for k in row] for row in src_ids.tolist()],
                    [[f"w{k:02d}" for k in row] for row in tgt_ids.tolist()])
    t1 = C / C.sum(1, keepdims=True)
    ratio = np.diag(t1).mean() / t1[~np.eye(len(t1), dtype=bool) & (C > 0)].mean()
    n_runs = N_SEEDS if task in ("40-of-40", "40-of-60") else N_EXTRA
    print(f"{task:25s} diagonal / co-occurring off-diagonal = {ratio:.2f}; learned "
          f"{success[task]:.0%} of {n_runs}")
    im = plots.plot_table(ax, t1, None, None, vmax=0.05,
                          title=f"{task}\nlearned {success[task]:.0%} of {n_runs} runs")
    ax.set_xticks([]), ax.set_yticks([])
fig.colorbar(im, ax=axes, shrink=0.8, label="C(x, y) / Σ_y' C(x, y')")
L.savefig(fig, "count_tables")

# %%
L.claim("copying permutations of 40-of-60 words always learns (perfect within ~300 steps)",
        "always (Fig. 3, blue), perfect within ~300 steps",
        f"{success['40-of-60']:.0%} of {N_SEEDS} seeds reach 99% within {STEPS} steps",
        "hidden 128 instead of 256")
L.claim("copying permutations of the same 40 words sometimes fails",
        "sometimes fails (Fig. 3, red; seed count not given)",
        f"{success['40-of-40']:.0%} of {N_SEEDS} seeds reach 99% within {STEPS} steps",
        f"a budget of {STEPS} steps: a run that would learn later counts as a failure")
L.claim("mixture of permutations of two disjoint sets fails",
        "fails (Fig. 3 right)",
        f"{success['two sets of 20']:.0%} of {N_EXTRA} seeds learned", "few seeds")
L.claim("permutation function y_t = x_π(t) on 40-of-60 always fails",
        "always fails (§6.2)",
        f"{success['permute by π (40-of-60)']:.0%} of {N_EXTRA} seeds learned", "few seeds")

# %% [markdown]
# ## 6. More heads rescue a bad initialisation (§5.2)
#
# Sum $H$ heads, each with its own $W_a^h$: $c_t = \sum_h \sum_i \alpha^h_{ti} h_i$. One head can
# already express copying, so more heads add no expressiveness — but each head is another draw
# of the initial attention. Call a 40-of-40 seed **good** if it learned above, **bad** if not. We
# build 8-head models on the encoder, decoder, output network and batch stream of one bad seed,
# and take the heads' $W_a^h$ from (1) eight bad seeds, (2) the good seed plus seven bad ones,
# (3) eight fresh random draws. The paper: (1) fails, (2) converges, (3) converges with high
# probability.

# %%
good = [s for s in range(N_SEEDS) if learned(runs["40-of-40", s][1])]
bad = [s for s in range(N_SEEDS) if s not in good]
if L.smoke and not good:  # smoke runs are too short to learn: take the best seed as "good"
    good = [max(bad, key=lambda s: runs["40-of-40", s][1]["accuracy"][-1])]
    bad = [s for s in bad if s not in good]
heads_of = lambda seeds: torch.cat([new_model(s).W_a.data for s in seeds])  # noqa: E731
print(f"good 40-of-40 initialisations: {good}; bad: {bad}")
multi = {}
if bad:
    base = bad[0]
    bad8 = [bad[k % len(bad)] for k in range(8)]  # repeats only when fewer than 8 bad seeds
    configs = {"8 bad heads": heads_of(bad8)}
    if good:
        configs["1 good + 7 bad heads"] = heads_of([good[0]] + bad8[:7])
    else:
        print("no 40-of-40 seed learned within the budget: no good head for '1 good + 7 bad'")
    configs["8 random heads"] = torch.randn(8, HIDDEN, HIDDEN, generator=torch.Generator(
        ).manual_seed(123)).to(L.device) / math.sqrt(HIDDEN)
    for name, W_a in tqdm(configs.items(), desc="8-head models"):
        model = new_model(base, heads=8)
        state = {**new_model(base).state_dict(), "W_a": W_a}  # the bad seed's network, 8 heads
        model.load_state_dict(state)
        multi[name] = run_copy("40-of-40", base, model=model)[1]
        print(f"{name:22s} {'learned' if learned(multi[name]) else 'not learned'}: accuracy "
              f"{multi[name]['accuracy'][-1]:.3f} at step {multi[name]['step'][-1]}")
    multi["the bad seed, 1 head"] = runs["40-of-40", base][1]
    fig, ax = plt.subplots(figsize=(8, 4.6))
    plots.plot_curves(ax, multi, "accuracy", ylabel="held-out token accuracy",
                      title=f"40-of-40 copying on the network of bad seed {base}")
    L.savefig(fig, "multi_head")
    L.claim("8 summed heads: all-bad initialisations fail, one good suffices, random converges",
            "8 bad: fails; 1 good + 7 bad: converges; 8 random: converges w.h.p. (Fig. 6)",
            "; ".join(f"{k}: {'learned' if learned(v) else 'not learned'} "
                      f"({v['accuracy'][-1]:.2f} at step {v['step'][-1]})"
                      for k, v in multi.items()),
            "one run each" + ("" if good else f"; no single-head seed learned in {STEPS} steps, "
                              "so there was no good head to build '1 good + 7 bad'"))
else:
    print("every 40-of-40 seed learned: no bad initialisation to rescue")


# %% [markdown]
# In our run no single-head 40-of-40 seed learned within the budget, so there is no "good" head
# to build the second model from. The surprise is the first model: eight heads taken from seeds
# that all failed *do* learn, about as fast as eight random heads. The paper's "all bad fails" is
# not reproduced. Two reasons to be careful: our "bad" only means "not learned within the budget"
# (the paper found bad heads by rejection sampling over longer runs), and summing eight heads
# also makes the context up to eight times larger — a different starting point for learning, not
# just more draws. What does reproduce is the paper's broader point: more heads help *learning*
# here although one head could express the task.
#
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
#   against `nn.LSTM` and against each other to ~1e-12.
# * The lexical probe $\beta$ asks what the model would say attending to one position only; the
#   agreement metric compares the top of two rankings, against a random baseline slightly above 5%.
# * Copying a permutation looks trivial, yet with a flat count table (40-of-40) attention has
#   nothing to follow early on and every one of our runs stalled, while the control (40-of-60)
#   learned every time. A mixture of two flat blocks learns far more slowly; a fixed
#   non-monotonic permutation stalls although its count table is as informative as the
#   control's. Lesson 06 explains *why* a flat table gives no signal.
# * Summing eight heads rescued 40-of-40 copying in our runs — even heads whose single-head
#   runs had failed, which the paper did not find.
# * Under frozen uniform attention the evidence of a keyword flows to later hidden states: the
#   last position, not the keyword's, ends up with the largest log-odds.
# * On real data (sentiment and translation), attention agrees with the lexical probe several
#   times more often than the random baseline — and so does the probe of a model whose attention
#   was frozen uniform: word-level knowledge is learned without attention.
#
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
# --exercises 5.3`). Then run it: adapt `sample` and `run_copy` to the three corpora (a few
# minutes each on a CPU) and compare the curves with your prediction.

# %%
print(f"lesson time: {time.perf_counter() - T0:.0f} s")
