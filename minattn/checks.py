"""The vocabulary of the input contracts, the decorator that applies them, and the named rules
that a contract's specs cannot say.

A mechanism's file states its math; what a student will get wrong — shapes that don't line up,
a mask of the wrong dtype, a window < 0, an empty batch, tensors on two devices — is refused
before the math runs, by the contract written above the function, one spec per argument:

    @checked(q="float* (..., Lq, d)", k="float* (..., Lk, d)", v="float* (..., Lk, dv)",
             mask="bool? ~(..., Lq, Lk)", scale="number?", rules=[c.seen_finite])
    def attention_np(q, k, v, mask=None, scale=None):
        scale = ...           # the body starts with the math

A refusal is a ValueError "<argument>: expected <what>, got <what was given>". A check only
refuses: defaults, masks folded together, what a mask hides set to 0 are lines of the
function's own body, so `fn.__wrapped__` on valid input computes what `fn` does (a check that
returns a value is a TypeError). The spec grammar is at `Spec`; each mechanism's named rules
follow in a section of its own.
Nothing here imports a mechanism.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from typing import Callable, Sequence

import numpy as np
import torch


def checked(*, rules: Sequence[Callable] = (), **specs: str):
    """Decorate a public function so that its arguments are checked first (see the module's
    docstring): one spec per argument (`q="float (..., Lq, d)"`, see `Spec`), then the named
    `rules` an axis string cannot say, each called with the arguments it names. The function
    then runs on its arguments as given. The decorated function keeps its name, docstring and
    signature."""

    def decorate(fn):
        signature = inspect.signature(fn)
        library = np.ndarray if fn.__name__.endswith("_np") else \
            torch.Tensor if fn.__name__.endswith("_torch") or "." in fn.__qualname__ else None
        contract = Contract(specs, rules, library, signature.parameters)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            contract(**bound.arguments)
            return fn(*args, **kwargs)

        call.check = contract
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


def _surely_finite(x, minus_inf_ok: bool) -> bool:
    """A one-reduction test that passes every finite array or tensor: NaN and ±inf propagate
    through a sum (NaN + a = NaN, inf + a = inf, inf - inf = NaN), and NaN and +inf through a
    max. False only asks for the exact element-wise check, which also tells an overflowing sum
    of finite values from a bad value. No boolean array the size of x is written, so a finite
    x is read once and nothing else is touched."""
    if isinstance(x, torch.Tensor):
        x = x.detach()  # a leaf that requires grad is read, not differentiated
    if minus_inf_ok:  # -inf is allowed: look at the largest value only
        top = float(x.max())
        return top == top and top != math.inf  # NaN is the one value not equal to itself
    if isinstance(x, np.ndarray):  # float64 sums: no overflow warning for float16/32 values
        return bool(np.isfinite(x.sum(dtype=np.float64) if x.itemsize < 8 else x.sum()))
    half = x.element_size() < 4  # float16 overflows at 65504: sum in float32
    return bool(torch.isfinite(x.sum(dtype=torch.float32) if half else x.sum()))


def check_finite(name: str, x, where=None, minus_inf_ok: bool = False) -> None:
    """x must be finite (no NaN, no ±inf) wherever `where` (bool, broadcastable) is True,
    everywhere when where is None; minus_inf_ok lets −inf through (a score of −inf is a
    weight of exactly 0). A finite x is read once (`_surely_finite`); skipped while
    torch.compile traces, and for activations (see `in_graph`). `where` may be a function
    returning the mask: it is called only when x holds a bad value somewhere."""
    if isinstance(x, torch.Tensor):
        if _tracing() or not x.is_floating_point() or x.device.type == "meta" or in_graph(x) \
                or x.numel() == 0 or _surely_finite(x, minus_inf_ok):
            return
        bad = torch.isnan(x) | (x == math.inf) if minus_inf_ok else ~torch.isfinite(x)
        where = where() if callable(where) else where
        if where is not None:
            bad = bad & where
        if not bool(bad.any()):
            return
        count, first = int(bad.sum()), tuple(int(i) for i in torch.nonzero(bad)[0])
        first_value = float(torch.broadcast_to(x.detach(), bad.shape)[first])
    else:
        x = np.asarray(x)
        if x.dtype.kind != "f" or x.size == 0 or _surely_finite(x, minus_inf_ok):
            return
        bad = np.isnan(x) | (x == np.inf) if minus_inf_ok else ~np.isfinite(x)
        where = where() if callable(where) else where
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


# ----------------------------------------------------------------------------- specs
# One string per argument, read once when the function is decorated:
#   "float (..., Lq, d)"   an array of floats whose axes are named; a name binds one size
#                          across the arguments, "..." the leading axes (all of them >= 1)
#   "bool? ~(..., Lq, Lk)" `?`: may be None; `~`: broadcastable to those axes
#   "float* (B, N, D)"     `*`: its values are not read here (a named rule reads them)
#   "float? (B, M?, D)"    an axis written `M?` may be empty (M = 0)
#   "int >= 1", "number > 0", "number? >= 0", "bool", "callable?", "one of a, b, c"
# Arrays are NumPy for a function named *_np, tensors for *_torch and for modules' methods,
# else of the first array's library; float arrays share one dtype and are finite, tensors
# share one device. The message is generated: "q: expected float (..., Lq, d) with d = 8,
# got float32 tensor (2, 3, 4) on cpu".
ARRAY_KINDS = ("float", "int", "bool", "real")
_ARRAY = re.compile(r"(\w+)(\??)(\*?)\s+(~?)\((.*)\)")
_SCALAR = re.compile(r"(int|number|bool|callable)(\??)(?:\s*(>=|>|<=)\s*(\S+))?")


class Spec:
    """One argument's parsed spec (see above)."""

    def __init__(self, name: str, text: str):
        self.name, self.text, self.op, self.bound = name, text, None, None
        array, scalar = _ARRAY.fullmatch(text), _SCALAR.fullmatch(text)
        if array and array[1] in ARRAY_KINDS:
            self.kind, optional, unread, broadcast, axes = array.groups()
            self.optional, self.read, self.broadcast = bool(optional), not unread, bool(broadcast)
            self.axes = tuple(a.strip() for a in axes.split(",") if a.strip())
            self.empty_ok = {a[:-1] for a in self.axes if a.endswith("?")}  # "M?": M may be 0
            self.axes = tuple(a.removesuffix("?") for a in self.axes)
            self.dots = self.axes[:1] == ("...",)  # read once here, not at each call
            self.named = tuple(int(a) if a.isdigit() else a for a in self.axes[self.dots:])
            self.kinds = ("float", "int", "bool") if self.kind == "real" else (self.kind,)
            self.text = text.replace("?", "").replace("*", "")
        elif scalar:
            self.kind, optional, self.op, bound = scalar.groups()
            self.optional, self.axes, self.bound = bool(optional), None, \
                None if bound is None else float(bound)
            self.text = text.replace("?", "")
        elif text.startswith("one of "):
            self.kind, self.axes, self.optional = "choice", None, False
            self.choices = tuple(c.strip() for c in text[7:].split(","))
        else:
            raise ValueError(f"spec of {name}: expected one of the forms of `Spec`, got {text!r}")
        if self.axes is not None and "..." in self.axes[1:]:
            raise ValueError(f"spec of {name}: '...' comes first, got {text!r}")

    def expected(self, sizes: dict) -> str:
        """The spec, with the sizes its axes are bound to by the other arguments."""
        known = [f"{a} = {sizes[a]}" for a in self.axes or () if a in sizes]
        return self.text + (f" with {', '.join(known)}" if known else "")

    def check_scalar(self, value) -> None:
        name, kind, op, bound = self.name, self.kind, self.op, self.bound
        if kind == "int":
            check_size(name, value, 0 if bound is None else int(bound) + (op == ">"))
        elif kind == "number":
            check_number(name, value, low=bound if op == ">=" else None,
                         high=bound if op == "<=" else None, above=bound if op == ">" else None)
        elif kind == "bool" and not isinstance(value, (bool, np.bool_)):
            fail(name, "True or False", describe(value))
        elif kind == "callable" and not callable(value):
            fail(name, "a function", describe(value))
        elif kind == "choice" and value not in self.choices:
            fail(name, self.text, describe(value))

    def bind(self, x, sizes: dict) -> None:
        """Bind x's axes to the sizes named so far, or refuse it."""
        shape, named = tuple(x.shape), self.named
        extra = len(shape) - len(named)
        if extra < 0 or extra and not self.dots:
            fail(self.name, self.expected(sizes), describe(x))
        own = {}  # the axes this argument binds first
        if self.dots:
            lead = shape[:extra]
            if sizes.get("...", lead) != lead:
                fail(self.name, self.expected(sizes), describe(x))
            if 0 in lead:
                fail(self.name, self.expected(sizes) + ", every size >= 1", describe(x))
            own["..."] = lead
        for axis, size in zip(named, shape[extra:]):
            want = axis if axis.__class__ is int else sizes[axis] if axis in sizes else \
                own.setdefault(axis, size)
            if size != want:
                fail(self.name, self.expected(sizes if axis in sizes else {**sizes, **own}),
                     describe(x))
            if size < 1 and axis not in self.empty_ok:
                fail(self.name, self.expected(sizes) + ", every size >= 1", describe(x))
        sizes.update(own)

    def fits(self, x, sizes: dict) -> None:
        """A `~` spec: x broadcasts to the axes as bound by the other arguments."""
        named = self.axes[1:] if self.axes[:1] == ("...",) else self.axes
        target = tuple(sizes.get("...", ())) + tuple(
            int(a) if a.isdigit() else sizes.get(a) for a in named)
        if x.ndim > len(target) or any(s != 1 and t is not None and s != t for s, t in
                                       zip(reversed(x.shape), reversed(target))):
            fail(self.name, "a shape broadcastable to " + shape_str(
                "?" if t is None else t for t in target), describe(x))


