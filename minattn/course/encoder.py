"""The course's copy of MiniLM and the cache of its token states (lessons 01, 03 and 07).

    load_minilm     `minattn.encoder.load_bert` on data/minilm/ (fetched by
                    `python data_scripts/minilm.py`)
    TokenStates     token states of N texts, packed without padding, batched on demand
    hidden_states   the token states of any layers, computed once and then read from
                    data/cache/ (so that heads trained on a frozen encoder do not run it every
                    epoch, and fine-tuning its top layers never runs the frozen bottom ones)
    token_states    the last layer's
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from ..checks import check_texts
from ..contract import check_array, check_size, describe, fail
from ..encoder import MiniLMEncoder, encode_batch, length_sorted_batches, load_bert
from . import data
from .fetch import atomic_write


def load_minilm(device: str | torch.device = "cpu", data_dir: str | Path | None = None,
                max_len: int = 256):
    """(encoder in eval mode on `device`, tokenizer) from data/minilm/ (or `data_dir`/minilm);
    raises `data.DatasetMissing` naming the script to run when the files are absent."""
    return load_bert(data.dataset_dir("minilm", data_dir), device, max_len)


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
