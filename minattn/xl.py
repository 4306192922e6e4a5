"""Transformer-XL (Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a
Fixed-Length Context"): segment recurrence and relative positions. Lesson 04.

A long text is cut into segments of L tokens. Layer n of the next segment attends over its
own segment *and* the previous hidden states of layer n−1, kept as a memory of M positions
whose gradient is stopped (SG, §3.2):

    h̃ⁿ⁻¹ = [SG(memⁿ⁻¹) ; hⁿ⁻¹]               (B, M + L, D): memory first, then the segment
    q = hⁿ⁻¹ W_q,   k = h̃ⁿ⁻¹ W_k,   v = h̃ⁿ⁻¹ W_v      (queries: the segment only)

Absolute positions would clash (position 0 of every segment looks alike), so the scores use
the *distance* i − j between query i and key j instead (§3.3), with a sinusoid table R (row δ
= the encoding of distance δ, lesson 01's `sinusoid_np`) and two learned vectors u, v per head:

    A_ij = q_iᵀk_j + q_iᵀ W_R R_{i−j} + uᵀk_j + vᵀ W_R R_{i−j}         (a) (b) (c) (d)
    out_i = Σ_j softmax_j(A_ij / √dh) v_j         over the causal keys j ≤ i

Shapes: B batch, H heads, dh = D / H, Lq = L queries, Lk = M + L keys. The queries are the
last L of the M + L positions (the course's bottom-right causal convention,
`causal_mask_np(L, M + L)`), so query i sits at position M + i and its distance to key j is
δ_ij = M + i − j ≥ 0; distances below zero are the future, masked. Through N layers the last
token of a segment reaches L − 1 + N·M tokens back when the memory is as long as a segment
(M = L, the paper's setting; Fig. 2). With M < L it is N·L + M − 1: a memory token near the end
of its own segment had already seen that segment's beginning.

Read top down: the NumPy reference (`rel_attention_np`: the four terms, one gather per (i, j);
`update_memory_np`: the memory), its torch twin line for line, then the modules the lesson
trains — `RelMultiHeadAttention`, `XLLayer`, the language model `TransformerXL` and its
baseline `VanillaLM` — and, last, the original implementation's parameter names mapped to
ours (`official_to_ours`). The relative-shift fast path and the key/value-cache decoder are in
`minattn/fast/xl.py`; a module uses the fast path when the caller passes it (`attend=`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from . import checks as c
from .attention import (
    MultiHeadAttention,
    causal_mask_np,
    causal_mask_torch,
    merge_heads_np,
    merge_heads_torch,
    sinusoid_np,
    sinusoid_torch,
    softmax_np,
    softmax_torch,
    split_heads_np,
    split_heads_torch,
)
from .contract import checked


# ============================================================================ NumPy reference
@checked(n_queries="int", n_keys="int")
def relative_distances_np(n_queries: int, n_keys: int) -> np.ndarray:
    """(Lq, Lk) int: δ_ij = (Lk − Lq) + i − j, the distance from key j back to query i.

    Negative where j lies in query i's future (exactly where `causal_mask_np` is False).
    """
    i = np.arange(n_queries)[:, None] + (n_keys - n_queries)
    return i - np.arange(n_keys)[None, :]


@checked(q="float (B, H, Lq, dh)", k="float (B, H, Lk, dh)", v="float (B, H, Lk, dh)",
         r="float* (H, P, dh)", u_bias="float (H, dh)", v_bias="float (H, dh)", scale="number?",
         rules=[c.relative_keys])
def rel_attention_np(q, k, v, r, u_bias, v_bias, scale=None):
    """Relative-position causal attention, the four terms written out for every (i, j).

    Args:
        q: (B, H, Lq, dh) queries of the segment;  k, v: (B, H, Lk, dh) over [memory ; segment].
        r: (H, P, dh) projected encodings r_δ = W_R R_δ per head, row δ = distance δ, P >= Lk.
        u_bias, v_bias: (H, dh) the learned u and v of each head.
    Returns:
        output (B, H, Lq, dh) and weights (B, H, Lq, Lk).
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    Lq, Lk = q.shape[2], k.shape[2]
    delta = relative_distances_np(Lq, Lk)  # (Lq, Lk)
    r_ij = r[:, np.maximum(delta, 0)]  # (H, Lq, Lk, dh): r_{i−j} gathered for every pair
    u = u_bias[None, :, None, :]  # (1, H, 1, dh): the same u for every batch row and query
    # (a) content:                        q_iᵀ k_j
    term_a = q @ np.swapaxes(k, -1, -2)  # (B, H, Lq, Lk)
    # (b) content-dependent position:     q_iᵀ r_{i−j}
    term_b = np.einsum("bhid,hijd->bhij", q, r_ij)
    # (c) global content bias:            uᵀ k_j
    term_c = u @ np.swapaxes(k, -1, -2)
    # (d) global position bias:           vᵀ r_{i−j}
    term_d = np.einsum("hd,hijd->hij", v_bias, r_ij)[None]
    scores = (term_a + term_b + term_c + term_d) * scale  # (B, H, Lq, Lk)
    weights = softmax_np(scores, causal_mask_np(Lq, Lk))  # future keys masked
    return weights @ v, weights


