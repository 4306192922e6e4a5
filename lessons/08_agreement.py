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
# # Lesson 08 — Does attention agree with the probe? The keyword task and Table 2
#
# This lesson returns to lesson 05's model after lesson 06's count tables. Lesson 05 trained the
# authors' copy model and watched the **lexical probe** $\beta$ — "what would the model say if
# it attended to position $i$ only?" — rise before the attention did; lesson 06 showed why word
# co-occurrence gives the probe its head start. Snell, Zhong, Klein and Steinhardt
# ("Approximating How Single Head Attention Learns", 2021) make two more claims that this
# lesson tests:
#
# 1. the probe reads the state $h_i$ as if it spoke about word $x_i$ alone. That holds early in
#    training; after long training under uniform attention the evidence drifts to the end of
#    the sequence (their §6.1, the **keyword task**);
# 2. on real data, a standard model's attention points at the words a probe points at — even
#    the probe of a model whose attention was **frozen uniform**, which never learned where to
#    look (their §3.1–3.2, **Table 2**).
#
# In this lesson you will
# 1. build the paper's classifier — a bidirectional LSTM read by an attention whose scores
#    come from a small network — from lesson 05's LSTM;
# 2. write the **agreement metric** $A(a, b)$, its random baseline and the **contextualised
#    agreement** $\xi$ that turns an agreement into a performance;
# 3. watch where a classifier with frozen uniform attention keeps a keyword's evidence;
# 4. compute Table 2 at small scale on Rotten Tomatoes sentences and Bible verses, beside the
#    paper's numbers, on independent replicates.

# %%
import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from minattn.agreement import (
    AttentionClassifier,
    Seq2SeqAttention,
    agreement_baseline_np,
    agreement_np,
    agreement_row_np,
    bilstm_np,
    classifier_np,
    classifier_probe_np,
    contextualized_agreement,
)
from minattn.course.agreement import (
    check_noise,
    checkpoints,
    keyword_task,
    plot_keyword,
    plot_table2,
    plot_xi_curves,
    recorded_run,
    sentiment_task,
    table2_replicates,
    translation_task,
)
from minattn.course.lesson import Lesson, show, show_table
from minattn.course.stats import (
    all_of,
    compare,
    converged,
    converged_power,
    estimate,
    in_words,
    not_run,
    off_floor,
    power,
    runs_needed,
    versus,
)

lesson = Lesson("08_agreement")  # on a CPU: one torch thread (see Lesson)
T0, CPU0 = time.perf_counter(), time.process_time()

# %% [markdown]
# ## 1. The classifier (the paper's §2.4)
#
# The paper's classifier, built as in the authors' code (`classification/classifier_model.py`,
# appendix A.8). A **bidirectional** LSTM gives $h_i = [\overrightarrow{h}_i ;
# \overleftarrow{h}_i]$: one LSTM (lesson 05's `lstm_np`) reads the words left to right, another
# right to left, so $h_i$ has read the words on both sides of $i$. A network with one hidden
# layer scores each position, and the read-out is linear:
#
# $$e_i = v^\top \mathrm{ReLU}(W h_i + b),\qquad \alpha = \mathrm{softmax}(e),\qquad
# P(\text{pos}) = \sigma(z),\quad z = w^\top \sum_i \alpha_i h_i + b_0.$$
#
# Attending to position $i$ alone gives the log-odds $z_i = w^\top h_i + b_0$, and the probe
# is $\beta_i = \sigma(\pm z_i)$ (+ for a positive label, − for a negative one): the
# probability of the right answer if the model looked at $i$ only. Here are those lines on
# random states, checked against the library's `classifier_np` and `classifier_probe_np`:

# %%
rng = np.random.default_rng(lesson.seed(0))
B, N, D, K = 2, 7, 6, 5  # batch, positions, state width, width of the scoring network
h = rng.normal(size=(B, N, D))  # encoder states h_i
W, b, v = rng.normal(size=(K, D)), rng.normal(size=K), rng.normal(size=K)
w, b0, labels = rng.normal(size=D), 0.3, np.array([1, 0])

e = np.maximum(h @ W.T + b, 0.0) @ v  # e_i = vᵀ ReLU(W h_i + b)          (B, N)
alpha = np.exp(e - e.max(-1, keepdims=True))
alpha /= alpha.sum(-1, keepdims=True)  # α = softmax(e)
z = (alpha[..., None] * h).sum(1) @ w + b0  # z = wᵀ Σ_i α_i h_i + b₀           (B,)
z_i = h @ w + b0  # the log-odds when attending to i alone     (B, N)
beta = 1 / (1 + np.exp(-np.where(labels > 0, 1.0, -1.0)[:, None] * z_i))  # β_i = σ(±z_i)

z_lib, alpha_lib = classifier_np(h, W, b, v, w, b0)
err = max(np.abs(z - z_lib).max(), np.abs(alpha - alpha_lib).max(),
          np.abs(beta - classifier_probe_np(h, w, b0, labels)).max())
print(f"these lines vs classifier_np and classifier_probe_np: largest difference {err:.1e}")
assert err < 1e-12
gap = np.abs(z - (alpha * z_i).sum(-1)).max()
print(f"z = Σ_i α_i z_i (the read-out is linear and α sums to 1): largest difference {gap:.1e}")
assert gap < 1e-12

# %% [markdown]
# The last line is the identity behind the paper's eq. 12 (§3.3): the model's log-odds is the
# attention-weighted average of the log-odds $z_i$ that the probe reads. Attention lowers the
# loss only by moving weight to the positions whose $z_i$ already has the right sign, so it
# cannot be learned before the probe knows something. The encoder and the trainable module: the
# torch module runs each direction as one `nn.LSTM` call, and the backward one starts at each
# row's own last word, so padding changes nothing. `tests/test_agreement.py` checks it against
# `bilstm_np` and against the authors' module layout (a packed bidirectional `nn.LSTM`) in
# float64.

# %%
show(bilstm_np)
show(AttentionClassifier)

# %% [markdown]
# ## 2. The agreement metric (§3.1)
#
# The paper compares two score vectors over the $n$ input positions coarsely (eq. 10):
# $A(a, b) = 1$ when the top position of $a$ is among the top $\lceil 5\%\cdot n\rceil$
# positions of $b$, else 0, averaged over every output word of a validation set. The order
# matters: in Table 2, $A(\alpha, \beta)$ takes the top position of the *attention* and asks
# where the *probe* ranks it (the authors' `topKMatch_single(alpha, beta, k)`). For one output
# word, in the words of the definition:

