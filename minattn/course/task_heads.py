"""What lesson 07 needs besides the heads (`minattn.task_heads`): its data, the reference lines a
read-out must beat, training until the validation score stops rising, and the analyses.

    data        Bible verse pairs whose negatives are mined so that words cannot decide
                (`bible_pairs`), their splits, the lesson's texts, offline stand-ins
    lexical     what a pair's words alone tell (`LexicalViews`, `LEXICAL_FEATURES`): overlaps,
                character n-gram and word TF-IDF cosines, lengths, shared names
    baselines   `best_threshold` (a score turned into a classifier), `LinearProbe` (logistic or
                ridge regression to convergence), `with_products` (features and their products)
    training    Task, by_length, predict, fit (patience counted after the warm-up),
                finetune (LP-FT's second stage), per_run, mean_std, results_table
    analysis    drop_token, token_picks and drop_effects (what removing one token does),
                attention_entropy_ratio, mean_entropy_ratio
"""

from __future__ import annotations

import re
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple

import numpy as np
import torch
from scipy import sparse

from .. import checks as c
from ..contract import check_number, check_size, checked, fail, hide
from ..task_heads import pearson_loss_torch
from .data import DatasetMissing, load_parallel, load_sentiment, tokenize
from .encoder import TokenStates
from .train import length_batches, warmup_linear

SPLIT_NAMES = ("train", "val", "select", "test")


# ============================================================================ lexical views
_STOP = frozenset("that with they them their which shall unto have were from this will your said "
                  "there when upon then also into what these those thou thee thy hath been "
                  "because over even before after like".split())


def content_words(text: str) -> frozenset:
    """Lower-cased words of more than 3 letters, minus a few very common ones."""
    return frozenset(w for w in tokenize(text) if len(w) > 3 and w.isalpha() and w not in _STOP)


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / max(len(a | b), 1)


def _rows(sets: list, vocab: dict | None = None, weights=None) -> sparse.csr_matrix:
    """Sets (or token lists, counted) as rows of a sparse matrix over a growing vocabulary."""
    vocab = {} if vocab is None else vocab
    rows, cols = [], []
    for r, items in enumerate(sets):
        for item in items:
            rows.append(r)
            cols.append(vocab.setdefault(item, len(vocab)))
    return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sets), len(vocab)))


def _char_ngrams(texts: list, sizes=(3, 4, 5), buckets: int = 2 ** 20) -> sparse.csr_matrix:
    """Counts of every character 3-, 4- and 5-gram of " text " (lower case, spaces collapsed),
    hashed into `buckets` columns (all texts at once: one rolling hash over their bytes)."""
    encoded = [f" {' '.join(t.lower().split())} ".encode() for t in texts]
    lengths = np.array([len(e) for e in encoded])
    b = np.frombuffer(b"".join(encoded), np.uint8).astype(np.int64)
    row = np.repeat(np.arange(len(texts)), lengths)
    rows, cols = [], []
    for n in sizes:
        h = np.zeros(len(b) - n + 1, np.int64)
        for k in range(n):
            h = (h * 1000003 + b[k:len(b) - n + 1 + k]) % 2147483647
        inside = row[:len(h)] == row[n - 1:]  # the n-gram does not cross into the next text
        rows.append(row[:len(h)][inside])
        cols.append((h[inside] + 7919 * n) % buckets)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(texts), buckets))


def _tfidf(counts: sparse.csr_matrix) -> sparse.csr_matrix:
    """Rows weighted by smoothed idf, log((1 + N) / (1 + df)) + 1, and L2-normalised."""
    df = np.asarray((counts > 0).sum(0)).ravel()
    x = counts.multiply(np.log((1 + counts.shape[0]) / (1 + df)) + 1).tocsr()
    norms = np.sqrt(np.asarray(x.multiply(x).sum(1)).ravel())
    return (sparse.diags(1 / np.maximum(norms, 1e-12)) @ x).tocsr()


LEXICAL_FEATURES = ("content-word Jaccard", "all-word Jaccard", "char 3-5-gram TF-IDF cosine",
                    "word TF-IDF cosine", "word-bigram Jaccard", "length of B",
                    "length ratio (abs. log)", "shared content words", "shared words",
                    "capitalised-name Jaccard")


