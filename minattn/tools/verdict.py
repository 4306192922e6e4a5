"""Verdicts on paper claims, computed from measured numbers by one stated rule.

Every claim a lesson records (`Lesson.claim`) carries a verdict — *reproduced*, *partly* or
*not reproduced* — that follows from the numbers the run printed, never from the author's
reading of them. The rule, used by every lesson and printed at the top of the course report:

    A difference counts when it exceeds twice its standard error over seeds.
    reproduced      the paper's difference (or inequality) holds and counts;
    not reproduced  it does not count (within noise) or counts the other way;
    partly          a claim of several parts where some parts are reproduced and some not
                    (`combine`), or the paper's direction counts but the difference is less
                    than half the paper's (`compare(..., paper_gap=...)`).

Numbers come in two kinds:
    a float            a deterministic quantity (exact: standard error 0), e.g. an EM table, a
                       count, a closed-form line such as 4/7;
    a sequence         one value per seed (at least two): mean ± standard error of the mean;
    `rate(k, n)`       k successes out of n seeds, with the standard error of a proportion
                       (Laplace-smoothed, so 0/10 and 10/10 still carry uncertainty).

    >>> compare([0.84, 0.85, 0.83], [0.55, 0.56, 0.54], expect=">").verdict
    'reproduced'
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence, Union

REPRODUCED, PARTLY, NOT_REPRODUCED = "reproduced", "partly", "not reproduced"
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED)

RULE = ("A difference counts when it exceeds twice its standard error over seeds (a "
        "deterministic quantity has none). Reproduced: the paper's difference holds and counts. "
        "Not reproduced: it does not count, or counts the other way. Partly: some parts of a "
        "claim reproduced and some not, or the paper's direction counts at under half the "
        "paper's size.")


@dataclass(frozen=True)
class Estimate:
    """A measured quantity: its mean, the standard error of that mean, and how many seeds."""

    mean: float
    se: float
    n: int

    def __str__(self) -> str:
        if self.n <= 1 and self.se == 0:
            return f"{self.mean:.4g}"
        return f"{self.mean:.4g} ± {self.se:.2g} (n={self.n})"


Number = Union[float, int, Sequence[float], Estimate]


def estimate(values: Number, name: str = "values") -> Estimate:
    """An Estimate from a float (exact), a sequence of per-seed values (n >= 2) or an Estimate."""
    if isinstance(values, Estimate):
        return values
    if getattr(values, "ndim", None) == 0:  # a 0-d NumPy array or torch tensor
        values = values.item()
    if isinstance(values, numbers.Real) and not isinstance(values, bool):  # NumPy scalars too
        if not math.isfinite(values):
            raise ValueError(f"{name}: expected a finite number, got {values}")
        return Estimate(float(values), 0.0, 1)
    try:
        xs = [float(v) for v in values]
    except TypeError:
        raise TypeError(f"{name}: expected a float, a sequence of per-seed values or an Estimate, "
                        f"got {type(values).__name__}") from None
    if len(xs) < 2:
        raise ValueError(f"{name}: a spread needs at least two seeds, got {len(xs)} value(s); pass "
                         "a float for a deterministic quantity")
    if not all(math.isfinite(x) for x in xs):
        raise ValueError(f"{name}: expected finite values, got {xs}")
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return Estimate(mean, math.sqrt(var / n), n)


def rate(successes: int, n: int) -> Estimate:
    """k of n seeds succeeded: the fraction, with the standard error of a proportion computed
    at the Laplace-smoothed p = (k + 1) / (n + 2), so that 0/n and n/n are not exact."""
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n: expected a positive integer number of seeds, got {n!r}")
    if not (isinstance(successes, int) and 0 <= successes <= n):
        raise ValueError(f"successes: expected an integer in [0, {n}], got {successes!r}")
    p = (successes + 1) / (n + 2)
    return Estimate(successes / n, math.sqrt(p * (1 - p) / n), n)


@dataclass(frozen=True)
class Verdict:
    """A verdict and the numbers behind it,
    e.g. ('reproduced', '0.84 vs 0.55: +0.29 > 2 SE 0.02')."""

    verdict: str
    detail: str

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict: expected one of {VERDICTS}, got {self.verdict!r}")

    def __str__(self) -> str:
        return f"{self.verdict} ({self.detail})"


def _check_expect(expect: str) -> int:
    if expect not in (">", "<"):
        raise ValueError(f"expect: expected '>' or '<', got {expect!r}")
    return 1 if expect == ">" else -1


def compare(a: Number, b: Number, expect: str = ">", paper_gap: float | None = None) -> Verdict:
    """The paper says a > b (expect='>') or a < b (expect='<'): is that what we measured?

    reproduced when the difference has the paper's sign and exceeds twice its standard error
    (the two standard errors added in quadrature); partly when it does but `paper_gap` (the
    paper's |a - b|, in our units) is given and ours is under half of it; not reproduced
    otherwise.
    """
    sign = _check_expect(expect)
    ea, eb = estimate(a, "a"), estimate(b, "b")
    diff = ea.mean - eb.mean
    se = math.hypot(ea.se, eb.se)
    counts = abs(diff) > 2 * se
    detail = f"{ea} {expect} {eb}? difference {diff:+.3g}, 2 SE = {2 * se:.2g}"
    if counts and sign * diff > 0:
        if paper_gap is not None and abs(diff) < 0.5 * abs(paper_gap):
            return Verdict(PARTLY, detail + f"; under half the paper's {abs(paper_gap):.3g}")
        return Verdict(REPRODUCED, detail)
    why = "the other way" if counts else "within noise"
    return Verdict(NOT_REPRODUCED, f"{detail} ({why})")


def versus(values: Number, line: float, expect: str = ">") -> Verdict:
    """A measured quantity against a fixed line (chance, a closed-form ceiling, a paper's
    threshold): `compare(values, line, expect)`."""
    return compare(values, float(line), expect)


def same(a: Number, b: Number, tolerance: float = 0.0) -> Verdict:
    """The paper says a and b do not differ (beyond `tolerance`): reproduced when |a - b| is
    within tolerance + 2 SE, not reproduced when it exceeds it."""
    ea, eb = estimate(a, "a"), estimate(b, "b")
    diff = ea.mean - eb.mean
    bound = tolerance + 2 * math.hypot(ea.se, eb.se)
    detail = f"{ea} vs {eb}: difference {diff:+.3g}, allowed ±{bound:.2g}"
    return Verdict(REPRODUCED if abs(diff) <= bound else NOT_REPRODUCED, detail)


def combine(*parts: Verdict) -> Verdict:
    """A claim of several parts: reproduced if every part is, not reproduced if none is (none
    reproduced or partly), partly otherwise."""
    if not parts:
        raise ValueError("combine: expected at least one Verdict")
    kinds = [p.verdict for p in parts]
    if all(k == REPRODUCED for k in kinds):
        verdict = REPRODUCED
    elif all(k == NOT_REPRODUCED for k in kinds):
        verdict = NOT_REPRODUCED
    else:
        verdict = PARTLY
    return Verdict(verdict, "; ".join(f"{p.verdict}: {p.detail}" for p in parts))
