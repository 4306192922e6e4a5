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
# (the checks of minattn/xl.py go here)


# ============================================================ lstm_attention (lesson 05)
# (the checks of minattn/lstm_attention.py go here)


# ============================================================ ibm1 (lesson 06)
# (the checks of minattn/ibm1.py go here)


# ============================================================ task_heads (lesson 07)
# Token states (B, L, D) of a frozen encoder, right-padded (mask (B, L) bool, True on real
# tokens), every sentence with its first token ([CLS]) real. What padding holds never counts:
# the checks that replace arguments return the states with their padding set to 0.
def check_token_states(states, mask, name: str = "states", mask_name: str = "mask",
                       like=None) -> None:
    """states (B, L, D) float, mask (B, L) bool, right-padded (1…1 0…0), with at least one real
    token (the first); one library and device; the real tokens' states finite (padding may
    hold anything: the heads select it away). like: np.ndarray or torch.Tensor (default:
    whichever `states` is)."""
    like = like or (torch.Tensor if isinstance(states, torch.Tensor) else np.ndarray)
    check_array(name, states, "float", hint="(B, L, D)", like=like)
    if states.ndim != 3 or 0 in states.shape:
        fail(f"{name} have the wrong shape", "(B, L, D) with B, L, D > 0", shape_str(states.shape))
    if not isinstance(mask, like):
        fail(mask_name, f"a {'torch' if like is torch.Tensor else 'NumPy'} bool mask like "
             f"{name}", describe(mask))
    if tuple(mask.shape) != tuple(states.shape[:2]):
        fail(f"the mask of {name} does not fit ({mask_name})",
             f"mask {shape_str(states.shape[:2])} bool", f"mask {shape_str(mask.shape)}")
    if mask.dtype not in (np.bool_, torch.bool):
        fail(f"the mask of {name} must be boolean (True = real token; {mask_name})",
             "dtype bool", f"dtype {mask.dtype}")
    check_same_device(**{name: states, mask_name: mask})
    if not bool(mask[:, 0].all()):
        fail(f"every sentence of {name} needs its first token ({mask_name})",
             "mask[:, 0] all True", "a row whose first token is padding")
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        fail(f"{mask_name} must be right-padded", "each row 1…1 0…0 (real tokens first)",
             "a row with padding before a real token")
    check_finite(name, states, where=mask[..., None])


def pool_np(states, mask) -> None:
    """`cls_pool_np`, `mean_pool_np`: NumPy token states and their mask."""
    check_token_states(states, mask, like=np.ndarray)


def pool_torch(states, mask) -> None:
    """`cls_pool_torch`, `mean_pool_torch`: torch token states and their mask."""
    check_token_states(states, mask, like=torch.Tensor)


def layer_norm_inputs(x, eps) -> None:
    """x (..., D) float and finite, D >= 1; eps > 0 (a constant row has variance 0)."""
    check_array("x", x, "float", min_ndim=1, hint="(..., D)")
    if x.shape[-1] == 0:
        fail("x", "at least one feature to normalise", describe(x))
    check_finite("x", x)
    check_number("eps", eps, above=0)


def attention_pool_inputs(states, mask, layers, num_heads, normalize=True, query=None) -> dict:
    """`attention_pool_np`: NumPy token states, a non-empty list of layer parameters, and an
    optional query (D,); returns the states with their padding set to 0."""
    check_token_states(states, mask, like=np.ndarray)
    if not layers or not isinstance(layers, (list, tuple)):
        fail("layers: attention_pool needs at least one layer", "a non-empty list of params",
             describe(layers))
    if query is not None and (not isinstance(query, np.ndarray) or query.shape
                              != states.shape[-1:]):
        fail("query", f"a NumPy vector ({states.shape[-1]},)", describe(query))
    return dict(states=hide(states, mask[..., None]))


def check_pair(a, a_mask, b, b_mask) -> None:
    """Sentences A and B of each pair: token states of the same batch size, width and dtype."""
    check_token_states(a, a_mask, "sentences A (a)", "a_mask")
    check_token_states(b, b_mask, "sentences B (b)", "b_mask")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[2]:
        fail("a pair batch needs as many A as B sentences, of the same width",
             f"b of shape ({a.shape[0]}, Lb, {a.shape[2]})", f"{shape_str(b.shape)}")
    check_same_dtype(a=a, b=b)
    check_same_device(a=a, b=b)


