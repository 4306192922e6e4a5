"""Lesson 04's data: character streams for the language models, and the synthetic tasks
(the delayed copy, recall by class) that measure how far back a model sees. Each task takes
a generator, so a batch is the same every run."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..checks import check_array, check_size, describe, fail


def char_corpus(texts: list[str]) -> tuple[list[str], list[torch.Tensor]]:
    """Character vocabulary of texts[0] (the training text) and every text as int64 ids.

    Characters of later texts (validation, test) missing from the training text map to the
    first symbol of the vocabulary; with PTB or Shakespeare there are none.
    """
    if isinstance(texts, str) or not texts or not all(isinstance(t, str) for t in texts) \
            or not texts[0]:
        fail("texts", "a non-empty list of strings, the first (training) text non-empty",
             describe(texts))
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


def lm_segment(streams: torch.Tensor, index: int,
               seg_len: int) -> tuple[torch.Tensor, torch.Tensor]:
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


def bigram_bpc(train_ids: torch.Tensor, streams: torch.Tensor, vocab_size: int) -> float:
    """The trivial baseline of a character LM: bits per character of the bigram model of
    `train_ids` (N,) (add-one smoothing) on the next-character targets of `streams` (B, T) —
    the characters `train.evaluate_bpc` scores. A model that beats it learned more than which
    character follows which."""
    check_array("train_ids", train_ids, "int", ndim=1, hint="(N,) character ids", like=torch.Tensor)
    check_array("streams", streams, "int", ndim=2, hint="(B, T) character ids", like=torch.Tensor)
    vocab_size = check_size("vocab_size", vocab_size, 1)
    counts = np.ones((vocab_size, vocab_size))  # add-one: no character pair has probability 0
    ids = train_ids.cpu().numpy()
    np.add.at(counts, (ids[:-1], ids[1:]), 1)
    log_p = np.log2(counts / counts.sum(1, keepdims=True))
    s = streams.cpu().numpy()
    return float(-log_p[s[:, :-1], s[:, 1:]].mean())


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
