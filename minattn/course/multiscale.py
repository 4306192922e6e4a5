"""Lesson 03's tasks, data, training, baselines, head analysis and figures: what serves the
lesson and is not the mechanism (that is minattn/multiscale.py, its fast paths
minattn/fast/multiscale.py).

    effective_scale_task     the paper's synthetic task: Σ_{i<=K} a_i ⊙ a_{N−i+1}
    partner_task             a task that needs a small scale and a large one
    glove_corpus             sentences -> GloVe word ids (the MR-sized sentiment data)
    uniform_weights_*, departure_*, drop_keys_*, head_statistics
                             what trained heads do against uniform attention in their windows
    pretrained_head_scales   the scale of every head of a pretrained encoder
    TransformerBaseline, BiLSTMClassifier, bag_of_words, mean_vectors, fit_logistic_regression
                             the baselines the Multi-Scale Transformer is compared with
    fit_partner, fit_effective_scale, fit_sentences, right_per_sentence
                             the lesson's training runs (seeded: the same seed, the same numbers)
    draw_*                   the lesson's figures
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention
from ..checks import check_classifier_inputs
from ..contract import check_array, check_size, describe, fail, shape_str
from ..encoder import encode_batch
from ..fast.multiscale import PIECE_KINDS
from ..multiscale import NodeReadout, masked_max_torch, measured_scale_torch
from .data import tokenize
from .train import History, length_batches, train


# ============================================================================ tasks and data
def effective_scale_task(batch_size: int, n: int, d: int, k: int, generator: torch.Generator,
                         device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The effective-scale task of Guo et al. (2020): which distances must a model bridge?

    a_1, ..., a_N ∈ R^d with entries ~ U(0, 1); the target is Σ_{i=1}^{K} a_i ⊙ a_{N−i+1}: the
    i-th token from the front must meet the i-th from the back, across distances N − 1, N − 3,
    ..., N − 2K + 1. Small K needs only the longest distances; K = N/2 every distance.

    Returns x (B, N, d) float32 and y (B, d).
    """
    batch_size, d = check_size("batch_size", batch_size, 1), check_size("d", d, 1)
    n, k = check_size("n", n, 2), check_size("k", k, 1)
    if k > n // 2:
        fail("k", "1 <= k <= n // 2", f"k={k}, n={n}")
    x = torch.rand(batch_size, n, d, generator=generator)
    y = (x[:, :k] * x.flip(1)[:, :k]).sum(1)  # a_i ⊙ a_{N-i+1}, i = 1..K
    return x.to(device), y.to(device)


PARTNER_X, PARTNER_Y, PARTNER_Z, PARTNER_FILLER = 1, 2, 3, 4  # token ids; fillers 4, 5, ...


