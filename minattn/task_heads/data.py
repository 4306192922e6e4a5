"""Lesson 07's data: Bible verse pairs (paraphrase and similarity labels from word overlap),
their splits, and offline stand-ins (template sentences, template verses, random token
states) for when the datasets or the pretrained encoder are absent."""

from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np

from ..encoder import TokenStates
from ..tools.data import tokenize
from ..tools.utils import check_number, check_size, fail

_STOP = frozenset("that with they them their which shall unto have were from this will your said "
                  "there when upon then also into what these those thou thee thy hath been "
                  "because over even before after like".split())


def content_words(text: str) -> frozenset:
    """Lower-cased words of more than 3 letters, minus a few very common ones (for overlap)."""
    return frozenset(w for w in tokenize(text) if len(w) > 3 and w.isalpha() and w not in _STOP)


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / max(len(a | b), 1)


class BiblePairs(NamedTuple):
    """Sentence pairs over a list of texts (encode `texts` once; pairs index into it).

    Per anchor verse i (WEB wording as sentence A) three sentences B, three similarity levels:
        2  the same verse in the Bible in Basic English        (same meaning, reworded)
        1  the next verse, BBE                                  (same passage, other content)
        0  the BBE verse of another anchor, far away, sharing the most content words with A
           (lexically close, unrelated meaning: a word-counting model ranks it too high)
    """
    texts: list  # every sentence, each once
    a: np.ndarray  # (P,) index into texts of sentence A
    b: np.ndarray  # (P,) index of sentence B
    level: np.ndarray  # (P,) 2 / 1 / 0 as above
    train: np.ndarray  # (P,) bool: the anchor is in the training split
    overlap: np.ndarray  # (P,) Jaccard overlap of content words between A and B


def bible_pairs(verses: list, n_anchors: int, rng: np.random.Generator,
                test_fraction: float = 0.2, min_distance: int = 50) -> BiblePairs:
    """Build `BiblePairs` from verses [(web, bbe), ...] in Bible order (`load_parallel("web-bbe")`).

    Anchors are even verse indices (so an anchor's next verse is never another anchor),
    split at random into train / test; the overlap verse of an anchor comes from the same
    split and lies more than `min_distance` verses away.
    """
    test_fraction = check_number("test_fraction", test_fraction, low=0.0, high=1.0)
    n_anchors = check_size("n_anchors", n_anchors)
    min_distance = check_size("min_distance", min_distance)
    n = len(verses)
    if n_anchors < 4 or 2 * n_anchors > n - 1:
        fail("bible_pairs: bad number of anchors", f"4 <= n_anchors <= {(n - 1) // 2}",
             f"{n_anchors}")
    anchors = np.sort(rng.choice(np.arange(0, n - 1, 2), n_anchors, replace=False))
    is_train = np.zeros(n_anchors, bool)
    is_train[rng.permutation(n_anchors)[:int(round((1 - test_fraction) * n_anchors))]] = True
    texts, web, bbe, nxt = [], {}, {}, {}
    for k, i in enumerate(anchors):
        web[k], bbe[k], nxt[k] = len(texts), len(texts) + 1, len(texts) + 2
        texts += [verses[i][0], verses[i][1], verses[i + 1][1]]
    words = [content_words(t) for t in texts]
    a, b, level, train, overlap = [], [], [], [], []
    for k, i in enumerate(anchors):
        far = [j for j in range(n_anchors) if is_train[j] == is_train[k]
               and abs(int(anchors[j]) - int(i)) > min_distance]
        best = max(far, key=lambda j: jaccard(words[web[k]], words[bbe[j]]))
        for other, lev in ((bbe[k], 2), (nxt[k], 1), (bbe[best], 0)):
            a.append(web[k]), b.append(other), level.append(lev), train.append(is_train[k])
            overlap.append(jaccard(words[web[k]], words[other]))
    return BiblePairs(texts, np.array(a), np.array(b), np.array(level), np.array(train),
                      np.array(overlap))


def paraphrase_subset(pairs: BiblePairs, train: bool) -> np.ndarray:
    """Indices of a balanced paraphrase set: every anchor's level-2 pair (label 1) and one
    negative, alternately its next verse and its word-overlap verse (label 0)."""
    anchor_rows = np.flatnonzero((pairs.level == 2) & (pairs.train == train))
    negatives = [row + 1 + (k % 2) for k, row in enumerate(anchor_rows)]  # rows are 2, 1, 0
    return np.sort(np.concatenate([anchor_rows, negatives]))


def split_by_anchor(pairs: BiblePairs, rows: np.ndarray, fraction: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Hold out `fraction` of the anchors of `rows` (a validation split): (kept rows, held-out
    rows). All pairs of an anchor verse land on the same side, so no sentence A is in both."""
    rows = np.asarray(rows)
    if not 0 < fraction < 1 or len(rows) == 0:
        fail("split_by_anchor", "0 < fraction < 1 and some rows", f"fraction={fraction}, "
             f"{len(rows)} rows")
    anchors = np.unique(pairs.a[rows])
    held = rng.choice(anchors, max(1, int(round(fraction * len(anchors)))), replace=False)
    out = np.isin(pairs.a[rows], held)
    return rows[~out], rows[out]


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
