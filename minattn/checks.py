"""The input contract of every public function of the library, and the decorator that applies it.

A mechanism's file states its math; what a student will get wrong — shapes that don't line up,
a mask of the wrong dtype, a window < 0, an empty batch, tensors on two devices — is refused
here, before the math runs:

    @checked(attention_inputs)
    def attention_np(q, k, v, mask=None, scale=None):
        scale = ...           # the body starts with the math

`checked(check)` calls `check(**arguments)` with the call's arguments (defaults filled in); a
check raises ValueError "<argument>: expected <what>, got <what was given>" or returns a dict of
arguments to replace (what a mask hides set to 0, say), and then the function runs. `show(fn)`
prints the decorator line and the body: the check's name says what is checked, its body is here.

The vocabulary below (`fail`, `check_array`, `check_mask`, ...) is shared by every mechanism's
checks; each mechanism's checks follow in a section of its own. Nothing here imports a mechanism.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Callable, Sequence

import numpy as np
import torch


def checked(check: Callable[..., dict | None]):
    """Decorate a public function so that `check` sees its arguments first (see the module's
    docstring). The decorated function keeps its name, docstring and signature."""

    def decorate(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            replaced = check(**bound.arguments)
            if replaced:
                bound.arguments.update(replaced)
            return fn(*bound.args, **bound.kwargs)

        call.check = check
        return call

    return decorate

def as_numpy(x, dtype=None) -> np.ndarray:
    """x as a NumPy array. A torch tensor is detached and moved to the host first (NumPy cannot
    read a CUDA tensor, nor one that requires grad); a list or tuple is converted element by
    element (a list of 0-dim CUDA tensors too)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    elif isinstance(x, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in x):
        x = [as_numpy(e) for e in x]
    return np.asarray(x, dtype=dtype)


# ----------------------------------------------------------------------------- input checks
# The input contract of every public function of the library, NumPy and torch twins alike
# (the twins call the same checks):
#   * arrays have the documented axes and sizes; NumPy functions take NumPy arrays, torch
#     functions take tensors; floating inputs share one dtype; tensors share one device;
#   * masks are bool, True = "may attend" / "real token" (a float mask is refused: 0/1 and
#     0/−inf are both in use, and guessing which one was meant answers wrongly half the time);
#   * sizes are integers >= 0 (a float such as 2.0 or 2.5 is refused, so is True);
#   * ids lie inside their vocabulary, indices inside what they index;
#   * float inputs are finite wherever they count. What a mask hides may hold anything
#     (padded states are garbage in real batches): masked reductions select it away with
#     `where`, never multiply it by 0 (0 × NaN is NaN), so it never reaches a result;
# and anything else is refused with `fail`: a ValueError "<argument>: expected <what>, got
# <what was given>". The shape and dtype checks read metadata only; ids and finiteness read
# the values once (one pass, one reduction) and are skipped while torch.compile traces.
def fail(what: str, expected: str, given: str) -> None:
    """Raise the one kind of error students see: what was wrong, expected vs given."""
    raise ValueError(f"{what}: expected {expected}, got {given}")


def shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def describe(x) -> str:
    """What a caller passed, for an error message: 'float32 tensor (2, 3) on cpu', 'int 5'."""
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).removeprefix('torch.')} tensor {shape_str(x.shape)} on {x.device}"
    if isinstance(x, np.ndarray):
        return f"{x.dtype} array {shape_str(x.shape)}"
    if x is None or isinstance(x, (bool, int, float, str, np.generic)):
        return f"{type(x).__name__} {x!r}"
    text = repr(x)
    return f"{type(x).__name__} {text[:40]}{'…' if len(text) > 40 else ''}"


def _tracing() -> bool:
    """True while torch.compile traces: a check that reads values would break the graph."""
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and compiler.is_compiling())


def check_size(name: str, value, low: int = 0) -> int:
    """`value` must be an integer >= low (Python, NumPy, or a 0-d integer tensor; not a bool,
    not a float such as 2.0); returns it as an int. A symbolic size (torch.compile with dynamic
    shapes) passes unchecked: reading it would break the graph."""
    if isinstance(value, torch.SymInt):
        return value
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point() \
            and value.dtype != torch.bool and not value.is_complex():
        value = int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        fail(name, f"an integer >= {low}", describe(value))
    if value < low:
        fail(name, f"an integer >= {low}", describe(value))
    return int(value)


