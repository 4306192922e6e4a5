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


# ============================================================ sparse (lesson 02)
# (the checks of minattn/sparse.py go here)


# ============================================================ multiscale (lesson 03)
# (the checks of minattn/multiscale.py go here)


# ============================================================ xl (lesson 04)
# The checks of minattn/xl.py and minattn/fast/xl.py: relative attention's arrays, the memory,
# the modules' sizes and inputs, the original implementation's state dict, the KV-cache decoder.
def _like(x):
    return torch.Tensor if isinstance(x, torch.Tensor) else np.ndarray


def _clamp_len(clamp_len) -> None:
    if clamp_len is not None and (isinstance(clamp_len, bool) or not isinstance(clamp_len, int)
                                  or clamp_len < 0):
        fail("clamp_len must be a distance", "None or an int >= 0", repr(clamp_len))


def distance_sizes(n_queries, n_keys, device=None) -> dict:
    """`relative_distances_*`: two sizes >= 0."""
    return dict(n_queries=check_size("n_queries", n_queries), n_keys=check_size("n_keys", n_keys))


def rel_attention_inputs(like):
    """The check of `rel_attention_*` in one library (np.ndarray or torch.Tensor)."""
    def relative_attention_arrays(q, k, v, r, u_bias, v_bias, scale=None) -> dict:
        return _rel_attention_arrays(like, q, k, v, r, u_bias, v_bias, scale)
    return relative_attention_arrays


