"""What lesson 08 runs, beside the mechanism (`minattn.agreement`): the keyword task of §6.1
and its runs, the two real data sets of Table 2, the runs that record attention and probe at
the authors' checkpoints, the table's replicates, and the lesson's figures.

Snell et al. (2021) train on SST and Multi30k; this course has, offline, Rotten Tomatoes
sentences for sentiment (the sentences SST was built from) and Bible verses German -> English
for translation. Each loader falls back on a synthetic set when the data was not fetched, and
says so. The authors' schedule (`classification/utils.py`, `translation/utils.py`): Adam, no
gradient clipping, evaluations at steps 0, 10, 50, 100, 150, 200, 250 and then every 250
(classification), keeping at each the attention α, the probe β and the performance.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from ..agreement import (
    AttentionClassifier,
    Seq2SeqAttention,
    agreement_row_np,
    classifier_probe_torch,
    classifier_torch,
)
from ..checks import check_size, describe, fail
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


def keyword_views(model, x, y, where) -> dict:
    """Scale-free views of the log-odds z_i = wᵀh_i + b₀ on held-out positive sequences whose
    keyword k has a right neighbour: the standardised z̃_i = (z_i - z̄)/sd(z) at k, k+1, the
    first and the last position (z̃ of uniform attention is 0), the share of sequences each
    leads (largest z_i), their raw means, the accuracy and the attention α at k."""
    z_all, alpha = model(x)
    rows = np.flatnonzero((y == 1) & (where < x.shape[1] - 1))
    z = model.position_logits(x)[rows].cpu().numpy()  # (P, N)
    r, k = np.arange(len(rows)), where[rows]
    standardised = (z - z.mean(1, keepdims=True)) / z.std(1, keepdims=True)
    top = z.argmax(1)
    out = {"accuracy": float(((z_all > 0).cpu().numpy() == y).mean()),
           "α at keyword": float(alpha.cpu().numpy()[rows][r, k].mean()),
           "uniform raw": float(z.mean())}
    for name, i in {"keyword k": k, "next k+1": k + 1, "first": 0, "last": x.shape[1] - 1}.items():
        out[name] = float(standardised[r, i].mean())
        out[f"{name} raw"] = float(z[r, i].mean())
        out[f"{name} top"] = float((top == i).mean())
    out["ends top"] = out["first top"] + out["last top"]
    return out


def keyword_run(seed: int, data_seed: int, uniform: bool, steps: int, at: list[int],
                held_out: tuple, sizes: dict, device) -> dict:
    """Train one classifier on fresh keyword batches (Adam, no clipping); returns every
    `keyword_views` quantity at the steps `at` (lists), with the steps under "step".
    sizes: length, vocab, hidden, embed, batch, lr."""
    torch.manual_seed(seed)
    model = AttentionClassifier(sizes["vocab"] + 1, hidden=sizes["hidden"],
                                embed=sizes["embed"], uniform=uniform).to(device)
    data_rng = np.random.default_rng(data_seed)
    x_held = torch.tensor(held_out[0], device=device)

    def batch(step):
        x, y, _ = keyword_task(sizes["batch"], sizes["length"], sizes["vocab"], data_rng)
        return torch.tensor(x, device=device), torch.tensor(y, device=device).float()

    def loss_fn(model, x, y):
        return F.binary_cross_entropy_with_logits(model(x)[0], y)

    record = {"step": [s for s in at if s <= steps]}

    def evaluate():
        for key, value in keyword_views(model, x_held, held_out[1], held_out[2]).items():
            record.setdefault(key, []).append(value)
        return {"accuracy": record["accuracy"][-1]}

    train(model, batch, loss_fn, steps, lr=sizes["lr"], clip=None, evaluate=evaluate,
          eval_at=record["step"],
          desc=f"keyword seed {seed}, {'uniform' if uniform else 'learned'} attention")
    return record


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


def length_batches_forever(lengths, size: int, seed: int) -> Iterator[torch.Tensor]:
    """Mini-batches of indices of similar lengths (less padding), reshuffled every epoch."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        yield from length_batches(torch.as_tensor(lengths), size, generator)


def recorded_run(model: torch.nn.Module, batch_fn: Callable, loss_fn: Callable, steps: int,
                 at: list[int], measure: Callable, lr: float, desc: str) -> dict:
    """Train (Adam, no clipping, as the authors) and keep, at every checkpoint in `at`, what
    `measure(model)` returns: the attention α and probe β (M, T, N) on the validation set and
    the performance. Returns {"alpha": (C, M, T, N), "beta": (C, M, T, N), "perf": (C,)}."""
    record = {"alpha": [], "beta": [], "perf": []}

    def evaluate():
        for key, value in zip(record, measure(model)):
            record[key].append(value)
        return {"perf": record["perf"][-1]}

    # `train`'s AdamW without weight decay is Adam
    train(model, batch_fn, loss_fn, steps, lr=lr, clip=None, evaluate=evaluate, eval_at=at,
          desc=desc)
    return {key: np.stack(values) for key, values in record.items()}


@dataclass
class Table2Task:
    """One data set of Table 2, ready to train on: `run(seed, uniform)` trains one model and
    returns its record (`recorded_run`); the masks say which input positions are real
    (key_mask (M, N)) and which output words count (row_mask (M, T), None: all)."""

    name: str
    run: Callable[[int, bool], dict]
    at: list[int]
    key_mask: np.ndarray
    row_mask: np.ndarray | None
    fallback: str
    summary: str


