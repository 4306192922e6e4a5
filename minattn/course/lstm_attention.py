"""Lesson 05's course material (Snell et al. 2021, "Approximating How Single Head Attention
Learns"): the copying corpora, copy training as the authors' code does it, the alignment a copy
model learned, and the multi-head study. The mechanism (LSTM, Luong attention, probe, the
authors' copy model) is minattn/lstm_attention.py.

    corpora      permutations ('40-of-40', '40-of-60'), two disjoint word sets, a hidden
                 dictionary (as token lists; lesson 06 reads them too), and the same copy data as
                 token ids framed as in the authors' code (`copy_ids`, `CopyTask`)
    training     their `SequenceCopying/seq2seq.py` and `multihead.py` (github.com/Sea-Snell/
                 AttentionDynamics):
                     data       fresh pairs every step (x + <eos> -> <sos> + x + <eos>)
                     optimiser  Adam, learning rate 1e-3, batch 128, no gradient clipping
                     evaluated  token accuracy (every output token, <eos> included) every 10 steps
                     learned    token accuracy above 0.95 at an evaluation (`can_learn`)
    alignment    where a model's attention sits: its offset from the right word, and how well
                 its top position follows the right one (a shifted diagonal)
    multi-head   ONE base network (embedding, LSTMs, output network); a candidate head is
                 trained alone on it with a few data seeds: *good* if every run learns within
                 the budget, *bad* if every run ends below 0.6, thrown away otherwise (rejection
                 sampling); heads are then combined, K at a time.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from ..contract import check_size, describe, fail
from ..lstm_attention import AttentionHead, OfficialSeq2Seq

LEARNED, BAD = 0.95, 0.6  # multihead.py: good if accuracy > 0.95 within the budget, bad if < 0.6


# ================================================================= copying corpora (lessons 05, 06)
def dictionary_corpus(n_pairs: int, n_words: int, rng: np.random.Generator,
                      length=(4, 10), n_function: int = 0):
    """Pairs built from a hidden one-to-one dictionary x_k -> y_{π(k)}: each target sentence is
    the word-by-word translation of its source, shuffled, plus up to 2 target-only 'function
    words' f_* (nothing to align to but NULL). Words follow a Zipf law. Returns (src, tgt, π).
    (Lesson 06 aligns it; lesson 08 falls back on it offline.)"""
    n_pairs, n_words = check_size("n_pairs", n_pairs, 1), check_size("n_words", n_words, 1)
    if not (isinstance(length, (tuple, list)) and len(length) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in length)
            and 1 <= length[0] <= length[1]):
        fail("length", "(low, high) integers with 1 <= low <= high", describe(length))
    perm = rng.permutation(n_words)
    freq = 1.0 / np.arange(1, n_words + 1)
    src, tgt = [], []
    for _ in range(n_pairs):
        ks = rng.choice(n_words, size=rng.integers(length[0], length[1] + 1), p=freq / freq.sum())
        ys = [f"y{perm[k]:02d}" for k in ks]
        if n_function:
            ys += [f"f{int(f)}" for f in rng.integers(0, n_function, size=rng.integers(0, 3))]
        src.append([f"x{k:02d}" for k in ks])
        tgt.append([ys[i] for i in rng.permutation(len(ys))])
    return src, tgt, {f"x{k:02d}": f"y{perm[k]:02d}" for k in range(n_words)}


def permutation_corpus(n_pairs: int, n_types: int, n_vocab: int, rng: np.random.Generator,
                       offset: int = 0):
    """Copying data of Snell et al. (2021), §3.3: x = a random permutation of n_types words
    sampled from a vocabulary of n_vocab ('40-of-40' when equal, '40-of-60' control), and y = x."""
    n_pairs, n_vocab = check_size("n_pairs", n_pairs, 1), check_size("n_vocab", n_vocab, 1)
    n_types = check_size("n_types", n_types, 1)
    if n_types > n_vocab:
        fail("n_types", f"at most n_vocab = {n_vocab} (distinct words)", f"{n_types}")
    src = [[f"w{offset + int(k):02d}" for k in rng.permutation(rng.choice(n_vocab, n_types,
                                                                          replace=False))]
           for _ in range(n_pairs)]
    return src, [list(s) for s in src]


def two_sets_corpus(n_pairs: int, n_types: int, rng: np.random.Generator):
    """Mixture of permutations of two disjoint word sets (Snell et al. 2021, §3.3): half of the
    pairs copy a permutation of w00..w(n-1), half one of wn..w(2n-1)."""
    n_pairs, n_types = check_size("n_pairs", n_pairs, 2), check_size("n_types", n_types, 1)
    a, _ = permutation_corpus(n_pairs // 2, n_types, n_types, rng)
    b, _ = permutation_corpus(n_pairs - n_pairs // 2, n_types, n_types, rng, offset=n_types)
    order = rng.permutation(n_pairs)
    src = [(a + b)[i] for i in order]
    return src, [list(s) for s in src]


def copy_ids(n_pairs: int, n_types: int, n_words: int, rng: np.random.Generator,
             n_sets: int = 1, order=None) -> tuple[np.ndarray, np.ndarray, int]:
    """Copy data as token ids, framed as in the authors' code (`SequenceCopying/seq2seq.py`):
    the input x is n_types distinct words drawn from n_words, in random order, then <eos>; the
    output is <sos>, the same words, <eos>.

    n_sets=2: each pair draws its words from one of two disjoint sets of n_words words (chosen
    at random per pair) — the mixture of §3.3. order (n_types,): output word t is x_order[t]
    (the permutation function of §6.2) instead of x_t.
    Ids: words 0 .. W−1 (W = n_sets · n_words), <eos> = W, <sos> = W + 1; the vocabulary is the
    W + 2 ids, every one of them used. Returns src (n, n_types + 1), tgt (n, n_types + 2), W + 2.
    """
    if min(n_pairs, n_types, n_sets) < 1 or n_types > n_words:
        fail("copy_ids sizes", "n_pairs, n_sets >= 1 and 1 <= n_types <= n_words",
             f"n_pairs={n_pairs}, n_types={n_types}, n_words={n_words}, n_sets={n_sets}")
    # a random subset, shuffled
    words = np.argsort(rng.random((n_pairs, n_words)), axis=1)[:, :n_types]
    words = words + n_words * rng.integers(0, n_sets, size=(n_pairs, 1))
    eos, sos = n_sets * n_words, n_sets * n_words + 1
    out = words
    if order is not None:
        order = np.asarray(order)
        if sorted(order.tolist()) != list(range(n_types)):
            fail("copy_ids order", f"a permutation of 0..{n_types - 1}", repr(order))
        out = words[:, order]
    src = np.concatenate([words, np.full((n_pairs, 1), eos)], axis=1)
    tgt = np.concatenate([np.full((n_pairs, 1), sos), out, np.full((n_pairs, 1), eos)], axis=1)
    return src, tgt, n_sets * n_words + 2


class CopyTask:
    """One copy distribution: `n_types` words of `n_words` (× `n_sets` disjoint sets), output
    word t = input word order[t] (default: t). `sample(n, rng)` -> (src, tgt_in, tgt_out)."""

    def __init__(self, name: str, n_types: int, n_words: int, n_sets: int = 1, order=None):
        self.name, self.n_types, self.n_words, self.n_sets = name, n_types, n_words, n_sets
        self.order = None if order is None else np.asarray(order)
        self.vocab = n_sets * n_words + 2  # the words that occur, <eos>, <sos>
        # where output token t's word sits in the input (<eos> last): what attention should find
        self.right = np.append(np.arange(n_types) if order is None else self.order, n_types)

    def sample(self, n: int, rng: np.random.Generator, device="cpu"):
        src, tgt, vocab = copy_ids(n, self.n_types, self.n_words, rng, self.n_sets, self.order)
        assert vocab == self.vocab
        src, tgt = (torch.as_tensor(a, device=device) for a in (src, tgt))
        return src, tgt[:, :-1], tgt[:, 1:]

    def __repr__(self) -> str:
        return self.name


def no_attention_ceiling(n: int, eos: bool = True) -> float:
    """Token accuracy of a decoder that knows the n words of a permutation but not their
    order: it never repeats a word, so at output position t it guesses among the n − t words
    left (1 / (n − t)), and the mean over the n positions is H_n / n (H_n = 1 + 1/2 + … + 1/n).
    eos=True adds the final <eos>, always right: (H_n + 1) / (n + 1)."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        fail("no_attention_ceiling", "n >= 1", repr(n))
    harmonic = float(np.sum(1.0 / np.arange(1, n + 1)))
    return (harmonic + 1) / (n + 1) if eos else harmonic / n


