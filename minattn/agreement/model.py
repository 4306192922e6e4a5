"""The two trainable models of lesson 08's Table 2, built on the references' torch functions.

    Seq2SeqAttention      LSTM encoder-decoder with Luong attention (K heads, summed): lesson
                          05's reference (`minattn.lstm_attention`) as one module, for translation
    AttentionClassifier   a BiLSTM encoder read by additive attention (the paper's classifier)
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..checks import check_array, check_ids, check_same_device, check_size, fail, shape_str
from ..lstm_attention import (
    check_probe,
    check_source_mask,
    lexical_probe_torch,
    luong_attention_torch,
    output_torch,
)
from .reference import classifier_probe_torch, classifier_torch


class Seq2SeqAttention(nn.Module):
    """LSTM encoder-decoder with Luong attention (one layer each, unidirectional).

    The decoder runs as one nn.LSTM call under teacher forcing (input y_{t-1}, no input
    feeding) and starts from a zero state (*choice*: it sees the source only through
    attention, and padding at the end of the source changes nothing). heads=K sums K heads;
    uniform=True freezes attention to uniform.

        src (B, N), tgt_in (B, T) (y shifted right, BOS first), src_mask (B, N) bool
        -> logits (B, T, V_y), α (B, K, T, N)
    """

    def __init__(self, n_src: int, n_tgt: int, hidden: int = 256, embed: int | None = None,
                 heads: int = 1, uniform: bool = False):
        super().__init__()
        for name, value in (("n_src", n_src), ("n_tgt", n_tgt), ("hidden", hidden),
                            ("heads", heads)):
            if isinstance(value, (int, np.integer)) and value < 1:
                fail("Seq2SeqAttention sizes", "positive n_src, n_tgt, hidden, heads",
                     f"{n_src}, {n_tgt}, {hidden}, {heads}")
            check_size(name, value, 1)
        embed = hidden if embed is None else check_size("embed", embed, 1)
        self.uniform = uniform
        self.src_embed, self.tgt_embed = nn.Embedding(n_src, embed), nn.Embedding(n_tgt, embed)
        self.encoder = nn.LSTM(embed, hidden, batch_first=True)
        self.decoder = nn.LSTM(embed, hidden, batch_first=True)
        self.W_a = nn.Parameter(torch.randn(heads, hidden, hidden) / math.sqrt(hidden))
        self.hidden_layer = nn.Linear(2 * hidden, hidden)  # W₁, b₁ of g
        self.out = nn.Linear(hidden, n_tgt)  # W₂, b₂ of g

    def states(self, src, tgt_in):
        """Encoder states h (B, N, H) and decoder states s (B, T, H)."""
        if src.ndim != 2 or tgt_in.ndim != 2 or src.shape[0] != tgt_in.shape[0]:
            fail("Seq2SeqAttention inputs", "src (B, N) and tgt_in (B, T) token ids",
                 f"{shape_str(src.shape)} and {shape_str(tgt_in.shape)}")
        for name, ids, table in (("src", src, self.src_embed), ("tgt_in", tgt_in, self.tgt_embed)):
            check_array(name, ids, "int", like=torch.Tensor, hint="token ids")
            check_ids(name, ids, table.num_embeddings)
        check_same_device(src=src, tgt_in=tgt_in, weights=self.W_a)
        h, _ = self.encoder(self.src_embed(src))
        s, _ = self.decoder(self.tgt_embed(tgt_in))
        return h, s

    def output_params(self):
        return (self.hidden_layer.weight, self.hidden_layer.bias, self.out.weight, self.out.bias)

    def forward(self, src, tgt_in, src_mask=None):
        if src_mask is not None:
            check_source_mask(src_mask, src[..., None], "src_mask")
        h, s = self.states(src, tgt_in)
        context, alpha = luong_attention_torch(s, h, self.W_a, src_mask, self.uniform)
        return output_torch(context, s, *self.output_params()), alpha

    @torch.no_grad()
    def probe(self, src, tgt_in, tgt_out):
        """Lexical probe β (B, T, N): p_t(y_t) with c_t := h_i."""
        h, s = self.states(src, tgt_in)
        check_probe(h, s, tgt_out, self.out.weight, "tgt_out")
        return lexical_probe_torch(h, s, tgt_out, *self.output_params())


class AttentionClassifier(nn.Module):
    """Bidirectional LSTM encoder + MLP attention + linear read-out: the paper's §2.4
    classifier in the layout of the authors' `classification/classifier_model.py`.

        h_i = [→h_i ; ←h_i]  (each direction a one-layer LSTM of width `hidden`)
        e_i = vᵀ ReLU(W h_i + b),  α = softmax(e),  z = wᵀ Σ_i α_i h_i + b₀,  P(pos) = σ(z)

        x (B, N) token ids, mask (B, N) bool (True = real token; padding at the end)
        -> log-odds z (B,), α (B, N)
    uniform=True freezes α to 1/n over the real tokens. The authors' score layer has a bias
    after v; a softmax ignores a constant, so it is left out here.
    """

    def __init__(self, n_vocab: int, hidden: int = 64, embed: int | None = None,
                 attn_hidden: int | None = None, uniform: bool = False):
        super().__init__()
        n_vocab, hidden = check_size("n_vocab", n_vocab, 1), check_size("hidden", hidden, 1)
        embed = hidden if embed is None else check_size("embed", embed, 1)
        attn_hidden = hidden if attn_hidden is None else check_size("attn_hidden", attn_hidden, 1)
        self.uniform = uniform
        self.embed = nn.Embedding(n_vocab, embed)
        self.forward_lstm = nn.LSTM(embed, hidden, batch_first=True)  # reads x_1..x_n
        self.backward_lstm = nn.LSTM(embed, hidden, batch_first=True)  # reads x_n..x_1
        self.attn = nn.Linear(2 * hidden, attn_hidden)  # W, b
        self.v = nn.Linear(attn_hidden, 1, bias=False)  # v
        self.readout = nn.Linear(2 * hidden, 1)  # w, b₀

    def states(self, x, mask=None):
        """Encoder states h (B, N, 2H), zero at padded positions (the twin of `bilstm_np`)."""
        if x.ndim != 2:
            fail("AttentionClassifier input", "token ids (B, N)", shape_str(x.shape))
        check_array("x", x, "int", like=torch.Tensor, hint="(B, N) token ids")
        check_ids("x", x, self.embed.num_embeddings)
        check_same_device(x=x, weights=self.readout.weight)
        B, N = x.shape
        positions = torch.arange(N, device=x.device).expand(B, N)
        ok = mask is None or (tuple(mask.shape) == (B, N) and mask.dtype == torch.bool)
        lengths = torch.full((B,), N, device=x.device) if mask is None or not ok else mask.sum(1)
        if not ok or (mask is not None and not torch.equal(mask, positions < lengths[:, None])):
            fail("AttentionClassifier mask", f"bool {shape_str((B, N))}, True on a prefix of "
                 "each row (padding at the end)", f"{mask.dtype} {shape_str(mask.shape)}")
        e = self.embed(x)  # (B, N, E)
        forward, _ = self.forward_lstm(e)
        # reverse each row's real prefix (n-1-i for i < n), leave the padding where it is:
        # the backward LSTM then starts at the row's last real token, as with packing
        flip = torch.where(positions < lengths[:, None], lengths[:, None] - 1 - positions,
                           positions)[..., None]
        backward, _ = self.backward_lstm(e.gather(1, flip.expand_as(e)))
        backward = backward.gather(1, flip.expand_as(backward))  # the flip is its own inverse
        real = (positions < lengths[:, None])[..., None]
        return torch.cat([forward, backward], dim=-1) * real

    def forward(self, x, mask=None):
        return classifier_torch(self.states(x, mask), self.attn.weight, self.attn.bias,
                                self.v.weight[0], self.readout.weight[0], self.readout.bias[0],
                                mask, self.uniform)

    @torch.no_grad()
    def position_logits(self, x, mask=None):
        """Log-odds wᵀ h_i + b₀ obtained by attending only to position i -> (B, N)."""
        return self.readout(self.states(x, mask))[..., 0]

    @torch.no_grad()
    def probe(self, x, labels, mask=None):
        """Lexical probe β (B, N) = σ(s · (wᵀ h_i + b₀))."""
        return classifier_probe_torch(self.states(x, mask), self.readout.weight[0],
                                      self.readout.bias[0], labels)
