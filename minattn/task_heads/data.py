"""Lesson 07's data: Bible verse pairs where shared words cannot tell a paraphrase (each
paraphrase's negative shares as many content words with sentence A as the paraphrase does),
their splits, the lesson's texts (`lesson_texts`), and offline stand-ins (template sentences,
template verses, random token states) for when the datasets or the pretrained encoder are
absent."""

from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np
from scipy import sparse

from ..checks import check_number, check_size, fail
from ..course.data import DatasetMissing, load_parallel, load_sentiment, tokenize
from ..encoder import TokenStates

_STOP = frozenset("that with they them their which shall unto have were from this will your said "
                  "there when upon then also into what these those thou thee thy hath been "
                  "because over even before after like".split())
SPLIT_NAMES = ("train", "val", "test")


def content_words(text: str) -> frozenset:
    """Lower-cased words of more than 3 letters, minus a few very common ones (for overlap)."""
    return frozenset(w for w in tokenize(text) if len(w) > 3 and w.isalpha() and w not in _STOP)


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / max(len(a | b), 1)


class _WordSets:
    """Word sets as rows of a sparse 0/1 matrix over a fixed vocabulary (words outside it are
    counted in the set sizes but can never be shared), for Jaccard overlaps by one product."""

    def __init__(self, sets: list, vocab: dict):
        rows, cols = [], []
        for r, s in enumerate(sets):
            for w in s:
                if w in vocab:
                    rows.append(r), cols.append(vocab[w])
        self.x = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)),
                                   shape=(len(sets), len(vocab)))
        self.sizes = np.array([len(s) for s in sets], float)

    def jaccard(self, other: "_WordSets") -> np.ndarray:
        """(len(self), len(other)) Jaccard overlaps."""
        shared = (self.x @ other.x.T).toarray()
        return shared / np.maximum(self.sizes[:, None] + other.sizes[None, :] - shared, 1)


class BiblePairs(NamedTuple):
    """Sentence pairs over a list of texts (encode `texts` once; pairs index into it).

    Per anchor verse i (its World English Bible wording is sentence A) three sentences B, three
    similarity levels, all in the Bible in Basic English (BBE):
        2  the same verse: a paraphrase that rewords almost everything
        1  the next verse: same passage, other content
        0  a far verse that shares as many content words with A as level 2 does (Jaccard
           within `tolerance`), and is no parallel of verse i: not a paraphrase, and word
           counting cannot tell it from one
    Levels 2 and 0 are the paraphrase task (one positive, one negative per anchor); all three
    the similarity task. Every row of an anchor is in the anchor's split, and no verse appears
    in two anchors' rows, so no sentence is in two splits.
    """
    texts: list  # every sentence, each once
    a: np.ndarray  # (P,) index into texts of sentence A
    b: np.ndarray  # (P,) index of sentence B
    level: np.ndarray  # (P,) 2 / 1 / 0 as above
    split: np.ndarray  # (P,) index into SPLIT_NAMES
    overlap: np.ndarray  # (P,) Jaccard overlap of content words between A and B