def check_read(read) -> None:
    if read not in ("mean", "first"):
        fail("read: unknown read-out of the cross-attention head", "'mean' or 'first'",
             repr(read))


def cross_attention_pool_inputs(a, a_mask, b, b_mask, layers, num_heads, read="mean") -> dict:
    """`cross_attention_pool_np`: a NumPy pair batch and its read-out; padding set to 0."""
    check_array("a", a, "float", like=np.ndarray, hint="(B, La, D)")
    check_pair(a, a_mask, b, b_mask)
    check_read(read)
    return dict(a=hide(a, a_mask[..., None]), b=hide(b, b_mask[..., None]))


def pearson_inputs(pred, target, eps=1e-12) -> None:
    """Two vectors of one length >= 2, one library, dtype and device, finite; eps >= 0."""
    like = torch.Tensor if isinstance(pred, torch.Tensor) else np.ndarray
    check_array("pred", pred, "float", like=like)
    check_array("target", target, "float", like=like)
    if pred.ndim != 1 or tuple(pred.shape) != tuple(target.shape) or pred.shape[0] < 2:
        fail("pearson_loss needs two vectors of the same length >= 2", "pred (N,), target (N,)",
             f"pred {shape_str(pred.shape)}, target {shape_str(target.shape)}")
    check_same_dtype(pred=pred, target=target)
    check_same_device(pred=pred, target=target)
    check_finite("pred", pred)
    check_finite("target", target)
    check_number("eps", eps, low=0)


def pair_feature_inputs(u, v) -> None:
    if not isinstance(u, torch.Tensor) or not isinstance(v, torch.Tensor) or \
            u.shape != v.shape or u.ndim != 2:
        fail("pair_features needs two (B, D) tensors of the same shape (u, v)",
             "u (B, D), v (B, D)", f"u {describe(u)}, v {describe(v)}")
    check_same_device(u=u, v=v)


def is_attention_layer(name: str, mha) -> None:
    """A minattn MultiHeadAttention (its four projections), told by what it holds."""
    if not isinstance(mha, torch.nn.Module) or not all(
            hasattr(mha, p) for p in ("q_proj", "k_proj", "v_proj", "out_proj", "num_heads")):
        fail(name, "a minattn MultiHeadAttention", describe(mha))


def check_head_input(name: str, x, module) -> None:
    """x must have the head's width, dtype and device (its first layer's)."""
    weight = module.layers[0].q_proj.weight
    d_model = module.layers[0].d_model
    if x.shape[-1] != d_model or x.dtype != weight.dtype:
        fail(name, f"(B, L, {d_model}) {str(weight.dtype).removeprefix('torch.')} states, the "
             "head's width and dtype (cast the states or the head)", describe(x))
    check_same_device(**{name: x, "weights": weight})


def attention_pool_forward(self, states, mask, need_weights=False) -> dict:
    """`AttentionPool.forward`: torch token states of the head's width; padding set to 0."""
    check_token_states(states, mask, like=torch.Tensor)
    check_head_input("states", states, self)
    return dict(states=hide(states, mask[..., None]))


def cross_attention_pool_forward(self, a, a_mask, b, b_mask, need_weights=False) -> dict:
    """`CrossAttentionPool.forward`: a torch pair batch of the head's width; padding set to 0."""
    check_array("a", a, "float", like=torch.Tensor, hint="(B, La, D)")
    check_pair(a, a_mask, b, b_mask)
    check_head_input("a", a, self)
    return dict(a=hide(a, a_mask[..., None]), b=hide(b, b_mask[..., None]))


def fast_pool_inputs(states, mask, mha, normalize=True) -> dict:
    """`attention_pool_fast_torch`: torch token states of the layer's width; padding set to 0."""
    check_token_states(states, mask, like=torch.Tensor)
    is_attention_layer("mha", mha)
    weight = mha.q_proj.weight
    if states.shape[-1] != mha.d_model or states.dtype != weight.dtype:
        fail("states", f"(B, L, {mha.d_model}) {str(weight.dtype).removeprefix('torch.')} "
             "states, the layer's width and dtype", describe(states))
    check_same_device(states=states, weights=weight)
    return dict(states=hide(states, mask[..., None]))


