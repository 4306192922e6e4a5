"""Seeding and device choice for the lessons and benchmarks (the library's input checks are
minattn/contract.py and minattn/checks.py)."""

from __future__ import annotations

import os
import random

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