def partner_task(size: int, n: int, pairs: int, rng: np.random.Generator, n_fillers: int = 8,
                 gap: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Lesson 03's task that needs a small scale *and* a large one.

    Every sequence of n tokens holds `pairs` (odd) tokens X, each right next to a partner, Y or
    Z, on a random side (XY or YX: windows see distance, not direction, so the rule must not
    depend on it). Label 1 if more X stand next to a Y than next to a Z. The vote is always
    as close as it can be: (pairs + 1) / 2 against (pairs − 1) / 2.
    Lone Y and Z fill up both to `pairs` each, so the bag of tokens is the same for both labels:
    only *which token stands next to which* tells them apart (a local pattern: ω >= 1), and
    only counting the pairs over the whole sequence decides the vote (a global count). Between
    any two units (pair or lone token) lie at least `gap` filler tokens (ids 4 .. 4 +
    n_fillers − 1), so a window of ω <= gap around an X holds its partner and nothing else.

    Returns tokens (size, n) int64 (no padding) and labels (size,) int64.
    """
    units_len = 3 * pairs  # 2 per pair, 1 per lone token (there are `pairs` lone tokens)
    if size < 1 or pairs < 1 or pairs % 2 == 0 or n < units_len + gap * (2 * pairs - 1):
        fail("partner_task sizes", "size >= 1, an odd number of pairs, and n >= 3·pairs + "
             "gap·(2·pairs − 1)", f"size={size}, n={n}, pairs={pairs}, gap={gap}")
    tokens = np.empty((size, n), dtype=np.int64)
    labels = rng.integers(0, 2, size)
    x, y, z = PARTNER_X, PARTNER_Y, PARTNER_Z
    for b in range(size):
        with_y = pairs // 2 + int(labels[b])  # the majority partner wins by one pair
        units = [[x, y] for _ in range(with_y)] + [[x, z] for _ in range(pairs - with_y)]
        units = [u[::-1] if rng.random() < 0.5 else u for u in units]  # XY or YX
        units += [[y]] * (pairs - with_y) + [[z]] * with_y  # lone tokens: pairs Y and Z in all
        units = [units[i] for i in rng.permutation(len(units))]
        spare = n - units_len - gap * (len(units) - 1)  # fillers beyond the minimum gaps
        extra = np.diff(np.concatenate([[0], np.sort(rng.integers(0, spare + 1, len(units))),
                                        [spare]]))  # a random split into len(units) + 1 gaps
        row = []
        for i, unit in enumerate(units):
            row += [PARTNER_FILLER] * (int(extra[i]) + (gap if i else 0)) + unit
        row += [PARTNER_FILLER] * int(extra[-1])
        tokens[b] = row
    fillers = tokens == PARTNER_FILLER
    tokens[fillers] += rng.integers(0, n_fillers, int(fillers.sum()))
    return torch.from_numpy(tokens), torch.from_numpy(labels)


GLOVE_PAD, GLOVE_UNK = 0, 1  # the first two rows of `glove_corpus`'s embedding matrix


def glove_corpus(splits: dict[str, list[str]], vocab: list[str], vectors: np.ndarray,
                 max_len: int) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """Sentences -> GloVe word ids, for the lesson-03 sentiment models.

    `splits` maps a split name to its sentences; each is tokenized
    (`minattn.course.data.tokenize`) and cut to `max_len` words. Only the words that occur get
    a row: the embedding matrix is
    [GLOVE_PAD = 0 ; GLOVE_UNK = 0 (words GloVe lacks) ; the GloVe vector of each word that occurs].
    Returns {split: (ids (n, max_len) int64, lengths (n,) int64)} and the matrix (V, 50).
    """
    check_array("vectors", vectors, "float", ndim=2, hint="(V, dim)", like=np.ndarray)
    if len(vocab) != vectors.shape[0]:
        fail("vectors", f"one row per word of vocab ({len(vocab)})", describe(vectors))
    max_len = check_size("max_len", max_len, 1)
    index = {w: i for i, w in enumerate(vocab)}
    tokens = {name: [tokenize(s)[:max_len] for s in texts] for name, texts in splits.items()}
    used = sorted({index[w] for sents in tokens.values() for s in sents for w in s if w in index})
    row = {vocab[i]: 2 + r for r, i in enumerate(used)}
    matrix = np.concatenate([np.zeros((2, vectors.shape[1]), np.float32), vectors[used]])
    out = {}
    for name, sents in tokens.items():
        ids = torch.zeros(len(sents), max_len, dtype=torch.long)
        for b, s in enumerate(sents):
            ids[b, :len(s)] = torch.tensor([row.get(w, GLOVE_UNK) for w in s], dtype=torch.long)
        out[name] = (ids, torch.tensor([max(len(s), 1) for s in sents]))
    return out, torch.from_numpy(matrix)


# ============================================================================ what trained heads do
def uniform_weights_np(mask: np.ndarray) -> np.ndarray:
    """The reference a trained head is compared with: attention spread evenly over the keys
    each query may see. mask (..., N, N) bool -> weights (..., N, N) float64; a row that may see
    nothing gets zeros. Its measured scale is what a head that learned nothing would show."""
    allowed = np.asarray(mask, dtype=np.float64)
    return allowed / np.maximum(allowed.sum(-1, keepdims=True), 1)


def drop_keys_np(weights: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Attention weights (B, H, N, N) with the keys where keep (B, N) is False removed and each
    row renormalised over the keys kept (a row left with nothing: zeros). Used to take
    attention sinks such as BERT's [CLS] and [SEP] out of a measured scale."""
    w = weights * np.asarray(keep, dtype=weights.dtype)[:, None, None, :]
    total = w.sum(-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0)


def departure_np(weights: np.ndarray, mask: np.ndarray,
                 query_mask: np.ndarray | None = None) -> np.ndarray:
    """How far each head is from uniform attention inside what it may see: the total-variation
    distance ½ Σ_j |a_ij − u_ij| (0: uniform, near 1: all weight where uniform puts almost
    none), averaged over the queries (and the batch) as `measured_scale_np` averages.

    weights (B, H, N, N), mask bool broadcastable to them, query_mask (B, N) or None -> (H,).
    A head can keep the uniform head's scale and still depart from it (by picking words).
    """
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    tv = 0.5 * np.abs(weights - uniform_weights_np(np.broadcast_to(mask, weights.shape))).sum(-1)
    if query_mask is None:
        return tv.mean(axis=(0, 2))
    keep = np.asarray(query_mask, dtype=np.float64)[:, None, :]
    return (tv * keep).sum(axis=(0, 2)) / np.maximum(keep.sum(axis=(0, 2)), 1)


def uniform_weights_torch(mask: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Torch twin of `uniform_weights_np`: (..., N, N) bool -> even weights over allowed keys."""
    allowed = mask.to(dtype)
    return allowed / allowed.sum(-1, keepdim=True).clamp(min=1)


def departure_torch(weights: torch.Tensor, mask: torch.Tensor,
                    query_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Torch twin of `departure_np`: (H,) mean total-variation distance from uniform attention."""
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights of self-attention", "(B, H, N, N)", shape_str(weights.shape))
    flat = uniform_weights_torch(mask.expand(weights.shape), weights.dtype)
    tv = 0.5 * (weights - flat).abs().sum(-1)  # (B, H, N)
    if query_mask is None:
        return tv.mean(dim=(0, 2))
    keep = query_mask.to(weights.dtype)[:, None, :]
    return (tv * keep).sum(dim=(0, 2)) / keep.sum(dim=(0, 2)).clamp(min=1)


def drop_keys_torch(weights: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Torch twin of `drop_keys_np`: (B, H, N, N) weights without the keys where keep (B, N)
    is False, rows renormalised."""
    w = weights * keep.to(weights.dtype)[:, None, None, :]
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / total.clamp(min=torch.finfo(w.dtype).tiny), 0.0)


def head_statistics_torch(weights, masks, lengths=None) -> dict[str, np.ndarray]:
    """Torch-only, for trained models: per-layer weights (B, H, 1 + N, 1 + N) and what each
    query could see -> (L, H) arrays over the real queries (the node and the first `lengths`
    tokens):
        "scale"          the measured scale (`measured_scale_torch`);
        "uniform_scale"  the scale of uniform attention under the same mask: what the head
                         would show had it learned nothing;
        "departure"      the distance from that uniform attention (`departure_torch`).
    """
    n = weights[0].shape[-1]
    keep = None if lengths is None else \
        torch.arange(n, device=weights[0].device)[None] < lengths[:, None] + 1
    stats = {"scale": [], "uniform_scale": [], "departure": []}
    for w, m in zip(weights, masks):
        flat = uniform_weights_torch(m.expand(w.shape), w.dtype)
        stats["scale"].append(measured_scale_torch(w, keep).cpu().numpy())
        stats["uniform_scale"].append(measured_scale_torch(flat, keep).cpu().numpy())
        stats["departure"].append(departure_torch(w, m, keep).cpu().numpy())
    return {k: np.stack(v) for k, v in stats.items()}


@torch.no_grad()
def head_statistics(model, inputs, lengths=None) -> dict[str, np.ndarray]:
    """`head_statistics_torch` of every head of `model` (a MultiScaleTransformer or a
    TransformerBaseline: anything with `attention_maps`) on this batch: (L, H) arrays."""
    return head_statistics_torch(*model.attention_maps(inputs, lengths), lengths)


@torch.no_grad()
def pretrained_head_scales(encoder, tokenizer, texts: list[str], batch_size: int = 64
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The scale of every head of a pretrained BERT-style encoder (`encoder.MiniLMEncoder`), per
    sentence, with the attention sinks [CLS] and [SEP] taken out.

    BERT heads park much of their weight on [CLS] and [SEP] (an "attention sink": a no-op
    target), which sit at both ends and would make every head look wide. So the first and the
    last real token are removed as keys and as queries, and each query's weights are
    renormalised over the words that are left (`drop_keys_torch`).
    Returns (S, L, H) measured scales and (S, L, H) the scales of uniform attention over the
    same words (the reference: a head that attends evenly to the whole sentence).
    """
    device = next(encoder.parameters()).device
    measured, uniform = [], []
    for start in range(0, len(texts), batch_size):
        ids, mask = encode_batch(tokenizer, texts[start:start + batch_size], device)
        _, weights = encoder.run(ids, mask, need_weights=True)  # L × (B, H, N, N)
        n = ids.shape[1]
        pos = torch.arange(n, device=device)[None]
        words = mask & (pos > 0) & (pos < mask.sum(1, keepdim=True) - 1)  # no [CLS], no [SEP]
        flat = uniform_weights_torch(words[:, None, None, :].expand(-1, 1, n, n))
        for b in range(ids.shape[0]):
            keep = words[b:b + 1]
            measured.append([measured_scale_torch(drop_keys_torch(w[b:b + 1], keep), keep)
                             .cpu().numpy() for w in weights])
            uniform.append([measured_scale_torch(flat[b:b + 1], keep).cpu().numpy()
                            .repeat(weights[0].shape[1])] * len(weights))
    return np.array(measured), np.array(uniform)


# ============================================================================ baselines
class TransformerBaseline(nn.Module):
    """A vanilla Transformer encoder with the Multi-Scale Transformer's input and readout.

    inputs (B, N) token ids (with `embedding`) or (B, N, d_in), lengths (B,) or None -> (B, n_out)
    Linear input + learned positions, a classification node at position 0, `layers` post-norm
    blocks [x <- LN(x + MHA(x)); x <- LN(x + FFN(x))] with full attention (every head sees
    every real token), then MLP([x_node ; max over real tokens]) (`minattn.multiscale.NodeReadout`;
    max_pool=False: MLP(x_node)).
    """

    def __init__(self, d_in: int, d_model: int, num_heads: int, layers: int, n_out: int,
                 max_len: int, embedding: nn.Module | None = None, ffn: int = 2,
                 max_pool: bool = True):
        super().__init__()
        self.embedding = embedding
        self.input = nn.Linear(d_in, d_model)
        self.node = nn.Parameter(torch.randn(d_model) * 0.02)
        self.position = nn.Parameter(torch.randn(max_len + 1, d_model) * 0.02)
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, num_heads) for _ in range(layers))
        self.ffn = nn.ModuleList(nn.Sequential(nn.Linear(d_model, ffn * d_model), nn.GELU(),
                                               nn.Linear(ffn * d_model, d_model))
                                 for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * layers))
        self.classifier = NodeReadout(d_model, n_out, max_pool)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        check_classifier_inputs(inputs, lengths, self.embedding, self.input.weight,
                                max_len=self.position.shape[0] - 1)
        x = self.input(self.embedding(inputs) if self.embedding is not None else inputs)
        bsz, n, _ = x.shape
        x = torch.cat([self.node.expand(bsz, 1, -1), x], dim=1) + self.position[: n + 1]
        lengths = torch.full((bsz,), n, device=x.device) if lengths is None else lengths
        keep = torch.arange(n + 1, device=x.device)[None] < lengths[:, None] + 1  # (B, 1 + N)
        self.last_weights = []
        for layer, (attn, ffn) in enumerate(zip(self.attn, self.ffn)):
            out, weights = attn(x, mask=keep[:, None, None, :], need_weights=self.record)
            self.last_weights.append(weights)
            x = self.norms[2 * layer](x + out)
            x = self.norms[2 * layer + 1](x + ffn(x))
        return self.classifier(x, keep)

    record = False  # True: forward keeps each layer's weights (B, H, 1 + N, 1 + N)

    @torch.no_grad()
    def attention_maps(self, inputs, lengths=None):
        """Every layer's weights (B, H, 1 + N, 1 + N) and what each query could see (the real
        keys, (B, 1, 1, 1 + N)), as `MultiScaleTransformer.attention_maps`."""
        self.record = True
        try:
            self.forward(inputs, lengths)
        finally:
            self.record = False
        n = self.last_weights[0].shape[-1]
        lengths = torch.full((inputs.shape[0],), n - 1) if lengths is None else lengths
        keep = torch.arange(n, device=self.node.device)[None] < lengths[:, None] + 1
        return list(self.last_weights), [keep[:, None, None, :]] * len(self.last_weights)

    @torch.no_grad()
    def measured_scales(self, inputs, lengths=None) -> np.ndarray:
        """(L, H) measured scale of every head on this batch (real queries only)."""
        return head_statistics(self, inputs, lengths)["scale"]


