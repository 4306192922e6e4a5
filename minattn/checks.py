"""The named rules of the input contracts: what a spec of `@checked` cannot say
(minattn/contract.py has the spec language and the vocabulary these rules are written in).

One section per mechanism, in lesson order. A function lists its rules in its decorator,
`@checked(..., rules=[c.seen_finite])`; each rule is called with the arguments it names, after
every spec has passed, and only refuses: it returns None or raises the contract's ValueError
("<argument>: expected <what>, got <what was given>"). A few (`check_windows`, `check_layout`,
...) also return what they read, for the fast paths' caches; those are called directly and
wrapped by a rule.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import contract
from .contract import (
    Contract,
    as_numpy,
    check_array,
    check_finite,
    check_number,
    check_size,
    describe,
    fail,
    shape_str,
)


def __getattr__(name: str):
    """`minattn.checks.checked` and the rest of the contract's names, for code that imports
    them from here."""
    if hasattr(contract, name):
        return getattr(contract, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ==================== attention (lesson 01): minattn/attention.py
def seen_finite(q, k, v, mask=None, names=("q", "k", "v")) -> None:
    """q, k, v finite wherever the mask lets them count: what it hides (rows that see no key,
    keys no query sees) may hold anything, and the body selects it away (`hide`). With
    multi-head attention's `names`, a mask of up to 4 axes (B, H, Lq, Lk) against (B, N, D)."""
    rows = keys = None
    if mask is not None and names[0] == "query":  # (B, N, D) inputs: seen by some head
        m = mask[(None,) * (4 - mask.ndim)]
        rows, keys = (lambda: m.any(-1).any(1)[..., None]), (lambda: m.any(-2).any(1)[..., None])
    elif mask is not None:
        rows, keys = (lambda: mask.any(-1)[..., None]), (lambda: mask.any(-2)[..., None])
    for name, x, seen in zip(names, (q, k, v), (rows, keys, keys)):
        check_finite(name, x, where=seen)


def scores_count_where_allowed(scores, mask=None) -> None:
    """A score is finite or −inf where the mask allows it (exp(+inf − max) is NaN)."""
    check_finite("scores", scores, where=mask, minus_inf_ok=True)


def mask_or_causal(mask, is_causal) -> None:
    if is_causal and mask is not None:
        fail("mask", "a mask or is_causal=True, not both", f"{describe(mask)} and is_causal=True")


def floating_dtype(dtype) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        fail("dtype", "a floating torch dtype such as torch.float32", describe(dtype))


def lengths_np(lengths, max_len) -> None:
    """`padding_mask_np`: (B,) integer lengths in [0, max_len], as an array or a list."""
    _LENGTHS(lengths=np.asarray(lengths), max_len=max_len)


_LENGTHS = Contract(dict(lengths="int (B?,) <= max_len", max_len="int"), [], np.ndarray)


def params_of(params, x, names, shape_of, owner) -> None:
    """A dict of `owner.numpy_params()`: every name, an array of x's dtype of shape_of(name),
    finite."""
    missing = [n for n in names if n not in params] if isinstance(params, dict) else names
    if missing:
        fail("params", f"a dict with {', '.join(names)} ({owner}.numpy_params())",
             f"a dict without {missing}" if isinstance(params, dict) else describe(params))
    for name in names:
        given, want = params[name], shape_of(name)
        if not isinstance(given, np.ndarray) or given.shape != want or given.dtype != x.dtype:
            fail(f"params['{name}']", f"a {x.dtype} array {shape_str(want)}", describe(given))
        check_finite(f"params['{name}']", given)


def mha_params(params, query) -> None:
    """(D, D) weights and (D,) biases for query's width D."""
    D = query.shape[-1]
    params_of(params, query, ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"),
              lambda n: (D, D) if n[0] == "w" else (D,), "MultiHeadAttention")


def mha_masks(query, key, value, num_heads, mask=None, key_padding_mask=None) -> None:
    """`mask` (Lq, Lk) shared by the batch, or 4 axes broadcastable to (B, H, Lq, Lk);
    key_padding_mask (B, Lk). When B == Lq a (B, Lk) padding mask has the very shape of an
    (Lq, Lk) mask and would be read as one: a 2-axis mask is refused then, and a 3-axis one
    always ((B, Lq, Lk) and (H, Lq, Lk) cannot be told apart). Then `seen_finite`."""
    key = query if key is None else key  # the body's defaults: then Lk is the key's length
    value = key if value is None else value
    B, Lq, Lk = query.shape[0], query.shape[1], key.shape[1]
    keys = f"Lk = {Lk} positions, the key's (the query's when key=None)"
    if value.shape[-2] != Lk:
        fail("value", keys, describe(value))
    if key_padding_mask is not None and key_padding_mask.shape[-1] != Lk:
        fail("key_padding_mask", keys, describe(key_padding_mask))
    if mask is not None and mask.shape[-1] not in (1, Lk):
        fail("mask", keys, describe(mask))
    if mask is not None and (mask.ndim == 3 or mask.ndim == 2 and B == Lq > 1):
        fail("mask", "(Lq, Lk) written as mask[None, None] when B == Lq, 4 axes (B, H, Lq, Lk) "
             "(1 where shared), or a (B, Lk) padding mask as key_padding_mask=",
             f"an ambiguous {mask.ndim}-axis mask {shape_str(mask.shape)} with B={B}, "
             f"H={num_heads}, Lq={Lq}")
    if key_padding_mask is not None:
        padding = key_padding_mask[:, None, None, :]
        mask = padding if mask is None else mask & padding
    seen_finite(query, key, value, mask, ("query", "key", "value"))


def mha_module_call(self, query, key=None, value=None, mask=None, need_weights=False,
                    key_padding_mask=None) -> None:
    """`MultiHeadAttention.forward`; need_weights only with the built-in kernel."""
    if need_weights and self.attend is not None:
        fail("need_weights", "False with a custom attend kernel", f"True with {self.attend}")
    mha_masks(query, key, value, self.num_heads, mask, key_padding_mask)


def torch_mha_module(self, mha) -> None:
    """An nn.MultiheadAttention of the same width, heads and bias setting."""
    if not isinstance(mha, torch.nn.MultiheadAttention):
        fail("mha", "a torch.nn.MultiheadAttention", describe(mha))
    ours = (self.d_model, self.num_heads, self.q_proj.bias is not None)
    theirs = (mha.embed_dim, mha.num_heads, mha.in_proj_bias is not None)
    if ours != theirs:
        fail("mha", f"(embed_dim, num_heads, bias) = {ours}", str(theirs))


POSITIONS = ("none", "sinusoid", "learned")


def sinusoid_positions(positions, d_model) -> None:
    if positions == "sinusoid" and d_model % 2:
        fail("d_model", "an even integer (a sine and a cosine per frequency)", describe(d_model))


# ==================== sparse (lesson 02): minattn/sparse.py, fast/sparse.py, fast/flex.py
# `check_windows`, `check_global_idx` and `check_layout` also serve the fast paths' caches,
# which read what they return.
def check_windows(windows, num_heads: int | None = None) -> list[int]:
    """One integer ω >= 0 per head; with num_heads, exactly that many."""
    ws = list(windows) if isinstance(windows, (list, tuple)) else as_numpy(windows)
    ws = list(ws.reshape(-1)) if isinstance(ws, np.ndarray) and ws.ndim <= 1 else ws
    if not isinstance(ws, list) or not ws or any(  # a 2-d array stays an array: refused
            isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, np.integer)) or w < 0
            for w in ws):
        fail("windows", "one integer window ω >= 0 per head", repr(windows))
    if num_heads is not None and len(ws) != num_heads:
        fail("windows", f"one window per head, {num_heads}", f"{len(ws)}: {list(map(int, ws))}")
    return [int(w) for w in ws]


def check_global_idx(global_idx, n: int) -> np.ndarray:
    """Global positions as a sorted int array of distinct values in [0, n)."""
    given = as_numpy(global_idx if global_idx is not None else [])
    idx = given.astype(np.int64).reshape(-1)
    if given.size and (given.dtype.kind not in "iu" or idx.min() < 0 or idx.max() >= n
                       or np.unique(idx).size != idx.size):
        fail("global_idx", f"distinct integer positions in [0, {n})", describe(given))
    return np.sort(idx)