class Contract:
    """What `checked(**specs, rules=...)` runs before a call: every spec, then the rules."""

    def __init__(self, specs: dict, rules: Sequence[Callable], library, parameters=None):
        self.specs = [Spec(name, text) for name, text in specs.items()]
        self.specs.sort(key=lambda s: getattr(s, "broadcast", False))  # bind, then broadcast
        self.library = library
        self.rules = [(rule, tuple(n for n in inspect.signature(rule).parameters
                                   if parameters is None or n in parameters)) for rule in rules]

    def __call__(*contract_and_args, **args) -> None:
        self = contract_and_args[0]  # a method's own `self` is among the arguments
        sizes, library, dtype, device = {}, self.library, None, None
        for spec in self.specs:
            x = args[spec.name]
            if x is None and spec.optional:
                continue
            if spec.axes is None:
                spec.check_scalar(x)
                continue
            if library is None:
                library = torch.Tensor if isinstance(x, torch.Tensor) else np.ndarray
            kind = dtype_kind(x) if isinstance(x, library) else None
            if kind not in spec.kinds:
                what = "a NumPy array" if library is np.ndarray else "a tensor"
                if spec.kind == "bool" and "mask" in spec.name:
                    what += ", True = may attend: an additive float mask m is m == 0, a 0/1 " \
                        "one m > 0"
                fail(spec.name, f"{spec.expected(sizes)} ({what})", describe(x))
            if spec.broadcast:
                spec.fits(x, sizes)
            else:
                spec.bind(x, sizes)
            if kind == "float":
                if dtype is None:
                    dtype = (spec.name, x.dtype)
                elif x.dtype != dtype[1]:
                    fail(spec.name, f"{spec.text} of dtype {dtype_name(dtype[1])} ({dtype[0]}'s: "
                         "cast them first)", describe(x))
                if spec.read:
                    check_finite(spec.name, x)
            if library is torch.Tensor:
                if device is None:
                    device = (spec.name, x.device)
                elif x.device != device[1]:
                    fail(spec.name, f"{spec.text} on {device[0]}'s device, {device[1]}",
                         describe(x))
        for rule, names in self.rules:
            if rule(**{n: args[n] for n in names}) is not None:
                raise TypeError(f"the rule {rule.__name__} returned a value: a check only "
                                "refuses (what the function computes is in its body)")


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ============================================================ attention (lesson 01)
# The rules of minattn/attention.py that its specs cannot say.
def check_seen_finite(q, k, v, mask=None, names=("q", "k", "v")) -> None:
    """q, k, v finite wherever the mask lets them count. What a mask hides (the queries of
    rows that see no key, the keys and values no query sees) may hold anything, NaN in padding
    say: the function's body selects it away (`hide`). NumPy and torch alike; a mask of up to
    4 axes (B, H, Lq, Lk) against (B, N, D) inputs when `names` are multi-head attention's."""
    rows = keys = None
    if mask is not None and names[0] == "query":  # (B, N, D) inputs: seen by some head
        m = mask[(None,) * (4 - mask.ndim)]
        rows, keys = (lambda: m.any(-1).any(1)[..., None]), (lambda: m.any(-2).any(1)[..., None])
    elif mask is not None:
        rows, keys = (lambda: mask.any(-1)[..., None]), (lambda: mask.any(-2)[..., None])
    for name, x, seen in zip(names, (q, k, v), (rows, keys, keys)):
        check_finite(name, x, where=seen)


def seen_finite(q, k, v, mask=None) -> None:
    """Attention's q, k, v: finite where the mask lets them count (`check_seen_finite`)."""
    check_seen_finite(q, k, v, mask)


def scores_count_where_allowed(scores, mask=None) -> None:
    """A score is finite or −inf where the mask allows it (exp(+inf − max) is NaN; −inf is a
    weight of 0); what the mask hides may hold anything."""
    check_finite("scores", scores, where=mask, minus_inf_ok=True)


def mask_or_causal(mask, is_causal) -> None:
    """`attention_fast_torch`: a mask or is_causal=True, not both."""
    if is_causal and mask is not None:
        fail("mask", "a mask or is_causal=True, not both (fold causality into the mask with "
             "causal_mask_torch)", f"{describe(mask)} and is_causal=True")


def heads_divide(x, num_heads) -> None:
    """`split_heads_*`: num_heads divides the width D of x (B, N, D)."""
    if x.shape[-1] % num_heads:
        fail("num_heads", f"a divisor of the width D = {x.shape[-1]}", describe(num_heads))


def heads_divide_query(query, num_heads) -> None:
    """`multi_head_attention_np`: num_heads divides the width D of query (B, Lq, D)."""
    heads_divide(query, num_heads)


def heads_divide_model(d_model, num_heads) -> None:
    """`MultiHeadAttention(d_model, num_heads)`: d_model splits evenly into heads."""
    if d_model % num_heads:
        fail("num_heads", f"a divisor of d_model = {d_model}", describe(num_heads))


def even_width(d_model) -> None:
    """A sinusoid table has a sine and a cosine per frequency: an even d_model."""
    if d_model % 2:
        fail("d_model", "an even integer (a sine and a cosine per frequency)", describe(d_model))


def floating_dtype(dtype) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        fail("dtype", "a floating torch dtype such as torch.float32", describe(dtype))