def bible_pairs(verses: list, n_anchors: int, rng: np.random.Generator,
                fractions: tuple = (0.6, 0.1, 0.3), min_distance: int = 50,
                tolerance: float = 0.02, parallel: float = 0.25) -> BiblePairs:
    """Build `BiblePairs` from verses [(web, bbe), ...] in Bible order (`load_parallel("web-bbe")`).

    Verse roles are fixed by position, so no verse plays two: anchors at 4k (with their next
    verse 4k + 1), level-0 candidates at 4k + 2. Anchors are visited in random order; each takes
    the unused candidate more than `min_distance` verses away whose overlap with A is closest to
    its paraphrase's, and is dropped when none is within `tolerance`. A candidate j is a
    *parallel* of verse i (the same saying elsewhere: "The word of Yahweh came to me, saying,")
    when the two verses' WEB wordings or their BBE wordings overlap by more than `parallel`;
    parallels are never negatives, and an anchor whose next verse is a parallel is dropped. A
    text that occurs twice in `verses` is used once only, so no pair can be in two splits.
    `fractions`: the shares of anchors in train / val / test.
    """
    n_anchors = check_size("n_anchors", n_anchors)
    min_distance = check_size("min_distance", min_distance)
    tolerance = check_number("tolerance", tolerance, low=0.0, high=1.0)
    parallel = check_number("parallel", parallel, low=0.0, high=1.0)
    fractions = np.asarray(fractions, float)
    if fractions.shape != (3,) or (fractions <= 0).any() or not np.isclose(fractions.sum(), 1):
        fail("fractions", "three positive shares (train, val, test) summing to 1", f"{fractions}")
    n = len(verses)
    if n_anchors < 3 or n_anchors > n // 8:
        fail("bible_pairs: bad number of anchors", f"3 <= n_anchors <= {n // 8} (len(verses) / 8)",
             f"{n_anchors}")
    anchors = rng.permutation(np.arange(0, n - 1, 4))
    others = np.arange(2, n, 4)
    words = {}
    def of(i, side):  # content words of verse i's WEB (0) or BBE (1) wording, computed once
        if (i, side) not in words:
            words[i, side] = content_words(verses[i][side])
        return words[i, side]
    vocab: dict = {}
    for j in others:
        for w in of(j, 0) | of(j, 1):
            vocab.setdefault(w, len(vocab))
    other_web = _WordSets([of(j, 0) for j in others], vocab)
    other_bbe = _WordSets([of(j, 1) for j in others], vocab)
    used = np.zeros(len(others), bool)
    seen = set()  # every text taken so far: a verse repeated word for word is used once only
    chosen = []  # (anchor i, the negative j, its overlap with A)
    for start in range(0, len(anchors), 256):
        chunk = anchors[start:start + 256]
        web, bbe = [of(i, 0) for i in chunk], [of(i, 1) for i in chunk]
        web_sets, bbe_sets = _WordSets(web, vocab), _WordSets(bbe, vocab)
        overlap = web_sets.jaccard(other_bbe)  # A against every candidate
        is_parallel = ((web_sets.jaccard(other_web) > parallel)
                       | (bbe_sets.jaccard(other_bbe) > parallel)
                       | (np.abs(chunk[:, None] - others[None, :]) <= min_distance))
        for k, i in enumerate(chunk):
            own = {verses[i][0], verses[i][1], verses[i + 1][1]}
            if (jaccard(web[k], of(i + 1, 0)) > parallel or jaccard(bbe[k], of(i + 1, 1))
                    > parallel or len(own) < 3 or own & seen):
                continue  # a refrain (the next verse says the same again) or a repeated text
            gap = np.where(is_parallel[k] | used, np.inf,
                           np.abs(overlap[k] - jaccard(web[k], bbe[k])))
            near = np.flatnonzero(gap <= tolerance)
            near = near[np.lexsort((rng.random(len(near)), gap[near]))]  # closest, ties at random
            j = next((j for j in near if verses[others[j]][1] not in seen | own), None)
            if j is None:
                continue
            used[j] = True
            seen.update(own | {verses[others[j]][1]})
            chosen.append((i, others[j], overlap[k, j]))
            if len(chosen) == n_anchors:
                break
        if len(chosen) == n_anchors:
            break
    if len(chosen) < n_anchors:
        fail("bible_pairs: too few anchors with a matched negative",
             f"{n_anchors} (raise tolerance or pass more verses)", f"{len(chosen)}")
    counts = np.floor(fractions * n_anchors).astype(int)
    counts[0] += n_anchors - counts.sum()
    split_of = rng.permutation(np.repeat(np.arange(3), counts))
    texts, a, b, level, split, overlap = [], [], [], [], [], []
    for k, (i, j, neg_overlap) in enumerate(chosen):
        first = len(texts)
        texts += [verses[i][0], verses[i][1], verses[i + 1][1], verses[j][1]]
        for other, lev, ov in ((first + 1, 2, jaccard(of(i, 0), of(i, 1))),
                               (first + 2, 1, jaccard(of(i, 0), of(i + 1, 1))),
                               (first + 3, 0, neg_overlap)):
            a.append(first), b.append(other), level.append(lev), split.append(split_of[k])
            overlap.append(ov)
    return BiblePairs(texts, np.array(a), np.array(b), np.array(level), np.array(split),
                      np.array(overlap, float))


def pair_rows(pairs: BiblePairs, split: str, task: str = "paraphrase") -> np.ndarray:
    """Rows of one split ('train', 'val' or 'test') for a task: 'paraphrase' (levels 2 and 0,
    one positive and one negative per anchor) or 'similarity' (all three levels)."""
    if split not in SPLIT_NAMES or task not in ("paraphrase", "similarity"):
        fail("pair_rows", f"split in {SPLIT_NAMES}, task 'paraphrase' or 'similarity'",
             f"split={split!r}, task={task!r}")
    keep = pairs.split == SPLIT_NAMES.index(split)
    if task == "paraphrase":
        keep &= pairs.level != 1
    return np.flatnonzero(keep)


def random_token_states(texts: list, dim: int, seed: int = 0):
    """Fallback features when the pretrained encoder is absent: each word of the course's
    tokenizer gets a fixed random vector (a hash-seeded N(0, 1/dim)), with a [CLS] vector
    first. Returns an `encoder.TokenStates`. No context, no training: a floor, not an encoder."""
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
