"""IBM Model 1, fast: the same EM as `reference.py` as two `np.bincount`s over the corpus.

Read `reference.py` first: it is the reference, and the tests check that this file gives
the same tables, likelihoods, posteriors and Viterbi alignments (float64, ~1e-12).
Direction as there: source x = input (English), target y = output (German), t(y | x).

What changes for speed:
  * Model 1 ignores word order, so a pair is two BAGS of words: its distinct target words y
    (with counts k_y; one "row" each) and its distinct source words x (with counts c_x).
  * The table is SPARSE: one entry per (x, y) that co-occur somewhere — (E,) instead of
    (V_x, V_y) (on the Bible 1% of the dense table).
  * The corpus is flat "point" arrays (`index.index_bitext`), one point per (row,
    distinct source word or NULL) of the same pair; a point knows its row r, its multiplicity
    c_x and its table entry e. Sorted by entry, reading t is sequential.
Then, with Z_r = Σ_points of r c_x t(y | x) and the row weight w_r (k_y, or 1 in NLTK mode),

    E-step:  count(x, y) = t(y | x) · Σ_points of (x, y) c_x w_r / Z_r        (two bincounts)
    M-step:  t(y | x) = count(x, y) / Σ_y' count(x, y')                      (one bincount)

— no Python loop over sentences. The torch twins use index_add_ where NumPy uses bincount.
"""

from __future__ import annotations

import numpy as np
import torch

from ..checks import check_array, check_finite, check_number, check_size, describe, fail
from .index import IndexedBitext
from .reference import (
    MIN_PROB,
    check_bitext,
    check_covered,
    check_mode,
    check_nonnegative,
    check_pair_index,
)


def check_sparse_table(t, indexed: IndexedBitext, name: str = "t") -> None:
    """Raise unless t holds one float value per stored entry of this corpus, finite and >= 0
    (probabilities, or counts for the M-step)."""
    check_bitext(indexed)
    check_array(name, t, "float", hint=f"({len(indexed.entry_src)},)")
    if t.ndim != 1 or t.shape[0] != len(indexed.entry_src):
        fail(f"{name}: translation table does not fit the corpus",
             f"one value per stored entry, shape ({len(indexed.entry_src)},)",
             f"shape {tuple(t.shape)}")
    check_finite(name, t)
    check_nonnegative(name, t)


def target_weights_np(indexed: IndexedBitext, mode: str = "textbook") -> np.ndarray:
    """(R,) weight of each target row: its count k (textbook: every token counts) or 1 (nltk:
    the k tokens of a repeated word share one count, 1/k each)."""
    check_mode(mode, indexed)
    return indexed.row_count.astype(float) if mode == "textbook" else np.ones(len(indexed.row_word))


# ============================================================================ NumPy
def uniform_table_fast_np(indexed: IndexedBitext) -> np.ndarray:
    """(E,) the starting table t(y | x) = 1/|V_y| at every stored entry."""
    return np.full(len(indexed.entry_src), 1.0 / len(indexed.tgt_vocab))


def count_table_fast_np(indexed: IndexedBitext) -> np.ndarray:
    """(E,) reference.count_table_np at the stored entries: a point adds k_y · c_x / |x^m|."""
    per_row = indexed.row_count / indexed.width                                   # (R,) k_y / |x^m|
    weights = indexed.point_mult * np.take(per_row, indexed.point_row)            # (P,)
    return np.bincount(indexed.point_entry, weights=weights, minlength=len(indexed.entry_src))


def e_step_fast_np(t: np.ndarray, indexed: IndexedBitext, mode: str = "textbook"):
    """reference.e_step_np on the sparse table: returns (counts (E,), log-likelihood)."""
    check_sparse_table(t, indexed)
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


def m_step_fast_np(counts: np.ndarray, indexed: IndexedBitext, floor: float = 0.0) -> np.ndarray:
    """reference.m_step_np on the sparse table (every stored entry has a count > 0)."""
    check_sparse_table(counts, indexed, "counts")
    check_number("floor", floor, low=0.0, high=1.0)
    # BEGIN EXERCISE 6.2 implement: M-step: normalise each source word's counts (~5 min)
    total = np.bincount(indexed.entry_src, weights=counts,
                        minlength=len(indexed.src_vocab))                          # (V_x,)
    t = counts / np.take(total, indexed.entry_src)
    return np.maximum(t, floor, out=t)
    # END EXERCISE


def em_fast_np(indexed: IndexedBitext, iterations: int, mode: str = "textbook",
               t: np.ndarray | None = None):
    """reference.em_np: returns (t (E,), log-likelihood before each step)."""
    check_bitext(indexed)
    iterations = check_size("iterations", iterations)
    check_mode(mode, indexed)
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = uniform_table_fast_np(indexed) if t is None else t
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_fast_np(t, indexed, mode)
        t = m_step_fast_np(counts, indexed, floor)
        history.append(loglik)
    return t, history


def viterbi_fast_np(t: np.ndarray, indexed: IndexedBitext) -> np.ndarray:
    """(T,) reference.viterbi_np for all target tokens at once (its per-pair arrays,
    concatenated)."""
    check_sparse_table(t, indexed)
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
    """(T,) per-token values -> one array per pair (the format of reference.viterbi_np)."""
    return np.split(a, indexed.tgt_start[1:-1])