def lengths_within(lengths, max_len, like) -> None:
    """lengths (B,) integers in [0, max_len] of `like`'s library (NumPy: a list too)."""
    if like is np.ndarray and isinstance(lengths, (list, tuple)):
        lengths = np.asarray(lengths)  # a list of lengths is read as padding_mask_np does
    check_array("lengths", lengths, "int", ndim=1, hint="(B,) integers", like=like)
    if lengths.shape[0] and (int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        fail("lengths", f"integers in [0, max_len = {max_len}]",
             f"lengths from {int(lengths.min())} to {int(lengths.max())}")


def lengths_np(lengths, max_len) -> None:
    lengths_within(lengths, max_len, np.ndarray)


def lengths_torch(lengths, max_len) -> None:
    lengths_within(lengths, max_len, torch.Tensor)


MHA_PARAMS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")


def mha_params(params, query) -> None:
    """The eight arrays of `MultiHeadAttention.numpy_params()` for query's width D and dtype:
    (D, D) weights, (D,) biases, finite."""
    if not isinstance(params, dict) or any(n not in params for n in MHA_PARAMS):
        missing = [n for n in MHA_PARAMS if n not in params] if isinstance(params, dict) else []
        fail("params", f"a dict with {', '.join(MHA_PARAMS)} (MultiHeadAttention.numpy_params())",
             f"a dict without {missing}" if missing else describe(params))
    D = query.shape[-1]
    for name in MHA_PARAMS:
        want = (D, D) if name.startswith("w") else (D,)
        given = params[name]
        if not isinstance(given, np.ndarray) or given.shape != want or given.dtype != query.dtype:
            fail(f"params['{name}']", f"a {query.dtype} array {shape_str(want)} (D of query)",
                 describe(given))
        check_finite(f"params['{name}']", given)


def mha_masks(query, key, value, num_heads, mask=None, key_padding_mask=None) -> None:
    """Multi-head attention's masks: `mask` (Lq, Lk) shared by the batch, or 4 axes
    broadcastable to (B, H, Lq, Lk); key_padding_mask (B, Lk), True on real keys. When B == Lq
    a (B, Lk) padding mask has the very shape of an (Lq, Lk) mask and would be read as one
    (each sequence masked with another's padding): a 2-axis mask is refused then (write
    mask[None, None], or key_padding_mask=). A 3-axis mask is refused always: (B, Lq, Lk) and
    (H, Lq, Lk) cannot be told apart. Then q, k, v finite where the masks let them count."""
    key = query if key is None else key
    value = key if value is None else value
    B, Lq = query.shape[0], query.shape[1]
    if mask is not None and (mask.ndim == 3 or mask.ndim == 2 and B == Lq > 1):
        fail("mask", "(Lq, Lk) written as mask[None, None] when B == Lq, 4 axes (B, H, Lq, Lk) "
             "(1 where shared), or a (B, Lk) padding mask as key_padding_mask=",
             f"an ambiguous {mask.ndim}-axis mask {shape_str(mask.shape)} with B={B}, "
             f"H={num_heads}, Lq={Lq}")
    if key_padding_mask is not None:
        padding = key_padding_mask[:, None, None, :]
        mask = padding if mask is None else mask & padding
    check_seen_finite(query, key, value, mask, ("query", "key", "value"))


def mha_module_call(self, query, key=None, value=None, mask=None, need_weights=False,
                    key_padding_mask=None) -> None:
    """`MultiHeadAttention.forward`: inputs of the module's width, dtype and device, masks as
    `mha_masks` takes them; need_weights only with the built-in kernel."""
    weight = self.q_proj.weight
    if query.shape[-1] != self.d_model or query.dtype != weight.dtype \
            or query.device != weight.device:
        fail("query", f"(B, Lq, D = {self.d_model}) {dtype_name(weight.dtype)} on "
             f"{weight.device}, the module's width, dtype and device", describe(query))
    if need_weights and self.attend is not None:
        fail("need_weights", "False with a custom attend kernel (it returns no weights)",
             f"need_weights=True with attend={self.attend}")
    mha_masks(query, key, value, self.num_heads, mask, key_padding_mask)


def torch_mha_module(self, mha) -> None:
    """`MultiHeadAttention.load_from_torch(mha)`: an nn.MultiheadAttention of the same width,
    heads and bias setting."""
    if not isinstance(mha, torch.nn.MultiheadAttention):
        fail("mha", "a torch.nn.MultiheadAttention", describe(mha))
    ours = (self.d_model, self.num_heads, self.q_proj.bias is not None)
    theirs = (mha.embed_dim, mha.num_heads, mha.in_proj_bias is not None)
    if ours != theirs:
        fail("mha", "an nn.MultiheadAttention of (embed_dim, num_heads, bias) = " + str(ours),
             str(theirs))


def recall_ids(self, queries, keys, values) -> None:
    """RecallAttention / RecallMeanPool: the ids inside their vocabularies, on the model's
    device."""
    for name, ids, table in (("queries", queries, self.key_embedding),
                             ("keys", keys, self.key_embedding),
                             ("values", values, self.value_embedding)):
        check_ids(name, ids, table.num_embeddings)
        check_same_device(**{name: ids}, weights=table.weight)


POSITIONS = ("none", "sinusoid", "learned")


def sinusoid_positions(positions, d_model) -> None:
    """PositionReader: a sinusoid table needs an even d_model."""
    if positions == "sinusoid":
        even_width(d_model)


def check_tokens(tokens, embedding: torch.nn.Embedding, max_len: int | None = None) -> None:
    """tokens: (B, N) integer ids inside the embedding's vocabulary, N <= max_len, N > 0."""
    check_array("tokens", tokens, "int", ndim=2, hint="(B, N) token ids", like=torch.Tensor)
    if 0 in tokens.shape or max_len is not None and tokens.shape[1] > max_len:
        fail("tokens", f"(B, N) with 0 < N <= max_len = {max_len}" if max_len else
             "(B, N) with B, N > 0", describe(tokens))
    check_ids("tokens", tokens, embedding.num_embeddings)
    check_same_device(tokens=tokens, weights=embedding.weight)


def reader_tokens(self, tokens) -> None:
    """PositionReader.forward: (B, N) token ids of its vocabulary, N <= max_len."""
    check_tokens(tokens, self.embedding, max_len=self.max_len)


# ============================================================ sparse (lesson 02)
# The rules of minattn/sparse.py, minattn/fast/sparse.py and minattn/fast/flex.py that their
# specs cannot say; the helpers below (`check_windows`, `check_global_idx`, `check_layout`)
# also serve the fast paths' caches, which read what they return.
def check_int(name: str, value, low: int) -> int:
    """`value` must be an integer >= low (a window < 0 or a block of 0 is a typo, not a pattern)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < low:
        fail(f"{name} must be an integer >= {low}", f"{name} >= {low}", repr(value))
    return int(value)


def check_windows(windows, num_heads: int | None = None) -> list[int]:
    """One integer ω >= 0 per head; with num_heads, exactly that many."""
    ws = list(as_numpy(windows).reshape(-1)) if not isinstance(windows, (list, tuple)) \
        else list(windows)
    if not ws:
        fail("windows: no scales given", "one window ω >= 0 per head", repr(windows))
    for w in ws:
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, np.integer)) or w < 0:
            fail("windows: a window ω must be an integer >= 0", "ω in {0, 1, 2, ...}",
                 repr(windows))
    if num_heads is not None and len(ws) != num_heads:
        fail("windows: one window per head", f"{num_heads} windows",
             f"{len(ws)}: {list(map(int, ws))}")
    return [int(w) for w in ws]


def check_global_idx(global_idx, n: int) -> np.ndarray:
    """Global positions as a sorted int array of distinct values in [0, n)."""
    given = as_numpy(global_idx if global_idx is not None else [])
    if given.size and given.dtype.kind not in "iu":
        fail("global_idx", f"integer positions in [0, {n})", describe(given))
    idx = given.astype(np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        fail("global_idx out of range", f"positions in [0, {n})", str(idx.tolist()))
    if np.unique(idx).size != idx.size:
        fail("global_idx has repeated positions", "distinct positions", str(idx.tolist()))
    return np.sort(idx)


def check_square_mask(mask, name: str = "mask") -> None:
    """mask: a NumPy bool (N, N) array."""
    check_array(name, mask, "bool", ndim=2, like=np.ndarray, hint="(N, N)")
    if mask.shape[0] != mask.shape[1]:
        fail(name, "a square bool (N, N) mask", describe(mask))


def check_layout(layout, block: int, n: int) -> np.ndarray:
    """A block layout as a contiguous (nb, nb) bool NumPy array, nb = ceil(N / block)."""
    block = check_int("block", block, 1)
    layout = as_numpy(layout)
    nb = -(-n // block)
    if layout.dtype != np.bool_ or layout.shape != (nb, nb):
        fail("block layout does not fit", f"bool of shape ({nb}, {nb}) for N={n}, "
             f"block={block}", f"{layout.dtype} of shape {shape_str(layout.shape)}")
    return np.ascontiguousarray(layout)


def check_self_attention(q, k, v, scale=None, like=None, finite: bool = True) -> None:
    """q, k (..., N, d), v (..., N, dv) of one library, floating dtype and device, with one
    length N for queries and keys, N, d >= 1, finite: every pattern of lesson 02 but a block
    layout lets each query see itself, so nothing is hidden (`layout_seen_finite` reads what a
    layout lets count)."""
    like = like or (torch.Tensor if isinstance(q, torch.Tensor) else np.ndarray)
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_array(name, x, "float", min_ndim=2, hint="(..., N, d)", like=like)
    check_same_dtype(q=q, k=k, v=v)
    check_same_device(q=q, k=k, v=v)
    if scale is not None:
        check_number("scale", scale)
    if q.shape[-1] != k.shape[-1]:
        fail("q and k must have the same feature size d (last axis)",
             f"k of shape (..., N, {q.shape[-1]})",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")
    if not (q.shape[:-1] == k.shape[:-1] == v.shape[:-1]):
        fail("sparse patterns are self-attention: q, k and v must have one length N and the "
             "same leading axes", f"k and v of shape {shape_str(q.shape[:-1])} + (d,)",
             f"q {shape_str(q.shape)}, k {shape_str(k.shape)}, v {shape_str(v.shape)}")
    if q.shape[-1] == 0 or q.shape[-2] == 0 or 0 in q.shape[:-2]:
        fail("empty input", "at least one position, one feature and one batch element",
             f"q {shape_str(q.shape)}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if finite:
            check_finite(name, x)


def global_positions_within(n, global_idx=None) -> None:
    """Global positions: distinct integers in [0, n) (a list, an array or a tensor)."""
    if global_idx is not None:
        check_global_idx(global_idx, n)


def global_positions_of(q, global_idx=None) -> None:
    """A window kernel's global positions: distinct integers in [0, N), N = q's length."""
    global_positions_within(q.shape[-2], global_idx)


def global_positions_given(global_idx=None) -> None:
    """`window_attend`'s global positions: a 1-d integer array (their range is checked against
    N at each call)."""
    if global_idx is not None:
        idx = as_numpy(global_idx)
        check_array("global_idx", idx, "int" if idx.size else None, ndim=1, hint="positions",
                    like=np.ndarray)


def layout_fits(layout, block, n) -> None:
    """A block layout: bool (nb, nb) with nb = ceil(N / block)."""
    check_layout(layout, block, n)


def layout_one_or_per_head(layout) -> None:
    """`block_sparse_attend`: one bool layout (nb, nb) or one per head (H, nb, nb)."""
    layout = as_numpy(layout)
    check_array("layout", layout, "bool", hint="(nb, nb) or (H, nb, nb)", like=np.ndarray)
    if layout.ndim not in (2, 3):
        fail("layout", "bool (nb, nb) or (H, nb, nb)", describe(layout))


def layout_seen_finite(q, k, v, layout, block, causal=False) -> None:
    """A block layout that fits q's length N; q, k, v finite where the layout lets them count.
    What it hides may hold anything (the queries of block rows that see no block, the keys of
    block columns no query sees; under causal, row I sees block J only when J <= I)."""
    n = q.shape[-2]
    seen = check_layout(layout, block, n)
    seen = np.tril(seen) if causal else seen

    def seen_by(axis):  # (N, 1): the query sees some key (axis 1), some query sees the key (0)
        where = np.repeat(seen.any(axis), block)[:n, None]
        return torch.as_tensor(where, device=q.device) if isinstance(q, torch.Tensor) else where
    for name, x, axis in (("q", q, 1), ("k", k, 0), ("v", v, 0)):
        check_finite(name, x, where=lambda axis=axis: seen_by(axis))


def summary_fits_block(block, summary) -> None:
    """The fixed pattern: c summary columns fit in a block of l."""
    if summary > block:
        fail("summary", f"c <= l = block = {block}", describe(summary))


def square_masks(masks) -> None:
    """At least one (N, N) bool NumPy mask, all of one shape."""
    if not masks:
        fail("masks", "at least one (N, N) mask", "none")
    for m in masks:
        check_square_mask(m, "masks")
    if len({m.shape for m in masks}) > 1:
        fail("masks", "one (N, N) shape for all", str(sorted({m.shape for m in masks})))


def windows_given(windows) -> None:
    """One window ω >= 0 per head."""
    check_windows(windows)


def kernels_per_layer(attend, layers) -> None:
    """`SparseClassifier`: one attend kernel for every layer, or a list of one per layer."""
    if isinstance(attend, (list, tuple)) and len(attend) != layers:
        fail("attend", f"one kernel per layer ({layers})", f"{len(attend)} kernels")


def classifier_tokens(self, tokens) -> None:
    """`SparseClassifier.forward`: ids of the vocabulary, N <= the model's max_len, on the
    model's device."""
    max_len = self.position.shape[0]
    if tokens.shape[1] > max_len:
        fail("tokens", f"(B, N) with N <= max_len = {max_len}", describe(tokens))
    check_ids("tokens", tokens, self.embed.num_embeddings)
    check_same_device(tokens=tokens, weights=self.embed.weight)


