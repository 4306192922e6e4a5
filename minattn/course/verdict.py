"""Outcomes of paper claims, computed from the measured per-run numbers by one stated rule.

Every claim a lesson tests is decided by a small function of its raw numbers (one value per
seed, per test item, or a count of runs), registered with `@claim_rule` (`tools/claims.py`)
and called by the lesson. The function returns a `Verdict`: an outcome, the numbers behind it,
and one sentence that says in words what the run found. The outcomes:

    reproduced     the 95 % interval of the measured difference lies on the paper's side;
    contradicted   it lies on the other side: a significant difference the other way;
    inconclusive   the interval straddles the line: this many runs cannot decide (the detail
                   says how many would, at the measured effect and spread);
    not tested     the experiment could not show the claim: its runs did not converge, both
                   arms sit at a ceiling or floor, the data was a fallback, or the run was a
                   smoke run;
    partly         a claim of several parts, some reproduced and some not.

The intervals are Student-t with the actual degrees of freedom (Welch's for two arms), exact
(Clopper-Pearson) for rates, an equivalence test for "the same" (the whole interval inside
±tolerance), and paired over test items where both arms were scored on the same items. A
95 % two-sided interval on the paper's side is a one-sided test at 2.5 %: with no real
effect the rule says "reproduced" at most 2.5 % of the time at any number of seeds
(tests/test_verdict.py simulates it). The distributions come from `scipy.stats`.

Numbers come in three kinds:
    a float       a deterministic quantity (a count, an identity's rounding error, a closed-form
                  line such as 4/7): exact, no interval;
    a sequence    one value per run (seed): mean ± standard error, n - 1 degrees of freedom;
                  a single run has no spread, so nothing measured from it alone is decided;
    counts        k successes of n runs, passed to the rate functions.

    >>> compare([0.84, 0.85, 0.83], [0.55, 0.56, 0.54], expect=">").verdict
    'reproduced'
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from .estimates import (
    LEVEL,
    Estimate,
    Number,
    difference,
    estimate,
    interval,
    rate_interval,
    runs_needed,
)

REPRODUCED, CONTRADICTED, INCONCLUSIVE = "reproduced", "contradicted", "inconclusive"
NOT_TESTED, PARTLY = "not tested", "partly"
OUTCOMES = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTED, PARTLY)

RULE = ("Each claim is decided by the 95 % interval of its measured difference: Student-t with "
        "the real degrees of freedom over seeds (Welch for two arms), paired over test items "
        "where both arms saw the same items, exact binomial for rates. Reproduced: the interval "
        "lies on the paper's side (for 'the same': inside the stated tolerance). Contradicted: "
        "it lies on the other side (outside the tolerance). Inconclusive: it straddles the line, "
        "so more runs are needed. Not tested: the runs did not converge, sat at a ceiling or "
        "floor, used fallback data, or were a smoke run. Partly: some parts of a claim "
        "reproduced and some not.")


# --- the verdict -------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """An outcome and the numbers behind it, e.g.
    ('reproduced', '0.84 vs 0.55: +0.29, 95 % interval [+0.27, +0.31]').

    reason: why a claim was not tested (budget, ceiling, floor, fallback, smoke);
    n: how many runs (or items) each arm had, e.g. '3 vs 3' ('exact' for a deterministic one);
    finding: one sentence saying in words what the run found (`Verdict.says`);
    rule, raw: the registered claim function that decided it and the numbers it was given.
    """

    verdict: str
    detail: str
    reason: str = ""
    n: str = ""
    finding: str = ""
    rule: str = ""
    raw: dict | None = None

    def __post_init__(self):
        if self.verdict not in OUTCOMES:
            raise ValueError(f"verdict: expected one of {OUTCOMES}, got {self.verdict!r}")

    @property
    def outcome(self) -> str:
        """The outcome with its reason: 'not tested (budget)', 'reproduced', ..."""
        return f"{self.verdict} ({self.reason})" if self.reason else self.verdict

    def __str__(self) -> str:
        return f"{self.outcome}: {self.detail}"

    def says(self, *, reproduced: str, contradicted: str, inconclusive: str, not_tested: str,
             partly: str | None = None) -> Verdict:
        """This verdict with the sentence of its outcome as its finding. Every outcome gets a
        sentence, so the text is true whatever the run found; `partly` is needed by claims of
        several parts and by comparisons given the paper's gap."""
        sentences = {REPRODUCED: reproduced, CONTRADICTED: contradicted,
                     INCONCLUSIVE: inconclusive, NOT_TESTED: not_tested, PARTLY: partly}
        if sentences[self.verdict] is None:
            raise ValueError(f"says: the outcome is {self.verdict!r} but no sentence was given "
                             "for it (pass partly=...)")
        return dataclasses.replace(self, finding=sentences[self.verdict])