class BiLSTMClassifier(nn.Module):
    """A bidirectional LSTM baseline with the same readout idea.

    inputs (B, N) token ids (with `embedding`) or (B, N, d_in), lengths (B,) or None -> (B, n_out)
    Packed BiLSTM (each direction starts at the sentence's own end), then
    MLP([last states of both directions ; max over real tokens]).
    """

    def __init__(self, d_in: int, hidden: int, n_out: int, embedding: nn.Module | None = None):
        super().__init__()
        self.embedding = embedding
        self.lstm = nn.LSTM(d_in, hidden, batch_first=True, bidirectional=True)
        self.classifier = nn.Sequential(nn.Linear(4 * hidden, hidden), nn.ReLU(),
                                        nn.Linear(hidden, n_out))

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        check_classifier_inputs(inputs, lengths, self.embedding, self.lstm.weight_ih_l0)
        x = self.embedding(inputs) if self.embedding is not None else inputs
        bsz, n, _ = x.shape
        lengths = torch.full((bsz,), n) if lengths is None else lengths
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, (h, _) = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=n)
        keep = torch.arange(n, device=x.device)[None] < lengths.to(x.device)[:, None]
        last = torch.cat([h[0], h[1]], dim=-1)  # (B, 2·hidden): forward and backward
        return self.classifier(torch.cat([last, masked_max_torch(out, keep)], dim=-1))


