"""IBM Model 1 — the readable NumPy reference, then its PyTorch twin (the proxy: `proxy.py`).

Direction, stated once for the whole course:
    source x = the INPUT sentence (English in lesson 06),
    target y = the OUTPUT sentence (German in lesson 06),
    t(y | x) = probability that input word x translates to output word y,
and the NULL source word is `None` with id 0 (NLTK's choice too).

IBM Model 1 (Brown et al. 1993) on a corpus of pairs (x^m, y^m): each output word y_j picks
an input position i uniformly (NULL included) and is translated from x_i:

    p(y^m | x^m) = Π_j (1/(l+1)) Σ_i t(y_j | x_i)                   i over NULL + the l input words
    E-step:  a_ji = t(y_j | x_i) / Σ_i' t(y_j | x_i')               (alignment posterior)
             count(x, y) = Σ_m Σ_j Σ_i [x_i = x][y_j = y] a_ji
    M-step:  t(y | x) = count(x, y) / Σ_y' count(x, y')

Tables here are DENSE (V_x, V_y) arrays (row 0 = NULL) and the EM loops over sentence pairs:
the code reads like the equations, for small corpora. `fast.py` computes the same
numbers on a whole corpus with two `np.bincount`s and a sparse table (tested equal).

Two modes (`mode=`):
    "textbook": every output token counts once; no floor.
    "nltk":     reproduces `nltk.translate.IBMModel1`: NULL always on, start 1/|V_y|, M-step
                floor 1e-12, and an output word repeated k times in one sentence counts once
                (NLTK normalises per word type: each of the k tokens gets weight 1/k).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..checks import check_array, check_finite, check_number, check_size, describe, fail

NULL = None          # the NULL source word: src_vocab[0], id 0
MODES = ("textbook", "nltk")
MIN_PROB = 1e-12     # NLTK's M-step floor (IBMModel.MIN_PROB)


# ============================================================================ the corpus
@dataclass
class Bitext:
    """A parallel corpus as word ids: src[m] (|x^m|,) and tgt[m] (|y^m|,) int arrays.

    src_vocab[0] is NULL (id 0); `null` says whether NULL takes part in the alignments.
    Vocabularies are in first-seen order (fast.py indexes the same corpus the same way).
    """
    src_vocab: list
    tgt_vocab: list
    src: list
    tgt: list
    null: bool
    cache: dict = field(default_factory=dict, repr=False)   # derived on demand (padded_torch)

    def __post_init__(self):
        self.src_index = {w: i for i, w in enumerate(self.src_vocab)}
        self.tgt_index = {w: i for i, w in enumerate(self.tgt_vocab)}

    @property
    def n_pairs(self) -> int:
        return len(self.src)

    def pair(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) ids of pair m; x starts with NULL (id 0) when `null`."""
        return (np.concatenate([[0], self.src[m]]) if self.null else self.src[m]), self.tgt[m]

    def pairs(self):
        return (self.pair(m) for m in range(self.n_pairs))


def check_corpus(sources, targets) -> tuple[list, list]:
    """The two sides as lists, after checking that they pair up and are not empty."""
    sources, targets = list(sources), list(targets)
    if len(sources) != len(targets):
        fail("sources and targets must pair up", "as many target sentences as source sentences",
             f"{len(sources)} sources, {len(targets)} targets")
    if len(sources) == 0:
        fail("empty corpus", "at least one sentence pair", "0 pairs")
    return sources, targets


def check_sentences(side: str, sentences) -> None:
    """Every sentence of one side must be a non-empty list of tokens (not a string)."""
    for m, sent in enumerate(sentences):
        if isinstance(sent, str) or not hasattr(sent, "__len__"):
            fail(f"{side}s: {side} sentence {m} is not a token list",
                 "a list of tokens, e.g. s.split()",
                 f"{type(sent).__name__} {str(sent)[:40]!r}")
        if len(sent) == 0:
            fail(f"{side}s: {side} sentence {m} is empty", "at least one token per sentence", "[]")


def make_bitext(sources, targets, null: bool = True) -> Bitext:
    """Index a corpus: sources[m] (input x^m) and targets[m] (output y^m) are token lists."""
    sources, targets = check_corpus(sources, targets)
    for side, sentences in (("source", sources), ("target", targets)):
        check_sentences(side, sentences)
    src_vocab = list(dict.fromkeys([NULL] + [w for s in sources for w in s]))
    tgt_vocab = list(dict.fromkeys(w for s in targets for w in s))
    src_id = {w: i for i, w in enumerate(src_vocab)}
    tgt_id = {w: i for i, w in enumerate(tgt_vocab)}
    return Bitext(src_vocab, tgt_vocab, [np.array([src_id[w] for w in s]) for s in sources],
                  [np.array([tgt_id[w] for w in s]) for s in targets], bool(null))