@dataclass(frozen=True)
class Gate:
    """A condition the experiment must meet before its numbers can show a claim."""

    passed: bool
    reason: str  # 'budget', 'ceiling', 'floor', 'fallback'
    detail: str


def converged(flags: Sequence[bool], what: str = "runs") -> Gate:
    """Every run reached its convergence test (a plateau, a target) inside the budget."""
    flags = [bool(f) for f in flags]
    return Gate(all(flags), "budget", f"{sum(flags)} of {len(flags)} {what} converged")


def off_ceiling(*arms: Number, top: float, margin: float) -> Gate:
    """Not every arm within `margin` of the ceiling `top` (an accuracy of 1.0, say): two arms
    that both sit at the ceiling cannot show which is better."""
    means = [estimate(a).mean for a in arms]
    at = all(m >= top - margin for m in means)
    return Gate(not at, "ceiling", f"arms at {', '.join(f'{m:.4g}' for m in means)}; "
                                   f"ceiling {top:g} (margin {margin:g})")


def off_floor(*arms: Number, bottom: float, margin: float) -> Gate:
    """Not every arm within `margin` of the floor `bottom` (chance, say)."""
    means = [estimate(a).mean for a in arms]
    at = all(m <= bottom + margin for m in means)
    return Gate(not at, "floor", f"arms at {', '.join(f'{m:.4g}' for m in means)}; "
                                 f"floor {bottom:g} (margin {margin:g})")


def real_data(ok: bool, what: str) -> Gate:
    """The run used the real data set, not the offline fallback."""
    return Gate(bool(ok), "fallback", f"{what}: {'real data' if ok else 'fallback data'}")


def _gated(gates: Sequence[Gate], numbers: str, n: str) -> Verdict | None:
    """Not tested when a gate failed: the reason of the first, the details of all."""
    for gate in gates:
        if not isinstance(gate, Gate):
            raise TypeError(f"gates: expected Gate objects, got {type(gate).__name__}")
    failed = [gate for gate in gates if not gate.passed]
    if failed:
        return Verdict(NOT_TESTED, f"{'; '.join(g.detail for g in failed)} ({numbers})",
                       reason=failed[0].reason, n=n)
    return None


def _check_expect(expect: str) -> int:
    if expect not in (">", "<"):
        raise ValueError(f"expect: expected '>' or '<', got {expect!r}")
    return 1 if expect == ">" else -1


def _fmt_interval(lo: float, hi: float) -> str:
    return f"[{lo:+.4g}, {hi:+.4g}]" if lo != hi else f"{lo:+.4g} exactly"


def _n(e: Estimate) -> str:
    return "exact" if math.isinf(e.df) else str(e.n)


def _sides(sign: int, lo: float, hi: float, exact: bool) -> str:
    """REPRODUCED when the interval [lo, hi] is on the `sign` side of 0, CONTRADICTED when on
    the other (an exact 0 contradicts a strict inequality), INCONCLUSIVE otherwise."""
    if sign * lo > 0 and sign * hi > 0:
        return REPRODUCED
    if (sign * hi < 0 and sign * lo < 0) or (exact and lo == hi == 0):
        return CONTRADICTED
    return INCONCLUSIVE


def _needed_note(d: Estimate, ea: Estimate, eb: Estimate) -> str:
    if d.df == 0:
        return "; one run has no spread: at least two runs per arm are needed"
    sd = [e.se * math.sqrt(e.n) for e in (ea, eb) if e.se > 0]
    n = runs_needed(d.mean, *sd[:2]) if sd else None
    return (f"; an effect this size would need about {n} runs per arm" if n
            else "; no effect measured that more runs could confirm")


def compare(a: Number, b: Number, expect: str = ">", *, paper_gap: float | None = None,
            gates: Sequence[Gate] = ()) -> Verdict:
    """The paper says a > b (expect='>') or a < b (expect='<'): the 95 % Welch interval of
    a - b decides. `paper_gap` (the paper's |a - b|, in our units): reproduced only when the
    interval reaches half of it, partly when the whole interval is below half."""
    sign = _check_expect(expect)
    ea, eb = estimate(a, "a"), estimate(b, "b")
    d = difference(ea, eb)
    lo, hi = interval(d)
    detail = f"{ea} {expect} {eb}? difference {d.mean:+.4g}, 95 % interval {_fmt_interval(lo, hi)}"
    n = f"{_n(ea)} vs {_n(eb)}"
    gated = _gated(gates, detail, n)
    if gated:
        return gated
    outcome = _sides(sign, lo, hi, exact=math.isinf(d.df))
    if outcome == REPRODUCED and paper_gap is not None and max(sign * lo, sign * hi) < abs(
            paper_gap) / 2:
        return Verdict(PARTLY, detail + f"; the whole interval is under half the paper's "
                                        f"{abs(paper_gap):.3g}", n=n)
    if outcome == INCONCLUSIVE:
        detail += _needed_note(d, ea, eb)
    return Verdict(outcome, detail, n=n)