@checked(hidden="float* (B, L, D)", memory="float?* (B, M?, D)", mem_len="int")
def update_memory_np(memory, hidden, mem_len: int):
    """The next memory: the last `mem_len` positions of [memory ; hidden] (B, ·, D).

    memory may be None (the first segment). mem_len = 0 keeps nothing: (B, 0, D).
    """
    # BEGIN EXERCISE 4.2 implement: the memory update, last mem_len of [memory ; hidden] (~5 min)
    both = hidden if memory is None else np.concatenate([memory, hidden], axis=1)
    start = max(both.shape[1] - mem_len, 0)  # not both[:, -mem_len:]: -0 would keep everything
    return both[:, start:]
    # END EXERCISE


@checked(x="float (B, L, D)", memory="float? (B, M?, D)", num_heads="int >= 1",
         clamp_len="int?", rules=[c.rel_params])
def rel_multi_head_attention_np(x, memory, params, num_heads, clamp_len=None):
    """Relative multi-head attention of one layer, the reference of `RelMultiHeadAttention`.

    Args:
        x: (B, L, D) the segment;  memory: (B, M, D) or None (M = 0).
        params: 'w_q', 'w_k', 'w_v', 'w_r', 'w_o' (D, D) stored as nn.Linear does (y = x @ w.T,
            no biases) and 'u_bias', 'v_bias' (H, dh) — see `RelMultiHeadAttention.numpy_params`.
        clamp_len: None, or c: distances beyond c are encoded as c (`sinusoid_np`).
    Returns:
        output (B, L, D) and weights (B, H, L, M + L).
    """
    context = x if memory is None else np.concatenate([memory, x], axis=1)  # (B, M + L, D)
    q = split_heads_np(x @ params["w_q"].T, num_heads)  # (B, H, L, dh)
    k = split_heads_np(context @ params["w_k"].T, num_heads)  # (B, H, M + L, dh)
    v = split_heads_np(context @ params["w_v"].T, num_heads)
    R = sinusoid_np(context.shape[1], x.shape[-1], clamp_len)  # (M + L, D): distances 0 .. M+L−1
    r = split_heads_np((R @ params["w_r"].T)[None], num_heads)[0]  # (H, M + L, dh)
    heads, weights = rel_attention_np(q, k, v, r, params["u_bias"], params["v_bias"])
    return merge_heads_np(heads) @ params["w_o"].T, weights


# ============================================================================ PyTorch twin
@checked(n_queries="int", n_keys="int")
def relative_distances_torch(n_queries: int, n_keys: int, device=None) -> torch.Tensor:
    """Torch twin of `relative_distances_np`."""
    i = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)
    return i - torch.arange(n_keys, device=device)[None, :]


@checked(q="float (B, H, Lq, dh)", k="float (B, H, Lk, dh)", v="float (B, H, Lk, dh)",
         r="float* (H, P, dh)", u_bias="float (H, dh)", v_bias="float (H, dh)", scale="number?",
         rules=[c.relative_keys])