def bag_of_words(ids: torch.Tensor, lengths: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Which words each sentence holds: ids (n, N), lengths (n,) -> (n, V) float 0/1 (the
    padding beyond each length is ignored; word order is gone)."""
    real = torch.arange(ids.shape[1])[None] < lengths[:, None]
    out = torch.zeros(ids.shape[0], vocab_size)
    out[torch.arange(ids.shape[0])[:, None].expand_as(ids)[real], ids[real]] = 1.0
    return out


def mean_vectors(ids: torch.Tensor, lengths: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """The mean word vector of each sentence: ids (n, N), lengths (n,), matrix (V, D) -> (n, D)."""
    real = (torch.arange(ids.shape[1])[None] < lengths[:, None]).to(matrix.dtype)
    return (matrix[ids] * real[..., None]).sum(1) / real.sum(1, keepdim=True).clamp(min=1)


def fit_logistic_regression(x: torch.Tensor, y: torch.Tensor, x_valid: torch.Tensor,
                            y_valid: torch.Tensor, l2_grid=(1e-4, 1e-3, 1e-2, 1e-1)
                            ) -> tuple[nn.Linear, float, float]:
    """The linear baseline: multinomial logistic regression, fitted full-batch with L-BFGS for
    each L2 strength of `l2_grid` (loss = cross-entropy + l2/2 · |W|²); the strength with the
    best validation accuracy wins.

    x (n, F) float, y (n,) int64 -> (the fitted nn.Linear, its l2, its validation accuracy).
    """
    if x.ndim != 2 or y.shape != (x.shape[0],) or x_valid.shape[1:] != x.shape[1:]:
        fail("logistic regression inputs", "x (n, F), y (n,), x_valid (m, F)",
             f"x {tuple(x.shape)}, y {tuple(y.shape)}, x_valid {tuple(x_valid.shape)}")
    best = None
    for l2 in l2_grid:
        linear = nn.Linear(x.shape[1], int(y.max()) + 1)
        nn.init.zeros_(linear.weight)
        nn.init.zeros_(linear.bias)
        opt = torch.optim.LBFGS(linear.parameters(), lr=1.0, max_iter=200,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = (nn.functional.cross_entropy(linear(x), y)
                    + 0.5 * l2 * linear.weight.square().sum())
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            acc = (linear(x_valid).argmax(-1) == y_valid).float().mean().item()
        if best is None or acc > best[2]:
            best = (linear, l2, acc)
    return best


# ============================================================================ training runs
def _adamw(model, lr):
    """AdamW with its multi-tensor update: on a CPU the default updates one tensor at a time,
    which costs these small models a few percent of every step."""
    return torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)


def fit_partner(model, seed: int, steps: int, test: tuple[torch.Tensor, torch.Tensor],
                n: int, pairs: int, batch_size: int = 32, lr: float = 3e-3,
                desc: str = "partner", progress: bool = True) -> float:
    """Train `model` on fresh `partner_task` batches (drawn from `seed`) with cross-entropy for
    `steps` steps; returns its accuracy on `test` = (tokens (M, n), labels (M,))."""
    device = next(model.parameters()).device
    rng = np.random.default_rng(10 + seed)
    x_test, y_test = (t.to(device) for t in test)

    def evaluate():
        return {"acc": (model(x_test).argmax(-1) == y_test).float().mean().item()}

    history = train(model, lambda step: tuple(t.to(device) for t in partner_task(
        batch_size, n, pairs, rng)), lambda m, x, y: F.cross_entropy(m(x), y), steps=steps,
        optimizer=_adamw(model, lr), evaluate=evaluate, eval_every=steps, desc=desc,
        progress=progress)
    return history.last("acc")


def fit_effective_scale(model, seed: int, steps: int, valid: tuple[torch.Tensor, torch.Tensor],
                        k: int = 1, batch_size: int = 32, lr: float = 3e-3,
                        eval_every: int = 250, stop=None, desc: str = "effective scale",
                        progress: bool = True) -> History:
    """Train `model` on fresh `effective_scale_task` batches (N and d from `valid`, drawn from
    `seed`) with the MSE for up to `steps` steps; history["nmse"] is the MSE / Var(target) on
    the validation set `valid` = (x, y) every `eval_every` steps (1 = predicting the mean).
    `stop(history)` -> True ends training early (asked after each evaluation). The test set
    stays out of training and stopping: the caller scores it once, at the end."""
    x_valid, y_valid = valid
    _, n, d = x_valid.shape
    gen = torch.Generator().manual_seed(1 + seed)
    variance = y_valid.var().item()

    def evaluate():
        return {"nmse": F.mse_loss(model(x_valid), y_valid).item() / variance}

    return train(model, lambda step: effective_scale_task(batch_size, n, d, k, gen,
                                                          x_valid.device),
                 lambda m, x, y: F.mse_loss(m(x), y), steps=steps, optimizer=_adamw(model, lr),
                 evaluate=evaluate, eval_every=eval_every, stop=stop, desc=desc,
                 progress=progress)


def _batch(split, idx, device):
    """One batch of a split (ids, lengths, labels), cut to its longest sentence: N = that."""
    ids, lengths, labels = split
    length = lengths[idx]
    return (ids[idx, :int(length.max())].to(device), length.to(device), labels[idx].to(device))


@torch.no_grad()
def right_per_sentence(model, split, batch_size: int = 256) -> np.ndarray:
    """(n,) bool: which sentences of `split` = (ids (n, N), lengths (n,), labels (n,)) the
    model classifies right (batches of similar length; eval mode)."""
    model.eval()
    device = next(model.parameters()).device
    right = torch.zeros(len(split[1]), dtype=torch.bool)
    for idx in length_batches(split[1], batch_size, torch.Generator().manual_seed(0)):
        x, length, y = _batch(split, idx, device)
        right[idx] = (model(x, length).argmax(-1) == y).cpu()
    return right.numpy()


def fit_sentences(model, data: dict, epochs: int, seed: int, batch_size: int = 64,
                  lr: float = 3e-3, desc: str = "sentences", progress: bool = True
                  ) -> tuple[int, np.ndarray, list[float]]:
    """Train a sentence classifier for `epochs` epochs of `data["train"]` (batches of similar
    length, shuffled from `seed`), check `data["valid"]` after each epoch and keep the epoch
    with the best accuracy there (the model is left with its weights).

    data: {"train" | "valid" | "test": (ids (n, N) int64, lengths (n,), labels (n,))}.
    Returns the best epoch (1-based), which test sentences it gets right ((n_test,) bool) and
    the development accuracy after each epoch.
    """
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    batches = [b for _ in range(epochs) for b in length_batches(data["train"][1], batch_size,
                                                                gen)]
    valid: list[float] = []  # accuracy on data["valid"] after each epoch
    best = {}

    def evaluate():
        acc = float(right_per_sentence(model, data["valid"]).mean())
        if not valid or acc > max(valid):  # the first epoch of the best accuracy is kept
            best.update(epoch=len(valid) + 1, state=copy.deepcopy(model.state_dict()))
        valid.append(acc)
        return {"valid": acc}

    train(model, lambda step: _batch(data["train"], batches[step - 1], device),
          lambda m, x, length, y: F.cross_entropy(m(x, length), y), steps=len(batches),
          optimizer=_adamw(model, lr), eval_every=len(batches) // epochs, evaluate=evaluate,
          desc=desc, progress=progress)
    model.load_state_dict(best["state"])
    return best["epoch"], right_per_sentence(model, data["test"]), valid


# ============================================================================ figures
# matplotlib is imported by the functions that draw: every pytest run imports this module
# for its training code (tests/bad_calls.py), half a second less without pyplot.
def draw_head_scales(axes, head_mean: np.ndarray, uniform: float) -> None:
    """Two panels: the (L, H) table of each head's mean scale, and per layer the range over
    the heads, their mean and the scale of uniform attention (`uniform`)."""
    from .plots import heatmap

    layers, heads = head_mean.shape
    image = heatmap(axes[0], head_mean, xlabels=range(1, heads + 1),
                    ylabels=range(1, layers + 1), annotate=True, vmax=float(head_mean.max()),
                    title="measured scale of each head (tokens)")
    axes[0].set(xlabel="head", ylabel="layer")
    axes[0].figure.colorbar(image, ax=axes[0], label="measured scale (tokens)")
    x = np.arange(1, layers + 1)
    axes[1].fill_between(x, head_mean.min(1), head_mean.max(1), alpha=0.25,
                         label=f"range over the {heads} heads")
    axes[1].plot(x, head_mean.mean(1), "o-", label="mean over the heads")
    axes[1].axhline(uniform, color="black", ls=":", label="uniform attention over the words")
    axes[1].set(xlabel="layer", ylabel="measured scale (tokens)", title="per layer", xticks=x)
    axes[1].legend(fontsize=8, loc="lower right")
    axes[1].grid(alpha=0.3)


def draw_model(ax, windows: list[list[int]], n: int) -> None:
    """Layers bottom to top: in each, the window of every head around one query token (black)
    of a sentence of n tokens after the node (red); on top, the classifier's inputs."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle

    query = n // 2
    colours = plt.get_cmap("viridis")(np.linspace(0.1, 0.9, len(windows[0])))
    for layer, ws in enumerate(windows):
        base = 1.4 * layer
        for t in range(n + 1):
            ax.add_patch(Rectangle((t - 0.4, base), 0.8, 0.3,
                                   color="tab:red" if t == 0 else "lightgrey"))
        ax.add_patch(Rectangle((query - 0.4, base), 0.8, 0.3, color="black"))
        for h, (w, c) in enumerate(zip(ws, colours)):
            lo, hi = max(0, query - w), min(n, query + w)
            y = base + 0.45 + 0.15 * h
            ax.plot([lo - 0.4, hi + 0.4], [y, y], color=c, lw=3, solid_capstyle="butt")
            ax.text(hi + 0.7, y, f"ω={w}", fontsize=7, va="center")
        ax.text(-1.2, base + 0.15, f"layer {layer + 1}", ha="right", va="center", fontsize=9)
    top = 1.4 * len(windows)
    ax.add_patch(Rectangle((-0.4, top), 0.8, 0.3, color="tab:red"))
    ax.add_patch(Rectangle((0.6, top), n - 0.2, 0.3, color="tab:blue", alpha=0.4))
    ax.text(n / 2, top + 0.15, "max-pool over the tokens", ha="center", va="center", fontsize=9)
    ax.text(-0.6, top + 0.15, "node", ha="right", va="center", fontsize=9, color="tab:red")
    for x_from in (0, n / 2):
        ax.add_patch(FancyArrowPatch((x_from, top + 0.35), (n / 2, top + 0.9), arrowstyle="->",
                                     mutation_scale=12))
    ax.text(n / 2, top + 1.0, "MLP([node ; max-pool]) -> class", ha="center", fontsize=9)
    ax.set(xlim=(-5, n + 4), ylim=(-0.3, top + 1.4),
           xlabel="position (0 = classification node, then the tokens)")
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)


