"""Checks that the visible exercise tests share, so that a typical mistake fails with a message
that names it (the student's check shows one line per failure): a torch twin that returns a
NumPy array, a NumPy function built on torch, arrays whose shapes differ (NumPy's own message
says so only on a line the one-line summary drops), values that are those of a known mistake
(the √d scale forgotten). A test helper: nothing here computes an exercise's answer."""

import numpy as np
import torch


def _kind(x) -> str:
    return ("torch tensor" if isinstance(x, torch.Tensor) else "NumPy array"
            if isinstance(x, np.ndarray) else type(x).__name__)


def _array(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def returns_tensor(out, fn: str):
    """`out`, which the torch twin `fn` returned: a tensor, else a failure that says so."""
    if not isinstance(out, torch.Tensor):
        raise AssertionError(f"{fn} returned a {_kind(out)}; the torch twin must return a "
                             "tensor (and keep gradients)")
    return out


def returns_array(out, fn: str):
    """`out`, which the NumPy function `fn` returned: a NumPy array, else a failure."""
    if not isinstance(out, (np.ndarray, np.generic)):
        raise AssertionError(f"{fn} returned a {_kind(out)}; the NumPy function must return "
                             "NumPy arrays (compute with NumPy; torch is for the twin)")
    return out


def close(actual, desired, rtol: float = 1e-7, atol: float = 0.0, what: str = "",
          mistakes=(), nonfinite: str | None = None) -> None:
    """np.testing.assert_allclose, saying first what differs in kind: the shapes, then NaN or
    inf where `desired` is finite (`nonfinite` says why), then, where the values differ, the
    typical mistake whose values they are. `mistakes`: (message, the values that mistake would
    give) pairs. `what` starts each message ("softmax_np: ")."""
    a, d = _array(actual), _array(desired)
    if a.shape != d.shape:
        raise AssertionError(f"{what}the shapes differ: {a.shape} vs {d.shape}")
    if nonfinite and not np.isfinite(a[np.isfinite(d)]).all():
        raise AssertionError(f"{what}{nonfinite}")
    if not np.allclose(a, d, rtol=rtol, atol=atol, equal_nan=True):
        for message, value in mistakes:
            wrong = _array(value)
            if wrong.shape == a.shape and np.allclose(a, wrong, rtol=1e-6, atol=1e-9,
                                                      equal_nan=True):
                raise AssertionError(f"{what}{message}")
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, err_msg=what)


def same_mask(got, want, w: int, what: str = "") -> None:
    """Two (..., N, N) boolean masks of a window |i - j| <= w (and j <= i when causal) equal,
    else a failure that names the usual slip: the edge |i - j| = w left out, a causal query
    that sees later keys instead of earlier ones, or the shapes."""
    got, want = _array(got), _array(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what}the shapes differ: {got.shape} vs {want.shape}")
    if (got == want).all():
        return
    i, j = np.indices(want.shape[-2:])
    distance = np.broadcast_to(np.abs(i - j), want.shape)
    later = np.broadcast_to(j > i, want.shape)
    missing, extra = want & ~got, got & ~want
    if missing.any() and not extra.any() and (distance[missing] == w).all():
        raise AssertionError(f"{what}|i - j| = w is inside the window (w = {w}): a query sees "
                             "its w neighbours on each side, |i - j| <= w, not < w")
    if extra.any() and later[extra].all():
        raise AssertionError(f"{what}a causal query sees the keys before it (j <= i), never "
                             "after: the mask lets a query see later keys")
    first = tuple(int(x) for x in np.argwhere(got != want)[0])
    raise AssertionError(f"{what}mask{list(first)} is {bool(got[first])}, should be "
                         f"{bool(want[first])} (w = {w})")
