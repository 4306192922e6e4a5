"""The copy model of Snell et al.'s code, in this course's notation, and the map from their
parameter names to ours (lesson 05).

"Approximating How Single Head Attention Learns" (Snell, Zhong, Klein, Steinhardt, 2021) ran
its copy experiments (§3.3, §5.2) with the authors' `SequenceCopying/seq2seq_model.py` and
`multihead.py` (github.com/Sea-Snell/AttentionDynamics). Their model differs from
`model.Seq2SeqAttention` in four places:

    one embedding table, shared by the encoder and the decoder (one vocabulary);
    the decoder starts from the encoder's final state (h_N, c_N), not from zeros;
    the attention query is a biased linear map of the decoder state, q_t = A s_t + a
    (`attn_lin`, nn.Linear(H, H) with its default initialisation), and e_ti = q_t · h_i;
    the context goes through a second linear map before the output network,
    c_t = P (Σ_i α_ti h_i) + p (`project_enc`).

With K heads (`multihead.py`) each head has its own (A_k, a_k) and (P_k, p_k), and the heads'
contexts are AVERAGED: c_t = (1/K) Σ_k (P_k Σ_i α^k_ti h_i + p_k). (The paper's §5.2 text says
the contexts are summed; the code takes torch.mean. A sum is the mean times K, a rescaling the
next linear layer can absorb but that changes the starting point of training; we follow the
code, which produced the paper's Fig. 6.)

    authors' name (seq2seq_model.Seq2seq)      shape       ours (`OfficialSeq2Seq`)
    embedding.weight                           (V, H)      embedding.weight
    encoder_lstm.{weight,bias}_{ih,hh}_l0      (4H, H)…    encoder.…  (the same names)
    decoder_lstm.{weight,bias}_{ih,hh}_l0      (4H, H)…    decoder.…
    attn_lin.{weight,bias}                     (H, H), (H,) heads.0.query.{weight,bias}
    project_enc.{weight,bias}                  (H, H), (H,) heads.0.context.{weight,bias}
    after_decoder_hidden.weight                (H, 2H)     hidden_layer.weight, columns swapped:
                                                           theirs [s_t ; c_t], ours [c_t ; s_t]
    after_decoder_hidden.bias                  (H,)        hidden_layer.bias
    hidden2vocab.{weight,bias}                 (V, H), (V,) out.{weight,bias}

Their code is time-major, (len, B, ·); ours is batch-first, (B, len, ·). Not covered: the
bidirectional or 2-layer encoders of their translation runs, padding (the copy data has none).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..checks import fail, shape_str
from .reference import (
    check_decoder_encoder_states,
    lexical_probe_torch,
    luong_attention_np,
    luong_attention_torch,
    output_torch,
)


# ============================================================================ NumPy reference
def projected_attention_np(s, h, A, a, P, p, mask=None, uniform=False):
    """The authors' attention step: K heads, each with a biased query map and its own context
    map; the heads' contexts are averaged.

    s (B, T, H) decoder states, h (B, N, H) encoder states, A and P (K, H, H), a and p (K, H),
    mask (B, N) bool (True = real token) -> context (B, T, H), weights α (B, K, T, N).
        q^k_t  = A_k s_t + a_k                   the query of head k
        e^k_ti = q^k_t · h_i                     = s_tᵀ A_kᵀ h_i + a_k · h_i
        α^k_t  = softmax_i(e^k_t),   r^k_t = Σ_i α^k_ti h_i
        c_t    = (1/K) Σ_k (P_k r^k_t + p_k)
    Each head is Luong's attention step (`luong_attention_np`) with the query q^k in place of
    s_t and W_a = I; the K heads run as K copies of the batch. uniform=True freezes every α to
    1/n over the real tokens.
    """
    check_decoder_encoder_states(s, h, mask)
    B, K = s.shape[0], A.shape[0]
    q = np.einsum("kef,btf->bkte", A, s) + a[None, :, None, :]  # (B, K, T, H)
    read, alpha = luong_attention_np(  # one head per copy of the batch: (B·K, T, H), (B·K, 1, T, N)
        q.reshape(B * K, *q.shape[2:]), np.repeat(h, K, axis=0), np.eye(h.shape[-1])[None],
        None if mask is None else np.repeat(mask, K, axis=0), uniform)
    read = read.reshape(B, K, *read.shape[1:])  # r^k_t
    per_head = np.einsum("kfe,bkte->bktf", P, read) + p[None, :, None, :]
    return per_head.mean(axis=1), alpha.reshape(B, K, *alpha.shape[2:])


# ============================================================================ torch twin
def projected_attention_torch(s, h, A, a, P, p, mask=None, uniform=False):
    """Twin of projected_attention_np: (context (B, T, H), α (B, K, T, N))."""
    check_decoder_encoder_states(s, h, mask)
    B, K = s.shape[0], A.shape[0]
    q = torch.einsum("kef,btf->bkte", A, s) + a[None, :, None, :]
    read, alpha = luong_attention_torch(
        q.reshape(B * K, *q.shape[2:]), h.repeat_interleave(K, dim=0),
        torch.eye(h.shape[-1], dtype=h.dtype, device=h.device)[None],
        None if mask is None else mask.repeat_interleave(K, dim=0), uniform)
    read = read.reshape(B, K, *read.shape[1:])
    per_head = torch.einsum("kfe,bkte->bktf", P, read) + p[None, :, None, :]
    return per_head.mean(dim=1), alpha.reshape(B, K, *alpha.shape[2:])


# ============================================================================ the model
class AttentionHead(nn.Module):
    """One head of the authors' attention: the query map (A, a) and the context map (P, p),
    both nn.Linear(H, H) with PyTorch's default initialisation (their `Attn_head`)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.query = nn.Linear(hidden, hidden)  # attn_lin / attn_proj
        self.context = nn.Linear(hidden, hidden)  # project_enc / enc_proj