# %%
n = 30
a, b = rng.normal(size=n), rng.normal(size=n)
k = math.ceil(0.05 * n)  # the top 5 % of b, rounded up: ⌈1.5⌉ = 2 positions
top_of_b = np.argsort(-b)[:k]
hit = float(a.argmax() in top_of_b)  # A(a, b) for this output word
print(f"a's top position {a.argmax()}, b's top {k}: {top_of_b.tolist()} -> A(a, b) = {hit}")

a_rows = rng.normal(size=(500, n))
b_rows = a_rows + 2 * rng.normal(size=(500, n))  # b follows a, with noise
ours = [float(x.argmax() in np.argsort(-y)[:k]) for x, y in zip(a_rows, b_rows)]
assert np.array_equal(ours, agreement_np(a_rows, b_rows))
print(f"500 rows: the same hits as agreement_np; mean agreement {np.mean(ours):.3f}, against "
      f"the random baseline ⌈5%·n⌉/n = {agreement_baseline_np([n]):.3f}")

# %% [markdown]
# The library's `agreement_np` does the same for a whole batch at once: it takes the argmax of
# $a$ over the *real* positions of each row (a mask says which), and counts the positions of
# $b$ strictly above the chosen one, so that ties in $b$ count in favour, as in the authors'
# code. For a random $a$ the top lands in $b$'s top with probability
# $\lceil 5\%\cdot n \rceil / n$: the **random baseline** $\hat{A}$, a bit above 5% because of
# the rounding up.
#
# **The contextualised agreement** (eq. 11) turns an agreement into a performance, because an
# agreement of 20% means little on its own: it depends on sentence lengths and on how much
# attention varies from seed to seed. Train a standard model to convergence (the **gold**, its
# attention $\alpha^*$ at its best checkpoint), then a second one from another seed, and record
# at each checkpoint $\tau$ its agreement with the gold, $A(\alpha^*, \alpha^\tau)$, and its
# performance $P^\tau$. Then $\xi(\alpha, b)$ is $P^\tau$ at the first checkpoint whose agreement
# *exceeds* $A(\alpha, b)$: "$b$ agrees with the gold attention as well as the attention of a
# model that reaches this performance". If the curve never gets there, the paper prints the
# gold's best performance $P^*$ with a ∗, and so do we.

# %%
show(contextualized_agreement)
curve_demo, perf_demo = [0.06, 0.12, 0.25, 0.31, 0.28], [0.50, 0.61, 0.70, 0.74, 0.75]
print("agreement with the gold over training:", curve_demo, " performance:", perf_demo)
for threshold in (0.10, 0.30, 0.40):
    print(f"  a probe agreeing {threshold:.2f} with the gold: ξ = "
          f"{contextualized_agreement(curve_demo, perf_demo, threshold)}")

# %% [markdown]
# ## 3. Does a hidden state stay local? The keyword task (§6.1)
#
# The paper tests the probe's assumption on a toy task: a sequence of words drawn uniformly from
# a vocabulary is positive iff the keyword "1" occurs in it (exactly once; the classes are
# balanced by rejection sampling). Ours: 20 words from $\{1..100\}$. With a one-way LSTM only
# the last state would have read the whole sequence, and it would win this comparison by
# construction; with two directions both ends have (the first position through the backward
# LSTM, the last through the forward one).
#
# **The experiment.** As in the paper the attention is **frozen uniform**, $\alpha_i = 1/n$, so
# nothing tells the model where to keep the evidence. On held-out positive sequences we follow
# $z_i$ at the keyword position $k$, at $k+1$, at the two ends, and the model's own uniform
# log-odds $\bar z = \frac1n\sum_i z_i$. If a state spoke about its own word and, more weakly,
# about its neighbours (the paper's eq. 23), we would see $z_k > z_{k+1} > \bar z$; the paper
# finds this at the start of training, but the last position's $z$ the largest after long
# training (eq. 24, Fig. 7).
#
# Raw log-odds grow without bound as the weights grow, which hides the early steps, so we read
# two views that do not depend on the scale: $z_i$ standardised within each sequence,
# $(z_i - \bar z)/\mathrm{sd}_i(z)$ (the uniform log-odds is then exactly 0), and the share of
# sequences in which a position has the largest $z_i$. For contrast, the same model and seeds
# with **learned** attention. `MINATTN_SCALE=paper` uses the authors' classifier sizes (256 per
# direction, embeddings 300), 4000 steps and 5 seeds. The settings of this run:

# %%
KW = dict(length=20, vocab=100, batch=32, lr=1e-3, hidden=lesson.size(full=32, smoke=8, paper=256),
          embed=lesson.size(full=32, smoke=8, paper=300))
KW_STEPS = lesson.size(full=600, smoke=10, paper=4000)          # frozen uniform attention
KW_STEPS_LEARNED = lesson.size(full=200, smoke=10, paper=1000)  # learned attention, the contrast
KW_SEEDS = lesson.seeds(lesson.size(full=4, smoke=2, paper=5))
KW_EARLY = lesson.size(full=tuple(range(0, 150, 5)), smoke=(0, 5))  # dense: see "early" below
KW_LATER = [s for s in lesson.size(full=(150, 200, 250, 300, 400, 500, 600, 800, 1000, 1500, 2000,
                                         2500, 3000, 3500, 4000), smoke=(10,)) if s <= KW_STEPS]
KW_AT = [*KW_EARLY, *KW_LATER]
show_table([
    {"": "encoder", "authors (A.8, their code)": "bi-LSTM 256 per direction, embeddings 300",
     "ours": f"bi-LSTM {KW['hidden']} per direction, embeddings {KW['embed']}"},
    {"": "optimiser", "authors (A.8, their code)": "Adam, lr 1e-3, batch 32, no clipping",
     "ours": f"Adam, lr {KW['lr']:g}, batch {KW['batch']}, no clipping"},
    {"": "training", "authors (A.8, their code)": "4000 steps on real data",
     "ours": f"{KW_STEPS} steps uniform, {KW_STEPS_LEARNED} learned, {len(KW_SEEDS)} seeds, "
             "fresh batches"},
    {"": "evaluations",
     "authors (A.8, their code)": "steps 0, 10, 50, 100, 150, 200, 250, then every 250",
     "ours": f"every {KW_EARLY[1]} steps to {KW_EARLY[-1]}, then {', '.join(map(str, KW_LATER))}"}],
    ["", "authors (A.8, their code)", "ours"])

# %% [markdown]
# The data: a batch is drawn by rejection, sequence by sequence, until half of it holds the
# keyword once and half not at all. The held-out sequences are drawn once; every training step
# draws a fresh batch.

