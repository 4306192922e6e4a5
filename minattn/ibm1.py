"""IBM Model 1 and the bag-of-words proxy — NumPy reference, then PyTorch.

Direction, stated once and kept everywhere in the course:
    source x = the INPUT sentence,  target y = the OUTPUT sentence,
    t(y | x) = "probability that input word x translates to output word y".
In lesson 06 x is English and y is German (as in the seed paper's Multi30k En→De models).
NLTK names them the other way round: `AlignedSent(words=target_y, mots=source_x)`, and its
`translation_table[y][x]` is t(y | x). The NULL source word is `None` (NLTK's choice too).

IBM Model 1 (Brown et al. 1993) on a corpus of pairs (x^m, y^m):

    p(y^m | x^m) ∝ Π_j (1/(l+1)) Σ_i t(y_j | x_i)          i over NULL + the l source words
    E-step:  post(i | j) = t(y_j | x_i) / Σ_i' t(y_j | x_i')      (alignment posterior)
             count(x, y) = Σ_m Σ_j Σ_i [x_i = x][y_j = y] post(i | j)
    M-step:  t(y | x) = count(x, y) / Σ_y' count(x, y')

Model 1 ignores word order, so a sentence pair is two BAGS of words: its distinct target
words y (with their counts k_y) and its distinct source words x (with their counts c_x). The
EM runs on flat "point" arrays, one per (distinct target word, distinct source word or NULL)
of the same pair: a point knows its target row, its multiplicity c_x and its entry in the
SPARSE table (only co-occurring (x, y) are stored). One EM iteration is then a gather and two
np.bincount calls over the whole corpus — no Python loop over sentences. (Per-position
points would give the same numbers; bags are 1.8x fewer points on the Bible.)

Two modes (`mode=`):
    "textbook": every target token counts once; no floor.
    "nltk":     reproduces `nltk.translate.IBMModel1` exactly: NULL always on, start value
                1/|target vocabulary|, M-step floor 1e-12, and a target word repeated k times
                in one sentence counts once (NLTK normalises per word type: each of the k
                tokens gets weight 1/k). Off the co-occurrence support NLTK's table
                still answers 1/|V_y| (never updated); ours stores nothing there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain, count

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .utils import fail

NULL = None        # the NULL source word (src_vocab[0] is always NULL, used or not)
MIN_PROB = 1e-12   # NLTK's M-step floor (IBMModel.MIN_PROB)
MODES = ("textbook", "nltk")
PACK_BITS = 63     # bits of one packed int64 sort key (the sign bit stays clear)


# ============================================================================ the corpus
@dataclass
class Bitext:
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
        """(C,) the columns' values (see make_bitext) and (P,) the column of each point."""
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
        for m, sent in enumerate(sentences):
            if isinstance(sent, str) or not hasattr(sent, "__len__"):
                fail(f"{side} sentence {m} is not a token list", "a list of tokens, e.g. s.split()",
                     f"{type(sent).__name__} {str(sent)[:40]!r}")
            if len(sent) == 0:
                fail(f"{side} sentence {m} is empty", "at least one token per sentence", "[]")
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