class OfficialSeq2Seq(nn.Module):
    """The LSTM encoder-decoder of the authors' copy experiments (one layer, unidirectional,
    embedding size = hidden size), with K attention heads whose contexts are averaged.

        src (B, N) token ids (no padding), tgt_in (B, T) (<sos> + y without its last token)
        -> logits (B, T, V), α (B, K, T, N)

    One vocabulary of V ids for input and output, as in their code: size it to the task (the
    words that occur + <eos> + <sos>). uniform=True freezes every head's α to uniform.
    `set_heads` swaps in other heads (the multi-head study of §5.2 keeps one base network and
    tries different heads on it).
    """

    def __init__(self, vocab: int, hidden: int = 256, heads: int = 1, uniform: bool = False):
        super().__init__()
        if min(vocab, hidden, heads) < 1:
            fail("OfficialSeq2Seq sizes", "positive vocab, hidden, heads",
                 f"{vocab}, {hidden}, {heads}")
        self.uniform = uniform
        self.embedding = nn.Embedding(vocab, hidden)
        self.encoder = nn.LSTM(hidden, hidden, batch_first=True)
        self.decoder = nn.LSTM(hidden, hidden, batch_first=True)
        self.hidden_layer = nn.Linear(2 * hidden, hidden)  # W₁, b₁ of g([c_t ; s_t])
        self.out = nn.Linear(hidden, vocab)  # W₂, b₂ of g
        self.heads = nn.ModuleList(AttentionHead(hidden) for _ in range(heads))

    def set_heads(self, heads: list[AttentionHead]) -> None:
        """Replace the attention heads (their parameters are used as given, not copied)."""
        if not heads or any(not isinstance(h, AttentionHead) for h in heads):
            fail("set_heads", "a non-empty list of AttentionHead", repr(heads))
        self.heads = nn.ModuleList(heads)

    def head_params(self):
        """(A (K, H, H), a (K, H), P (K, H, H), p (K, H)), stacked over the heads."""
        return tuple(torch.stack([getattr(getattr(h, lin), name) for h in self.heads])
                     for lin, name in [("query", "weight"), ("query", "bias"),
                                       ("context", "weight"), ("context", "bias")])

    def output_params(self):
        return (self.hidden_layer.weight, self.hidden_layer.bias, self.out.weight, self.out.bias)

    def states(self, src, tgt_in):
        """Encoder states h (B, N, H) and decoder states s (B, T, H); the decoder starts from
        the encoder's final (h_N, c_N)."""
        if src.ndim != 2 or tgt_in.ndim != 2 or src.shape[0] != tgt_in.shape[0]:
            fail("OfficialSeq2Seq inputs", "src (B, N) and tgt_in (B, T) token ids",
                 f"{shape_str(src.shape)} and {shape_str(tgt_in.shape)}")
        h, final = self.encoder(self.embedding(src))
        s, _ = self.decoder(self.embedding(tgt_in), final)
        return h, s

    def forward(self, src, tgt_in):
        h, s = self.states(src, tgt_in)
        context, alpha = projected_attention_torch(s, h, *self.head_params(),
                                                   uniform=self.uniform)
        return output_torch(context, s, *self.output_params()), alpha

    @torch.no_grad()
    def probe(self, src, tgt_in, tgt_out):
        """Lexical probe β (B, T, N): p_t(y_t) when every head attends only to position i, i.e.
        c_t := (1/K) Σ_k (P_k h_i + p_k) (the authors' `get_state_scores2_one_off`)."""
        h, s = self.states(src, tgt_in)
        _, _, P, p = self.head_params()
        h_read = (torch.einsum("kfe,bne->bknf", P, h) + p[None, :, None, :]).mean(1)
        return lexical_probe_torch(h_read, s, tgt_out, *self.output_params())


