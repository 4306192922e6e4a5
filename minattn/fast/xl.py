"""Transformer-XL, fast: the relative shift (no gather) and one token at a time with a key/value
cache. The same numbers as `minattn.xl` (tests/test_xl.py and tests/test_xl_decoder.py check
them in float64), chosen by name: `rel_attention_fast_np`, `rel_attention_fast_torch` (the
kernel a module takes as `attend=`), `XLDecoder`.

The relative shift. The explicit reference `rel_attention_np` gathers r_{i−j} for every (i, j):
an (H, Lq, Lk, dh) tensor. The trick of the original implementation computes the position
scores for every query against every *distance* with one matrix product, then slides row i by
a different amount so that column j lands on distance δ_ij = (Lk − Lq) + i − j:

    BD[i, c] = (q_i + v)ᵀ r_{Lk−1−c}      columns ordered by distance Lk−1, …, 1, 0   (Lq, Lk)
    shifted[i, j] = BD[i, j + Lq − 1 − i]                 = (q_i + v)ᵀ r_{δ_ij}

Row i moves left by Lq − 1 − i. The shift is one pad and two reshapes: put a zero column in
front (Lq, Lk + 1), read the same memory as (Lk + 1, Lq), drop the first row, read it back
as (Lq, Lk). Entries with δ_ij < 0 (the future) come out as junk — the causal mask hides them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from .. import checks as c
from ..attention import causal_mask_np, causal_mask_torch, sinusoid_torch, softmax_np
from ..contract import checked
from ..xl import rel_attention_np, rel_attention_torch


# ============================================================================ the relative shift
@checked(scores="real (..., Lq, Lk)")
def rel_shift_np(scores: np.ndarray) -> np.ndarray:
    """(..., Lq, Lk) with columns ordered by distance Lk−1 … 0 -> (..., Lq, Lk) with column j =
    distance (Lk − Lq) + i − j for row i (valid where that is >= 0, junk elsewhere)."""
    # BEGIN EXERCISE 4.1 implement: the relative shift — pad a column, reshape, drop a row (~15 min)
    *lead, Lq, Lk = scores.shape
    padded = np.concatenate([np.zeros((*lead, Lq, 1), scores.dtype), scores], axis=-1)
    padded = padded.reshape(*lead, Lk + 1, Lq)  # the same numbers, read with a new row length
    return padded[..., 1:, :].reshape(*lead, Lq, Lk)
    # END EXERCISE


@checked(scores="real (..., Lq, Lk)")
def rel_shift_torch(scores: torch.Tensor) -> torch.Tensor:
    """Torch twin of `rel_shift_np` (differentiable)."""
    # BEGIN EXERCISE 4.1 implement: the relative shift — pad a column, reshape, drop a row (~15 min)
    *lead, Lq, Lk = scores.shape
    padded = F.pad(scores, (1, 0))  # (..., Lq, Lk + 1)
    padded = padded.reshape(*lead, Lk + 1, Lq)
    return padded[..., 1:, :].reshape(*lead, Lq, Lk)
    # END EXERCISE


@checked(q="float (B, H, Lq, dh)", k="float (B, H, Lk, dh)", v="float (B, H, Lk, dh)",
         r="float* (H, P, dh)", u_bias="float (H, dh)", v_bias="float (H, dh)", scale="number?",
         rules=[c.relative_keys])
def rel_attention_fast_np(q, k, v, r, u_bias, v_bias, scale=None):
    """`rel_attention_np` with the relative shift: (a) + (c) = (q + u)ᵀ k and (b) + (d) =
    (q + v)ᵀ r, each one matrix product. Same arguments and returns (output, weights)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    Lq, Lk = q.shape[2], k.shape[2]
    content = (q + u_bias[None, :, None, :]) @ np.swapaxes(k, -1, -2)  # (a) + (c)
    r_by_column = r[:, :Lk][:, ::-1]  # (H, Lk, dh): column c holds distance Lk − 1 − c
    position = (q + v_bias[None, :, None, :]) @ np.swapaxes(r_by_column, -1, -2)[None]
    scores = (content + rel_shift_np(position)) * scale  # (b) + (d), column j = distance δ_ij
    weights = softmax_np(scores, causal_mask_np(Lq, Lk))
    return weights @ v, weights


