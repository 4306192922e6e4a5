"""Small models for the lessons' training demos, built on the library's mechanisms."""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadAttention


class RecallAttention(nn.Module):
    """Associative recall with one cross-attention layer.

    Each pair (key, value) is one token: E_key[key] + E_val[value]. Each query is E_key[query].
    The queries attend over the pair tokens; the attended vector is read out as value logits.

        queries (B, Q), keys (B, P), values (B, P) -> logits (B, Q, n_values)
    """

    def __init__(self, n_keys: int, n_values: int, d_model: int = 64, num_heads: int = 1):
        super().__init__()
        self.key_embedding = nn.Embedding(n_keys, d_model)
        self.value_embedding = nn.Embedding(n_values, d_model)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, n_values))

    def forward(self, queries, keys, values, need_weights: bool = False):
        pairs = self.key_embedding(keys) + self.value_embedding(values)  # (B, P, D)
        asked = self.key_embedding(queries)  # (B, Q, D)
        found, weights = self.attention(asked, pairs, pairs, need_weights=need_weights)
        logits = self.readout(found)  # (B, Q, n_values)
        return (logits, weights) if need_weights else logits


class RecallMeanPool(nn.Module):
    """The same task without attention: every query sees the *mean* of the pair tokens.

    Averaging keeps which keys and which values occur but loses which value sat next to which
    key, so no amount of training can recover the binding — the point of the comparison.
    An MLP of about the attention model's size reads [query; mean].
    """

    def __init__(self, n_keys: int, n_values: int, d_model: int = 64):
        super().__init__()
        self.key_embedding = nn.Embedding(n_keys, d_model)
        self.value_embedding = nn.Embedding(n_values, d_model)
        self.mlp = nn.Sequential(nn.Linear(2 * d_model, 2 * d_model), nn.ReLU(),
                                 nn.Linear(2 * d_model, d_model), nn.LayerNorm(d_model),
                                 nn.Linear(d_model, n_values))

    def forward(self, queries, keys, values):
        pairs = self.key_embedding(keys) + self.value_embedding(values)  # (B, P, D)
        summary = pairs.mean(dim=1, keepdim=True)  # (B, 1, D): order and binding are gone
        asked = self.key_embedding(queries)  # (B, Q, D)
        return self.mlp(torch.cat([asked, summary.expand_as(asked)], dim=-1))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ==== lesson 04: Transformer-XL — the vanilla baseline, bits per character, sampling
import math  # noqa: E402

import torch.nn.functional as F  # noqa: E402

from .attention import causal_mask_torch  # noqa: E402
from .xl import TransformerXL, sinusoid_torch  # noqa: E402


class VanillaBlock(nn.Module):
    """A pre-norm Transformer block (causal self-attention + ReLU FFN), `XLLayer`'s twin
    without memory or relative positions."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads, bias=False)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, mask):
        x = x + self.attention(self.norm1(x), mask=mask)[0]
        return x + self.ff(self.norm2(x))


class VanillaLM(nn.Module):
    """The baseline of lesson 04: `TransformerXL`'s size and layout, absolute sinusoidal
    positions, no memory — every segment is read on its own.

    forward(tokens (B, L), memories=None, mem_len=None) -> logits (B, L, V), None
    (the same call as `TransformerXL`, so one training loop serves both; memories are ignored).
    """

    def __init__(self, vocab_size: int, d_model: int = 128, num_heads: int = 4,
                 num_layers: int = 2, d_ff: int | None = None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)
        self.layers = nn.ModuleList(VanillaBlock(d_model, num_heads, d_ff or 4 * d_model)
                                    for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, tokens, memories=None, mem_len=None):
        L = tokens.shape[1]
        h = self.embedding(tokens) * math.sqrt(self.d_model)
        h = h + sinusoid_torch(L, self.d_model, device=h.device, dtype=h.dtype)  # positions 0..L−1
        mask = causal_mask_torch(L, L, device=tokens.device)
        for layer in self.layers:
            h = layer(h, mask)
        return self.final_norm(h) @ self.embedding.weight.T + self.out_bias, None


def lm_loss(logits, targets):
    """Mean next-token cross-entropy in nats; targets of -100 are ignored."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