def check_number(name: str, value, low: float | None = None, high: float | None = None,
                 above: float | None = None) -> float:
    """`value` must be a finite real number (not a bool), >= low, <= high, > above."""
    if isinstance(value, torch.Tensor) and value.ndim == 0 and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                     np.floating)):
        fail(name, "a real number", describe(value))
    bounds = [f">= {low}" if low is not None else "", f"<= {high}" if high is not None else "",
              f"> {above}" if above is not None else ""]
    wanted = "a finite number" + "".join(f" {b}" for b in bounds if b)
    if not np.isfinite(value) or (low is not None and value < low) or \
            (high is not None and value > high) or (above is not None and value <= above):
        fail(name, wanted, describe(value))
    return float(value)


def dtype_kind(x) -> str:
    """'float', 'int', 'bool', 'complex' or 'other' for a NumPy array or a tensor."""
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool:
            return "bool"
        return "float" if x.is_floating_point() else "complex" if x.is_complex() else "int"
    kind = np.asarray(x).dtype.kind
    return {"f": "float", "i": "int", "u": "int", "b": "bool", "c": "complex"}.get(kind, "other")


def check_array(name: str, x, kind: str | None = "float", ndim: int | None = None,
                min_ndim: int | None = None, hint: str = "", like=None) -> None:
    """`x` must be an array of the right library, dtype kind and number of axes.

    like: np.ndarray or torch.Tensor (default: whichever `x` is; a list is refused either way).
    kind: 'float', 'int' (not bool), 'bool', or None for any real dtype. hint names the axes,
    e.g. '(B, N, d)'.
    """
    library = like if like is not None else (torch.Tensor if isinstance(x, torch.Tensor)
                                              else np.ndarray)
    if not isinstance(x, library):
        what = "a NumPy array" if library is np.ndarray else "a torch tensor"
        fail(name, what + (f" {hint}" if hint else ""), describe(x))
    got = dtype_kind(x)
    if kind is not None and got != kind or kind is None and got not in ("float", "int", "bool"):
        wanted = {"float": "a floating dtype", "int": "an integer dtype", "bool": "dtype bool",
                  None: "a real dtype"}[kind]
        fail(name, wanted + (f" {hint}" if hint else ""), describe(x))
    if ndim is not None and x.ndim != ndim or min_ndim is not None and x.ndim < min_ndim:
        axes = f"{ndim} axes" if ndim is not None else f"at least {min_ndim} axes"
        fail(name, axes + (f" {hint}" if hint else ""), describe(x))


def check_same_dtype(**arrays) -> None:
    """All arrays given (None skipped) share one dtype: a float32 and a float64 input are
    refused in NumPy too, where they would be promoted, so the twins agree."""
    given = {n: a for n, a in arrays.items() if a is not None}
    if len({str(a.dtype).removeprefix("torch.") for a in given.values()}) > 1:
        listing = ", ".join(f"{n} {str(a.dtype).removeprefix('torch.')}" for n, a in given.items())
        fail("inputs have different dtypes", "one floating dtype for all (cast them first)",
             listing)


def in_graph(*xs) -> bool:
    """True when every x is a torch activation: a tensor made by an operation that autograd
    records (it has a grad_fn). Its values come from inputs that were checked where they entered
    the library, so the checks do not read them again: a training step would pay for each read
    (a fifth of a small model's step on a CPU, and a device sync on a GPU). Data, parameters and
    anything computed without gradients are still read."""
    return all(isinstance(x, torch.Tensor) and x.grad_fn is not None for x in xs)


def _surely_finite(x: torch.Tensor, minus_inf_ok: bool) -> bool:
    """A one-reduction test that passes every finite tensor: NaN and ±inf propagate through a
    sum (NaN + a = NaN, inf + a = inf, inf - inf = NaN), and NaN and +inf through a max. False
    only asks for the exact element-wise check, which also tells an overflowing sum of finite
    values (≥ 3.4e38 in float32) from a bad value. No boolean tensor the size of x is
    written, so a finite x is read once and nothing else is touched."""
    x = x.detach()  # a leaf that requires grad is read, not differentiated
    if minus_inf_ok:  # -inf is allowed: look at the largest value only
        top = float(x.max())
        return top == top and top != math.inf  # NaN is the one value not equal to itself
    half = x.element_size() < 4  # float16 overflows at 65504: sum in float32
    return bool(torch.isfinite(x.sum(dtype=torch.float32) if half else x.sum()))