def position_entries_np(indexed: IndexedBitext, m: int) -> np.ndarray:
    """(|y^m|, null + |x^m|) table entry of every (target position, source position) of pair m;
    column 0 is NULL when `indexed.null`."""
    check_bitext(indexed)
    m = check_pair_index(m, len(indexed.src_start) - 1)
    rows = indexed.tgt_tok_row[indexed.tgt_start[m]:indexed.tgt_start[m + 1]]
    cols = indexed.src_tok_bag[indexed.src_start[m]:indexed.src_start[m + 1]] + int(indexed.null)
    if indexed.null:
        cols = np.concatenate([[0], cols])
    return indexed.seg_entry[indexed.seg_start[rows][:, None] + cols[None, :]]


def alignment_matrix_fast_np(t: np.ndarray, indexed: IndexedBitext, m: int) -> np.ndarray:
    """(|y^m|, null + |x^m|) reference.alignment_matrix_np of pair m, read from the sparse table."""
    check_sparse_table(t, indexed)
    p = t[position_entries_np(indexed, m)]
    if not (p.sum(axis=1) > 0).all():
        check_covered(t, -np.inf)
    return p / p.sum(axis=1, keepdims=True)


def to_dense_np(values: np.ndarray, indexed: IndexedBitext) -> np.ndarray:
    """(V_x, V_y) dense copy of a sparse table (0 off the support; row 0 = NULL): the format
    of the reference's tables. Only for small vocabularies (or a few rows: see rows_np)."""
    check_sparse_table(values, indexed)
    dense = np.zeros((len(indexed.src_vocab), len(indexed.tgt_vocab)))
    dense[indexed.entry_src, indexed.entry_tgt] = values
    return dense


def rows_np(values: np.ndarray, indexed: IndexedBitext, words) -> np.ndarray:
    """(len(words), V_y) the dense rows of a sparse table for some source words."""
    check_sparse_table(values, indexed, "values")
    unknown = [x for x in words if x not in indexed.src_index]
    if isinstance(words, str) or unknown:
        fail("words", "a list of words of the source vocabulary",
             describe(words) if isinstance(words, str) else f"unknown words {unknown[:5]}")
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


def top_translations_fast_np(t: np.ndarray, indexed: IndexedBitext, x, k: int = 3) -> list[tuple]:
    """reference.top_translations_np on the sparse table: [(y, t(y | x)), ...]."""
    check_sparse_table(t, indexed)
    k = check_size("k", k)
    if x not in indexed.src_index:
        fail("unknown source word", "a word of the source vocabulary", repr(x))
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
        as_t = lambda a, dt=torch.int64: torch.as_tensor(np.asarray(a), dtype=dt, device=device)
        indexed.cache[key] = dict(
            point_entry=as_t(indexed.point_entry), point_row=as_t(indexed.point_row),
            point_mult=as_t(indexed.point_mult, torch.float64), entry_src=as_t(indexed.entry_src),
            width=as_t(indexed.width, torch.float64),
            row_count=as_t(indexed.row_count, torch.float64))
    return indexed.cache[key]


def e_step_fast_torch(t: torch.Tensor, indexed: IndexedBitext, mode: str = "textbook"):
    """e_step_fast_np in torch (index_add_ plays np.bincount); returns (counts, loglik tensor)."""
    check_sparse_table(t, indexed)
    check_array("t", t, "float", like=torch.Tensor)
    check_mode(mode, indexed)
    b = tensors_torch(indexed, t.device)
    w = b["row_count"] if mode == "textbook" else torch.ones_like(b["row_count"])
    p = t[b["point_entry"]] * b["point_mult"]
    Z = torch.zeros_like(w).index_add_(0, b["point_row"], p)
    share = (w / Z)[b["point_row"]] * b["point_mult"]
    counts = t * torch.zeros_like(t).index_add_(0, b["point_entry"], share)
    loglik = w @ torch.log(Z / b["width"])
    check_covered(t, loglik)
    return counts, loglik


def m_step_fast_torch(counts: torch.Tensor, indexed: IndexedBitext,
                      floor: float = 0.0) -> torch.Tensor:
    """m_step_fast_np in torch."""
    check_sparse_table(counts, indexed, "counts")
    check_array("counts", counts, "float", like=torch.Tensor)
    check_number("floor", floor, low=0.0, high=1.0)
    # BEGIN EXERCISE 6.2 implement: M-step: normalise each source word's counts (~5 min)
    entry_src = tensors_torch(indexed, counts.device)["entry_src"]
    total = torch.zeros(len(indexed.src_vocab), dtype=counts.dtype, device=counts.device)
    total.index_add_(0, entry_src, counts)
    return torch.clamp_min(counts / total[entry_src], floor)
    # END EXERCISE


def em_fast_torch(indexed: IndexedBitext, iterations: int, mode: str = "textbook", device=None):
    """em_fast_np in torch (float64); returns (t as a NumPy array, log-likelihoods)."""
    check_bitext(indexed)
    iterations = check_size("iterations", iterations)
    check_mode(mode, indexed)
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = torch.as_tensor(uniform_table_fast_np(indexed), device=device)
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_fast_torch(t, indexed, mode)
        t = m_step_fast_torch(counts, indexed, floor)
        history.append(loglik)
    return t.cpu().numpy(), [float(h) for h in history]
