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
points would give the same numbers; bags are 1.8x fewer points on the Bible.) Building those
arrays from token lists (`make_bitext`, `Bitext`) lives in `minattn/bitext.py`.

Two modes (`mode=`):
    "textbook": every target token counts once; no floor.
    "nltk":     reproduces `nltk.translate.IBMModel1` exactly: NULL always on, start value
                1/|target vocabulary|, M-step floor 1e-12, and a target word repeated k times
                in one sentence counts once (NLTK normalises per word type: each of the k
                tokens gets weight 1/k). Off the co-occurrence support NLTK's table
                still answers 1/|V_y| (never updated); ours stores nothing there.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .bitext import MODES, NULL, Bitext, _check_table, make_bitext, target_weights  # noqa: F401
from .tools.utils import fail

MIN_PROB = 1e-12   # NLTK's M-step floor (IBMModel.MIN_PROB)



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
