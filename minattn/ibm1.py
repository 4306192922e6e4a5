"""IBM Model 1 (Brown et al. 1993) and the bag-of-words proxy of Snell et al. (2021), lesson 06.

Direction, stated once for the whole course:
    source x = the INPUT sentence (English in lesson 06),
    target y = the OUTPUT sentence (German in lesson 06),
    t(y | x) = probability that input word x translates to output word y,
and the NULL source word is `None` with id 0 (NLTK's choice too).

IBM Model 1 on a corpus of pairs (x^m, y^m): each output word y_j picks an input position
uniformly (NULL included) and is translated from x_i:

    p(y^m | x^m) = Π_j (1/(l+1)) Σ_i t(y_j | x_i)                   i over NULL + the l input words
    E-step:  a_ji = t(y_j | x_i) / Σ_i' t(y_j | x_i')               (alignment posterior)
             count(x, y) = Σ_m Σ_j Σ_i [x_i = x][y_j = y] a_ji
    M-step:  t(y | x) = count(x, y) / Σ_y' count(x, y')

One EM step from a uniform t gives the normalised co-occurrence count table
C(x, y) = Σ_m Σ_j Σ_i [x_i = x][y_j = y] / |x^m| (Snell et al. 2021, eq. 16).

The bag-of-words proxy (Snell et al. 2021, §2.3, eq. 5): uniform attention over input word
embeddings and one linear layer, p(y | x^m) = softmax(W (1/|x^m|) Σ_i E[x_i]). Its word logits
θ(x, y) = w_yᵀ e_x start moving at dθ/dt → 2 (C(x, y) − mean_y' C(x, y')) as the embedding
size d grows (§4.1, eq. 15; appendix A.2).

Shapes: a corpus is a `Bitext` (word ids per sentence; `make_bitext` builds it from token lists);
tables are DENSE (V_x, V_y) arrays, row 0 = NULL. Read top down: the NumPy reference (count
table, the EM as a loop over sentence pairs that reads like the equations, alignments), its
batched torch twin, the corpus, then the proxy. The same EM as two bincounts over a sparse table,
for real corpora: minattn/fast/ibm1.py (tested equal). Input checks: minattn/checks.py (ibm1).

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
import torch.nn.functional as F
from torch import nn

from . import checks as c
from .checks import check_covered
from .contract import checked

NULL = None          # the NULL source word: src_vocab[0], id 0
MIN_PROB = 1e-12     # NLTK's M-step floor (IBMModel.MIN_PROB)


# ============================================================================ the corpus
@dataclass
class Bitext:
    """A parallel corpus as word ids: src[m] (|x^m|,) and tgt[m] (|y^m|,) int arrays.

    src_vocab[0] is NULL (id 0); `null` says whether NULL takes part in the alignments.
    Vocabularies are in first-seen order (fast/ibm1.py indexes the same corpus the same way).
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


# ============================================================================ NumPy reference
@checked(rules=[c.table_fits])
def uniform_table_np(bitext: Bitext) -> np.ndarray:
    """(V_x, V_y) the starting table t(y | x) = 1/|V_y| (NLTK's; any constant gives the same EM)."""
    return np.full((len(bitext.src_vocab), len(bitext.tgt_vocab)), 1.0 / len(bitext.tgt_vocab))


@checked(rules=[c.table_fits])
def count_table_np(bitext: Bitext) -> np.ndarray:
    """(V_x, V_y) the co-occurrence count table C(x, y) (Snell et al. 2021, eq. 16; §4.2):
    every output token y of a pair adds 1/|x^m| to C(x, y) for every input token x of the
    pair (NULL is one more input token when `bitext.null`). Row 0 is NULL."""
    C = np.zeros((len(bitext.src_vocab), len(bitext.tgt_vocab)))
    for x, y in bitext.pairs():
        np.add.at(C, (x[None, :], y[:, None]), 1.0 / len(x))     # (|y|, |x|) cells, +1/|x| each
    return C


@checked(y="int (N?,)", mode="one of textbook, nltk")
def token_weights_np(y: np.ndarray, mode: str) -> np.ndarray:
    """(|y|,) weight of each output token: 1 (textbook), 1/k for a word seen k times in y (nltk)."""
    if mode == "textbook":
        return np.ones(len(y))
    return 1.0 / (y[:, None] == y[None, :]).sum(axis=1)