def check_finite(name: str, x, where=None, minus_inf_ok: bool = False) -> None:
    """x must be finite (no NaN, no ±inf) wherever `where` (bool, broadcastable) is True,
    everywhere when where is None; minus_inf_ok lets −inf through (a score of −inf is a
    weight of exactly 0). A finite x is read once (`_surely_finite`); skipped while
    torch.compile traces, and for activations (see `in_graph`)."""
    if isinstance(x, torch.Tensor):
        if _tracing() or not x.is_floating_point() or x.device.type == "meta" or in_graph(x) \
                or x.numel() == 0 or _surely_finite(x, minus_inf_ok):
            return
        bad = torch.isnan(x) | (x == math.inf) if minus_inf_ok else ~torch.isfinite(x)
        if where is not None:
            bad = bad & where
        if not bool(bad.any()):
            return
        count, first = int(bad.sum()), tuple(int(i) for i in torch.nonzero(bad)[0])
        first_value = float(torch.broadcast_to(x.detach(), bad.shape)[first])
    else:
        x = np.asarray(x)
        if x.dtype.kind != "f":
            return
        bad = np.isnan(x) | (x == np.inf) if minus_inf_ok else ~np.isfinite(x)
        if where is not None:
            bad = bad & where
        if not bad.any():
            return
        count, first = int(bad.sum()), tuple(int(i) for i in np.argwhere(bad)[0])
        first_value = float(np.broadcast_to(x, bad.shape)[first])
    wanted = "finite values" + (" or -inf" if minus_inf_ok else "") + \
        (" wherever the mask lets them count" if where is not None else "")
    fail(name, wanted, f"{count} {'NaN or +inf' if minus_inf_ok else 'NaN or infinite'} "
         f"value{'s' if count > 1 else ''} (the first, {first_value}, at index {first})")


def hide(x, keep, fill: float = 0.0):
    """`x` where `keep` (bool, broadcastable) is True, `fill` elsewhere: a selection, so NaN or
    inf under the mask is gone (a product would keep it: 0 × NaN = NaN)."""
    if isinstance(x, torch.Tensor):
        return torch.where(keep, x, torch.tensor(fill, dtype=x.dtype, device=x.device))
    return np.where(keep, x, fill).astype(x.dtype, copy=False)


def check_ids(name: str, ids, n: int, what: str = "the vocabulary") -> None:
    """Integer ids (NumPy or torch) inside [0, n): the size of `what`."""
    if dtype_kind(ids) != "int":
        fail(name, f"integer ids in [0, {n}) ({what})", describe(ids))
    if isinstance(ids, torch.Tensor):
        if _tracing() or ids.numel() == 0 or ids.device.type == "meta":
            return
        low, high = (int(v) for v in torch.aminmax(ids))
    else:
        ids = np.asarray(ids)
        if ids.size == 0:
            return
        low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= n:
        fail(name, f"ids in [0, {n}) ({what})", f"ids from {low} to {high} in {describe(ids)}")


def check_ndim(name: str, x, min_ndim: int, hint: str) -> None:
    """Require `x.ndim >= min_ndim`; `hint` names the axes, e.g. '(..., N, d)'."""
    if x.ndim < min_ndim:
        fail(f"{name} has too few dimensions", f"shape {hint}", f"shape {shape_str(x.shape)}")


def check_same_device(**tensors) -> None:
    """All torch tensors given must live on one device (NumPy arrays and None are ignored)."""
    devices = {name: t.device for name, t in tensors.items() if isinstance(t, torch.Tensor)}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{n} on {d}" for n, d in devices.items())
        fail("inputs are on different devices", "one device for all", listing)


def is_bool_dtype(x) -> bool:
    if isinstance(x, torch.Tensor):
        return x.dtype == torch.bool
    return np.asarray(x).dtype == np.bool_


def broadcast_ok(shape: Sequence[int], target: Sequence[int]) -> bool:
    """True when an array of `shape` broadcasts to `target` without changing `target`."""
    if len(shape) > len(target):
        return False
    for s, t in zip(reversed(shape), reversed(target)):
        if s != 1 and s != t:
            return False
    return True


def check_mask(mask, scores_shape: Sequence[int], name: str = "mask", like=None) -> None:
    """A mask must be boolean (True = may attend) and broadcast to the scores' shape.

    like: the array library the function works in (np.ndarray or torch.Tensor), if not the
    mask's own. A float mask is refused, additive (0 / −inf) or 0/1 alike: turn an additive
    one into ours with `mask == 0`, a 0/1 one with `mask > 0`.
    """
    if mask is None:
        return
    if like is not None and not isinstance(mask, like) or \
            not isinstance(mask, (np.ndarray, torch.Tensor)):
        kind = "a NumPy" if like is np.ndarray else "a torch" if like is torch.Tensor else "a"
        fail(name, f"{kind} bool array (True = may attend)", describe(mask))
    if not is_bool_dtype(mask):
        fail(f"{name} has the wrong dtype", "bool (True = may attend; an additive float mask "
             "m becomes m == 0, a 0/1 one m > 0)", f"{mask.dtype}")
    if not broadcast_ok(tuple(mask.shape), tuple(scores_shape)):
        fail(f"{name} does not fit the attention scores",
             f"a shape broadcastable to {shape_str(scores_shape)}", shape_str(mask.shape))