# %%
show(keyword_task)
held_out = keyword_task(lesson.size(full=512, smoke=64), KW["length"], KW["vocab"],
                        np.random.default_rng(lesson.seed(4)))
x_held = torch.tensor(held_out[0], device=lesson.device)

# %% [markdown]
# What we read from a model on the held-out positives whose keyword has a right neighbour:
# the probe's log-odds $z_i = w^\top h_i + b_0$ at every position (`position_logits`: the
# read-out of section 1 applied to $h_i$ alone), standardised within each sequence, and which
# position has the largest one; beside them the model's accuracy and its attention at the
# keyword.


# %%
def keyword_views(model, x, y, where):
    """The views of the log-odds z_i on the held-out positives with a right neighbour: z̃_i
    at k, k+1, the first and the last position and the share of sequences each leads; the
    accuracy on every held-out sequence and the attention α at k."""
    z_all, alpha = model(x)
    rows = np.flatnonzero((y == 1) & (where < x.shape[1] - 1))
    z = model.position_logits(x)[rows].cpu().numpy()  # (P, N)
    r, k = np.arange(len(rows)), where[rows]
    standardised = (z - z.mean(1, keepdims=True)) / z.std(1, keepdims=True)
    top = z.argmax(1)
    out = {"accuracy": float(((z_all > 0).cpu().numpy() == y).mean()),
           "α at keyword": float(alpha.cpu().numpy()[rows][r, k].mean())}
    for name, i in {"keyword k": k, "next k+1": k + 1, "first": 0, "last": x.shape[1] - 1}.items():
        out[name] = float(standardised[r, i].mean())
        out[f"{name} top"] = float((top == i).mean())
    out["ends top"] = out["first top"] + out["last top"]
    return out


# %% [markdown]
# The training step: the binary cross-entropy of the log-odds $z$ against the label, then one
# Adam step without gradient clipping (the settings above). A run's batches come from a seed of
# their own (the model's seed + 100), so the uniform and the learned model of a seed see the
# same sequences.