@checked(t="float* (V_x, V_y)", mode="one of textbook, nltk",
         rules=[c.table_fits])
def e_step_np(t: np.ndarray, bitext: Bitext, mode: str = "textbook") -> tuple[np.ndarray, float]:
    """Expected counts count(x, y) (V_x, V_y) under the table t, and the log-likelihood
    Σ_m Σ_j w_j log p(y_j | x^m), p(y_j | x^m) = Σ_i t(y_j | x_i) / (|x^m| + null)."""
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
    check_covered(t, loglik)   # -inf: t gave some output token probability 0 from its sentence
    return counts, loglik


@checked(counts="float* (V_x, V_y)", rules=[c.table_fits])
def m_step_np(counts: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """t(y | x) = count(x, y) / Σ_y' count(x, y'), then max(., floor) where count > 0.

    A pair (x, y) that never co-occurs keeps t = 0 (NLTK's floor, 1e-12, touches only pairs it
    has counted); a row with no counts at all (NULL when unused) stays 0."""
    # BEGIN EXERCISE 6.2 implement: M-step: normalise each source word's counts (~5 min)
    total = counts.sum(axis=1, keepdims=True)                     # (V_x, 1)
    t = counts / np.where(total > 0, total, 1.0)
    return np.where(counts > 0, np.maximum(t, floor), 0.0)
    # END EXERCISE


@checked(iterations="int", mode="one of textbook, nltk", rules=[c.table_fits])
def em_np(bitext: Bitext, iterations: int, mode: str = "textbook", t: np.ndarray | None = None):
    """Run EM from t (default uniform); returns (t (V_x, V_y), log-likelihood before each step)."""
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = uniform_table_np(bitext) if t is None else t
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_np(t, bitext, mode)
        t = m_step_np(counts, floor)
        history.append(loglik)
    return t, history


@checked(t="float* (V_x, V_y)", m="int", rules=[c.table_fits])
def alignment_matrix_np(t: np.ndarray, bitext: Bitext, m: int) -> np.ndarray:
    """(|y^m|, null + |x^m|) alignment posteriors a_ji of pair m (column 0 = NULL when used)."""
    x, y = bitext.pair(m)
    # BEGIN EXERCISE 6.1 implement: E-step: posteriors, expected counts, log-likelihood (~15 min)
    p = t[np.ix_(x, y)].T
    return p / p.sum(axis=1, keepdims=True)
    # END EXERCISE


@checked(t="float* (V_x, V_y)", rules=[c.table_fits])
def viterbi_np(t: np.ndarray, bitext: Bitext) -> list[np.ndarray]:
    """Best source position of every output token: one (|y^m|,) array per pair, 0-based in
    x^m, -1 = NULL. Ties go to the later position and a word beats NULL (NLTK's rule)."""
    best = []
    for x, y in bitext.pairs():
        p = t[np.ix_(x, y)].T                                     # (J, n)
        last_max = p.shape[1] - 1 - np.argmax(p[:, ::-1], axis=1)  # the LAST maximum
        best.append(last_max - int(bitext.null))                      # NULL column -> -1
    return best


@checked(t="float* (V_x, V_y)", k="int", rules=[c.table_fits])
def top_translations_np(t: np.ndarray, bitext: Bitext, x, k: int = 3) -> list[tuple]:
    """The k most probable output words y for input word x: [(y, t(y | x)), ...]."""
    row = t[bitext.src_index[x]]
    return [(bitext.tgt_vocab[j], float(row[j])) for j in np.argsort(-row, kind="stable")[:k]]


def nltk_table_np(model, bitext: Bitext) -> np.ndarray:
    """(V_x, V_y) NLTK's translation_table[y][x] as a dense table (small vocabularies)."""
    table = model.translation_table
    return np.array([[table[y][x] for y in bitext.tgt_vocab] for x in bitext.src_vocab])


@checked(rules=[c.table_fits])
def bag_matrices_np(bitext: Bitext) -> tuple[np.ndarray, np.ndarray]:
    """The proxy's data, per pair: xbar (M, V_x) word frequencies of x^m (rows sum to 1; column
    0 = NULL stays 0) and ycount (M, V_y) word counts of y^m."""
    xbar = np.zeros((bitext.n_pairs, len(bitext.src_vocab)))
    ycount = np.zeros((bitext.n_pairs, len(bitext.tgt_vocab)))
    for m in range(bitext.n_pairs):
        np.add.at(xbar[m], bitext.src[m], 1.0 / len(bitext.src[m]))
        np.add.at(ycount[m], bitext.tgt[m], 1.0)
    return xbar, ycount


@checked(counts="float* (V_x, V_y)")
def proxy_prediction_np(counts: np.ndarray) -> np.ndarray:
    """The paper's prediction for the proxy's dθ/dt at initialisation as d → ∞ (Snell et al.
    2021, §4.1, eq. 15; derived in its appendix A.2):

        2 · (C(x, y) − (1/|V_y|) Σ_y' C(x, y'))      counts: dense (V_x, V_y) table C

    The 2 is one term from Ẇ and one from Ė; each tends to C − mean_y C because at N(0, 1/d)
    e_x·e_x' → [x = x'], w_y·w_y' → [y = y'] and the softmax starts uniform.
    """
    return 2.0 * (counts - counts.mean(axis=1, keepdims=True))


# ============================================================================ PyTorch twin
def padded_torch(bitext: Bitext, device=None):
    """The corpus as padded batch tensors on `device` (cached): X (M, n) source ids with NULL
    first, x_mask (M, n), Y (M, J) target ids, y_mask (M, J); padding has id 0, mask False."""
    key = str(torch.device(device or "cpu"))
    if key not in bitext.cache:
        xs, ys = zip(*bitext.pairs())

        def pad(seqs):  # (M, longest) ids, 0 after each sequence's end
            return torch.nn.utils.rnn.pad_sequence(
                [torch.as_tensor(s, dtype=torch.int64) for s in seqs], batch_first=True)

        def mask(seqs):  # (M, longest) True on real tokens
            return pad([np.ones(len(s), bool) for s in seqs]).bool()
        bitext.cache[key] = tuple(a.to(device) for a in (pad(xs), mask(xs), pad(ys), mask(ys)))
    return bitext.cache[key]


def token_weights_torch(Y: torch.Tensor, y_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """(M, J) token_weights_np for a padded batch (float64); 0 at padding."""
    if mode == "textbook":
        return y_mask.double()
    same = (Y[:, :, None] == Y[:, None, :]) & y_mask[:, None, :]   # (M, J, J)
    return y_mask.double() / same.sum(-1).clamp_min(1)


@checked(t="float* (V_x, V_y)", mode="one of textbook, nltk",
         rules=[c.table_fits])
def e_step_torch(t: torch.Tensor, bitext: Bitext, mode: str = "textbook"):
    """e_step_np on the whole corpus at once (padded batch); returns (counts, loglik tensor)."""
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


@checked(counts="float* (V_x, V_y)", rules=[c.table_fits])
def m_step_torch(counts: torch.Tensor, floor: float = 0.0) -> torch.Tensor:
    """m_step_np in torch."""
    # BEGIN EXERCISE 6.2 implement: M-step: normalise each source word's counts (~5 min)
    total = counts.sum(dim=1, keepdim=True)
    t = counts / torch.where(total > 0, total, torch.ones_like(total))
    return torch.where(counts > 0, t.clamp_min(floor), torch.zeros_like(t))
    # END EXERCISE


@checked(iterations="int", mode="one of textbook, nltk", rules=[c.table_fits])
def em_torch(bitext: Bitext, iterations: int, mode: str = "textbook", t: torch.Tensor | None = None,
             device=None):
    """em_np in torch (float64 unless t says otherwise); returns (t tensor, log-likelihoods)."""
    floor = MIN_PROB if mode == "nltk" else 0.0
    t = torch.as_tensor(uniform_table_np(bitext), device=device) if t is None else t
    history = []
    for _ in range(iterations):
        counts, loglik = e_step_torch(t, bitext, mode)
        t = m_step_torch(counts, floor)
        history.append(float(loglik))
    return t, history


# ============================================================================ indexing a corpus
@checked(rules=[c.corpus])
def make_bitext(sources, targets, null: bool = True) -> Bitext:
    """Index a corpus: sources[m] (input x^m) and targets[m] (output y^m) are token lists."""
    src_vocab = list(dict.fromkeys([NULL] + [w for s in sources for w in s]))
    tgt_vocab = list(dict.fromkeys(w for s in targets for w in s))
    src_id = {w: i for i, w in enumerate(src_vocab)}
    tgt_id = {w: i for i, w in enumerate(tgt_vocab)}
    return Bitext(src_vocab, tgt_vocab, [np.array([src_id[w] for w in s]) for s in sources],
                  [np.array([tgt_id[w] for w in s]) for s in targets], bool(null))


def nltk_bitext(sources, targets):
    """The same corpus for NLTK: AlignedSent(words=TARGET y, mots=SOURCE x) — note the order."""
    from nltk.translate import AlignedSent
    return [AlignedSent(list(y), list(x)) for x, y in zip(sources, targets)]


# ============================================================================ the proxy
class BagOfWordsProxy(nn.Module):
    """p(y | x^m) = softmax(W · (1/n) Σ_i E[x_i])  (Snell et al. 2021, §2.3, eq. 5): uniform
    attention over input embeddings, one linear layer, no decoder state. E and W start i.i.d.
    N(0, 1/d)."""

    @checked(n_src="int >= 1", n_tgt="int >= 1", d="int >= 1")
    def __init__(self, n_src: int, n_tgt: int, d: int):
        super().__init__()
        self.embed = nn.Parameter(torch.randn(n_src, d) / d ** 0.5)    # E: (V_x, d)
        self.out = nn.Parameter(torch.randn(n_tgt, d) / d ** 0.5)      # W: (V_y, d)

    @checked(xbar="float* (B, self.embed.shape.0) like self.embed")
    def forward(self, xbar: torch.Tensor) -> torch.Tensor:
        """xbar: (B, V_x) bag of input words (rows sum to 1) -> logits (B, V_y)."""
        return (xbar @ self.embed) @ self.out.T

    def word_logits(self) -> torch.Tensor:
        """(V_x, V_y) θ(x, y) = w_y · e_x: the logit of y when the input is the single word x."""
        return self.embed @ self.out.T


def proxy_loss_torch(model: BagOfWordsProxy, xbar, ycount) -> torch.Tensor:
    """Torch-only (autograd needs it): -Σ_m Σ_j log p(y_j | x^m), summed as in the paper."""
    return -(ycount * F.log_softmax(model(xbar), dim=-1)).sum()


def proxy_logit_velocity_torch(model: BagOfWordsProxy, xbar, ycount) -> torch.Tensor:
    """Torch-only; its d → ∞ limit is proxy_prediction_np. (V_x, V_y) dθ/dt under gradient flow
    (Ė = -∂L/∂E, Ẇ = -∂L/∂W): θ = E Wᵀ, so dθ/dt = -(∂L/∂E Wᵀ + E (∂L/∂W)ᵀ)."""
    gE, gW = torch.autograd.grad(proxy_loss_torch(model, xbar, ycount), [model.embed, model.out])
    return -(gE @ model.out.T + model.embed @ gW.T).detach()


@checked(d="int >= 1", seed="int", rules=[c.bitext_without_null])
def proxy_agreement_torch(bitext: Bitext, d: int, seed: int = 0):
    """Torch-only; compares proxy_logit_velocity_torch at a fresh N(0, 1/d) start with
    proxy_prediction_np. Returns (r, measured (V_x-1, V_y), predicted): r is the correlation
    over all (x, y), nan when the prediction is constant (a flat count table, e.g. 40-of-40)."""
    xbar, ycount = (torch.as_tensor(a) for a in bag_matrices_np(bitext))
    torch.manual_seed(seed)
    model = BagOfWordsProxy(xbar.shape[1], ycount.shape[1], d).double()
    measured = proxy_logit_velocity_torch(model, xbar, ycount).numpy()[1:]   # drop the NULL row
    predicted = proxy_prediction_np(count_table_np(bitext))[1:]
    with np.errstate(invalid="ignore", divide="ignore"):   # flat table: prediction 0, r = nan
        r = float(np.corrcoef(measured.ravel(), predicted.ravel())[0, 1])
    return r, measured, predicted