# ============================================================================ training
@torch.no_grad()
def copy_metrics(model, task: CopyTask, src, tgt_in, tgt_out, track: int = 0) -> dict:
    """Token accuracy; with track=k > 0 also how often the attention (averaged over heads) and
    the lexical probe (on the first k pairs: it costs an output network per position) put their
    maximum on the input position of the word to output."""
    model.eval()
    logits, alpha = model(src, tgt_in)
    out = {"accuracy": (logits.argmax(-1) == tgt_out).float().mean().item()}
    if track:
        right = torch.as_tensor(task.right, device=src.device)  # (T,)
        out["attention"] = (alpha.mean(1).argmax(-1) == right).float().mean().item()
        beta = model.probe(src[:track], tgt_in[:track], tgt_out[:track])  # (k, T, N)
        out["probe"] = (beta.argmax(-1) == right).float().mean().item()
    model.train()
    return out


def train_copy(model, task: CopyTask, seed: int, steps: int = 200, batch: int = 128,
               lr: float = 1e-3, eval_every: int = 10, eval_pairs: int = 50, eval_set=None,
               stop_above: float | None = None, stop_by: int | None = None,
               track: int = 0) -> dict:
    """Train `model` on `task` with Adam (no clipping), a fresh batch every step; `seed` fixes
    the batches (the model's initialisation is the caller's).

    Evaluates before training and every `eval_every` steps: on `eval_set` (src, tgt_in, tgt_out)
    if given (multihead.py's fixed validation set), else on `eval_pairs` fresh pairs (seq2seq.py).
    stop_above: stop at the first evaluation whose accuracy exceeds it (the run has learned);
    stop_by: only at evaluations up to this step (a run not learned by then trains on to
    `steps` whatever it reaches, so that every such run is measured at the same step).
    track=k: also measure attention and probe (`copy_metrics`).
    Returns {"step": [...], "accuracy": [...], and with track "attention", "probe"}.
    """
    if steps < 1 or batch < 1 or eval_every < 1:
        fail("train_copy sizes", "steps, batch, eval_every >= 1", f"{steps}, {batch}, {eval_every}")
    device = next(model.parameters()).device
    data_rng, eval_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hist: dict = {"step": []}

    def evaluate(step):
        data = eval_set if eval_set is not None else task.sample(eval_pairs, eval_rng, device)
        hist["step"].append(step)
        for key, value in copy_metrics(model, task, *data, track=track).items():
            hist.setdefault(key, []).append(value)
        return (stop_above is not None and hist["accuracy"][-1] > stop_above
                and (stop_by is None or step <= stop_by))

    if evaluate(0):
        return hist
    model.train()
    for step in range(1, steps + 1):
        src, tgt_in, tgt_out = task.sample(batch, data_rng, device)
        logits, _ = model(src, tgt_in)  # teacher forcing: the decoder reads <sos> + x
        # the mean cross-entropy over every output token (their NLLLoss on log-softmax)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % eval_every == 0 and evaluate(step):
            break
    return hist