# %%
def keyword_run(seed: int, uniform: bool, steps: int) -> dict:
    """Train one classifier for `steps` steps on fresh batches; `keyword_views` at the steps of
    KW_AT up to `steps`, as lists under their names, the steps under "step"."""
    torch.manual_seed(seed)
    model = AttentionClassifier(KW["vocab"] + 1, hidden=KW["hidden"], embed=KW["embed"],
                                uniform=uniform).to(lesson.device)
    opt = torch.optim.Adam(model.parameters(), lr=KW["lr"])
    data_rng = np.random.default_rng(seed + 100)
    record = {"step": [s for s in KW_AT if s <= steps]}
    desc = f"keyword seed {seed}, {'uniform' if uniform else 'learned'} attention"
    for step in tqdm(range(steps + 1), desc=desc, mininterval=0.5):
        if step in record["step"]:  # the views after `step` updates
            model.eval()
            with torch.no_grad():
                for key, value in keyword_views(model, x_held, *held_out[1:]).items():
                    record.setdefault(key, []).append(value)
            model.train()
        if step == steps:
            break
        x, y, _ = keyword_task(KW["batch"], KW["length"], KW["vocab"], data_rng)
        z, _ = model(torch.tensor(x, device=lesson.device))
        loss = F.binary_cross_entropy_with_logits(z, torch.tensor(y, device=lesson.device).float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return record


# %%
cpu = time.process_time()
kw_uniform = [keyword_run(s, True, KW_STEPS) for s in KW_SEEDS]
kw_learned = [keyword_run(s, False, KW_STEPS_LEARNED) for s in KW_SEEDS]
print(f"[CPU time of the keyword runs: {time.process_time() - cpu:.0f} s]")
# "early": the first evaluation at which the uniform model's held-out accuracy reaches 75%, on
# the checks every KW_EARLY[1] steps (the keyword's lead can collapse within a few of them)
KW_EARLY_CHANGE = ("the early checks every 5 steps up to 145 (before: 0, 5, ..., 30, 40, 50, 60, "
                   "75, 100, 125) after seeds +200 had seed 201 first at 75 % accuracy at step "
                   "100, with the keyword leading 23 % of sequences: partly")
kw_early = [next((i for i, acc in enumerate(r["accuracy"]) if acc >= 0.75),
                 len(r["accuracy"]) - 1) for r in kw_uniform]
rows = []
for s, r, early in zip(KW_SEEDS, kw_uniform, kw_early):
    for phase, i in [("early", early), ("end", -1)]:
        rows.append({"seed": s, "phase": phase, "step": r["step"][i],
                     "accuracy": f"{r['accuracy'][i]:.3f}",
                     **{f"z̃ {q}": f"{r[q][i]:+.2f}" for q in ("keyword k", "next k+1",
                                                              "first", "last")},
                     "largest z: keyword": f"{r['keyword k top'][i]:.2f}",
                     "largest z: an end": f"{r['ends top'][i]:.2f}"})
print("Frozen uniform attention, held-out positives (z̃: standardised log-odds; uniform z̃ = 0):")
show_table(rows, list(rows[0]))

# %%
lesson.savefig(plot_keyword(kw_uniform, kw_learned, KW["length"], KW_STEPS), "keyword_positions")
for s, r in zip(KW_SEEDS, kw_learned):  # learned attention: knowledge first, attention after?
    lead = next((i for i, x in enumerate(r["keyword k top"]) if x >= 0.9), None)
    moved = next((i for i, x in enumerate(r["α at keyword"]) if x >= 0.5), None)
    if lead is None or moved is None:
        print(f"seed {s}: within {KW_STEPS_LEARNED} steps the keyword's log-odds "
              f"{'never' if lead is None else 'did'} lead(s) in 90% of sequences and attention "
              f"{'never' if moved is None else 'did'} put half its weight on it")
        continue
    print(f"seed {s}: the keyword's log-odds is the largest in ≥ 90% of sequences from step "
          f"{r['step'][lead]} (α at the keyword then {r['α at keyword'][lead]:.2f}, uniform "
          f"1/{KW['length']}); attention puts half its weight on it from step "
          f"{r['step'][moved]}: " + ("the word-level knowledge comes first" if lead < moved else
                                     "the attention moves no later than the word-level knowledge"))

# %% [markdown]
# Why the evidence should move. At step 0 all positions look alike. The cheapest thing for
# gradient descent to learn is the keyword's own embedding, so the first signal appears at
# position $k$ and, weaker, at the neighbours whose states have just read it: the lexical
# picture the probe relies on (eq. 23), which the first claim tests at the first evaluation
# with 75% held-out accuracy, one value per seed. That phase can be short (the figure's middle
# panel shows how fast the keyword's lead falls), so the early checks are a few steps apart; the
# table above says at which step each seed got there, and in what share of sequences the keyword
# then led. Under uniform attention, though, the loss only sees the average $\bar z$: evidence is
# worth as much at any position, and the LSTM keeps carrying it along. The states that have read
# the *whole* sequence, the two ends, can say "there was a keyword somewhere" with the least
# noise. The paper, with its model, saw the last position win "asymptotically"; in a bidirectional
# LSTM the first position has read everything too, so the second claim has two parts: that an end
# leads instead of the keyword, and that the last position's $\tilde z$ is above the keyword's
# (whether the last beats the first is not tested: the per-seed lines above show both). We read it
# at the end of this run, our horizon and not the paper's: what a longer run would show, this
# lesson does not measure.

# %%
early = {q: [r[q][i] for r, i in zip(kw_uniform, kw_early)] for q in ("keyword k", "next k+1")}
end = {q: [r[q][-1] for r in kw_uniform] for q in ("keyword k", "last", "ends top",
                                                    "keyword k top")}
t = all_of({"z̃_k above z̃_k+1": compare(early["keyword k"], early["next k+1"]),
            "z̃_k+1 above uniform (0)": versus(early["next k+1"], 0.0)})
lesson.claim("keyword task, uniform attention, early in training: z_k > z_k+1 > uniform", test=t,
             paper="true when training starts (§6.1, eq. 23, Fig. 7)", why="a bi-LSTM",
             reproduced="Early on the evidence is local: the keyword's state says most, its right "
                        "neighbour less, both more than the average state.",
             contradicted=f"Shown the other way: {in_words(t)}.", changed_after_run=KW_EARLY_CHANGE)
t = all_of({"an end leads more sequences than the keyword":
            compare(end["ends top"], end["keyword k top"]),
            "z̃_last above z̃_k": compare(end["last"], end["keyword k"])})
lesson.claim(f"keyword task, uniform attention, at step {KW_STEPS}: the last position's z is the "
             "largest", paper="z_last the largest asymptotically (§6.1, eq. 24, Fig. 7)", test=t,
             why=f"bi-LSTM; 'asymptotically' read at step {KW_STEPS}, the end of this run",
             reproduced="At the end of the run an end leads more sequences than the keyword, and "
             "the last state says more than the keyword's.",
             contradicted=f"Shown the other way: {in_words(t)}.", kind="reading")

# %% [markdown]
# With learned attention the paper's two stages can be watched inside one run: the lines
# printed under the figure say, seed by seed, whether the keyword's log-odds leads before the
# attention moves onto the keyword (right panel: dashed red before solid red). The probe's
# "locality" is an approximation for the early phase, and the early phase is where the paper
# uses it.
#
# ## 4. Attention agrees with the probe on real data (§3.1–3.2, Table 2)
#
# Now the paper's Table 2 at small scale, computed the way the authors compute it (their
# `classification/utils.py`, `fetch_stats`). On one validation set, at the same checkpoints
# $\tau$, we record a gold (its attention $\alpha^*$), a standard model of another seed
# (attention $\alpha^\tau$, probe $\beta^\tau$, performance $P^\tau$) and the same architecture
# with attention **frozen uniform** (its probe $\beta^{\mathrm{uf},\tau}$). Then
# $A(\alpha, \beta^{\mathrm{uf}}) = \max_\tau A(\alpha^*, \beta^{\mathrm{uf},\tau})$ asks
# whether a model that never learned attention still knows which input word matters, and
# $A(\alpha, \beta) = \max_\tau A(\alpha^*, \beta^\tau)$ does the same for the probe of a standard
# model. The maximum over checkpoints is the authors' (appendix A.7: the agreement first rises,
# then falls), as one reports a dev-set result; $\xi$ is read off the second model's curve.

# %%
show(recorded_run)
show(agreement_row_np)

# %% [markdown]
# **What the paper claims, and what we test.** §3.2: "$A(\alpha, \beta^{\mathrm{uf}})$ …
# significantly outperform[s] the random baseline $\hat{A}$, and the contextualized agreement is
# also non-trivial"; Table 2 also has $A(\alpha, \beta) > A(\alpha, \beta^{\mathrm{uf}})$ on 6 of
# its 7 rows (not on 20 Newsgroups: 65 vs 63). The first claim of each data set tests the two
# agreements, and its power is computed at the paper's own differences in points. The paper sets
# $\xi$ beside $P^*$, the performance when training finishes (we take the gold's best checkpoint;
# SST: 78 of 84; Multi30k: 43 of 66), and draws no line for "non-trivial", so the second claim is
# our reading: that $\xi(\alpha, \beta^{\mathrm{uf}})$ recovers more than half of what training
# adds, $(\xi - P^0)/(P^* - P^0) > \tfrac12$, with $P^0$ the second model's performance at step 0,
# where its curve starts. Read with $P^0$ at chance (the paper gives none), six of the paper's
# seven rows are above that line (SST $(78 - 50)/(84 - 50) = 0.82$, Multi30k $43/66 = 0.65$; every
# row is printed with Table 2 below) and News It-Pt is below it, at 0.40: "non-trivial" in the
# paper's words is not this line, so a row of ours below it goes against our reading, not against
# the paper. Ours can fall on either side of it. The line was chosen after runs had been seen; its
# row says what came before. The table also prints $\xi$ as a share of $P^*$, the paper's
# comparison, and (ours, not the paper's) the best performance of the frozen-uniform model itself,
# what no attention at all achieves.
#
# **Replicates.** The authors train one gold, 5 re-seeded models (classification) or 1
# (translation) and one frozen-uniform model. We repeat the translation recipe — a gold, one
# re-seeded standard model and one frozen-uniform model, 3 runs with seeds of their own — as
# independent replicates: each claim gets one value per replicate, and the differences
# $A(\alpha, \beta) - A(\alpha, \beta^{\mathrm{uf}})$ and the share of $\xi$ are taken within a
# replicate, against the same gold. How many, for translation, comes from the spread that the
# saved full runs measured (below): enough for power 0.8 at the gain they measured.
#
# **Can the table decide?** Two gates. The paper's gold is trained "till convergence": a row is *not
# tested* unless the golds' validation curves are shown to rise by less than 1 point per 250 steps —
# one slope shared by the golds over their last checks, its upper confidence bound (one-sided, at
# the rule's 2.5 %) below that rise (`stats.converged(..., within=)`). Golds still gaining a point
# per 250 steps pass at most 2.5 % of the time, however noisy their checks; flat golds pass only
# when their checks are precise enough to show it. Those checks are 125 steps apart over the last
# 1,000 steps (the authors evaluate every 250), and the cell below prints, before training, the
# chance that flat golds pass at the noise of the validation set's size; the claims print it again
# at the noise the golds' checks measured. (This gate was written after the full runs of the
# previous version: that one fired on any rise shown above 0, however small; the claims' rows say
# what it gave.) And the whole table rests on the re-seeded model agreeing with the gold's
# attention: if attention depends mostly on the seed, that curve stays near chance and no probe's
# agreement with the gold reads. A row is *not tested* when the re-seeded runs' best agreement with
# their gold is, on average, at most twice the random baseline (the paper's rows, through their
# $\xi$, have it at three times or more).

# %%
# The translation gain A(α, β) − A(α, β^uf), in points, per replicate of the saved full runs
# (benchmarks/results/cpu-full-2026-11-28*/08_agreement.json); of seeds +200, its mean ± SE as
# issue 44's readers reported it (their run is not saved: cpu-full-2026-11-29-issue44/README.md)
SAVED_GAIN = {"seeds 0": [10.48, 7.11, 7.33], "seeds +100": [8.15, 10.32, 13.01]}
SAVED_GAIN_200 = (6.0, 2.3)
spreads = [np.std(v, ddof=1) for v in SAVED_GAIN.values()] + [SAVED_GAIN_200[1] * math.sqrt(3)]
gain = float(np.mean([np.mean(v) for v in SAVED_GAIN.values()] + [SAVED_GAIN_200[0]]))
pooled = math.sqrt(np.mean(np.square(spreads)))


def planned(mean: float, sd: float, n: int):
    """The test of a gain above 0 on n replicates that spread by sd: its power before a run."""
    z = np.linspace(-1, 1, n)
    return versus(list(mean + sd * z / z.std(ddof=1)), 0.0)


print(f"saved translation gains: {gain:+.1f} points on average over three seed sets, spread "
      f"{', '.join(f'{x:.1f}' for x in spreads)} per replicate (pooled {pooled:.1f})")
for n in range(3, 7):
    print(f"  {n} replicates: power {power(planned(gain, pooled, n), gain).reproduced:.2f} at the "
          f"pooled spread, {power(planned(gain, max(spreads), n), gain).reproduced:.2f} at the "
          f"widest; at the paper's +18: {power(planned(gain, max(spreads), n), 18).reproduced:.2f}")
REPLICATES = {"sentiment": lesson.size(full=4, smoke=2, paper=5),
              "translation": lesson.size(full=runs_needed(gain, pooled), smoke=2, paper=5)}
print(f"replicates: {REPLICATES}")
# the convergence gate: the golds' last GATE_LAST checks, GATE_EVERY steps apart
GATE_LAST, GATE_EVERY = lesson.size(full=9, smoke=3), lesson.size(full=125, smoke=5)
RISE, RISE_PER = 0.01, 250  # a gold still gaining 1 point per 250 steps has not converged


def gate_fires(slope: float, noise: float, golds: int) -> float:
    """The chance that the convergence gate calls golds rising by `slope` per step unfinished."""
    return converged_power(slope, noise, golds, GATE_LAST, GATE_EVERY, within=RISE / RISE_PER)


def late_checks(steps: int) -> range:
    return range(steps - (GATE_LAST - 1) * GATE_EVERY, steps + 1, GATE_EVERY)


SENT = dict(hidden=lesson.size(full=32, smoke=8, paper=256),
            embed=lesson.size(full=32, smoke=8, paper=300),
            steps=lesson.size(full=1500, smoke=10, paper=4000), batch=32, lr=1e-3,
            n_train=lesson.size(full=None, smoke=300), n_valid=lesson.size(full=None, smoke=50))
SENT["at"] = checkpoints(SENT["steps"],
                         (0, 10, 50, 100, 150, 200, 250, *late_checks(SENT["steps"])),
                         lesson.size(full=250, smoke=5))
MT = dict(hidden=lesson.size(full=64, smoke=16, paper=256),
          steps=lesson.size(full=2500, smoke=10, paper=10000),
          lr=lesson.size(full=3e-3, smoke=3e-3, paper=1e-3),
          batch=lesson.size(full=32, smoke=32, paper=16),
          n_valid=lesson.size(full=200, smoke=10, paper=None), max_len=20, tgt_words=500,
          n_read=lesson.size(full=None, smoke=1500))
MT["at"] = checkpoints(MT["steps"], (*lesson.size(full=(0, 50, 100, 250, 500, 750), smoke=(0, 2),
                                                  paper=(0, 50, 100, 500, 1000, 1500)),
                                    *late_checks(MT["steps"])),
                       lesson.size(full=250, smoke=5, paper=2000))
show_table([
    {"": "data", "SST (authors)": "5,130 / 1,421 sentences",
     "ours": "Rotten Tomatoes sentences (80/10/10)",
     "Multi30k en→de (authors)": "29,000 pairs, subwords",
     "ours ": f"Bible de→en (Basic English), verses of 3–{MT['max_len']} words"},
    {"": "model", "SST (authors)": "bi-LSTM 256, GloVe 300", "ours": f"bi-LSTM {SENT['hidden']}, "
     f"random {SENT['embed']}", "Multi30k en→de (authors)": "2-layer bi-LSTM 256, dropout 0.5",
     "ours ": f"1-layer LSTM {MT['hidden']}, decoder from zeros"},
    {"": "training", "SST (authors)": "Adam 1e-3, batch 32, 4000 steps",
     "ours": f"Adam {SENT['lr']:g}, batch {SENT['batch']}, {SENT['steps']} steps",
     "Multi30k en→de (authors)": "Adam 1e-3, batch 16, 20 epochs",
     "ours ": f"Adam {MT['lr']:g}, batch {MT['batch']}, {MT['steps']} steps"},
    {"": "runs", "SST (authors)": "gold + 5 re-seeded, 1 uniform",
     "ours": f"{REPLICATES['sentiment']} × (gold + 1 re-seeded + 1 uniform)",
     "Multi30k en→de (authors)": "gold + 1 re-seeded, 1 uniform",
     "ours ": f"{REPLICATES['translation']} × (gold + 1 re-seeded + 1 uniform)"},
], ["", "SST (authors)", "ours", "Multi30k en→de (authors)", "ours "])

# %% [markdown]
# **Sentiment.** The classifier of section 1 with learned attention. Our "SST" is the Rotten
# Tomatoes sentences that the Stanford Sentiment Treebank was built from (`data/sentiment`,
# label: mean human score above 0), not SST's own split and labels. As the authors do, words
# seen fewer than 3 times in training become `<unk>` and every sentence is wrapped in `<bos>` …
# `<eos>`, which count as positions; the performance is accuracy.
#
# **Translation.** Multi30k is not available offline, so we use Bible verses (`data/bible`),
# German (Elberfelder) → English (the *Bible in Basic English*, written with a vocabulary of
# about 850 basic words). The paper's models read 8,000 SentencePiece subwords; ours read whole
# words, the 500 most frequent English words (the rest `<unk>`) and the German words seen at
# least twice. Output words that are `<unk>` are left out of the loss, the accuracy and the
# agreement: a model cannot be credited with aligning a word it cannot name. The performance is
# token accuracy under teacher forcing. The model is Luong's translator, lesson 05's reference
# as one module; it starts its decoder from zeros, so it sees the source only through attention.

# %%
show(Seq2SeqAttention)
show(sentiment_task)
show(translation_task)
tasks = {"sentiment": sentiment_task(SENT, lesson.seed(0), lesson.device),
         "translation": translation_task(MT, lesson.seed(0), lesson.device)}
for name, task in tasks.items():  # the gate's power, before any training
    items = int(task.row_mask.sum()) if task.row_mask is not None else len(task.key_mask)
    noise = math.sqrt(0.25 / items)  # the widest binomial spread of a performance on `items`
    golds = REPLICATES[name]
    print(f"{name}: the convergence gate lets {golds} flat golds through with chance "
          f"{1 - gate_fires(0.0, noise, golds):.2f}, golds still gaining {RISE:.0%} per "
          f"{RISE_PER} steps with chance {1 - gate_fires(RISE / RISE_PER, noise, golds):.3f} "
          f"({GATE_LAST} checks {GATE_EVERY} steps apart, noise {noise:.2%}: {items} items)")

# %% [markdown]
# **One run, and what it records.** A run seeds torch, builds the model (frozen uniform or
# not) and trains it with `recorded_run` (shown above) on batches of sentences of similar
# length. Its training step is the loss of section 1 for the classifier and the cross-entropy
# of every counted output word for the translator. At each checkpoint it reads three things
# from the model on the validation set: the attention $\alpha$ of a forward pass, the probe
# $\beta$ — for the classifier $\sigma(\pm z_i)$ of section 1, for the translator lesson 05's
# $p_t(y_t)$ with the context replaced by $h_i$ — and the performance. `table2_replicates`
# runs the three models of each replicate and reads its Table-2 row with `agreement_row_np`
# from their records.


# %%
def sentiment_run(seed: int, uniform: bool) -> dict:
    """One classifier on the sentences; per checkpoint α and β (M, 1, N) and the accuracy."""
    task = tasks["sentiment"]
    torch.manual_seed(seed)
    model = AttentionClassifier(*task.vocab, hidden=SENT["hidden"], embed=SENT["embed"],
                                uniform=uniform).to(lesson.device)

    def loss_fn(model, x, mask, y):  # the log-odds z against the label
        return F.binary_cross_entropy_with_logits(model(x, mask)[0], y)

    def measure(model):  # on the validation sentences
        x, mask, labels = task.valid
        z, alpha = model(x, mask)
        beta = model.probe(x, labels, mask)  # σ(±z_i)
        accuracy = ((z > 0).long() == labels).float().mean().item()
        return alpha[:, None].cpu().numpy(), beta[:, None].cpu().numpy(), accuracy  # T = 1

    return recorded_run(model, task.batches(seed), loss_fn, SENT["steps"], task.at, measure,
                        SENT["lr"], f"sentiment seed {seed}" + (" (uniform)" if uniform else ""))


def translation_run(seed: int, uniform: bool) -> dict:
    """One translator on the verses; per checkpoint α and β (M, T, N) and the token accuracy
    on the counted output words."""
    task = tasks["translation"]
    torch.manual_seed(seed)
    model = Seq2SeqAttention(*task.vocab, hidden=MT["hidden"], embed=MT["hidden"],
                             uniform=uniform).to(lesson.device)

    def loss_fn(model, src, mask, tgt_in, tgt_out):  # tgt_out: -100 where a word does not count
        logits, _ = model(src, tgt_in, mask)
        return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=-100)

    def measure(model):  # on the validation verses
        src, mask, tgt_in, tgt, counted = task.valid
        logits, alpha = model(src, tgt_in, mask)
        beta = model.probe(src, tgt_in, tgt)  # p_t(y_t) with c_t := h_i
        hits = ((logits.argmax(-1) == tgt) & counted).sum().item()
        return alpha[:, 0].cpu().numpy(), beta.cpu().numpy(), hits / counted.sum().item()

    return recorded_run(model, task.batches(seed), loss_fn, MT["steps"], task.at, measure,
                        MT["lr"], f"translation seed {seed}" + (" (uniform)" if uniform else ""))


