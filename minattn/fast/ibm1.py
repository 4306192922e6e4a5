"""IBM Model 1, fast: the EM of minattn/ibm1.py as two `np.bincount`s over a whole corpus.

Read minattn/ibm1.py first: it is the reference, and the tests check that this file gives the
same tables, likelihoods, posteriors and Viterbi alignments (float64, ~1e-12). Direction as
there: source x = input (English), target y = output (German), t(y | x); the NULL source word
is `None` with id 0. The caller chooses this path by name (`em_fast_np`, `e_step_fast_torch`, ...)
on a corpus indexed by `index_bitext`; benchmarks/ibm1.py measures it against NLTK (results in
benchmarks/README.md, section "IBM Model 1").

What changes for speed:
  * Model 1 ignores word order, so a pair is two BAGS of words: its distinct target words y
    (with counts k_y; one "row" each) and its distinct source words x (with counts c_x).
  * The table is SPARSE: one entry per (x, y) that co-occur somewhere — (E,) instead of
    (V_x, V_y) (on the Bible 1% of the dense table).
  * The corpus is flat "point" arrays, one point per (row, distinct source word or NULL) of
    the same pair; a point knows its row r, its multiplicity c_x and its table entry e. Sorted
    by entry, reading t is sequential. `index_bitext` builds them with a few sorts and no
    Python loop over sentences (one packed int64 sort instead of gathers): plumbing, written
    for speed.
Then, with Z_r = Σ_points of r c_x t(y | x) and the row weight w_r (k_y, or 1 in NLTK mode),

    E-step:  count(x, y) = t(y | x) · Σ_points of (x, y) c_x w_r / Z_r        (two bincounts)
    M-step:  t(y | x) = count(x, y) / Σ_y' count(x, y')                      (one bincount)

— no Python loop over sentences. The torch twins use index_add_ where NumPy uses bincount.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain, count

import numpy as np
import torch

from .. import checks as c
from ..checks import check_covered, check_sentences
from ..contract import checked
from ..ibm1 import MIN_PROB, NULL

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


@checked(rules=[c.corpus_pairs])
def index_bitext(sources, targets, null: bool = True) -> IndexedBitext:
    """Index a parallel corpus: sources[m] (input x^m) and targets[m] (output y^m) are token
    lists. Vocabularies in first-seen order, as ibm1.make_bitext: the same word ids."""
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


@checked(mode="one of textbook, nltk", rules=[c.table_fits])
def target_weights_np(indexed: IndexedBitext, mode: str = "textbook") -> np.ndarray:
    """(R,) weight of each target row: its count k (textbook: every token counts) or 1 (nltk:
    the k tokens of a repeated word share one count, 1/k each)."""
    return indexed.row_count.astype(float) if mode == "textbook" else np.ones(len(indexed.row_word))


# ============================================================================ NumPy
@checked(rules=[c.table_fits])
def uniform_table_fast_np(indexed: IndexedBitext) -> np.ndarray:
    """(E,) the starting table t(y | x) = 1/|V_y| at every stored entry."""
    return np.full(len(indexed.entry_src), 1.0 / len(indexed.tgt_vocab))


@checked(rules=[c.table_fits])
def count_table_fast_np(indexed: IndexedBitext) -> np.ndarray:
    """(E,) ibm1.count_table_np at the stored entries: a point adds k_y · c_x / |x^m|."""
    per_row = indexed.row_count / indexed.width                                   # (R,) k_y / |x^m|
    weights = indexed.point_mult * np.take(per_row, indexed.point_row)            # (P,)
    return np.bincount(indexed.point_entry, weights=weights, minlength=len(indexed.entry_src))


@checked(t="float* (E,)", mode="one of textbook, nltk", rules=[c.table_fits])
def e_step_fast_np(t: np.ndarray, indexed: IndexedBitext, mode: str = "textbook"):
    """ibm1.e_step_np on the sparse table: returns (counts (E,), log-likelihood)."""
    w = target_weights_np(indexed, mode)                                     # (R,)
    # (the indices are valid by construction: mode="clip" skips NumPy's buffered bounds check)
    p = np.take(t, indexed.point_entry, out=indexed.scratch("p"), mode="clip")   # (P,) t(y | x)
    p *= indexed.point_mult                                   # c_x t(y | x)  (in place: P is big)
    Z = np.bincount(indexed.point_row, weights=p, minlength=len(w))                # (R,)
    share = np.take(w / Z, indexed.point_row, out=indexed.scratch("share"), mode="clip")
    share *= indexed.point_mult                                   # (P,) c_x w_r / Z_r
    counts = t * np.bincount(indexed.point_entry, weights=share, minlength=len(t))
    loglik = float(w @ np.log(Z / indexed.width))
    check_covered(t, loglik)
    return counts, loglik


@checked(counts="float* (E,)", rules=[c.table_fits])
def m_step_fast_np(counts: np.ndarray, indexed: IndexedBitext, floor: float = 0.0) -> np.ndarray:
    """ibm1.m_step_np on the sparse table (every stored entry has a count > 0)."""
    # BEGIN EXERCISE 6.2 implement: M-step: normalise each source word's counts (~5 min)
    total = np.bincount(indexed.entry_src, weights=counts,
                        minlength=len(indexed.src_vocab))                          # (V_x,)
    t = counts / np.take(total, indexed.entry_src)
    return np.maximum(t, floor, out=t)
    # END EXERCISE


@checked(iterations="int", mode="one of textbook, nltk", rules=[c.table_fits])
def em_fast_np(indexed: IndexedBitext, iterations: int, mode: str = "textbook",
               t: np.ndarray | None = None):
    """ibm1.em_np: returns (t (E,), log-likelihood before each step)."""
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = uniform_table_fast_np(indexed) if t is None else t
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_fast_np(t, indexed, mode)
        t = m_step_fast_np(counts, indexed, floor)
        history.append(loglik)
    return t, history


@checked(t="float* (E,)", rules=[c.table_fits])
def viterbi_fast_np(t: np.ndarray, indexed: IndexedBitext) -> np.ndarray:
    """(T,) ibm1.viterbi_np for all target tokens at once (its per-pair arrays,
    concatenated)."""
    # in EM order (reading t is sequential); max is exact, so the order does not matter
    p = np.take(t, indexed.point_entry, out=indexed.scratch("p"), mode="clip")           # (P,)
    best = np.full(len(indexed.row_word), -np.inf)
    np.maximum.at(best, indexed.point_row, p)                                         # (R,)
    at_max = p >= np.take(best, indexed.point_row, out=indexed.scratch("share"),
                          mode="clip")                                              # (P,)
    # among the points at the maximum, the latest source position (NULL is -1: it loses ties)
    choice = np.full(len(indexed.row_word), -2, np.int32)
    np.maximum.at(choice, indexed.point_row[at_max], indexed.point_last[at_max])           # (R,)
    return choice[indexed.tgt_tok_row]


def split_pairs_np(a: np.ndarray, indexed: IndexedBitext) -> list[np.ndarray]:
    """(T,) per-token values -> one array per pair (the format of ibm1.viterbi_np)."""
    return np.split(a, indexed.tgt_start[1:-1])


@checked(m="int", rules=[c.table_fits])
def position_entries_np(indexed: IndexedBitext, m: int) -> np.ndarray:
    """(|y^m|, null + |x^m|) table entry of every (target position, source position) of pair m;
    column 0 is NULL when `indexed.null`."""
    rows = indexed.tgt_tok_row[indexed.tgt_start[m]:indexed.tgt_start[m + 1]]
    cols = indexed.src_tok_bag[indexed.src_start[m]:indexed.src_start[m + 1]] + int(indexed.null)
    if indexed.null:
        cols = np.concatenate([[0], cols])
    return indexed.seg_entry[indexed.seg_start[rows][:, None] + cols[None, :]]


@checked(t="float* (E,)", m="int", rules=[c.table_fits])
def alignment_matrix_fast_np(t: np.ndarray, indexed: IndexedBitext, m: int) -> np.ndarray:
    """(|y^m|, null + |x^m|) ibm1.alignment_matrix_np of pair m, read from the sparse table."""
    p = t[position_entries_np(indexed, m)]
    if not (p.sum(axis=1) > 0).all():
        check_covered(t, -np.inf)   # a target token t gives probability 0 from every word
    return p / p.sum(axis=1, keepdims=True)


@checked(values="float* (E,)", rules=[c.table_fits])
def to_dense_np(values: np.ndarray, indexed: IndexedBitext) -> np.ndarray:
    """(V_x, V_y) dense copy of a sparse table (0 off the support; row 0 = NULL): the format
    of the reference's tables. Only for small vocabularies (or a few rows: see rows_np)."""
    dense = np.zeros((len(indexed.src_vocab), len(indexed.tgt_vocab)))
    dense[indexed.entry_src, indexed.entry_tgt] = values
    return dense