class LexicalViews:
    """What the words of `texts` offer, for comparing any text with any other without an
    encoder: `features(ia, ib)` -> (len(ia), len(ib), 10) `LEXICAL_FEATURES` of every pair
    (text ia[i] as A, text ib[j] as B); `pairs(ia, ib)` -> (P, 10) for pairs (ia[p], ib[p]).
    Words are the course's tokens; TF-IDF weights come from `texts`."""

    def __init__(self, texts: list):
        tokens = [tokenize(t) for t in texts]
        self.sets = {
            "content": _rows([content_words(t) for t in texts]),
            "words": _rows([{w for w in ts if w[0].isalnum()} for ts in tokens]),
            "bigrams": _rows([set(zip(ts, ts[1:])) for ts in tokens]),
            "names": _rows([{w.lower() for w in re.findall(r"[^\W\d_]+", t)[1:] if w[0].isupper()}
                            for t in texts])}
        self.sizes = {k: np.asarray(x.sum(1)).ravel() for k, x in self.sets.items()}
        self.length = np.array([max(len(ts), 1) for ts in tokens], float)
        self.char = _tfidf(_char_ngrams(texts))
        self.word = _tfidf(_rows([[w for w in ts if w[0].isalnum()] for ts in tokens]))

    def _jaccard(self, key, ia, ib):
        x, size = self.sets[key], self.sizes[key]
        shared = (x[ia] @ x[ib].T).toarray()
        return shared / np.maximum(size[ia][:, None] + size[ib][None] - shared, 1), shared

    def each_feature(self, ia, ib):
        """The (len(ia), len(ib)) grid of each of the 10 `LEXICAL_FEATURES` in turn."""
        ia, ib = np.asarray(ia), np.asarray(ib)
        content, shared_content = self._jaccard("content", ia, ib)
        yield content
        words, shared_words = self._jaccard("words", ia, ib)
        yield words
        yield (self.char[ia] @ self.char[ib].T).toarray()
        yield (self.word[ia] @ self.word[ib].T).toarray()
        yield self._jaccard("bigrams", ia, ib)[0]
        yield np.broadcast_to(self.length[ib][None], content.shape)
        yield np.abs(np.log(self.length[ia][:, None] / self.length[ib][None]))
        yield shared_content
        yield shared_words
        yield self._jaccard("names", ia, ib)[0]

    def features(self, ia, ib) -> np.ndarray:
        return np.stack(list(self.each_feature(ia, ib)), -1)

    def score(self, ia, ib, line: tuple) -> np.ndarray:
        """(len(ia), len(ib)) scores x @ w + b of a linear line (w (10,), b) on the features."""
        w, b = line
        out = np.full((len(ia), len(ib)), float(b))
        for weight, feature in zip(w, self.each_feature(ia, ib)):
            out += weight * feature
        return out

    def pairs(self, ia, ib) -> np.ndarray:
        """(P, 10) features of the pairs (ia[p], ib[p])."""
        ia, ib = np.asarray(ia, int), np.asarray(ib, int)

        def dot(x):
            return np.asarray(x[ia].multiply(x[ib]).sum(1)).ravel()

        def jaccard(key):
            shared = dot(self.sets[key])
            size = self.sizes[key]
            return shared / np.maximum(size[ia] + size[ib] - shared, 1), shared

        (content, shared_content), (words, shared_words) = jaccard("content"), jaccard("words")
        return np.stack([content, words, dot(self.char), dot(self.word), jaccard("bigrams")[0],
                         self.length[ib], np.abs(np.log(self.length[ia] / self.length[ib])),
                         shared_content, shared_words, jaccard("names")[0]], -1)


# ============================================================================ reference lines
def with_products(x: np.ndarray) -> np.ndarray:
    """(N, F) features -> (N, F + F(F+1)/2): each feature, then every product of two (squares
    included), so that a linear probe on them is a quadratic model of the features."""
    x = np.asarray(x, float)
    i, j = np.triu_indices(x.shape[1])
    return np.concatenate([x, x[:, i] * x[:, j]], axis=1)


def best_threshold(scores, labels) -> float:
    """The threshold t that classifies `scores > t` as 1 with the highest accuracy on these
    (training) labels: a zero-shot score (e.g. a cosine) turned into a classifier.
    Candidates are the midpoints between consecutive sorted scores (and both ends)."""
    scores, labels = np.asarray(scores, float), np.asarray(labels).astype(bool)
    s = np.sort(scores)
    candidates = np.concatenate([[s[0] - 1], (s[1:] + s[:-1]) / 2, [s[-1] + 1]])
    accuracy = [((scores > t) == labels).mean() for t in candidates]
    return float(candidates[int(np.argmax(accuracy))])