def route_names(policy=None, pattern="window") -> None:
    """`choose_kernel`: a policy ('auto' or 'readable', None: the default) and a pattern
    ('window' or 'multiscale') it knows."""
    if policy is not None and policy not in ("auto", "readable"):
        fail("kernel policy", "'auto' or 'readable'", repr(policy))
    if pattern not in ("window", "multiscale"):
        fail("pattern of choose_kernel", "'window' or 'multiscale'", repr(pattern))


# ============================================================ multiscale (lesson 03)
# The rules of minattn/multiscale.py and minattn/fast/multiscale.py that their specs cannot
# say: one window per head, the global count, head counts, a model's layers of windows.
def check_global_count(n_global, n: int) -> None:
    """n_global: how many leading positions are global, an integer in 0 .. N."""
    if isinstance(n_global, (bool, np.bool_)) or not isinstance(n_global, (int, np.integer)) \
            or not 0 <= n_global <= n:
        fail("n_global", f"an integer in 0 .. N = {n} (how many leading positions are global)",
             describe(n_global))


def windows_per_head(q, k, v, windows, mask=None, n_global=0) -> None:
    """Multi-scale attention: one window ω >= 0 per head of q (B, H, N, d), n_global in 0 .. N;
    q, k, v finite where the mask lets them count (what it hides may hold anything)."""
    check_windows(windows, q.shape[1])
    check_global_count(n_global, q.shape[-2])
    check_seen_finite(q, k, v, mask)