@checked(values="float* (E,)", rules=[c.table_fits])
def rows_np(values: np.ndarray, indexed: IndexedBitext, words) -> np.ndarray:
    """(len(words), V_y) the dense rows of a sparse table for some source words."""
    out = np.zeros((len(words), len(indexed.tgt_vocab)))
    for k, x in enumerate(words):
        hits = indexed.entry_src == indexed.src_index[x]
        out[k, indexed.entry_tgt[hits]] = values[hits]
    return out


def entry_index(indexed: IndexedBitext, x, y) -> int | None:
    """Position of t(y | x) in the sparse table, or None when x and y never co-occur."""
    sx, sy = indexed.src_index.get(x), indexed.tgt_index.get(y)
    if sx is None or sy is None:
        return None
    hits = np.flatnonzero((indexed.entry_src == sx) & (indexed.entry_tgt == sy))
    return int(hits[0]) if len(hits) else None


@checked(t="float* (E,)", k="int", rules=[c.table_fits])
def top_translations_fast_np(t: np.ndarray, indexed: IndexedBitext, x, k: int = 3) -> list[tuple]:
    """ibm1.top_translations_np on the sparse table: [(y, t(y | x)), ...]."""
    rows = np.flatnonzero(indexed.entry_src == indexed.src_index[x])
    best = rows[np.argsort(-t[rows], kind="stable")[:k]]
    return [(indexed.tgt_vocab[indexed.entry_tgt[e]], float(t[e])) for e in best]


