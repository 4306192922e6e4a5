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
`token_states` caches a dataset's token states under data/cache/ so that heads trained on the
frozen encoder do not run it every epoch; `hidden_states` caches any layer's, so that
fine-tuning only the top layers (`TopLayers`) never runs the frozen bottom ones again.
"""

from __future__ import annotations

import copy
import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from .tools import data
from .attention import MultiHeadAttention, padding_mask_torch
from .tools.fetch import atomic_write
from .tools.utils import (check_array, check_finite, check_ids, check_same_device, check_size,
                          describe, fail, shape_str)


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
            fail("attention_mask", "bool, or integers 0/1 (1 = real token)", describe(attention_mask))
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


# ============================================================================ loading + tokens
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


def is_text(t) -> bool:
    """A sentence (str) or a pair of sentences (a, b), encoded "[CLS] a [SEP] b [SEP]"."""
    return isinstance(t, str) or (isinstance(t, tuple) and len(t) == 2
                                  and all(isinstance(s, str) for s in t))


def check_texts(texts) -> None:
    if isinstance(texts, (str, tuple)) or not texts or not all(is_text(t) for t in texts):
        fail("texts must be a non-empty list of strings or of (a, b) pairs of strings",
             "list[str] or list[tuple[str, str]]",
             repr(texts)[:60] if not isinstance(texts, list) else f"list of {len(texts)}")


def encode_batch(tokenizer, texts: list, device=None, with_types: bool = False):
    """Tokenize `texts` (sentences, or (a, b) pairs) -> input_ids (B, L) int64 and
    attention_mask (B, L) bool, and token_type_ids (B, L) int64 when `with_types`."""
    check_texts(texts)
    encodings = tokenizer.encode_batch(list(texts))
    ids = torch.tensor([e.ids for e in encodings], dtype=torch.long, device=device)
    mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.bool, device=device)
    if with_types:
        types = torch.tensor([e.type_ids for e in encodings], dtype=torch.long, device=device)
        return ids, mask, types
    return ids, mask


def length_sorted_batches(tokenizer, texts: list, batch_size: int) -> list[np.ndarray]:
    """Indices of `texts` in batches of similar token count, shortest first.

    A batch is padded to its longest text, so grouping texts of similar length wastes
    little compute on padding (on the sentiment sentences: 2× fewer token positions).
    """
    check_texts(texts)
    batch_size = check_size("batch_size", batch_size, 1)
    n_tokens = [sum(e.attention_mask) for e in tokenizer.encode_batch(list(texts))]
    order = np.argsort(n_tokens, kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def mean_pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked mean over tokens: (B, L, D), (B, L) bool -> (B, D).

        pooled_b = Σ_i m_bi h_bi / Σ_i m_bi        (a row with no real token pools to 0)

    Padding contributes nothing, so a sentence gets the same vector whatever it is padded to,
    and whatever its padded states hold (even NaN: they are selected away, not multiplied by 0).
    """
    check_array("states", states, "float", like=torch.Tensor, hint="(B, L, D)")
    check_array("mask", mask, "bool", like=torch.Tensor, hint="(B, L), True on real tokens")
    if states.ndim != 3 or mask.shape != states.shape[:2]:
        fail("mean_pool inputs do not fit", "states (B, L, D) and mask (B, L)",
             f"states {shape_str(states.shape)}, mask {shape_str(mask.shape)}")
    check_same_device(states=states, mask=mask)
    check_finite("states", states, where=mask[..., None])
    # BEGIN EXERCISE 7.1 implement: masked mean over the real tokens (padding must not count) (~10 min)
    real = mask.unsqueeze(-1)  # (B, L, 1)
    total = torch.where(real, states, torch.zeros_like(states)).sum(dim=1)
    return total / real.sum(dim=1).clamp(min=1).to(states.dtype)
    # END EXERCISE


@torch.no_grad()
def embed(encoder: MiniLMEncoder, tokenizer, texts: list[str], batch_size: int = 64,
          normalize: bool = True, progress: bool = False) -> torch.Tensor:
    """Sentence embeddings (N, D): masked mean of the last layer, L2-normalised by default
    (as sentence-transformers does for all-MiniLM-L6-v2, so a dot product is a cosine)."""
    check_texts(texts)
    batch_size = check_size("batch_size", batch_size, 1)
    device = next(encoder.parameters()).device
    pooled = torch.empty(len(texts), encoder.config.hidden_size, device=device)
    for batch in tqdm(length_sorted_batches(tokenizer, texts, batch_size), desc="embed",
                      disable=not progress):
        ids, mask = encode_batch(tokenizer, [texts[i] for i in batch], device)
        pooled[torch.as_tensor(batch, device=device)] = mean_pool(encoder(ids, mask), mask)
    return F.normalize(pooled, dim=-1) if normalize else pooled


