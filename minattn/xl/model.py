"""Transformer-XL's modules (Dai et al. 2019), and lesson 04's baseline without memory.

    RelMultiHeadAttention   relative attention over [memory ; segment]: the explicit
                            `rel_attention_torch` when the weights are asked for, otherwise the
                            relative-shift fast path `rel_attention_fast_torch` (`fast.py`)
    XLLayer                 one layer: relative attention, then a ReLU FFN
    TransformerXL           the language model: embedding, layers, tied output, memories
    VanillaLM               the baseline: the same size, absolute positions, no memory

The math is in `reference.py` (NumPy, then its torch twin); this file only builds on it.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..attention import (
    MultiHeadAttention,
    causal_mask_torch,
    check_table_sizes,
    check_tokens,
    merge_heads_torch,
    sinusoid_torch,
    split_heads_torch,
)
from ..checks import check_array, check_ids, check_same_device, check_size, describe, fail
from .fast import rel_attention_fast_torch
from .reference import (
    check_layer_inputs,
    rel_attention_torch,
    update_memory_torch,
)


# ============================================================================ Transformer-XL
class RelMultiHeadAttention(nn.Module):
    """Relative multi-head attention over [memory ; segment], twin of `rel_multi_head_attention_np`.

    forward(x (B, L, D), memory (B, M, D) or None, need_weights=False, clamp_len=None)
        -> output (B, L, D), weights (B, H, L, M + L) or None

    need_weights=True runs the explicit `rel_attention_torch`; otherwise the relative-shift
    fast path `rel_attention_fast_torch` (same numbers, no O(L·(M+L)·dh) gather).
    The original implementation fuses q, k, v into one `qkv_net` and shares u, v between
    layers; here each layer has its own (see `official.official_to_ours`).
    """

    def __init__(self, d_model: int, num_heads: int, max_len: int = 4096):
        super().__init__()
        d_model = check_size("d_model", d_model, 1)
        num_heads = check_size("num_heads", num_heads, 1)
        max_len = check_size("max_len", max_len, 1)
        if d_model % num_heads or d_model % 2:
            fail("d_model must split evenly into heads and be even", "d_model % num_heads == 0",
                 f"d_model={d_model}, num_heads={num_heads}")
        self.d_model, self.num_heads, self.max_len = d_model, num_heads, max_len
        dh = d_model // num_heads
        self.q_proj, self.k_proj, self.v_proj, self.r_proj, self.out_proj = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(5))
        self.u_bias = nn.Parameter(torch.zeros(num_heads, dh))  # u: content bias
        self.v_bias = nn.Parameter(torch.zeros(num_heads, dh))  # v: position bias

    def forward(self, x, memory=None, need_weights: bool = False, clamp_len: int | None = None):
        check_layer_inputs(x, memory, self.d_model, self.num_heads, dtype=self.q_proj.weight.dtype)
        check_same_device(x=x, memory=memory, weights=self.q_proj.weight)
        context = x if memory is None else torch.cat([memory, x], dim=1)  # (B, M + L, D)
        Lk = context.shape[1]
        if Lk > self.max_len:
            fail("more positions than the relative-position table holds",
                 f"M + L <= max_len = {self.max_len}", f"M + L = {Lk}")
        q = split_heads_torch(self.q_proj(x), self.num_heads)  # (B, H, L, dh)
        k = split_heads_torch(self.k_proj(context), self.num_heads)  # (B, H, M + L, dh)
        v = split_heads_torch(self.v_proj(context), self.num_heads)
        R = sinusoid_torch(Lk, self.d_model, x.device, x.dtype, clamp_len)  # (M + L, D)
        r = split_heads_torch(self.r_proj(R)[None], self.num_heads)[0]  # (H, M + L, dh)
        if need_weights:
            heads, weights = rel_attention_torch(q, k, v, r, self.u_bias, self.v_bias)
        else:
            heads, weights = rel_attention_fast_torch(q, k, v, r, self.u_bias, self.v_bias), None
        return self.out_proj(merge_heads_torch(heads)), weights

    def numpy_params(self) -> dict:
        """The weights as float64 NumPy arrays, keyed as `rel_multi_head_attention_np` expects."""
        get = lambda t: t.detach().cpu().double().numpy()  # noqa: E731
        params = {f"w_{s}": get(getattr(self, f"{s}_proj").weight) for s in "qkvr"}
        params.update(w_o=get(self.out_proj.weight), u_bias=get(self.u_bias),
                      v_bias=get(self.v_bias))
        return params


class XLLayer(nn.Module):
    """One Transformer-XL layer: relative attention over [memory ; x], then a ReLU FFN.

    pre_norm=True:  x + Attn(LN(x), LN(mem)), then x + FFN(LN(x))   (trains easily when small)
    pre_norm=False: LN(x + Attn(x, mem)),     then LN(x + FFN(x))   (the paper's layout)
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, pre_norm: bool = True,
                 max_len: int = 4096):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = RelMultiHeadAttention(d_model, num_heads, max_len)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, memory=None, need_weights: bool = False, clamp_len: int | None = None):
        if self.pre_norm:
            mem = None if memory is None else self.norm1(memory)
            out, weights = self.attention(self.norm1(x), mem, need_weights, clamp_len)
            x = x + out
            return x + self.ff(self.norm2(x)), weights
        out, weights = self.attention(x, memory, need_weights, clamp_len)
        x = self.norm1(x + out)
        return self.norm2(x + self.ff(x)), weights