def make_bitext(sources, targets, null: bool = True) -> Bitext:
    """Index a parallel corpus: sources[m] (input x^m) and targets[m] (output y^m) are token lists."""
    sources, targets = list(sources), list(targets)
    if len(sources) != len(targets):
        fail("sources and targets must pair up", "as many target sentences as source sentences",
             f"{len(sources)} sources, {len(targets)} targets")
    if len(sources) == 0:
        fail("empty corpus", "at least one sentence pair", "0 pairs")
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
    return Bitext(src_vocab, tgt_vocab, bool(null), src_ids, src_start, tgt_ids,
                  tgt_start, sb_word, sb_count, sb_last, sb_start,
                  src_item - np.repeat(sb_start[:-1], np.diff(src_start)),
                  row_word, row_count, row_pair, row_start, tgt_tok_row,
                  point_entry, point_row, point_mult, point_last, seg_start,
                  (uniq // n_tgt).astype(np.int32), (uniq % n_tgt).astype(np.int32))


def target_weights(bx: Bitext, mode: str = "textbook") -> np.ndarray:
    """(R,) weight of each target row: its count k (textbook: every token counts) or 1 (nltk)."""
    if mode not in MODES:
        fail("unknown mode", f"one of {MODES}", repr(mode))
    return bx.row_count.astype(float) if mode == "textbook" else np.ones(len(bx.row_word))


def _check_table(t, bx: Bitext) -> None:
    if t.ndim != 1 or t.shape[0] != len(bx.entry_src):
        fail("translation table does not fit the corpus",
             f"one value per stored entry, shape ({len(bx.entry_src)},)", f"shape {tuple(t.shape)}")


# ============================================================================ NumPy reference
def uniform_table(bx: Bitext) -> np.ndarray:
    """(E,) the starting table t(y | x) = 1/|V_y| (NLTK's start; any constant gives the same EM)."""
    return np.full(len(bx.entry_src), 1.0 / len(bx.tgt_vocab))


def count_table_np(bx: Bitext) -> np.ndarray:
    """(E,) the co-occurrence count table C(x, y) of the seed paper (MATH.md item 7).

    For every pair, every target token y and every source token x add 1/|x^m| to C(x, y):
    a point adds k_y · c_x / |x^m|. With `bx.null` the NULL word is one more source token of
    every sentence (1/(|x^m|+1)).
    """
    per_row = bx.row_count / bx.width                                   # (R,) k_y / |x^m|
    return np.bincount(bx.point_entry, weights=bx.point_mult * np.take(per_row, bx.point_row),
                       minlength=len(bx.entry_src))


def e_step_np(t: np.ndarray, bx: Bitext, weights: np.ndarray | None = None):
    """Expected counts under the table t, and the (weighted) log-likelihood of t.

    For a target word y of pair m, Z = Σ_i t(y | x_i) over the positions i (NULL included) =
    Σ_x c_x t(y | x) over its bag; the posterior of position i is t(y | x_i) / Z. Summing the
    posteriors of the c_x positions holding x, the expected count of entry (x, y) is

        count(x, y) = Σ_rows w_r c_x t(y | x) / Z_r  =  t(y | x) · Σ_points of (x,y) c_x w_r / Z_r

    Args:
        t: (E,) current t(y | x);  weights: (R,) per target row (target_weights; default k).
    Returns:
        counts (E,);  loglik = Σ_r w_r log p(y_r | x^m) with p(y | x^m) = Z / (|x^m| + null)
    """
    _check_table(t, bx)
    weights = bx.row_count.astype(float) if weights is None else np.asarray(weights, float)
    if weights.shape != bx.row_word.shape:
        fail("weights do not fit the corpus", f"one per target row, shape {bx.row_word.shape}",
             f"shape {weights.shape}")
    # BEGIN EXERCISE 6.1 E-step: normalisers Z, expected counts, log-likelihood
    # (the indices are valid by construction: mode="clip" skips NumPy's buffered bounds check)
    p = np.take(t, bx.point_entry, out=bx.scratch("p"), mode="clip")   # (P,) t(y | x)
    p *= bx.point_mult                                       # c_x t(y | x)  (in place: P is big)
    Z = np.bincount(bx.point_row, weights=p, minlength=len(weights))          # (R,)
    share = np.take(weights / Z, bx.point_row, out=bx.scratch("share"), mode="clip")
    share *= bx.point_mult                                   # (P,) c_x w_r / Z_r
    counts = t * np.bincount(bx.point_entry, weights=share, minlength=len(t))
    loglik = float(weights @ np.log(Z / bx.width))
    return counts, loglik
    # END EXERCISE


def m_step_np(counts: np.ndarray, bx: Bitext, floor: float = 0.0) -> np.ndarray:
    """t(y | x) = counts(x, y) / Σ_y' counts(x, y'), then max(., floor) (NLTK uses 1e-12)."""
    _check_table(counts, bx)
    # BEGIN EXERCISE 6.2 M-step: normalise the counts of each source word x over y
    total = np.bincount(bx.entry_src, weights=counts, minlength=len(bx.src_vocab))   # (V_x,)
    t = counts / np.take(total, bx.entry_src)
    return np.maximum(t, floor, out=t)
    # END EXERCISE


def em_np(bx: Bitext, iterations: int, mode: str = "textbook", t: np.ndarray | None = None):
    """Run EM; returns (t (E,), log-likelihoods of the table before each iteration)."""
    if mode == "nltk" and not bx.null:
        fail("NLTK mode needs the NULL word", "make_bitext(..., null=True)", "null=False")
    weights = target_weights(bx, mode)
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = uniform_table(bx) if t is None else t
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_np(t, bx, weights)
        t = m_step_np(counts, bx, floor)
        history.append(loglik)
    return t, history


def sentence_log_prob_np(t: np.ndarray, bx: Bitext) -> np.ndarray:
    """(M,) log p(y^m | x^m) = Σ_j log((1/(l+null)) Σ_i t(y_j | x_i))  (no length term)."""
    _check_table(t, bx)
    Z = np.add.reduceat(t[bx.seg_entry] * bx.seg_mult, bx.seg_start[:-1])         # (R,)
    per_row = bx.row_count * np.log(Z / bx.width)
    return np.bincount(bx.row_pair, weights=per_row, minlength=bx.n_pairs)


def viterbi_np(t: np.ndarray, bx: Bitext) -> np.ndarray:
    """(T,) best source position for each target token (0-based in x^m; -1 = NULL).

    Ties go to the later source position and a source word beats NULL in a tie (NLTK's rule).
    Two words that always co-occur have equal t in exact arithmetic; rounding (ours or NLTK's)
    can break such a tie either way, so there the choice may differ from NLTK's.
    """
    _check_table(t, bx)
    # in EM order (reading t is sequential); max is exact, so the order does not matter
    p = np.take(t, bx.point_entry, out=bx.scratch("p"), mode="clip")           # (P,)
    best = np.full(len(bx.row_word), -np.inf)
    np.maximum.at(best, bx.point_row, p)                                         # (R,)
    at_max = p >= np.take(best, bx.point_row, out=bx.scratch("share"), mode="clip")   # (P,)
    # among the points at the maximum, the latest source position (NULL is -1: it loses ties)
    choice = np.full(len(bx.row_word), -2, np.int32)
    np.maximum.at(choice, bx.point_row[at_max], bx.point_last[at_max])           # (R,)
    return choice[bx.tgt_tok_row]


def alignments(bx: Bitext, a: np.ndarray) -> list[list[tuple]]:
    """Split viterbi_np's output per pair as NLTK does: [(j, i or None), ...]."""
    return [[(j, None if i < 0 else int(i)) for j, i in enumerate(a[s:e])]
            for s, e in zip(bx.tgt_start[:-1], bx.tgt_start[1:])]


def position_entries(bx: Bitext, m: int) -> np.ndarray:
    """(|y^m|, null + |x^m|) table entry of every (target position, source position) of pair m;
    column 0 is NULL when `bx.null`."""
    rows = bx.tgt_tok_row[bx.tgt_start[m]:bx.tgt_start[m + 1]]
    cols = bx.src_tok_bag[bx.src_start[m]:bx.src_start[m + 1]] + int(bx.null)
    if bx.null:
        cols = np.concatenate([[0], cols])
    return bx.seg_entry[bx.seg_start[rows][:, None] + cols[None, :]]


def alignment_matrix_np(t: np.ndarray, bx: Bitext, m: int) -> np.ndarray:
    """(|y^m|, null + |x^m|) alignment posteriors a_ji of pair m: row j sums to 1."""
    _check_table(t, bx)
    p = t[position_entries(bx, m)]
    return p / p.sum(axis=1, keepdims=True)


def to_dense(values: np.ndarray, bx: Bitext) -> np.ndarray:
    """(V_x, V_y) dense copy of a sparse table (row 0 = NULL); only for small vocabularies."""
    _check_table(values, bx)
    dense = np.zeros((len(bx.src_vocab), len(bx.tgt_vocab)))
    dense[bx.entry_src, bx.entry_tgt] = values
    return dense


def entry_index(bx: Bitext, x, y) -> int | None:
    """Position of t(y | x) in the sparse table, or None when x and y never co-occur."""
    sx, sy = bx.src_index.get(x), bx.tgt_index.get(y)
    if sx is None or sy is None:
        return None
    hits = np.flatnonzero((bx.entry_src == sx) & (bx.entry_tgt == sy))
    return int(hits[0]) if len(hits) else None


def top_translations(t: np.ndarray, bx: Bitext, x, k: int = 3) -> list[tuple]:
    """The k most probable output words y for input word x: [(y, t(y | x)), ...]."""
    if x not in bx.src_index:
        fail("unknown source word", "a word of the source vocabulary", repr(x))
    rows = np.flatnonzero(bx.entry_src == bx.src_index[x])
    best = rows[np.argsort(-t[rows], kind="stable")[:k]]
    return [(bx.tgt_vocab[bx.entry_tgt[e]], float(t[e])) for e in best]


# ============================================================================ NLTK bridge
def nltk_bitext(sources, targets):
    """The same corpus for NLTK: AlignedSent(words=TARGET y, mots=SOURCE x) — note the order."""
    from nltk.translate import AlignedSent
    return [AlignedSent(list(y), list(x)) for x, y in zip(sources, targets)]


def table_from_nltk(model, bx: Bitext) -> np.ndarray:
    """(E,) NLTK's translation_table[y][x] read at our stored entries."""
    table = model.translation_table
    return np.array([table[bx.tgt_vocab[y]][bx.src_vocab[x]]
                     for x, y in zip(bx.entry_src, bx.entry_tgt)])


# ============================================================================ PyTorch
def bitext_tensors(bx: Bitext, mode: str = "textbook", device=None) -> dict[str, torch.Tensor]:
    """The arrays an EM step needs, as torch tensors on `device` (int64 indices, float64 values)."""
    as_t = lambda a, dt=torch.int64: torch.as_tensor(np.asarray(a), dtype=dt, device=device)
    return dict(point_entry=as_t(bx.point_entry), point_row=as_t(bx.point_row),
                point_mult=as_t(bx.point_mult, torch.float64), entry_src=as_t(bx.entry_src),
                width=as_t(bx.width, torch.float64),
                weights=as_t(target_weights(bx, mode), torch.float64),
                n_src=torch.tensor(len(bx.src_vocab)))


def em_step_torch(t: torch.Tensor, bt: dict[str, torch.Tensor], floor: float = 0.0):
    """One EM iteration (e_step_np then m_step_np) in torch; index_add_ plays np.bincount.

    Returns (new t (E,), log-likelihood of the old t as a 0-dim tensor). Runs where t lives.
    """
    if t.ndim != 1 or t.shape[0] != bt["entry_src"].shape[0]:
        fail("translation table does not fit the corpus",
             f"shape ({bt['entry_src'].shape[0]},)", f"shape {tuple(t.shape)}")
    p = t[bt["point_entry"]] * bt["point_mult"]
    Z = torch.zeros_like(bt["width"]).index_add_(0, bt["point_row"], p)
    share = (bt["weights"] / Z)[bt["point_row"]] * bt["point_mult"]
    counts = t * torch.zeros_like(t).index_add_(0, bt["point_entry"], share)
    total = torch.zeros(int(bt["n_src"]), dtype=t.dtype, device=t.device)
    total.index_add_(0, bt["entry_src"], counts)
    loglik = bt["weights"] @ torch.log(Z / bt["width"])
    return torch.clamp_min(counts / total[bt["entry_src"]], floor), loglik


def em_torch(bx: Bitext, iterations: int, mode: str = "textbook", device=None):
    """em_np in torch (float64); returns (t as a NumPy array, log-likelihoods)."""
    if mode == "nltk" and not bx.null:
        fail("NLTK mode needs the NULL word", "make_bitext(..., null=True)", "null=False")
    bt = bitext_tensors(bx, mode, device)
    t = torch.as_tensor(uniform_table(bx), device=device)
    floor = MIN_PROB if mode == "nltk" else 0.0
    history = []
    for _ in range(iterations):
        t, loglik = em_step_torch(t, bt, floor)
        history.append(loglik)
    return t.cpu().numpy(), [float(h) for h in history]


# ============================================================================ bag-of-words proxy
def bag_matrices(bx: Bitext) -> tuple[np.ndarray, np.ndarray]:
    """Dense per-pair bags: xbar (M, V_x) word frequencies of x^m (rows sum to 1, column 0 =
    NULL stays 0) and ycount (M, V_y) word counts of y^m. Small vocabularies only."""
    xbar = np.zeros((bx.n_pairs, len(bx.src_vocab)))
    src_pair = np.repeat(np.arange(bx.n_pairs), np.diff(bx.src_bag_start))
    xbar[src_pair, bx.src_bag_word] = bx.src_bag_count / np.diff(bx.src_start)[src_pair]
    ycount = np.zeros((bx.n_pairs, len(bx.tgt_vocab)))
    ycount[bx.row_pair, bx.row_word] = bx.row_count
    return xbar, ycount


class BagOfWordsProxy(nn.Module):
    """p(y | x^m) = softmax(W · (1/n) Σ_i E[x_i])  (MATH.md item 3): uniform attention over
    input embeddings, one linear layer, no decoder state. E and W start i.i.d. N(0, 1/d)."""

    def __init__(self, n_src: int, n_tgt: int, d: int):
        super().__init__()
        self.embed = nn.Parameter(torch.randn(n_src, d) / d ** 0.5)    # E: (V_x, d)
        self.out = nn.Parameter(torch.randn(n_tgt, d) / d ** 0.5)      # W: (V_y, d)

    def forward(self, xbar: torch.Tensor) -> torch.Tensor:
        """xbar: (B, V_x) bag of input words (rows sum to 1) -> logits (B, V_y)."""
        return (xbar @ self.embed) @ self.out.T

    def word_logits(self) -> torch.Tensor:
        """(V_x, V_y) θ(x, y) = w_y · e_x: the logit of y when the input is the single word x."""
        return self.embed @ self.out.T


def proxy_loss(model: BagOfWordsProxy, xbar, ycount) -> torch.Tensor:
    """-Σ_m Σ_j log p(y_j | x^m): summed (not averaged) over the corpus, as in the paper."""
    return -(ycount * F.log_softmax(model(xbar), dim=-1)).sum()


def proxy_logit_velocity(model: BagOfWordsProxy, xbar, ycount) -> torch.Tensor:
    """(V_x, V_y) dθ/dt under gradient flow (Ė = -∂L/∂E, Ẇ = -∂L/∂W) at the model's weights.

    θ = E Wᵀ, so dθ/dt = Ė Wᵀ + E Ẇᵀ = -(∂L/∂E Wᵀ + E (∂L/∂W)ᵀ).
    """
    gE, gW = torch.autograd.grad(proxy_loss(model, xbar, ycount), [model.embed, model.out])
    return -(gE @ model.out.T + model.embed @ gW.T).detach()


def proxy_prediction_np(counts: np.ndarray) -> np.ndarray:
    """The seed's prediction for dθ/dt at initialisation as d → ∞ (MATH.md item 7):

        2 · (C(x, y) − (1/|V_y|) Σ_y' C(x, y'))      counts: dense (V_x, V_y) table C

    The 2 is one term from Ẇ and one from Ė; each tends to C − mean_y C because at N(0, 1/d)
    e_x·e_x' → [x = x'], w_y·w_y' → [y = y'] and the softmax starts uniform.
    """
    return 2.0 * (counts - counts.mean(axis=1, keepdims=True))


def proxy_agreement(bx: Bitext, d: int, seed: int = 0) -> tuple[float, np.ndarray, np.ndarray]:
    """Correlation over all (x, y) of the proxy's measured dθ/dt at a fresh N(0, 1/d)
    initialisation with the prediction; returns (r, measured (V_x-1, V_y), predicted).
    r is nan when the prediction is constant (a flat count table, e.g. 40-of-40 copying)."""
    if bx.null:
        fail("the proxy has no NULL word", "make_bitext(..., null=False)", "null=True")
    xbar, ycount = (torch.as_tensor(a) for a in bag_matrices(bx))
    torch.manual_seed(seed)
    model = BagOfWordsProxy(xbar.shape[1], ycount.shape[1], d).double()
    measured = proxy_logit_velocity(model, xbar, ycount).numpy()[1:]      # drop the NULL row
    predicted = proxy_prediction_np(to_dense(count_table_np(bx), bx))[1:]
    with np.errstate(invalid="ignore", divide="ignore"):   # flat table: prediction 0, r = nan
        r = float(np.corrcoef(measured.ravel(), predicted.ravel())[0, 1])
    return r, measured, predicted


# ============================================================================ synthetic corpora
def dictionary_corpus(n_pairs: int, n_words: int, rng: np.random.Generator,
                      length=(4, 10), n_function: int = 0):
    """Pairs built from a hidden one-to-one dictionary x_k -> y_{π(k)}: each target sentence is
    the word-by-word translation of its source, shuffled, plus up to 2 target-only 'function
    words' f_* (nothing to align to but NULL). Words follow a Zipf law. Returns (src, tgt, π)."""
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


def permutation_corpus(n_pairs: int, n_types: int, n_vocab: int, rng: np.random.Generator,
                       offset: int = 0):
    """Copying data of seed §3.3: x = a random permutation of n_types words sampled from a vocabulary
    of n_vocab ('40-of-40' when equal, '40-of-60' control), and y = x."""
    src = [[f"w{offset + int(k):02d}" for k in rng.permutation(rng.choice(n_vocab, n_types,
                                                                          replace=False))]
           for _ in range(n_pairs)]
    return src, [list(s) for s in src]


def two_sets_corpus(n_pairs: int, n_types: int, rng: np.random.Generator):
    """Mixture of permutations of two disjoint word sets (seed §3.3): half of the pairs copy a
    permutation of w00..w(n-1), half one of wn..w(2n-1)."""
    a, _ = permutation_corpus(n_pairs // 2, n_types, n_types, rng)
    b, _ = permutation_corpus(n_pairs - n_pairs // 2, n_types, n_types, rng, offset=n_types)
    order = rng.permutation(n_pairs)
    src = [(a + b)[i] for i in order]
    return src, [list(s) for s in src]


# ============================================================================ plots (lessons 05, 06)
def plot_table(ax, table, src_labels, tgt_labels, title=None, vmax=None):
    """A (V_x, V_y) count or translation table: rows = source words x, columns = target words y."""
    from .lesson import heatmap

    im = heatmap(ax, table, xlabels=tgt_labels, ylabels=src_labels, title=title, vmax=vmax)
    ax.set_xlabel("target y (output)")
    ax.set_ylabel("source x (input)")
    return im


def plot_alignment(ax, matrix, src_tokens, tgt_tokens, title=None, null: bool | None = None):
    """A (|y|, |x|) alignment (or attention) matrix: rows = target positions (queries),
    columns = source positions (keys), the orientation of every attention map in the course.
    `null` (default: inferred from the width) prepends a NULL column label."""
    from .lesson import heatmap

    src_tokens = list(src_tokens)
    if null or (null is None and np.shape(matrix)[1] == len(src_tokens) + 1):
        src_tokens = ["NULL"] + src_tokens
    im = heatmap(ax, matrix, xlabels=src_tokens, ylabels=list(tgt_tokens), title=title, vmax=1.0)
    ax.set_xlabel("source x (input)")
    ax.set_ylabel("target y (output)")
    return im