# ============================================================================ token-state cache
class TokenStates:
    """Last-layer token states of N texts, packed without padding: `states[offsets[i]:
    offsets[i+1]]` are text i's tokens ([CLS] … [SEP]). Stored as float16 to halve the disk."""

    def __init__(self, states: np.ndarray, offsets: np.ndarray, ids: np.ndarray):
        check_array("states", states, "float", ndim=2, like=np.ndarray, hint="(T, D)")
        check_array("offsets", offsets, "int", ndim=1, like=np.ndarray, hint="(N + 1,)")
        if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(states) or \
                (np.diff(offsets) < 0).any() or len(ids) != len(states):
            fail("offsets", f"non-decreasing offsets from 0 to len(states) = {len(states)} "
                 "(and one id per state)", f"{describe(offsets)} and {len(ids)} ids")
        self.states, self.offsets, self.ids = states, offsets, ids

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def batch(self, indices, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Texts `indices` padded to their longest: states (B, L, D) float32, mask (B, L) bool."""
        given = np.asarray(indices.cpu() if isinstance(indices, torch.Tensor) else indices)
        if given.size and given.dtype.kind not in "iu":
            fail("indices", f"integer indices in [0, {len(self)})", describe(given))
        indices = given.astype(np.int64).reshape(-1)
        if len(indices) == 0 or indices.min() < 0 or indices.max() >= len(self):
            fail("indices out of range", f"a non-empty list of ints in [0, {len(self)})",
                 f"{indices[:5].tolist()}{'…' if len(indices) > 5 else ''}")
        lengths = self.offsets[indices + 1] - self.offsets[indices]
        out = np.zeros((len(indices), int(lengths.max()), self.states.shape[1]), np.float32)
        for row, (i, n) in enumerate(zip(indices, lengths)):
            out[row, :n] = self.states[self.offsets[i]:self.offsets[i] + n]
        mask = np.arange(out.shape[1])[None, :] < lengths[:, None]
        return torch.from_numpy(out).to(device), torch.from_numpy(mask).to(device)


def fingerprint(encoder: nn.Module) -> str:
    """sha256 of the encoder's weights: the cache key changes when the weights do."""
    digest = hashlib.sha256()
    for name, tensor in sorted(encoder.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


def hidden_states(encoder: MiniLMEncoder, tokenizer, texts: list, name: str, layers,
                  batch_size: int = 64, data_dir: str | Path | None = None
                  ) -> dict[int, TokenStates]:
    """The token states of `texts` after each of `layers` (0 = embeddings, N = the last layer,
    as in `MiniLMEncoder.run`), computed in one pass and then read from
    data/cache/<name>-<key>.npz, one file per layer. `texts` may be (a, b) pairs.

    The key hashes the weights, the tokenizer's settings, the layer and the texts, so changing
    any of them computes (and stores) a new cache instead of silently reusing a stale one.
    """
    check_texts(texts)
    layers = sorted(set(int(k) for k in layers))
    n_layers = len(encoder.layers)
    if not layers or layers[0] < 0 or layers[-1] > n_layers:
        fail("hidden_states: bad layers", f"indices in [0, {n_layers}]", f"{layers}")
    batch_size = check_size("batch_size", batch_size, 1)
    if not isinstance(name, str) or not name or any(c in name for c in "/\\\0"):
        fail("name", "a non-empty file-name part such as 'sentiment'", describe(name))
    key = hashlib.sha256()
    key.update(fingerprint(encoder).encode())
    key.update(tokenizer.to_str().encode())
    for text in texts:
        key.update("\x1f".join([text] if isinstance(text, str) else text).encode() + b"\0")
    root = Path(data_dir if data_dir is not None else data.DATA_DIR) / "cache"
    paths = {}
    for layer in layers:  # the last layer keeps the name it always had
        tag = key.copy()
        if layer != n_layers:
            tag.update(f"layer {layer}".encode())
        paths[layer] = root / f"{name}-{tag.hexdigest()[:16]}.npz"
    if all(path.exists() for path in paths.values()):
        out = {}
        try:  # a damaged file (the zip's CRC, a missing array, bad offsets) is rebuilt
            for layer, path in paths.items():
                with np.load(path) as z:
                    out[layer] = TokenStates(z["states"], z["offsets"], z["ids"])
            return out
        except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as err:
            print(f"{path} is damaged ({type(err).__name__}: {str(err)[:60]}): recomputing it")
            path.unlink(missing_ok=True)
    device = next(encoder.parameters()).device
    chunks = {layer: [None] * len(texts) for layer in layers}  # filled in the original order
    ids = [None] * len(texts)
    for batch in tqdm(length_sorted_batches(tokenizer, texts, batch_size),
                      desc=f"token states {name}"):
        batch_ids, mask, types = encode_batch(tokenizer, [texts[i] for i in batch], device,
                                              with_types=True)
        with torch.no_grad():
            states = encoder.run(batch_ids, mask, token_type_ids=types, last_layer=layers[-1])[0]
        lengths = mask.sum(dim=1).tolist()
        for layer in layers:
            host = states[layer].cpu().numpy().astype(np.float16)
            for row, (i, n) in enumerate(zip(batch, lengths)):
                chunks[layer][i] = host[row, :n]
        for row, (i, n) in enumerate(zip(batch, lengths)):
            ids[i] = batch_ids[row, :n].cpu().numpy()
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in ids])]).astype(np.int64)
    all_ids = np.concatenate(ids).astype(np.int32)
    out = {}
    for layer, path in paths.items():
        out[layer] = TokenStates(np.concatenate(chunks[layer]), offsets, all_ids)
        with atomic_write(path) as f:
            np.savez(f, states=out[layer].states, offsets=offsets, ids=all_ids)
    return out


def token_states(encoder: MiniLMEncoder, tokenizer, texts: list, name: str,
                 batch_size: int = 64, data_dir: str | Path | None = None) -> TokenStates:
    """Last-layer token states of `texts`, computed once and then read from the cache
    (`hidden_states` with the last layer only)."""
    last = len(encoder.layers)
    return hidden_states(encoder, tokenizer, texts, name, [last], batch_size, data_dir)[last]