@checked(q="float (B, H, Lq, dh)", k="float (B, H, Lk, dh)", v="float (B, H, Lk, dh)",
         r="float* (H, P, dh)", u_bias="float (H, dh)", v_bias="float (H, dh)", scale="number?",
         rules=[c.relative_keys])
def rel_attention_fast_torch(q, k, v, r, u_bias, v_bias, scale=None) -> torch.Tensor:
    """Torch fast path of `rel_attention_torch` (same arguments; returns the output only): the
    kernel `RelMultiHeadAttention(attend=rel_attention_fast_torch)` runs.

    (a) + (c) = (q + u)ᵀ k is plain attention, so it goes to PyTorch's fused kernel; the
    position terms (b) + (d) = (q + v)ᵀ r arrive as an additive float mask built with the
    relative shift (future keys at −inf).
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    Lq, Lk = q.shape[2], k.shape[2]
    r_by_column = r[:, :Lk].flip(1)  # (H, Lk, dh): column c holds distance Lk − 1 − c
    position = (q + v_bias[None, :, None, :]) @ r_by_column.transpose(-1, -2)  # (B, H, Lq, Lk)
    position = rel_shift_torch(position) * scale  # column j = distance δ_ij
    future = ~causal_mask_torch(Lq, Lk, device=q.device)
    position = position.masked_fill(future, float("-inf"))  # every row keeps key 0: no NaN
    return F.scaled_dot_product_attention(q + u_bias[None, :, None, :], k, v,
                                          attn_mask=position, scale=scale)


# Each fast path and the reference it must equal (tests/test_xl.py, float64).
EQUALS = {"rel_attention_fast_np": rel_attention_np,
          "rel_attention_fast_torch": rel_attention_torch}


# ============================================================================ one token at a time
class XLDecoder:
    """Reads a `TransformerXL` one token per call with a key/value cache: the logits of
    `model(token, memories, context)` without recomputing anything of the memory.

    The model's memory holds each layer's *inputs* h, so every call of the model projects the
    whole memory again (LayerNorm, keys, values and the relative encodings R of every
    distance): work and kernel launches that grow with the context, for one new token. Here

      * the keys and values of the last C = context + 1 positions sit in a preallocated ring
        per layer, (B, H, C, dh): position p in slot p mod C; each call writes one slot in
        place (no concatenation, no allocation that grows);
      * the projected encodings r_δ of every distance δ = 0 .. C − 1 are computed once;
      * query, key, value and the two biases u and v come out of one fused matrix product:
        [q + u, q + v, k, v] = x [W_q; W_q; W_k; W_v]ᵀ + [u, v, 0, 0];
      * the position scores (q + v)ᵀ r_δ are computed against every distance and gathered
        into slot order, δ_s = (t − s) mod C for the token at position t (slots never written
        yet are masked); the content scores (q + u)ᵀ k_j are fused SDPA's own, with the
        position scores as its additive mask.
    Nothing in a call depends on Python-side state: the position t is a device tensor, every
    shape is fixed, so one call can be recorded as a CUDA graph (`capture`, CUDA only) and
    replayed per token. The decoder copies the weights it fuses: build it after training.

    prefill(tokens (B, P)) -> logits (B, P, V): reads a prompt (its last `context` positions
        become the cache), as `model(tokens, None, context)`.
    step(token (B, 1)) -> logits (B, 1, V): one new token.
    """

    @checked(context="int >= 1", batch="int >= 1", rules=[c.decoder_model])
    def __init__(self, model, context: int, batch: int = 1):
        self.model, self.context, self.batch = model, context, batch
        weight = model.embedding.weight
        self.device, dtype = weight.device, weight.dtype
        self.slots = C = context + 1
        D = model.d_model
        with torch.no_grad():
            R = sinusoid_torch(C, D, device=self.device, dtype=dtype)  # (C, D): distances 0..C-1
            self.layers = []
            for layer in model.layers:
                att = layer.attention
                H, dh = att.num_heads, D // att.num_heads
                w = torch.cat([att.q_proj.weight, att.q_proj.weight, att.k_proj.weight,
                               att.v_proj.weight])  # (4D, D)
                b = torch.cat([att.u_bias.flatten(), att.v_bias.flatten(),
                               torch.zeros(2 * D, device=self.device, dtype=dtype)])
                r = att.r_proj(R).view(C, H, dh).permute(1, 2, 0)  # (H, dh, C)
                self.layers.append(dict(
                    layer=layer, H=H, dh=dh, w=w, b=b,
                    r=(r / math.sqrt(dh)).contiguous(),  # scaled as the scores are
                    k=torch.zeros(batch, H, C, dh, device=self.device, dtype=dtype),
                    v=torch.zeros(batch, H, C, dh, device=self.device, dtype=dtype)))
        self.t = torch.zeros((), dtype=torch.long, device=self.device)  # the next position
        self.positions = torch.arange(C, device=self.device)
        self._graph = None

    @torch.no_grad()
    @checked(tokens="int (self.batch, P)")
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Read a prompt (B, P): the model's own call, then the keys and values of its memory
        (the last min(P, context) positions of every layer's input) fill the cache."""
        logits, memories = self.model(tokens, None, self.context)
        m = memories[0].shape[1]
        for cache, memory in zip(self.layers, memories):
            layer = cache["layer"]
            x = layer.norm1(memory) if layer.pre_norm else memory  # what the keys are made of
            kv = F.linear(x, cache["w"][-2 * x.shape[-1]:])  # (B, m, 2D): keys, values
            k, v = kv.view(self.batch, m, 2, cache["H"], cache["dh"]).permute(2, 0, 3, 1, 4)
            cache["k"].zero_()
            cache["v"].zero_()
            cache["k"][:, :, :m] = k  # position p in slot p (the ring starts at 0)
            cache["v"][:, :, :m] = v
        self.t.fill_(m)
        return logits

    @checked(token="int (self.batch, 1)")
    def step(self, token: torch.Tensor) -> torch.Tensor:
        """Logits (B, 1, V) of the token after `token` (B, 1), which goes into the cache."""
        if self._graph is None:
            return self._step(token)
        self._graph_token.copy_(token)
        self._graph.replay()
        return self._graph_logits.clone()

    @torch.no_grad()
    def _step(self, token):
        model, C, B = self.model, self.slots, self.batch
        t = self.t
        slot = torch.remainder(t, C).view(1)  # where position t's key and value go
        delta = torch.remainder(t - self.positions, C)  # (C,): distance of each slot's key
        seen = delta <= t  # slots written already (all of them once t >= C - 1)
        h = model.embedding(token) * math.sqrt(model.d_model)  # (B, 1, D)
        for cache in self.layers:
            layer, H, dh = cache["layer"], cache["H"], cache["dh"]
            x = layer.norm1(h) if layer.pre_norm else h
            fused = F.linear(x, cache["w"], cache["b"])  # (B, 1, 4D): q + u, q + v, k, v
            qu, qv, k, v = fused.view(B, 1, 4, H, dh).permute(2, 0, 3, 1, 4)  # (B, H, 1, dh)
            cache["k"].index_copy_(2, slot, k)
            cache["v"].index_copy_(2, slot, v)
            by_distance = qv @ cache["r"]  # (B, H, 1, C): (q + v)ᵀ r_δ / √dh for δ = 0 .. C-1
            position = torch.where(seen, by_distance.gather(-1, delta.expand(B, H, 1, C)),
                                   float("-inf"))  # (B, H, 1, C) in slot order
            heads = F.scaled_dot_product_attention(qu, cache["k"], cache["v"],
                                                   attn_mask=position)  # (B, H, 1, dh)
            out = layer.attention.out_proj(heads.transpose(1, 2).reshape(B, 1, H * dh))
            if layer.pre_norm:
                h = h + out
                h = h + layer.ff(layer.norm2(h))
            else:
                h = layer.norm1(h + out)
                h = layer.norm2(h + layer.ff(h))
        logits = model.final_norm(h) @ model.embedding.weight.T + model.out_bias
        t.add_(1)
        return logits

    @checked(rules=[c.decoder_on_cuda])
    def capture(self) -> None:
        """Record one `step` as a CUDA graph; later steps replay it (one launch per token
        instead of one per operation). CUDA only; call after `prefill`."""
        token = torch.zeros(self.batch, 1, dtype=torch.long, device=self.device)
        state = [self.t] + [c[name] for c in self.layers for name in ("k", "v")]
        saved = [s.clone() for s in state]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up calls (allocator, cuBLAS), as capture requires
            for _ in range(3):
                self._step(token)
        torch.cuda.current_stream().wait_stream(side)
        for s, old in zip(state, saved):  # undo the warm-up: the cache is as prefill left it
            s.copy_(old)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = self._step(token)
        self._graph, self._graph_token, self._graph_logits = graph, token, logits