class LinearProbe:
    """A linear read-out of fixed features, trained to convergence: a reference line.

    kind "logistic": P(y = 1) = σ(w · x̂ + b) by L-BFGS on the mean log-loss + l2/2 · |w|²;
    kind "least_squares": ŷ = w · x̂ + b, ridge regression in closed form (same penalty).
    x̂ = features standardised with the training mean and std. Float64 on the inputs' device.
    fit(x (N, F), y (N,)) -> self;  score(x) -> (N,) logit or prediction (float64 tensor).
    """

    def __init__(self, kind: str = "logistic", l2: float = 1e-3, max_iter: int = 500):
        if kind not in ("logistic", "least_squares"):
            fail("kind: unknown LinearProbe kind", "'logistic' or 'least_squares'", repr(kind))
        self.kind, self.l2, self.max_iter = kind, l2, max_iter

    def _standardise(self, x) -> torch.Tensor:
        return (torch.as_tensor(x).to(self.mu.device).double() - self.mu) / self.sd

    def fit(self, x, y) -> "LinearProbe":
        x, y = torch.as_tensor(x).double(), torch.as_tensor(y)
        self.mu, self.sd = x.mean(0), x.std(0).clamp_min(1e-8)
        xs, y = self._standardise(x), y.to(x.device).double()
        n, f = xs.shape
        if self.kind == "least_squares":  # [w; b] = (X̃ᵀX̃ + n·l2·I')⁻¹ X̃ᵀ y, b free
            xa = torch.cat([xs, torch.ones(n, 1, dtype=xs.dtype, device=xs.device)], dim=1)
            penalty = torch.eye(f + 1, dtype=xs.dtype, device=xs.device) * n * self.l2
            penalty[-1, -1] = 0
            wb = torch.linalg.solve(xa.T @ xa + penalty, xa.T @ y)
            self.w, self.b = wb[:-1], wb[-1]
            return self
        w = torch.zeros(f, dtype=xs.dtype, device=xs.device, requires_grad=True)
        b = torch.zeros((), dtype=xs.dtype, device=xs.device, requires_grad=True)
        opt = torch.optim.LBFGS([w, b], lr=1, max_iter=self.max_iter, tolerance_grad=1e-9,
                                tolerance_change=1e-12, history_size=20,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(xs @ w + b, y) \
                + 0.5 * self.l2 * (w * w).sum()
            loss.backward()
            return loss

        opt.step(closure)
        self.w, self.b = w.detach(), b.detach()
        return self

    def score(self, x) -> torch.Tensor:
        return self._standardise(x) @ self.w + self.b

    def as_line(self) -> tuple[np.ndarray, float]:
        """(w, b) on the raw features: score(x) = x @ w + b (NumPy float64)."""
        w = (self.w / self.sd).cpu().numpy()
        return w, float(self.b - (self.mu / self.sd) @ self.w)


def select_probe(kind: str, l2_grid, fit_xy, val_xy, score: Callable, max_iter: int = 500
                 ) -> LinearProbe:
    """The probe of `l2_grid` whose score on the validation rows is best."""
    probes = [LinearProbe(kind, l2, max_iter).fit(*fit_xy) for l2 in l2_grid]
    return max(probes, key=lambda p: score(p.score(val_xy[0]), val_xy[1]))


# ============================================================================ data
class BiblePairs(NamedTuple):
    """Sentence pairs over a list of texts (encode `texts` once; pairs index into it).

    Per anchor verse i (its World English Bible wording is sentence A) three sentences B, three
    similarity levels, all in the Bible in Basic English (BBE):
        2  the same verse: a paraphrase that rewords almost everything
        1  the next verse: same passage, other content
        0  a far verse that is no parallel of verse i and whose lexical score (logistic
           regression on `LEXICAL_FEATURES`) lies within `tolerance` logits of level 2's,
           chosen so that the signed gaps stay centred on 0: not a paraphrase, and the
           scorer rates it above the paraphrase about as often as below
    Levels 2 and 0 are the paraphrase task (one positive, one negative per anchor); all three
    the similarity task. Every row of an anchor is in the anchor's split, and no verse appears
    in two anchors' rows, so no sentence is in two splits.
    """
    texts: list  # every sentence, each once
    a: np.ndarray  # (P,) index into texts of sentence A
    b: np.ndarray  # (P,) index of sentence B
    level: np.ndarray  # (P,) 2 / 1 / 0 as above
    split: np.ndarray  # (P,) index into SPLIT_NAMES
    gap: np.ndarray  # (P,) scorer(A, negative) - scorer(A, paraphrase) of the row's anchor
    scorer: tuple  # (w (10,), b): the lexical scorer the negatives were matched on


def bible_pairs(verses: list, n_anchors: int, rng: np.random.Generator,
                fractions: tuple = (0.6, 0.1, 0.1, 0.2), min_distance: int = 50,
                tolerance: float = 3.0, parallel: float = 0.25, centre: float = 0.1,
                n_scorer: int = 500, chunk: int = 128) -> BiblePairs:
    """`BiblePairs` from verses [(web, bbe), ...] in Bible order (`load_parallel("web-bbe")`):
    `n_anchors` anchors, their splits drawn with the shares `fractions` (train, val, select,
    test). A negative is more than `min_distance` verses away, within `tolerance` logits of the
    paraphrase's lexical score, and no *parallel*: a verse sharing more than `parallel` of the
    anchor's content words (Jaccard) in WEB or in BBE, the same saying elsewhere ("The word of
    Yahweh came to me, saying,"). Of the candidates within the tolerance each anchor takes the
    one that brings the sum of the signed gaps chosen so far closest to 0, and an anchor whose
    best candidate would leave their mean beyond ±`centre` logits (their sum beyond
    ±`tolerance` while few are chosen) is skipped: the closest match alone mostly falls below
    the paraphrase (few far verses share as many words), and "the positive scores higher"
    would then tell the pairs apart."""
    tolerance = check_number("tolerance", tolerance, low=0.0)
    centre = check_number("centre", centre, low=0.0)
    fractions = np.asarray(fractions, float)
    if fractions.shape != (len(SPLIT_NAMES),) or not np.isclose(fractions.sum(), 1):
        fail("fractions", f"{len(SPLIT_NAMES)} shares ({', '.join(SPLIT_NAMES)}) summing to 1",
             f"{fractions}")
    # roles by position, so no verse plays two: anchor 4k (its next verse 4k + 1), candidate
    # negatives 4k + 2 and 4k + 3; anchors visited in random order
    anchors = rng.permutation(np.arange(0, len(verses) - 1, 4))
    others = np.sort(np.concatenate([np.arange(2, len(verses), 4), np.arange(3, len(verses), 4)]))
    A, C = len(anchors), len(others)
    # texts 0..C-1: the candidates' BBE; C..C+A-1: the anchors' WEB; then the anchors' BBE
    views = LexicalViews([verses[j][1] for j in others] + [verses[i][0] for i in anchors]
                         + [verses[i][1] for i in anchors])
    web, bbe = C + np.arange(A), C + A + np.arange(A)
    # the lexical scorer: logistic regression, paraphrases against random far verses
    fit_rows = np.arange(min(n_scorer, A))
    far = rng.integers(0, C, len(fit_rows))
    x = np.concatenate([views.pairs(web[fit_rows], bbe[fit_rows]), views.pairs(web[fit_rows], far)])
    y = np.r_[np.ones(len(fit_rows)), np.zeros(len(fit_rows))]
    scorer = LinearProbe("logistic", 1e-2).fit(torch.from_numpy(x), torch.from_numpy(y)).as_line()
    positive = views.pairs(web, bbe) @ scorer[0] + scorer[1]  # (A,) each paraphrase's score
    is_parallel = _parallels(verses, anchors, others, parallel)
    used, seen, chosen = np.zeros(C, bool), set(), []  # chosen: (anchor, negative, signed gap)
    balance = 0.0  # the sum of the signed gaps chosen so far
    for start in range(0, A, chunk):  # anchors `chunk` at a time, against every candidate
        rows = np.arange(start, min(start + chunk, A))
        gaps = views.score(web[rows], np.arange(C), scorer) - positive[rows][:, None]
        gaps[is_parallel(rows) | (np.abs(anchors[rows][:, None] - others) <= min_distance)] = np.inf
        for k, r in enumerate(rows):
            i = anchors[r]
            own = {verses[i][0], verses[i][1], verses[i + 1][1]}
            if any(jaccard(content_words(x), content_words(y)) > parallel
                   for x, y in zip(verses[i], verses[i + 1])) or len(own) < 3 or own & seen:
                continue  # the next verse says the same again (a refrain), or a text is used
            gap = np.where(used, np.inf, gaps[k])
            near = np.flatnonzero(np.abs(gap) <= tolerance)
            # the candidate that keeps the running sum nearest 0 first, ties at random
            near = near[np.lexsort((rng.random(len(near)), np.abs(balance + gap[near])))]
            j = next((j for j in near if verses[others[j]][1] not in seen | own), None)
            if j is not None and abs(balance + gap[j]) <= max(tolerance,
                                                              centre * (len(chosen) + 1)):
                used[j] = True
                balance += gap[j]
                seen.update(own | {verses[others[j]][1]})
                chosen.append((i, others[j], gap[j]))
            if len(chosen) == n_anchors:
                break
        if len(chosen) == n_anchors:
            break
    if len(chosen) < n_anchors:
        fail("n_anchors: too few anchors with a matched negative",
             f"{n_anchors} (raise tolerance or pass more verses)", f"{len(chosen)}")
    counts = np.floor(fractions * n_anchors).astype(int)
    counts[0] += n_anchors - counts.sum()
    split_of = rng.permutation(np.repeat(np.arange(len(SPLIT_NAMES)), counts))
    texts, a, b, level, split, gap = [], [], [], [], [], []
    for k, (i, j, g) in enumerate(chosen):  # A, then B: its paraphrase, next verse, negative
        first = len(texts)
        texts += [verses[i][0], verses[i][1], verses[i + 1][1], verses[j][1]]
        for other, lev in ((first + 1, 2), (first + 2, 1), (first + 3, 0)):
            a.append(first), b.append(other), level.append(lev), split.append(split_of[k])
            gap.append(g)
    return BiblePairs(texts, np.array(a), np.array(b), np.array(level), np.array(split),
                      np.array(gap, float), scorer)


def _parallels(verses: list, anchors: np.ndarray, others: np.ndarray, parallel: float):
    """rows -> (len(rows), len(others)) bool: candidate j shares more than `parallel` of the
    content words of anchor anchors[row] (Jaccard), in their WEB or their BBE wordings."""
    vocab: dict = {}
    content = {(who, side): _rows([content_words(verses[i][side]) for i in where], vocab)
               for who, where in (("anchor", anchors), ("other", others)) for side in (0, 1)}
    content = {k: sparse.csr_matrix((x.data, x.indices, x.indptr), shape=(x.shape[0], len(vocab)))
               for k, x in content.items()}
    sizes = {k: np.asarray(x.sum(1)).ravel() for k, x in content.items()}

    def of(rows):
        out = np.zeros((len(rows), len(others)), bool)
        for side in (0, 1):  # WEB against WEB, BBE against BBE
            shared = (content["anchor", side][rows] @ content["other", side].T).toarray()
            union = sizes["anchor", side][rows][:, None] + sizes["other", side][None] - shared
            out |= shared / np.maximum(union, 1) > parallel
        return out
    return of



def pair_rows(pairs: BiblePairs, split: str, task: str = "paraphrase") -> np.ndarray:
    """Rows of one split (one of SPLIT_NAMES) for a task: 'paraphrase' (levels 2 and 0, one
    positive and one negative per anchor) or 'similarity' (all three levels)."""
    keep = pairs.split == SPLIT_NAMES.index(split)
    if task == "paraphrase":
        keep &= pairs.level != 1
    return np.flatnonzero(keep)


def random_token_states(texts: list, dim: int, seed: int = 0) -> TokenStates:
    """Fallback features when the pretrained encoder is absent: each word of the course's
    tokenizer gets a fixed random vector (a hash-seeded N(0, 1/dim)), with a [CLS] vector
    first. No context, no training: a floor, not an encoder."""
    dim = check_size("dim", dim, 1)
    chunks, ids = [], []
    for text in texts:
        words = ["[CLS]"] + tokenize(text)[:126] + ["[SEP]"]
        keys = [zlib.crc32(w.encode()) ^ seed for w in words]
        rows = [np.random.default_rng(k).standard_normal(dim) / np.sqrt(dim) for k in keys]
        chunks.append(np.stack(rows).astype(np.float16))
        ids.append(np.array(keys, dtype=np.int64) % (2 ** 31))
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in chunks])]).astype(np.int64)
    return TokenStates(np.concatenate(chunks), offsets, np.concatenate(ids).astype(np.int32))


