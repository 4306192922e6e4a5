"""A pretrained sentence encoder in plain torch: BERT (all-MiniLM-L6-v2) on lesson 01's attention.

BERT (Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding", NAACL 2019) is a stack of identical post-norm layers over summed embeddings:

    h⁰ = LN(E_word[ids] + E_pos[0..L) + E_type[types])                     (B, L, D)
    a  = LN(hˡ + MHA(hˡ, mask))                          MHA = minattn's MultiHeadAttention
    hˡ⁺¹ = LN(a + W₂ GELU(W₁ a + b₁) + b₂)                FFN: D -> 4D -> D

all-MiniLM-L6-v2 has 6 layers, D = 384, 12 heads of 32, FFN 1536; sentence-transformers
trained it so that the *mean of the token states over real tokens* is a sentence embedding
(`embed`). Padding must not leak into that mean or into attention: the key mask comes from
`minattn.attention.padding_mask_torch`, and the mean (lesson 07's `mean_pool_torch`) selects
the real tokens.

A pair of sentences goes in as one sequence, "[CLS] A [SEP] B [SEP]", with token type 0 on
A's part and 1 on B's (a *cross-encoder*: every layer lets A's tokens attend to B's).

Read top down: the configuration, one layer, the encoder, its top layers as a trainable copy
(`TopLayers`, for fine-tuning the top of a frozen encoder), loading a Hugging Face checkpoint
from a folder (`load_bert`: config.json, model.safetensors, tokenizer.json, read with the
`tokenizers` package; no `transformers` needed), tokenising and batching, sentence embeddings.
Where the course keeps the files, and the cache of token states a lesson trains on, are the
course's business (`minattn.course.encoder`: `load_minilm`, `token_states`, `hidden_states`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import checks as c
from .attention import MultiHeadAttention, padding_mask_torch
from .contract import check_size, checked, fail, shape_str
from .task_heads import mean_pool_torch


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_json(cls, path: str | Path) -> "BertConfig":
        """Read the fields we use from a Hugging Face `config.json` (the rest is ignored)."""
        if not Path(path).is_file():
            fail("path", "a Hugging Face config.json file", f"{path} (no such file)")
        try:
            raw = json.loads(Path(path).read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            fail("path", "a readable JSON config (run `make data` to repair data/)",
                 f"{path} ({err})")
        if raw.get("hidden_act", "gelu") != "gelu":
            fail("unsupported activation", "hidden_act 'gelu'", repr(raw["hidden_act"]))
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})


# ============================================================================ the model
class EncoderLayer(nn.Module):
    """One post-norm BERT layer: attention + residual + LayerNorm, FFN + residual + LayerNorm."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = MultiHeadAttention(cfg.hidden_size, cfg.num_attention_heads)
        self.attention_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.ffn_in = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.ffn_out = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.ffn_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """x (B, L, D), mask (B, 1, 1, L) bool -> (B, L, D), weights (B, H, L, L) or None."""
        attended, weights = self.attention(x, mask=mask, need_weights=need_weights)
        x = self.attention_norm(x + attended)
        # F.gelu is the exact erf form, which is what BERT's "gelu" means.
        x = self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))
        return x, weights


def run_layers(layers, x: torch.Tensor, keys_mask: torch.Tensor, states: list | None = None,
               need_weights: bool = False) -> list:
    """Run encoder `layers` in turn on x (B, L, D) with keys_mask (B, 1, 1, L); each layer's
    output is appended to `states` (when given). Returns the per-layer attention weights."""
    weights = []
    for layer in layers:
        x, w = layer(x, keys_mask, need_weights)
        if states is not None:
            states.append(x)
        weights.append(w)
    return weights


