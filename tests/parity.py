"""The two conversions the float64 parity tests share. A test helper, not part of the library."""

import numpy as np
import torch


def t(x) -> torch.Tensor:
    """x (an array, a list, a number) as a float64 tensor."""
    return torch.as_tensor(np.asarray(x), dtype=torch.float64)


def np_(p: torch.Tensor) -> np.ndarray:
    """A tensor (a parameter, an output) as a float64 NumPy array, detached from the graph."""
    return p.detach().double().numpy()