def rel_attention_torch(q, k, v, r, u_bias, v_bias, scale=None):
    """Torch twin of `rel_attention_np` (the explicit gather; minattn/fast/xl.py has the
    relative shift)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    Lq, Lk = q.shape[2], k.shape[2]
    delta = relative_distances_torch(Lq, Lk, device=q.device)  # (Lq, Lk)
    r_ij = r[:, delta.clamp(min=0)]  # (H, Lq, Lk, dh)
    u = u_bias[None, :, None, :]
    # (a) content:                        q_iᵀ k_j
    term_a = q @ k.transpose(-1, -2)
    # (b) content-dependent position:     q_iᵀ r_{i−j}
    term_b = torch.einsum("bhid,hijd->bhij", q, r_ij)
    # (c) global content bias:            uᵀ k_j
    term_c = u @ k.transpose(-1, -2)
    # (d) global position bias:           vᵀ r_{i−j}
    term_d = torch.einsum("hd,hijd->hij", v_bias, r_ij)[None]
    scores = (term_a + term_b + term_c + term_d) * scale
    weights = softmax_torch(scores, causal_mask_torch(Lq, Lk, device=q.device))
    return weights @ v, weights


@checked(hidden="float* (B, L, D)", memory="float?* (B, M?, D)", mem_len="int")
def update_memory_torch(memory, hidden, mem_len: int):
    """Torch twin of `update_memory_np`; the result is detached: no gradient reaches it (SG)."""
    # BEGIN EXERCISE 4.2 implement: the memory update, last mem_len of [memory ; hidden] (~5 min)
    both = hidden if memory is None else torch.cat([memory, hidden], dim=1)
    start = max(both.shape[1] - mem_len, 0)
    return both[:, start:].detach()
    # END EXERCISE


# ============================================================================ the modules
class RelMultiHeadAttention(nn.Module):
    """Relative multi-head attention over [memory ; segment], twin of `rel_multi_head_attention_np`.

    forward(x (B, L, D), memory (B, M, D) or None, need_weights=False, clamp_len=None)
        -> output (B, L, D), weights (B, H, L, M + L) or None

    attend: the kernel (q, k, v, r, u_bias, v_bias) -> output. None runs the explicit
    `rel_attention_torch`; `minattn.fast.xl.rel_attention_fast_torch` computes the same numbers
    with the relative shift and PyTorch's fused attention (no (H, L, M + L, dh) gather), which
    is what the lesson trains with. need_weights=True always runs the explicit reference.
    The original implementation fuses q, k, v into one `qkv_net` and shares u, v between
    layers; here each layer has its own (see `official_to_ours`).
    """

    @checked(d_model="int >= 1, even", num_heads="int >= 1, divides d_model", max_len="int >= 1",
             attend="callable?")
    def __init__(self, d_model: int, num_heads: int, max_len: int = 4096, attend=None):
        super().__init__()
        self.d_model, self.num_heads, self.max_len = d_model, num_heads, max_len
        self.attend = attend  # None: the explicit rel_attention_torch
        dh = d_model // num_heads
        self.q_proj, self.k_proj, self.v_proj, self.r_proj, self.out_proj = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(5))
        self.u_bias = nn.Parameter(torch.zeros(num_heads, dh))  # u: content bias
        self.v_bias = nn.Parameter(torch.zeros(num_heads, dh))  # v: position bias

    @checked(x="float (B, L, self.d_model) like self.q_proj", memory="float? (B, M?, self.d_model)",
             need_weights="bool",
             clamp_len="int?", rules=[c.rel_layer_call])
    def forward(self, x, memory=None, need_weights: bool = False, clamp_len: int | None = None):
        context = x if memory is None else torch.cat([memory, x], dim=1)  # (B, M + L, D)
        q = split_heads_torch(self.q_proj(x), self.num_heads)  # (B, H, L, dh)
        k = split_heads_torch(self.k_proj(context), self.num_heads)  # (B, H, M + L, dh)
        v = split_heads_torch(self.v_proj(context), self.num_heads)
        R = sinusoid_torch(context.shape[1], self.d_model, x.device, x.dtype, clamp_len)
        r = split_heads_torch(self.r_proj(R)[None], self.num_heads)[0]  # (H, M + L, dh)
        if need_weights or self.attend is None:
            heads, weights = rel_attention_torch(q, k, v, r, self.u_bias, self.v_bias)
        else:
            heads, weights = self.attend(q, k, v, r, self.u_bias, self.v_bias), None
        return self.out_proj(merge_heads_torch(heads)), weights if need_weights else None

    def numpy_params(self) -> dict:
        """The weights as float64 NumPy arrays, keyed as `rel_multi_head_attention_np` expects."""
        def get(t):
            return t.detach().cpu().double().numpy()
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
                 max_len: int = 4096, attend=None):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = RelMultiHeadAttention(d_model, num_heads, max_len, attend)
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
    """A Transformer-XL language model: embedding (×√D), `num_layers` `XLLayer`s, tied output.

    forward(tokens (B, L), memories=None, mem_len=None, need_weights=False, clamp_len=None,
            stop_gradient=True) -> logits (B, L, V), new memories (, weights per layer)

    `memories` is a list with one (B, M, D) tensor per layer (the inputs that layer saw in the
    previous segments), or None at the start of a text. The returned memories are detached
    (the paper's stop-gradient SG); feed them to the next call. `mem_len` overrides the memory
    length (e.g. longer at evaluation than in training); `clamp_len` (default: the one given
    to the constructor, None = no clamping) encodes every distance beyond it as that distance,
    as the original code's `--clamp_len`. `stop_gradient=False` leaves the new memories in
    the graph, for an experiment that back-propagates into the previous segment. `attend` goes
    to every layer's `RelMultiHeadAttention`.

    Layers are pre-norm by default (LayerNorm before attention and FFN, and once at the end),
    which trains small models without a warm-up; `pre_norm=False` is the paper's post-norm.
    """

    @checked(vocab_size="int >= 1", d_model="int >= 1, even", num_heads="int >= 1, divides d_model",
             num_layers="int >= 1", d_ff="int? >= 1", mem_len="int", max_len="int >= 1",
             clamp_len="int?", attend="callable?")
    def __init__(self, vocab_size: int, d_model: int = 128, num_heads: int = 4,
                 num_layers: int = 2, d_ff: int | None = None, mem_len: int = 64,
                 pre_norm: bool = True, max_len: int = 4096, clamp_len: int | None = None,
                 attend=None):
        super().__init__()
        self.d_model, self.mem_len, self.vocab_size = d_model, mem_len, vocab_size
        self.clamp_len = clamp_len
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)  # ×√D below: unit scale
        self.layers = nn.ModuleList(XLLayer(d_model, num_heads, d_ff or 4 * d_model, pre_norm,
                                            max_len, attend) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))

    @checked(tokens="int (B, L) < self.embedding", mem_len="int?", need_weights="bool",
             clamp_len="int?", stop_gradient="bool", rules=[c.xl_memories])
    def forward(self, tokens, memories=None, mem_len: int | None = None,
                need_weights: bool = False, clamp_len: int | None = None,
                stop_gradient: bool = True):
        memories = [None] * len(self.layers) if memories is None else memories  # a new text
        mem_len = self.mem_len if mem_len is None else mem_len
        clamp_len = self.clamp_len if clamp_len is None else clamp_len
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

    @checked(vocab_size="int >= 1", d_model="int >= 1, even", num_heads="int >= 1, divides d_model",
             num_layers="int >= 1", d_ff="int? >= 1")
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

    @checked(tokens="int (B, L) < self.embedding")
    def forward(self, tokens, memories=None, mem_len=None):
        L = tokens.shape[1]
        h = self.embedding(tokens) * math.sqrt(self.d_model)
        h = h + sinusoid_torch(L, self.d_model, device=h.device, dtype=h.dtype)  # positions 0..L−1
        mask = causal_mask_torch(L, L, device=tokens.device)[None, None]  # (1, 1, L, L)
        for layer in self.layers:
            h = layer(h, mask)
        return self.final_norm(h) @ self.embedding.weight.T + self.out_bias, None


# ============================================================================ the original layout
# The authors' PyTorch code (kimiyoung/transformer-xl, `pytorch/mem_transformer.py`, the
# relative "partial learnable" attention, attn_type 0) works *time-major* — activations are
# (len, batch, d) — and names its weights as in the left column. This course is batch-first,
# (B, len, D), and splits the fused projection. With H heads of size dh = D / H:
#
#   original (post-norm, div_val=1, tied)        shape        ours (`TransformerXL(pre_norm=False)`)
#   word_emb.emb_layers.0.weight                 (V, D)       embedding.weight
#   crit.out_layers.0.weight                     (V, D)       (tied: the same tensor)
#   crit.out_layers.0.bias                       (V,)         out_bias
#   r_w_bias  (shared by all layers)             (H, dh)      layers.n.attention.u_bias   (every n)
#   r_r_bias  (shared by all layers)             (H, dh)      layers.n.attention.v_bias   (every n)
#   layers.n.dec_attn.r_w_bias / r_r_bias (untie_r=True: one per layer) -> the same two, per layer
#   layers.n.dec_attn.qkv_net.weight             (3·H·dh, D)  rows [q; k; v] -> {q,k,v}_proj.weight
#   layers.n.dec_attn.r_net.weight               (H·dh, D)    layers.n.attention.r_proj.weight
#   layers.n.dec_attn.o_net.weight               (D, H·dh)    layers.n.attention.out_proj.weight
#   layers.n.dec_attn.layer_norm.{weight,bias}   (D,)         layers.n.norm1.{weight,bias}
#   layers.n.pos_ff.CoreNet.0.{weight,bias}      (d_ff, D)    layers.n.ff.0.{weight,bias}
#   layers.n.pos_ff.CoreNet.3.{weight,bias}      (D, d_ff)    layers.n.ff.2.{weight,bias}
#   layers.n.pos_ff.layer_norm.{weight,bias}     (D,)         layers.n.norm2.{weight,bias}
#   pos_emb.inv_freq                             (D/2,)       (fixed: `sinusoid_torch`)
#
# Conventions that already agree: the position table is [sin | cos] with ω_k = 10000^(−2k/D)
# (the original orders its rows by distance klen−1 … 0 for the relative shift; ours by 0 …, and
# the fast path flips); embeddings are multiplied by √D; scores (a)+(b)+(c)+(d) are scaled by
# 1/√dh; the causal mask lets query i see keys j <= M + i. Activations: ours =
# theirs.transpose(0, 1). Not covered: adaptive embeddings/softmax (cutoffs, div_val > 1),
# d_head ≠ D / H, pre_lnorm.
OFFICIAL_NAMES = {"dec_attn.r_net.weight": "attention.r_proj.weight",
                  "dec_attn.o_net.weight": "attention.out_proj.weight",
                  "dec_attn.layer_norm.weight": "norm1.weight",
                  "dec_attn.layer_norm.bias": "norm1.bias",
                  "pos_ff.CoreNet.0.weight": "ff.0.weight", "pos_ff.CoreNet.0.bias": "ff.0.bias",
                  "pos_ff.CoreNet.3.weight": "ff.2.weight", "pos_ff.CoreNet.3.bias": "ff.2.bias",
                  "pos_ff.layer_norm.weight": "norm2.weight",
                  "pos_ff.layer_norm.bias": "norm2.bias"}


@checked(num_heads="int >= 1", rules=[c.official_state])
def official_to_ours(state: dict, num_heads: int) -> dict:
    """Map an original-implementation state dict (see the table above) to `TransformerXL`'s.

    Returns a new dict for `TransformerXL(..., pre_norm=False).load_state_dict(...)`.
    """
    ours = {"embedding.weight": state["word_emb.emb_layers.0.weight"],
            "out_bias": state["crit.out_layers.0.bias"]}
    for n in sorted({int(k.split(".")[1]) for k in state if k.startswith("layers.")}):
        theirs, mine = f"layers.{n}.", f"layers.{n}."
        qkv = state[theirs + "dec_attn.qkv_net.weight"]  # (3·H·dh, D), rows [q; k; v]
        for name, w in zip("qkv", qkv.chunk(3, dim=0)):
            ours[mine + f"attention.{name}_proj.weight"] = w
        for old, new in OFFICIAL_NAMES.items():
            ours[mine + new] = state[theirs + old]
        for old, new in (("r_w_bias", "u_bias"), ("r_r_bias", "v_bias")):
            ours[mine + f"attention.{new}"] = state.get(theirs + "dec_attn." + old, state.get(old))
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in ours.items()}