def versus(values: Number, line: float, expect: str = ">", *,
           gates: Sequence[Gate] = ()) -> Verdict:
    """A measured quantity against a fixed line (chance, a closed-form ceiling, a paper's
    threshold): the 95 % one-sample t interval decides."""
    return compare(values, float(line), expect, gates=gates)


def _within(e: Estimate, low: float, high: float, label: str, gates: Sequence[Gate],
            n: str) -> Verdict:
    lo, hi = interval(e)
    detail = f"{label} in [{low:.4g}, {high:.4g}]? 95 % interval {_fmt_interval(lo, hi)}"
    gated = _gated(gates, detail, n)
    if gated:
        return gated
    if low <= lo and hi <= high:
        return Verdict(REPRODUCED, detail, n=n)
    if hi < low or lo > high:
        return Verdict(CONTRADICTED, detail, n=n)
    return Verdict(INCONCLUSIVE, detail + ("; one run has no spread: at least two are needed"
                                           if e.df == 0 else ""), n=n)


def within(values: Number, low: float, high: float, *, gates: Sequence[Gate] = ()) -> Verdict:
    """The paper gives a range [low, high]: reproduced when the whole 95 % interval of the
    measured quantity lies inside it, contradicted when the whole interval lies outside."""
    if not low <= high:
        raise ValueError(f"within: expected low <= high, got [{low}, {high}]")
    e = estimate(values)
    return _within(e, low, high, str(e), gates, _n(e))


def same(a: Number, b: Number, tolerance: float, *, gates: Sequence[Gate] = ()) -> Verdict:
    """The paper says a and b do not differ by more than `tolerance` (an equivalence test):
    reproduced when the whole 95 % interval of a - b lies inside ±tolerance, contradicted when
    it lies wholly outside. Noisier data widens the interval, so it is *harder* to call the
    same."""
    if not tolerance >= 0:
        raise ValueError(f"tolerance: expected a number >= 0, got {tolerance}")
    ea, eb = estimate(a, "a"), estimate(b, "b")
    d = difference(ea, eb)
    return _within(d, -tolerance, tolerance, f"{ea} vs {eb}: difference {d.mean:+.4g}", gates,
                   f"{_n(ea)} vs {_n(eb)}")


def paired(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], expect: str = ">", *,
           gates: Sequence[Gate] = ()) -> Verdict:
    """Two arms scored on the same test items: a[run][item], b[run][item] (e.g. 1 for a
    correct answer). The difference of mean scores has two sources of error, added: the items
    (the per-item difference of the arms' run-averaged scores, paired) and the runs (each arm's
    spread of per-run means over its seeds). At least two runs per arm are needed."""
    sign = _check_expect(expect)
    A, B = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1] or A.shape[1] < 2:
        raise ValueError("paired: expected two (runs, items) arrays over the same >= 2 items, "
                         f"got shapes {A.shape} and {B.shape}")
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise ValueError("paired: expected finite scores")
    items = A.mean(0) - B.mean(0)
    e_items = estimate(items.tolist())
    ea, eb = estimate(A.mean(1).tolist()), estimate(B.mean(1).tolist())
    parts = [Estimate(0.0, e_items.se, e_items.n, e_items.df), ea, eb]
    se2 = sum(p.se ** 2 for p in parts)
    dfs = [p.se ** 4 / p.df for p in parts if p.se > 0 and 0 < p.df < math.inf]
    df = 0.0 if min(ea.df, eb.df) == 0 else (se2 ** 2 / sum(dfs) if dfs else math.inf)
    d = Estimate(ea.mean - eb.mean, math.sqrt(se2), min(ea.n, eb.n), df)
    lo, hi = interval(d)
    detail = (f"{ea} {expect} {eb} over {A.shape[1]} shared items? difference {d.mean:+.4g}, "
              f"95 % interval {_fmt_interval(lo, hi)} (items ± {e_items.se:.2g}, runs "
              f"± {math.hypot(ea.se, eb.se):.2g})")
    n = f"{ea.n} vs {eb.n} runs × {A.shape[1]} items"
    gated = _gated(gates, detail, n)
    if gated:
        return gated
    outcome = _sides(sign, lo, hi, exact=False)
    if outcome == INCONCLUSIVE and df == 0:
        detail += "; one run per arm has no spread: at least two are needed"
    return Verdict(outcome, detail, n=n)


