"""Synthetic tasks shared by the lessons. Each returns tensors on the device you ask for and
takes a torch.Generator, so a batch is the same every run."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .tools.utils import check_array, check_number, check_size, describe, fail


# ==== lessons 05, 06: permutation and dictionary corpora
def dictionary_corpus(n_pairs: int, n_words: int, rng: np.random.Generator,
                      length=(4, 10), n_function: int = 0):
    """Pairs built from a hidden one-to-one dictionary x_k -> y_{π(k)}: each target sentence is
    the word-by-word translation of its source, shuffled, plus up to 2 target-only 'function
    words' f_* (nothing to align to but NULL). Words follow a Zipf law. Returns (src, tgt, π)."""
    n_pairs, n_words = check_size("n_pairs", n_pairs, 1), check_size("n_words", n_words, 1)
    check_length_range(length)
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


def check_length_range(length) -> None:
    """length: (low, high) sentence lengths, integers with 1 <= low <= high."""
    if not (isinstance(length, (tuple, list)) and len(length) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in length)
            and 1 <= length[0] <= length[1]):
        fail("length", "(low, high) integers with 1 <= low <= high", describe(length))


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
    """Mixture of permutations of two disjoint word sets (Snell et al. 2021, §3.3): half of the pairs copy a
    permutation of w00..w(n-1), half one of wn..w(2n-1)."""
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
    words = np.argsort(rng.random((n_pairs, n_words)), axis=1)[:, :n_types]  # a random subset, shuffled
    words = words + n_words * rng.integers(0, n_sets, size=(n_pairs, 1))
    eos, sos = n_sets * n_words, n_sets * n_words + 1
    out = words
    if order is not None:
        order = np.asarray(order)
        if sorted(order.tolist()) != list(range(n_types)):
            fail("copy_ids order", f"a permutation of 0..{n_types - 1}", repr(order))
        out = words[:, order]
    column = lambda v: np.full((n_pairs, 1), v)  # noqa: E731
    src = np.concatenate([words, column(eos)], axis=1)
    tgt = np.concatenate([column(sos), out, column(eos)], axis=1)
    return src, tgt, n_sets * n_words + 2


# ==== lesson 04: Transformer-XL — character streams and the delayed copy
def char_corpus(texts: list[str]) -> tuple[list[str], list[torch.Tensor]]:
    """Character vocabulary of texts[0] (the training text) and every text as int64 ids.

    Characters of later texts (validation, test) missing from the training text map to the
    first symbol of the vocabulary; with PTB or Shakespeare there are none.
    """
    if isinstance(texts, str) or not texts or not all(isinstance(t, str) for t in texts) or not texts[0]:
        fail("texts", "a non-empty list of strings, the first (training) text non-empty", describe(texts))
    chars = sorted(set(texts[0]))
    index = {c: i for i, c in enumerate(chars)}
    table = np.zeros(max(map(ord, "".join(set("".join(texts))))) + 1, dtype=np.int64)
    for c, i in index.items():
        table[ord(c)] = i
    return chars, [torch.from_numpy(table[np.frombuffer(t.encode("utf-32-le"), np.uint32)])
                   for t in texts]


def lm_streams(ids: torch.Tensor, n_streams: int) -> torch.Tensor:
    """Cut a long (N,) text into n_streams contiguous rows (n_streams, N // n_streams).

    Row b is one continuous stretch of the text: segment s of row b follows segment s − 1 of
    the same row, which is what a Transformer-XL memory needs (batch row b carries row b's
    memory). Data-parallel training gives each process its own rows.
    """
    check_array("ids", ids, "int", ndim=1, hint="(N,) character ids", like=torch.Tensor)
    n_streams = check_size("n_streams", n_streams, 1)
    if ids.ndim != 1 or n_streams <= 0 or len(ids) < 2 * n_streams:
        fail("lm_streams needs a long 1-D text", f"(N,) with N >= {2 * max(n_streams, 1)}",
             f"{tuple(ids.shape)} cut into {n_streams} streams")
    length = len(ids) // n_streams
    return ids[: n_streams * length].view(n_streams, length)