def _rel_attention_arrays(like, q, k, v, r, u_bias, v_bias, scale) -> dict:
    """q (B, H, Lq, dh), k and v (B, H, Lk, dh) with 0 < Lq <= Lk, r (H, P, dh) with P >= Lk,
    u_bias and v_bias (H, dh): arrays of `like`, one floating dtype, one device, finite (every
    key is seen by the last query, so nothing here hides behind the mask); scale None or a
    number."""
    arrays = dict(q=q, k=k, v=v, r=r, u_bias=u_bias, v_bias=v_bias)
    for name, x in arrays.items():
        check_array(name, x, "float", like=like)
    check_same_dtype(**arrays)
    check_same_device(**arrays)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        fail("q, k, v must be (B, H, N, dh)", "4-dimensional arrays",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    B, H, Lq, dh = q.shape
    if k.shape != v.shape or k.shape[:2] != (B, H) or k.shape[3] != dh:
        fail("k and v must match q's batch, heads and head size", f"(B={B}, H={H}, Lk, {dh})",
             f"k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    Lk = k.shape[2]
    if Lq == 0 or Lk < Lq or B == 0:
        fail("queries must be the last Lq of the Lk key positions (memory first)",
             "0 < Lq <= Lk and B > 0", f"Lq={Lq}, Lk={Lk}, B={B}")
    if r.ndim != 3 or r.shape[0] != H or r.shape[2] != dh:
        fail("r (projected relative encodings) has the wrong shape", f"(H={H}, P, {dh})",
             shape_str(r.shape))
    if r.shape[1] < Lk:
        fail("the relative-position table is too short", f"at least Lk = {Lk} distances "
             f"(0 .. {Lk - 1})", f"{r.shape[1]} rows")
    for name, b in (("u_bias", u_bias), ("v_bias", v_bias)):
        if tuple(b.shape) != (H, dh):
            fail(f"{name} has the wrong shape", f"(H, dh) = ({H}, {dh})", shape_str(b.shape))
    for name, x in dict(arrays, r=r[:, :Lk]).items():  # rows of r past Lk are never read
        check_finite(name, x)
    return {} if scale is None else dict(scale=check_number("scale", scale))


def memory_inputs(memory, hidden, mem_len) -> dict:
    """hidden (B, L, D); memory None or (B, M, D) of hidden's library, dtype and device;
    mem_len an integer >= 0."""
    check_array("hidden", hidden, "float", ndim=3, hint="(B, L, D)")
    if memory is not None:
        check_array("memory", memory, "float", ndim=3, hint="(B, M, D)", like=_like(hidden))
        if memory.shape[0] != hidden.shape[0] or memory.shape[2] != hidden.shape[2]:
            fail("memory", f"(B, M, D) = ({hidden.shape[0]}, M, {hidden.shape[2]}) like hidden",
                 describe(memory))
        check_same_dtype(memory=memory, hidden=hidden)
        check_same_device(memory=memory, hidden=hidden)
    return dict(mem_len=check_size("mem_len", mem_len))


REL_PARAMS = ("w_q", "w_k", "w_v", "w_r", "w_o", "u_bias", "v_bias")


def _rel_params(params) -> None:
    """The arrays of `RelMultiHeadAttention.numpy_params()`: (D, D) weights, (H, dh) biases."""
    if not isinstance(params, dict) or any(n not in params for n in REL_PARAMS):
        missing = [n for n in REL_PARAMS if n not in params] if isinstance(params, dict) else []
        fail("params", f"a dict with {', '.join(REL_PARAMS)} "
             "(RelMultiHeadAttention.numpy_params())",
             f"a dict without {missing}" if missing else describe(params))
    for name in REL_PARAMS:
        check_array(f"params['{name}']", params[name], "float", ndim=2, like=np.ndarray)
        check_finite(f"params['{name}']", params[name])
    D = params["w_q"].shape[1]
    for name in REL_PARAMS[:5]:
        if params[name].shape != (D, D):
            fail(f"params['{name}']", f"shape ({D}, {D})", shape_str(params[name].shape))


def _layer_inputs(x, memory, d_model: int, num_heads: int, dtype=None) -> None:
    """x (B, L, D) and memory (B, M, D) or None; dtype: the weights', which the inputs need."""
    check_array("x", x, "float", hint="(B, L, D)")
    if memory is not None:
        check_array("memory", memory, "float", hint="(B, M, D)", like=_like(x))
    if x.ndim != 3 or x.shape[-1] != d_model or x.shape[0] == 0 or x.shape[1] == 0:
        fail("the segment has the wrong shape", f"(B, L, {d_model}) with B, L > 0",
             shape_str(x.shape))
    if memory is not None:
        if memory.ndim != 3 or memory.shape[0] != x.shape[0] or memory.shape[2] != d_model:
            fail("the memory does not fit the segment", f"(B={x.shape[0]}, M, D={d_model})",
                 shape_str(memory.shape))
        check_same_device(x=x, memory=memory)
        check_same_dtype(x=x, memory=memory)
    if d_model % num_heads or d_model % 2:
        fail("d_model must split evenly into heads and be even", "d_model % num_heads == 0",
             f"d_model={d_model}, num_heads={num_heads}")
    if dtype is not None and x.dtype != dtype:
        fail("x", f"dtype {str(dtype).removeprefix('torch.')}, the weights' (cast the inputs "
             "or the module)", describe(x))
    check_finite("x", x)
    if memory is not None:
        check_finite("memory", memory)


def rel_layer_inputs(x, memory, params, num_heads, clamp_len=None) -> dict:
    """`rel_multi_head_attention_np`: the weights of `numpy_params()`, x (B, L, D) and memory
    (B, M, D) or None in their dtype, num_heads >= 1 splitting D, clamp_len None or >= 0."""
    _rel_params(params)
    num_heads = check_size("num_heads", num_heads, 1)
    _layer_inputs(x, memory, params["w_q"].shape[1], num_heads, dtype=params["w_q"].dtype)
    _clamp_len(clamp_len)
    return dict(num_heads=num_heads)


def scores_table(like):
    """The check of `rel_shift_np` (like=np.ndarray) or `rel_shift_torch` (torch.Tensor):
    scores (..., Lq, Lk) of that library."""
    def scores_by_distance(scores) -> None:
        check_array("scores", scores, None, min_ndim=2, hint="(..., Lq, Lk)", like=like)
    return scores_by_distance


def _heads(d_model, num_heads) -> tuple[int, int]:
    d_model, num_heads = check_size("d_model", d_model, 1), check_size("num_heads", num_heads, 1)
    if d_model % num_heads or d_model % 2:
        fail("d_model must split evenly into heads and be even", "d_model % num_heads == 0",
             f"d_model={d_model}, num_heads={num_heads}")
    return d_model, num_heads


def _attend(attend) -> None:
    if attend is not None and not callable(attend):
        fail("attend", "None (the explicit reference) or a function (q, k, v, r, u_bias, "
             "v_bias) -> output, e.g. minattn.fast.xl.rel_attention_fast_torch", describe(attend))


def rel_attention_sizes(self, d_model, num_heads, max_len=4096, attend=None) -> dict:
    """`RelMultiHeadAttention(...)`: d_model even and split by num_heads, max_len >= 1."""
    d_model, num_heads = _heads(d_model, num_heads)
    _attend(attend)
    return dict(d_model=d_model, num_heads=num_heads, max_len=check_size("max_len", max_len, 1))


def rel_attention_call(self, x, memory=None, need_weights=False, clamp_len=None) -> None:
    """`RelMultiHeadAttention.forward`: x (B, L, D) and memory (B, M, D) or None in the
    weights' dtype and device, M + L within the module's max_len."""
    weight = self.q_proj.weight
    _layer_inputs(x, memory, self.d_model, self.num_heads, dtype=weight.dtype)
    check_same_device(x=x, memory=memory, weights=weight)
    n_keys = x.shape[1] + (0 if memory is None else memory.shape[1])
    if n_keys > self.max_len:
        fail("more positions than the relative-position table holds",
             f"M + L <= max_len = {self.max_len}", f"M + L = {n_keys}")
    _clamp_len(clamp_len)


def xl_lm_sizes(self, vocab_size, d_model=128, num_heads=4, num_layers=2, d_ff=None, mem_len=64,
                pre_norm=True, max_len=4096, clamp_len=None, attend=None) -> dict:
    """`TransformerXL(...)`: sizes >= 1 (mem_len >= 0), clamp_len None or >= 0."""
    d_model, num_heads = _heads(d_model, num_heads)
    _clamp_len(clamp_len)
    _attend(attend)
    return dict(vocab_size=check_size("vocab_size", vocab_size, 1), d_model=d_model,
                num_heads=num_heads, num_layers=check_size("num_layers", num_layers, 1),
                d_ff=None if d_ff is None else check_size("d_ff", d_ff, 1),
                mem_len=check_size("mem_len", mem_len), max_len=check_size("max_len", max_len, 1))


def _tokens(tokens, vocab_size: int, weight) -> None:
    check_array("tokens", tokens, "int", ndim=2, hint="(B, L) token ids", like=torch.Tensor)
    if 0 in tokens.shape:
        fail("tokens", "(B, L) token ids with B, L > 0", describe(tokens))
    check_ids("tokens", tokens, vocab_size)
    check_same_device(tokens=tokens, weights=weight)


def xl_lm_call(self, tokens, memories=None, mem_len=None, need_weights=False, clamp_len=None,
               stop_gradient=True) -> dict:
    """`TransformerXL.forward`: tokens (B, L) ids in the vocabulary; memories None (the start of
    a text: one empty memory per layer) or one (B, M, D) tensor or None per layer, as the last
    call returned them; mem_len (default: the model's) and clamp_len (default: the model's)."""
    n_layers = len(self.layers)
    if memories is None:
        memories = [None] * n_layers
    if not isinstance(memories, (list, tuple)) or len(memories) != n_layers:
        fail("memories", f"a list with one memory per layer ({n_layers}), or None",
             describe(memories))
    _tokens(tokens, self.vocab_size, self.embedding.weight)
    for memory in memories:
        if memory is not None and (not isinstance(memory, torch.Tensor) or memory.ndim != 3
                                   or memory.shape[0] != tokens.shape[0]
                                   or memory.shape[2] != self.d_model):
            fail("memories", f"None or (B, M, D) = ({tokens.shape[0]}, M, {self.d_model}) "
                 "tensors, as the last call returned them", describe(memory))
    _clamp_len(clamp_len)
    return dict(memories=list(memories),
                mem_len=self.mem_len if mem_len is None else check_size("mem_len", mem_len),
                clamp_len=self.clamp_len if clamp_len is None else clamp_len)


def vanilla_lm_sizes(self, vocab_size, d_model=128, num_heads=4, num_layers=2, d_ff=None) -> dict:
    """`VanillaLM(...)`: sizes >= 1, d_model even and split by num_heads."""
    d_model, num_heads = _heads(d_model, num_heads)
    return dict(vocab_size=check_size("vocab_size", vocab_size, 1), d_model=d_model,
                num_heads=num_heads, num_layers=check_size("num_layers", num_layers, 1),
                d_ff=None if d_ff is None else check_size("d_ff", d_ff, 1))


def vanilla_lm_call(self, tokens, memories=None, mem_len=None) -> None:
    """`VanillaLM.forward`: tokens (B, L) ids in the vocabulary (memories are ignored)."""
    _tokens(tokens, self.embedding.num_embeddings, self.embedding.weight)


def official_state(state, num_heads) -> dict:
    """`official_to_ours`: an original Transformer-XL state dict (div_val=1, d_head = D / H,
    tied or untied r_w_bias / r_r_bias of shape (H, dh))."""
    num_heads = check_size("num_heads", num_heads, 1)
    if not isinstance(state, dict) or "word_emb.emb_layers.0.weight" not in state:
        keys = sorted(state)[:4] if isinstance(state, dict) else describe(state)
        fail("not an original Transformer-XL state dict", "'word_emb.emb_layers.0.weight'",
             f"keys {keys}…")
    if any(k.startswith("word_emb.emb_projs") or k.startswith("crit.out_projs") for k in state):
        fail("adaptive embeddings are not supported", "div_val=1, d_embed = d_model",
             "emb_projs / out_projs in the state dict")
    D = state["word_emb.emb_layers.0.weight"].shape[1]
    dh = D // num_heads
    for key, value in state.items():
        if key.endswith("dec_attn.qkv_net.weight") and tuple(value.shape) != (3 * D, D):
            fail("qkv_net has an unsupported shape (d_head must be D / H)",
                 shape_str((3 * D, D)), shape_str(value.shape))
        if key.endswith(("r_w_bias", "r_r_bias")) and tuple(value.shape) != (num_heads, dh):
            fail(f"{key} has the wrong shape", f"(H, dh) = ({num_heads}, {dh})",
                 shape_str(value.shape))
    layers = {k.split(".")[1] for k in state if k.startswith("layers.")}
    for n in layers:
        for old in ("r_w_bias", "r_r_bias"):
            if f"layers.{n}.dec_attn.{old}" not in state and old not in state:
                fail(f"{old} missing", f"(H, dh) = ({num_heads}, {dh}), shared or per layer",
                     "missing")
    return dict(num_heads=num_heads)


def decoder_setup(self, model, context, batch=1) -> dict:
    """`XLDecoder(model, context, batch)`: a TransformerXL, context >= 1 within every layer's
    max_len (context + 1 slots), batch >= 1."""
    if type(model).__name__ != "TransformerXL":
        fail("XLDecoder reads a TransformerXL", "a minattn.xl.TransformerXL",
             type(model).__name__)
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        fail("XLDecoder's context", "an integer >= 1", repr(context))
    for layer in model.layers:
        if context + 1 > layer.attention.max_len:
            fail("more positions than the relative-position table holds",
                 f"context + 1 <= max_len = {layer.attention.max_len}",
                 f"context + 1 = {context + 1}")
    return dict(batch=check_size("batch", batch, 1))


def decoder_prompt(self, tokens) -> None:
    """`XLDecoder.prefill`: (B, P) token ids, B the decoder's batch."""
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.shape[0] != self.batch:
        fail("the prompt", f"(B={self.batch}, P) token ids", describe(tokens))


def decoder_token(self, token) -> None:
    """`XLDecoder.step`: (B, 1) token ids."""
    if not isinstance(token, torch.Tensor) or tuple(token.shape) != (self.batch, 1):
        fail("one new token per row", f"({self.batch}, 1) token ids", describe(token))


def decoder_on_cuda(self) -> None:
    """`XLDecoder.capture`: a model on a CUDA device."""
    if self.device.type != "cuda":
        fail("XLDecoder.capture records a CUDA graph", "a model on a CUDA device",
             str(self.device))


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
