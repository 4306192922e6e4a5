"""The statistics behind the course's verdicts (`minattn.course.verdict`): a measured
quantity as mean ± standard error with its degrees of freedom, Student-t intervals, exact
binomial intervals for rates, and how many runs an effect needs.

Nothing here decides a claim; `verdict.py` does, with these intervals.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np
from scipy import special

LEVEL = 0.95  # every interval is a two-sided 95 % interval


@dataclass(frozen=True)
class Estimate:
    """A measured quantity: its mean, the standard error of that mean, the runs behind it and
    the degrees of freedom of that error (inf: exact; 0: one run, spread unknown)."""

    mean: float
    se: float
    n: int
    df: float

    def __str__(self) -> str:
        if math.isinf(self.df):
            return f"{self.mean:.4g}"
        if self.n == 1:
            return f"{self.mean:.4g} (1 run)"
        return f"{self.mean:.4g} ± {self.se:.2g} (n={self.n})"


Number = Union[float, int, Sequence[float], Estimate]


def estimate(values: Number, name: str = "values") -> Estimate:
    """An Estimate from a float (exact), a sequence of per-run values or an Estimate."""
    if isinstance(values, Estimate):
        return values
    if getattr(values, "ndim", None) == 0:  # a 0-d NumPy array or torch tensor
        values = values.item()
    if isinstance(values, numbers.Real) and not isinstance(values, bool):  # NumPy scalars too
        if not math.isfinite(values):
            raise ValueError(f"{name}: expected a finite number, got {values}")
        return Estimate(float(values), 0.0, 1, math.inf)
    if isinstance(values, (str, bytes, bool)):
        raise TypeError(f"{name}: expected a float, a sequence of per-run values or an Estimate, "
                        f"got {type(values).__name__}")
    try:
        xs = np.asarray([float(v) for v in values])
    except TypeError:
        raise TypeError(f"{name}: expected a float, a sequence of per-run values or an Estimate, "
                        f"got {type(values).__name__}") from None
    if len(xs) == 0:
        raise ValueError(f"{name}: expected at least one run, got an empty sequence")
    if not np.isfinite(xs).all():
        raise ValueError(f"{name}: expected finite values, got {xs.tolist()}")
    if len(xs) == 1:  # one run: a value, but no spread to judge it against
        return Estimate(float(xs[0]), math.inf, 1, 0.0)
    return Estimate(float(xs.mean()), float(xs.std(ddof=1) / math.sqrt(len(xs))), len(xs),
                    float(len(xs) - 1))


def difference(ea: Estimate, eb: Estimate) -> Estimate:
    """a - b with Welch's standard error and Welch-Satterthwaite degrees of freedom."""
    va, vb = ea.se ** 2, eb.se ** 2
    se = math.sqrt(va + vb)
    if ea.df == 0 or eb.df == 0:
        df = 0.0
    elif se == 0:
        df = math.inf
    else:
        df = (va + vb) ** 2 / sum(v ** 2 / d for v, d in ((va, ea.df), (vb, eb.df))
                                  if v > 0 and math.isfinite(d))
    return Estimate(ea.mean - eb.mean, se, min(ea.n, eb.n), df)


def t_quantile(df: float) -> float:
    """The Student-t quantile of a two-sided 95 % interval with `df` degrees of freedom
    (`scipy.special.stdtrit`: the same number as `scipy.stats.t.ppf`, a thousand times faster
    to call, which the calibration test needs)."""
    return float(special.stdtrit(df, 0.5 + LEVEL / 2))


def interval(e: Estimate) -> tuple[float, float]:
    """The 95 % Student-t interval of an estimate (a point for an exact one; the whole line
    for a single run, whose spread is unknown)."""
    if e.df == 0:
        return -math.inf, math.inf
    if math.isinf(e.df) or e.se == 0:
        return e.mean, e.mean
    half = t_quantile(e.df) * e.se
    return e.mean - half, e.mean + half


def runs_needed(diff: float, sd_a: float, sd_b: float = 0.0, power: float = 0.8,
                most: int = 1000) -> int | None:
    """Runs per arm at which a two-sided 95 % t-test finds a true difference `diff` with
    probability `power`, when one run of each arm spreads by sd_a and sd_b (sd_b = 0: against
    a fixed line): the noncentral t distribution's tail beyond the test's critical value.
    None when there is no effect to find or it needs more than `most`."""
    if diff == 0 or not math.isfinite(sd_a + sd_b) or sd_a + sd_b == 0:
        return None
    sd = math.hypot(sd_a, sd_b)
    z = special.ndtri(0.5 + LEVEL / 2) + special.ndtri(power)
    guess = math.ceil((z * sd / abs(diff)) ** 2)  # the normal approximation, a little low
    for n in range(max(2, guess - 2), most + 1):
        df = (n - 1) if sd_b == 0 else 2 * (n - 1)
        if 1 - special.nctdtr(df, abs(diff) / (sd / math.sqrt(n)), t_quantile(df)) >= power:
            return n
    return None


def rate_interval(k: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95 % interval of a rate measured as k of n: the quantiles
    of the beta distributions that bound a binomial rate (what `scipy.stats.binomtest(k, n)
    .proportion_ci(method="exact")` returns)."""
    if not (isinstance(n, numbers.Integral) and n >= 1):
        raise ValueError(f"n: expected a positive integer number of runs, got {n!r}")
    if not (isinstance(k, numbers.Integral) and 0 <= k <= n):
        raise ValueError(f"k: expected an integer in [0, {n}], got {k!r}")
    tail = (1 - LEVEL) / 2
    low = special.betaincinv(k, n - k + 1, tail) if k > 0 else 0.0
    high = special.betaincinv(k + 1, n - k, 1 - tail) if k < n else 1.0
    return float(low), float(high)