def lm_segment(streams: torch.Tensor, index: int, seg_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-character targets of segment `index` (wrapping around the streams).

    Returns x (B, seg_len) and y (B, seg_len) with y[:, t] = the character after x[:, t].
    """
    check_array("streams", streams, "int", ndim=2, hint="(B, L) ids", like=torch.Tensor)
    index, seg_len = check_size("index", index), check_size("seg_len", seg_len, 1)
    n_segments = (streams.shape[1] - 1) // seg_len
    if n_segments <= 0:
        fail("streams too short for one segment", f"length > {seg_len}", f"{streams.shape[1]}")
    start = (index % n_segments) * seg_len
    return streams[:, start:start + seg_len], streams[:, start + 1:start + seg_len + 1]


def synthetic_text(n_chars: int, rng: np.random.Generator) -> str:
    """Offline fallback text: Zipf-distributed made-up words, and every sentence ends by
    repeating its first word (a dependency a few dozen characters long)."""
    n_chars = check_size("n_chars", n_chars)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa"]
    words = ["".join(rng.choice(syllables, size=rng.integers(1, 4))) for _ in range(300)]
    p = 1.0 / np.arange(1, len(words) + 1)
    out, size = [], 0
    while size < n_chars:
        sentence = list(rng.choice(words, size=rng.integers(4, 12), p=p / p.sum()))
        line = " ".join(sentence + [sentence[0]]) + " .\n"
        out.append(line)
        size += len(line)
    return "".join(out)[:n_chars]


def delayed_copy(batch_size: int, length: int, distance: int, n_symbols: int,
                 generator: torch.Generator, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """A stream of random symbols; the target at position t is the symbol at t − distance.

    Returns tokens (B, length) and targets (B, length) int64, targets = -100 (ignored by
    cross-entropy) where t < distance. A model that cannot see `distance` tokens back is at
    chance, 1 / n_symbols.
    """
    batch_size, length = check_size("batch_size", batch_size, 1), check_size("length", length, 1)
    distance, n_symbols = check_size("distance", distance, 1), check_size("n_symbols", n_symbols, 1)
    if min(batch_size, length, distance, n_symbols) <= 0 or distance >= length:
        fail("delayed_copy sizes", "positive sizes and distance < length",
             f"batch_size={batch_size}, length={length}, distance={distance}, "
             f"n_symbols={n_symbols}")
    tokens = torch.randint(0, n_symbols, (batch_size, length), generator=generator)
    targets = torch.full_like(tokens, -100)
    targets[:, distance:] = tokens[:, :-distance]
    return tokens.to(device), targets.to(device)


class ClassRecall(NamedTuple):
    """A batch of `recall_by_class`: int64 (B, T) each."""
    tokens: torch.Tensor
    targets: torch.Tensor   # the symbol to answer at a read, -100 elsewhere
    distance: torch.Tensor  # how far back that symbol was written, at a read; 0 elsewhere


def recall_by_class(batch_size: int, length: int, min_distance: int, max_distance: int,
                    generator: torch.Generator, n_classes: int = 16, n_values: int = 8,
                    n_fillers: int = 8, spacing: int = 200, device="cpu") -> ClassRecall:
    """Copy the last symbol of a class: recall by content, at a distance we choose (lesson 04).

    Vocabulary, `n_classes · (n_values + 1) + n_fillers` ids: symbol v of class c is
    c · n_values + v; "read c" is n_classes · n_values + c; the rest are fillers. A stream is
    fillers with events in it: a *write* (a random symbol of a class c) and, `distance`
    positions later (uniform in [min_distance, max_distance]), a *read* of c, whose target is
    the symbol written. Writes of one class are at least `spacing` (> max_distance) apart, so
    a read has exactly one write of its class within `spacing` positions back: the answer is
    found by its content (the class), wherever it sits. A model that cannot reach the write
    can still name the class: 1 / n_values right.
    """
    if min(batch_size, length, min_distance, n_classes, n_values, n_fillers) <= 0 or \
            not min_distance <= max_distance < min(spacing, length):
        fail("recall_by_class sizes", "positive sizes and 0 < min_distance <= max_distance "
             "< min(spacing, length)", f"batch_size={batch_size}, length={length}, distance "
             f"{min_distance}..{max_distance}, spacing={spacing}")
    rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
    first_read, first_filler = n_classes * n_values, n_classes * (n_values + 1)
    tokens = rng.integers(first_filler, first_filler + n_fillers, (batch_size, length))
    targets = np.full((batch_size, length), -100)
    distance = np.zeros((batch_size, length), dtype=np.int64)
    mean_gap = max(spacing // n_classes, 1)  # about one write per class per `spacing`
    for b in range(batch_size):
        busy = np.zeros(length, dtype=bool)
        last_write = np.full(n_classes, -spacing)
        w = 0
        while True:
            w += int(rng.integers(1, 2 * mean_gap))
            if w >= length:
                break
            free = np.flatnonzero(w - last_write >= spacing)
            d = int(rng.integers(min_distance, max_distance + 1))
            r = w + d
            if len(free) == 0 or r >= length or busy[w] or busy[r]:
                continue
            c, v = int(rng.choice(free)), int(rng.integers(n_values))
            tokens[b, w], tokens[b, r] = c * n_values + v, first_read + c
            targets[b, r], distance[b, r] = c * n_values + v, d
            busy[w] = busy[r] = True
            last_write[c] = w
    as_tensor = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    return ClassRecall(as_tensor(tokens), as_tensor(targets), as_tensor(distance))


# ==== lesson 05: attention in LSTM seq2seq (keyword task, vocabularies and padded token ids)
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
    from collections import Counter

    counts = Counter(w for s in sentences for w in s if w not in (PAD, UNK, BOS))
    words = [w for w, c in counts.most_common(max_size) if c >= min_count]
    return {w: i for i, w in enumerate([PAD, UNK, BOS] + words)}


def encode(sentences, vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Padded ids (M, max length) (unknown words -> <unk>, padding <pad> = 0) and lengths (M,)."""
    if not isinstance(vocab, dict) or PAD not in vocab or UNK not in vocab:
        fail("vocab", f"a dict with {PAD!r} and {UNK!r} (build_vocab makes one)", describe(vocab))
    lengths = np.array([len(s) for s in sentences])
    if len(sentences) == 0 or lengths.min() == 0:
        fail("encode needs sentences", "a non-empty list of non-empty sentences",
             f"{len(sentences)} sentences, shortest {lengths.min() if len(lengths) else '-'}")
    ids = np.full((len(sentences), lengths.max()), vocab[PAD], dtype=np.int64)
    for m, s in enumerate(sentences):
        ids[m, :len(s)] = [vocab.get(w, vocab[UNK]) for w in s]
    return ids, lengths


# ==== lesson 07: task heads
_STOP = frozenset("that with they them their which shall unto have were from this will your said "
                  "there when upon then also into what these those thou thee thy hath been "
                  "because over even before after like".split())


def content_words(text: str) -> frozenset:
    """Lower-cased words of more than 3 letters, minus a few very common ones (for overlap)."""
    from .tools.data import tokenize

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
    n_anchors, min_distance = check_size("n_anchors", n_anchors), check_size("min_distance", min_distance)
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
    import zlib

    from .encoder import TokenStates
    from .tools.data import tokenize

    chunks, ids = [], []
    for text in texts:
        words = ["[CLS]"] + tokenize(text)[:126] + ["[SEP]"]
        keys = [zlib.crc32(w.encode()) ^ seed for w in words]
        rows = [np.random.default_rng(k).standard_normal(dim) / np.sqrt(dim) for k in keys]
        chunks.append(np.stack(rows).astype(np.float16))
        ids.append(np.array(keys, dtype=np.int64) % (2 ** 31))
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in chunks])]).astype(np.int64)
    return TokenStates(np.concatenate(chunks), offsets, np.concatenate(ids).astype(np.int32))


_POSITIVE = "good great moving funny brilliant charming warm sharp delightful clever".split()
_NEGATIVE = "bad dull boring flat tired clumsy weak silly lifeless messy".split()
_NOUNS = "film plot cast script story ending score movie acting direction".split()


def template_sentiment(n: int, rng: np.random.Generator) -> tuple[list, np.ndarray]:
    """Offline stand-in for the Rotten Tomatoes sentences: "the plot is warm and the score is
    clever , but the cast is dull ." Label 1 when two of the three adjectives are positive."""
    n = check_size("n", n)
    texts, labels = [], rng.integers(0, 2, n)
    for label in labels:
        own, other = (_POSITIVE, _NEGATIVE) if label else (_NEGATIVE, _POSITIVE)
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