def draw_head_statistics(axes, heads: dict[str, dict[str, np.ndarray]],
                         markers: dict[str, str]) -> None:
    """Every head of each model (`heads[name]`, `heads[name + ", untrained"]`: the (L, H)
    arrays of `head_statistics_torch`), filled when trained, hollow when not: left, measured
    scale against uniform attention's; right, departure from uniform."""
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    for name, marker in markers.items():
        for trained, fill in ((False, "none"), (True, None)):
            st = heads[name if trained else name + ", untrained"]
            for layer, colour in zip(range(len(st["scale"])), colours):
                axes[0].scatter(st["uniform_scale"][layer], st["scale"][layer], marker=marker,
                                facecolors=fill or colour, edgecolors=colour, s=40,
                                label=f"{name}, layer {layer + 1}" if trained else None)
                axes[1].scatter(st["uniform_scale"][layer], st["departure"][layer],
                                marker=marker, facecolors=fill or colour, edgecolors=colour, s=40)
    top = max(st["uniform_scale"].max() for st in heads.values()) * 1.05
    axes[0].plot([0, top], [0, top], color="black", ls=":", lw=1, label="= uniform in the window")
    xlabel = "scale of uniform attention in the head's window (tokens)"
    axes[0].set(xlabel=xlabel, ylabel="measured scale (tokens)",
                title="how far: measured vs uniform")
    axes[1].set(xlabel=xlabel, ylabel="departure from uniform (TV distance)",
                title="which words: departure")
    axes[0].legend(fontsize=7, loc="upper left")
    for ax in axes:
        ax.grid(alpha=0.3)


