"""What lesson 08 runs, beside the mechanism (`minattn.agreement`): the keyword task's data
(§6.1), the two real data sets of Table 2 as batches, the loop that records attention and
probe at the authors' checkpoints, the table's replicates, and the lesson's figures. The
training steps, the probes and the agreement read from a trained model are in the lesson.

Snell et al. (2021) train on SST and Multi30k; this course has, offline, Rotten Tomatoes
sentences for sentiment (the sentences SST was built from) and Bible verses German -> English
for translation. Each loader falls back on a synthetic set when the data was not fetched, and
says so. The authors' schedule (`classification/utils.py`, `translation/utils.py`): Adam, no
gradient clipping, evaluations at steps 0, 10, 50, 100, 150, 200, 250 and then every 250
(classification), keeping at each the attention α, the probe β and the performance.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch

from ..agreement import agreement_row_np
from ..contract import check_size, describe, fail
from .data import DatasetMissing, load_parallel, load_sentiment, tokenize
from .train import length_batches, train


# ============================================================================ the keyword task
def keyword_task(batch_size: int, length: int, n_vocab: int, rng: np.random.Generator,
                 keyword: int = 1):
    """Keyword classification of Snell et al. (2021), §6.1: `length` words drawn uniformly from
    {1..n_vocab}; positive iff the keyword occurs (exactly once in a positive sequence), half
    of each batch positive (rejection sampling). Returns numpy int64 tokens (B, N), labels (B,)
    and the keyword's position (B,) (-1 in negatives)."""
    keyword = check_size("keyword", keyword, 1)
    if isinstance(n_vocab, (int, np.integer)) and keyword > n_vocab:
        fail("keyword", f"a word of the vocabulary {{1..n_vocab = {n_vocab}}}", f"{keyword}")
    if batch_size < 2 or batch_size % 2 or length < 2 or n_vocab < 2:
        fail("keyword_task sizes", "even batch_size >= 2, length >= 2, n_vocab >= 2",
             f"{batch_size}, {length}, {n_vocab}")
    rows = {0: [], 1: []}
    while min(len(r) for r in rows.values()) < batch_size // 2:
        x = rng.integers(1, n_vocab + 1, size=(batch_size, length))
        hits = (x == keyword).sum(1)
        for seq, k in zip(x, hits):
            if k <= 1 and len(rows[int(k)]) < batch_size // 2:
                rows[int(k)].append(seq)
    tokens = np.stack(rows[0] + rows[1])
    labels = np.repeat([0, 1], batch_size // 2)
    order = rng.permutation(batch_size)
    tokens, labels = tokens[order], labels[order]
    where = np.where(labels == 1, (tokens == keyword).argmax(1), -1)
    return tokens, labels, where


# ============================================================================ vocabularies
PAD, UNK, BOS = "<pad>", "<unk>", "<bos>"


def build_vocab(sentences, max_size: int | None = None, min_count: int = 1) -> dict[str, int]:
    """Word -> id, specials first (<pad> = 0, <unk> = 1, <bos> = 2), then by frequency (a
    special that occurs in the text keeps its own id)."""
    max_size = None if max_size is None else check_size("max_size", max_size)
    min_count = check_size("min_count", min_count, 1)
    counts = Counter(w for s in sentences for w in s if w not in (PAD, UNK, BOS))
    words = [w for w, c in counts.most_common(max_size) if c >= min_count]
    return {w: i for i, w in enumerate([PAD, UNK, BOS] + words)}


def encode_sentences(sentences, vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Padded ids (M, max length) (unknown words -> <unk>, padding <pad> = 0) and lengths (M,)."""
    if not isinstance(vocab, dict) or PAD not in vocab or UNK not in vocab:
        fail("vocab", f"a dict with {PAD!r} and {UNK!r} (build_vocab makes one)", describe(vocab))
    lengths = np.array([len(s) for s in sentences])
    if len(sentences) == 0 or lengths.min() == 0:
        fail("encode_sentences needs sentences", "a non-empty list of non-empty sentences",
             f"{len(sentences)} sentences, shortest {lengths.min() if len(lengths) else '-'}")
    ids = np.full((len(sentences), lengths.max()), vocab[PAD], dtype=np.int64)
    for m, s in enumerate(sentences):
        ids[m, :len(s)] = [vocab.get(w, vocab[UNK]) for w in s]
    return ids, lengths


# ============================================================================ real data
def sentiment_data(n_train: int | None, n_valid: int | None, seed: int = 0):
    """((sentences, labels) for training, the same for validation, fallback): Rotten Tomatoes
    sentences (`load_sentiment`'s 80/10/10 split drawn with `seed`), each wrapped as <bos>
    words <eos>; n_train, n_valid: how many, drawn at random (None: all). Offline, the keyword
    task stands in, and `fallback` says so ('' with the real data)."""
    fallback = ""
    try:
        splits = [(s.texts, s.labels) for s in (load_sentiment(split, seed=seed) for split in
                                                ("train", "valid"))]
    except DatasetMissing as err:
        fallback = f"the keyword task as 'sentiment' (real sentiment data missing: {err})"
        x, y, _ = keyword_task(2000, 20, 100, np.random.default_rng(seed + 8))
        texts = [" ".join(map(str, row)) for row in x]
        splits = [(texts[:1600], y[:1600]), (texts[1600:], y[1600:])]
    out = []
    for (texts, labels), n in zip(splits, (n_train, n_valid)):
        keep = np.random.default_rng(seed).permutation(len(texts))[:n]
        out.append(([[BOS, *tokenize(texts[i]), "<eos>"] for i in keep],
                    np.asarray(labels)[keep]))
    return out[0], out[1], fallback


def parallel_data(max_len: int, n_read: int | None = None, seed: int = 0):
    """(train, valid, fallback): lists of (German words, English words), 3..max_len words on
    each side, from the first `n_read` verses of each split of the Bible (Elberfelder ->
    Basic English; the 80/10/10 split drawn with `seed`; None: all). Offline, lesson 05's
    dictionary corpus stands in, and `fallback` says so."""
    fallback = ""
    try:
        splits = [[(tokenize(de), tokenize(en)) for en, de in
                   load_parallel("en-de", split, seed=seed, english="bbe")[:n_read]]
                  for split in ("train", "valid")]
    except DatasetMissing as err:
        from .lstm_attention import dictionary_corpus

        fallback = f"a synthetic dictionary corpus (real parallel data missing: {err})"
        src, tgt, _ = dictionary_corpus(4000, 300, np.random.default_rng(seed + 9),
                                        length=(5, 15), n_function=5)
        pairs = list(zip(src, tgt))
        splits = [pairs[:3600], pairs[3600:]]
    train_pairs, valid = ([(a, b) for a, b in pairs
                           if 3 <= len(a) <= max_len and 3 <= len(b) <= max_len]
                          for pairs in splits)
    return train_pairs, valid, fallback


# ============================================================================ recorded runs
def checkpoints(steps: int, early, every: int) -> list[int]:
    """The authors' evaluation schedule: the `early` steps, then every `every` steps, the last."""
    steps, every = check_size("steps", steps, 1), check_size("every", every, 1)
    return sorted({s for s in early if s <= steps} | set(range(every, steps + 1, every)) | {steps})


def check_noise(curves, last: int) -> float:
    """How far a run's checks scatter about its own straight line over its last `last` checks:
    the residual standard deviation, pooled over the runs (sum of last - 2 degrees of freedom),
    the `noise` that `stats.converged_power` takes. curves: per run, a sequence of (step, value)
    pairs."""
    ss, df = 0.0, 0
    for curve in curves:
        x, y = np.asarray(list(curve)[-last:], dtype=float).T
        if len(x) < 3:
            fail("check_noise", "at least 3 checks per run", f"{len(x)}")
        ss += float(((y - np.polyval(np.polyfit(x, y, 1), x)) ** 2).sum())
        df += len(x) - 2
    if df == 0:
        fail("check_noise", "at least one curve", "none")
    return math.sqrt(ss / df)


def length_batches_forever(lengths, size: int, seed: int) -> Iterator[torch.Tensor]:
    """Mini-batches of indices of similar lengths (less padding), reshuffled every epoch."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        yield from length_batches(torch.as_tensor(lengths), size, generator)


def recorded_run(model: torch.nn.Module, batches: Iterator[tuple], loss_fn: Callable,
                 steps: int, at: list[int], measure: Callable, lr: float, desc: str) -> dict:
    """Train (Adam, no clipping, as the authors) and keep, at every checkpoint in `at`, what
    `measure(model)` returns: the attention α and probe β (M, T, N) on the validation set and
    the performance. Returns {"alpha": (C, M, T, N), "beta": (C, M, T, N), "perf": (C,)}."""
    record = {"alpha": [], "beta": [], "perf": []}

    def evaluate():
        for key, value in zip(record, measure(model)):
            record[key].append(value)
        return {"perf": record["perf"][-1]}

    def batch(step):
        return next(batches)

    # `train`'s AdamW without weight decay is Adam
    train(model, batch, loss_fn, steps, lr=lr, clip=None, evaluate=evaluate, eval_at=at,
          desc=desc)
    return {key: np.stack(values) for key, values in record.items()}


@dataclass
class Table2Task:
    """One data set of Table 2 on the device: `batches(seed)` yields training batches (indices
    of similar lengths, reshuffled every epoch, cut to their longest row); `valid`: the
    validation tensors; `vocab`: the vocabulary sizes; which validation input positions are
    real (key_mask (M, N)) and which output words count (row_mask (M, T), None: all)."""

    name: str
    vocab: tuple[int, ...]
    batches: Callable[[int], Iterator[tuple]]
    valid: tuple
    at: list[int]
    key_mask: np.ndarray
    row_mask: np.ndarray | None
    fallback: str
    summary: str


def sentiment_task(sizes: dict, seed: int, device) -> Table2Task:
    """Rotten Tomatoes sentences as ids; words seen fewer than 3 times in training become <unk>
    (as the authors'). Batches and `valid`: (ids (B, N), mask (B, N), labels (B,)), training
    labels as floats. sizes: batch, at, n_train, n_valid."""
    (s_sents, s_labels), (v_sents, v_labels), fallback = sentiment_data(
        sizes["n_train"], sizes["n_valid"], seed)
    vocab = build_vocab(s_sents, min_count=3)
    pad = vocab[PAD]
    sx, s_len = encode_sentences(s_sents, vocab)
    vx, v_len = encode_sentences(v_sents, vocab)
    sx, vx = torch.tensor(sx, device=device), torch.tensor(vx, device=device)
    sy, vy = torch.tensor(s_labels, device=device).float(), torch.tensor(v_labels, device=device)

    def batches(run_seed):  # sentences of similar lengths, cut to the longest of the batch
        for i in length_batches_forever(s_len, sizes["batch"], run_seed):
            i = i.to(device)
            n = int(s_len[i.cpu()].max())
            yield sx[i, :n], sx[i, :n] != pad, sy[i]

    summary = (f"sentiment: {len(sx)} training / {len(vx)} validation sentences, vocabulary "
               f"{len(vocab)}, median length {int(np.median(v_len))} positions (with <bos>, "
               "<eos>)")
    return Table2Task("sentiment", (len(vocab),), batches, (vx, vx != pad, vy), sizes["at"],
                      (vx != pad).cpu().numpy(), None, fallback, summary)


def translation_task(sizes: dict, seed: int, device) -> Table2Task:
    """Bible verses German -> Basic English as ids: the `tgt_words` most frequent English words
    (the rest <unk>), German words seen at least twice; sources <bos> … <eos>, targets end with
    <eos>, and the decoder reads them shifted right behind <bos> (teacher forcing). Batches:
    (source (B, N), its mask, decoder input (B, T), targets (B, T) with -100 where a word is
    <unk> or padding: out of the loss); `valid`: (source, mask, decoder input, targets, which
    targets count (M, T)) on the first `n_valid` verses.
    sizes: batch, at, n_valid, max_len, tgt_words, n_read."""
    train_pairs, valid, fallback = parallel_data(sizes["max_len"], sizes["n_read"], seed)
    valid = valid[:sizes["n_valid"]]
    src = [[BOS, *a, "<eos>"] for a, _ in train_pairs]
    tgt = [[*b, "<eos>"] for _, b in train_pairs]
    src_vocab = build_vocab(src, min_count=2)
    tgt_vocab = build_vocab(tgt, max_size=sizes["tgt_words"])
    pad, unk, bos = (tgt_vocab[w] for w in (PAD, UNK, BOS))
    mx, m_len = encode_sentences(src, src_vocab)
    my, _ = encode_sentences(tgt, tgt_vocab)
    vmx, _ = encode_sentences([[BOS, *a, "<eos>"] for a, _ in valid], src_vocab)
    vmy, _ = encode_sentences([[*b, "<eos>"] for _, b in valid], tgt_vocab)
    mx, my, vmx, vmy = (torch.tensor(a, device=device) for a in (mx, my, vmx, vmy))
    my_in, vmy_in = (torch.cat([torch.full_like(y[:, :1], bos), y[:, :-1]], dim=1)
                     for y in (my, vmy))
    my_out = my.masked_fill((my == pad) | (my == unk), -100)  # not in the loss
    v_rows = (vmy != pad) & (vmy != unk)  # the output words that count

    def batches(run_seed):  # verses of similar lengths, cut to the longest of the batch
        for i in length_batches_forever(m_len, sizes["batch"], run_seed):
            i = i.to(device)
            n, t = int(m_len[i.cpu()].max()), int((my[i] != pad).sum(1).max())
            yield mx[i, :n], mx[i, :n] != pad, my_in[i, :t], my_out[i, :t]

    summary = (f"translation: {len(mx)} training / {len(vmx)} validation verse pairs, "
               f"{int(v_rows.sum())} counted output words; vocabularies {len(src_vocab)} "
               f"(German) / {len(tgt_vocab)} (English); <unk> is "
               f"{(my == unk).sum().item() / (my != pad).sum().item():.1%} of the English "
               "training words")
    return Table2Task("translation", (len(src_vocab), len(tgt_vocab)), batches,
                      (vmx, vmx != pad, vmy_in, vmy, v_rows), sizes["at"],
                      (vmx != pad).cpu().numpy(), v_rows.cpu().numpy(), fallback, summary)


def table2_replicates(run: Callable[[int, bool], dict], task: Table2Task,
                      seeds: list[tuple[int, int, int]]) -> list[dict]:
    """Independent replicates of one Table-2 row: for each (gold, other, uniform) seed triple,
    `run(seed, uniform)` trains a gold standard model, a re-seeded standard model and a
    frozen-uniform model of its own (the authors' translation recipe, repeated). Returns per
    replicate its "row" (`agreement_row_np` with the task's masks) and the three runs' records."""
    out = []
    for gold_seed, other_seed, uniform_seed in seeds:
        gold, other = run(gold_seed, False), run(other_seed, False)
        uniform = run(uniform_seed, True)
        out.append(dict(row=agreement_row_np(gold, [other], uniform, task.key_mask,
                                             task.row_mask),
                        gold=gold, other=other, uniform=uniform))
    return out


# ============================================================================ figures
def plot_keyword(uniform_runs: list[dict], learned_runs: list[dict], length: int, steps: int):
    """Three panels over training (mean over seeds, their range shaded): the standardised
    log-odds at the keyword, its neighbour and the ends under frozen uniform attention; which
    position leads; and, for contrast, learned attention's weight on the keyword."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6), constrained_layout=True)
    colors = {"keyword k": "tab:red", "next k+1": "tab:orange", "first": "tab:blue",
              "last": "tab:green", "ends": "tab:purple"}

    def band(ax, runs, key, label, color, ls="-"):
        values = np.array([r[key] for r in runs])
        ax.plot(runs[0]["step"], values.mean(0), color=color, ls=ls, label=label)
        ax.fill_between(runs[0]["step"], values.min(0), values.max(0), color=color, alpha=0.15)

    for q in ("keyword k", "next k+1", "first", "last"):
        band(axes[0], uniform_runs, q, q, colors[q])
        band(axes[1], uniform_runs, f"{q} top", q, colors[q])
    band(axes[1], uniform_runs, "ends top", "first or last", colors["ends"])
    axes[0].axhline(0, color="gray", ls="--", lw=1, label="uniform (z̄)")
    axes[0].set(ylabel="standardised log-odds (z_i − z̄) / sd(z)",
                title="Frozen uniform attention: what each position alone says")
    axes[1].axhline(1 / length, color="gray", ls=":", lw=1, label=f"chance 1/{length}")
    axes[1].set(ylabel="share of sequences where it is the largest z_i",
                title="Frozen uniform attention: which position leads")
    band(axes[2], learned_runs, "α at keyword", "α at the keyword (learned attention)", "tab:red")
    band(axes[2], learned_runs, "keyword k top", "keyword has the largest z (learned)",
         "tab:red", "--")
    band(axes[2], learned_runs, "accuracy", "held-out accuracy (learned)", "black")
    band(axes[2], uniform_runs, "accuracy", "held-out accuracy (uniform)", "gray", "--")
    axes[2].set(ylabel="share / weight / accuracy", title="Learned attention, for contrast")
    for ax in axes:
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlim(0, steps)
        ax.set_xlabel("training step (linear to 10, then log)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="center right" if ax is axes[2] else "best")
    return fig


def plot_table2(ours: dict[str, dict[str, list[float]]], paper: dict[str, dict[str, float]]):
    """Our Table-2 quantities (mean over replicates, error bar: standard error) beside the
    paper's, agreements on the left, performances on the right. ours[data][key]: per replicate
    values in %; paper[data][key]: the paper's number."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4), constrained_layout=True)
    for ax, keys, ylabel in [(axes[0], ["A(α, β^uf)", "A(α, β)", "A_rand"], "agreement (%)"),
                             (axes[1], ["ξ(α, β^uf)", "ξ(α, β)", "P*"], "performance (%)")]:
        xs = np.arange(len(keys))
        for k, (data, color) in enumerate(zip(ours, ["tab:blue", "tab:orange"])):
            values = [np.asarray(ours[data][key]) for key in keys]
            ax.bar(xs + 0.4 * k - 0.3, [v.mean() for v in values], 0.18, color=color,
                   yerr=[v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0 for v in values],
                   capsize=3, label=f"ours: {data}")
            ax.bar(xs + 0.4 * k - 0.1, [paper[data][key] for key in keys], 0.18, color=color,
                   alpha=0.35, hatch="//", label=f"paper: {data}")
        ax.set_xticks(xs, keys)
        ax.set(ylabel=ylabel)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_title("Attention–probe agreement (error bars: SE over the replicates)")
    axes[1].set_title("Contextualised agreement ξ and the best performance P*")
    axes[0].legend(fontsize=8)
    return fig


def plot_xi_curves(replicates: dict[str, dict], at: dict[str, list[int]]):
    """The curve behind ξ (the paper's Fig. 2) for the first replicate of each data set: the
    re-seeded run's agreement with the gold attention against its performance, one point per
    checkpoint, with the probes' agreements as horizontal lines."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(replicates), figsize=(6.5 * len(replicates), 4.4),
                             constrained_layout=True)
    for ax, (data, rep) in zip(np.atleast_1d(axes), replicates.items()):
        r = rep["row"]
        ax.plot(100 * r["curve_perf"], 100 * r["curve"], "o-", color="black",
                label="re-seeded run: A(α*, α^τ) vs P^τ")
        for s, x, y in zip(at[data], 100 * r["curve_perf"], 100 * r["curve"]):
            ax.annotate(str(s), (x, y), fontsize=7, xytext=(3, -9), textcoords="offset points")
        for key, color in [("A(α, β^uf)", "tab:green"), ("A(α, β)", "tab:purple"),
                           ("A_rand", "gray")]:
            ax.axhline(100 * r[key], color=color, ls="--", label=f"{key} = {100 * r[key]:.1f}")
        for key, color in [("ξ(α, β^uf)", "tab:green"), ("ξ(α, β)", "tab:purple")]:
            if r[key] is not None:
                ax.axvline(100 * r[key], color=color, ls=":", label=f"{key} = {100 * r[key]:.1f}")
        ax.set(xlabel="performance of the re-seeded run P^τ (%)",
               ylabel="agreement with the gold α* (%)", title=f"{data}: replicate 1")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig
