"""A check only refuses: the undecorated body of every public function, run on valid input,
computes what the decorated call does.

`@checked(...)` runs its specs and rules on a call's arguments and then the function on the
arguments as given. Defaults (`key = query`, a model's `mem_len`), masks folded together and
what a mask hides set to 0 are lines of the body, so `fn.__wrapped__` (what a student copies
into a notebook) runs alone. Below: the decorated functions of the mechanism files and minattn/fast,
found by walking the modules, and a table of valid calls covering every one of them (but those
of WITHOUT_A_CALL, which have no call on the CPU), each compared with its undecorated body.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

import numpy as np
import pytest
import torch

import minattn.fast
from minattn.contract import checked

MECHANISMS = ("attention", "sparse", "multiscale", "xl", "lstm_attention", "ibm1", "task_heads",
              "agreement", "encoder")
MODULES = [f"minattn.{m}" for m in MECHANISMS] + \
    [f"minattn.fast.{m.name}" for m in pkgutil.iter_modules(minattn.fast.__path__)]


@functools.cache  # one walk (10 ms) for the 200 cases below
def decorated() -> dict:
    """'module.function' or 'module.Class.method' -> the decorated function, for every public
    function and method of MODULES that `@checked` wraps."""
    found = {}
    for name in MODULES:
        module = importlib.import_module(name)
        short = name.removeprefix("minattn.")
        for attr, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == name:
                for method, fn in vars(value).items():
                    if hasattr(fn, "check") and hasattr(fn, "__wrapped__"):
                        found[f"{short}.{attr}.{method}"] = fn
            elif callable(value) and hasattr(value, "check") and value.__module__ == name:
                found[f"{short}.{attr}"] = value
    return found


def same(a, b) -> bool:
    """Equal results: arrays and tensors element for element (NaN equal to NaN), containers
    item by item, modules by their parameters and buffers."""
    if isinstance(a, torch.nn.Module):
        sa, sb = a.state_dict(), b.state_dict()
        return sa.keys() == sb.keys() and all(same(sa[k], sb[k]) for k in sa) and \
            same({k: v for k, v in vars(a).items() if not k.startswith("_")},
                 {k: v for k, v in vars(b).items() if not k.startswith("_")})
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and \
            bool(torch.equal(a.nan_to_num(), b.nan_to_num()))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, np.asarray(b), equal_nan=a.dtype.kind == "f")
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if callable(a):
        return getattr(a, "__name__", None) == getattr(b, "__name__", None)
    return a == b or (a != a and b != b)


def R(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def T(*shape, seed=0):
    return torch.as_tensor(R(*shape, seed=seed))


def garbage(x, keep):
    """x with NaN wherever `keep` (broadcastable) is False: what a mask hides may hold it."""
    if isinstance(x, torch.Tensor):
        return torch.where(keep, x, torch.tensor(float("nan"), dtype=x.dtype))
    return np.where(keep, x, np.nan)


def calls():
    """(name, function of the decorated function -> its result) for valid calls: one or more
    for every function `decorated()` finds, but those of WITHOUT_A_CALL."""
    from minattn import agreement as AG
    from minattn import attention as A
    from minattn import encoder as E
    from minattn import ibm1 as I
    from minattn import lstm_attention as LA
    from minattn import multiscale as MS
    from minattn import sparse as S
    from minattn import task_heads as TH
    from minattn import xl as X
    from minattn.fast import ibm1 as FI
    from minattn.fast import xl as FX

    pad = np.array([[True] * 5, [True] * 3 + [False] * 2])  # (B=2, N=5) key padding
    q, k, v = R(2, 4, 3), R(2, 5, 3, seed=1), R(2, 5, 2, seed=2)
    mask = np.broadcast_to(pad[:, None, :], (2, 4, 5)).copy()
    mask[1, 3] = False  # a query row that sees no key
    kh, vh = garbage(k, pad[..., None]), garbage(v, pad[..., None])
    qh = garbage(q, mask.any(-1)[..., None])
    tq, tk, tv, tm = (torch.as_tensor(x) for x in (qh, kh, vh, mask))
    x = T(2, 5, 8)
    key_pad = torch.as_tensor(pad)
    yield "attention.attention_np", lambda f: f(qh, kh, vh, mask)
    yield "attention.attention_torch", lambda f: f(tq, tk, tv, tm)
    yield "attention.online_attention_np", lambda f: f(qh, kh, vh, mask, block=2)
    yield "attention.online_attention_torch", lambda f: f(tq, tk, tv, tm, block=2)
    yield "attention.attention_backward_np", lambda f: f(R(2, 4, 2, seed=3), qh, kh, vh, mask)
    yield "fast.attention.attention_fast_torch", lambda f: f(tq, tk, tv, tm)
    yield "attention.padding_mask_np", lambda f: f([3, 5], 5)
    yield "attention.split_heads_np", lambda f: f(R(2, 5, 8), 2)
    scores = garbage(R(2, 4, 5, seed=3), mask)  # what the mask hides may hold NaN
    yield "attention.softmax_np", lambda f: f(scores, mask)
    yield "attention.softmax_torch", lambda f: f(torch.as_tensor(scores), tm)
    additive = (R(6, 3, seed=3), R(6, 2, seed=4), R(6, seed=5))  # w_q, w_k, v_a: dq != dk
    yield "attention.additive_scores_np", lambda f: f(q, R(2, 5, 2), *additive)
    yield "attention.additive_scores_torch", \
        lambda f: f(T(2, 4, 3), T(2, 5, 2), *(torch.as_tensor(w) for w in additive))
    yield "attention.merge_heads_np", lambda f: f(R(2, 2, 5, 4))
    yield "attention.causal_mask_np", lambda f: f(3, 5)
    yield "attention.sinusoid_np", lambda f: f(6, 8, clamp_len=3)
    yield "attention.split_heads_torch", lambda f: f(x, 2)
    yield "attention.merge_heads_torch", lambda f: f(T(2, 2, 5, 4))
    yield "attention.causal_mask_torch", lambda f: f(3, 5)
    yield "attention.padding_mask_torch", lambda f: f(torch.tensor([3, 5]), 5)
    yield "attention.sinusoid_torch", lambda f: f(6, 8, dtype=torch.float64, clamp_len=3)
    torch.manual_seed(0)
    mha = A.MultiHeadAttention(8, 2).double()
    xh = garbage(x, key_pad[..., None])
    yield "attention.MultiHeadAttention.forward", lambda f: f(mha, x)
    yield "attention.MultiHeadAttention.forward", \
        lambda f: f(mha, x, xh, xh, key_padding_mask=key_pad, need_weights=True)
    params = mha.numpy_params()
    yield "attention.multi_head_attention_np", \
        lambda f: f(x.numpy(), xh.numpy(), xh.numpy(), params, 2, key_padding_mask=pad)
    yield "attention.MultiHeadAttention.__init__", lambda f: built(A.MultiHeadAttention, f, 8, 2)
    yield "attention.MultiHeadAttention.load_from_torch", \
        lambda f: f(A.MultiHeadAttention(8, 2), torch.nn.MultiheadAttention(8, 2))
    recall = A.RecallAttention(6, 5, d_model=8, num_heads=2).double()
    mean_pool = A.RecallMeanPool(6, 5, d_model=8).double()
    asked, keys, values = torch.tensor([[1, 2]] * 2), torch.tensor([[2, 1, 5]] * 2), \
        torch.tensor([[0, 4, 3]] * 2)
    yield "attention.RecallAttention.forward", \
        lambda f: f(recall, asked, keys, values, need_weights=True)
    yield "attention.RecallMeanPool.forward", lambda f: f(mean_pool, asked, keys, values)
    yield "attention.PositionReader.__init__", \
        lambda f: built(A.PositionReader, f, 5, 6, "learned", d_model=8)
    reader = A.PositionReader(5, 6, "sinusoid", d_model=8).double()
    yield "attention.PositionReader.forward", \
        lambda f: f(reader, torch.tensor([[1, 2, 3, 4]]), need_weights=True)

    # sparse: global positions as a list, a layout hiding NaN
    n, block = 6, 2
    layout = np.array([[True, False, False], [False, True, False], [False, False, False]])
    hidden = np.repeat(layout.any(1), block)[:n, None]
    sq, sk, sv = (garbage(R(1, n, 4, seed=s), hidden) for s in (4, 5, 6))
    st = [torch.as_tensor(a) for a in (sq, sk, sv)]
    yield "sparse.global_mask_np", lambda f: f(n, [3, 0])
    yield "sparse.longformer_mask_np", lambda f: f(n, 1, global_idx=[3, 0])
    yield "sparse.window_attention_np", lambda f: f(R(1, n, 4), R(1, n, 4), R(1, n, 4), 1,
                                                   global_idx=[4, 0])
    yield "sparse.window_attention_torch", lambda f: f(T(1, n, 4), T(1, n, 4), T(1, n, 4), 1,
                                                      global_idx=[4, 0])
    yield "sparse.block_sparse_attention_np", lambda f: f(sq, sk, sv, layout, block)
    yield "sparse.block_sparse_attention_torch", lambda f: f(*st, layout, block)
    yield "sparse.block_sparse_attend", \
        lambda f: f(torch.as_tensor(layout), block)(*(t[None] for t in st))
    yield "fast.sparse.block_sparse_attention_fast_torch", lambda f: f(*st, layout, block)
    yield "fast.sparse.global_window_attention_fast_torch", \
        lambda f: f(T(1, 8, 4), T(1, 8, 4), T(1, 8, 4), 1, [5, 0], block=2)
    yield "fast.sparse.window_attention_fast_torch", \
        lambda f: f(T(1, 8, 4), T(1, 8, 4), T(1, 8, 4), 1, global_idx=[5, 0], block=2)
    yield "fast.flex.window_tiles_np", lambda f: f(8, 1, global_idx=[5, 0], tile=2)
    yield "fast.flex.dense_block_sparse_attention", lambda f: f(*st, layout.tolist(), block)
    yield "fast.flex.choose_kernel", lambda f: f("cpu", 8)
    chain = np.eye(5, k=-1, dtype=bool)  # token i hears token i - 1
    yield "sparse.sliding_window_mask_np", lambda f: f(n, 1, causal=True)
    yield "sparse.dilated_window_mask_np", lambda f: f(n, 1, 2)
    yield "sparse.random_mask_np", lambda f: f(n, 2, 0, causal=True)
    yield "sparse.block_mask_np", lambda f: f(layout, block, 5)
    yield "sparse.block_layout_np", lambda f: f(np.tri(5, dtype=bool), block)
    yield "sparse.bigbird_layout_np", lambda f: f(4, seed=1)
    yield "sparse.bigbird_layouts_np", lambda f: f(4, 2, 2, seed=1)
    yield "sparse.bigbird_mask_np", lambda f: f(7, block, seed=1)
    yield "sparse.strided_masks_np", lambda f: f(n, 2)
    yield "sparse.fixed_masks_np", lambda f: f(n, 3, 1)
    yield "sparse.union_np", lambda f: f(chain, chain.T, np.eye(5, dtype=bool))
    yield "sparse.hops_np", lambda f: f(chain)
    yield "sparse.reach_np", lambda f: f(chain, chain.T)
    yield "sparse.diameter_np", lambda f: f(chain | chain.T)
    yield "fast.sparse.diameter_fast_np", lambda f: f(chain | chain.T)
    yield "sparse.window_attend", \
        lambda f: f(1, global_idx=[0])(*(T(1, 2, n, 4, seed=s) for s in (4, 5, 6)))
    yield "sparse.SparseClassifier.__init__", \
        lambda f: built(S.SparseClassifier, f, 7, n, 8, 2, 2, S.window_attend(1))
    torch.manual_seed(0)
    sparse_clf = S.SparseClassifier(7, n, 8, 2, 2, [S.window_attend(1), S.block_sparse_attend(
        layout, block)]).double()
    yield "sparse.SparseClassifier.forward", lambda f: f(sparse_clf, torch.tensor([[1, 2, 3] * 2]))
    wq, wk, wv = (T(1, 8, 4, seed=s) for s in (7, 8, 9))
    yield "fast.sparse.band_mask_torch", lambda f: f(3, 1, 2)
    yield "fast.sparse.unfold_blocks_torch", lambda f: f(wq, 3, 1, 2)
    yield "fast.sparse.blocked_window_attention_torch", lambda f: f(wq, wk, wv, 1, 2, 4)
    yield "fast.sparse.window_forward_torch", lambda f: f(wq, wk, wv, 2, True, 4, None)
    yield "fast.sparse.window_attention_backward_torch", \
        lambda f: f(wq, wk, wv, T(1, 8, 4, seed=10), 2, 2, 4, None, chunk_scores=64)
    yield "fast.sparse.sliding_window_attention_fast_torch", \
        lambda f: f(wq, wk, wv, 2, True, block=4)
    yield "fast.sparse.dilated_window_attention_fast_torch", \
        lambda f: f(wq, wk, wv, 1, 2, block=4)
    yield "fast.flex.layout_tiles_np", lambda f: f(layout, block, n, causal=True, tile=4)
    yield "fast.flex.multiscale_tiles_np", lambda f: f(8, [1, 3], tile=2)
    yield "fast.flex.flex_window_attention", lambda f: f(wq, wk, wv, 1, global_idx=[5], tile=4)
    yield "fast.flex.flex_block_sparse_attention", \
        lambda f: f(*st, layout, block, causal=True, tile=4)
    yield "fast.flex.dense_window_attention", lambda f: f(wq, wk, wv, 1, dilation=2, causal=True)
    yield "fast.flex.window_attention_routed_fast_torch", \
        lambda f: f(wq, wk, wv, 1, global_idx=[5])
    yield "fast.flex.block_sparse_attention_routed_fast_torch", \
        lambda f: f(*st, layout, block, True)
    hq, hk, hv = (T(1, 2, 8, 4, seed=s) for s in (7, 8, 9))
    yield "fast.flex.flex_multiscale_attention", \
        lambda f: f(hq, hk, hv, [1, 3], torch.arange(8)[None] < 6, tile=4)

    # multiscale: a padding mask hiding NaN, windows as a list
    mpad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]
    keep = mpad[:, 0, 0, :, None]
    mq = T(2, 2, 6, 3, seed=7)  # a padded query still sees the real keys
    mk, mv = (garbage(T(2, 2, 6, 3, seed=s), keep[:, None]) for s in (8, 9))
    yield "multiscale.multiscale_attention_torch", lambda f: f(mq, mk, mv, [1, 3], mpad)
    yield "multiscale.multiscale_attention_np", \
        lambda f: f(mq.numpy(), mk.numpy(), mv.numpy(), [1, 3], mpad.numpy())
    yield "fast.multiscale.multiscale_attention_fast_torch", \
        lambda f: f(mq, mk, mv, [1, 3], mpad, dense_below=0)
    yield "fast.multiscale.multiscale_attention_routed_fast_torch", \
        lambda f: f(mq, mk, mv, [1, 3], mpad)
    yield "multiscale.MultiScaleKernel.__init__", \
        lambda f: vars(built(MS.MultiScaleKernel, f, (1, 3)))
    yield "multiscale.ScaleAllocation.__init__", \
        lambda f: vars(built(MS.ScaleAllocation, f, [[1, 0, 1, 0, 0]]))
    queries = mpad[:, 0, 0]  # (B, N): the padded queries' weights may hold NaN
    weights = garbage(T(2, 2, 6, 6, seed=10).abs(), queries[:, None, :, None])
    yield "multiscale.scale_mask_np", lambda f: f(5, [0, 2], n_global=1)
    yield "multiscale.scale_mask_torch", lambda f: f(5, [0, 2], n_global=1)
    yield "multiscale.measured_scale_np", lambda f: f(weights.numpy(), queries.numpy())
    yield "multiscale.measured_scale_torch", lambda f: f(weights, queries)
    yield "multiscale.scale_candidates", lambda f: f(32)
    yield "multiscale.allocate_scales_np", lambda f: f(5, 5, 3, 0.5)
    yield "multiscale.layer_windows", lambda f: f(np.array([[1, 0, 2], [0, 3, 0]]), [1, 2, 4])
    yield "multiscale.masked_max_torch", lambda f: f(xh, key_pad)
    yield "multiscale.MultiScaleKernel.set_windows", \
        lambda f: after(MS.MultiScaleKernel([1, 3]), f, (2, 0))
    yield "multiscale.MultiScaleTransformer.__init__", \
        lambda f: built(MS.MultiScaleTransformer, f, 3, 8, [[0, 2], [1, 3]], 2, max_len=6)
    torch.manual_seed(0)
    allocation = MS.ScaleAllocation([[1, 0, 1, 0, 0], [0, 1, 0, 0, 1]])
    msa = MS.MultiScaleTransformer(3, 8, allocation, 2, embedding=torch.nn.Embedding(7, 3),
                                   global_node=True).double()
    yield "multiscale.MultiScaleTransformer.forward", \
        lambda f: f(msa, torch.tensor([[1, 2, 3, 4, 5], [6, 5, 4, 0, 0]]), torch.tensor([5, 3]))
    yield "fast.multiscale.band_attention_fast_torch", \
        lambda f: f(mq[:1], mq[1:], mq[:1] + 1, 2, chunk=3)
    yield "fast.multiscale.band_pieces", lambda f: f(8, 2, 3)

    # xl: the defaults of TransformerXL.forward
    torch.manual_seed(0)
    model = X.TransformerXL(11, d_model=8, num_heads=2, num_layers=2, mem_len=3).double()
    tokens = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    yield "xl.TransformerXL.forward", lambda f: f(model, tokens)
    yield "xl.TransformerXL.forward", \
        lambda f: f(model, tokens, model(tokens)[1], need_weights=True)
    # relative attention: 3 queries, 5 keys; the rows of r past Lk are never read (NaN)
    rel = [T(1, 2, 3, 4), T(1, 2, 5, 4, seed=1), T(1, 2, 5, 4, seed=2),
           garbage(T(2, 7, 4, seed=3), torch.arange(7)[None, :, None] < 5),
           T(2, 4, seed=4), T(2, 4, seed=5)]
    yield "xl.relative_distances_np", lambda f: f(3, 5)
    yield "xl.relative_distances_torch", lambda f: f(3, 5)
    yield "xl.rel_attention_np", lambda f: f(*(t.numpy() for t in rel))
    yield "xl.rel_attention_torch", lambda f: f(*rel)
    yield "fast.xl.rel_attention_fast_np", lambda f: f(*(t.numpy() for t in rel))
    yield "fast.xl.rel_attention_fast_torch", lambda f: f(*rel)
    yield "fast.xl.rel_shift_np", lambda f: f(R(2, 3, 5))
    yield "fast.xl.rel_shift_torch", lambda f: f(T(2, 3, 5))
    yield "xl.update_memory_np", lambda f: f(R(2, 2, 4, seed=1), R(2, 3, 4), 4)
    yield "xl.update_memory_torch", lambda f: f(T(2, 2, 4, seed=1), T(2, 3, 4), 4)
    torch.manual_seed(0)
    rel_mha = X.RelMultiHeadAttention(8, 2, max_len=16).double()
    for bias in (rel_mha.u_bias, rel_mha.v_bias):  # u and v start at 0: make them count
        torch.nn.init.normal_(bias)
    rel_params = rel_mha.numpy_params()
    yield "xl.rel_multi_head_attention_np", \
        lambda f: f(R(2, 3, 8), R(2, 2, 8, seed=1), rel_params, 2, clamp_len=2)
    yield "xl.RelMultiHeadAttention.forward", \
        lambda f: f(rel_mha, x[:, 2:], x[:, :2], need_weights=True, clamp_len=2)
    yield "xl.RelMultiHeadAttention.__init__", \
        lambda f: built(X.RelMultiHeadAttention, f, 8, 2, max_len=16)
    yield "xl.TransformerXL.__init__", \
        lambda f: built(X.TransformerXL, f, 11, d_model=8, num_heads=2, num_layers=1, mem_len=3)
    yield "xl.VanillaLM.__init__", lambda f: built(X.VanillaLM, f, 11, 8, 2, 1)
    torch.manual_seed(0)
    vanilla = X.VanillaLM(11, 8, 2, 1).double()
    yield "xl.VanillaLM.forward", lambda f: f(vanilla, tokens)
    official = {"word_emb.emb_layers.0.weight": T(11, 8), "crit.out_layers.0.bias": T(11),
                "r_w_bias": T(2, 4, seed=1), "r_r_bias": T(2, 4, seed=2),
                "layers.0.dec_attn.qkv_net.weight": T(24, 8, seed=3),
                **{f"layers.0.{name}": T(8, seed=i) for i, name in enumerate(X.OFFICIAL_NAMES)}}
    yield "xl.official_to_ours", lambda f: f(official, 2)

    def prefilled():  # a decoder that has read the prompt `tokens`
        decoder = FX.XLDecoder(model, 4, batch=2)
        decoder.prefill(tokens)
        return decoder
    yield "fast.xl.XLDecoder.__init__", lambda f: vars(built(FX.XLDecoder, f, model, 4, batch=2))
    yield "fast.xl.XLDecoder.prefill", lambda f: after(FX.XLDecoder(model, 4, batch=2), f, tokens)
    yield "fast.xl.XLDecoder.step", lambda f: after(prefilled(), f, tokens[:, :1])

    # lstm attention: padded encoder states hold NaN
    lpad = np.array([[True] * 4, [True, True, False, False]])
    h = garbage(R(2, 4, 3, seed=10), lpad[..., None])
    yield "lstm_attention.luong_attention_np", lambda f: f(R(2, 2, 3), h, R(1, 3, 3), lpad)
    yield "lstm_attention.luong_attention_torch", \
        lambda f: f(T(2, 2, 3), torch.as_tensor(h), T(1, 3, 3), torch.as_tensor(lpad))
    yield "lstm_attention.score_gradient_np", \
        lambda f: f(LA.luong_attention_np(R(2, 2, 3), h, R(1, 3, 3), lpad)[1][:, 0], h,
                    R(2, 2, 3, seed=11), lpad)
    lstm = [R(12, 2, seed=12), R(12, 3, seed=13), R(12, seed=14), R(12, seed=15)]  # H = 3
    state = [R(2, 3, seed=16), R(2, 3, seed=17)]
    yield "lstm_attention.lstm_cell_np", lambda f: f(R(2, 2), *state, *lstm)
    yield "lstm_attention.lstm_cell_torch", \
        lambda f: f(T(2, 2), *(torch.as_tensor(a) for a in state + lstm))
    yield "lstm_attention.lstm_np", lambda f: f(R(2, 4, 2), *lstm, state=tuple(state))
    heads = [R(2, 3, 3, seed=18), R(2, 3, seed=19), R(2, 3, 3, seed=20), R(2, 3, seed=21)]
    yield "lstm_attention.projected_attention_np", \
        lambda f: f(R(2, 2, 3), h, *heads, mask=lpad)
    yield "lstm_attention.projected_attention_torch", \
        lambda f: f(T(2, 2, 3), *(torch.as_tensor(a) for a in [h] + heads),
                    mask=torch.as_tensor(lpad), uniform=True)
    out = [R(5, 6, seed=22), R(5, seed=23), R(7, 5, seed=24), R(7, seed=25)]  # V = 7
    target_ids = np.array([[6, 0], [2, 2]])  # (B, T) < V
    yield "lstm_attention.output_np", lambda f: f(R(2, 2, 3), R(2, 2, 3, seed=1), *out)
    yield "lstm_attention.output_torch", \
        lambda f: f(T(2, 2, 3), T(2, 2, 3, seed=1), *(torch.as_tensor(a) for a in out))
    yield "lstm_attention.lexical_probe_np", lambda f: f(R(2, 4, 3), R(2, 2, 3), target_ids, *out)
    yield "lstm_attention.lexical_probe_torch", \
        lambda f: f(T(2, 4, 3), T(2, 2, 3), torch.as_tensor(target_ids),
                    *(torch.as_tensor(a) for a in out))
    yield "lstm_attention.output_gradient_np", \
        lambda f: f(R(2, 2, 3), R(2, 2, 3, seed=1), target_ids, *out)
    yield "lstm_attention.OfficialSeq2Seq.__init__", \
        lambda f: built(LA.OfficialSeq2Seq, f, 6, hidden=4, heads=2)
    torch.manual_seed(0)
    copier = LA.OfficialSeq2Seq(6, hidden=4, heads=2).double()
    yield "lstm_attention.OfficialSeq2Seq.states", \
        lambda f: f(copier, torch.tensor([[1, 2, 3]] * 2), torch.tensor([[0, 1]] * 2))

    # task heads: padded states hold NaN
    torch.manual_seed(0)
    pool = TH.AttentionPool(8, 2, 1).double()
    cross = TH.CrossAttentionPool(8, 2, 1).double()
    yield "task_heads.AttentionPool.forward", lambda f: f(pool, xh, key_pad)
    yield "task_heads.attention_pool_np", \
        lambda f: f(xh.numpy(), pad, pool.numpy_params(), 2)
    yield "task_heads.CrossAttentionPool.forward", lambda f: f(cross, xh, key_pad, xh, key_pad)
    yield "task_heads.cross_attention_pool_np", \
        lambda f: f(xh.numpy(), pad, xh.numpy(), pad, cross.numpy_params(), 2)
    yield "fast.task_heads.attention_pool_fast_torch", lambda f: f(xh, key_pad, pool.layers[0])
    yield "task_heads.cls_pool_np", lambda f: f(xh.numpy(), pad)
    yield "task_heads.cls_pool_torch", lambda f: f(xh, key_pad)
    yield "task_heads.mean_pool_np", lambda f: f(xh.numpy(), pad)
    yield "task_heads.mean_pool_torch", lambda f: f(xh, key_pad)
    yield "task_heads.layer_norm_np", lambda f: f(x.numpy(), eps=1e-3)
    yield "task_heads.layer_norm_torch", lambda f: f(x, eps=1e-3)
    yield "task_heads.pearson_loss_np", lambda f: f(R(5), R(5, seed=1))
    yield "task_heads.pearson_loss_torch", lambda f: f(T(5), T(5, seed=1))
    yield "task_heads.pair_features_torch", lambda f: f(T(2, 4), T(2, 4, seed=1))
    yield "task_heads.u09_init_", lambda f: after(A.MultiHeadAttention(8, 2), f)
    yield "task_heads.attention_layers", lambda f: f("AttentionPool", 8, 2, 2, "u09")
    yield "task_heads.AttentionPool.__init__", \
        lambda f: built(TH.AttentionPool, f, 8, 2, 2, query="learned")
    yield "task_heads.CrossAttentionPool.__init__", \
        lambda f: built(TH.CrossAttentionPool, f, 8, 2, read="first")
    torch.manual_seed(0)
    standardize = TH.Standardize(T(6, 8, seed=1))
    yield "task_heads.Standardize.__init__", \
        lambda f: built(TH.Standardize, f, T(6, 8, seed=1), min_std=0.5)
    sentences = TH.SentenceClassifier(TH.AttentionPool(8, 2, 2), 8, 3,
                                      project=torch.nn.Linear(8, 8)).double()
    pairs = TH.PairModel(TH.CrossAttentionPool(8, 2), 8).double()
    yield "task_heads.Standardize.forward", lambda f: f(standardize, x)
    yield "task_heads.SentenceClassifier.forward", \
        lambda f: f(sentences, xh, key_pad, need_weights=True)
    yield "task_heads.PairModel.embed_pair", \
        lambda f: f(pairs, xh, key_pad, xh[:, :4], key_pad[:, :4], need_weights=True)
    yield "task_heads.PairModel.forward", lambda f: f(pairs, xh, key_pad, xh[:, 1:], key_pad[:, 1:])

    # agreement: default masks, lists, padded states
    a, b = R(3, 5).tolist(), R(3, 5, seed=1).tolist()
    yield "agreement.agreement_np", lambda f: f(a, b)
    yield "agreement.agreement_torch", lambda f: f(T(3, 5), T(3, 5, seed=1))
    yield "agreement.mean_agreement_np", lambda f: f(R(2, 1, 5), R(2, 1, 5, seed=1),
                                                    [[True] * 5, [True] * 3 + [False] * 2])
    yield "agreement.random_baseline_np", lambda f: f([[True] * 5, [True] * 3 + [False] * 2])
    runs = [dict(alpha=R(2, 2, 1, 5, seed=s), beta=R(2, 2, 1, 5, seed=s + 1), perf=[0.5, 0.7])
            for s in (0, 2, 4)]
    yield "agreement.agreement_row_np", lambda f: f(runs[0], [runs[1]], runs[2])
    hcls = garbage(R(2, 5, 4, seed=12), pad[..., None])
    wcls = (R(3, 4, seed=13), R(3, seed=14), R(3, seed=15), R(4, seed=16), 0.1)
    yield "agreement.classifier_np", lambda f: f(hcls, *wcls, mask=pad)
    yield "agreement.classifier_torch", \
        lambda f: f(torch.as_tensor(hcls), *(torch.as_tensor(w) for w in wcls[:4]), 0.1,
                    mask=key_pad)
    yield "agreement.AttentionClassifier.__init__", \
        lambda f: built(AG.AttentionClassifier, f, 7, hidden=4)
    yield "agreement.Seq2SeqAttention.__init__", \
        lambda f: built(AG.Seq2SeqAttention, f, 7, 6, hidden=4)
    torch.manual_seed(0)
    clf = AG.AttentionClassifier(7, hidden=4)
    yield "agreement.AttentionClassifier.states", lambda f: f(clf, torch.tensor([[1, 2, 3]]))
    yield "agreement.classifier_probe_np", lambda f: f(R(2, 5, 4), R(4), 0.1, np.array([1, 0]))
    yield "agreement.classifier_probe_torch", \
        lambda f: f(T(2, 5, 4), T(4), 0.1, torch.tensor([1, 0]))
    yield "agreement.agreement_baseline_np", lambda f: f([5, 3, 20])
    yield "agreement.contextualized_agreement", lambda f: f([0.1, 0.3, 0.5], [0.5, 0.6, 0.7], 0.2)
    torch.manual_seed(0)
    translator = AG.Seq2SeqAttention(7, 6, hidden=4, heads=2).double()
    src, tgt = torch.tensor([[1, 2, 3], [4, 5, 0]]), torch.tensor([[0, 5], [0, 1]])
    yield "agreement.Seq2SeqAttention.states", lambda f: f(translator, src, tgt)
    yield "agreement.Seq2SeqAttention.forward", \
        lambda f: f(translator, src, tgt, torch.tensor([[True] * 3, [True, True, False]]))
    yield "agreement.Seq2SeqAttention.probe", lambda f: f(translator, src, tgt, tgt.flip(1))

    # ibm1: a corpus given as tuples
    sources, targets = (("a", "b"), ("b",)), (("x", "y"), ("y",))
    yield "ibm1.make_bitext", lambda f: vars(f(sources, targets))
    yield "fast.ibm1.index_bitext", lambda f: vars(f(sources, targets))
    bitext = I.make_bitext(sources, targets)
    yield "ibm1.em_np", lambda f: f(bitext, 2)
    yield "fast.ibm1.em_fast_np", lambda f: f(FI.index_bitext(sources, targets), 2)
    table = np.abs(R(3, 2, seed=17)) + 0.1  # (V_x, V_y): NULL, a, b -> x, y
    yield "ibm1.uniform_table_np", lambda f: f(bitext)
    yield "ibm1.count_table_np", lambda f: f(bitext)
    yield "ibm1.token_weights_np", lambda f: f(np.array([0, 1, 0]), "nltk")
    yield "ibm1.e_step_np", lambda f: f(table, bitext, "nltk")
    yield "ibm1.m_step_np", lambda f: f(table, floor=1e-12)
    yield "ibm1.alignment_matrix_np", lambda f: f(table, bitext, 0)
    yield "ibm1.viterbi_np", lambda f: f(table, bitext)
    yield "ibm1.top_translations_np", lambda f: f(table, bitext, "a", k=2)
    yield "ibm1.bag_matrices_np", lambda f: f(bitext)
    yield "ibm1.proxy_prediction_np", lambda f: f(table)
    yield "ibm1.e_step_torch", lambda f: f(torch.as_tensor(table), bitext, "nltk")
    yield "ibm1.m_step_torch", lambda f: f(torch.as_tensor(table), 1e-12)
    yield "ibm1.em_torch", lambda f: f(bitext, 2)
    yield "ibm1.BagOfWordsProxy.__init__", lambda f: built(I.BagOfWordsProxy, f, 3, 2, 4)
    torch.manual_seed(0)
    proxy = I.BagOfWordsProxy(3, 2, 4).double()
    yield "ibm1.BagOfWordsProxy.forward", \
        lambda f: f(proxy, torch.tensor([[0.0, 0.5, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float64))
    yield "ibm1.proxy_agreement_torch", \
        lambda f: f(I.make_bitext(sources + (("a",),), targets + (("x",),), null=False), 4)
    indexed = FI.index_bitext(sources, targets)
    sparse_table = np.abs(R(len(indexed.entry_src), seed=18)) + 0.1  # (E,)
    ts = torch.as_tensor(sparse_table)
    yield "fast.ibm1.target_weights_np", lambda f: f(indexed, "nltk")
    yield "fast.ibm1.uniform_table_fast_np", lambda f: f(indexed)
    yield "fast.ibm1.count_table_fast_np", lambda f: f(indexed)
    yield "fast.ibm1.e_step_fast_np", lambda f: f(sparse_table, indexed, "nltk")
    yield "fast.ibm1.m_step_fast_np", lambda f: f(sparse_table, indexed, 1e-12)
    yield "fast.ibm1.viterbi_fast_np", lambda f: f(sparse_table, indexed)
    yield "fast.ibm1.position_entries_np", lambda f: f(indexed, 0)
    yield "fast.ibm1.alignment_matrix_fast_np", lambda f: f(sparse_table, indexed, 0)
    yield "fast.ibm1.to_dense_np", lambda f: f(sparse_table, indexed)
    yield "fast.ibm1.rows_np", lambda f: f(sparse_table, indexed, ["b", None])
    yield "fast.ibm1.top_translations_fast_np", lambda f: f(sparse_table, indexed, "a", k=1)
    yield "fast.ibm1.e_step_fast_torch", lambda f: f(ts, indexed, "nltk")
    yield "fast.ibm1.m_step_fast_torch", lambda f: f(ts, indexed)
    yield "fast.ibm1.em_fast_torch", lambda f: f(indexed, 2)

    # encoder: a tiny BERT and a word-level tokenizer, built in memory
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "a", "dog"]
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    texts = ["the cat sat", "a dog", "the dog sat on a cat"]
    torch.manual_seed(0)
    encoder = E.MiniLMEncoder(E.BertConfig(vocab_size=12, hidden_size=8, num_hidden_layers=2,
                                           num_attention_heads=2, intermediate_size=16,
                                           max_position_embeddings=16))
    ids = torch.tensor([[2, 4, 5, 3, 8, 3], [2, 7, 3, 6, 3, 0]])  # pairs, the second padded
    types = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0]])
    attends = ids != 0
    yield "encoder.MiniLMEncoder.run", \
        lambda f: f(encoder, ids, attends.long(), True, types, last_layer=1)
    yield "encoder.TopLayers.__init__", lambda f: built(E.TopLayers, f, encoder, 1)
    top = E.TopLayers(encoder, 1)
    yield "encoder.TopLayers.forward", lambda f: f(top, T(2, 6, 8).float(), attends)
    yield "encoder.encode_batch", lambda f: f(tokenizer, [("a dog", "the cat sat")] * 2,
                                              with_types=True)
    yield "encoder.length_sorted_batches", lambda f: f(tokenizer, texts, 2)
    yield "encoder.embed", lambda f: f(encoder, tokenizer, texts, batch_size=2)


def built(cls, init, *args, **kwargs):
    """An object of `cls` made by `init` (its decorated or undecorated __init__), seeded."""
    torch.manual_seed(0)
    obj = cls.__new__(cls)
    init(obj, *args, **kwargs)
    return obj


def after(obj, method, *args, **kwargs):
    """What `method` (decorated or undecorated) returns on `obj`, and `obj` after the call (a
    module, or a plain object's attributes): for methods that change the object they run on."""
    result = method(obj, *args, **kwargs)
    return result, obj if isinstance(obj, torch.nn.Module) else vars(obj)


def undecorated(fn):
    """The body `@checked` wraps: `fn.__wrapped__`. Where `torch.no_grad()` sits above
    `@checked`, `fn.__wrapped__` is the checked function: its own `__wrapped__` is the body,
    run under torch.no_grad() as the decorated call runs it."""
    if not hasattr(fn.__wrapped__, "check"):
        return fn.__wrapped__
    outer = [cell.cell_contents for cell in fn.__closure__ or ()]
    assert any(isinstance(getattr(c, "__self__", None), torch.no_grad) for c in outer), \
        f"a decorator other than torch.no_grad() above @checked: {fn.__qualname__}"
    return torch.no_grad()(fn.__wrapped__.__wrapped__)


# every function whose check once returned arguments that differed from those given
REWRITTEN = {
    "attention.attention_np", "attention.attention_torch", "attention.online_attention_np",
    "attention.online_attention_torch", "attention.attention_backward_np",
    "attention.multi_head_attention_np", "attention.MultiHeadAttention.forward",
    "attention.padding_mask_np", "fast.attention.attention_fast_torch",
    "sparse.global_mask_np", "sparse.longformer_mask_np", "sparse.window_attention_np",
    "sparse.window_attention_torch", "sparse.block_sparse_attention_np",
    "sparse.block_sparse_attention_torch", "sparse.block_sparse_attend",
    "fast.sparse.block_sparse_attention_fast_torch",
    "fast.sparse.global_window_attention_fast_torch", "fast.sparse.window_attention_fast_torch",
    "fast.flex.window_tiles_np", "fast.flex.dense_block_sparse_attention",
    "fast.flex.choose_kernel",
    "multiscale.multiscale_attention_np", "multiscale.multiscale_attention_torch",
    "fast.multiscale.multiscale_attention_fast_torch",
    "fast.multiscale.multiscale_attention_routed_fast_torch",
    "multiscale.MultiScaleKernel.__init__", "multiscale.ScaleAllocation.__init__",
    "xl.TransformerXL.forward",
    "lstm_attention.luong_attention_np", "lstm_attention.luong_attention_torch",
    "lstm_attention.score_gradient_np",
    "task_heads.attention_pool_np", "task_heads.cross_attention_pool_np",
    "task_heads.AttentionPool.forward", "task_heads.CrossAttentionPool.forward",
    "fast.task_heads.attention_pool_fast_torch",
    "agreement.agreement_np", "agreement.agreement_torch", "agreement.mean_agreement_np",
    "agreement.random_baseline_np", "agreement.agreement_row_np", "agreement.classifier_np",
    "agreement.classifier_torch", "agreement.AttentionClassifier.__init__",
    "agreement.AttentionClassifier.states", "agreement.Seq2SeqAttention.__init__",
    "ibm1.make_bitext", "fast.ibm1.index_bitext",
}

# The only decorated functions without a call in calls(), each with the reason it has none.
WITHOUT_A_CALL = {
    "fast.xl.XLDecoder.capture": "needs CUDA: it records one step as a CUDA graph",
}
CALLS = list(calls())


def test_the_walk_finds_the_decorated_functions():
    found = decorated()
    assert len(found) >= 190
    missing = sorted({name for name, _ in CALLS} - set(found))
    assert not missing, f"not decorated (or not found): {missing}"


def test_every_rewriting_function_has_a_valid_call():
    assert not REWRITTEN - {name for name, _ in CALLS}


def test_every_decorated_function_has_a_valid_call():
    """A newly decorated function needs a call in calls() (or, with no call on the CPU, a line
    in WITHOUT_A_CALL saying why)."""
    found, called = set(decorated()), {name for name, _ in CALLS}
    missing = sorted(found - called - WITHOUT_A_CALL.keys())
    assert not missing, f"decorated, with no valid call in calls(): {missing}"
    assert not WITHOUT_A_CALL.keys() & called, \
        f"in WITHOUT_A_CALL, with a call: {sorted(WITHOUT_A_CALL.keys() & called)}"
    assert WITHOUT_A_CALL.keys() <= found, \
        f"in WITHOUT_A_CALL, not decorated: {sorted(WITHOUT_A_CALL.keys() - found)}"


@pytest.mark.parametrize("name, call", CALLS, ids=[name for name, _ in CALLS])
def test_the_undecorated_body_computes_what_the_decorated_call_does(name, call):
    """The body runs first, on the inputs as calls() made them: a check that changed an input
    in place (shared by both calls) would then change the decorated call's result."""
    if name.startswith("fast.flex.flex_"):  # FlexAttention itself: torch >= 2.5
        pytest.importorskip("torch.nn.attention.flex_attention")
    fn = decorated()[name]
    torch.manual_seed(0)
    body = call(undecorated(fn))
    torch.manual_seed(0)
    with_check = call(fn)
    assert same(with_check, body), name


def test_a_check_only_refuses():
    """A check that returns something (replacement arguments, say) is an error: what the
    function computes is in its body."""
    def doubled(x):
        return dict(x=2 * x)

    @checked(rules=[doubled])
    def identity(x):
        return x

    with pytest.raises(TypeError, match="only refuses"):
        identity(3)


def test_spec_grammar_multiples_and_optional_choices():
    """An axis `4H` is 4 × H (bound by another argument or first here); `one of? a, b` takes
    None too."""
    @checked(h="float (B, H)", w="float (4H, H)", mode="one of? a, b")
    def gates_np(h, w, mode=None):
        return w.shape

    h = np.zeros((2, 3))
    assert gates_np(h, np.zeros((12, 3))) == (12, 3)
    assert gates_np(h, np.zeros((12, 3)), "b") == (12, 3)
    with pytest.raises(ValueError, match=r"^w: expected float \(4H, H\) with H = 3"):
        gates_np(h, np.zeros((9, 3)))
    with pytest.raises(ValueError, match="^mode: expected one of a, b"):
        gates_np(h, np.zeros((12, 3)), "c")

    @checked(x="float (T>=2, D)", y="float (T, D)")  # an axis of at least that size
    def spread_np(x, y):
        return x.std(0)

    assert spread_np(np.zeros((2, 3)), np.zeros((2, 3))).shape == (3,)
    with pytest.raises(ValueError, match=r"^x: expected float \(T>=2, D\), got float64 array "
                                         r"\(1, 3\)"):
        spread_np(np.zeros((1, 3)), np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"^y: expected float \(T, D\) with T = 2"):
        spread_np(np.zeros((2, 3)), np.zeros((3, 3)))

    class Table:  # an axis of at most an attribute's size
        rows = 4

        @checked(x="float (N<=self.rows, D)")
        def read(self, x):
            return x

    Table().read(torch.zeros(4, 2))
    with pytest.raises(ValueError, match=r"^x: expected float \(N<=self.rows, D\), self.rows = "
                                         r"4, got float32 tensor \(5, 2\)"):
        Table().read(torch.zeros(5, 2))


def test_spec_grammar_edge_cases():
    """Forms that once misbehaved: an upper bound on an int, a nested function (not a method),
    a `~` mask without `...`, `like` an argument checked after it or not given, a bound by an
    array not given, a divisor of 0, a limit bound by a later argument, a size that is no
    multiple of k; and specs that name no argument fail when the function is decorated."""
    @checked(n="int <= 5", m="int >= 0.5")
    def small(n, m=1):
        return n

    assert small(3) == 3
    for args, message in [((6,), "n: expected int <= 5"), ((3, 0), "m: expected an integer >= 1")]:
        with pytest.raises(ValueError, match="^" + message):
            small(*args)

    def outer():
        @checked(x="float (N,)")
        def inner(x):  # no suffix, no class: the first array's library
            return x.sum()
        return inner

    assert outer()(np.ones(3)) == 3

    @checked(q="float (..., Lq, d)", mask="bool ~(Lq, Lk)")
    def masked_np(q, mask):
        return mask.shape

    assert masked_np(np.zeros((5, 2, 3)), np.ones((1, 7), bool)) == (1, 7)
    with pytest.raises(ValueError, match=r"^mask: expected a shape broadcastable to \(2, \?\)"):
        masked_np(np.zeros((5, 2, 3)), np.ones((5, 2, 7), bool))

    @checked(y="float (N,) like x", x="float? (N,)")
    def like_torch(y, x=None):
        return y

    like_torch(torch.zeros(3))
    with pytest.raises(ValueError, match="^x: expected float"):
        like_torch(torch.zeros(3), torch.zeros(3, dtype=torch.long))

    @checked(x="float? (B, D)", n="int >= 1, divides D", k="int? in 0 .. D", y="float (N<=M,)",
             z="float (M,)")
    def later_np(y, z, x=None, n=1, k=None):
        return n

    assert later_np(np.zeros(2), np.zeros(3), None, 2, 7) == 2  # D is not bound: not compared
    with pytest.raises(ValueError, match=r"^y: expected float \(N<=M,\), M = 3"):
        later_np(np.zeros(4), np.zeros(3))

    @checked(n="int, divides D", x="float (D,)", k="int in 0 .. D")
    def divides_np(n, x, k=0):
        return n

    assert divides_np(torch.tensor(2), np.zeros(4), torch.tensor(4)) == 2  # 0-d int tensors

    with pytest.raises(ValueError, match="^n: expected int, divides D = 4"):
        divides_np(0, np.zeros(4))

    @checked(w="float (4H, H)")
    def gates_np(w):
        return w

    with pytest.raises(ValueError, match=r"^w: expected float \(4H, H\), got"):
        gates_np(np.zeros((6, 2)))
    with pytest.raises(ValueError, match=r"^w: expected float \(4H, H\) with H = 2, got"):
        gates_np(np.zeros((8, 3)))

    for specs in [dict(x="float (N,)", typo="int"), dict(x="int (N,) < vocab"),
                  dict(h="float (B, N) where mask", mask="bool ~(B, N)")]:
        with pytest.raises(ValueError, match="^spec of"):
            checked(**specs)(lambda x=None, h=None, mask=None: None)


def test_spec_grammar_modules_ids_masks_and_ranges():
    """An axis `self.d_model` and `like self.proj` (a module's width, dtype and device), ids
    `< self.embedding`, `where mask` (finite only there), `int in 0 .. N`, `divides H`, `even`
    and `<= N` each refuse with a message naming the argument; valid calls pass."""
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.d_model, self.proj = 4, torch.nn.Linear(4, 4)
            self.embedding = torch.nn.Embedding(5, 4)

        @checked(x="float (B, self.d_model) like self.proj", ids="int (B,) < self.embedding")
        def forward(self, x, ids):
            return x

    layer, ids = Layer(), torch.tensor([0, 4])
    layer(torch.zeros(2, 4), ids)
    with pytest.raises(ValueError, match=r"^x: expected float \(B, self.d_model\) like self.proj "
                                         r"with self.d_model = 4"):
        layer(torch.zeros(2, 3), ids)
    with pytest.raises(ValueError, match=r"^x: .* float32 on cpu, got float64"):
        layer(torch.zeros(2, 4, dtype=torch.float64), ids)
    with pytest.raises(ValueError, match=r"^ids: expected ids in \[0, 5\) \(self.embedding\)"):
        layer(torch.zeros(2, 4), torch.tensor([0, 5]))

    @checked(h="float (B, N, H) where mask", mask="bool? (B, N)", n_global="int in 0 .. N",
             heads="int >= 1, divides H", width="int, even", lengths="int? (B,) <= N")
    def read_np(h, mask=None, n_global=0, heads=1, width=2, lengths=None):
        return h

    h, mask = np.zeros((2, 3, 4)), np.array([[True, True, False]] * 2)
    h[:, 2] = np.nan  # what the mask hides may hold anything
    assert read_np(h, mask, 3, 2, lengths=np.array([0, 3])) is h
    for args, message in [((h,), "h: expected finite values"),
                          ((h, mask, 4), "n_global: expected int in 0 .. N = 3"),
                          ((h, mask, 0, 3), "heads: expected int >= 1, divides H = 4"),
                          ((h, mask, 0, 1, 3), "width: expected int, even"),
                          ((h, mask, 0, 1, 2, np.array([0, 4])), r"lengths: .* in \[0, 3\]")]:
        with pytest.raises(ValueError, match="^" + message):
            read_np(*args)


def test_a_call_the_signature_refuses_is_a_type_error():
    """The decorator maps a call's arguments to names without signature.bind where it can;
    a call it cannot map (too many, missing, unknown or repeated arguments) raises Python's
    TypeError, as the undecorated function would."""
    @checked(x="float (N,)", n="int >= 1")
    def f_np(x, *, n=1):
        return n

    assert f_np(np.zeros(2), n=2) == 2 and f_np(x=np.zeros(2)) == 1
    for call in (lambda: f_np(np.zeros(2), 2), lambda: f_np(), lambda: f_np(np.zeros(2), m=1),
                 lambda: f_np(np.zeros(2), x=np.zeros(2))):
        with pytest.raises(TypeError):
            call()


def test_code_that_imports_the_contract_from_checks_still_finds_it():
    """The spec language lives in minattn/contract.py; `from minattn.checks import checked`
    (and the vocabulary) still works, and a name neither module has is an AttributeError."""
    import minattn.checks as checks
    import minattn.contract as contract
    from minattn.checks import hide, in_graph  # noqa: F401 (the import is the test)

    assert checks.checked is contract.checked and checks.Spec is contract.Spec
    with pytest.raises(AttributeError, match="minattn.checks"):
        checks.no_such_name  # noqa: B018