@torch.no_grad()
def evaluate_bpc(model, streams, seg_len: int, mem_len: int | None = None,
                 max_segments: int | None = None) -> float:
    """Bits per character over `streams` (B, T), read segment after segment in order.

    A `TransformerXL` carries its memory (of `mem_len`, default its training length) from
    one segment to the next; a `VanillaLM` reads each segment on its own.
    """
    model.eval()
    n_segments = (streams.shape[1] - 1) // seg_len
    if max_segments is not None:
        n_segments = min(n_segments, max_segments)
    total, count, memories = 0.0, 0, None
    for s in range(n_segments):
        x = streams[:, s * seg_len:(s + 1) * seg_len]
        y = streams[:, s * seg_len + 1:(s + 1) * seg_len + 1]
        logits, memories = model(x, memories, mem_len)
        total += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
        count += y.numel()
    return total / count / math.log(2)


@torch.no_grad()
def generate(model, prompt, n_new: int, generator: torch.Generator, context: int,
             temperature: float = 1.0):
    """Sample n_new tokens after prompt (1, P) -> (1, P + n_new).

    A `TransformerXL` reads the prompt once and then one token per step, its memory (length
    `context`) holding the past: the cached evaluation. A `VanillaLM` recomputes its whole
    window of the last `context` tokens for every new token.
    """
    model.eval()
    tokens, memories = prompt, None
    if isinstance(model, TransformerXL):
        logits, memories = model(prompt[:, -context:], None, context)
    for _ in range(n_new):
        if not isinstance(model, TransformerXL):
            logits, _ = model(tokens[:, -context:])
        probs = torch.softmax(logits[:, -1] / temperature, dim=-1)
        nxt = torch.multinomial(probs.cpu(), 1, generator=generator).to(tokens.device)
        tokens = torch.cat([tokens, nxt], dim=1)
        if isinstance(model, TransformerXL):
            logits, memories = model(nxt, memories, context)
    return tokens


@torch.no_grad()
def farthest_visible(model, seg_len: int, mem_len: int, n_segments: int, vocab_size: int,
                     seed: int = 0) -> int:
    """How far back can the last token of a segment see? Measured, not derived.

    Reads a random text of n_segments segments (memory `mem_len`) once as it is and once with
    each earlier token changed (all at once, one batch row per changed position), and returns
    the largest distance d whose change moves the logits of the very last token. Runs a
    float64 copy of `model`, so "moved" is a clear signal (> 1e-9), not rounding.
    """
    import copy

    model = copy.deepcopy(model).double().eval()
    T = seg_len * n_segments
    tokens = torch.randint(0, vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
    batch = tokens.repeat(T, 1)  # row d: the token d places before the last one is changed
    d = torch.arange(T)
    batch[d, T - 1 - d] = (batch[d, T - 1 - d] + 1) % vocab_size
    batch = torch.cat([tokens, batch[1:]]).to(next(model.parameters()).device)  # row 0: as is
    memories = None
    for s in range(n_segments):
        logits, memories = model(batch[:, s * seg_len:(s + 1) * seg_len], memories, mem_len)
    moved = (logits[1:, -1] - logits[:1, -1]).abs().amax(dim=-1) > 1e-9  # (T − 1,) d = 1, 2, …
    return int(torch.nonzero(moved).max()) + 1 if moved.any() else 0


def recurrent_lm_loss():
    """A `loss_fn` for `tools.train.train` that carries the memory from one batch to the next:
    batch s must be segment s of the same streams. (A `VanillaLM` returns no memory.)"""
    state = {"memories": None}

    def loss_fn(model, x, y):
        logits, state["memories"] = model(x, state["memories"])
        return lm_loss(logits, y)
    return loss_fn


@torch.no_grad()
def stream_accuracy(model, tokens, targets, seg_len: int, mem_len: int | None = None) -> float:
    """Next-token accuracy over (B, T) streams read segment by segment (memory carried for
    a `TransformerXL`); positions with target -100 are skipped."""
    model.eval()
    hits, count, memories = 0, 0, None
    for s in range(tokens.shape[1] // seg_len):
        part = slice(s * seg_len, (s + 1) * seg_len)
        logits, memories = model(tokens[:, part], memories, mem_len)
        keep = targets[:, part] != -100
        hits += (logits.argmax(-1) == targets[:, part])[keep].sum().item()
        count += keep.sum().item()
    return hits / max(count, 1)
