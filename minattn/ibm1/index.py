"""Indexing a parallel corpus for the fast IBM Model 1 (`fast.py`): token lists
-> flat arrays. Read `reference.py` first: this file is plumbing, written for
speed. Direction as in reference.py: source x = input (English), target y = output (German); the
NULL source word is `None` with id 0.

Model 1 ignores word order, so a sentence pair is two BAGS of words: its distinct target
words y (with their counts k_y) and its distinct source words x (with their counts c_x). EM
runs on flat "point" arrays, one per (distinct target word, distinct source word or NULL) of
the same pair: a point knows its target row, its multiplicity c_x and its entry in the SPARSE
table (only co-occurring (x, y) are stored). This file builds those arrays with a few sorts
and no Python loop over sentences (one packed int64 sort instead of gathers).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain, count

import numpy as np

from .reference import NULL, check_corpus, check_sentences

PACK_BITS = 63     # bits of one packed int64 sort key (the sign bit stays clear)

# ============================================================================ the corpus
@dataclass
class IndexedBitext:
    """A parallel corpus as flat index arrays (M pairs, T target tokens, R target rows, P points).

    src_vocab[0] is NULL; `null` says whether NULL takes part in the alignments.
    Tokens:  src_ids (S,), src_start (M+1,): source tokens of pair m are
             src_ids[src_start[m]:src_start[m+1]];  tgt_ids (T,), tgt_start (M+1,) likewise.
    Bags:    src_bag_* (B,): the distinct source words of each pair (word, count, last position),
             pair m's in src_bag_start[m]:src_bag_start[m+1]; src_tok_bag (S,): bag item of each
             source token, counted from its pair's first item.
             row_* (R,): the distinct target words of each pair (word, count k, pair),
             row_start (M+1,); tgt_tok_row (T,): the row of each target token.
    Points, EM order (sorted by entry: reading t is sequential, the random accesses hit the
             small (R,) arrays): point_entry, point_row, point_mult (P,), point_last (P,) the
             last position of the point's source word in its sentence (NULL -1).
    Points, corpus order (row by row, NULL first): seg_start (R+1,); seg_entry (P,) and
             seg_mult (P,) are computed on first use (EM and Viterbi do not need them).
    entry_src, entry_tgt (E,): the coordinates (x, y) of the stored entries, sorted by (x, y).
    """
    src_vocab: list
    tgt_vocab: list
    null: bool
    src_ids: np.ndarray
    src_start: np.ndarray
    tgt_ids: np.ndarray
    tgt_start: np.ndarray
    src_bag_word: np.ndarray
    src_bag_count: np.ndarray
    src_bag_last: np.ndarray
    src_bag_start: np.ndarray
    src_tok_bag: np.ndarray
    row_word: np.ndarray
    row_count: np.ndarray
    row_pair: np.ndarray
    row_start: np.ndarray
    tgt_tok_row: np.ndarray
    point_entry: np.ndarray
    point_row: np.ndarray
    point_mult: np.ndarray
    point_last: np.ndarray
    seg_start: np.ndarray
    entry_src: np.ndarray
    entry_tgt: np.ndarray

    def __post_init__(self):
        self.src_index = {w: i for i, w in enumerate(self.src_vocab)}
        self.tgt_index = {w: i for i, w in enumerate(self.tgt_vocab)}
        self._scratch = {}
        self.cache = {}     # anything derived on demand, e.g. fast.tensors_torch per device

    def scratch(self, name: str) -> np.ndarray:
        """A reusable (P,) float64 buffer. P reaches 10^7: a fresh array every EM iteration
        costs page faults that take as long as the arithmetic (measured: ~1.7x slower)."""
        if name not in self._scratch:
            self._scratch[name] = np.empty(len(self.point_entry))
        return self._scratch[name]

    @property
    def n_pairs(self) -> int:
        return len(self.src_start) - 1

    def _corpus_columns(self, bag_values: np.ndarray, null_value):
        """(C,) the columns' values (see index_bitext) and (P,) the column of each point."""
        col_start = _offsets(np.diff(self.src_bag_start) + int(self.null))
        columns = _with_null(bag_values, self.src_bag_start, self.null, null_value)
        return columns, _ragged_arange(col_start[self.row_pair], np.diff(self.seg_start))

    @cached_property
    def seg_entry(self) -> np.ndarray:
        """(P,) int32 table entry of each point, corpus order: sorting the points' keys (ties
        in corpus order) gives EM order, whose entries are point_entry."""
        col_word, point_col = self._corpus_columns(self.src_bag_word, 0)
        n_tgt, width = len(self.tgt_vocab), np.diff(self.seg_start)
        keys = np.take(col_word, point_col) * n_tgt + np.repeat(self.row_word, width)   # (P,)
        order, _ = _stable_argsort(keys)                      # EM position -> corpus position
        seg_entry = np.empty(len(keys), np.int32)
        seg_entry[order] = self.point_entry
        return seg_entry

    @cached_property
    def seg_mult(self) -> np.ndarray:
        """(P,) multiplicity c_x of each point, corpus order."""
        col_mult, point_col = self._corpus_columns(self.src_bag_count, 1)
        return np.take(col_mult.astype(float), point_col)

    @property
    def width(self) -> np.ndarray:
        """(R,) |x^m| (+1 with NULL) for each target row: p(y | x^m) = Σ_i t(y | x_i) / width."""
        return (np.diff(self.src_start) + int(self.null))[self.row_pair]


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """(N+1,) start of each of N consecutive segments, and the total at the end."""
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _ragged_arange(first: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(Σ lengths,) first[s], first[s]+1, ..., first[s]+lengths[s]-1 for each segment s in turn.

    One pass: a vector of +1 steps, with a jump to first[s] where segment s starts, then an
    in-place cumsum (no (N,) index temporaries as in arange - repeat). Needs every length >= 1.
    """
    steps = np.ones(int(lengths.sum()), np.int64)
    prev_last = np.concatenate([[0], (first + lengths - 1)[:-1]])    # value just before segment s
    steps[_offsets(lengths)[:-1]] = first - prev_last
    return np.cumsum(steps, out=steps)


def _with_null(bag_values: np.ndarray, bag_start: np.ndarray, null: bool, null_value):
    """(C,) bag items as columns: NULL's value (when used) before the items of each pair."""
    return np.insert(bag_values, bag_start[:-1], null_value) if null else bag_values


def _first_of_run(sorted_keys: np.ndarray) -> np.ndarray:
    """(N,) bool: where a new value starts in a sorted array."""
    new = np.empty(len(sorted_keys), bool)
    new[:1] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=new[1:])
    return new


