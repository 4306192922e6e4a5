"""The bag-of-words proxy of IBM Model 1 (Snell et al. 2021, §2.3 and §4.1, lesson 06): uniform
attention over input embeddings and one linear layer, whose logits at initialisation move as
the IBM Model 1 count table predicts.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..checks import check_array, check_same_device, check_size, describe, fail
from .reference import Bitext, check_bitext, count_table_np


def bag_matrices_np(bitext: Bitext) -> tuple[np.ndarray, np.ndarray]:
    """Per-pair bags: xbar (M, V_x) word frequencies of x^m (rows sum to 1; column 0 = NULL
    stays 0) and ycount (M, V_y) word counts of y^m."""
    xbar = np.zeros((bitext.n_pairs, len(bitext.src_vocab)))
    ycount = np.zeros((bitext.n_pairs, len(bitext.tgt_vocab)))
    for m in range(bitext.n_pairs):
        np.add.at(xbar[m], bitext.src[m], 1.0 / len(bitext.src[m]))
        np.add.at(ycount[m], bitext.tgt[m], 1.0)
    return xbar, ycount


class BagOfWordsProxy(nn.Module):
    """p(y | x^m) = softmax(W · (1/n) Σ_i E[x_i])  (Snell et al. 2021, §2.3, eq. 5): uniform
    attention over input embeddings, one linear layer, no decoder state. E and W start i.i.d.
    N(0, 1/d)."""

    def __init__(self, n_src: int, n_tgt: int, d: int):
        super().__init__()
        n_src, n_tgt = check_size("n_src", n_src, 1), check_size("n_tgt", n_tgt, 1)
        d = check_size("d", d, 1)
        self.embed = nn.Parameter(torch.randn(n_src, d) / d ** 0.5)    # E: (V_x, d)
        self.out = nn.Parameter(torch.randn(n_tgt, d) / d ** 0.5)      # W: (V_y, d)

    def forward(self, xbar: torch.Tensor) -> torch.Tensor:
        """xbar: (B, V_x) bag of input words (rows sum to 1) -> logits (B, V_y)."""
        check_array("xbar", xbar, "float", ndim=2, hint=f"(B, V_x = {self.embed.shape[0]})",
                    like=torch.Tensor)
        if xbar.shape[1] != self.embed.shape[0] or xbar.dtype != self.embed.dtype:
            fail("xbar", f"(B, V_x = {self.embed.shape[0]}) of dtype "
                 f"{str(self.embed.dtype).removeprefix('torch.')}", describe(xbar))
        check_same_device(xbar=xbar, embed=self.embed)
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


def proxy_prediction_np(counts: np.ndarray) -> np.ndarray:
    """The paper's prediction for dθ/dt at initialisation as d → ∞ (Snell et al. 2021, §4.1,
    eq. 15; derived in its appendix A.2):

        2 · (C(x, y) − (1/|V_y|) Σ_y' C(x, y'))      counts: dense (V_x, V_y) table C

    The 2 is one term from Ẇ and one from Ė; each tends to C − mean_y C because at N(0, 1/d)
    e_x·e_x' → [x = x'], w_y·w_y' → [y = y'] and the softmax starts uniform.
    """
    check_array("counts", counts, "float", ndim=2, hint="(V_x, V_y)", like=np.ndarray)
    return 2.0 * (counts - counts.mean(axis=1, keepdims=True))


def proxy_agreement_torch(bitext: Bitext, d: int, seed: int = 0):
    """Torch-only; compares proxy_logit_velocity_torch at a fresh N(0, 1/d) start with
    proxy_prediction_np. Returns (r, measured (V_x-1, V_y), predicted): r is the correlation
    over all (x, y), nan when the prediction is constant (a flat count table, e.g. 40-of-40)."""
    check_bitext(bitext)
    d, seed = check_size("d", d, 1), check_size("seed", seed)
    if bitext.null:
        fail("the proxy has no NULL word", "make_bitext(..., null=False)", "null=True")
    xbar, ycount = (torch.as_tensor(a) for a in bag_matrices_np(bitext))
    torch.manual_seed(seed)
    model = BagOfWordsProxy(xbar.shape[1], ycount.shape[1], d).double()
    measured = proxy_logit_velocity_torch(model, xbar, ycount).numpy()[1:]   # drop the NULL row
    predicted = proxy_prediction_np(count_table_np(bitext))[1:]
    with np.errstate(invalid="ignore", divide="ignore"):   # flat table: prediction 0, r = nan
        r = float(np.corrcoef(measured.ravel(), predicted.ravel())[0, 1])
    return r, measured, predicted
