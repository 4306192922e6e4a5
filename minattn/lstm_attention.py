"""Attention in an LSTM encoder-decoder, and why it is learned (lesson 05).

Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns" (2021).
Notation (the paper's §2.1-2.2, eqs. 1-4): input x_1..x_n with encoder states h_i, output
y_1..y_m with decoder states s_t (the decoder reads y_{t-1}: teacher forcing).

    LSTM cell                   [i; f; g; o] = W x + U h + b,  c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g),
                                h' = σ(o) ⊙ tanh(c')               (PyTorch's gate order)
    Luong "general" attention   e_ti = s_tᵀ W_a h_i,  α_t = softmax_i(e_t),  c_t = Σ_i α_ti h_i
    output network              p_t = softmax(g([c_t ; s_t])),  g(z) = W₂ tanh(W₁ z + b₁) + b₂
    K heads, summed             c_t = Σ_k Σ_i α^k_ti h_i      (each head its own W_a^k)
    lexical probe β_ti          p_t(y_t) when c_t := h_i (attend to position i only)
    the scores' gradient        ∂ log p_t(y_t) / ∂e_ti = α_ti (u_t·h_i − Σ_j α_tj u_t·h_j),
                                u_t = ∂ log p_t(y_t) / ∂c_t: attention follows the probe

Shapes are batch-first: s (B, T, H), h (B, N, H), α (B, K, T, N). A source mask (B, N) is bool,
True = a real token; what it hides may hold anything (it is set to 0 before it is read).

Read top down: the NumPy reference (LSTM, attention, output network, probe, the scores'
gradient), its torch twin line for line (the gradient's twin is torch's autograd itself: the
tests compare them), then the copy model of the authors' code (github.com/Sea-Snell/
AttentionDynamics, `SequenceCopying/seq2seq_model.py` and `multihead.py`) and the map from their
parameter names to ours. Its attention differs from Luong's in two places, both in
`projected_attention_np`: a biased query q_t = A s_t + a, and a projected read-out
c_t = P Σ_i α_ti h_i + p; with K heads the contexts are AVERAGED, as their code does (the
paper's §5.2 says summed: K times the mean, the same family from another starting point).
Input checks: minattn/checks.py (lstm_attention section). The copy tasks, their training and
the multi-head study: minattn/course/lstm_attention.py. Lesson 08 (`minattn.agreement`) builds
its classifier and translator on these pieces.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from . import checks as c
from .attention import softmax_np, softmax_torch
from .contract import checked, fail, hide


# ============================================================================ NumPy reference
def sigmoid_np(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@checked(x="float (B, d)", h="float (B, H)", c="float (B, H)", weight_hh="float (4H, H)",
         weight_ih="float (4H, d)", bias_ih="float (4H)", bias_hh="float (4H)")
def lstm_cell_np(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    """One LSTM step, gates written out (PyTorch's layout: rows i, f, g, o of the weights).

    x (B, d), h and c (B, H); weight_ih (4H, d), weight_hh (4H, H), biases (4H,) -> (h', c').
        i = σ(W_i x + U_i h + b_i)   input gate     f = σ(...)  forget gate
        g = tanh(W_g x + U_g h + b_g) candidate     o = σ(...)  output gate
        c' = f ⊙ c + i ⊙ g,   h' = o ⊙ tanh(c')
    """
    gates = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh  # (B, 4H)
    i, f, g, o = np.split(gates, 4, axis=-1)
    c_new = sigmoid_np(f) * c + sigmoid_np(i) * np.tanh(g)
    return sigmoid_np(o) * np.tanh(c_new), c_new


@checked(x="float (B, N, d)", weight_hh="float (G, H)", rules=[c.state_pair])
def lstm_np(x, weight_ih, weight_hh, bias_ih, bias_hh, state=None):
    """A one-layer LSTM over a sequence: x (B, N, d) -> outputs (B, N, H), (h_N, c_N).
    state: the starting (h, c), each (B, H); zeros by default."""
    B, H = x.shape[0], weight_hh.shape[1]
    h, c = state if state is not None else (np.zeros((B, H), x.dtype), np.zeros((B, H), x.dtype))
    outputs = []
    for t in range(x.shape[1]):
        h, c = lstm_cell_np(x[:, t], h, c, weight_ih, weight_hh, bias_ih, bias_hh)
        outputs.append(h)
    return np.stack(outputs, axis=1), (h, c)


@checked(s="float (B, T, H)", h="float (B, N, H) where mask", W_a="float (K, H, H)",
         mask="bool? (B, N)", uniform="bool")
def luong_attention_np(s, h, W_a, mask=None, uniform=False):
    """Luong "general" attention with K heads summed.

    s (B, T, H) decoder states, h (B, N, H) encoder states, W_a (K, H, H), mask (B, N) bool
    (True = real token) -> context (B, T, H), weights α (B, K, T, N).
    uniform=True freezes α to 1/n over the real tokens (W_a is then unused).
    """
    h = h if mask is None else hide(h, mask[..., None])  # padding may hold garbage: zeroed
    # BEGIN EXERCISE 5.1 implement: the Luong attention step (scores, softmax, context) (~10 min)
    scores = np.einsum("btd,kde,bne->bktn", s, W_a, h)  # e^k_ti = s_tᵀ W_a^k h_i
    if uniform:
        scores = np.zeros_like(scores)  # equal scores: softmax gives 1/n over the real tokens
    m = None if mask is None else mask[:, None, None, :]  # (B, 1, 1, N)
    alpha = softmax_np(scores, m)  # (B, K, T, N), lesson 01's masked softmax
    context = np.einsum("bktn,bnd->btd", alpha, h)  # c_t = Σ_k Σ_i α^k_ti h_i
    # END EXERCISE
    return context, alpha


@checked(s="float (B, T, H)", h="float (B, N, H) where mask", A="float (K, H, H)",
         a="float (K, H)", P="float (K, H, H)", p="float (K, H)", mask="bool? (B, N)")
def projected_attention_np(s, h, A, a, P, p, mask=None, uniform=False):
    """The authors' attention step: K heads, each with a biased query map and its own context
    map; the heads' contexts are averaged.

    s (B, T, H) decoder states, h (B, N, H) encoder states, A and P (K, H, H), a and p (K, H),
    mask (B, N) bool (True = real token) -> context (B, T, H), weights α (B, K, T, N).
        q^k_t  = A_k s_t + a_k                   the query of head k
        e^k_ti = q^k_t · h_i                     = s_tᵀ A_kᵀ h_i + a_k · h_i
        α^k_t  = softmax_i(e^k_t),   r^k_t = Σ_i α^k_ti h_i
        c_t    = (1/K) Σ_k (P_k r^k_t + p_k)
    Each head is Luong's step with the query q^k in place of s_t and W_a = I; the K heads run
    as K copies of the batch. uniform=True freezes every α to 1/n over the real tokens.
    """
    B, K = s.shape[0], A.shape[0]
    q = np.einsum("kef,btf->bkte", A, s) + a[None, :, None, :]  # (B, K, T, H)
    read, alpha = luong_attention_np(  # one head per copy of the batch: (B·K, T, H), (B·K, 1, T, N)
        q.reshape(B * K, *q.shape[2:]), np.repeat(h, K, axis=0), np.eye(h.shape[-1])[None],
        None if mask is None else np.repeat(mask, K, axis=0), uniform)
    read = read.reshape(B, K, *read.shape[1:])  # r^k_t
    per_head = np.einsum("kfe,bkte->bktf", P, read) + p[None, :, None, :]
    return per_head.mean(axis=1), alpha.reshape(B, K, *alpha.shape[2:])


@checked(context="float (..., H)", s="float (..., H)", W1="float (h1, 2H)", b1="float (h1)",
         W2="float (V, h1)", b2="float (V)")
def output_np(context, s, W1, b1, W2, b2):
    """The output network g([c_t ; s_t]) = W₂ tanh(W₁ [c_t ; s_t] + b₁) + b₂ -> logits (.., V)."""
    z = np.concatenate([context, s], axis=-1)
    return np.tanh(z @ W1.T + b1) @ W2.T + b2


def log_softmax_np(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@checked(h="float (B, N, H)", s="float (B, T, H)", targets="int (B, T) < V",
         W1="float (h1, 2H)", b1="float (h1)", W2="float (V, h1)", b2="float (V)")
def lexical_probe_np(h, s, targets, W1, b1, W2, b2):
    """β_ti = p_t(y_t) when the model attends only to position i, i.e. c_t := h_i.

    h (B, N, H), s (B, T, H), targets (B, T) int -> β (B, T, N).
    """
    N, T = h.shape[1], s.shape[1]
    c = np.broadcast_to(h[:, None], (h.shape[0], T, N, h.shape[2]))  # (B, T, N, H): c_t := h_i
    st = np.broadcast_to(s[:, :, None], c.shape)
    logp = log_softmax_np(output_np(c, st, W1, b1, W2, b2))  # (B, T, N, V)
    idx = np.broadcast_to(targets[:, :, None, None], (*c.shape[:3], 1))
    return np.exp(np.take_along_axis(logp, idx, axis=-1)[..., 0])


@checked(context="float (B, T, H)", s="float (B, T, H)", targets="int (B, T) < V",
         W1="float (h1, 2H)", b1="float (h1)", W2="float (V, h1)", b2="float (V)")
def output_gradient_np(context, s, targets, W1, b1, W2, b2):
    """u_t = ∂ log p_t(y_t) / ∂c_t: how the log-probability of the right word changes with the
    context, back through the output network g (`output_np`):

        a = tanh(W₁ [c ; s] + b₁),   p = softmax(W₂ a + b₂)
        ∂ log p_y / ∂(W₂ a + b₂) = onehot(y) − p
        u = (W₁'s first H columns)ᵀ ((1 − a²) ⊙ W₂ᵀ (onehot(y) − p))

    context and s (B, T, H), targets (B, T) ids -> u (B, T, H).
    """
    a = np.tanh(np.concatenate([context, s], axis=-1) @ W1.T + b1)  # (B, T, h1)
    logits = a @ W2.T + b2
    residual = np.eye(W2.shape[0])[targets] - np.exp(log_softmax_np(logits))  # onehot(y) - p
    return ((residual @ W2) * (1 - a ** 2)) @ W1[:, :context.shape[-1]]


@checked(h="float (B, N, H) where mask", u="float (B, T, H)", alpha="float (B, T, N)",
         mask="bool? (B, N)")
def score_gradient_np(alpha, h, u, mask=None):
    """∂ log p_t(y_t) / ∂e_ti = α_ti (u_t·h_i − Σ_j α_tj u_t·h_j): why attention follows the
    probe (one head).

    log p depends on the scores e_t only through c_t = Σ_j α_tj h_j; with u_t = ∂ log p / ∂c_t
    (`output_gradient_np`) and the softmax Jacobian ∂α_tj/∂e_ti = α_tj (δ_ij − α_ti),
        ∂ log p / ∂e_ti = Σ_j (u_t·h_j) α_tj (δ_ij − α_ti).
    u_t·h_i is the first-order gain in log p from moving the context to h_i (a linearised
    lexical probe): a gradient step raises e_ti where that gain beats its α-weighted mean.
    alpha (B, T, N), h (B, N, H), u (B, T, H), mask (B, N) bool -> (B, T, N).
    """
    h = h if mask is None else hide(h, mask[..., None])  # padding may hold garbage: zeroed
    # BEGIN EXERCISE 5.2 implement: the gradient of log p with respect to the scores (~10 min)
    gain = np.einsum("btd,bnd->btn", u, h)  # u_t·h_i
    return alpha * (gain - (alpha * gain).sum(-1, keepdims=True))
    # END EXERCISE


# ============================================================================ torch twins
@checked(x="float (B, d)", h="float (B, H)", c="float (B, H)", weight_hh="float (4H, H)",
         weight_ih="float (4H, d)", bias_ih="float (4H)", bias_hh="float (4H)")
def lstm_cell_torch(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    """Twin of lstm_cell_np (and of nn.LSTMCell given the same weights)."""
    gates = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh  # (B, 4H)
    i, f, g, o = gates.chunk(4, dim=-1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_new), c_new


@checked(s="float (B, T, H)", h="float (B, N, H) where mask", W_a="float (K, H, H)",
         mask="bool? (B, N)", uniform="bool")
def luong_attention_torch(s, h, W_a, mask=None, uniform=False):
    """Twin of luong_attention_np: (context (B, T, H), α (B, K, T, N))."""
    h = h if mask is None else hide(h, mask[..., None])  # padding may hold garbage: zeroed
    # BEGIN EXERCISE 5.1 implement: the Luong attention step, torch twin
    scores = torch.einsum("btd,kde,bne->bktn", s, W_a, h)
    if uniform:
        scores = torch.zeros_like(scores).detach()
    m = None if mask is None else mask[:, None, None, :]
    alpha = softmax_torch(scores, m)
    context = torch.einsum("bktn,bnd->btd", alpha, h)
    # END EXERCISE
    return context, alpha


@checked(s="float (B, T, H)", h="float (B, N, H) where mask", A="float (K, H, H)",
         a="float (K, H)", P="float (K, H, H)", p="float (K, H)", mask="bool? (B, N)")
def projected_attention_torch(s, h, A, a, P, p, mask=None, uniform=False):
    """Twin of projected_attention_np: (context (B, T, H), α (B, K, T, N))."""
    B, K = s.shape[0], A.shape[0]
    q = torch.einsum("kef,btf->bkte", A, s) + a[None, :, None, :]
    read, alpha = luong_attention_torch(
        q.reshape(B * K, *q.shape[2:]), h.repeat_interleave(K, dim=0),
        torch.eye(h.shape[-1], dtype=h.dtype, device=h.device)[None],
        None if mask is None else mask.repeat_interleave(K, dim=0), uniform)
    read = read.reshape(B, K, *read.shape[1:])
    per_head = torch.einsum("kfe,bkte->bktf", P, read) + p[None, :, None, :]
    return per_head.mean(dim=1), alpha.reshape(B, K, *alpha.shape[2:])


@checked(context="float (..., H)", s="float (..., H)", W1="float (h1, 2H)", b1="float (h1)",
         W2="float (V, h1)", b2="float (V)")
def output_torch(context, s, W1, b1, W2, b2):
    """Twin of output_np."""
    return torch.tanh(torch.cat([context, s], dim=-1) @ W1.T + b1) @ W2.T + b2


@checked(h="float (B, N, H)", s="float (B, T, H)", targets="int (B, T) < V",
         W1="float (h1, 2H)", b1="float (h1)", W2="float (V, h1)", b2="float (V)")
def lexical_probe_torch(h, s, targets, W1, b1, W2, b2):
    """Twin of lexical_probe_np, one example at a time (the (T, N, V) logits stay small)."""
    betas = []
    for hb, sb, yb in zip(h, s, targets):  # (N, H), (T, H), (T,)
        T, N = sb.shape[0], hb.shape[0]
        c = hb[None].expand(T, N, -1)
        logp = output_torch(c, sb[:, None].expand_as(c), W1, b1, W2, b2).log_softmax(-1)
        betas.append(logp.gather(-1, yb[:, None, None].expand(T, N, 1))[..., 0].exp())
    return torch.stack(betas)


# ============================================================================ the authors' model
class AttentionHead(nn.Module):
    """One head of the authors' attention: the query map (A, a) and the context map (P, p),
    both nn.Linear(H, H) with PyTorch's default initialisation (their `Attn_head`)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.query = nn.Linear(hidden, hidden)  # attn_lin / attn_proj
        self.context = nn.Linear(hidden, hidden)  # project_enc / enc_proj


class OfficialSeq2Seq(nn.Module):
    """The LSTM encoder-decoder of the authors' copy experiments (one layer, unidirectional,
    embedding size = hidden size), with K attention heads whose contexts are averaged. Three
    differences from Luong's model above, besides the heads of `projected_attention_torch`:

        one embedding table, shared by the encoder and the decoder (one vocabulary of V ids:
        size it to the task, the words that occur + <eos> + <sos>);
        the decoder starts from the encoder's final state (h_N, c_N), not from zeros;
        src (B, N) token ids (no padding), tgt_in (B, T) = <sos> + y without its last token
        -> logits (B, T, V), α (B, K, T, N).

    uniform=True freezes every head's α to uniform. `set_heads` swaps in other heads (the
    multi-head study of §5.2 keeps one base network and tries different heads on it).
    """

    @checked(vocab="int >= 1", hidden="int >= 1", heads="int >= 1", uniform="bool")
    def __init__(self, vocab: int, hidden: int = 256, heads: int = 1, uniform: bool = False):
        super().__init__()
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

    @checked(src="int (B, N) < self.embedding", tgt_in="int (B, T) < self.embedding")
    def states(self, src, tgt_in):
        """Encoder states h (B, N, H) and decoder states s (B, T, H); the decoder starts from
        the encoder's final (h_N, c_N)."""
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


def seq2seq_official_to_ours(state: dict) -> dict:
    """Map a state dict of the authors' `seq2seq_model.Seq2seq` (num_layers=1,
    bidirectional=False) to `OfficialSeq2Seq(vocab, hidden, heads=1).load_state_dict(...)`.

        their name                                 shape         ours
        embedding.weight                           (V, H)        embedding.weight
        encoder_lstm.{weight,bias}_{ih,hh}_l0      (4H, H)…      encoder.…  (the same names)
        decoder_lstm.{weight,bias}_{ih,hh}_l0      (4H, H)…      decoder.…
        attn_lin.{weight,bias}                     (H, H), (H,)  heads.0.query.{weight,bias}
        project_enc.{weight,bias}                  (H, H), (H,)  heads.0.context.{weight,bias}
        after_decoder_hidden.weight                (H, 2H)       hidden_layer.weight, columns
                                                                 swapped: [s ; c] -> [c ; s]
        after_decoder_hidden.bias                  (H,)          hidden_layer.bias
        hidden2vocab.{weight,bias}                 (V, H), (V,)  out.{weight,bias}

    Their code is time-major, (len, B, ·); ours is batch-first, (B, len, ·). Not covered: the
    bidirectional or 2-layer encoders of their translation runs, padding (the copy data has none).
    """
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