class MiniLMEncoder(nn.Module):
    """A BERT encoder (MiniLM-sized by default) built on `minattn.attention.MultiHeadAttention`.

    forward(input_ids (B, L) long, attention_mask (B, L) bool/0-1, right-padded)
        -> token states (B, L, D) of the last layer
    Dropout is left out: this module is for inference, frozen features and the short
    fine-tuning of its top layers (`TopLayers`), where lesson 07 does without it.
    """

    def __init__(self, cfg: BertConfig = BertConfig()):
        super().__init__()
        self.config = cfg
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.embedding_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_hidden_layers))

    @checked(input_ids="int (B, L) < self.word_embeddings", attention_mask="real (B, L)",
             token_type_ids="int? (B, L) < self.token_type_embeddings",
             rules=[c.encoder_ids])
    def run(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
            need_weights: bool = False, token_type_ids: torch.Tensor | None = None,
            last_layer: int | None = None
            ) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        """All hidden states [embeddings, layer 1, ..., layer N] and per-layer attention weights.

        token_type_ids (B, L): 0 on the first sentence, 1 on the second of a pair (default 0).
        last_layer: stop after this layer (the lists are then shorter); default N.
        """
        attention_mask = attention_mask.bool()  # 0/1 integers too
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # one sentence
        L = input_ids.shape[1]
        positions = torch.arange(L, device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
             + self.token_type_embeddings(token_type_ids))  # (B, L, D)
        states = [self.embedding_norm(x)]
        keys_mask = padding_mask_torch(attention_mask.sum(dim=1), L)  # (B, 1, 1, L)
        weights = run_layers(self.layers[:last_layer], states[-1], keys_mask, states,
                             need_weights)
        return states, weights

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        return self.run(input_ids, attention_mask, token_type_ids=token_type_ids)[0][-1]

    @torch.no_grad()
    def load_bert_state_dict(self, state: dict[str, torch.Tensor]) -> "MiniLMEncoder":
        """Copy weights named as in Hugging Face's BertModel (with or without a 'bert.' prefix)."""
        state = {k.removeprefix("bert."): v for k, v in state.items()}
        mine = self.state_dict()
        missing = [ours for ours in mine if bert_name(ours) not in state]
        if missing:
            fail("checkpoint is missing weights", "BERT names for every parameter",
                 f"no {bert_name(missing[0])!r} (and {len(missing) - 1} more)")
        for ours, tensor in mine.items():
            theirs = state[bert_name(ours)]
            if theirs.shape != tensor.shape:
                fail(f"weight {bert_name(ours)} has the wrong shape", shape_str(tensor.shape),
                     shape_str(theirs.shape))
            tensor.copy_(theirs)
        return self


def bert_name(ours: str) -> str:
    """Our parameter name -> the Hugging Face BertModel name of the same tensor."""
    fixed = {"word_embeddings": "embeddings.word_embeddings",
             "position_embeddings": "embeddings.position_embeddings",
             "token_type_embeddings": "embeddings.token_type_embeddings",
             "embedding_norm": "embeddings.LayerNorm"}
    head, _, rest = ours.partition(".")
    if head in fixed:
        return f"{fixed[head]}.{rest}"
    _, i, module, *param = ours.split(".")  # layers.<i>.<module>[.<sub>].<weight|bias>
    per_layer = {"attention.q_proj": "attention.self.query",
                 "attention.k_proj": "attention.self.key",
                 "attention.v_proj": "attention.self.value",
                 "attention.out_proj": "attention.output.dense",
                 "attention_norm": "attention.output.LayerNorm",
                 "ffn_in": "intermediate.dense", "ffn_out": "output.dense",
                 "ffn_norm": "output.LayerNorm"}
    sub = ".".join([module] + param[:-1])
    return f"encoder.layer.{i}.{per_layer[sub]}.{param[-1]}"