def head_layers(owner, d_model, num_heads, num_layers, init) -> dict:
    """`attention_layers`: at least one layer, a known init; returns num_layers as an int."""
    if isinstance(num_layers, (int, np.integer)) and not isinstance(num_layers, bool) \
            and num_layers < 1:
        fail(f"num_layers: {owner} needs at least one layer", "num_layers >= 1",
             f"{num_layers}")
    if init not in ("default", "u09"):
        fail("init: unknown initialisation", "'default' or 'u09'", repr(init))
    return dict(num_layers=check_size("num_layers", num_layers, 1))


def u09_inputs(mha, generator=None) -> None:
    is_attention_layer("mha", mha)


def model_states(self, states, mask, need_weights=False) -> None:
    """`SentenceClassifier.forward`: token states in the model's dtype."""
    check_token_states(states, mask, like=torch.Tensor)
    weight = next(self.parameters()).dtype
    if states.dtype != weight:
        fail("states", f"dtype {str(weight).removeprefix('torch.')}, the model's",
             describe(states))


def model_pair(self, a, a_mask, b, b_mask, need_weights=False) -> None:
    """`PairModel.forward` and `embed_pair`: a torch pair batch in the model's dtype."""
    check_array("a", a, "float", like=torch.Tensor, hint="(B, La, D)")
    check_pair(a, a_mask, b, b_mask)
    weight = next(self.parameters()).dtype
    if a.dtype != weight:
        fail("a", f"dtype {str(weight).removeprefix('torch.')}, the model's", describe(a))


# ============================================================ agreement (lesson 08)
# (the checks of minattn/agreement.py go here)


# ============================================================ encoder (lesson 03, 07)
def encoder_inputs(self, input_ids, attention_mask, need_weights=False, token_type_ids=None,
                   last_layer=None) -> dict:
    """`MiniLMEncoder.run`: ids (B, L) int64 inside the vocabulary, L within the position table;
    attention_mask (B, L) bool or 0/1 integers, right-padded; token_type_ids (B, L) or None.
    Returns the mask as bool and the token types (zeros by default)."""
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
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        fail("attention_mask is not right-padded", "each row 1…1 0…0 (real tokens first)",
             "a row with a 0 before a 1")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    elif not isinstance(token_type_ids, torch.Tensor) or token_type_ids.shape != input_ids.shape:
        fail("token_type_ids do not match input_ids", shape_str(input_ids.shape),
             describe(token_type_ids))
    else:
        check_ids("token_type_ids", token_type_ids, self.config.type_vocab_size)
    return dict(attention_mask=mask, token_type_ids=token_type_ids)


def top_layers_inputs(self, states, mask) -> None:
    """`TopLayers.forward`: hidden states (B, L, D) and their right-padded bool mask."""
    if not isinstance(states, torch.Tensor) or not isinstance(mask, torch.Tensor) or \
            states.ndim != 3 or mask.shape != states.shape[:2] or mask.dtype != torch.bool:
        fail("TopLayers inputs do not fit (states, mask)", "states (B, L, D) and mask (B, L) bool",
             f"states {describe(states)}, mask {describe(mask)}")
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        fail("mask must be right-padded", "each row 1…1 0…0", "a row with a 0 before a 1")


def is_text(t) -> bool:
    """A sentence (str) or a pair of sentences (a, b), encoded "[CLS] a [SEP] b [SEP]"."""
    return isinstance(t, str) or (isinstance(t, tuple) and len(t) == 2
                                  and all(isinstance(s, str) for s in t))


def check_texts(texts) -> None:
    if isinstance(texts, (str, tuple)) or not texts or not all(is_text(t) for t in texts):
        fail("texts must be a non-empty list of strings or of (a, b) pairs of strings",
             "list[str] or list[tuple[str, str]]",
             repr(texts)[:60] if not isinstance(texts, list) else f"list of {len(texts)}")


def texts_inputs(tokenizer, texts, *args, **kwargs) -> None:
    """`encode_batch`, `length_sorted_batches`: a list of sentences or of pairs of them."""
    check_texts(texts)


def batches_inputs(tokenizer, texts, batch_size) -> dict:
    check_texts(texts)
    return dict(batch_size=check_size("batch_size", batch_size, 1))


def embed_inputs(encoder, tokenizer, texts, batch_size=64, normalize=True,
                 progress=False) -> dict:
    check_texts(texts)
    return dict(batch_size=check_size("batch_size", batch_size, 1))