# ============================================================ attention (lesson 01)
# (the checks of minattn/attention.py go here)
# The checks of minattn/attention.py. The first few (`check_attention_inputs`,
# `visible_inputs`, `check_tokens`, `check_table_sizes`) are also used by the kernels of other
# lessons; the factories below (`attention_inputs(np.ndarray)`, ...) are what `@checked` applies
# to lesson 01's public functions, one per signature, for NumPy or torch.
def check_attention_inputs(q, k, v, mask=None, scale=None, like=None) -> None:
    """Raise ValueError (expected vs given) unless q, k, v and mask fit together.

    Works on NumPy arrays and torch tensors alike (it looks at the type, .shape, .dtype and
    .device): q, k, v of one library, one floating dtype, one device. `like` (np.ndarray or
    torch.Tensor) names the library a function takes; by default q's.
    """
    like = like or (torch.Tensor if isinstance(q, torch.Tensor) else np.ndarray)
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_array(name, x, "float", like=like)
        check_ndim(name, x, 2, "(..., N, d)")
    check_same_dtype(q=q, k=k, v=v)
    check_same_device(q=q, k=k, v=v, mask=mask)
    if scale is not None:
        check_number("scale", scale)
    if q.shape[-1] != k.shape[-1]:
        fail("q and k must have the same feature size d (last axis)",
             f"k of shape (..., Lk, {q.shape[-1]})",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        fail("k and v must have the same number of keys Lk (second-to-last axis)",
             f"v of shape (..., {k.shape[-2]}, dv)",
             f"k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        fail("q, k and v must share their leading (batch, head) axes",
             "equal shapes before the last two axes",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    if q.shape[-1] == 0:
        fail("q", "a feature size d >= 1 (last axis; the scale is 1/sqrt(d))", describe(q))
    if q.shape[-2] == 0 or k.shape[-2] == 0 or (q.ndim > 2 and 0 in q.shape[:-2]):
        fail("empty input", "at least one query, one key and one batch element",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    check_mask(mask, tuple(q.shape[:-1]) + (k.shape[-2],), like=like)


def visible_inputs(q, k, v, mask=None):
    """q, k, v with what the mask hides set to 0 — the queries of rows that see no key, the
    keys and values that no query sees — after checking that the rest is finite.

    Selected, not multiplied, so garbage under the mask (NaN in padding) cannot leak into the
    output or the gradients. NumPy and torch alike; returns the three arrays. Activations of a
    training graph (`in_graph`) are returned as they are: they were computed from checked,
    finite inputs, and a key or query that the mask hides changes no output and gets no
    gradient, so the selection would only cost a read of the mask and the arrays.
    """
    if in_graph(q, k, v):
        return q, k, v
    if mask is not None:
        rows_seen = mask.any(-1)[..., None]  # (..., Lq, 1): the query sees some key
        keys_seen = mask.any(-2)[..., None]  # (..., Lk, 1): some query sees the key
        q, k, v = hide(q, rows_seen), hide(k, keys_seen), hide(v, keys_seen)
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_finite(name, x)
    return q, k, v


def check_tokens(tokens, embedding: torch.nn.Embedding, max_len: int | None = None) -> None:
    """tokens: (B, N) integer ids inside the embedding's vocabulary, N <= max_len, N > 0."""
    check_array("tokens", tokens, "int", ndim=2, hint="(B, N) token ids", like=torch.Tensor)
    if 0 in tokens.shape or max_len is not None and tokens.shape[1] > max_len:
        fail("tokens", f"(B, N) with 0 < N <= max_len = {max_len}" if max_len else
             "(B, N) with B, N > 0", describe(tokens))
    check_ids("tokens", tokens, embedding.num_embeddings)
    check_same_device(tokens=tokens, weights=embedding.weight)


def check_sinusoid(n_positions, d_model) -> tuple[int, int]:
    """n_positions >= 0 and an even d_model >= 0, integers."""
    n_positions, d_model = check_size("n_positions", n_positions), check_size("d_model", d_model)
    if d_model % 2:
        fail("d_model", "an even integer (a sine and a cosine per frequency)", f"{d_model}")
    return n_positions, d_model


def check_table_sizes(n_positions: int, d_model: int, clamp_len) -> tuple[int, int]:
    """`check_sinusoid`'s sizes and clamp_len None or an integer distance >= 0."""
    n_positions, d_model = check_sinusoid(n_positions, d_model)
    if clamp_len is not None and (isinstance(clamp_len, bool) or not isinstance(clamp_len, int)
                                  or clamp_len < 0):
        fail("clamp_len must be a distance", "None or an int >= 0", repr(clamp_len))
    return n_positions, d_model


def check_softmax_inputs(scores, mask, like) -> None:
    """Scores: a float array of the right library; mask: bool, broadcastable to the scores.
    Where the mask allows, a score must not be NaN or +inf (exp(+inf − max) is NaN); −inf is
    a weight of exactly 0."""
    check_array("scores", scores, "float", min_ndim=1, hint="(..., N)", like=like)
    check_same_device(scores=scores, mask=mask)
    check_mask(mask, tuple(scores.shape), like=like)
    check_finite("scores", scores, where=mask, minus_inf_ok=True)


def check_additive_inputs(q, k, w_q, w_k, v_a) -> None:
    """q (..., Lq, dq), k (..., Lk, dk), w_q (h, dq), w_k (h, dk), v_a (h,) must fit together,
    in one library, dtype and device, finite."""
    like = torch.Tensor if isinstance(q, torch.Tensor) else np.ndarray
    for name, x in (("q", q), ("k", k), ("w_q", w_q), ("w_k", w_k), ("v_a", v_a)):
        check_array(name, x, "float", like=like)
    check_ndim("q", q, 2, "(..., Lq, dq)")
    check_ndim("k", k, 2, "(..., Lk, dk)")
    check_same_dtype(q=q, k=k, w_q=w_q, w_k=w_k, v_a=v_a)
    check_same_device(q=q, k=k, w_q=w_q, w_k=w_k, v_a=v_a)
    if w_q.ndim != 2 or w_k.ndim != 2 or v_a.ndim != 1 or not (
            w_q.shape[0] == w_k.shape[0] == v_a.shape[0]):
        fail("additive attention weights do not fit", "w_q (h, dq), w_k (h, dk), v_a (h,)",
             f"w_q {shape_str(w_q.shape)}, w_k {shape_str(w_k.shape)}, v_a {shape_str(v_a.shape)}")
    if q.shape[-1] != w_q.shape[1] or k.shape[-1] != w_k.shape[1]:
        fail("w_q / w_k must match the feature sizes of q / k", f"w_q (h, {q.shape[-1]}), "
             f"w_k (h, {k.shape[-1]})", f"w_q {shape_str(w_q.shape)}, w_k {shape_str(w_k.shape)}")
    if q.shape[:-2] != k.shape[:-2]:
        fail("q and k must share their leading axes", "equal shapes before the last two axes",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    for name, x in (("q", q), ("k", k), ("w_q", w_q), ("w_k", w_k), ("v_a", v_a)):
        check_finite(name, x)


def check_heads(x, num_heads, like) -> int:
    """x (B, N, D) of `like`'s library and num_heads >= 1 dividing D; returns num_heads."""
    check_array("x", x, None, ndim=3, hint="(B, N, H·dh)", like=like)
    num_heads = check_size("num_heads", num_heads, 1)
    if x.shape[-1] % num_heads:
        fail("num_heads", f"a divisor of the width D = {x.shape[-1]}", f"{num_heads}")
    return num_heads


MHA_PARAMS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")


def check_mha_params(params, query) -> None:
    """The eight arrays of `MultiHeadAttention.numpy_params()`: (D, D) weights, (D,) biases."""
    if not isinstance(params, dict) or any(n not in params for n in MHA_PARAMS):
        missing = [n for n in MHA_PARAMS if n not in params] if isinstance(params, dict) else []
        fail("params", f"a dict with {', '.join(MHA_PARAMS)} (MultiHeadAttention.numpy_params())",
             f"a dict without {missing}" if missing else describe(params))
    D = params["w_q"].shape[-1] if hasattr(params["w_q"], "shape") else -1
    for name in MHA_PARAMS:
        check_array(f"params['{name}']", params[name], "float", like=np.ndarray)
        want = (D, D) if name.startswith("w") else (D,)
        if tuple(params[name].shape) != want:
            fail(f"params['{name}']", f"shape {shape_str(want)}", shape_str(params[name].shape))
        check_finite(f"params['{name}']", params[name])


def check_mha_inputs(query, key, value, num_heads: int, d_model: int, mask=None,
                     key_padding_mask=None, dtype=None):
    """(B, Lq, D), (B, Lk, D), (B, Lk, D) with D = d_model; shared by NumPy and torch.

    Returns the one mask to attend with (None, or bool broadcastable to (B, H, Lq, Lk)), made of
      mask              (Lq, Lk), or 4 axes broadcastable to (B, H, Lq, Lk); and
      key_padding_mask  (B, Lk), True on real keys.
    A 2-axis `mask` is (Lq, Lk), shared by the batch. When B == Lq a (B, Lk) padding mask has
    that very shape and would be read as (Lq, Lk) — each sequence masked with another's
    padding — so a 2-axis mask is refused then: pass `mask[None, None]` for an (Lq, Lk) mask,
    `key_padding_mask=` for a padding mask. A 3-axis mask is refused always: (B, Lq, Lk) and
    (H, Lq, Lk) cannot be told apart. dtype: the dtype the inputs must have (the weights').
    """
    like = torch.Tensor if isinstance(query, torch.Tensor) else np.ndarray
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_array(name, x, "float", like=like)
        if x.ndim != 3 or x.shape[-1] != d_model or 0 in x.shape:
            fail(f"{name} has the wrong shape", f"(B, N, {d_model}) with B, N > 0",
                 shape_str(x.shape))
    if not (query.shape[0] == key.shape[0] == value.shape[0]):
        fail("query, key and value must have the same batch size B",
             "equal first axes", f"{query.shape[0]}, {key.shape[0]}, {value.shape[0]}")
    if key.shape[1] != value.shape[1]:
        fail("key and value must have the same length Lk", f"value of length {key.shape[1]}",
             f"{value.shape[1]}")
    check_same_dtype(query=query, key=key, value=value)
    if dtype is not None and query.dtype != dtype:
        fail("query", f"dtype {str(dtype).removeprefix('torch.')}, the weights' (cast the "
             "inputs or the module)", describe(query))
    check_same_device(query=query, key=key, value=value, mask=mask,
                      key_padding_mask=key_padding_mask)
    B, Lq, Lk = query.shape[0], query.shape[1], key.shape[1]
    check_mask(mask, (B, num_heads, Lq, Lk), like=like)
    if mask is not None and (mask.ndim == 3 or mask.ndim == 2 and B == Lq > 1):
        fail("mask", "(Lq, Lk) written as mask[None, None] when B == Lq, 4 axes (B, H, Lq, Lk) "
             "(1 where shared), or a (B, Lk) padding mask as key_padding_mask=",
             f"an ambiguous {mask.ndim}-axis mask {shape_str(mask.shape)} with B={B}, "
             f"H={num_heads}, Lq={Lq}")
    if key_padding_mask is not None:
        check_array("key_padding_mask", key_padding_mask, "bool", like=like,
                    hint="(B, Lk), True on real keys")
        if tuple(key_padding_mask.shape) != (B, Lk):
            fail("key_padding_mask", f"shape (B, Lk) = ({B}, {Lk}), True on real keys",
                 describe(key_padding_mask))
        padding = key_padding_mask[:, None, None, :]
        mask = padding if mask is None else mask & padding
    return mask


def visible_mha_inputs(query, key, value, mask):
    """`visible_inputs` for the (B, N, D) inputs of multi-head attention: the query rows that
    see no key in any head, and the key/value rows that no query sees, set to 0; the rest
    checked finite."""
    if mask is not None:
        m = mask[(None,) * (4 - mask.ndim)]  # (B|1, H|1, Lq|1, Lk|1)
        rows_seen = m.any(-1).any(1)[..., None]  # (B|1, Lq|1, 1)
        keys_seen = m.any(-2).any(1)[..., None]  # (B|1, Lk|1, 1)
        query, key, value = hide(query, rows_seen), hide(key, keys_seen), hide(value, keys_seen)
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_finite(name, x)
    return query, key, value


def check_lengths(lengths, max_len: int, like) -> int:
    """lengths: (B,) integers in [0, max_len]; max_len an integer >= 0. Returns max_len."""
    max_len = check_size("max_len", max_len)
    check_array("lengths", lengths, "int", ndim=1, hint="(B,) integers", like=like)
    if lengths.shape[0] and (int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        fail("lengths", f"integers in [0, max_len = {max_len}]",
             f"lengths from {int(lengths.min())} to {int(lengths.max())}")
    return max_len


# ---- what `@checked` applies to minattn/attention.py's public functions and modules
def softmax_inputs(like):
    """softmax_np / softmax_torch(scores, mask): `check_softmax_inputs` in `like`'s library."""
    def check(scores, mask=None):
        check_softmax_inputs(scores, mask, like)
    return check


def attention_inputs(like):
    """attention_np / attention_torch(q, k, v, mask, scale): `check_attention_inputs`, then
    what the mask hides set to 0 (`visible_inputs`)."""
    def check(q, k, v, mask=None, scale=None):
        check_attention_inputs(q, k, v, mask, scale, like=like)
        q, k, v = visible_inputs(q, k, v, mask)
        return dict(q=q, k=k, v=v)
    return check


def online_attention_inputs(like):
    """online_attention_np / _torch: `attention_inputs` and a block of >= 1 keys."""
    def check(q, k, v, mask=None, scale=None, block=64):
        replaced = attention_inputs(like)(q, k, v, mask, scale)
        return dict(replaced, block=check_size("block", block, 1))
    return check


def fast_attention_inputs(q, k, v, mask=None, scale=None, is_causal=False):
    """attention_fast_torch: `attention_inputs` for torch, and a mask or is_causal, not both."""
    if is_causal and mask is not None:
        fail("attention_fast_torch takes a mask or is_causal=True, not both",
             "one of them (fold causality into the mask with causal_mask_torch)",
             f"mask {shape_str(mask.shape)} and is_causal=True")
    return attention_inputs(torch.Tensor)(q, k, v, mask, scale)


def attention_backward_inputs(grad_out, q, k, v, mask=None, scale=None):
    """attention_backward_np: `attention_inputs`, and grad_out a finite float array of the
    output's shape (..., Lq, dv) and dtype."""
    check_attention_inputs(q, k, v, mask, scale, like=np.ndarray)
    check_array("grad_out", grad_out, "float", like=np.ndarray)
    if grad_out.shape != q.shape[:-1] + (v.shape[-1],):
        fail("grad_out must have the output's shape", shape_str(q.shape[:-1] + (v.shape[-1],)),
             shape_str(grad_out.shape))
    check_same_dtype(q=q, grad_out=grad_out)
    check_finite("grad_out", grad_out)
    q, k, v = visible_inputs(q, k, v, mask)
    return dict(q=q, k=k, v=v)


def additive_inputs(q, k, w_q, w_k, v_a):
    """additive_scores_np / _torch: `check_additive_inputs`."""
    check_additive_inputs(q, k, w_q, w_k, v_a)


def split_heads_inputs(like):
    """split_heads_np / _torch(x, num_heads): x (B, N, D), num_heads >= 1 dividing D."""
    def check(x, num_heads):
        return dict(num_heads=check_heads(x, num_heads, like))
    return check


def merge_heads_inputs(like):
    """merge_heads_np / _torch(x): x (B, H, N, dh)."""
    def check(x):
        check_array("x", x, None, ndim=4, hint="(B, H, N, dh)", like=like)
    return check


def multi_head_inputs(query, key, value, params, num_heads, mask=None, key_padding_mask=None):
    """multi_head_attention_np: the eight parameters, the (B, N, D) inputs and their masks,
    made into one mask (`check_mha_inputs`); what it hides set to 0."""
    check_mha_params(params, query)
    mask = check_mha_inputs(query, key, value, num_heads, params["w_q"].shape[1], mask,
                            key_padding_mask, dtype=params["w_q"].dtype)
    query, key, value = visible_mha_inputs(query, key, value, mask)
    return dict(query=query, key=key, value=value, mask=mask, key_padding_mask=None)


def causal_mask_sizes(n_queries, n_keys=None, device=None):
    """causal_mask_np / _torch: sizes, integers >= 0."""
    return dict(n_queries=check_size("n_queries", n_queries),
                n_keys=None if n_keys is None else check_size("n_keys", n_keys))


def padding_mask_inputs(like):
    """padding_mask_np / _torch(lengths, max_len): (B,) integer lengths in [0, max_len]."""
    def check(lengths, max_len):
        if like is np.ndarray and isinstance(lengths, (list, tuple)):
            lengths = np.asarray(lengths)
        return dict(lengths=lengths, max_len=check_lengths(lengths, max_len, like))
    return check


def sinusoid_sizes(n_positions, d_model, clamp_len=None, device=None, dtype=torch.float32):
    """sinusoid_np / _torch: sizes (an even d_model), clamp_len, a floating torch dtype."""
    n_positions, d_model = check_table_sizes(n_positions, d_model, clamp_len)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        fail("dtype", "a floating torch dtype such as torch.float32", describe(dtype))
    return dict(n_positions=n_positions, d_model=d_model)


def mha_sizes(self, d_model, num_heads, bias=True, attend=None, flash=True):
    """MultiHeadAttention(d_model, num_heads): integers >= 1, num_heads dividing d_model."""
    d_model, num_heads = check_size("d_model", d_model, 1), check_size("num_heads", num_heads, 1)
    if d_model % num_heads != 0:
        fail("d_model must split evenly into heads", "d_model divisible by num_heads",
             f"d_model={d_model}, num_heads={num_heads}")
    return dict(d_model=d_model, num_heads=num_heads)


def mha_forward_inputs(self, query, key=None, value=None, mask=None, need_weights=False,
                       key_padding_mask=None):
    """MultiHeadAttention.forward: key defaults to query (self-attention), value to key;
    `check_mha_inputs` against the module's width, heads, dtype and device; the masks made
    into one; what it hides set to 0; need_weights only with the built-in kernel."""
    key = query if key is None else key
    value = key if value is None else value
    mask = check_mha_inputs(query, key, value, self.num_heads, self.d_model, mask,
                            key_padding_mask, dtype=self.q_proj.weight.dtype)
    check_same_device(query=query, weights=self.q_proj.weight)
    if need_weights and self.attend is not None:
        fail("need_weights with a custom attend kernel", "need_weights=False",
             f"need_weights=True with attend={self.attend}")
    query, key, value = visible_mha_inputs(query, key, value, mask)
    return dict(query=query, key=key, value=value, mask=mask, key_padding_mask=None)


def torch_mha_module(self, mha):
    """MultiHeadAttention.load_from_torch(mha): an nn.MultiheadAttention of the same width,
    heads and bias setting."""
    if not isinstance(mha, torch.nn.MultiheadAttention):
        fail("mha", "a torch.nn.MultiheadAttention", describe(mha))
    if mha.embed_dim != self.d_model or mha.num_heads != self.num_heads:
        fail("nn.MultiheadAttention does not match", f"d_model={self.d_model}, "
             f"heads={self.num_heads}", f"embed_dim={mha.embed_dim}, heads={mha.num_heads}")
    ours_bias, theirs_bias = self.q_proj.bias is not None, mha.in_proj_bias is not None
    if ours_bias != theirs_bias:
        fail("bias settings differ", f"nn.MultiheadAttention(bias={ours_bias})",
             f"nn.MultiheadAttention(bias={theirs_bias})")


def recall_inputs(self, queries, keys, values, need_weights=False):
    """RecallAttention / RecallMeanPool: queries (B, Q), keys and values (B, P) token ids
    inside their vocabularies."""
    for name, ids, table in (("queries", queries, self.key_embedding),
                             ("keys", keys, self.key_embedding),
                             ("values", values, self.value_embedding)):
        check_array(name, ids, "int", ndim=2, hint="(B, ·) token ids", like=torch.Tensor)
        check_ids(name, ids, table.num_embeddings)
    if keys.shape != values.shape or queries.shape[0] != keys.shape[0]:
        fail("values", f"the shape of keys {shape_str(keys.shape)} (and queries of batch "
             f"{keys.shape[0]})", f"values {shape_str(values.shape)}, queries "
             f"{shape_str(queries.shape)}")
    check_same_device(queries=queries, keys=keys, values=values,
                      weights=self.key_embedding.weight)


POSITIONS = ("none", "sinusoid", "learned")


def position_reader_sizes(self, n_symbols, max_len, positions, d_model=64, init_std=0.02):
    """PositionReader: positions one of POSITIONS, sizes >= 1, an init_std > 0."""
    if positions not in POSITIONS:
        fail("positions", f"one of {POSITIONS}", repr(positions))
    check_number("init_std", init_std, above=0.0)
    max_len, d_model = check_size("max_len", max_len, 1), check_size("d_model", d_model, 1)
    if positions == "sinusoid":
        check_sinusoid(max_len, d_model)  # an even width: a sine and a cosine per frequency
    return dict(n_symbols=check_size("n_symbols", n_symbols, 1), max_len=max_len,
                d_model=d_model)


def position_reader_inputs(self, tokens, need_weights=False):
    """PositionReader.forward: (B, N) token ids, N <= max_len."""
    check_tokens(tokens, self.embedding, max_len=self.max_len)


# ============================================================ sparse (lesson 02)
# (the checks of minattn/sparse.py go here)


# ============================================================ multiscale (lesson 03)
# (the checks of minattn/multiscale.py go here)


# ============================================================ xl (lesson 04)
# (the checks of minattn/xl.py go here)


# ============================================================ lstm_attention (lesson 05)
# (the checks of minattn/lstm_attention.py go here)


# ============================================================ ibm1 (lesson 06)
# (the checks of minattn/ibm1.py go here)


# ============================================================ task_heads (lesson 07)
# (the checks of minattn/task_heads.py go here)


# ============================================================ agreement (lesson 08)
# (the checks of minattn/agreement.py go here)


# ============================================================ encoder (lesson 03, 07)
# (the checks of minattn/encoder.py go here)