class TopLayers(nn.Module):
    """Trainable copies of an encoder's last `n` layers, run on hidden states of layer N − n.

    Fine-tuning only the top of a frozen encoder: the bottom layers' output is computed once
    (`minattn.course.encoder.hidden_states`) and these layers start from the pretrained weights.
    forward(states (B, L, D) of layer N − n, mask (B, L) bool right-padded) -> (B, L, D).
    """

    @checked(n="int in 1 .. encoder.config.num_hidden_layers")
    def __init__(self, encoder: MiniLMEncoder, n: int):
        super().__init__()
        self.first = len(encoder.layers) - n  # in `MiniLMEncoder.run`'s list: the input states
        self.layers = nn.ModuleList(copy.deepcopy(layer) for layer in encoder.layers[self.first:])
        for p in self.parameters():
            p.requires_grad_(True)

    # The states are read everywhere, padding too: attention runs every row as a query.
    @checked(states="float (B, L, D)", mask="bool (B, L)", rules=[c.check_right_padded])
    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = [states]
        run_layers(self.layers, states, padding_mask_torch(mask.sum(dim=1), mask.shape[1]), out)
        return out[-1]


# ============================================================================ loading
def load_bert(folder: str | Path, device: str | torch.device = "cpu", max_len: int = 256):
    """(encoder in eval mode on `device`, tokenizer) from a folder holding a Hugging Face BERT
    checkpoint: config.json, model.safetensors and tokenizer.json.

    all-MiniLM-L6-v2's tokenizer.json pads every input to a fixed 128 tokens and truncates at
    128; we pad to the longest sentence of each batch instead and truncate at `max_len` (256,
    the length sentence-transformers uses for this model).
    """
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    max_len = check_size("max_len", max_len, 1)
    folder = Path(folder)
    encoder = MiniLMEncoder(BertConfig.from_json(folder / "config.json"))
    encoder.load_bert_state_dict(load_file(str(folder / "model.safetensors")))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
    tokenizer.enable_truncation(max_length=max_len)
    return encoder.to(device).eval(), tokenizer


# ============================================================================ tokens
@checked(rules=[c.check_texts])
def encode_batch(tokenizer, texts: list, device=None, with_types: bool = False):
    """Tokenize `texts` (sentences, or (a, b) pairs) -> input_ids (B, L) int64 and
    attention_mask (B, L) bool, and token_type_ids (B, L) int64 when `with_types`."""
    encodings = tokenizer.encode_batch(list(texts))
    ids = torch.tensor([e.ids for e in encodings], dtype=torch.long, device=device)
    mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.bool, device=device)
    if with_types:
        types = torch.tensor([e.type_ids for e in encodings], dtype=torch.long, device=device)
        return ids, mask, types
    return ids, mask


@checked(batch_size="int >= 1", rules=[c.check_texts])
def length_sorted_batches(tokenizer, texts: list, batch_size: int) -> list[np.ndarray]:
    """Indices of `texts` in batches of similar token count, shortest first.

    A batch is padded to its longest text, so grouping texts of similar length wastes
    little compute on padding (on the sentiment sentences: 2× fewer token positions).
    """
    n_tokens = [sum(e.attention_mask) for e in tokenizer.encode_batch(list(texts))]
    order = np.argsort(n_tokens, kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


@torch.no_grad()
@checked(batch_size="int >= 1", rules=[c.check_texts])
def embed(encoder: MiniLMEncoder, tokenizer, texts: list[str], batch_size: int = 64,
          normalize: bool = True, progress: bool = False) -> torch.Tensor:
    """Sentence embeddings (N, D): masked mean of the last layer, L2-normalised by default
    (as sentence-transformers does for all-MiniLM-L6-v2, so a dot product is a cosine)."""
    device = next(encoder.parameters()).device
    pooled = torch.empty(len(texts), encoder.config.hidden_size, device=device)
    batches = length_sorted_batches(tokenizer, texts, batch_size)
    if progress:
        from tqdm import tqdm
        batches = tqdm(batches, desc="embed")
    for batch in batches:
        ids, mask = encode_batch(tokenizer, [texts[i] for i in batch], device)
        pooled[torch.as_tensor(batch, device=device)] = mean_pool_torch(encoder(ids, mask), mask)
    return F.normalize(pooled, dim=-1) if normalize else pooled
