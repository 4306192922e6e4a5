"""Lesson 08's data (Snell et al. 2021): the keyword task of §6.1, vocabularies and padded
ids, and the two real data sets of Table 2 as this course has them offline: Rotten Tomatoes
sentences for sentiment (in place of SST) and Bible verses German -> English (in place of
Multi30k). Each loader falls back on a synthetic set when the data was not fetched, and says so.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..checks import check_size, describe, fail
from ..course.data import DatasetMissing, load_parallel, load_sentiment, tokenize
from ..course.lstm_attention import dictionary_corpus


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
def sentiment_data(n_train: int | None, n_valid: int | None):
    """((sentences, labels) for training, the same for validation, fallback): Rotten Tomatoes
    sentences (`load_sentiment`'s 80/10/10 split), each wrapped as <bos> words <eos>;
    n_train, n_valid: how many, drawn at random (None: all; the files list positives first).
    Offline, the keyword task stands in, and `fallback` says so ('' with the real data)."""
    fallback = ""
    try:
        splits = [(s.texts, s.labels) for s in (load_sentiment(split) for split in
                                                ("train", "valid"))]
    except DatasetMissing as err:
        fallback = f"the keyword task as 'sentiment' (real sentiment data missing: {err})"
        x, y, _ = keyword_task(2000, 20, 100, np.random.default_rng(8))
        texts = [" ".join(map(str, row)) for row in x]
        splits = [(texts[:1600], y[:1600]), (texts[1600:], y[1600:])]
    out = []
    for (texts, labels), n in zip(splits, (n_train, n_valid)):
        keep = np.random.default_rng(0).permutation(len(texts))[:n]
        out.append(([[BOS, *tokenize(texts[i]), "<eos>"] for i in keep],
                    np.asarray(labels)[keep]))
    return out[0], out[1], fallback


def parallel_data(max_len: int, n_read: int | None = None):
    """(train, valid, fallback): lists of (German words, English words), 3..max_len words on
    each side, from the first `n_read` verses of each split of the Bible (Elberfelder ->
    Basic English; None: all). Offline, `dictionary_corpus` stands in, and `fallback` says so."""
    fallback = ""
    try:
        splits = [[(tokenize(de), tokenize(en)) for en, de in
                   load_parallel("en-de", split, english="bbe")[:n_read]]
                  for split in ("train", "valid")]
    except DatasetMissing as err:
        fallback = f"a synthetic dictionary corpus (real parallel data missing: {err})"
        src, tgt, _ = dictionary_corpus(4000, 300, np.random.default_rng(9), length=(5, 15),
                                        n_function=5)
        pairs = list(zip(src, tgt))
        splits = [pairs[:3600], pairs[3600:]]
    train, valid = ([(a, b) for a, b in pairs if 3 <= len(a) <= max_len and 3 <= len(b) <= max_len]
                    for pairs in splits)
    return train, valid, fallback
