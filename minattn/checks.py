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
    keep = None if query_mask is None else query_mask[:, None, :, None]
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
