"""Loaders for the real datasets: plain Python and NumPy out, deterministic seeded splits.

The files are made by `python data_scripts/fetch_all.py` (see data_scripts/README.md) under
`DATA_DIR` = <repo>/data, or $MINATTN_DATA. Every loader raises `DatasetMissing` (a
FileNotFoundError) naming the script to run when its files are absent, so a lesson can write

    try:
        pairs = load_parallel("en-de", split="train")
    except DatasetMissing as err:
        print(f"{err}; using the synthetic task instead")
        pairs = synthetic_pairs(...)

Splits. Where the source has no official split (sentiment, the Bible) `split_indices` makes
one: a seeded permutation cut 80 / 10 / 10 into train / valid / test, returned in source
order. The same seed gives the same split on every machine. PTB keeps its official split;
Shakespeare is cut contiguously (90 / 5 / 5, at line ends), the usual choice for
character-level language models, so the test text is text the model never saw nearby.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..contract import fail
from .fetch import DIGESTS, MANIFEST, data_root, sha256_file

DATA_DIR = data_root()  # <repo>/data, or $MINATTN_DATA when set (read once, at import)
SPLITS = ("train", "valid", "test")
FRACTIONS = (0.8, 0.1, 0.1)  # train / valid / test for datasets without an official split

# dataset -> (files it must have, what it is, the script that makes it)
DATASETS = {
    "sentiment": (["rotten_tomatoes.tsv"], "Rotten Tomatoes sentiment sentences", "sentiment"),
    "bible": (["verses.tsv"], "Bible parallel text", "bible"),
    "ptb": (["ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"], "Penn Treebank", "ptb"),
    "shakespeare": (["shakespeare.txt"], "Shakespeare text", "shakespeare"),
    "glove": (["vectors.npy", "vocab.txt"], "GloVe 6B 50d vectors", "glove"),
    "minilm": (["model.safetensors", "config.json", "tokenizer.json"],
               "all-MiniLM-L6-v2 encoder files", "minilm"),
    "mathjax": (["mathjax.whl"], "MathJax, for reading the HTML course offline", "mathjax"),
    # the papers' own character-level benchmarks: fetched only by users with a network
    "enwik8": (["enwik8"], "enwik8 (needs a network to fetch)", "enwik8"),
    "text8": (["text8"], "text8 (needs a network to fetch)", "text8"),
}


class DatasetMissing(FileNotFoundError):
    """A dataset's files are not on disk; the message names the script that fetches them."""


class DatasetCorrupt(RuntimeError):
    """A dataset's file does not have the sha256 its MANIFEST.json records (truncated, a flipped
    byte), or the manifest is unreadable. Not a DatasetMissing: a lesson must not quietly fall
    back to a synthetic task. The message names the file and `make data`, which repairs it."""


_VERIFIED: dict[Path, tuple] = {}  # path -> (size, mtime, digest) of a file already verified


def verify_dataset(folder: Path, files: list[str]) -> None:
    """Check each file against the sha256 in <folder>/MANIFEST.json, once per process and file:
    the verdict is kept by size and modification time, so a lesson hashes a file once. A
    manifest without digests (written before they were recorded) checks nothing until
    `make data` adds them."""
    manifest = folder / MANIFEST
    if not manifest.exists():
        return
    try:
        digests = json.loads(manifest.read_text(encoding="utf-8")).get(DIGESTS) or {}
    except (ValueError, OSError, AttributeError) as err:
        raise DatasetCorrupt(f"{manifest} is unreadable ({str(err)[:80]}): run `make data` "
                             "to repair it") from None
    for fname in files:
        path, digest = folder / fname, digests.get(fname)
        if digest is None:
            continue
        stat = path.stat()
        verdict = (stat.st_size, stat.st_mtime_ns, digest)
        if _VERIFIED.get(path) == verdict:
            continue
        if sha256_file(path) != digest:
            raise DatasetCorrupt(f"{path} is damaged (truncated or changed: its sha256 is not "
                                 f"the one in {manifest}): run `make data` to repair it")
        _VERIFIED[path] = verdict


def dataset_dir(name: str, data_dir: str | Path | None = None) -> Path:
    """<data_dir or DATA_DIR>/<name>; raises DatasetMissing unless all its files are there,
    DatasetCorrupt unless they have the digests in its MANIFEST.json (`verify_dataset`)."""
    if name not in DATASETS:
        fail("unknown dataset", f"one of {sorted(DATASETS)}", repr(name))
    files, what, script = DATASETS[name]
    folder = Path(data_dir if data_dir is not None else DATA_DIR) / name
    for fname in files:
        if not (folder / fname).is_file():
            raise DatasetMissing(f"{what} not found at {_shown(folder / fname)}: "
                                 f"{fetch_hint(script)}")
    verify_dataset(folder, files)
    return folder


PAPERS_ONLY = ("enwik8", "text8")  # fetched by `fetch_all.py --papers`, not by `make data`