def learned(hist: dict, threshold: float = LEARNED) -> bool:
    return max(hist["accuracy"]) > threshold


def learned_at(hist: dict, threshold: float = LEARNED) -> int | None:
    """The first evaluated step whose accuracy exceeds `threshold` (None: never)."""
    return next((s for s, a in zip(hist["step"], hist["accuracy"]) if a > threshold), None)


# ============================================================================ the alignment
@torch.no_grad()
def alignment(model, task: CopyTask, src, tgt_in) -> dict:
    """Where the model's attention (averaged over heads) puts its top weight on the words of
    some pairs (<eos> left out), against the position of the word to output:
        offset   mean (top position − right position): positive when attention sits after
                 the right word
        corr     Pearson correlation of the top position with the right one, over every output
                 word: near 1 for a diagonal, shifted or not; near 0 for no order at all
        on_right the share of attention weight on the right position
    and the attention itself (B, K, T, N)."""
    model.eval()
    _, att = model(src, tgt_in)
    model.train()
    right = torch.as_tensor(task.right, device=src.device)[:-1].expand(len(src), -1)  # (B, T-1)
    top = att.mean(1).argmax(-1)[:, :-1]
    weight = att.mean(1)[:, :-1].gather(-1, right[..., None])[..., 0]
    x, y = top.flatten().double(), right.flatten().double()
    corr = float(torch.corrcoef(torch.stack([x, y]))[0, 1]) if x.std() > 0 else float("nan")
    return dict(offset=float((top - right).double().mean()), corr=corr,
                on_right=float(weight.mean()), attention=att)


