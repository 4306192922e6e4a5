"""Training copy models the way the authors' code does, and their multi-head study (lesson 05).

Snell et al., "Approximating How Single Head Attention Learns" (2021), §3.3 and §5.2, with
their `SequenceCopying/seq2seq.py` and `multihead.py` (github.com/Sea-Snell/AttentionDynamics):

    data       fresh pairs every step (`copy_ids`: x + <eos>, target <sos> + x + <eos>)
    optimiser  Adam, learning rate 1e-3, batch 128, no gradient clipping, 200 steps
    evaluated  token accuracy (every output token, <eos> included) every 10 steps
    learned    token accuracy above 0.95 at an evaluation (`multihead.py`'s `can_learn`)

The multi-head study keeps ONE base network (embedding, LSTMs, output network) and tries
attention heads on it. A candidate head is trained alone on the base network with three data
seeds: it is *good* if all three runs learn within the budget, *bad* if all three end below
0.6, and thrown away otherwise (rejection sampling). Heads are then combined, K at a time.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from ..checks import fail
from .data import copy_ids
from .official import AttentionHead, OfficialSeq2Seq

LEARNED, BAD = 0.95, 0.6  # multihead.py: good if accuracy > 0.95 within the budget, bad if < 0.6


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
        src, tgt, vocab = copy_ids(n, self.n_types, self.n_words, rng, self.n_sets,
                                         self.order)
        assert vocab == self.vocab
        src, tgt = (torch.as_tensor(a, device=device) for a in (src, tgt))
        return src, tgt[:, :-1], tgt[:, 1:]

    def __repr__(self) -> str:
        return self.name


def copy_loss(model, src, tgt_in, tgt_out):
    """Mean cross-entropy over every output token (their NLLLoss on log-softmax)."""
    logits, _ = model(src, tgt_in)
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())


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
               stop_above: float | None = None, track: int = 0) -> dict:
    """Train `model` on `task` with Adam (no clipping), a fresh batch every step; `seed` fixes
    the batches (the model's initialisation is the caller's).

    Evaluates before training and every `eval_every` steps: on `eval_set` (src, tgt_in, tgt_out)
    if given (multihead.py's fixed validation set), else on `eval_pairs` fresh pairs (seq2seq.py).
    stop_above: stop at the first evaluation whose accuracy exceeds it (the run has learned).
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
        return stop_above is not None and hist["accuracy"][-1] > stop_above

    if evaluate(0):
        return hist
    model.train()
    for step in range(1, steps + 1):
        loss = copy_loss(model, *task.sample(batch, data_rng, device))
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


def still_climbing(hist: dict, window: int = 100, margin: float = 0.05) -> bool:
    """A run that has not learned is still climbing when its last accuracy beats the best
    accuracy of the evaluations more than `window` steps earlier by more than `margin`: its
    budget ended too soon to call it a failure. (On 50 pairs of 41 tokens an accuracy near
    the no-attention ceiling varies by about 0.007 between evaluations.)"""
    if learned(hist):
        return False
    last = hist["step"][-1]
    before = [a for s, a in zip(hist["step"], hist["accuracy"]) if s <= last - window]
    return bool(before) and hist["accuracy"][-1] > max(before) + margin


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