# %%
show(table2_replicates)
replicates = {}
for (name, task), run in zip(tasks.items(), (sentiment_run, translation_run)):
    print(task.summary + (f"\nfallback: {task.fallback}" if task.fallback else ""))
    cpu = time.process_time()
    seeds = [tuple(lesson.seeds(3, start=3 * r)) for r in range(REPLICATES[name])]
    replicates[name] = table2_replicates(run, task, seeds)  # (gold, other, uniform) seeds
    print(f"[CPU time of the {name} runs: {time.process_time() - cpu:.0f} s]")

# %% [markdown]
# **Table 2, ours beside the paper's.** The paper's columns, in the order of its Table 2:
# $A(\alpha, \beta^{\mathrm{uf}})$, $A(\beta^{\mathrm{uf}}, \beta^{\mathrm{px}})$,
# $A(\Delta, \beta^{\mathrm{uf}})$, $A(\alpha, \beta)$, $\hat{A}$, then
# $\xi(\alpha, \beta^{\mathrm{uf}})$, $\xi(\alpha, \beta)$ and $P^*$. We compute the columns that
# need only attention and probes; the bag-of-words proxy $\beta^{\mathrm{px}}$ is lesson 06's
# subject, and the gradient saliency $\Delta$ belongs to §5.1, which we do not reproduce. The
# rows marked "ours" are not in the paper: the gates' numbers, $P^0$, and the frozen-uniform
# model's best performance.

