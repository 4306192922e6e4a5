"""Task-specific attention heads over a frozen encoder's token states — NumPy, then PyTorch.

A pretrained encoder (lesson 07 uses MiniLM, `minattn.encoder`) turns a sentence into token
states H = (h_0 = [CLS], h_1, ..., h_{n-1}), shape (B, L, D), right-padded (mask (B, L), True on
real tokens). A task needs one vector per sentence. Three ways to get it:

    first token   z = h_0
    mean pooling  z = Σ_i m_i h_i / Σ_i m_i                       (padding excluded)
    attention     z = W_o Σ_i a_i W_v h_i + b,  a = softmax_i(q · k_i / √d_h)   per head,
                  the query q from the first token (q = W_q LN(h_0)) or learned (q = W_q w)

The attention head is lesson 01's `MultiHeadAttention`, trained for the task over a frozen
encoder (or with its top layers: `encoder.TopLayers` in `model.PairModel(encoder=...)`). Its
queries and keys read standardised states, LN(h) = (h − mean(h)) / std(h) over the features
(no affine), its values the raw states, so that with uniform weights a_i = 1/n the head is
exactly a linear map of mean pooling: z = W_o W_v mean(H) + b. (Jia, "Task-specific
attention", Stanford CS224N poster, 2024.)

This file is the math (NumPy, then torch); the trainable heads and models are in `model.py`,
the reference lines in `baselines.py`:

    attention_pool   single sentences: 1-2 self-attention layers (residual, pre-norm), then
                     the first token's query (or a learned one) reads all tokens   -> (B, D)
    cross_attention_pool   pairs: A's tokens attend to B's (residual, one or more layers),
                     then masked mean over A's tokens, or A's first token alone    -> (B, D)
    pearson_loss     −corr(pred, target) over a batch, for similarity regression
    pair_features    [u, v, |u − v|, u ⊙ v], what a pair classifier reads
    LinearProbe, best_threshold   reference lines: a converged logistic / least-squares probe
                     on frozen features, and the best threshold on a zero-shot score

U(0.9, 1) initialisation (`init="u09"`): every weight of q/k/v/out projections drawn from
U(0.9, 1). Such a matrix is 0.95·11ᵀ plus U(−0.05, 0.05) noise — for D = 384 the noise is as
large as PyTorch's default init (±1/√D = ±0.051). The rank-one part maps a token h to
0.95·(Σ_j h_j)·1: it sees only the sum of the token's features. After LN that sum is 0, so the
rank-one part drops out of q and k and the scores are no larger than with the default init:
the first step's attention is close to uniform, as with the default init. The values and the
output projection read raw states and keep the rank-one part, so the head's output starts
along ±1 and far longer than a mean-pooled vector (more so with every layer). Feed raw states
to q and k (their feature sums differ from token to token) and the same init gives scores of
size 0.9·√d_h·s_q·s_k: attention collapses onto the token with the most extreme sum. See
`attention_pool_np(..., normalize=False)` and lesson 07's exercise 7.3.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..attention import multi_head_attention_np
from ..checks import (
    check_array,
    check_finite,
    check_number,
    check_same_device,
    check_same_dtype,
    describe,
    fail,
    hide,
    shape_str,
)

LN_EPS = 1e-5


# ============================================================================ input checks
def check_token_states(states, mask, name: str = "states", mask_name: str = "mask",
                       like=None) -> None:
    """states (B, L, D) float, mask (B, L) bool, right-padded (1…1 0…0), with at least one real
    token (the first); one library and device; the real tokens' states finite (padding may
    hold anything: the heads select it away). like: np.ndarray or torch.Tensor (default:
    whichever `states` is)."""
    like = like or (torch.Tensor if isinstance(states, torch.Tensor) else np.ndarray)
    check_array(name, states, "float", hint="(B, L, D)", like=like)
    if states.ndim != 3 or 0 in states.shape:
        fail(f"{name} have the wrong shape", "(B, L, D) with B, L, D > 0", shape_str(states.shape))
    if not isinstance(mask, like):
        fail(mask_name, f"a {'torch' if like is torch.Tensor else 'NumPy'} bool mask like "
             f"{name}", describe(mask))
    if tuple(mask.shape) != tuple(states.shape[:2]):
        fail(f"the mask of {name} does not fit ({mask_name})",
             f"mask {shape_str(states.shape[:2])} bool", f"mask {shape_str(mask.shape)}")
    if mask.dtype not in (np.bool_, torch.bool):
        fail(f"the mask of {name} must be boolean (True = real token; {mask_name})",
             "dtype bool", f"dtype {mask.dtype}")
    check_same_device(**{name: states, mask_name: mask})
    if not bool(mask[:, 0].all()):
        fail(f"every sentence of {name} needs its first token ({mask_name})",
             "mask[:, 0] all True", "a row whose first token is padding")
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        fail(f"{mask_name} must be right-padded", "each row 1…1 0…0 (real tokens first)",
             "a row with padding before a real token")
    check_finite(name, states, where=mask[..., None])


def check_pair(a, a_mask, b, b_mask) -> None:
    check_token_states(a, a_mask, "sentences A (a)", "a_mask")
    check_token_states(b, b_mask, "sentences B (b)", "b_mask")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[2]:
        fail("a pair batch needs as many A as B sentences, of the same width",
             f"b of shape ({a.shape[0]}, Lb, {a.shape[2]})", f"{shape_str(b.shape)}")
    check_same_dtype(a=a, b=b)
    check_same_device(a=a, b=b)


def check_read(read: str) -> None:
    if read not in ("mean", "first"):
        fail("unknown read-out of the cross-attention head", "'mean' or 'first'", repr(read))


def check_pearson(pred, target, eps) -> None:
    like = torch.Tensor if isinstance(pred, torch.Tensor) else np.ndarray
    check_array("pred", pred, "float", like=like)
    check_array("target", target, "float", like=like)
    if pred.ndim != 1 or tuple(pred.shape) != tuple(target.shape) or pred.shape[0] < 2:
        fail("pearson_loss needs two vectors of the same length >= 2", "pred (N,), target (N,)",
             f"pred {shape_str(pred.shape)}, target {shape_str(target.shape)}")
    check_same_dtype(pred=pred, target=target)
    check_same_device(pred=pred, target=target)
    check_finite("pred", pred)
    check_finite("target", target)
    check_number("eps", eps, low=0)


def check_layer_norm(x, eps) -> None:
    """x (..., D) float and finite, D >= 1; eps > 0 (a constant row has variance 0)."""
    check_array("x", x, "float", min_ndim=1, hint="(..., D)")
    if x.shape[-1] == 0:
        fail("x", "at least one feature to normalise", describe(x))
    check_finite("x", x)
    check_number("eps", eps, above=0)


def check_module_input(name: str, x, module: nn.Module) -> None:
    """x must have the module's width, dtype and device (its first parameter's)."""
    weight = next(module.parameters())
    d_model = module.layers[0].d_model
    if x.shape[-1] != d_model or x.dtype != weight.dtype:
        fail(name, f"(B, L, {d_model}) {str(weight.dtype).removeprefix('torch.')} states, the "
             "head's width and dtype (cast the states or the head)", describe(x))
    check_same_device(**{name: x, "weights": weight})


# ============================================================================ NumPy reference
def cls_pool_np(states: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """First-token pooling: (B, L, D), (B, L) -> (B, D), the state of [CLS]."""
    check_token_states(states, mask, like=np.ndarray)
    return states[:, 0]


def mean_pool_np(states: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Masked mean pooling: (B, L, D), (B, L) bool -> (B, D), z_b = Σ_i m_bi h_bi / Σ_i m_bi.

    Padding is selected away, not multiplied by 0: padded states may be garbage (even NaN)."""
    check_token_states(states, mask, like=np.ndarray)
    # BEGIN EXERCISE 7.1 implement: masked mean over the real tokens (not the padding) (~10 min)
    real = mask[..., None]  # (B, L, 1): True on real tokens
    total = np.where(real, states, 0.0).sum(axis=1)  # (B, D): padding never enters the sum
    return total / real.sum(axis=1).astype(states.dtype)  # float32 in, float32 out
    # END EXERCISE