def fetch_hint(script: str) -> str:
    """What to run for a missing dataset: `make data` (the README's command) for the ones it
    fetches, the dataset's own script for the papers' originals."""
    alone = f"run `python data_scripts/{script}.py`"
    if script in PAPERS_ONLY:
        return (f"{alone} (needs a network; `make data` fetches only the datasets the lessons "
                "need, and lessons run without this one)")
    return (f"run `make data` (it fetches every dataset the lessons use; for this one alone, "
            f"{alone})")


def _shown(path: Path) -> str:
    """A data path relative to the course's folder when it lies inside (a message a page
    prints names data/glove/..., not the builder's folders)."""
    from . import REPO_ROOT

    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def available(name: str, data_dir: str | Path | None = None) -> bool:
    """True when dataset `name` has been fetched (tests use it to skip; lessons may too)."""
    try:
        dataset_dir(name, data_dir)
        return True
    except DatasetMissing:
        return False


# ============================================================================ text helpers
_TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """The course's word tokenizer: lower-case, then words and punctuation marks.

    A word is a run of letters or digits in any script (accents kept: "éternel", "daß"), with
    inner apostrophes kept inside it ("don't", "god's", "l'éternel"); every other non-space
    character is a token of its own. No stemming, no sub-words.

        >>> tokenize("Don't panic, Élise!")
        ["don't", 'panic', ',', 'élise', '!']
    """
    return _TOKEN.findall(text.lower())


def check_split(split: str | None) -> None:
    if split is not None and split not in SPLITS:
        fail("unknown split", f"None or one of {SPLITS}", repr(split))


def split_indices(n: int, split: str | None, seed: int = 0) -> np.ndarray:
    """Indices of `split` in a seeded 80/10/10 partition of range(n), in increasing order.

    None returns every index. The three splits are disjoint and cover range(n).
    """
    check_split(split)
    if split is None:
        return np.arange(n)
    order = np.random.default_rng(seed).permutation(n)
    n_train, n_valid = int(FRACTIONS[0] * n), int(FRACTIONS[1] * n)
    bounds = {"train": (0, n_train), "valid": (n_train, n_train + n_valid),
              "test": (n_train + n_valid, n)}
    lo, hi = bounds[split]
    return np.sort(order[lo:hi])