# ============================================================================ the multi-head study
def with_heads(base: OfficialSeq2Seq, heads: list[AttentionHead]) -> OfficialSeq2Seq:
    """A fresh copy of the base network carrying copies of `heads` (the originals stay as they
    are, so a head can be tried again from its initial values)."""
    model = copy.deepcopy(base)
    model.set_heads([copy.deepcopy(h) for h in heads])
    return model


def head_status(base: OfficialSeq2Seq, head: AttentionHead, task: CopyTask, seeds=(0, 1, 2),
                **train_kw) -> str | None:
    """'good' if the base network with this one head learns with every data seed, 'bad' if every
    run ends below 0.6, None otherwise (multihead.py's `is_good_single_head`; it stops at the
    first seed that disagrees)."""
    status = None
    for seed in seeds:
        hist = train_copy(with_heads(base, [head]), task, seed, stop_above=LEARNED, **train_kw)
        result = "good" if learned(hist) else ("bad" if hist["accuracy"][-1] < BAD else None)
        if result is None or (status is not None and result != status):
            return None
        status = result
    return status


def draw_heads(n: int, hidden: int, generator: torch.Generator,
               device="cpu") -> list[AttentionHead]:
    """n fresh heads with PyTorch's default initialisation, reproducible from `generator`
    (the global torch seed is left as it was)."""
    heads = []
    for _ in range(n):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2 ** 31, (), generator=generator)))
            heads.append(AttentionHead(hidden).to(device))
    return heads


def sample_heads(base: OfficialSeq2Seq, task: CopyTask, n_good: int, n_bad: int,
                 max_candidates: int, seed: int = 0, seeds=(0, 1, 2), progress=None, **train_kw):
    """Rejection sampling: draw heads (PyTorch's default initialisation, seeded) until `n_good`
    good and `n_bad` bad ones are found or `max_candidates` were tried.
    Returns (good heads, bad heads, the status of every candidate in order)."""
    hidden, device = base.embedding.embedding_dim, next(base.parameters()).device
    good, bad, statuses = [], [], []
    generator = torch.Generator().manual_seed(seed)
    for _ in range(max_candidates):
        if len(good) >= n_good and len(bad) >= n_bad:
            break
        (head,) = draw_heads(1, hidden, generator, device)
        status = head_status(base, head, task, seeds, **train_kw)
        statuses.append(status)
        if status == "good" and len(good) < n_good:
            good.append(head)
        elif status == "bad" and len(bad) < n_bad:
            bad.append(head)
        if progress is not None:
            progress(len(good), len(bad), len(statuses))
    return good, bad, statuses


def distinct_combinations(draw, n: int, tries: int = 100) -> list[list[AttentionHead]]:
    """Up to n different head combinations, each drawn by `draw()` (a list of heads). The
    contexts are averaged, so two draws of the same heads in another order are the same model
    and count once; stops after n · tries draws (a small pool has few combinations)."""
    seen, combos = set(), []
    for _ in range(n * tries):
        if len(combos) == n:
            break
        heads = draw()
        key = frozenset(map(id, heads))
        if len(key) == len(heads) and key not in seen:  # no head twice in one model
            seen.add(key)
            combos.append(heads)
    return combos