# --- rates: k of n runs ---------------------------------------------------------------------

def rate_versus(k: int, n: int, line: float, expect: str = ">", *,
                gates: Sequence[Gate] = ()) -> Verdict:
    """k of n runs succeeded; the paper says the rate is above (below) `line` — "every time"
    is a rate above a high line, "rarely" below a low one. The exact 95 % interval decides."""
    sign = _check_expect(expect)
    lo, hi = rate_interval(k, n)
    detail = f"{k}/{n} {expect} {line:g}? 95 % interval [{lo:.2f}, {hi:.2f}]"
    gated = _gated(gates, detail, str(n))
    if gated:
        return gated
    outcome = _sides(sign, lo - line, hi - line, exact=False)
    if outcome == INCONCLUSIVE:
        more = next((m for m in range(n + 1, 10 * n + 200)
                     if _sides(sign, *(x - line for x in rate_interval(round(k * m / n), m)),
                               exact=False) == REPRODUCED), None)
        detail += (f"; at this rate about {more} runs would decide" if more
                   else "; the measured rate is too close to the line to decide")
    return Verdict(outcome, detail, n=str(n))


def sometimes(k: int, n: int, rare: float = 0.1, *, gates: Sequence[Gate] = ()) -> Verdict:
    """The paper says an outcome happens in some runs and not in others. Reproduced when both
    were seen (0 < k < n); contradicted when only one was seen and the exact interval puts the
    other below `rare`; inconclusive otherwise."""
    lo, hi = rate_interval(k, n)
    detail = f"{k}/{n} runs; 95 % interval [{lo:.2f}, {hi:.2f}]"
    gated = _gated(gates, detail, str(n))
    if gated:
        return gated
    if 0 < k < n:
        return Verdict(REPRODUCED, detail, n=str(n))
    if (k == 0 and hi < rare) or (k == n and lo > 1 - rare):
        return Verdict(CONTRADICTED, detail + f"; the other outcome is rarer than {rare:g}",
                       n=str(n))
    return Verdict(INCONCLUSIVE, detail + f"; too few runs to rule out a rate of {rare:g}",
                   n=str(n))


def compare_rates(k_a: int, n_a: int, k_b: int, n_b: int, expect: str = ">", *,
                  gates: Sequence[Gate] = ()) -> Verdict:
    """Two rates (k_a of n_a runs against k_b of n_b): Fisher's exact test, one-sided at 2.5 %
    each way (the same level as the intervals)."""
    sign = _check_expect(expect)
    for k, n in ((k_a, n_a), (k_b, n_b)):
        rate_interval(k, n)  # checks k and n
    table = [[k_a, n_a - k_a], [k_b, n_b - k_b]]
    p_more = stats.fisher_exact(table, alternative="greater").pvalue
    p_less = stats.fisher_exact(table, alternative="less").pvalue
    p_for, p_against = (p_more, p_less) if sign > 0 else (p_less, p_more)
    alpha = (1 - LEVEL) / 2
    detail = (f"{k_a}/{n_a} {expect} {k_b}/{n_b}? Fisher's exact p = {p_for:.2g} "
              f"(the other way: {p_against:.2g})")
    n = f"{n_a} vs {n_b}"
    gated = _gated(gates, detail, n)
    if gated:
        return gated
    if p_for < alpha:
        return Verdict(REPRODUCED, detail, n=n)
    if p_against < alpha:
        return Verdict(CONTRADICTED, detail, n=n)
    return Verdict(INCONCLUSIVE, detail, n=n)


# --- claims of several parts ----------------------------------------------------------------

def combine(*parts: Verdict) -> Verdict:
    """A claim of several parts: an outcome every part shares is the claim's; some parts
    reproduced and some not is partly; none reproduced: contradicted if a part is, else
    inconclusive if a part is, else not tested."""
    if not parts:
        raise ValueError("combine: expected at least one Verdict")
    kinds = {p.verdict for p in parts}
    reasons = sorted({p.reason for p in parts if p.reason})
    if len(kinds) == 1:
        outcome = kinds.pop()
    elif REPRODUCED in kinds or PARTLY in kinds:
        outcome = PARTLY
    else:
        outcome = next(k for k in (CONTRADICTED, INCONCLUSIVE, NOT_TESTED) if k in kinds)
    ns = list(dict.fromkeys(p.n for p in parts if p.n))
    return Verdict(outcome, "; ".join(f"{p.outcome}: {p.detail}" for p in parts),
                   reason=", ".join(reasons) if outcome == NOT_TESTED else "", n="; ".join(ns))