# %%
PAPER = {"sentiment": {"A(α, β^uf)": 20, "A(α, β)": 25, "A_rand": 8, "ξ(α, β^uf)": 78,
                       "ξ(α, β)": 82, "P*": 84},
         "translation": {"A(α, β^uf)": 31, "A(α, β)": 49, "A_rand": 7, "ξ(α, β^uf)": 43,
                         "ξ(α, β)": 49, "P*": 66}}  # Table 2, in %: SST and Multi30k
KEYS = ["A(α, β^uf)", "A(α, β)", "A_rand", "ξ(α, β^uf)", "ξ(α, β)", "P*"]
SHARE = "(ξ(α, β^uf) − P⁰) / (P* − P⁰) (ours)"  # what ξ recovers of what training adds
PAPER_P0 = {"sentiment": 50, "translation": 0}  # P⁰ read as chance: the paper gives none
TABLE2_XI = {"IMDB": (87, 90, 50), "AG News": (94, 96, 25), "20 NG": (91, 94, 5),
             "SST": (78, 84, 50), "Multi30k": (43, 66, 0), "IWSLT14": (36, 67, 0),
             "News It-Pt": (22, 55, 0)}  # Table 2: ξ(α, β^uf), P*, and chance (our P⁰)
print("the paper's rows, (ξ(α, β^uf) − chance) / (P* − chance): " + ", ".join(
    f"{row} {(xi - p0) / (p - p0):.2f}" for row, (xi, p, p0) in TABLE2_XI.items()))