def check_table(t, bitext: Bitext, name: str = "t", like=None) -> None:
    """Raise unless t is a (V_x, V_y) float table of this corpus (NumPy or, like=torch.Tensor,
    a tensor), finite and >= 0: probabilities, or expected counts for the M-step."""
    check_bitext(bitext)
    check_array(name, t, "float", hint="(V_x, V_y)", like=like)
    shape = (len(bitext.src_vocab), len(bitext.tgt_vocab))
    if tuple(t.shape) != shape:
        fail(f"{name}: translation table does not fit the corpus", f"shape {shape} (V_x, V_y)",
             f"shape {tuple(t.shape)}")
    check_finite(name, t)
    check_nonnegative(name, t)


def check_nonnegative(name: str, t) -> None:
    """Probabilities and counts are >= 0 (a negative entry makes a posterior meaningless)."""
    empty = t.numel() == 0 if isinstance(t, torch.Tensor) else t.size == 0
    low = 0.0 if empty else float(t.min())
    if low < 0:
        fail(name, "values >= 0 (probabilities or counts)", f"a minimum of {low} in {describe(t)}")


def check_bitext(bitext) -> None:
    if not isinstance(bitext, Bitext) and type(bitext).__name__ != "IndexedBitext":
        fail("bitext", "a corpus from make_bitext (or index_bitext for the fast path)",
             describe(bitext))


def check_covered(t, loglik) -> None:
    """After an E-step: a log-likelihood of -inf or NaN means some target token had
    probability 0 under t from every word of its source sentence (e.g. an all-zero table):
    its posterior 0/0 is undefined."""
    if not np.isfinite(float(loglik)):
        fail("t", "a table that gives every target token some probability from its source "
             "sentence (t(y | x) > 0 for some x of the pair)", f"a table under which the "
             f"log-likelihood is {float(loglik)} ({describe(t)}, {int((t > 0).sum())} entries > 0)")


def check_mode(mode: str, bitext: Bitext) -> None:
    if mode not in MODES:
        fail("unknown mode", f"one of {MODES}", repr(mode))
    if mode == "nltk" and not bitext.null:
        fail("NLTK mode needs the NULL word", "make_bitext(..., null=True)", "null=False")


# ============================================================================ NumPy reference
def uniform_table_np(bitext: Bitext) -> np.ndarray:
    """(V_x, V_y) the starting table t(y | x) = 1/|V_y| (NLTK's; any constant gives the same EM)."""
    return np.full((len(bitext.src_vocab), len(bitext.tgt_vocab)), 1.0 / len(bitext.tgt_vocab))


def count_table_np(bitext: Bitext) -> np.ndarray:
    """(V_x, V_y) the co-occurrence count table C(x, y) (Snell et al. 2021, eq. 16; §4.2):
    every output token y of a pair adds 1/|x^m| to C(x, y) for every input token x of the
    pair (NULL is one more input token when `bitext.null`). Row 0 is NULL."""
    C = np.zeros((len(bitext.src_vocab), len(bitext.tgt_vocab)))
    for x, y in bitext.pairs():
        np.add.at(C, (x[None, :], y[:, None]), 1.0 / len(x))     # (|y|, |x|) cells, +1/|x| each
    return C


def token_weights_np(y: np.ndarray, mode: str) -> np.ndarray:
    """(|y|,) weight of each output token: 1 (textbook), 1/k for a word seen k times in y (nltk)."""
    if mode not in MODES:
        fail("mode", f"one of {MODES}", repr(mode))
    check_array("y", y, "int", ndim=1, hint="(|y|,) word ids", like=np.ndarray)
    if mode == "textbook":
        return np.ones(len(y))
    return 1.0 / (y[:, None] == y[None, :]).sum(axis=1)