POSITIVE_WORDS = "good great moving funny brilliant charming warm sharp delightful clever".split()
NEGATIVE_WORDS = "bad dull boring flat tired clumsy weak silly lifeless messy".split()
_NOUNS = "film plot cast script story ending score movie acting direction".split()


def template_sentiment(n: int, rng: np.random.Generator) -> tuple[list, np.ndarray]:
    """Offline stand-in for the Rotten Tomatoes sentences: "the plot is warm and the score is
    clever , but the cast is dull ." Label 1 when two of the three adjectives are positive."""
    n = check_size("n", n)
    texts, labels = [], rng.integers(0, 2, n)
    for label in labels:
        own, other = (POSITIVE_WORDS, NEGATIVE_WORDS) if label else (NEGATIVE_WORDS, POSITIVE_WORDS)
        a, b, c = rng.choice(own), rng.choice(own), rng.choice(other)
        n1, n2, n3 = rng.choice(_NOUNS, 3, replace=False)
        texts.append(f"the {n1} is {a} and the {n2} is {b} , but the {n3} is {c} .")
    return texts, labels.astype(np.int64)


def template_verses(n: int, rng: np.random.Generator, n_topics: int = 40) -> list:
    """Offline stand-in for the Bible pairs [(a, b), ...] in "Bible order": passages of 10
    verses draw their words from one topic (so neighbours share words), and b rewords a with
    synonyms (word wK -> its synonym sK, 70% of the time) and a local swap."""
    n, n_topics = check_size("n", n), check_size("n_topics", n_topics, 1)

    def word(prefix, k):  # letters only (digits 0-9 -> a-j), so overlap counts them: "wbcd"
        return prefix + "".join(chr(97 + int(d)) for d in f"{k:03d}")

    topics = [rng.choice(400, 25, replace=False) for _ in range(n_topics)]
    verses = []
    for i in range(n):
        words = rng.choice(topics[(i // 10) % n_topics], 8, replace=False)
        a = [word("w", k) for k in words]
        b = [word("s", k) if rng.random() < 0.7 else word("w", k) for k in words]
        j = rng.integers(0, len(b) - 1)
        b[j], b[j + 1] = b[j + 1], b[j]
        verses.append((" ".join(a) + " .", " ".join(b) + " ."))
    return verses


def lesson_texts(n_train: int, n_test: int, n_fallback_verses: int, seed: int = 0):
    """Lesson 07's texts: (sentences, labels, verses, fallback).

    sentences: `n_train` Rotten Tomatoes training sentences then `n_test` test ones, a seeded
    random subset of each split (the files are sorted by sentiment), labels their 0/1
    sentiment; verses: the WEB-BBE verse pairs. What is missing is replaced by template
    sentences or `n_fallback_verses` template verse pairs, and named in `fallback` (a list of
    notes, empty with the real data)."""
    fallback = []
    try:
        parts = [(load_sentiment(split), n) for split, n in (("train", n_train), ("test", n_test))]
        picks = [np.sort(np.random.default_rng(seed).choice(len(s.texts), n, replace=False))
                 for s, n in parts]
        sentences = [s.texts[i] for (s, _), pick in zip(parts, picks) for i in pick]
        labels = np.concatenate([s.labels[pick] for (s, _), pick in zip(parts, picks)])
    except DatasetMissing as err:
        print(f"{err}\nFALLBACK: template sentences instead of Rotten Tomatoes.")
        sentences, labels = template_sentiment(n_train + n_test, np.random.default_rng(seed))
        fallback.append("template sentences")
    try:
        verses = load_parallel("web-bbe")
    except DatasetMissing as err:
        print(f"{err}\nFALLBACK: synthetic verse pairs (synonyms) instead of the Bible.")
        verses = template_verses(n_fallback_verses, np.random.default_rng(seed))
        fallback.append("synthetic verses")
    return sentences, labels, verses, fallback


# ============================================================================ training
@dataclass(frozen=True)
class Task:
    """A task's data, by row index: `splits` {name: rows} with at least "train", "val" and
    "test" (np arrays); `lengths` (N,) tokens per row (for batches of similar length);
    `targets` (N,) tensor; `kind` "classify" (logits (B, C) or (B,) -> accuracy) or
    "correlate" (scores -> Pearson r); `loss` (pred, target) -> scalar."""

    splits: dict
    lengths: np.ndarray
    targets: torch.Tensor
    kind: str
    loss: Callable

    def decide(self, pred: torch.Tensor) -> torch.Tensor:
        return pred.argmax(-1) if pred.ndim == 2 else (pred > 0).long()

    def score(self, pred: torch.Tensor, rows) -> float:
        """Accuracy, or Pearson r for a correlate task, of predictions `pred` on `rows`."""
        y = self.targets[rows]
        if self.kind == "correlate":
            return -pearson_loss_torch(pred.double(), y.double()).item()
        return (self.decide(pred) == y.long()).double().mean().item()

    def items(self, pred: torch.Tensor, rows) -> list | None:
        """Per row 1.0 where the decision is right (None for a correlation: no mean over rows)."""
        if self.kind == "correlate":
            return None
        return (self.decide(pred) == self.targets[rows].long()).double().cpu().tolist()

    def selecting_on(self, split: str) -> "Task":
        """The same task with `split`'s rows as its validation rows (for model selection)."""
        return Task({**self.splits, "val": self.splits[split]}, self.lengths, self.targets,
                    self.kind, self.loss)


def by_length(rows, lengths, chunk: int = 64) -> list:
    """Positions in `rows`, sorted by their texts' lengths and cut into chunks of `chunk`: little
    padding in each batch."""
    chunk = check_size("chunk", chunk, 1)
    order = np.argsort(np.asarray(lengths)[rows], kind="stable")
    return [order[i:i + chunk] for i in range(0, len(order), chunk)]


def predict(forward: Callable, inputs: Callable, rows, lengths, chunk: int = 64) -> torch.Tensor:
    """forward(*inputs(rows)) in chunks of similar length, returned in the order of `rows`."""
    chunks = by_length(rows, lengths, chunk)
    out = torch.cat([forward(*inputs(rows[part])) for part in chunks])
    return out[torch.as_tensor(np.argsort(np.concatenate(chunks)), device=out.device)]


def fit(model: torch.nn.Module, task: Task, inputs: Callable, forward: Callable, seed: int,
        batch_size: int, epochs: float, checks: int = 2, patience: int = 3,
        optimizer: torch.optim.Optimizer | None = None, schedule: Callable | None = None,
        warmup: int = 0, check_start: bool = False, clock: Callable = time.process_time) -> dict:
    """Train `model` on the task's training rows until its validation score stops rising; test
    the best weights. inputs(rows) -> the model's inputs; forward(model, *inputs) -> predictions.
    At most `epochs` of batches of similar length; validation `checks` times per epoch; stop
    after `patience` checks in a row without a better score, counting only checks after step
    `warmup`; with `check_start` the starting weights are checked too (step 0) and kept when
    no later check beats them. AdamW at 1e-3 unless an `optimizer` (and `schedule`) is given.
    Returns test, items (per test row), train (the best weights' score on the training rows),
    val (the best validation score), curve [(step, val)], best_step, steps, stopped (by
    patience, before the cap), per_epoch, seconds (of training steps, validation apart) and
    the model."""
    rows, val = task.splits["train"], task.splits["val"]
    per_epoch = int(np.ceil(len(rows) / batch_size))
    generator = torch.Generator().manual_seed(seed)  # the same batches for every model of a seed
    batches = [rows[b.numpy()] for _ in range(int(np.ceil(epochs)))
               for b in length_batches(torch.as_tensor(task.lengths[rows]), batch_size, generator)]
    batches = batches[:max(1, int(epochs * per_epoch))]
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    base_lrs = [group["lr"] for group in optimizer.param_groups]
    run = dict(curve=[], val=-np.inf, best_step=0, misses=0, seconds=0.0, per_epoch=per_epoch)

    def predictions(rows):
        model.eval()
        with torch.no_grad():
            return predict(lambda *x: forward(model, *x), inputs, rows, task.lengths)

    def check(step):  # validate; keep the best weights; count checks without one after warm-up
        score = task.score(predictions(val), val)
        run["curve"].append((step, score))
        if score > run["val"]:
            run.update(val=score, best_step=step, misses=0,
                       best={k: v.detach().clone() for k, v in model.state_dict().items()})
        elif step > warmup:
            run["misses"] += 1

    if check_start:  # the starting weights compete too: a run may find none better
        check(0)
    every, step = max(1, per_epoch // checks), 0
    while step < len(batches) and run["misses"] < patience:
        step, batch, t = step + 1, batches[step], clock()
        model.train()
        if schedule is not None:  # warm-up and decay: a factor on every group's rate
            for group, lr in zip(optimizer.param_groups, base_lrs):
                group["lr"] = lr * schedule(step)
        loss = task.loss(forward(model, *inputs(batch)), task.targets[batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        run["seconds"] += clock() - t
        if step % every == 0 or step == len(batches):
            check(step)
    if "best" in run:  # the best weights back (none when every check was NaN)
        model.load_state_dict(run.pop("best"))
    pred = predictions(task.splits["test"])
    return dict(run, test=task.score(pred, task.splits["test"]), steps=step, model=model,
                train=task.score(predictions(rows), rows),
                items=task.items(pred, task.splits["test"]), stopped=step < len(batches))


def finetune(model: torch.nn.Module, readout: torch.nn.Module, task: Task, inputs: Callable,
             forward: Callable, seed: int, batch_size: int, epochs: float, encoder_lr: float,
             head_lr: float, checks: int = 3, patience: int = 3, **kw) -> dict:
    """Stage 2 of LP-FT: `model` (`readout` over trainable top layers `model.encoder`) starts
    from stage 1's `readout` and trains with its encoder until the validation score stops rising
    (`fit`, the stage-1 weights validated first: give it validation rows stage 1 never selected
    on, `Task.selecting_on`). Returns fit's dict."""
    loaded = model.load_state_dict(readout.state_dict(), strict=False)  # all but the encoder
    if loaded.unexpected_keys or any(not k.startswith("encoder.") for k in loaded.missing_keys):
        fail("readout: finetune's stage-1 read-out does not match the model",
             "the same read-out, with model.encoder the only new part",
             f"missing {loaded.missing_keys[:3]}, unexpected {loaded.unexpected_keys[:3]}")
    rest = [p for name, p in model.named_parameters() if not name.startswith("encoder.")]
    optimizer = torch.optim.AdamW([{"params": list(model.encoder.parameters()), "lr": encoder_lr},
                                   {"params": rest, "lr": head_lr}], weight_decay=0.01)
    steps = max(1, int(epochs * np.ceil(len(task.splits["train"]) / batch_size)))
    warmup = max(1, steps // 10)  # linear warm-up over 10 % of the cap, then linear decay
    return fit(model, task, inputs, forward, seed, batch_size, epochs, checks, patience,
               optimizer, warmup_linear(warmup, steps), warmup, check_start=True, **kw)


def per_run(results: dict, task: str, arm: str, key: str = "test") -> list:
    """results[(task, arm, seed)][key], one value per seed, in the order the runs were made."""
    return [r[key] for (t, a, _), r in results.items() if (t, a) == (task, arm)]


def mean_std(values) -> str:
    """'mean ± std' over runs to 3 decimals; '-' when there is none."""
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}" if len(values) else "-"


def results_rows(results: dict, task: str, arms, lines: dict) -> list[dict]:
    """One row per arm of `task` in `results` {(task, arm, seed): fit's dict}: test score (mean
    ± std over seeds), the score on the training rows (mean), runs stopped by patience (the
    others hit the cap), epochs to the best validation score, CPU seconds of training per run,
    and the distance to each reference line {name: score}."""
    rows = []
    for arm in arms:
        runs = [r for (t, a, _), r in results.items() if (t, a) == (task, arm)]
        score = np.mean([r["test"] for r in runs])
        epochs = [r["best_step"] / r["per_epoch"] for r in runs]
        rows.append({"task": task, "read-out": arm,
                     "test (mean ± std)": mean_std([r["test"] for r in runs]),
                     "train (mean)": f"{np.mean([r['train'] for r in runs]):.3f}",
                     "stopped early": f"{sum(r['stopped'] for r in runs)} of {len(runs)}",
                     "best epoch": f"{np.mean(epochs):.1f}",
                     "s/run": f"{np.mean([r['seconds'] for r in runs]):.0f}",
                     **{f"vs {k}": f"{score - v:+.3f}" for k, v in lines.items()}})
    return rows


# ============================================================================ analysis
@checked(states="float (B, L, D) where mask", mask="bool (B, L)",
         rules=[c.right_padded, c.one_later_token_each], library=torch.Tensor)
def drop_token(states: torch.Tensor, mask: torch.Tensor, index
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Remove token `index[b]` from sentence b (an intervention: does the prediction move
    without it?). states (B, L, D), mask (B, L) right-padded, index (B,) of real tokens other
    than the first -> states (B, L − 1, D), mask (B, L − 1), still right-padded."""
    index = torch.as_tensor(index, device=states.device).reshape(-1)
    positions = torch.arange(states.shape[1], device=states.device)
    keep = positions[None, :] != index[:, None]  # (B, L): exactly one False per row
    return (states[keep].view(len(states), -1, states.shape[2]),
            mask[keep].view(len(states), -1))


@checked(x="float (B, L, D) where mask", mask="bool (B, L)", weights="float (B, L) where mask",
         rules=[c.right_padded, c.three_real_tokens_each, c.token_scores], library=torch.Tensor)
def token_picks(x: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor,
                rarity: torch.Tensor, generator: torch.Generator) -> dict:
    """The token each rule would remove from each sentence (never the first, [CLS]):
        top       the head's largest weight (weights (B, L))
        random    a random other real token
        rarest    the largest `rarity` (B, L) (e.g. −log of the token's corpus frequency)
        farthest  the state farthest (Euclidean) from the sentence's mean state
    The last two need no head: rules a head's choice should beat."""
    n = mask.sum(1)
    other = mask.clone()
    other[:, 0] = False

    def argmax(score):
        return score.double().masked_fill(~other, -float("inf")).argmax(1)

    top = argmax(weights)
    rand = (torch.rand(len(n), generator=generator).to(x.device) * (n - 2)).long() + 1
    rand = rand + (rand >= top).long()  # 1 .. n-1 without the top token
    mean = torch.where(mask[..., None], x, 0.0).sum(1) / n[:, None]  # padding may hold NaN
    return {"top": top, "random": rand, "rarest": argmax(rarity),
            "farthest": argmax((x - mean[:, None]).norm(dim=-1))}


def drop_effects(chunks: Iterable) -> dict:
    """What removing one token does, per item. chunks: (x (B, L, D), mask (B, L), weights
    (B, L) of the head, picks {rule: (B,) index} (`token_picks`), {name: prob(x, mask)}) per
    batch, prob giving each model's probability with x's tokens changed and the rest kept.
    Returns {(name, rule): (N,) |Δp|} and {("weight", rule): (N,) a/(1 − a)} of the removed
    token's head weight a: the factor by which a read-out z = Σ a_i v_i moves,
    |Δz| = a/(1 − a)·|v − z|, whatever the token means."""
    out: dict = {}
    for x, mask, weights, picks, probs in chunks:
        before = {name: prob(x, mask) for name, prob in probs.items()}
        for rule, index in picks.items():
            a = weights.gather(1, index[:, None])[:, 0]
            out.setdefault(("weight", rule), []).append((a / (1 - a)).cpu())
            for name, prob in probs.items():
                change = (prob(*drop_token(x, mask, index)) - before[name]).abs()
                out.setdefault((name, rule), []).append(change.cpu())
    return {key: torch.cat(values).numpy() for key, values in out.items()}


@checked(weights="float* (B, H, L)", mask="bool (B, L)", rules=[c.real_token_weights],
         library=torch.Tensor)
def attention_entropy_ratio(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy of each read-out row / log(number of real tokens): weights (B, H, L), mask (B, L)
    -> (B, H) in [0, 1]: 1 = uniform (mean pooling), 0 = one token. Sentences of one token
    have no choice to make and count as 1."""
    weights = hide(weights, mask[:, None, :])  # what the mask hides may hold anything
    plogp = torch.where(weights > 0, weights * torch.log(weights.clamp_min(1e-30)),
                        torch.zeros_like(weights))
    n = mask.sum(dim=1).to(weights.dtype)[:, None]  # (B, 1)
    return torch.where(n > 1, -plogp.sum(dim=-1) / torch.log(n.clamp_min(2)), torch.ones_like(n))


def mean_entropy_ratio(weights: torch.Tensor, mask: torch.Tensor) -> float:
    """`attention_entropy_ratio` averaged over sentences and heads, as a Python float (on the
    host, whatever device the weights are on)."""
    return float(attention_entropy_ratio(weights, mask).mean().item())