# ============================================================================ their names -> ours
def seq2seq_official_to_ours(state: dict) -> dict:
    """Map a `seq2seq_model.Seq2seq` state dict (num_layers=1, bidirectional=False; see the
    table above) to `OfficialSeq2Seq(vocab, hidden, heads=1).load_state_dict(...)`."""
    needed = ["embedding.weight", "attn_lin.weight", "project_enc.weight",
              "after_decoder_hidden.weight", "hidden2vocab.weight"]
    if any(k not in state for k in needed):
        fail("not a state dict of the authors' Seq2seq", f"keys {needed}",
             f"keys {sorted(state)[:6]}…")
    if any(k.endswith(("_l1", "_reverse")) for k in state):
        fail("only the one-layer unidirectional copy model maps", "num_layers=1, "
             "bidirectional=False", "a layer-2 or reverse-direction LSTM weight")
    H = state["embedding.weight"].shape[1]
    W1 = state["after_decoder_hidden.weight"]  # (H, 2H): columns [s ; c]
    ours = {"embedding.weight": state["embedding.weight"],
            "hidden_layer.weight": torch.cat([W1[:, H:], W1[:, :H]], dim=1),  # -> [c ; s]
            "hidden_layer.bias": state["after_decoder_hidden.bias"],
            "out.weight": state["hidden2vocab.weight"], "out.bias": state["hidden2vocab.bias"],
            "heads.0.query.weight": state["attn_lin.weight"],
            "heads.0.query.bias": state["attn_lin.bias"],
            "heads.0.context.weight": state["project_enc.weight"],
            "heads.0.context.bias": state["project_enc.bias"]}
    for theirs, mine in [("encoder_lstm", "encoder"), ("decoder_lstm", "decoder")]:
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            ours[f"{mine}.{name}"] = state[f"{theirs}.{name}"]
    return ours


def no_attention_ceiling(n: int, eos: bool = True) -> float:
    """Token accuracy of a decoder that knows the n words of a permutation but not their
    order: it never repeats a word, so at output position t it guesses among the n − t words
    left (1 / (n − t)), and the mean over the n positions is H_n / n (H_n = 1 + 1/2 + … + 1/n).
    eos=True adds the final <eos>, always right: (H_n + 1) / (n + 1)."""
    if n < 1:
        fail("no_attention_ceiling", "n >= 1", repr(n))
    harmonic = float(np.sum(1.0 / np.arange(1, n + 1)))
    return (harmonic + 1) / (n + 1) if eos else harmonic / n