class TransformerXL(nn.Module):
    """A Transformer-XL language model: embedding (×√D), L `XLLayer`s, tied output.

    forward(tokens (B, L), memories=None, mem_len=None, need_weights=False, clamp_len=None,
            stop_gradient=True) -> logits (B, L, V), new memories (, weights per layer)

    `memories` is a list with one (B, M, D) tensor per layer (the inputs that layer saw in the
    previous segments), or None at the start of a text. The returned memories are detached
    (the paper's stop-gradient SG); feed them to the next call. `mem_len` overrides the memory
    length (e.g. longer at evaluation than in training); `clamp_len` (default: the one given
    to the constructor, None = no clamping) encodes every distance beyond it as that distance,
    as the original code's `--clamp_len`. `stop_gradient=False` leaves the new memories in
    the graph, for an experiment that back-propagates into the previous segment.

    Layers are pre-norm by default (LayerNorm before attention and FFN, and once at the end),
    which trains small models without a warm-up; `pre_norm=False` is the paper's post-norm.
    """

    def __init__(self, vocab_size: int, d_model: int = 128, num_heads: int = 4,
                 num_layers: int = 2, d_ff: int | None = None, mem_len: int = 64,
                 pre_norm: bool = True, max_len: int = 4096, clamp_len: int | None = None):
        super().__init__()
        vocab_size = check_size("vocab_size", vocab_size, 1)
        d_model = check_size("d_model", d_model, 1)
        num_layers = check_size("num_layers", num_layers, 1)
        mem_len = check_size("mem_len", mem_len)
        if d_ff is not None:
            d_ff = check_size("d_ff", d_ff, 1)
        check_table_sizes(0, d_model, clamp_len)
        self.d_model, self.mem_len, self.vocab_size = d_model, mem_len, vocab_size
        self.clamp_len = clamp_len
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)  # ×√D below: unit scale
        self.layers = nn.ModuleList(XLLayer(d_model, num_heads, d_ff or 4 * d_model, pre_norm,
                                            max_len) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, tokens, memories=None, mem_len: int | None = None,
                need_weights: bool = False, clamp_len: int | None = None,
                stop_gradient: bool = True):
        mem_len = self.mem_len if mem_len is None else check_size("mem_len", mem_len)
        clamp_len = self.clamp_len if clamp_len is None else clamp_len
        if memories is None:
            memories = [None] * len(self.layers)
        if not isinstance(memories, (list, tuple)) or len(memories) != len(self.layers):
            fail("memories", f"a list with one memory per layer ({len(self.layers)}), or None",
                 describe(memories))
        check_array("tokens", tokens, "int", ndim=2, hint="(B, L) token ids", like=torch.Tensor)
        check_ids("tokens", tokens, self.vocab_size)
        for memory in memories:
            if memory is not None and (not isinstance(memory, torch.Tensor) or memory.ndim != 3
                                       or memory.shape[0] != tokens.shape[0]
                                       or memory.shape[2] != self.d_model):
                fail("memories", f"None or (B, M, D) = ({tokens.shape[0]}, M, {self.d_model}) "
                     "tensors, as the last call returned them", describe(memory))
        check_same_device(tokens=tokens, weights=self.embedding.weight)
        h = self.embedding(tokens) * math.sqrt(self.d_model)  # (B, L, D)
        new_memories, all_weights = [], []
        for layer, memory in zip(self.layers, memories):
            kept = update_memory_torch(memory, h, mem_len)  # what layer n saw, detached (SG)
            if not stop_gradient:  # the same states, left in the graph
                both = h if memory is None else torch.cat([memory, h], dim=1)
                kept = both[:, both.shape[1] - kept.shape[1]:]
            new_memories.append(kept)
            h, weights = layer(h, memory, need_weights, clamp_len)
            all_weights.append(weights)
        h = self.final_norm(h)
        logits = h @ self.embedding.weight.T + self.out_bias  # tied input/output embedding
        return (logits, new_memories, all_weights) if need_weights else (logits, new_memories)


# ============================================================================ the vanilla baseline
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
        check_tokens(tokens, self.embedding)
        L = tokens.shape[1]
        h = self.embedding(tokens) * math.sqrt(self.d_model)
        h = h + sinusoid_torch(L, self.d_model, device=h.device, dtype=h.dtype)  # positions 0..L−1
        mask = causal_mask_torch(L, L, device=tokens.device)[None, None]  # (1, 1, L, L)
        for layer in self.layers:
            h = layer(h, mask)
        return self.final_norm(h) @ self.embedding.weight.T + self.out_bias, None