def layer_norm_np(x: np.ndarray, eps: float = LN_EPS) -> np.ndarray:
    """Standardise each token's features: (x − mean) / √(var + eps) over the last axis."""
    check_layer_norm(x, eps)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def attention_pool_np(states: np.ndarray, mask: np.ndarray, layers: list[dict], num_heads: int,
                      normalize: bool = True, query: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Self-attention pooling: layers[:-1] mix the tokens, the last one reads them all.

        x ← x + MHA(LN(x), LN(x), x)      for each layer but the last      (B, L, D)
        z = MHA(LN(x)_0, LN(x), x)        the first token's query only     (B, D)
        z = MHA(w, LN(x), x)              or a learned query vector w (D,), the same for
                                          every sentence (attention pooling)

    layers: one `MultiHeadAttention.numpy_params()` dict per layer. Padding keys are masked.
    normalize=False feeds raw states to queries and keys (to see what LN is for).
    Returns z (B, D) and the read-out attention (B, H, L) over the tokens.
    """
    check_token_states(states, mask, like=np.ndarray)
    if not layers or not isinstance(layers, (list, tuple)):
        fail("layers: attention_pool needs at least one layer", "a non-empty list of params",
             describe(layers))
    states = hide(states, mask[..., None])  # padding may be garbage; LN would spread it
    keys_mask = mask[:, None, None, :]  # (B, 1, 1, L)
    norm = layer_norm_np if normalize else (lambda x: x)
    x = states
    for params in layers[:-1]:
        n = norm(x)
        x = x + multi_head_attention_np(n, n, x, params, num_heads, keys_mask)[0]
    n = norm(x)
    q = n[:, :1] if query is None else np.broadcast_to(query, (len(x), 1, x.shape[-1]))
    z, weights = multi_head_attention_np(q, n, x, layers[-1], num_heads, keys_mask)
    return z[:, 0], weights[:, :, 0]


def cross_attention_pool_np(a: np.ndarray, a_mask: np.ndarray, b: np.ndarray,
                            b_mask: np.ndarray, layers: list[dict], num_heads: int,
                            read: str = "mean") -> tuple[np.ndarray, np.ndarray]:
    """Sentence A attends to sentence B, layer by layer, then A is read out.

        x ← x + MHA(LN(x), LN(b), b)      x starts at a; queries from A, keys/values from B
        z = mean over A's real tokens of x            read="mean"            (B, D)
        z = x_0, A's first ([CLS]) token              read="first" (the poster's read-out)

    With uniform attention one layer gives z = mean(A) + W_o W_v mean(B) + b_o + W_o b_v:
    the mean of A plus a linear map of the mean of B (read="first": a_0 instead of mean(A)).
    A's tokens never attend to each other here, so read="first" needs A's first token only.
    Returns z (B, D) and the last layer's attention (B, H, La, Lb) (La = 1 when read="first").
    """
    check_pair(a, a_mask, b, b_mask)
    check_read(read)
    a, b = hide(a, a_mask[..., None]), hide(b, b_mask[..., None])  # garbage in padding: gone
    if read == "first":
        a, a_mask = a[:, :1], a_mask[:, :1]
    # BEGIN EXERCISE 7.2 implement: the cross-attention head (A attends to B, pool A) (~20 min)
    b_keys = layer_norm_np(b)
    x, weights = a, None
    for params in layers:
        out, weights = multi_head_attention_np(layer_norm_np(x), b_keys, b, params, num_heads,
                                               b_mask[:, None, None, :])
        x = x + out
    return mean_pool_np(x, a_mask), weights
    # END EXERCISE


def pearson_loss_np(pred: np.ndarray, target: np.ndarray, eps: float = 1e-12) -> float:
    """Negative Pearson correlation: −Σ p̃ t̃ / √(Σ p̃² Σ t̃²), p̃ = pred − mean(pred), same for t.

    It ignores the scale and offset of `pred`: only how well its ordering and spacing match
    the target's counts. eps keeps a constant vector from dividing by zero.
    """
    check_pearson(pred, target, eps)
    p, t = pred - pred.mean(), target - target.mean()
    return float(-(p * t).sum() / np.sqrt((p * p).sum() * (t * t).sum() + eps))


# ============================================================================ PyTorch
def cls_pool_torch(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Torch twin of `cls_pool_np`."""
    check_token_states(states, mask, like=torch.Tensor)
    return states[:, 0]


def mean_pool_torch(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Torch twin of `mean_pool_np`."""
    check_token_states(states, mask, like=torch.Tensor)
    # BEGIN EXERCISE 7.1 implement: masked mean over the real tokens (not the padding) (~10 min)
    real = mask.unsqueeze(-1)  # (B, L, 1)
    total = torch.where(real, states, torch.zeros_like(states)).sum(dim=1)
    return total / real.sum(dim=1).to(states.dtype)
    # END EXERCISE


def layer_norm_torch(x: torch.Tensor, eps: float = LN_EPS) -> torch.Tensor:
    """Torch twin of `layer_norm_np` (= F.layer_norm without weight and bias)."""
    check_layer_norm(x, eps)
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps)


def pearson_loss_torch(pred: torch.Tensor, target: torch.Tensor, eps: float = 1e-12
                       ) -> torch.Tensor:
    """Torch twin of `pearson_loss_np` (a differentiable scalar)."""
    check_pearson(pred, target, eps)
    p, t = pred - pred.mean(), target - target.mean()
    return -(p * t).sum() / torch.sqrt((p * p).sum() * (t * t).sum() + eps)