def draw_band_pieces(ax, pieces: np.ndarray, chunk: int, window: int) -> None:
    """The (N, N) plan of `band_pieces_np` (kind 1..4 of `PIECE_KINDS`, 0 = outside the band),
    with the chunks of `chunk` queries marked."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    n = pieces.shape[0]
    colours = ["white", "tab:blue", "tab:orange", "tab:green", "tab:red"]
    ax.imshow(pieces, cmap=ListedColormap(colours), vmin=-0.5, vmax=4.5, interpolation="nearest")
    for a in range(chunk, n, chunk):
        ax.axhline(a - 0.5, color="grey", lw=0.6)
    labels = {"all": "full block (no mask)",
              "lower": "right edge of the band: causal (t ≤ r)",
              "upper": "left edge of the band: causal read backwards (t ≥ r)",
              "mask": "edge cut short by an end of the sequence (masked)"}
    ax.legend(handles=[Patch(color=c, label=labels[kind])
                       for c, kind in zip(colours[1:], PIECE_KINDS)], loc="upper center",
              bbox_to_anchor=(0.5, -0.12), fontsize=7)
    ax.set(xlabel="key j", ylabel=f"query i (grey lines: chunks of c = {chunk})",
           title=f"the band kernel's pieces, N = {n}, ω = {window}")