def windows_and_global(n, windows, n_global=0) -> None:
    """`scale_mask_*`: one window ω >= 0 per head, n_global in 0 .. N."""
    check_windows(windows)
    check_global_count(n_global, n)


def weights_of_real_queries(weights, query_mask=None) -> None:
    """`measured_scale_*`: weights >= 0 and finite for the real queries (the padded ones may
    hold anything: the function selects them away)."""
    keep = None if query_mask is None else query_mask[:, None, :, None]
    check_finite("weights", weights, where=keep)
    negative = weights < 0 if keep is None else (weights < 0) & keep
    if bool(negative.any()):
        fail("weights", "attention weights >= 0 (rows of a softmax)",
             f"{int(negative.sum())} negative values")


def finite_where_kept(x, keep) -> None:
    """`masked_max_torch`: x finite where keep is True."""
    check_finite("x", x, where=keep[..., None])


def check_head_counts(counts, scales: int | None = None) -> np.ndarray:
    """Head counts per layer and scale: an (L, K) integer array >= 0 (K = scales if given)."""
    counts = as_numpy(counts)
    if counts.ndim != 2 or scales is not None and counts.shape[1] != scales:
        fail("counts: heads per layer and scale", f"an (L, {scales or 'K'}) array",
             describe(counts))
    if counts.dtype.kind not in "iu" or (counts < 0).any():
        fail("counts", "integer head counts >= 0 (allocate_scales_np's)", describe(counts))
    return counts


def check_classifier_inputs(inputs, lengths, embedding, weight, max_len=None) -> None:
    """The inputs of lesson 03's classifiers: (B, N) token ids inside the embedding's
    vocabulary (with an nn.Embedding), else (B, N, d_in) finite vectors of the dtype and width
    of the first layer's `weight` (·, d_in); lengths None or (B,) integers in 1..N (a sentence
    has at least one token); N <= max_len where there is one."""
    if isinstance(embedding, torch.nn.Embedding):
        check_array("inputs", inputs, "int", ndim=2, hint="(B, N) token ids", like=torch.Tensor)
        check_ids("inputs", inputs, embedding.num_embeddings, "the embedding's vocabulary")
    elif embedding is None:
        check_array("inputs", inputs, "float", ndim=3, hint="(B, N, d_in)", like=torch.Tensor)
        if weight is not None and (inputs.shape[-1] != weight.shape[-1]
                                   or inputs.dtype != weight.dtype):
            fail("inputs", f"(B, N, {weight.shape[-1]}) {str(weight.dtype).removeprefix('torch.')}"
                 " vectors, the first layer's width and dtype", describe(inputs))
        check_finite("inputs", inputs)
    if inputs.shape[0] == 0 or inputs.shape[1] == 0:
        fail("inputs", "at least one sequence of at least one token", describe(inputs))
    if max_len is not None and inputs.shape[1] > max_len:
        fail("inputs: sequence longer than the positional embedding",
             f"N <= max_len = {max_len}", f"N = {inputs.shape[1]}")
    if lengths is not None:
        n = inputs.shape[1]
        check_array("lengths", lengths, "int", ndim=1, hint="(B,) integers", like=torch.Tensor)
        if lengths.shape[0] != inputs.shape[0] or int(lengths.min()) < 1 or int(lengths.max()) > n:
            fail("lengths", f"({inputs.shape[0]},) integers in 1..N = {n}",
                 f"{describe(lengths)} from {int(lengths.min())} to {int(lengths.max())}"
                 if lengths.numel() else describe(lengths))


def heads_counts(counts, scales) -> None:
    """`layer_windows`: K windows ω >= 0 and (L, K) integer head counts >= 0."""
    check_head_counts(counts, len(check_windows(scales)))


def five_scale_counts(counts) -> None:
    """ScaleAllocation: (L, 5) integer counts >= 0 over the five candidate scales, every layer
    with the same number of heads >= 1."""
    counts = as_numpy(counts)
    if counts.ndim != 2 or counts.shape[1] != 5:
        fail("counts", "an (L, 5) array: head counts per layer over the 5 candidate scales",
             describe(counts))
    counts = check_head_counts(counts, 5)
    if len(set(counts.sum(1).tolist())) != 1 or counts.sum(1)[0] < 1:
        fail("counts", "(L, 5) head counts whose rows have one sum >= 1 (every layer the same "
             "number of heads)", f"{counts.tolist()}")


def windows_given_per_head(self, windows) -> None:
    """MultiScaleKernel.set_windows: as many windows as the kernel has heads."""
    check_windows(windows, len(self.windows))


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
    """MultiScaleTransformer.forward: `check_classifier_inputs` against its embedding, its
    first layer and (with learned positions) its max_len."""
    check_classifier_inputs(inputs, lengths, self.embedding, self.input.weight, self.max_len)


def band_kernel(q, w, chunk=None) -> None:
    """`band_attention_fast_torch`: q on the CPU (PyTorch's fused CPU attention); chunk None
    or 1 .. 2w (the band's two triangles must not overlap)."""
    if q.device.type != "cpu":
        fail("q", "tensors on the CPU (the band kernel runs PyTorch's fused CPU attention)",
             describe(q))
    if chunk is not None and not 1 <= chunk <= 2 * w:
        fail("chunk", f"an integer in 1 .. 2w = {2 * w} (queries per chunk)", repr(chunk))


# ============================================================ xl (lesson 04)
# The rules of minattn/xl.py and minattn/fast/xl.py that their specs cannot say.
def queries_last_of_keys(q, k) -> None:
    """Relative attention: the Lq queries are the last Lq of the Lk key positions."""
    if q.shape[2] > k.shape[2]:
        fail("k", f"at least Lq = {q.shape[2]} keys (the queries are the last Lq positions; "
             "memory first)", describe(k))


def table_covers_keys(r, k) -> None:
    """The relative-position table r (H, P, dh) holds a row for every distance 0 .. Lk − 1;
    those rows are finite (rows past Lk are never read)."""
    Lk = k.shape[2]
    if r.shape[1] < Lk:
        fail("r", f"at least Lk = {Lk} distances (0 .. {Lk - 1})", describe(r))
    check_finite("r", r[:, :Lk])


def xl_heads(d_model, num_heads) -> None:
    """d_model splits into heads and is even (a sine and a cosine per frequency)."""
    if d_model % num_heads or d_model % 2:
        fail("num_heads", f"a divisor of an even d_model = {d_model}", describe(num_heads))


REL_PARAMS = ("w_q", "w_k", "w_v", "w_r", "w_o", "u_bias", "v_bias")


