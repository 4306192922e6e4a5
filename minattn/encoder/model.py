"""A pretrained sentence encoder in pure torch: BERT (all-MiniLM-L6-v2) on lesson 01's attention.

BERT is a stack of identical post-norm layers over summed embeddings:

    h⁰ = LN(E_word[ids] + E_pos[0..L) + E_type[types])                     (B, L, D)
    a  = LN(hˡ + MHA(hˡ, mask))                          MHA = minattn's MultiHeadAttention
    hˡ⁺¹ = LN(a + W₂ GELU(W₁ a + b₁) + b₂)                FFN: D -> 4D -> D

all-MiniLM-L6-v2 has 6 layers, D = 384, 12 heads of 32, FFN 1536; sentence-transformers
trained it so that the *mean of the token states over real tokens* is a sentence embedding.
Padding must not leak into that mean or into attention: the key mask comes from
`minattn.attention.padding_mask_torch` and `mean_pool` divides by the number of real tokens.

A pair of sentences goes in as one sequence, "[CLS] A [SEP] B [SEP]", with token type 0 on
A's part and 1 on B's (a *cross-encoder*: every layer lets A's tokens attend to B's).

The weights load from `model.safetensors` (fetched by `python data_scripts/minilm.py`), the
tokenizer from `tokenizer.json` with the `tokenizers` package; no `transformers` needed.
Tokenising, batching and the token-state cache are in `tokens.py`: `token_states` caches a
dataset's token states under data/cache/ so that heads trained on the
frozen encoder do not run it every epoch; `hidden_states` caches any layer's, so that
fine-tuning only the top layers (`TopLayers`) never runs the frozen bottom ones again.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention, padding_mask_torch
from ..checks import (
    check_array,
    check_ids,
    check_same_device,
    check_size,
    describe,
    fail,
    shape_str,
)
from ..course import data


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

    def check_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Validate ids and mask; returns the lengths (B,) of the right-padded rows.

        attention_mask: bool, or integers 0/1 as Hugging Face tokenizers give it."""
        check_array("input_ids", input_ids, "int", like=torch.Tensor, hint="(B, L) int64")
        if input_ids.ndim != 2 or input_ids.dtype != torch.long:
            fail("input_ids have the wrong shape or dtype", "(B, L) int64",
                 f"{shape_str(input_ids.shape)} {input_ids.dtype}")
        check_array("attention_mask", attention_mask, None, like=torch.Tensor)
        if attention_mask.shape != input_ids.shape:
            fail("attention_mask does not match input_ids", shape_str(input_ids.shape),
                 shape_str(attention_mask.shape))
        check_same_device(input_ids=input_ids, attention_mask=attention_mask,
                          weights=self.word_embeddings.weight)
        if attention_mask.is_floating_point() or attention_mask.dtype != torch.bool and \
                bool(((attention_mask != 0) & (attention_mask != 1)).any()):
            fail("attention_mask", "bool, or integers 0/1 (1 = real token)",
                 describe(attention_mask))
        check_ids("input_ids", input_ids, self.config.vocab_size)
        if input_ids.shape[1] > self.config.max_position_embeddings:
            fail("sequence too long", f"L <= {self.config.max_position_embeddings}",
                 f"L = {input_ids.shape[1]}")
        mask = attention_mask.bool()
        lengths = mask.sum(dim=1)
        if not torch.equal(mask, padding_mask_torch(lengths, mask.shape[1])[:, 0, 0]):
            fail("attention_mask is not right-padded", "each row 1…1 0…0 (real tokens first)",
                 "a row with a 0 before a 1")
        return lengths

    def run(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
            need_weights: bool = False, token_type_ids: torch.Tensor | None = None,
            last_layer: int | None = None
            ) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        """All hidden states [embeddings, layer 1, ..., layer N] and per-layer attention weights.

        token_type_ids (B, L): 0 on the first sentence, 1 on the second of a pair (default 0).
        last_layer: stop after this layer (the lists are then shorter); default N.
        """
        lengths = self.check_inputs(input_ids, attention_mask)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        elif token_type_ids.shape != input_ids.shape:
            fail("token_type_ids do not match input_ids", shape_str(input_ids.shape),
                 shape_str(token_type_ids.shape))
        L = input_ids.shape[1]
        positions = torch.arange(L, device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
             + self.token_type_embeddings(token_type_ids))
        states = [self.embedding_norm(x)]
        weights = run_layers(self.layers[:last_layer], states[-1], padding_mask_torch(lengths, L),
                             states, need_weights)
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


class TopLayers(nn.Module):
    """Trainable copies of an encoder's last `n` layers, run on hidden states of layer N − n.

    Fine-tuning only the top of a frozen encoder: the bottom layers' output is computed once
    (`hidden_states`) and these layers start from the pretrained weights.
    forward(states (B, L, D) of layer N − n, mask (B, L) bool right-padded) -> (B, L, D).
    """

    def __init__(self, encoder: MiniLMEncoder, n: int):
        super().__init__()
        total = len(encoder.layers)
        if not 1 <= n <= total:
            fail("TopLayers: bad number of layers", f"1 <= n <= {total}", f"n = {n}")
        self.first = total - n  # the index in `MiniLMEncoder.run`'s list of the input states
        self.layers = nn.ModuleList(copy.deepcopy(layer) for layer in encoder.layers[self.first:])
        for p in self.parameters():
            p.requires_grad_(True)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if states.ndim != 3 or mask.shape != states.shape[:2]:
            fail("TopLayers inputs do not fit", "states (B, L, D) and mask (B, L)",
                 f"states {shape_str(states.shape)}, mask {shape_str(mask.shape)}")
        out = [states]
        run_layers(self.layers, states, padding_mask_torch(mask.sum(dim=1), mask.shape[1]), out)
        return out[-1]


# ============================================================================ loading
def load_minilm(device: str | torch.device = "cpu", data_dir: str | Path | None = None,
                max_len: int = 256):
    """(encoder in eval mode on `device`, tokenizer) from data/minilm/ (see data_scripts).

    The shipped tokenizer.json pads every input to a fixed 128 tokens and truncates at 128;
    we pad to the longest sentence of each batch instead and truncate at `max_len` (256, the
    length sentence-transformers uses for this model).
    """
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    max_len = check_size("max_len", max_len, 1)
    folder = data.dataset_dir("minilm", data_dir)
    encoder = MiniLMEncoder(BertConfig.from_json(folder / "config.json"))
    encoder.load_bert_state_dict(load_file(str(folder / "model.safetensors")))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
    tokenizer.enable_truncation(max_length=max_len)
    return encoder.to(device).eval(), tokenizer
