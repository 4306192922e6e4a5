"""A check only refuses: the undecorated body of every public function, run on valid input,
computes what the decorated call does.

`@checked(...)` runs its specs and rules on a call's arguments and then the function on the
arguments as given. Defaults (`key = query`, a model's `mem_len`), masks folded together and
what a mask hides set to 0 are lines of the body, so `fn.__wrapped__` (what a student copies
into a notebook) runs alone. Below: the decorated functions of the mechanism files and minattn/fast,
found by walking the modules, and a table of valid calls covering every function whose check
once rewrote its arguments, each compared with its undecorated body.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
import torch

import minattn.fast
from minattn.checks import checked

MECHANISMS = ("attention", "sparse", "multiscale", "xl", "lstm_attention", "ibm1", "task_heads",
              "agreement", "encoder")
MODULES = [f"minattn.{m}" for m in MECHANISMS] + \
    [f"minattn.fast.{m.name}" for m in pkgutil.iter_modules(minattn.fast.__path__)]


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
    """(name, function of the decorated function -> its result) for valid calls."""
    from minattn import agreement as AG
    from minattn import attention as A
    from minattn import ibm1 as I
    from minattn import multiscale as MS
    from minattn import task_heads as TH
    from minattn import xl as X
    from minattn.fast import ibm1 as FI

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

    # xl: the defaults of TransformerXL.forward
    torch.manual_seed(0)
    model = X.TransformerXL(11, d_model=8, num_heads=2, num_layers=2, mem_len=3).double()
    tokens = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    yield "xl.TransformerXL.forward", lambda f: f(model, tokens)
    yield "xl.TransformerXL.forward", \
        lambda f: f(model, tokens, model(tokens)[1], need_weights=True)

    # lstm attention: padded encoder states hold NaN
    from minattn import lstm_attention as LA
    lpad = np.array([[True] * 4, [True, True, False, False]])
    h = garbage(R(2, 4, 3, seed=10), lpad[..., None])
    yield "lstm_attention.luong_attention_np", lambda f: f(R(2, 2, 3), h, R(1, 3, 3), lpad)
    yield "lstm_attention.luong_attention_torch", \
        lambda f: f(T(2, 2, 3), torch.as_tensor(h), T(1, 3, 3), torch.as_tensor(lpad))
    yield "lstm_attention.score_gradient_np", \
        lambda f: f(LA.luong_attention_np(R(2, 2, 3), h, R(1, 3, 3), lpad)[1][:, 0], h,
                    R(2, 2, 3, seed=11), lpad)

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

    # ibm1: a corpus given as tuples
    sources, targets = (("a", "b"), ("b",)), (("x", "y"), ("y",))
    yield "ibm1.make_bitext", lambda f: vars(f(sources, targets))
    yield "fast.ibm1.index_bitext", lambda f: vars(f(sources, targets))
    bitext = I.make_bitext(sources, targets)
    yield "ibm1.em_np", lambda f: f(bitext, 2)
    yield "fast.ibm1.em_fast_np", lambda f: f(FI.index_bitext(sources, targets), 2)


def built(cls, init, *args, **kwargs):
    """An object of `cls` made by `init` (its decorated or undecorated __init__), seeded."""
    torch.manual_seed(0)
    obj = cls.__new__(cls)
    init(obj, *args, **kwargs)
    return obj


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
CALLS = list(calls())


def test_the_walk_finds_the_decorated_functions():
    found = decorated()
    assert len(found) >= 190
    missing = sorted({name for name, _ in CALLS} - set(found))
    assert not missing, f"not decorated (or not found): {missing}"


def test_every_rewriting_function_has_a_valid_call():
    assert not REWRITTEN - {name for name, _ in CALLS}


@pytest.mark.parametrize("name, call", CALLS, ids=[name for name, _ in CALLS])
def test_the_undecorated_body_computes_what_the_decorated_call_does(name, call):
    fn = decorated()[name]
    torch.manual_seed(0)
    with_check = call(fn)
    torch.manual_seed(0)
    body = call(fn.__wrapped__)
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