def rel_params(params, x, num_heads) -> None:
    """The arrays of `RelMultiHeadAttention.numpy_params()` for x's width D and dtype: (D, D)
    weights, (H, dh) biases, finite; num_heads splits an even D."""
    if not isinstance(params, dict) or any(n not in params for n in REL_PARAMS):
        missing = [n for n in REL_PARAMS if n not in params] if isinstance(params, dict) else []
        fail("params", f"a dict with {', '.join(REL_PARAMS)} "
             "(RelMultiHeadAttention.numpy_params())",
             f"a dict without {missing}" if missing else describe(params))
    D = x.shape[-1]
    xl_heads(D, num_heads)
    for name in REL_PARAMS:
        want = (D, D) if name.startswith("w") else (num_heads, D // num_heads)
        given = params[name]
        if not isinstance(given, np.ndarray) or given.shape != want or given.dtype != x.dtype:
            fail(f"params['{name}']", f"a {x.dtype} array {shape_str(want)} (D of x)",
                 describe(given))
        check_finite(f"params['{name}']", given)


def rel_layer_call(self, x, memory) -> None:
    """`RelMultiHeadAttention.forward`: x of the module's width, dtype and device; M + L
    within its max_len."""
    weight = self.q_proj.weight
    if x.shape[-1] != self.d_model or x.dtype != weight.dtype or x.device != weight.device:
        fail("x", f"(B, L, D = {self.d_model}) {dtype_name(weight.dtype)} on {weight.device}, "
             "the module's width, dtype and device", describe(x))
    n_keys = x.shape[1] + (0 if memory is None else memory.shape[1])
    if n_keys > self.max_len:
        fail("memory", f"M + L <= max_len = {self.max_len} positions (the relative-position "
             "table)", f"M + L = {n_keys}")


def lm_tokens(self, tokens) -> None:
    """A language model's tokens: ids of its vocabulary on its device."""
    check_ids("tokens", tokens, self.embedding.num_embeddings)
    check_same_device(tokens=tokens, weights=self.embedding.weight)


def xl_memories(self, tokens, memories=None) -> None:
    """`TransformerXL.forward`: memories None (the start of a text) or one (B, M, D) tensor or
    None per layer, as the last call returned them."""
    lm_tokens(self, tokens)
    if memories is None:
        return
    n_layers = len(self.layers)
    if not isinstance(memories, (list, tuple)) or len(memories) != n_layers:
        fail("memories", f"a list with one memory per layer ({n_layers}), or None",
             describe(memories))
    for memory in memories:
        if memory is not None and (not isinstance(memory, torch.Tensor) or memory.ndim != 3
                                   or memory.shape[0] != tokens.shape[0]
                                   or memory.shape[2] != self.d_model):
            fail("memories", f"None or (B, M, D) = ({tokens.shape[0]}, M, {self.d_model}) "
                 "tensors, as the last call returned them", describe(memory))


def official_state(state, num_heads) -> None:
    """`official_to_ours`: an original Transformer-XL state dict (div_val=1, d_head = D / H,
    tied or untied r_w_bias / r_r_bias of shape (H, dh))."""
    if not isinstance(state, dict) or "word_emb.emb_layers.0.weight" not in state:
        keys = sorted(state)[:4] if isinstance(state, dict) else describe(state)
        fail("state", "an original Transformer-XL state dict ('word_emb.emb_layers.0.weight')",
             f"keys {keys}…")
    if any(k.startswith("word_emb.emb_projs") or k.startswith("crit.out_projs") for k in state):
        fail("state", "div_val=1, d_embed = d_model (adaptive embeddings are not supported)",
             "emb_projs / out_projs in the state dict")
    D = state["word_emb.emb_layers.0.weight"].shape[1]
    dh = D // num_heads
    for key, value in state.items():
        if key.endswith("dec_attn.qkv_net.weight") and tuple(value.shape) != (3 * D, D):
            fail(f"state['{key}']", f"{shape_str((3 * D, D))} (d_head = D / H)",
                 shape_str(value.shape))
        if key.endswith(("r_w_bias", "r_r_bias")) and tuple(value.shape) != (num_heads, dh):
            fail(f"state['{key}']", f"(H, dh) = ({num_heads}, {dh})", shape_str(value.shape))
    layers = {k.split(".")[1] for k in state if k.startswith("layers.")}
    for n in layers:
        for old in ("r_w_bias", "r_r_bias"):
            if f"layers.{n}.dec_attn.{old}" not in state and old not in state:
                fail(f"state['{old}']", f"(H, dh) = ({num_heads}, {dh}), shared or per layer",
                     "missing")


def decoder_model(model, context) -> None:
    """`XLDecoder(model, context, batch)`: a TransformerXL whose layers hold context + 1
    positions."""
    if type(model).__name__ != "TransformerXL":
        fail("model", "a minattn.xl.TransformerXL", type(model).__name__)
    for layer in model.layers:
        if context + 1 > layer.attention.max_len:
            fail("context", f"context + 1 <= max_len = {layer.attention.max_len} positions",
                 f"context + 1 = {context + 1}")


def decoder_prompt(self, tokens) -> None:
    """`XLDecoder.prefill`: (B, P) token ids, B the decoder's batch."""
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.shape[0] != self.batch:
        fail("tokens", f"(B={self.batch}, P) token ids", describe(tokens))


def decoder_token(self, token) -> None:
    """`XLDecoder.step`: (B, 1) token ids."""
    if not isinstance(token, torch.Tensor) or tuple(token.shape) != (self.batch, 1):
        fail("token", f"({self.batch}, 1) token ids", describe(token))


def decoder_on_cuda(self) -> None:
    """`XLDecoder.capture`: a model on a CUDA device."""
    if self.device.type != "cuda":
        fail("XLDecoder.capture records a CUDA graph", "a model on a CUDA device",
             str(self.device))


# ============================================================ lstm_attention (lesson 05)
# The rules of minattn/lstm_attention.py that its specs cannot say.
def four_gates(h, weight_hh) -> None:
    """An LSTM's gates: weight_hh (4H, H) for states h (B, H)."""
    if weight_hh.shape[0] != 4 * h.shape[-1]:
        fail("weight_hh", f"(4H, H) = ({4 * h.shape[-1]}, {h.shape[-1]}): four gates",
             describe(weight_hh))


def state_pair(state=None) -> None:
    """`lstm_np`'s state: None or a pair (h, c) of (B, H) arrays."""
    if state is not None and (not isinstance(state, (tuple, list)) or len(state) != 2):
        fail("state", "None or a pair (h, c) of (B, H) arrays", describe(state))


def real_states_finite(h, mask=None) -> None:
    """Encoder states h (B, N, H) finite on the real tokens: what the mask hides (padding)
    may hold anything."""
    check_finite("h", h, where=None if mask is None else mask[..., None])


def concat_width(s, W1) -> None:
    """The output network reads [context ; s]: W1 (h1, 2H)."""
    if W1.shape[1] != 2 * s.shape[-1]:
        fail("W1", f"(h1, 2H = {2 * s.shape[-1]}): it reads [context ; s]", describe(W1))


def target_ids(targets, W2) -> None:
    """Target ids inside the output vocabulary (W2's rows)."""
    check_ids("targets", targets, W2.shape[0], "the output vocabulary")


# ============================================================ ibm1 (lesson 06)
# The rules of minattn/ibm1.py and minattn/fast/ibm1.py that their specs cannot say: a corpus
# pairs up its sentences, a table belongs to its corpus (the bitext's vocabularies; on the fast
# path one value per stored entry), probabilities and counts are >= 0, NLTK's mode needs NULL.
def corpus_pairs(sources, targets) -> None:
    """`index_bitext`: the sides pair up, at least one pair (each sentence is checked at C
    speed while it is indexed, and named with `check_sentences` when one is wrong)."""
    sources, targets = list(sources), list(targets)
    if len(sources) != len(targets):
        fail("targets", "as many target sentences as source sentences (sources and targets "
             "pair up)", f"{len(targets)} targets for {len(sources)} sources")
    if len(sources) == 0:
        fail("sources", "at least one sentence pair (an empty corpus has none)", "0 pairs")


def check_sentences(side: str, sentences) -> None:
    """Every sentence of one side must be a non-empty list of tokens (not a string)."""
    for m, sent in enumerate(sentences):
        if isinstance(sent, str) or not hasattr(sent, "__len__"):
            fail(f"{side}s", f"{side} sentence {m} as a list of tokens, e.g. s.split() (it is "
                 "not a token list)", f"{type(sent).__name__} {str(sent)[:40]!r}")
        if len(sent) == 0:
            fail(f"{side}s", f"at least one token per sentence ({side} sentence {m} is empty)",
                 "[]")


def corpus(sources, targets) -> None:
    """`make_bitext`: pairs of non-empty token lists."""
    corpus_pairs(sources, targets)
    check_sentences("source", list(sources))
    check_sentences("target", list(targets))


def check_bitext(bitext, indexed: bool = False) -> None:
    """A corpus from minattn.ibm1.make_bitext (or, indexed=True, fast.ibm1.index_bitext)."""
    kinds = ("IndexedBitext",) if indexed else ("Bitext", "IndexedBitext")
    if type(bitext).__name__ not in kinds:
        fail("indexed" if indexed else "bitext", "a corpus from " + (
            "index_bitext (minattn.fast.ibm1)" if indexed else
            "make_bitext (or index_bitext for the fast path)"), describe(bitext))


def is_bitext(bitext) -> None:
    check_bitext(bitext)


def is_indexed(indexed) -> None:
    check_bitext(indexed, indexed=True)


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


def nonnegative_counts(counts) -> None:
    check_nonnegative("counts", counts)


def table_fits(bitext=None, indexed=None, t=None, counts=None, values=None) -> None:
    """A table of this corpus, finite and >= 0: (V_x, V_y) for a bitext, one value per stored
    entry (E,) for an indexed one (the fast path)."""
    name, table = ("t", t) if t is not None else ("counts", counts) if counts is not None \
        else ("values", values)
    corpus = bitext if indexed is None else indexed
    check_bitext(corpus, indexed=indexed is not None)
    shape = (len(corpus.src_vocab), len(corpus.tgt_vocab)) if indexed is None else \
        (len(corpus.entry_src),)
    if table.shape != shape:
        fail(name, f"{shape_str(shape)}: " + ("(V_x, V_y)" if indexed is None else
             "one value per stored entry") + " (this table does not fit the corpus)",
             describe(table))
    check_nonnegative(name, table)


def check_covered(t, loglik) -> None:
    """After an E-step: a log-likelihood of -inf or NaN means some target token had
    probability 0 under t from every word of its source sentence (e.g. an all-zero table):
    its posterior 0/0 is undefined."""
    if not np.isfinite(float(loglik)):
        fail("t", "a table that gives every target token some probability from its source "
             "sentence (t(y | x) > 0 for some x of the pair)", f"a table under which the "
             f"log-likelihood is {float(loglik)} ({describe(t)}, {int((t > 0).sum())} entries > 0)")


def nltk_needs_null(mode, bitext=None, indexed=None) -> None:
    if mode == "nltk" and not (bitext if indexed is None else indexed).null:
        fail("mode", "'textbook' without the NULL word (NLTK's mode needs make_bitext(..., "
             "null=True))", "mode='nltk' and null=False")


def floor_in_unit(floor) -> None:
    check_number("floor", floor, low=0.0, high=1.0)


def pair_of(m, bitext=None, indexed=None) -> None:
    """m: the index of a sentence pair of the corpus."""
    n_pairs = bitext.n_pairs if indexed is None else len(indexed.src_start) - 1
    if m >= n_pairs:
        fail("m", f"a pair index in [0, {n_pairs})", describe(m))


def pair_covered(t, bitext, m) -> None:
    """t gives every target token of pair m some probability from its source sentence."""
    x, y = bitext.pair(m)
    if not (t[np.ix_(x, y)].sum(axis=0) > 0).all():
        check_covered(t, -np.inf)


def source_word(x, bitext=None, indexed=None) -> None:
    if x not in (bitext if indexed is None else indexed).src_index:
        fail("x", "a word of the source vocabulary (an unknown source word)", repr(x))


def source_words(indexed, words) -> None:
    unknown = [] if isinstance(words, str) else [x for x in words if x not in indexed.src_index]
    if isinstance(words, str) or unknown:
        fail("words", "a list of words of the source vocabulary",
             describe(words) if isinstance(words, str) else f"unknown words {unknown[:5]}")


def bags_of_vocab(self, xbar) -> None:
    """`BagOfWordsProxy.forward`: bags over the source vocabulary, in the embedding's dtype
    and device."""
    V = self.embed.shape[0]
    if xbar.shape[1] != V or xbar.dtype != self.embed.dtype:
        fail("xbar", f"(B, V_x = {V}) of dtype {dtype_name(self.embed.dtype)}", describe(xbar))
    check_same_device(xbar=xbar, embed=self.embed)


def bitext_without_null(bitext) -> None:
    """The proxy has no NULL word."""
    check_bitext(bitext)
    if bitext.null:
        fail("bitext", "make_bitext(..., null=False) (the proxy has no NULL word)", "null=True")


# ============================================================ task_heads (lesson 07)
# The rules of minattn/task_heads.py and minattn/fast/task_heads.py that their specs cannot
# say. Token states (B, L, D) of a frozen encoder come right-padded (mask (B, L) bool, True on
# real tokens), every sentence with its first token ([CLS]) real; what padding holds never
# counts: the heads select it away.
def _right_padded(name: str, states, mask_name: str, mask) -> None:
    """mask right-padded (1…1 0…0) with its first token real; states finite where it is."""
    if not bool(mask[:, 0].all()):
        fail(mask_name, f"every sentence of {name} with its first token real (mask[:, 0] all "
             "True)", "a row whose first token is padding")
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        fail(mask_name, "right-padded rows 1…1 0…0 (real tokens first)",
             "a row with padding before a real token")
    check_finite(name, states, where=mask[..., None])


def right_padded(states, mask) -> None:
    """Token states and their mask (see above)."""
    _right_padded("states", states, "mask", mask)


def pair_right_padded(a, a_mask, b, b_mask) -> None:
    """Sentences A and B of each pair (see above)."""
    _right_padded("a", a, "a_mask", a_mask)
    _right_padded("b", b, "b_mask", b_mask)


_TOKEN_STATES = Contract(dict(states="float* (B, L, D)", mask="bool (B, L)"), [right_padded], None)


def check_token_states(states, mask) -> None:
    """states (B, L, D) float and mask (B, L) bool, right-padded (`right_padded`)."""
    _TOKEN_STATES(states=states, mask=mask)


def layers_given(layers) -> None:
    """`attention_pool_np`, `cross_attention_pool_np`: a non-empty list of layer parameters."""
    if not layers or not isinstance(layers, (list, tuple)):
        fail("layers", "a non-empty list of layer params (at least one layer)", describe(layers))


def two_or_more(pred) -> None:
    """A correlation needs at least two values."""
    if pred.shape[0] < 2:
        fail("pred", "at least 2 values (a correlation)", describe(pred))


def attention_layer(mha) -> None:
    """A minattn MultiHeadAttention (its four projections), told by what it holds."""
    if not isinstance(mha, torch.nn.Module) or not all(
            hasattr(mha, p) for p in ("q_proj", "k_proj", "v_proj", "out_proj", "num_heads")):
        fail("mha", "a minattn MultiHeadAttention", describe(mha))


def _of_layer(name: str, x, layer) -> None:
    """x has the layer's width, dtype and device."""
    weight = layer.q_proj.weight
    if x.shape[-1] != layer.d_model or x.dtype != weight.dtype:
        fail(name, f"(B, L, {layer.d_model}) {dtype_name(weight.dtype)} states, the layer's "
             "width and dtype (cast the states or the head)", describe(x))
    check_same_device(**{name: x, "weights": weight})


def layer_of_width(states, mha) -> None:
    """`attention_pool_fast_torch`: mha an attention layer of the states' width and dtype."""
    attention_layer(mha)
    _of_layer("states", states, mha)


def head_of_width(self, states=None, a=None) -> None:
    """A head's input (states, or a pair's a) of its first layer's width, dtype and device."""
    _of_layer("states" if a is None else "a", a if states is None else states, self.layers[0])


def model_dtype(self, states=None, a=None) -> None:
    """`SentenceClassifier`, `PairModel`: token states in the model's dtype."""
    x, dtype = a if states is None else states, next(self.parameters()).dtype
    if x.dtype != dtype:
        fail("states" if a is None else "a", f"dtype {dtype_name(dtype)}, the model's",
             describe(x))


# ============================================================ agreement (lesson 08)
# The rules of minattn/agreement.py that its specs cannot say.
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
    if mask is not None and (not is_bool_dtype(mask) or not broadcast_ok(np.shape(mask), a.shape)):
        fail("mask", f"bool broadcastable to {shape_str(a.shape)} (True = real position)",
             describe(mask))
    real_position_per_row(a, b, None if mask is None else np.asarray(mask))


def lengths_at_least_one(lengths) -> None:
    """A non-empty list of integer lengths >= 1."""
    n = np.asarray(lengths)
    if n.size == 0 or n.dtype.kind not in "iu" or (n < 1).any():
        fail("lengths", "a non-empty list of integer lengths >= 1", repr(lengths))


def curves_of_one_length(agreements, performances) -> None:
    """Two non-empty lists of numbers of one length."""
    if len(agreements) != len(performances) or not len(agreements):
        fail("performances", "a non-empty list as long as agreements (the two curves)",
             f"{len(performances)} values for {len(agreements)} agreements")
    for name, values in (("agreements", agreements), ("performances", performances)):
        for value in values:
            check_number(name, value)


def _counted_masks(M: int, T: int, N: int, key_mask, row_mask) -> None:
    """key_mask (M, N) or (M, T, N) and row_mask (M, T) bool (None: every position, every
    row); at least one counted row."""
    keys = np.ones((M, N), bool) if key_mask is None else np.asarray(key_mask)
    rows = np.ones((M, T), bool) if row_mask is None else np.asarray(row_mask)
    keys = keys[:, None, :] if keys.ndim == 2 else keys
    if keys.dtype != bool or rows.dtype != bool or keys.shape not in ((M, T, N), (M, 1, N)) \
            or rows.shape != (M, T) or not rows.any():
        fail("key_mask, row_mask", f"bool key_mask (M, N) or (M, T, N) and row_mask (M, T) "
             f"with M, T, N = {M}, {T}, {N} and at least one counted row",
             f"{describe(key_mask)} and {describe(row_mask)}")


def counted_masks_fit(a, key_mask=None, row_mask=None) -> None:
    """`mean_agreement_np`: the masks fit a (..., M, T, N) (`_counted_masks`)."""
    _counted_masks(*a.shape[-3:], key_mask, row_mask)


def counted_keys(key_mask, row_mask=None) -> None:
    """key_mask (M, N) or (M, T, N) bool, row_mask (M, T) bool (None: one row per example)."""
    keys = np.asarray(key_mask)
    if keys.ndim not in (2, 3):
        fail("key_mask", "a bool array (M, N) or (M, T, N)", describe(key_mask))
    M, N = keys.shape[0], keys.shape[-1]
    T = keys.shape[1] if keys.ndim == 3 else 1 if row_mask is None else np.shape(row_mask)[-1]
    _counted_masks(M, T, N, key_mask, row_mask)


def runs_of_one_shape(gold, others, uniform, key_mask=None, row_mask=None) -> None:
    """Runs (dicts of "alpha", "beta" (C, M, T, N) and "perf" (C,)) of one shape, at least
    one re-seeded run in others; the masks as `_counted_masks` takes them."""
    if not others:
        fail("others", "at least one re-seeded standard run", "none")
    shape, C = np.shape(gold["alpha"]), len(gold["perf"])
    for run in [gold, *others, uniform]:
        if np.shape(run["alpha"]) != shape or np.shape(run["beta"]) != shape or \
                len(run["perf"]) != C or len(shape) != 4 or shape[0] != C:
            fail("others", f"runs with alpha and beta (C, M, T, N) = {shape_str(shape)} "
                 f"and perf ({C},), as gold", f"alpha {shape_str(np.shape(run['alpha']))}, "
                 f"beta {shape_str(np.shape(run['beta']))}, perf ({len(run['perf'])},)")
    _counted_masks(*shape[1:], key_mask, row_mask)


def prefix_mask(self, x, mask=None) -> None:
    """`AttentionClassifier.states`: ids inside the vocabulary, on the model's device; a mask
    True on a prefix of each row (padding at the end)."""
    check_ids("x", x, self.embed.num_embeddings)
    check_same_device(x=x, weights=self.readout.weight)
    if mask is not None and not torch.equal(
            mask, torch.arange(x.shape[1], device=x.device) < mask.sum(1, keepdim=True)):
        fail("mask", "True on a prefix of each row (padding at the end)", describe(mask))


def translator_ids(self, src, tgt_in) -> None:
    """src and tgt_in inside their vocabularies, on the model's device."""
    for name, ids, table in (("src", src, self.src_embed), ("tgt_in", tgt_in, self.tgt_embed)):
        check_ids(name, ids, table.num_embeddings)
    check_same_device(src=src, weights=self.W_a)


def output_ids(self, tgt_out) -> None:
    """tgt_out inside the output vocabulary."""
    check_ids("tgt_out", tgt_out, self.out.out_features, "the output vocabulary")


# ============================================================ encoder (lesson 03, 07)
# The rules of minattn/encoder.py that its specs cannot say.
def _mask_right_padded(name: str, mask) -> None:
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        fail(name, "right-padded rows 1…1 0…0 (real tokens first)", "a row with a 0 before a 1")


def encoder_ids(self, input_ids, attention_mask, token_type_ids=None) -> None:
    """`MiniLMEncoder.run`: ids int64 inside the vocabulary, L within the position table, on
    the model's device; attention_mask bool or 0/1 integers, right-padded; token types inside
    their table."""
    if input_ids.dtype != torch.long:
        fail("input_ids", "(B, L) int64", describe(input_ids))
    check_same_device(input_ids=input_ids, weights=self.word_embeddings.weight)
    if attention_mask.is_floating_point() or attention_mask.dtype != torch.bool and \
            bool(((attention_mask != 0) & (attention_mask != 1)).any()):
        fail("attention_mask", "bool, or integers 0/1 (1 = real token)", describe(attention_mask))
    check_ids("input_ids", input_ids, self.config.vocab_size)
    if input_ids.shape[1] > self.config.max_position_embeddings:
        fail("input_ids", f"L <= {self.config.max_position_embeddings} (the position table)",
             describe(input_ids))
    _mask_right_padded("attention_mask", attention_mask.bool())
    if token_type_ids is not None:
        check_ids("token_type_ids", token_type_ids, self.config.type_vocab_size)


def mask_right_padded(mask) -> None:
    """`TopLayers.forward`: a right-padded mask."""
    _mask_right_padded("mask", mask)


def is_text(t) -> bool:
    """A sentence (str) or a pair of sentences (a, b), encoded "[CLS] a [SEP] b [SEP]"."""
    return isinstance(t, str) or (isinstance(t, tuple) and len(t) == 2
                                  and all(isinstance(s, str) for s in t))


def check_texts(texts) -> None:
    """A non-empty list of sentences or of (a, b) pairs of them."""
    if isinstance(texts, (str, tuple)) or not texts or not all(is_text(t) for t in texts):
        fail("texts", "a non-empty list of strings or of (a, b) pairs of strings",
             repr(texts)[:60] if not isinstance(texts, list) else f"list of {len(texts)}")