def nltk_table_fast_np(model, indexed: IndexedBitext) -> np.ndarray:
    """(E,) NLTK's translation_table[y][x] read at our stored entries."""
    table = model.translation_table
    return np.array([table[indexed.tgt_vocab[y]][indexed.src_vocab[x]]
                     for x, y in zip(indexed.entry_src, indexed.entry_tgt)])


# ============================================================================ PyTorch twins
def tensors_torch(indexed: IndexedBitext, device=None) -> dict[str, torch.Tensor]:
    """The index arrays an EM step reads, as torch tensors on `device` (cached on indexed)."""
    key = f"torch:{torch.device(device or 'cpu')}"
    if key not in indexed.cache:
        def as_t(a, dt=torch.int64):
            return torch.as_tensor(np.asarray(a), dtype=dt, device=device)
        indexed.cache[key] = dict(
            point_entry=as_t(indexed.point_entry), point_row=as_t(indexed.point_row),
            point_mult=as_t(indexed.point_mult, torch.float64), entry_src=as_t(indexed.entry_src),
            width=as_t(indexed.width, torch.float64),
            row_count=as_t(indexed.row_count, torch.float64))
    return indexed.cache[key]


@checked(t="float* (E,)", mode="one of textbook, nltk", rules=[c.table_fits])
def e_step_fast_torch(t: torch.Tensor, indexed: IndexedBitext, mode: str = "textbook"):
    """e_step_fast_np in torch (index_add_ plays np.bincount); returns (counts, loglik tensor)."""
    b = tensors_torch(indexed, t.device)
    w = b["row_count"] if mode == "textbook" else torch.ones_like(b["row_count"])
    p = t[b["point_entry"]] * b["point_mult"]
    Z = torch.zeros_like(w).index_add_(0, b["point_row"], p)
    share = (w / Z)[b["point_row"]] * b["point_mult"]
    counts = t * torch.zeros_like(t).index_add_(0, b["point_entry"], share)
    loglik = w @ torch.log(Z / b["width"])
    check_covered(t, loglik)
    return counts, loglik


@checked(counts="float* (E,)", rules=[c.table_fits])
def m_step_fast_torch(counts: torch.Tensor, indexed: IndexedBitext,
                      floor: float = 0.0) -> torch.Tensor:
    """m_step_fast_np in torch."""
    # BEGIN EXERCISE 6.2 implement: M-step: normalise each source word's counts (~5 min)
    entry_src = tensors_torch(indexed, counts.device)["entry_src"]
    total = torch.zeros(len(indexed.src_vocab), dtype=counts.dtype, device=counts.device)
    total.index_add_(0, entry_src, counts)
    return torch.clamp_min(counts / total[entry_src], floor)
    # END EXERCISE


@checked(iterations="int", mode="one of textbook, nltk", rules=[c.table_fits])
def em_fast_torch(indexed: IndexedBitext, iterations: int, mode: str = "textbook", device=None):
    """em_fast_np in torch (float64); returns (t as a NumPy array, log-likelihoods)."""
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = torch.as_tensor(uniform_table_fast_np(indexed), device=device)
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_fast_torch(t, indexed, mode)
        t = m_step_fast_torch(counts, indexed, floor)
        history.append(loglik)
    return t.cpu().numpy(), [float(h) for h in history]