@functools.lru_cache(maxsize=8)
def _read_tsv(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a tab-separated UTF-8 file; cached (the files never change)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


# ============================================================================ sentiment
class Sentiment(NamedTuple):
    texts: list[str]  # the sentences
    labels: np.ndarray  # (n,) int64, 1 = positive (mean score > 0), 0 = negative
    scores: np.ndarray  # (n,) float32, mean human score in [-4, 4], for regression


def load_sentiment(split: str | None = None, seed: int = 0, keep_neutral: bool = False,
                   data_dir: str | Path | None = None) -> Sentiment:
    """Rotten Tomatoes sentences with mean human sentiment scores (Hutto & Gilbert, 2014).

    10,605 sentences; by default the 37 with a mean score of exactly 0 are dropped (their
    label would be arbitrary), leaving 10,568: 5,242 positive and 5,326 negative. With
    `keep_neutral=True` they are kept and labelled 0.
    """
    _, rows = _read_tsv(dataset_dir("sentiment", data_dir) / "rotten_tomatoes.tsv")
    scores = np.array([float(r[1]) for r in rows], dtype=np.float32)
    keep = np.arange(len(rows)) if keep_neutral else np.flatnonzero(scores != 0)
    keep = keep[split_indices(len(keep), split, seed)]
    return Sentiment(texts=[rows[i][2] for i in keep],
                     labels=(scores[keep] > 0).astype(np.int64), scores=scores[keep])


# ============================================================================ parallel text
BIBLE_COLUMNS = {"kjv": "King James Version", "web": "World English Bible",
                 "bbe": "Bible in Basic English", "de": "Elberfelder 1905 (German)",
                 "fr": "Louis Segond 1910 (French)"}


def bible_columns(pair: str, english: str = "web") -> tuple[str, str]:
    """Which two translations a pair name means.

    "en-de" -> (english, "de"), "en-fr" -> (english, "fr"), "en-en" -> (english, "bbe"):
    the Bible in Basic English rewords nearly every verse, a real paraphrase. Two explicit
    columns also work, e.g. "kjv-web". `english` is "web" (modern), "kjv" or "bbe".
    """
    if english not in ("kjv", "web", "bbe"):
        fail("unknown English version", "'web', 'kjv' or 'bbe'", repr(english))
    named = {"en-de": (english, "de"), "en-fr": (english, "fr"), "en-en": (english, "bbe")}
    a, _, b = pair.partition("-")
    cols = named.get(pair) or (a, b)
    if cols[0] not in BIBLE_COLUMNS or cols[1] not in BIBLE_COLUMNS or cols[0] == cols[1]:
        fail("unknown language pair", "'en-de', 'en-fr', 'en-en' or two different of "
             f"{sorted(BIBLE_COLUMNS)} joined by '-'", repr(pair) if english != "bbe"
             else f"{pair!r} with english='bbe'")
    return cols


def load_parallel(pair: str = "en-de", split: str | None = None, seed: int = 0,
                  english: str = "web", data_dir: str | Path | None = None
                  ) -> list[tuple[str, str]]:
    """Bible verse pairs: [(english_sentence, other_sentence), ...] for a language pair.

    31,102 verses, the same in every translation, joined on (book, chapter, verse). See
    `bible_columns` for the pair names. split=None gives all pairs in Bible order; "train" /
    "valid" / "test" a seeded 80/10/10 split by verse (24,881 / 3,110 / 3,111).
    """
    a, b = bible_columns(pair, english)
    check_split(split)
    header, rows = _read_tsv(dataset_dir("bible", data_dir) / "verses.tsv")
    ia, ib = header.index(a), header.index(b)
    return [(rows[i][ia], rows[i][ib]) for i in split_indices(len(rows), split, seed)]


def load_paraphrase(split: str | None = None, seed: int = 0, english: str = "web",
                    other: str = "bbe", data_dir: str | Path | None = None
                    ) -> list[tuple[str, str, int]]:
    """Sentence pairs labelled 1 (same verse in two English versions) or 0 (different verses).

    Every verse of the split gives one positive (its `english` and `other` wording) and one
    negative (its `english` wording with the `other` wording of another verse of the same
    split, chosen by a seeded derangement), so the classes are balanced: 2 pairs per verse.
    """
    pairs = load_parallel(f"{english}-{other}", split, seed, english, data_dir)
    n = len(pairs)
    if n < 2:
        fail("too few verses for negatives", "at least 2 verses", f"{n}")
    rng = np.random.default_rng(seed + 1)
    shift = rng.integers(1, n, size=n)  # j = i + shift (mod n) is never i
    out = []
    for i, (x, y) in enumerate(pairs):
        out.append((x, y, 1))
        out.append((x, pairs[(i + int(shift[i])) % n][1], 0))
    return out


# ============================================================================ language models
def load_lm_text(name: str = "ptb", split: str = "train",
                 data_dir: str | Path | None = None) -> str:
    """Raw text of a language-modelling split.

    "ptb": the Penn Treebank (Mikolov) splits, one sentence per line, 10k-word vocabulary,
    lower-cased, <unk> and N already in the text: use `text.split()` for words and a line end
    as <eos>. Train 887,521 words / 42,068 lines; valid 70,390 / 3,370; test 78,669 / 3,761.
    "shakespeare": the 42 works as one text (5.06 M characters), split contiguously 90/5/5
    at line ends; use it character by character.
    "enwik8", "text8": the papers' benchmarks, only if fetched (they need a network). The
    standard contiguous split, 90M / 5M / 5M characters of the 10^8. enwik8 is bytes; each
    byte becomes one character (latin-1), so its vocabulary is at most 256 symbols.
    """
    if split not in SPLITS:
        fail("unknown split", f"one of {SPLITS}", repr(split))
    if name == "ptb":
        return (dataset_dir("ptb", data_dir) / f"ptb.{split}.txt").read_text(encoding="utf-8")
    if name == "shakespeare":
        text = (dataset_dir("shakespeare", data_dir) / "shakespeare.txt").read_text("utf-8")
        cut1 = text.find("\n", int(0.90 * len(text))) + 1
        cut2 = text.find("\n", int(0.95 * len(text))) + 1
        return {"train": text[:cut1], "valid": text[cut1:cut2], "test": text[cut2:]}[split]
    if name in ("enwik8", "text8"):
        with open(dataset_dir(name, data_dir) / name, "rb") as f:
            size = f.seek(0, 2)
            lo, hi = {"train": (0, 90), "valid": (90, 95), "test": (95, 100)}[split]  # percent
            f.seek(size * lo // 100)
            return f.read(size * hi // 100 - size * lo // 100).decode("latin-1")
    fail("unknown language-modelling text", "'ptb', 'shakespeare', 'enwik8' or 'text8'",
         repr(name))


# ============================================================================ word vectors
def load_glove(max_words: int | None = None, data_dir: str | Path | None = None
               ) -> tuple[list[str], np.ndarray]:
    """GloVe 6B 50d: (vocabulary, vectors (V, 50) float32), row i is the vector of word i.

    Words are lower-cased and ordered by frequency, so `max_words=50_000` keeps the 50k most
    frequent (and reads only those rows from disk). V = 400,000 without a limit.
    """
    folder = dataset_dir("glove", data_dir)
    if max_words is not None and max_words <= 0:
        fail("max_words must be positive", "an int > 0 or None", repr(max_words))
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    with open(folder / "vocab.txt", encoding="utf-8") as f:
        vocab = f.read().splitlines()
    n = len(vocab) if max_words is None else min(max_words, len(vocab))
    return vocab[:n], np.array(vectors[:n], dtype=np.float32)