def paper_share(name: str) -> float:
    """The paper's (ξ(α, β^uf) − P⁰) / (P* − P⁰), with P⁰ read as chance."""
    return (PAPER[name]["ξ(α, β^uf)"] - PAPER_P0[name]) / (PAPER[name]["P*"] - PAPER_P0[name])


ours = {}
for name, reps in replicates.items():
    rows = [rep["row"] for rep in reps]
    pct = {key: [100 * (r[key] if r[key] is not None else r["P*"]) for r in rows] for key in KEYS}
    pct["ξ(α, β^uf) / P*"] = [x / p for x, p in zip(pct["ξ(α, β^uf)"], pct["P*"])]
    pct["P⁰ (ours)"] = [100 * r["curve_perf"][0] for r in rows]
    pct[SHARE] = [(x - p0) / (p - p0) if p > p0 else None  # None: training added nothing
                  for x, p0, p in zip(pct["ξ(α, β^uf)"], pct["P⁰ (ours)"], pct["P*"])]
    pct["re-seeded best agreement with the gold (ours)"] = [100 * r["curve"].max() for r in rows]
    pct["frozen uniform, best performance (ours)"] = [100 * rep["uniform"]["perf"].max()
                                                       for rep in reps]
    pct["starred"] = [r["ξ(α, β^uf)"] is None for r in rows]
    ours[name] = pct
table = []
for name, pct in ours.items():
    paper = dict(PAPER[name], **{"ξ(α, β^uf) / P*": PAPER[name]["ξ(α, β^uf)"] / PAPER[name]["P*"],
                                 SHARE: paper_share(name)})
    for key in [*KEYS, "ξ(α, β^uf) / P*", "P⁰ (ours)", SHARE,
                "frozen uniform, best performance (ours)",
                "re-seeded best agreement with the gold (ours)"]:
        defined = [x for x in pct[key] if x is not None]
        table.append({"data": name, "quantity": key, "paper": f"{paper[key]:.3g}" if key in paper
                      else "-", "ours, per replicate": ", ".join(
                          "undefined (P* ≤ P⁰)" if x is None else f"{x:.3g}" for x in pct[key]),
                      "ours, mean ± SE": str(estimate(defined)) if defined else "-"})
show_table(table, list(table[0]))
for name, reps in replicates.items():
    last = "; ".join(", ".join(f"{100 * p:.1f}" for p in rep["gold"]["perf"][-4:]) for rep in reps)
    print(f"{name}: golds' best checkpoints at steps "
          f"{[tasks[name].at[rep['row']['best']] for rep in reps]}, their last four checks "
          f"(steps {', '.join(map(str, tasks[name].at[-4:]))}): {last}; a ξ(α, β^uf) never "
          f"reached (the paper's ∗, counted as P*) in {sum(ours[name]['starred'])} of {len(reps)}")

# %%
lesson.savefig(plot_table2({k: {key: v[key] for key in KEYS} for k, v in ours.items()}, PAPER),
               "agreement_table")
lesson.savefig(plot_xi_curves({k: v[0] for k, v in replicates.items()},
                              {k: t.at for k, t in tasks.items()}), "agreement_curve")

# %% [markdown]
# The second figure is the paper's Fig. 2 for our first replicates: the re-seeded model's
# agreement with the gold attention against its performance, one point per checkpoint, with the
# probes' agreements as horizontal lines. Where a horizontal line first falls below the curve,
# read off $\xi$. Now the claims, one row per data set, each gated as stated above.

# %%
GATE_CHANGE = (f"the gate now passes golds shown to rise by less than {RISE:.0%} per {RISE_PER} "
               "steps (before: golds shown to rise at all failed it, which made all four rows "
               "not tested at seeds 0 and +100, on translation golds rising 0.30 ± 0.07 and 0.45 ± "
               "0.06 points per 250 steps and sentiment golds 1.8 ± 0.1 and 1.7 ± 0.1)")
TABLE2_CHANGE = (f"the golds' gate: one slope shared by the golds over checks every {GATE_EVERY} "
                 f"steps in the last {(GATE_LAST - 1) * GATE_EVERY} (before: each gold alone over "
                 "its last 4 checks, 250 apart), after seeds +200 had both rows not tested on a "
                 "gold's 1.9-point rise; translation replicates from the saved spread (before: "
                 "3, inconclusive at +200 on a gain of +6.0 ± 2.3); the ξ part a row of its "
                 "own; " + GATE_CHANGE)
XI_LINE_CHANGE = ("the line: first the frozen-uniform model's best performance (contradicted in "
                  "an earlier run), then P⁰ (reproduced for translation at seeds 0 and +100, for "
                  "sentiment at 0, inconclusive at +100; a line that only a model made worse by "
                  "training could miss), now half the way from P⁰ to P*; " + GATE_CHANGE)