def e_step_np(t: np.ndarray, bitext: Bitext, mode: str = "textbook") -> tuple[np.ndarray, float]:
    """Expected counts count(x, y) (V_x, V_y) under the table t, and the log-likelihood
    Σ_m Σ_j w_j log p(y_j | x^m), p(y_j | x^m) = Σ_i t(y_j | x_i) / (|x^m| + null)."""
    check_table(t, bitext)
    check_mode(mode, bitext)
    counts, loglik = np.zeros_like(t), 0.0
    # BEGIN EXERCISE 6.1 implement: E-step: posteriors, expected counts, log-likelihood (~15 min)
    for x, y in bitext.pairs():                       # x: (n,) ids (NULL first), y: (J,) ids
        p = t[np.ix_(x, y)].T                     # (J, n) t(y_j | x_i)
        Z = p.sum(axis=1)                         # (J,)   Σ_i t(y_j | x_i)
        a = p / Z[:, None]                        # (J, n) posterior a_ji, rows sum to 1
        w = token_weights_np(y, mode)             # (J,)
        np.add.at(counts, (x[None, :], y[:, None]), w[:, None] * a)
        loglik += float(w @ np.log(Z / len(x)))
    # END EXERCISE
    check_covered(t, loglik)
    return counts, loglik


def m_step_np(counts: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """t(y | x) = count(x, y) / Σ_y' count(x, y'), then max(., floor) where count > 0.

    A pair (x, y) that never co-occurs keeps t = 0 (NLTK's floor, 1e-12, touches only pairs it
    has counted); a row with no counts at all (NULL when unused) stays 0."""
    check_counts(counts, floor, np.ndarray)
    # BEGIN EXERCISE 6.2 implement: M-step: normalise each source word's counts (~5 min)
    total = counts.sum(axis=1, keepdims=True)                     # (V_x, 1)
    t = counts / np.where(total > 0, total, 1.0)
    return np.where(counts > 0, np.maximum(t, floor), 0.0)
    # END EXERCISE


def check_counts(counts, floor, like) -> None:
    """M-step inputs: counts (V_x, V_y) finite and >= 0, floor a number in [0, 1]."""
    check_array("counts", counts, "float", ndim=2, hint="(V_x, V_y)", like=like)
    check_finite("counts", counts)
    check_nonnegative("counts", counts)
    check_number("floor", floor, low=0.0, high=1.0)


def em_np(bitext: Bitext, iterations: int, mode: str = "textbook", t: np.ndarray | None = None):
    """Run EM from t (default uniform); returns (t (V_x, V_y), log-likelihood before each step)."""
    check_bitext(bitext)
    iterations = check_size("iterations", iterations)
    check_mode(mode, bitext)
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = uniform_table_np(bitext) if t is None else t
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_np(t, bitext, mode)
        t = m_step_np(counts, floor)
        history.append(loglik)
    return t, history


def alignment_matrix_np(t: np.ndarray, bitext: Bitext, m: int) -> np.ndarray:
    """(|y^m|, null + |x^m|) alignment posteriors a_ji of pair m (column 0 = NULL when used)."""
    check_table(t, bitext)
    m = check_pair_index(m, bitext.n_pairs)
    x, y = bitext.pair(m)
    if not (t[np.ix_(x, y)].sum(axis=0) > 0).all():
        check_covered(t, -np.inf)
    # BEGIN EXERCISE 6.1 implement: E-step: posteriors, expected counts, log-likelihood (~15 min)
    p = t[np.ix_(x, y)].T
    return p / p.sum(axis=1, keepdims=True)
    # END EXERCISE


def check_pair_index(m, n_pairs: int) -> int:
    """m: the index of a sentence pair, an integer in [0, n_pairs)."""
    m = check_size("m", m)
    if m >= n_pairs:
        fail("m", f"a pair index in [0, {n_pairs})", describe(m))
    return m


def viterbi_np(t: np.ndarray, bitext: Bitext) -> list[np.ndarray]:
    """Best source position of every output token: one (|y^m|,) array per pair, 0-based in
    x^m, -1 = NULL. Ties go to the later position and a word beats NULL (NLTK's rule)."""
    check_table(t, bitext)
    best = []
    for x, y in bitext.pairs():
        p = t[np.ix_(x, y)].T                                     # (J, n)
        last_max = p.shape[1] - 1 - np.argmax(p[:, ::-1], axis=1)  # the LAST maximum
        best.append(last_max - int(bitext.null))                      # NULL column -> -1
    return best


def top_translations_np(t: np.ndarray, bitext: Bitext, x, k: int = 3) -> list[tuple]:
    """The k most probable output words y for input word x: [(y, t(y | x)), ...]."""
    check_table(t, bitext)
    k = check_size("k", k)
    if x not in bitext.src_index:
        fail("unknown source word", "a word of the source vocabulary", repr(x))
    row = t[bitext.src_index[x]]
    return [(bitext.tgt_vocab[j], float(row[j])) for j in np.argsort(-row, kind="stable")[:k]]


# ============================================================================ NLTK bridge
def nltk_bitext(sources, targets):
    """The same corpus for NLTK: AlignedSent(words=TARGET y, mots=SOURCE x) — note the order."""
    from nltk.translate import AlignedSent
    return [AlignedSent(list(y), list(x)) for x, y in zip(sources, targets)]


def nltk_table_np(model, bitext: Bitext) -> np.ndarray:
    """(V_x, V_y) NLTK's translation_table[y][x] as a dense table (small vocabularies)."""
    table = model.translation_table
    return np.array([[table[y][x] for y in bitext.tgt_vocab] for x in bitext.src_vocab])


# ============================================================================ PyTorch twin
def padded_torch(bitext: Bitext, device=None):
    """The corpus as padded batch tensors on `device` (cached): X (M, n) source ids with NULL
    first, x_mask (M, n), Y (M, J) target ids, y_mask (M, J); padding has id 0, mask False."""
    key = str(torch.device(device or "cpu"))
    if key not in bitext.cache:
        xs, ys = zip(*bitext.pairs())
        pad = lambda seqs: torch.nn.utils.rnn.pad_sequence(
            [torch.as_tensor(s, dtype=torch.int64) for s in seqs], batch_first=True)
        mask = lambda seqs: pad([np.ones(len(s), bool) for s in seqs]).bool()
        bitext.cache[key] = tuple(a.to(device) for a in (pad(xs), mask(xs), pad(ys), mask(ys)))
    return bitext.cache[key]


def token_weights_torch(Y: torch.Tensor, y_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """(M, J) token_weights_np for a padded batch (float64); 0 at padding."""
    if mode == "textbook":
        return y_mask.double()
    same = (Y[:, :, None] == Y[:, None, :]) & y_mask[:, None, :]   # (M, J, J)
    return y_mask.double() / same.sum(-1).clamp_min(1)


def e_step_torch(t: torch.Tensor, bitext: Bitext, mode: str = "textbook"):
    """e_step_np on the whole corpus at once (padded batch); returns (counts, loglik tensor)."""
    check_table(t, bitext, like=torch.Tensor)
    check_mode(mode, bitext)
    X, x_mask, Y, y_mask = padded_torch(bitext, t.device)
    counts = torch.zeros_like(t)
    # BEGIN EXERCISE 6.1 implement: E-step: posteriors, expected counts, log-likelihood (~15 min)
    p = t[X[:, None, :], Y[:, :, None]] * x_mask[:, None, :]     # (M, J, n) t(y_j | x_i)
    Z = p.sum(-1).masked_fill(~y_mask, 1.0)                      # (M, J)
    a = p / Z[..., None]                                         # (M, J, n)
    w = token_weights_torch(Y, y_mask, mode).to(t.dtype)         # (M, J)
    X_, Y_ = torch.broadcast_tensors(X[:, None, :], Y[:, :, None])
    counts.index_put_((X_, Y_), w[..., None] * a, accumulate=True)
    loglik = (w * torch.log(Z / x_mask.sum(-1, keepdim=True))).sum()
    # END EXERCISE
    check_covered(t, loglik)
    return counts, loglik


def m_step_torch(counts: torch.Tensor, floor: float = 0.0) -> torch.Tensor:
    """m_step_np in torch."""
    check_counts(counts, floor, torch.Tensor)
    # BEGIN EXERCISE 6.2 implement: M-step: normalise each source word's counts (~5 min)
    total = counts.sum(dim=1, keepdim=True)
    t = counts / torch.where(total > 0, total, torch.ones_like(total))
    return torch.where(counts > 0, t.clamp_min(floor), torch.zeros_like(t))
    # END EXERCISE


def em_torch(bitext: Bitext, iterations: int, mode: str = "textbook", t: torch.Tensor | None = None,
             device=None):
    """em_np in torch (float64 unless t says otherwise); returns (t tensor, log-likelihoods)."""
    check_bitext(bitext)
    iterations = check_size("iterations", iterations)
    check_mode(mode, bitext)
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = torch.as_tensor(uniform_table_np(bitext), device=device) if t is None else t
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_torch(t, bitext, mode)
        t = m_step_torch(counts, floor)
        history.append(float(loglik))
    return t, history