def check_layout(layout, block: int, n: int) -> np.ndarray:
    """A block layout as a contiguous (nb, nb) bool NumPy array, nb = ceil(N / block)."""
    check_size("block", block, 1)
    layout, nb = as_numpy(layout), -(-n // block)
    if layout.dtype != np.bool_ or layout.shape != (nb, nb):
        fail("layout", f"bool ({nb}, {nb}) for N={n}, block={block}", describe(layout))
    return np.ascontiguousarray(layout)


def global_positions_of(q=None, n=None, global_idx=None) -> None:
    """Global positions: distinct integers in [0, N), N = n or q's length (a list, an array or
    a tensor); where neither is given (`window_attend`), a 1-d integer array."""
    if global_idx is None:
        return
    if q is None and n is None:
        idx = as_numpy(global_idx)
        check_array("global_idx", idx, "int" if idx.size else None, ndim=1, hint="positions",
                    like=np.ndarray)
    else:
        check_global_idx(global_idx, n if q is None else q.shape[-2])


def layout_fits(layout, block, n) -> None:
    check_layout(layout, block, n)


def layout_one_or_per_head(layout) -> None:
    """`block_sparse_attend`: one bool layout (nb, nb) or one per head (H, nb, nb)."""
    layout = as_numpy(layout)
    check_array("layout", layout, "bool", hint="(nb, nb) or (H, nb, nb)", like=np.ndarray)
    if layout.ndim not in (2, 3):
        fail("layout", "bool (nb, nb) or (H, nb, nb)", describe(layout))


def layout_seen_finite(q, k, v, layout, block, causal=False) -> None:
    """A block layout that fits q's length N; q, k, v finite where the layout lets them count
    (not the queries of block rows that see no block, nor the keys of block columns no query
    sees; under causal, row I sees block J only when J <= I)."""
    n = q.shape[-2]
    seen = check_layout(layout, block, n)
    seen = np.tril(seen) if causal else seen

    def seen_by(axis):  # (N, 1): the query sees some key (axis 1), some query sees the key (0)
        where = np.repeat(seen.any(axis), block)[:n, None]
        return torch.as_tensor(where, device=q.device) if isinstance(q, torch.Tensor) else where
    for name, x, axis in (("q", q, 1), ("k", k, 0), ("v", v, 0)):
        check_finite(name, x, where=lambda axis=axis: seen_by(axis))


def square_masks(masks) -> None:
    """At least one (N, N) bool NumPy mask, all of one shape."""
    if not masks:
        fail("masks", "at least one (N, N) mask", "none")
    for m in masks:
        check_array("masks", m, "bool", ndim=2, like=np.ndarray, hint="(N, N)")
        if m.shape != masks[0].shape or m.shape[0] != m.shape[1]:
            fail("masks", f"square bool (N, N) masks of one shape {shape_str(masks[0].shape)}",
                 describe(m))


def windows_given(windows) -> None:
    check_windows(windows)


def kernels_per_layer(attend, layers) -> None:
    """`SparseClassifier`: one attend kernel for every layer, or a list of one per layer."""
    if isinstance(attend, (list, tuple)) and len(attend) != layers:
        fail("attend", f"one kernel per layer ({layers})", f"{len(attend)} kernels")


# ==================== multiscale (lesson 03): minattn/multiscale.py, fast/multiscale.py
def windows_per_head(q=None, k=None, v=None, windows=None, mask=None, self=None) -> None:
    """One window ω >= 0 per head (of q (B, H, N, d), or of a kernel `self`); q, k, v finite
    where the mask lets them count."""
    heads = q.shape[1] if q is not None else None if self is None else len(self.windows)
    check_windows(windows, heads)
    if q is not None:
        seen_finite(q, k, v, mask)


def weights_of_real_queries(weights, query_mask=None) -> None:
    """`measured_scale_*`: weights >= 0 and finite for the real queries (the padded ones may
    hold anything: the function selects them away)."""
    weights_where(weights, None if query_mask is None else query_mask[:, None, :, None])


def weights_where(weights, keep) -> None:
    """Attention weights finite and >= 0 where `keep` (bool, broadcastable; None: everywhere)
    is True."""
    check_finite("weights", weights, where=keep)
    negative = weights < 0 if keep is None else (weights < 0) & keep
    if bool(negative.any()):
        fail("weights", "attention weights >= 0", f"{int(negative.sum())} negative values")


def check_head_counts(counts, scales: int | None = None) -> np.ndarray:
    """Head counts per layer and scale: an (L, K) integer array >= 0 (K = scales if given)."""
    counts = as_numpy(counts)
    if counts.ndim != 2 or scales is not None and counts.shape[1] != scales \
            or counts.dtype.kind not in "iu" or (counts < 0).any():
        fail("counts", f"integer head counts >= 0 (L, {scales or 'K'}) per layer and scale",
             describe(counts))
    return counts


def check_classifier_inputs(inputs, lengths, embedding, weight, max_len=None) -> None:
    """The inputs of lesson 03's classifiers: (B, N) token ids of the nn.Embedding `embedding`,
    or without one (B, N, d_in) vectors of the dtype and width of the first layer's `weight`
    (·, d_in); lengths None or (B,) integers in 1..N (a sentence has at least one token);
    N <= max_len where there is one."""
    if isinstance(embedding, torch.nn.Embedding):
        _TOKEN_IDS(inputs=inputs, embedding=embedding, lengths=lengths)
    elif embedding is None:
        _VECTORS(weight=weight, inputs=inputs, lengths=lengths)
    elif 0 in inputs.shape[:2]:
        fail("inputs", "at least one sequence of at least one token", describe(inputs))
    if max_len is not None and inputs.shape[1] > max_len:
        fail("inputs", f"N <= max_len = {max_len}", f"N = {inputs.shape[1]}")
    if lengths is not None and lengths.numel() and int(lengths.min()) < 1:
        fail("lengths", "integers in 1..N", f"{describe(lengths)} from {int(lengths.min())}")


_TOKEN_IDS = Contract(dict(inputs="int (B, N) < embedding", lengths="int? (B,) <= N"), (),
                      torch.Tensor, ("inputs", "lengths", "embedding"))
_VECTORS = Contract(dict(weight="float?* (h, d_in)", inputs="float (B, N, d_in)",
                         lengths="int? (B,) <= N"), (), torch.Tensor)


def heads_counts(counts, scales) -> None:
    """`layer_windows`: K windows ω >= 0 and (L, K) integer head counts >= 0."""
    check_head_counts(counts, len(check_windows(scales)))


def five_scale_counts(counts) -> None:
    """ScaleAllocation: (L, 5) head counts >= 0, every layer with one number of heads >= 1."""
    counts = check_head_counts(counts, 5)
    if len(set(counts.sum(1).tolist())) != 1 or counts.sum(1)[0] < 1:
        fail("counts", "(L, 5) head counts whose rows have one sum >= 1", f"{counts.tolist()}")


def layers_of_windows(windows) -> None:
    """MultiScaleTransformer: at least one layer of windows (a list of per-layer lists, every
    layer with the same number of heads), or a ScaleAllocation (which has its own check)."""
    if hasattr(windows, "counts"):
        return
    if not windows or not isinstance(windows, (list, tuple)):
        fail("windows", "a list of per-layer windows, at least one layer", describe(windows))
    heads = len(check_windows(windows[0]))
    for ws in windows:
        check_windows(ws, heads)


def model_inputs(self, inputs, lengths=None) -> None:
    """MultiScaleTransformer.forward: its embedding, first layer and max_len."""
    check_classifier_inputs(inputs, lengths, self.embedding, self.input.weight, self.max_len)


def band_kernel(q) -> None:
    if q.device.type != "cpu":
        fail("q", "tensors on the CPU (PyTorch's fused CPU attention)", describe(q))


# ==================== xl (lesson 04): minattn/xl.py, fast/xl.py
def relative_keys(q, k, r) -> None:
    """The Lq queries are the last Lq of the Lk keys; the relative-position table r (H, P, dh)
    holds a finite row for every distance 0 .. Lk − 1 (rows past Lk are never read)."""
    Lk = k.shape[2]
    if q.shape[2] > Lk:
        fail("k", f"at least Lq = {q.shape[2]} keys (the queries are the last Lq positions)",
             describe(k))
    if r.shape[1] < Lk:
        fail("r", f"at least Lk = {Lk} distances (0 .. {Lk - 1})", describe(r))
    check_finite("r", r[:, :Lk])


def rel_params(params, x, num_heads) -> None:
    """(D, D) weights and (H, dh) biases for x's width D; num_heads splits an even D."""
    D = x.shape[-1]
    if D % num_heads or D % 2:
        fail("num_heads", f"a divisor of an even D = {D}", describe(num_heads))
    params_of(params, x, ("w_q", "w_k", "w_v", "w_r", "w_o", "u_bias", "v_bias"),
              lambda n: (D, D) if n[0] == "w" else (num_heads, D // num_heads),
              "RelMultiHeadAttention")


def rel_layer_call(self, x, memory) -> None:
    """`RelMultiHeadAttention.forward`: M + L within its max_len."""
    n_keys = x.shape[1] + (0 if memory is None else memory.shape[1])
    if n_keys > self.max_len:
        fail("memory", f"M + L <= max_len = {self.max_len} positions", f"M + L = {n_keys}")


def xl_memories(self, tokens, memories=None) -> None:
    """`TransformerXL.forward`: memories None (the start of a text) or one (B, M, D) tensor or
    None per layer, as the last call returned them."""
    n_layers, B, D = len(self.layers), tokens.shape[0], self.d_model
    if memories is not None and (not isinstance(memories, (list, tuple))
                                 or len(memories) != n_layers):
        fail("memories", f"a list with one memory per layer ({n_layers}), or None",
             describe(memories))
    for memory in memories or ():
        if memory is not None and (not isinstance(memory, torch.Tensor) or memory.ndim != 3
                                   or memory.shape[0] != B or memory.shape[2] != D):
            fail("memories", f"None or (B, M, D) = ({B}, M, {D}) tensors", describe(memory))


def official_state(state, num_heads) -> None:
    """`official_to_ours`: an original Transformer-XL state dict (div_val=1, d_head = D / H,
    tied or untied r_w_bias / r_r_bias of shape (H, dh))."""
    if not isinstance(state, dict) or "word_emb.emb_layers.0.weight" not in state:
        keys = sorted(state)[:4] if isinstance(state, dict) else describe(state)
        fail("state", "an original Transformer-XL state dict ('word_emb.emb_layers.0.weight')",
             f"keys {keys}…")
    if any(k.startswith("word_emb.emb_projs") or k.startswith("crit.out_projs") for k in state):
        fail("state", "div_val=1, d_embed = d_model", "emb_projs / out_projs in the state dict")
    D = state["word_emb.emb_layers.0.weight"].shape[1]
    dh = D // num_heads
    for key, value in state.items():
        if key.endswith("dec_attn.qkv_net.weight") and tuple(value.shape) != (3 * D, D):
            fail(f"state['{key}']", f"{shape_str((3 * D, D))}", shape_str(value.shape))
        if key.endswith(("r_w_bias", "r_r_bias")) and tuple(value.shape) != (num_heads, dh):
            fail(f"state['{key}']", f"(H, dh) = ({num_heads}, {dh})", shape_str(value.shape))
    for n in {k.split(".")[1] for k in state if k.startswith("layers.")}:
        for old in ("r_w_bias", "r_r_bias"):
            if f"layers.{n}.dec_attn.{old}" not in state and old not in state:
                fail(f"state['{old}']", f"(H, dh) = ({num_heads}, {dh})", "missing")


def decoder_model(model, context) -> None:
    """`XLDecoder(model, context, batch)`: layers that hold context + 1 positions."""
    if type(model).__name__ != "TransformerXL":
        fail("model", "a minattn.xl.TransformerXL", type(model).__name__)
    for layer in model.layers:
        if context + 1 > layer.attention.max_len:
            fail("context", f"context + 1 <= max_len = {layer.attention.max_len}",
                 f"context + 1 = {context + 1}")


def decoder_on_cuda(self) -> None:
    if self.device.type != "cuda":
        fail("XLDecoder.capture", "a model on a CUDA device", str(self.device))


# ==================== lstm_attention (lesson 05): minattn/lstm_attention.py
def state_pair(state=None) -> None:
    if state is not None and (not isinstance(state, (tuple, list)) or len(state) != 2):
        fail("state", "None or a pair (h, c) of (B, H) arrays", describe(state))


# ==================== ibm1 (lesson 06): minattn/ibm1.py, fast/ibm1.py
# A corpus pairs up its sentences, a table belongs to its corpus (the bitext's vocabularies; on
# the fast path one value per stored entry), probabilities and counts are >= 0.
def corpus_pairs(sources, targets) -> None:
    """`index_bitext`: the sides pair up (sentences are checked while they are indexed)."""
    sources, targets = list(sources), list(targets)
    if len(sources) != len(targets):
        fail("targets", "as many target sentences as source sentences",
             f"{len(targets)} targets for {len(sources)} sources")
    if len(sources) == 0:
        fail("sources", "at least one sentence pair", "0 pairs")


def check_sentences(side: str, sentences) -> None:
    """Every sentence of one side must be a non-empty list of tokens (not a string)."""
    for m, sent in enumerate(sentences):
        if isinstance(sent, str) or not hasattr(sent, "__len__") or len(sent) == 0:
            fail(f"{side}s", f"{side} sentence {m} as a non-empty list of tokens, e.g. s.split()",
                 describe(sent))


def corpus(sources, targets) -> None:
    """`make_bitext`: pairs of non-empty token lists."""
    corpus_pairs(sources, targets)
    check_sentences("source", list(sources))
    check_sentences("target", list(targets))


def check_nonnegative(name: str, t) -> None:
    """Probabilities and counts are finite and >= 0 (a negative entry makes a posterior
    meaningless): one min and one max read them (NaN passes neither test)."""
    if isinstance(t, torch.Tensor):
        if t.numel() == 0:
            return
        low, high = torch.aminmax(t.detach())
    elif t.size == 0:
        return
    else:
        low, high = np.minimum.reduce(t, axis=None), np.maximum.reduce(t, axis=None)
    low, high = float(low), float(high)
    if not (low >= 0 and high < math.inf):
        check_finite(name, t)
        fail(name, "values >= 0 (probabilities or counts)", f"a minimum of {low} in {describe(t)}")


_ABSENT = object()  # the default of a rule's argument the function does not have


def table_fits(bitext=_ABSENT, indexed=_ABSENT, t=None, counts=None, values=None, mode=None,
               floor=_ABSENT, m=None, x=_ABSENT, words=_ABSENT) -> None:
    """The corpus: from make_bitext (or index_bitext for `indexed`); a table of it (t, counts,
    values), finite and >= 0: (V_x, V_y) for a bitext, one value per stored entry (E,) for an
    indexed one; NLTK's mode needs the NULL word; floor in [0, 1]; m a pair of the corpus (t
    gives each of its target tokens some probability), x and words of its source vocabulary."""
    name, table = ("t", t) if t is not None else ("counts", counts) if counts is not None \
        else ("values", values)
    corpus = bitext if indexed is _ABSENT else indexed
    if corpus is not _ABSENT:
        kinds = ("Bitext", "IndexedBitext") if indexed is _ABSENT else ("IndexedBitext",)
        if type(corpus).__name__ not in kinds:
            fail("bitext" if indexed is _ABSENT else "indexed", f"a corpus from {kinds[-1]} "
                 "(make_bitext; index_bitext in minattn.fast.ibm1)", describe(corpus))
    if table is not None and corpus is not _ABSENT:
        shape = (len(corpus.src_vocab), len(corpus.tgt_vocab)) if indexed is _ABSENT else \
            (len(corpus.entry_src),)
        if table.shape != shape:
            fail(name, f"{shape_str(shape)}, " + ("(V_x, V_y)" if indexed is _ABSENT else
                 "one value per stored entry") + " of this corpus", describe(table))
    if table is not None:
        check_nonnegative(name, table)
    if mode == "nltk" and not corpus.null:
        fail("mode", "'textbook' without the NULL word (make_bitext(..., null=True))",
             "mode='nltk' and null=False")
    if floor is not _ABSENT:
        check_number("floor", floor, low=0.0, high=1.0)
    if m is not None:
        n_pairs = corpus.n_pairs if indexed is _ABSENT else len(indexed.src_start) - 1
        if m >= n_pairs:
            fail("m", f"a pair index in [0, {n_pairs})", describe(m))
        if t is not None and indexed is _ABSENT:
            src, tgt = bitext.pair(m)
            if not (t[np.ix_(src, tgt)].sum(axis=0) > 0).all():
                check_covered(t, -np.inf)
    if x is not _ABSENT and x not in corpus.src_index:
        fail("x", "a word of the source vocabulary", repr(x))
    if words is not _ABSENT:
        unknown = [] if isinstance(words, str) else [w for w in words if w not in corpus.src_index]
        if isinstance(words, str) or unknown:
            fail("words", "a list of words of the source vocabulary",
                 describe(words) if isinstance(words, str) else f"unknown words {unknown[:5]}")


def check_covered(t, loglik) -> None:
    """After an E-step: a log-likelihood of -inf or NaN means some target token had
    probability 0 under t from every word of its source sentence: its posterior 0/0 is
    undefined."""
    if not np.isfinite(float(loglik)):
        fail("t", "a table that gives every target token some probability from its source "
             "sentence", f"a log-likelihood of {float(loglik)} ({describe(t)}, "
             f"{int((t > 0).sum())} entries > 0)")


def bitext_without_null(bitext) -> None:
    """The proxy has no NULL word."""
    table_fits(bitext)
    if bitext.null:
        fail("bitext", "make_bitext(..., null=False) (the proxy has no NULL word)", "null=True")


# ==================== task_heads (lesson 07): minattn/task_heads.py, fast/task_heads.py
# Token states (B, L, D) of a frozen encoder come right-padded (mask (B, L) bool, True on real
# tokens), every sentence with its first token ([CLS]) real; the heads select padding away.
def check_right_padded(mask, name: str = "mask") -> None:
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        fail(name, "right-padded rows 1…1 0…0 (real tokens first)",
             "a row with padding before a real token")


def right_padded(mask=None, a_mask=None, b_mask=None) -> None:
    """Each mask given right-padded (1…1 0…0), with its first token real."""
    for name, m in (("mask", mask), ("a_mask", a_mask), ("b_mask", b_mask)):
        if m is not None and not bool(m[:, 0].all()):
            fail(name, "every sentence with its first token real",
                 "a row whose first token is padding")
        if m is not None:
            check_right_padded(m, name)


def real_token_weights(weights, mask) -> None:
    """`attention_entropy_ratio`: read-out weights (B, H, L) finite and >= 0 on the real
    tokens of mask (B, L) (padding may hold anything: the function selects it away)."""
    weights_where(weights, mask[:, None, :])


def one_later_token_each(mask, index) -> None:
    """`drop_token`: one index per sentence, of a real token other than the first."""
    index, lengths = torch.as_tensor(index).reshape(-1).cpu(), mask.sum(dim=1).cpu()
    if len(index) != len(mask) or bool(((index < 1) | (index >= lengths)).any()):
        fail("index", f"one real token per sentence, not the first: {len(mask)} indices in "
             "[1, length)", f"{index.tolist()} for lengths {lengths.tolist()}")


def three_real_tokens_each(mask) -> None:
    """`token_picks`: every sentence of 3 real tokens or more (the first is never picked, and
    the random pick needs a token other than the top one)."""
    lengths = mask.sum(dim=1)
    if bool((lengths < 3).any()):
        fail("mask", "sentences of 3 tokens or more (token_picks)",
             f"lengths {lengths.tolist()}")


def token_scores(rarity, mask) -> None:
    """`token_picks`: rarity a float score per token, shaped like mask (B, L), finite on the
    real tokens; any float dtype (only its order is read, in float64)."""
    check_array("rarity", rarity, "float", 2, "(B, L)", like=torch.Tensor)
    if rarity.shape != mask.shape:
        fail("rarity", f"a score per token, shaped like mask {shape_str(mask.shape)}",
             describe(rarity))
    check_finite("rarity", rarity, where=mask)


def layers_given(layers) -> None:
    if not layers or not isinstance(layers, (list, tuple)):
        fail("layers", "a non-empty list of layer params", describe(layers))


def attention_layer(mha) -> None:
    """A minattn MultiHeadAttention (its four projections), told by what it holds."""
    if not isinstance(mha, torch.nn.Module) or not all(
            hasattr(mha, p) for p in ("q_proj", "k_proj", "v_proj", "out_proj", "num_heads")):
        fail("mha", "a minattn MultiHeadAttention", describe(mha))


# ==================== agreement (lesson 08): minattn/agreement.py
def b0_number(b0) -> None:
    """A read-out bias: a number, or a 0-d tensor (a module's bias, not read here)."""
    if not (isinstance(b0, torch.Tensor) and b0.ndim == 0):
        check_number("b0", b0)


def real_position_per_row(a, b, mask=None) -> None:
    """At least one real position in every row; a and b finite there."""
    if mask is not None:
        mask = mask.expand(a.shape) if isinstance(a, torch.Tensor) else \
            np.broadcast_to(mask, a.shape)
        if not bool(mask.any(-1).all()):
            fail("mask", "at least one real position in every row", "a row with none")
    check_finite("a", a, where=mask)
    check_finite("b", b, where=mask)


def score_rows(a, b, mask=None) -> None:
    """`agreement_np`: a, b anything np.asarray turns into floats (..., N) of one shape, mask
    None or bool broadcastable to them; then `real_position_per_row`."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.ndim < 1 or a.shape[-1] == 0:
        fail("b", f"scores (..., N) of a's shape {shape_str(a.shape)}", describe(b))
    shape = np.shape(mask)
    if mask is not None and (np.asarray(mask).dtype != np.bool_ or len(shape) > a.ndim or any(
            s not in (1, t) for s, t in zip(reversed(shape), reversed(a.shape)))):
        fail("mask", f"bool broadcastable to {shape_str(a.shape)}", describe(mask))
    real_position_per_row(a, b, None if mask is None else np.asarray(mask))


def lengths_at_least_one(lengths) -> None:
    n = np.asarray(lengths)
    if n.size == 0 or n.dtype.kind not in "iu" or (n < 1).any():
        fail("lengths", "a non-empty list of integer lengths >= 1", repr(lengths))


def curves_of_one_length(agreements, performances) -> None:
    """Two non-empty lists of numbers of one length."""
    if len(agreements) != len(performances) or not len(agreements):
        fail("performances", "a non-empty list as long as agreements",
             f"{len(performances)} values for {len(agreements)} agreements")
    for name, values in (("agreements", agreements), ("performances", performances)):
        for value in values:
            check_number(name, value)


def masks_counted(a=None, key_mask=None, row_mask=None, shape=None) -> None:
    """key_mask (M, N) or (M, T, N) and row_mask (M, T) bool (None: every position, every
    row; T = 1 without a and row_mask) that fit a (..., M, T, N); at least one counted row."""
    if a is None and shape is None:
        keys = np.asarray(key_mask)
        if keys.ndim not in (2, 3):
            fail("key_mask", "a bool array (M, N) or (M, T, N)", describe(key_mask))
        T = keys.shape[1] if keys.ndim == 3 else 1 if row_mask is None else np.shape(row_mask)[-1]
        shape = (keys.shape[0], T, keys.shape[-1])
    M, T, N = a.shape[-3:] if a is not None else shape
    keys = np.ones((M, N), bool) if key_mask is None else np.asarray(key_mask)
    rows = np.ones((M, T), bool) if row_mask is None else np.asarray(row_mask)
    keys = keys[:, None, :] if keys.ndim == 2 else keys
    if keys.dtype != bool or rows.dtype != bool or keys.shape not in ((M, T, N), (M, 1, N)) \
            or rows.shape != (M, T) or not rows.any():
        fail("key_mask, row_mask", f"bool key_mask (M, N) or (M, T, N) and row_mask (M, T) "
             f"with M, T, N = {M}, {T}, {N} and at least one counted row",
             f"{describe(key_mask)} and {describe(row_mask)}")


def runs_of_one_shape(gold, others, uniform, key_mask=None, row_mask=None) -> None:
    """Runs (dicts of "alpha", "beta" (C, M, T, N) and "perf" (C,)) of one shape, at least
    one re-seeded run in others; the masks as `masks_counted` takes them."""
    if not others:
        fail("others", "at least one re-seeded standard run", "none")
    shape, C = np.shape(gold["alpha"]), len(gold["perf"])
    for run in [gold, *others, uniform]:
        if np.shape(run["alpha"]) != shape or np.shape(run["beta"]) != shape or \
                len(run["perf"]) != C or len(shape) != 4 or shape[0] != C:
            fail("others", f"runs with alpha and beta (C, M, T, N) = {shape_str(shape)} and "
                 f"perf ({C},), as gold", f"alpha {shape_str(np.shape(run['alpha']))}, "
                 f"beta {shape_str(np.shape(run['beta']))}, perf ({len(run['perf'])},)")
    masks_counted(None, key_mask, row_mask, shape[1:])


def prefix_mask(self, x, mask=None) -> None:
    """`AttentionClassifier.states`: a mask True on a prefix."""
    if mask is not None and not torch.equal(
            mask, torch.arange(x.shape[1], device=x.device) < mask.sum(1, keepdim=True)):
        fail("mask", "True on a prefix of each row (padding at the end)", describe(mask))


# ==================== encoder (lessons 03, 07): minattn/encoder.py
def encoder_ids(self, input_ids, attention_mask, token_type_ids=None) -> None:
    """`MiniLMEncoder.run`: int64 ids, no more than the position table holds, a right-padded
    bool or 0/1 attention_mask."""
    if input_ids.dtype != torch.long:
        fail("input_ids", "(B, L) int64", describe(input_ids))
    if attention_mask.is_floating_point() or attention_mask.dtype != torch.bool and \
            bool(((attention_mask != 0) & (attention_mask != 1)).any()):
        fail("attention_mask", "bool, or integers 0/1 (1 = real token)", describe(attention_mask))
    if input_ids.shape[1] > self.config.max_position_embeddings:
        fail("input_ids", f"L <= {self.config.max_position_embeddings} (the position table)",
             describe(input_ids))
    check_right_padded(attention_mask.bool(), "attention_mask")


def check_texts(texts) -> None:
    """A non-empty list of sentences (str) or of (a, b) pairs of them."""
    if isinstance(texts, (str, tuple)) or not texts or not all(
            isinstance(t, str) or isinstance(t, tuple) and len(t) == 2
            and all(isinstance(s, str) for s in t) for t in texts):
        fail("texts", "a non-empty list of strings or of (a, b) pairs of strings",
             repr(texts)[:60] if not isinstance(texts, list) else f"list of {len(texts)}")