for name, pct in ours.items():
    reps, paper, task = replicates[name], PAPER[name], tasks[name]
    curves = [list(zip(task.at, rep["gold"]["perf"])) for rep in reps]
    in_points = [[(t / RISE_PER, 100 * p) for t, p in c] for c in curves]  # the gate's units
    gates = [converged(in_points, last=GATE_LAST, what="golds, in points,", within=100 * RISE,
                       per=f"{RISE_PER} steps"),
             off_floor(pct["re-seeded best agreement with the gold (ours)"],
                       bottom=pct["A_rand"][0], margin=pct["A_rand"][0])]
    noise = check_noise(curves, GATE_LAST)
    print(f"{name}, the gates: {'; '.join(g.detail for g in gates)}; the golds' checks spread by "
          f"{noise:.2%} about their lines, where the gate lets flat golds through with chance "
          f"{1 - gate_fires(0.0, noise, len(reps)):.2f}")
    t = all_of({"A(α, β^uf) above Â": versus(pct["A(α, β^uf)"], pct["A_rand"][0], gates=gates),
                "A(α, β) above A(α, β^uf)": versus(np.subtract(pct["A(α, β)"], pct["A(α, β^uf)"]),
                                                   0.0, gates=gates)})
    effect = {"A(α, β^uf) above Â": paper["A(α, β^uf)"] - paper["A_rand"],
              "A(α, β) above A(α, β^uf)": paper["A(α, β)"] - paper["A(α, β^uf)"]}
    lesson.claim(f"{name}: the frozen-uniform model's probe agrees with attention above chance; "
                 "a standard model's probe agrees more", test=t, effect=effect,
                 paper=", ".join(f"{k} {paper[k]}" for k in KEYS[:3]) + " (§3.2, Table 2)",
                 reproduced="A model that never learned where to look still knows which word "
                 "matters, and a standard model's probe agrees with the gold attention more.",
                 why="small models, "
                 "minutes of training, other data", contradicted=f"Shown the other way: "
                 f"{in_words(t)}.", fallback=task.fallback, changed_after_run=TABLE2_CHANGE)
    untrained = sum(x is None for x in pct[SHARE])
    t = (not_run(f"P* ≤ P⁰ in {untrained} of {len(reps)} replicates: training added nothing, so "
                 "the share is undefined") if untrained else versus(pct[SHARE], 0.5, gates=gates))
    lesson.claim(f"{name}: ξ(α, β^uf) is non-trivial, (ξ − P⁰) / (P* − P⁰) > 1/2", test=t,
                 paper=f"ξ(α, β^uf) {paper['ξ(α, β^uf)']} beside P* {paper['P*']} (§3.2)",
                 effect=paper_share(name) - 0.5, why="the line is ours: the paper draws none",
                 reproduced="The frozen-uniform probe's agreement buys more than half of what "
                 "training adds.", contradicted="The frozen-uniform probe's agreement buys less "
                 "than half of what training adds.", fallback=task.fallback, kind="reading",
                 changed_after_run=XI_LINE_CHANGE)

# %% [markdown]
# How to read the table. The random baseline $\hat{A}$ depends only on how long the inputs are,
# so it sits close to the paper's for inputs of similar length. A contextualised agreement can
# never exceed the performance the re-seeded model reaches, so read $\xi$ against $P^*$ (the
# paper's comparison, printed as a share) before comparing it with the paper's number; where
# a gold never rose above its start ($P^* \le P^0$) the share is undefined, and the table says
# so. Our absolute numbers are not the paper's: the models are much smaller and trained for
# minutes, our sentiment data is not SST's split, and our translation reads words of a Bible
# version rather than subwords of image captions.
#
# Why the two data sets may differ (this run's sentiment rows are not tested when their golds are
# still rising: their row says so). A sentiment classifier needs one or two words of a sentence,
# and which of several opinion words its attention settles on can be a matter of the seed; with
# attention frozen uniform it may classify as well as with attention (compare the frozen-uniform
# model's best performance with $P^*$ in the table), and then no agreement is needed for its
# performance. A translator must look at a different source word for every output word, and which
# word it needs does not depend on the seed: the re-seeded model's agreement with the gold says
# how far each holds in this run.

# %% [markdown]
# ## Summary
#
# What this run found, claim by claim (each finding is printed in its claim's row above):

# %%
lesson.summary()

# %% [markdown]
# And what the lesson built along the way:
#
# * The paper's classifier: lesson 05's LSTM run in both directions, read by an attention whose
#   scores come from a one-hidden-layer network; its log-odds is the attention-weighted average
#   of the probe's log-odds.
# * The agreement metric compares the top of two rankings, against a random baseline slightly
#   above 5%; the contextualised agreement $\xi$ converts an agreement into the performance of a
#   standard model whose attention agrees with the gold as much.
# * The keyword task asks where a classifier with frozen uniform attention keeps the evidence of
#   a keyword: at the keyword's own position early in training (the locality the probe
#   assumes), and whether it has moved to an end of the sequence by the end of the run (the
#   paper: asymptotically).
# * Table 2 asks of real data whether the probe of a model that never learned where to look
#   agrees with a standard model's attention above chance, and whether a standard model's probe
#   agrees with it more — on independent replicates, as many as the spread of earlier runs
#   asks for, gated on golds shown to rise by less than a point per 250 steps (the chance that
#   flat golds pass is printed) and on attention that other seeds reproduce; and, on a line of
#   our own, whether that probe's $\xi$ buys more than half of what training adds.

# %% [markdown]
# ## Exercises
#
# **8.1 — the agreement metric (implement, ~10 min).** In a student copy
# (`python -m minattn.course.classroom student DIR`), `agreement_np` and `agreement_torch` in
# `minattn/agreement.py` raise `NotImplementedError`. Implement them for a whole batch: the
# argmax of $a$ over the real positions, and whether fewer than $\lceil 0.05 n\rceil$ real
# positions of $b$ are strictly above it. Check: `pytest tests/test_agreement.py --exercises 8.1`.
#
# **8.2 — the contextualised agreement (implement, ~10 min).** Implement
# `contextualized_agreement`: the performance at the first checkpoint whose agreement strictly
# exceeds the threshold, or `None` when none does (the paper's ∗). Why the *first* checkpoint
# and not the best one? Check with `--exercises 8.2`.
#
# **8.3 — predict, then run (predict, ~10 min).** Replace the bidirectional LSTM of the keyword
# task by a one-way (left-to-right) LSTM, keep the attention frozen uniform and train 1000
# steps. In most positive sequences, where does the largest log-odds $z_i$ sit: "before" the
# keyword, "at" it, or "after" it? Write your answer in `one_way_keyword_leader` of
# `minattn/course/answers/agreement.py` before you run anything (`make exercises EX=8.3` says
# whether it is answered; the teacher's tests check it). Then run it: the lesson's
# `keyword_run` with a model that keeps only `forward_lstm` (a few lines of
# `nn.Module`), and look at the share of sequences led by each position.

# %%
print(f"lesson time: {time.perf_counter() - T0:.0f} s wall, {time.process_time() - CPU0:.0f} s CPU")
