"""Transformer-XL read fast at evaluation: the cached evaluation against recomputing (the
paper's §3.3 speed claim, `eval_speed`) and one token at a time with a key/value cache
(`XLDecoder`, for sampling). Both run the modules of `model.py`; nothing here is new math.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from ..attention import sinusoid_torch
from ..checks import check_size, fail, shape_str
from ..course.bench import time_interleaved
from .model import TransformerXL, VanillaLM


# ============================================================================ cached evaluation
@torch.no_grad()
def eval_speed(context: int, d_model: int = 128, num_heads: int = 4, num_layers: int = 2,
               vocab_size: int = 50, seg_len: int = 128, repeats: int = 3, device="cpu",
               seed: int = 0, kv_cache: bool = False, per_repeat: bool = False,
               timer=time.perf_counter) -> dict[str, float] | dict[str, list[float]]:
    """Tokens per second when every prediction sees (at least) `context` earlier tokens.

    * 'vanilla, recompute': a `VanillaLM` predicts one token from a window of the last
      `context` tokens, and the window slides by one for the next token — all of it recomputed.
    * 'XL, cached': a `TransformerXL` of the same size reads `seg_len` tokens per call with a
      memory of `context` hidden states per layer (the paper's evaluation): token i of the
      segment sees context + i earlier tokens, and nothing is computed twice.
    * 'XL, one token at a time': the same memory, one new token per call of the model.
    * with kv_cache: 'XL, one token, KV cache', one new token per call of an `XLDecoder` (as
      in sampling), and on CUDA also 'XL, one token, KV cache + CUDA graph' (its step
      replayed as a graph).
    Untrained weights (speed does not depend on them); batch 1; medians of interleaved repeats,
    or with per_repeat=True every repeat's speed (a list per contender: repeat r of each was
    timed in the same round, so their ratios pair up). timer: `time.process_time` counts one
    CPU thread's work on a busy machine (see `tools.bench.time_interleaved`).
    """
    for name, value, low in (("context", context, 1), ("seg_len", seg_len, 1),
                             ("repeats", repeats, 1), ("vocab_size", vocab_size, 1)):
        check_size(name, value, low)

    torch.manual_seed(seed)
    vanilla = VanillaLM(vocab_size, d_model, num_heads, num_layers).to(device).eval()
    xl = TransformerXL(vocab_size, d_model, num_heads, num_layers, mem_len=context,
                       max_len=context + seg_len).to(device).eval()
    g = torch.Generator().manual_seed(seed)
    window = torch.randint(0, vocab_size, (1, context), generator=g).to(device)
    segment = torch.randint(0, vocab_size, (1, seg_len), generator=g).to(device)
    _, memories = xl(window)  # a full memory of `context` states per layer
    contenders = {
        "vanilla, recompute": lambda: vanilla(window),  # 1 token predicted
        "XL, cached": lambda: xl(segment, memories),  # seg_len tokens predicted
        "XL, one token at a time": lambda: xl(segment[:, :1], memories),  # 1 token predicted
    }
    decoders = {"XL, one token, KV cache": XLDecoder(xl, context)} if kv_cache else {}
    if kv_cache and torch.device(device).type == "cuda":
        decoders["XL, one token, KV cache + CUDA graph"] = XLDecoder(xl, context)
    for name, decoder in decoders.items():
        decoder.prefill(window)  # a full cache: every step attends to context + 1 positions
        if name.endswith("CUDA graph"):
            decoder.capture()
        contenders[name] = lambda decoder=decoder: decoder.step(segment[:, :1])
    tokens = {name: seg_len if name == "XL, cached" else 1 for name in contenders}
    if not per_repeat:
        times = time_interleaved(contenders, repeats, device=device, timer=timer)
        return {name: tokens[name] / t for name, t in times.items()}
    rounds = [time_interleaved(contenders, 1, warmup=int(r == 0), device=device, timer=timer)
              for r in range(repeats)]
    return {name: [tokens[name] / times[name] for times in rounds] for name in contenders}


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

    def __init__(self, model, context: int, batch: int = 1):
        if not isinstance(model, TransformerXL):
            fail("XLDecoder reads a TransformerXL", "a minattn.xl.TransformerXL",
                 type(model).__name__)
        if isinstance(context, bool) or not isinstance(context, int) or context < 1:
            fail("XLDecoder's context", "an integer >= 1", repr(context))
        batch = check_size("batch", batch, 1)
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
                if C > att.max_len:
                    fail("more positions than the relative-position table holds",
                         f"context + 1 <= max_len = {att.max_len}", f"context + 1 = {C}")
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
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Read a prompt (B, P): the model's own call, then the keys and values of its memory
        (the last min(P, context) positions of every layer's input) fill the cache."""
        if tokens.ndim != 2 or tokens.shape[0] != self.batch:
            fail("the prompt", f"(B={self.batch}, P) token ids", shape_str(tokens.shape))
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

    def step(self, token: torch.Tensor) -> torch.Tensor:
        """Logits (B, 1, V) of the token after `token` (B, 1), which goes into the cache."""
        if token.shape != (self.batch, 1):
            fail("one new token per row", f"({self.batch}, 1) token ids", shape_str(token.shape))
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

    def capture(self) -> None:
        """Record one `step` as a CUDA graph; later steps replay it (one launch per token
        instead of one per operation). CUDA only; call after `prefill`."""
        if self.device.type != "cuda":
            fail("XLDecoder.capture records a CUDA graph", "a model on a CUDA device",
                 str(self.device))
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