def sentiment_task(sizes: dict, seed: int, device) -> Table2Task:
    """The attention classifier on Rotten Tomatoes sentences; words seen fewer than 3 times
    in training become <unk> (as the authors'); performance = validation accuracy.
    sizes: hidden, embed, steps, batch, lr, at, n_train, n_valid."""
    (s_sents, s_labels), (v_sents, v_labels), fallback = sentiment_data(
        sizes["n_train"], sizes["n_valid"], seed)
    vocab = build_vocab(s_sents, min_count=3)
    sx, s_len = encode_sentences(s_sents, vocab)
    vx, v_len = encode_sentences(v_sents, vocab)
    sx, vx = torch.tensor(sx, device=device), torch.tensor(vx, device=device)
    s_mask, v_mask = (torch.arange(ids.shape[1], device=device)[None]
                      < torch.tensor(lengths, device=device)[:, None]
                      for ids, lengths in ((sx, s_len), (vx, v_len)))
    sy = torch.tensor(s_labels, device=device).float()
    vy = torch.tensor(v_labels, device=device)

    def measure(model):  # the states once, then the classifier and its probe on them
        h = model.states(vx, v_mask)
        w, b0 = model.readout.weight[0], model.readout.bias[0]
        z, alpha = classifier_torch(h, model.attn.weight, model.attn.bias, model.v.weight[0], w,
                                    b0, v_mask, model.uniform)
        beta = classifier_probe_torch(h, w, b0, vy)
        accuracy = ((z > 0).long() == vy).float().mean().item()
        return alpha[:, None].cpu().numpy(), beta[:, None].cpu().numpy(), accuracy  # T = 1

    def run(run_seed, uniform):
        torch.manual_seed(run_seed)
        model = AttentionClassifier(len(vocab), hidden=sizes["hidden"], embed=sizes["embed"],
                                    uniform=uniform).to(device)
        order = length_batches_forever(s_len, sizes["batch"], run_seed)

        def batch(step):
            i = next(order).to(device)
            n = int(s_len[i.cpu()].max())
            return sx[i, :n], s_mask[i, :n], sy[i]

        def loss_fn(model, x, mask, y):
            return F.binary_cross_entropy_with_logits(model(x, mask)[0], y)

        return recorded_run(model, batch, loss_fn, sizes["steps"], sizes["at"], measure,
                            sizes["lr"], f"sentiment seed {run_seed}"
                            + (" (uniform)" if uniform else ""))

    summary = (f"sentiment: {len(sx)} training / {len(vx)} validation sentences, vocabulary "
               f"{len(vocab)}, median length {int(np.median(v_len))} positions (with <bos>, "
               "<eos>)")
    return Table2Task("sentiment", run, sizes["at"], v_mask.cpu().numpy(), None, fallback,
                      summary)


def translation_task(sizes: dict, seed: int, device) -> Table2Task:
    """Luong's translator on Bible verses German -> Basic English: the `tgt_words` most
    frequent English words (the rest <unk>, left out of the loss, the accuracy and the
    agreement), German words seen at least twice; sources <bos> … <eos>, targets end with
    <eos>; performance = token accuracy under teacher forcing on the first `n_valid` verses.
    sizes: hidden, steps, batch, lr, at, n_valid, max_len, tgt_words, n_read."""
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
    my_out = my.masked_fill((my == pad) | (my == unk), -100)  # not in the loss
    v_rows = (vmy != pad) & (vmy != unk)  # the output words that count

    def shift(y):
        return torch.cat([torch.full_like(y[:, :1], bos), y[:, :-1]], dim=1)

    def measure(model):
        logits, alpha = model(vmx, shift(vmy), vmx != pad)
        beta = model.probe(vmx, shift(vmy), vmy)
        hits = ((logits.argmax(-1) == vmy) & v_rows).sum().item()
        return alpha[:, 0].cpu().numpy(), beta.cpu().numpy(), hits / v_rows.sum().item()

    def run(run_seed, uniform):
        torch.manual_seed(run_seed)
        model = Seq2SeqAttention(len(src_vocab), len(tgt_vocab), hidden=sizes["hidden"],
                                 embed=sizes["hidden"], uniform=uniform).to(device)
        order = length_batches_forever(m_len, sizes["batch"], run_seed)

        def batch(step):
            i = next(order).to(device)
            n, t = int(m_len[i.cpu()].max()), int((my[i] != pad).sum(1).max())
            return mx[i, :n], my[i, :t], my_out[i, :t]

        def loss_fn(model, x, y, y_out):
            logits, _ = model(x, shift(y), x != pad)
            return F.cross_entropy(logits.flatten(0, 1), y_out.flatten(), ignore_index=-100)

        return recorded_run(model, batch, loss_fn, sizes["steps"], sizes["at"], measure,
                            sizes["lr"], f"translation seed {run_seed}"
                            + (" (uniform)" if uniform else ""))

    summary = (f"translation: {len(mx)} training / {len(vmx)} validation verse pairs, "
               f"{int(v_rows.sum())} counted output words; vocabularies {len(src_vocab)} "
               f"(German) / {len(tgt_vocab)} (English); <unk> is "
               f"{(my == unk).sum().item() / (my != pad).sum().item():.1%} of the English "
               "training words")
    return Table2Task("translation", run, sizes["at"], (vmx != pad).cpu().numpy(),
                      v_rows.cpu().numpy(), fallback, summary)


def table2_replicates(task: Table2Task, seeds: list[tuple[int, int, int]]) -> list[dict]:
    """Independent replicates of one Table-2 row: for each (gold, other, uniform) seed triple,
    a gold standard model, a re-seeded standard model and a frozen-uniform model of its own
    (the authors' translation recipe, repeated). Returns per replicate its "row"
    (`agreement_row_np`) and the three runs' records."""
    out = []
    for gold_seed, other_seed, uniform_seed in seeds:
        gold, other = task.run(gold_seed, False), task.run(other_seed, False)
        uniform = task.run(uniform_seed, True)
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
