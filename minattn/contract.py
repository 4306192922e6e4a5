"""The input contract: the spec language of `@checked`, the vocabulary its checks are written
in, and the decorator that applies them.

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
returns a value is a TypeError). The spec grammar is at `Spec`. What a spec cannot say (what a
mask hides may hold anything, P >= Lk distance rows, a bitext's vocabularies) is a named rule
in minattn/checks.py (the `c.seen_finite` above), one section per mechanism.
Nothing here imports from minattn.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from typing import Callable, Sequence

import numpy as np
import torch


def checked(*, rules: Sequence[Callable] = (), library: type | None = None, **specs: str):
    """Decorate a public function so that its arguments are checked first (see the module's
    docstring): one spec per argument (`q="float (..., Lq, d)"`, see `Spec`), then the named
    `rules` an axis string cannot say, each called with the arguments it names. The function
    then runs on its arguments as given. The decorated function keeps its name, docstring and
    signature. `library` (np.ndarray or torch.Tensor) is read from the name when not given."""

    def decorate(fn):
        signature = inspect.signature(fn)
        method = fn.__qualname__.split(".")[-2:-1] not in ([], ["<locals>"])  # in a class
        arrays = library or (np.ndarray if fn.__name__.endswith("_np") else torch.Tensor if
                             fn.__name__.endswith("_torch") or method else None)
        contract = Contract(specs, rules, arrays, signature.parameters)
        # The arguments by name, without signature.bind on every call (it costs as much as
        # the checks): positions map to names, defaults fill the rest. A call that this cannot
        # map (*args, **options, a missing or unknown name) goes through signature.bind.
        names, known = tuple(signature.parameters), set(signature.parameters)
        defaults = {n: p.default for n, p in signature.parameters.items()
                    if p.default is not p.empty}
        plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                    for p in signature.parameters.values())
        positional = sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in signature.parameters.values())

        @functools.wraps(fn)
        def call(*args, **kwargs):
            given = dict(zip(names, args))
            if plain and len(args) <= positional and not kwargs.keys() & given.keys() and \
                    kwargs.keys() <= known:
                arguments = {**defaults, **given, **kwargs}
                if len(arguments) == len(names):
                    contract(**arguments)
                    return fn(*args, **kwargs)
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


# ----------------------------------------------------------------------------- vocabulary
# The shape and dtype checks read metadata only; ids and finiteness read the values once (one
# pass, one reduction) and are skipped while torch.compile traces. What a mask hides may hold
# anything (padded states are garbage in real batches): masked reductions select it away with
# `where`, never multiply it by 0 (0 × NaN is NaN).
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
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < low:
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
    wanted = "a finite number" + "".join(f" {op} {b}" for op, b in
                                         ((">=", low), ("<=", high), (">", above)) if b is not None)
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
                hint: str = "", like=None) -> None:
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
    if ndim is not None and x.ndim != ndim:
        fail(name, f"{ndim} axes" + (f" {hint}" if hint else ""), describe(x))


def in_graph(*xs) -> bool:
    """True when every x is a torch activation: a tensor made by an operation that autograd
    records (it has a grad_fn). Its values come from inputs that were checked where they entered
    the library, so the checks do not read them again: a training step would pay for each read
    (a fifth of a small model's step on a CPU, and a device sync on a GPU). Data, parameters and
    anything computed without gradients are still read."""
    return all(isinstance(x, torch.Tensor) and x.grad_fn is not None for x in xs)


def check_finite(name: str, x, where=None, minus_inf_ok: bool = False) -> None:
    """x must be finite (no NaN, no ±inf) wherever `where` (bool, broadcastable; or a function
    returning it, called only when x holds a bad value) is True, everywhere when where is None;
    minus_inf_ok lets −inf through (a score of −inf is a weight of exactly 0). Skipped while
    torch.compile traces, and for activations (see `in_graph`).

    A finite x is read once by one reduction: NaN and ±inf propagate through a sum (inf - inf
    = NaN), NaN and +inf through a max; only a failed test runs the exact element-wise check,
    which also tells an overflowing sum of finite values from a bad value."""
    if isinstance(x, torch.Tensor):
        if _tracing() or not x.is_floating_point() or x.device.type == "meta" or in_graph(x):
            return
        x = x.detach()  # a leaf that requires grad is read, not differentiated
    else:
        x = np.asarray(x)
        if x.dtype.kind != "f":
            return
    if math.prod(x.shape) == 0:
        return
    if minus_inf_ok:  # -inf is allowed: look at the largest value only
        top = float(x.max())
        if top == top and top != math.inf:  # NaN is the one value not equal to itself
            return
    elif isinstance(x, torch.Tensor):  # float16 overflows at 65504: sum in float32
        if math.isfinite(x.sum(dtype=torch.float32) if x.element_size() < 4 else x.sum()):
            return
    elif math.isfinite(x.sum(dtype=np.float64) if x.itemsize < 8 else x.sum()):
        return  # float64 sums: no overflow warning for float16/32 values
    x = as_numpy(x.double() if isinstance(x, torch.Tensor) else x)
    bad = np.isnan(x) | (x == np.inf) if minus_inf_ok else ~np.isfinite(x)
    where = where() if callable(where) else where
    bad = bad if where is None else bad & as_numpy(where)
    if not bad.any():
        return
    count, first = int(bad.sum()), tuple(int(i) for i in np.argwhere(bad)[0])
    wanted = "finite values" + (" or -inf" if minus_inf_ok else "") + \
        (" wherever the mask lets them count" if where is not None else "")
    fail(name, wanted, f"{count} {'NaN or +inf' if minus_inf_ok else 'NaN or infinite'} "
         f"value{'s' if count > 1 else ''} (the first, "
         f"{float(np.broadcast_to(x, bad.shape)[first])}, at index {first})")


def hide(x, keep, fill: float = 0.0):
    """`x` where `keep` (bool, broadcastable) is True, `fill` elsewhere: a selection, so NaN or
    inf under the mask is gone (a product would keep it: 0 × NaN = NaN)."""
    if isinstance(x, torch.Tensor):
        return torch.where(keep, x, torch.tensor(fill, dtype=x.dtype, device=x.device))
    return np.where(keep, x, fill).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- specs
# One string per argument, read once when the function is decorated:
#   "float (..., Lq, d)"   an array of floats whose axes are named; a name binds one size
#                          across the arguments, "..." the leading axes (all of them >= 1)
#   "bool? ~(..., Lq, Lk)" `?`: may be None; `~`: broadcastable to those axes
#   "float* (B, N, D)"     `*`: its values are not read here (a named rule reads them)
#   "float? (B, M?, D)"    an axis written `M?` may be empty (M = 0)
#   "float (4H, H)"        an axis written `4H` is 4 × H
#   "float (T>=2, D)"      an axis of at least that size; "(B, N<=self.max_len)": at most
#   "float (B, self.d_model) like self.q_proj"   an axis written `self.d_model` is that
#                          attribute of an argument; `like`: the dtype and device of that
#                          tensor, or of that module's weight (else its first parameter)
#   "int (B, N) < self.embedding"   ids in [0, n): n a number, an axis, or an argument (or its
#                          attribute): an nn.Embedding's num_embeddings or an nn.Linear's
#                          out_features, on whose device the ids must be; `<= n`: in [0, n]
#   "float (B, N, H) where mask"   finite where the bool mask (B, N) is True (None: everywhere)
#                          (after the axes: `like`, then `<`, then `where`)
#   "int >= 1", "number > 0", "number? >= 0", "bool", "callable?", "one of a, b, c",
#   "one of? a, b" (a, b or None), "int in 0 .. N", "int? in 1 .. 2w" (bounds as for `<`),
#   "int >= 1, divides D", "int, even"
# Arrays are NumPy for a function named *_np, tensors for *_torch and for modules' methods,
# else of the first array's library; float arrays share one dtype and are finite, tensors
# share one device. The message is generated: "q: expected float (..., Lq, d) with d = 8,
# got float32 tensor (2, 3, 4) on cpu".
ARRAY_KINDS = ("float", "int", "bool", "real")
_ARRAY = re.compile(r"(\w+)(\??)(\*?)\s+(~?)\(([^)]*)\)(?:\s+like\s+([\w.]+))?"
                    r"(?:\s*(<=?)\s*([\w.]+))?(?:\s+where\s+(\w+))?")
_RANGE = re.compile(r"int(\??) in (\d+) \.\. ([\w.]+)")
_SCALAR = re.compile(r"(int|number|bool|callable)(\??)(?:\s*(>=|>|<=)\s*([^\s,]+))?"
                     r"(?:, (?:(even)|divides ([\w.]+)))?")


class Spec:
    """One argument's parsed spec (see above)."""

    def __init__(self, name: str, text: str):
        self.name, self.text, self.op, self.limit = name, text, None, None
        self.like = self.below = self.where = self.closed = self.divides = None
        array, scalar = _ARRAY.fullmatch(text), _SCALAR.fullmatch(text)
        if array and array[1] in ARRAY_KINDS:
            self.kind, optional, unread, broadcast, axes, self.like, self.closed, self.below, \
                self.where = array.groups()
            self.closed, self.bound_of = self.closed == "<=", self.below and bound(self.below)
            self.like_of = self.like and bound(self.like)
            self.optional, self.read, self.broadcast = bool(optional), not unread, bool(broadcast)
            self.axes = tuple(a.strip() for a in axes.split(",") if a.strip())
            self.empty_ok = {a[:-1] for a in self.axes if a.endswith("?")}  # "M?": M may be 0
            limits = [re.fullmatch(r"(\w+)\s*(>=|<=)\s*([\w.]+)", a) for a in self.axes]
            self.least = {m[1]: int(m[3]) for m in limits if m and m[2] == ">="}  # "T>=2"
            self.most = {m[1]: (m[3], bound(m[3])) for m in limits if m and m[2] == "<="}
            self.axes = tuple(m[1] if m else a.removesuffix("?") for a, m in zip(self.axes, limits))
            self.dots = self.axes[:1] == ("...",)  # read once here, not at each call
            self.named = tuple(int(a) if a.isdigit() else (int(m[1]), m[2]) if (
                m := re.fullmatch(r"(\d+)(\D\w*)", a)) else a for a in self.axes[self.dots:])
            self.kinds = ("float", "int", "bool") if self.kind == "real" else (self.kind,)
            self.text = text.replace("?", "").replace("*", "")
        elif bounds := _RANGE.fullmatch(text):
            self.kind, self.axes, self.optional = "range", None, bool(bounds[1])
            self.low, self.high, self.bound_of = int(bounds[2]), bounds[3], bound(bounds[3])
            self.text = text.replace("?", "")
        elif scalar:
            self.kind, optional, self.op, limit, self.even, self.divides = scalar.groups()
            self.optional, self.axes, self.limit = bool(optional), None, \
                None if limit is None else float(limit)
            self.bound_of = self.divides and bound(self.divides)
            self.text = text.replace("?", "")
        elif text.startswith(("one of ", "one of? ")):  # "one of? a, b": a, b or None
            self.kind, self.axes, self.optional = "choice", None, text[6] == "?"
            self.choices = tuple(c.strip() for c in text[7 + self.optional:].split(","))
            self.text = text.replace("?", "")
        else:
            raise ValueError(f"spec of {name}: expected one of the forms of `Spec`, got {text!r}")
        if self.axes is not None and "..." in self.axes[1:]:
            raise ValueError(f"spec of {name}: '...' comes first, got {text!r}")

    def expected(self, sizes: dict) -> str:
        """The spec, with the sizes its axes are bound to by the other arguments."""
        known = [f"{a} = {sizes[a]}" for a in dict.fromkeys(a.lstrip("0123456789")
                                                            for a in self.axes or ()) if a in sizes]
        return self.text + (f" with {', '.join(known)}" if known else "")

    def check_scalar(self, value) -> None:
        name, kind, op, limit = self.name, self.kind, self.op, self.limit
        if kind == "int":
            low = 0 if limit is None or op == "<=" else math.floor(limit) + 1 if op == ">" \
                else math.ceil(limit)
            value = check_size(name, value, low)
            if self.even and value % 2 or op == "<=" and value > limit:
                fail(name, self.text, describe(value))
        elif kind == "number":
            check_number(name, value, low=limit if op == ">=" else None,
                         high=limit if op == "<=" else None, above=limit if op == ">" else None)
        elif kind == "bool" and not isinstance(value, (bool, np.bool_)):
            fail(name, "True or False", describe(value))
        elif kind == "callable" and not callable(value):
            fail(name, "a function", describe(value))
        elif kind == "choice" and (value.__hash__ is None or value not in self.choices):
            fail(name, self.text, describe(value))

    def bind(self, x, sizes: dict, args: dict) -> None:
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
            if axis.__class__ is tuple:  # k × a size, bound here first when not bound yet
                k, base = axis
                if base not in sizes and base not in own and size % k:
                    fail(self.name, self.expected(sizes), describe(x))
                want = k * (sizes[base] if base in sizes else own.setdefault(base, size // k))
            else:
                want = axis if axis.__class__ is int else sizes[axis] if axis in sizes else \
                    own.setdefault(axis, size)
            if size != want:
                fail(self.name, self.expected(sizes if axis in sizes else {**sizes, **own}),
                     describe(x))
            if size < 1 and axis not in self.empty_ok:
                fail(self.name, self.expected(sizes) + ", every size >= 1", describe(x))
            if size < self.least.get(axis, 0):
                fail(self.name, self.expected(sizes), describe(x))
        sizes.update(own)

    def check_like(self, x, args: dict) -> None:
        ref = self.like_of(args, {})
        if isinstance(ref, torch.nn.Module):  # its weight, or its first parameter
            weight = getattr(ref, "weight", None)
            ref = weight if isinstance(weight, torch.Tensor) else next(ref.parameters(), None)
        if ref is None:  # an optional argument not given, or a module without parameters
            return
        if x.dtype != ref.dtype or x.device != ref.device:
            fail(self.name, f"{self.text}: {dtype_name(ref.dtype)} on {ref.device}", describe(x))

    def check_range(self, x, args: dict, sizes: dict) -> None:
        low, high = self.low, self.bound_of(args, sizes)
        if isinstance(x, torch.Tensor) and x.ndim == 0 and not x.is_floating_point() and \
                x.dtype != torch.bool and not x.is_complex():
            x = int(x)  # a 0-d integer tensor, as `check_size` takes it
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) or \
                x < low or high is not None and x > high:
            fail(self.name, f"{self.text} = {high}", describe(x))  # "int in 0 .. N = 5"

    def check_below(self, x, args: dict, sizes: dict) -> None:
        """`< n`: ids in [0, n) (`<= n`: in [0, n]), on the device of n's module if it is one.
        Read once (one min and max); not while torch.compile traces."""
        n = self.bound_of(args, sizes)
        if n is None:  # bound by an array that was not given
            return
        if isinstance(n, torch.nn.Module):
            weight = n.weight
            n = n.num_embeddings if isinstance(n, torch.nn.Embedding) else n.out_features
            if x.device != weight.device:
                fail(self.name, f"{self.text}, on {self.below}'s device {weight.device}",
                     describe(x))
        if math.prod(x.shape) == 0 or isinstance(x, torch.Tensor) and (
                _tracing() or x.device.type == "meta"):
            return
        low, high = (int(v) for v in (torch.aminmax(x) if isinstance(x, torch.Tensor) else
                                      (x.min(), x.max())))
        if low < 0 or high >= n + self.closed:
            word = "values" if self.closed else "ids"
            fail(self.name, f"{word} in [0, {n}{']' if self.closed else ')'} ({self.below})",
                 f"{word} from {low} to {high} in {describe(x)}")

    def fits(self, x, sizes: dict) -> None:
        """A `~` spec: x broadcasts to the axes as bound by the other arguments."""
        named = self.axes[1:] if self.dots else self.axes
        target = tuple(sizes.get("...", ()) if self.dots else ()) + tuple(
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
        self.paths = {a: bound(a) for s in self.specs for a in s.axes or ()
                      if a != "..." and "." in a}  # self.d_model
        parameters = specs if parameters is None else parameters
        axes = {a.lstrip("0123456789") for s in self.specs for a in s.axes or ()}
        for s in self.specs:  # a typo would fail at every call, or never check at all
            names = [s.name] + [t.lstrip("0123456789").split(".")[0] for t in (
                s.like, s.below, s.divides, s.where, getattr(s, "high", None),
                *(text for text, _ in getattr(s, "most", {}).values())) if t]
            where = next((w for w in self.specs if w.name == s.where), None)
            if any(n not in parameters and n not in axes for n in names) or where is not None \
                    and where.broadcast:
                raise ValueError(f"spec of {s.name}: a name that is no argument or axis, or "
                                 f"'where' with a broadcast (~) mask: {s.text!r}")
        self.limited = [s for s in self.specs if getattr(s, "most", None)]
        self.rules = [(rule, tuple(n for n in inspect.signature(rule).parameters
                                   if n in parameters)) for rule in rules]

    def __call__(*contract_and_args, **args) -> None:
        self = contract_and_args[0]  # a method's own `self` is among the arguments
        sizes = {path: value(args, {}) for path, value in self.paths.items()}
        library, dtype, device, later = self.library, None, None, []
        for spec in self.specs:
            x = args[spec.name]
            if x is None and spec.optional:
                continue
            if spec.kind == "range":
                later.append((spec, x))
                continue
            if spec.axes is None:
                spec.check_scalar(x)
                if spec.divides is not None:
                    later.append((spec, x))
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
                spec.bind(x, sizes, args)
            if kind == "float":
                if dtype is None:
                    dtype = (spec.name, x.dtype)
                elif x.dtype != dtype[1]:
                    fail(spec.name, f"{spec.text} of dtype {dtype_name(dtype[1])} ({dtype[0]}'s: "
                         "cast them first)", describe(x))
                if spec.read and spec.where is None:
                    check_finite(spec.name, x)
            if library is torch.Tensor:
                if device is None:
                    device = (spec.name, x.device)
                elif x.device != device[1]:
                    fail(spec.name, f"{spec.text} on {device[0]}'s device, {device[1]}",
                         describe(x))
            if spec.like is not None or spec.below is not None or spec.where is not None:
                later.append((spec, x))
        for spec, x in later:  # once every argument's own spec and every axis is checked
            if spec.like is not None:
                spec.check_like(x, args)
            if spec.kind == "range":
                spec.check_range(x, args, sizes)
            elif spec.divides is not None:
                if (D := spec.bound_of(args, sizes)) is not None and (x == 0 or D % x):
                    fail(spec.name, f"{spec.text} = {D}", describe(x))
            elif spec.below is not None:
                spec.check_below(x, args, sizes)
            elif spec.where is not None and spec.read:  # finite where the mask is True
                m = args[spec.where]  # (aligned at the first axes)
                check_finite(spec.name, x, where=None if m is None else
                             lambda: m[(...,) + (None,) * (x.ndim - m.ndim)])
        for spec in self.limited:  # "(B, N<=self.max_len)", the limit bound by any argument
            for axis, (text, limit_of) in spec.most.items():
                if args[spec.name] is not None and (limit := limit_of(args, sizes)) is not None \
                        and sizes[axis] > limit:
                    fail(spec.name, f"{spec.text}, {text} = {limit}",
                         describe(args[spec.name]))
        for rule, names in self.rules:
            if rule(**{n: args[n] for n in names}) is not None:
                raise TypeError(f"the rule {rule.__name__} returned a value: a check only "
                                "refuses (what the function computes is in its body)")


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def bound(text: str) -> Callable:
    """A bound in a spec, read once: a number, `2w` (2 × w), an axis, or an argument or its
    attributes and items (`self.embedding`, `self.layers.0.d_model`). Returns the function of
    a call's arguments and the sizes bound so far that gives its value."""
    k, name = re.fullmatch(r"(\d*)(.*)", text).groups()
    k = int(k) if k else 1
    first, *steps = name.split(".")
    steps = [int(s) if s.isdigit() else s for s in steps]

    def value(args: dict, sizes: dict):
        if not name or name in sizes:
            return k * sizes[name] if name else k
        if first not in args:  # an axis whose array was not given: nothing to compare with
            return None
        x = args[first]
        try:
            for step in steps:
                x = x[step] if step.__class__ is int else getattr(x, step)
        except (AttributeError, IndexError, TypeError):
            fail(first, f"an object with {name}", describe(args[first]))
        return x if k == 1 else k * x
    return value