def _ids(sentences, side: str, first=()):
    """Token lists -> (flat ids (N,), offsets (M+1,), vocabulary in first-seen order).

    `first` words get the first ids (the source side reserves id 0 for NULL).
    """
    # C-speed checks first; the loop below only runs to name the bad sentence
    kinds = set(map(type, sentences))
    try:
        lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))
    except TypeError:
        lengths = None
    if lengths is None or any(issubclass(k, str) for k in kinds) or not lengths.all():
        check_sentences(side, sentences)  # names the bad sentence
    flat = list(chain.from_iterable(sentences))
    # C-speed dedup that keeps first-seen order, then number the words 0, 1, 2, ...
    index = dict(zip(dict.fromkeys([*first, *flat]), count()))
    ids = np.fromiter(map(index.__getitem__, flat), np.int64, len(flat))
    return ids, _offsets(lengths), list(index)


def _stable_argsort(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, keys[order]): a stable argsort of non-negative int64 keys and the sorted keys.

    Packing (key, index) into one int64 lets NumPy's fast value sort do an argsort's job,
    and the sorted keys come out of the high bits without a random gather.
    """
    n = len(keys)
    shift = max(n.bit_length(), 1)
    if n and int(keys.max()).bit_length() + shift <= PACK_BITS:
        packed = (keys << shift) | np.arange(n)
        packed.sort()
        return packed & ((1 << shift) - 1), packed >> shift
    order = np.argsort(keys, kind="stable")
    return order, keys[order]


def _bags(ids: np.ndarray, start: np.ndarray, vocab_size: int):
    """Distinct words of each sentence: (word, count, sentence, start (M+1,), item of each token).

    Items are sorted by (sentence, word id), so each sentence's bag is contiguous.
    (np.unique(..., return_inverse=True, return_counts=True), with the packed sort.)
    """
    sent = np.repeat(np.arange(len(start) - 1), np.diff(start))          # (N,)
    order, keys = _stable_argsort(sent * vocab_size + ids)
    new = _first_of_run(keys)
    item = np.empty(len(ids), np.int64)
    item[order] = np.cumsum(new) - 1                                     # (N,) token -> item
    keys = keys[new]                                                     # (B,) sentence·V + word
    counts = np.diff(np.append(np.flatnonzero(new), len(ids)))           # (B,)
    bag_sent = keys // vocab_size
    bag_start = _offsets(np.bincount(bag_sent, minlength=len(start) - 1))
    return keys % vocab_size, counts, bag_sent, bag_start, item


def _points_em_order(row_word, row_col, width, col_word, col_mult, col_last, col_start, n_tgt,
                     point_col):
    """Sort the points (corpus order: row r, then the columns of its pair) into EM order: by
    entry key x·|V_y| + y, ties in corpus order (= by row: a row has each x once).

    Args: row_word (R,); row_col (R,) first column of the row's pair; width (R,) columns of
          the row's pair; col_word, col_mult, col_last (C,); col_start (M+1,) columns of each
          pair; point_col (P,) column of each point.
    Returns (P,) arrays in EM order: keys, row, multiplicity c_x (float), last position of x
    (int32). The fast path overwrites point_col.

    Fast path: every field of a point fits in one int64,
        key | row r | column k within its pair | c_x        (high bits to low bits)
    and one value sort of those int64 replaces argsort + random gathers over P (the gathers,
    with their page faults, cost more than the sort). Each field is then read from its bits,
    sequentially. A point is the sum of a row part and a column part (disjoint bits).
    """
    n_rows, n_cols = len(row_word), np.diff(col_start)
    col_k = np.arange(len(col_word)) - np.repeat(col_start[:-1], n_cols)     # (C,) 0 = NULL
    mult_bits, k_bits = int(col_mult.max()).bit_length(), int(n_cols.max() - 1).bit_length()
    row_bits = (n_rows - 1).bit_length()
    key_bits = ((int(col_word.max()) + 1) * n_tgt).bit_length()          # keys < (max x + 1)|V_y|
    if mult_bits + k_bits + row_bits + key_bits > PACK_BITS:  # general path: argsort + gathers
        keys = np.take(col_word, point_col) * n_tgt + np.repeat(row_word, width)
        order, keys = _stable_argsort(keys)
        col = np.take(point_col, order)
        return (keys, np.repeat(np.arange(n_rows), width)[order],
                np.take(col_mult, col).astype(float), np.take(col_last, col))
    s_k, s_r = mult_bits, mult_bits + k_bits                              # where the fields start
    s_key = s_r + row_bits
    row_part = (row_word << s_key) | (np.arange(n_rows) << s_r)                      # (R,)
    col_part = ((col_word * n_tgt) << s_key) | (col_k << s_k) | col_mult             # (C,)
    packed = np.take(col_part, point_col)                                            # (P,)
    scratch = np.repeat(row_part, width)                                             # (P,)
    packed += scratch
    packed.sort()                                                         # EM order
    # read the fields into fresh outputs; point_col and scratch are spent, so they hold the
    # temporaries (a fresh (P,) array costs page faults: as long as the arithmetic or longer)
    mult = np.bitwise_and(packed, (1 << mult_bits) - 1, out=scratch).astype(float)
    row = np.right_shift(packed, s_r)
    row &= (1 << row_bits) - 1
    k = np.right_shift(packed, s_k, out=point_col)
    k &= (1 << k_bits) - 1
    col = np.take(row_col, row, out=scratch, mode="clip")                 # (P,) column:
    col += k                                                              # first of pair + k
    last = np.take(col_last, col, mode="clip")
    packed >>= s_key                                                      # now the keys
    return packed, row, mult, last


def index_bitext(sources, targets, null: bool = True) -> IndexedBitext:
    """Index a parallel corpus: sources[m] (input x^m) and targets[m] (output y^m) are token
    lists. Vocabularies in first-seen order, as reference.make_bitext: the same word ids."""
    sources, targets = check_corpus(sources, targets)
    src_ids, src_start, src_vocab = _ids(sources, "source", first=[NULL])
    tgt_ids, tgt_start, tgt_vocab = _ids(targets, "target")
    n_src, n_tgt, n0 = len(src_vocab), len(tgt_vocab), int(null)
    # bags of words: distinct words per pair, with counts
    sb_word, sb_count, _, sb_start, src_item = _bags(src_ids, src_start, n_src)
    pos = _ragged_arange(np.zeros(len(sources), np.int64), np.diff(src_start))   # (S,)
    sb_last = np.full(len(sb_word), -1)
    np.maximum.at(sb_last, src_item, pos)                       # NLTK's tie rule needs it
    row_word, row_count, row_pair, row_start, tgt_tok_row = _bags(tgt_ids, tgt_start, n_tgt)
    # columns (C,): the source side of each pair, NULL (if used) then its bag items
    col_word, col_mult, col_last = (_with_null(a, sb_start, null, v)
                                    for a, v in ((sb_word, 0), (sb_count, 1), (sb_last, -1)))
    col_start = _offsets(np.diff(sb_start) + n0)                          # (M+1,)
    # points, corpus order: for each target row, every column of its pair
    row_col, width = col_start[row_pair], np.diff(col_start)[row_pair]    # (R,) first, count
    seg_start = _offsets(width)                                           # (R+1,)
    point_col = _ragged_arange(row_col, width)                            # (P,)
    # points, EM order, and the table entries: one per distinct key
    keys, point_row, point_mult, point_last = _points_em_order(
        row_word, row_col, width, col_word, col_mult, col_last.astype(np.int32), col_start,
        n_tgt, point_col)
    new = _first_of_run(keys)
    uniq = np.take(keys, np.flatnonzero(new))                            # (E,) sorted keys
    point_entry = np.cumsum(new, out=keys)                               # (keys are spent)
    point_entry -= 1
    return IndexedBitext(src_vocab, tgt_vocab, bool(null), src_ids, src_start, tgt_ids,
                  tgt_start, sb_word, sb_count, sb_last, sb_start,
                  src_item - np.repeat(sb_start[:-1], np.diff(src_start)),
                  row_word, row_count, row_pair, row_start, tgt_tok_row,
                  point_entry, point_row, point_mult, point_last, seg_start,
                  (uniq // n_tgt).astype(np.int32), (uniq % n_tgt).astype(np.int32))
