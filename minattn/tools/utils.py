"""Small shared helpers: seeding, device choice, input checks.

Everything here is used by several mechanism files; nothing here is a mechanism.
"""

from __future__ import annotations

import os
import random
from typing import Sequence

import numpy as np
import torch


# ----------------------------------------------------------------------------- seeding & device
def set_seed(seed: int) -> np.random.Generator:
    """Seed Python's and torch's generators and return a fresh NumPy generator.

    Lessons call this once per experiment so that a lesson run twice prints the same numbers
    on the same machine. NumPy code takes the returned generator explicitly (no global NumPy
    state is touched).
    """
    random.seed(seed)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def pick_device(prefer: str | None = None) -> torch.device:
    """`cuda` when available, else `cpu`. `MINATTN_DEVICE` (or `prefer`) overrides.

    Library functions never call this: they take the device of their inputs. Only lessons and
    benchmarks choose a device.
    """
    name = prefer or os.environ.get("MINATTN_DEVICE")
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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
def fail(what: str, expected: str, given: str) -> None:
    """Raise the one kind of error students see: what was wrong, expected vs given."""
    raise ValueError(f"{what}: expected {expected}, got {given}")


def shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def check_ndim(name: str, x, min_ndim: int, hint: str) -> None:
    """Require `x.ndim >= min_ndim`; `hint` names the axes, e.g. '(..., N, d)'."""
    if x.ndim < min_ndim:
        fail(f"{name} has too few dimensions", f"shape {hint}", f"shape {shape_str(x.shape)}")


def check_same_device(**tensors) -> None:
    """All torch tensors given must live on one device (NumPy arrays are ignored)."""
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


def check_mask(mask, scores_shape: Sequence[int], name: str = "mask") -> None:
    """A mask must be boolean (True = may attend) and broadcast to the scores' shape."""
    if mask is None:
        return
    if not is_bool_dtype(mask):
        fail(f"{name} has the wrong dtype", "bool (True = may attend)", f"{mask.dtype}")
    if not broadcast_ok(tuple(mask.shape), tuple(scores_shape)):
        fail(f"{name} does not fit the attention scores",
             f"a shape broadcastable to {shape_str(scores_shape)}", shape_str(mask.shape))
