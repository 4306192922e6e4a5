"""The one rule behind every outcome the course prints: a paper's claim against the runs.

A lesson decides each claim in its own cell with one call of this module and hands the result
to `lesson.claim`, which prints one row and records it for figures/REPORT.md:

    lesson.claim("attention needs positions to use order", paper="... (Vaswani et al., §3.5)",
                 test=compare(acc_sinusoid, acc_none, ">"),
                 reproduced="With sinusoids the model reverses; without, it cannot.")

The outcomes (RULE below says the same in the report):

    reproduced     the 95 % interval of the measured difference lies on the paper's side;
    contradicted   it lies wholly on the other side;
    inconclusive   it straddles the line: these runs cannot decide (the detail says how many
                   runs would, at the measured effect and spread);
    not tested     a gate failed: the runs had not converged (judged on their curves), both
                   arms sit at a ceiling or floor, or the data was a fallback (a smoke run is
                   never a test); the numbers' own outcome is kept beside it; or the run does
                   not decide the claim at all (`not_run`: paper scale);
    partly         a claim of several parts (`all_of`) of which some parts were reproduced and
                   others not; each part's words follow its own outcome.

A 95 % interval on one side of the line is a one-sided test at 2.5 %: with no real effect a
claim comes out "reproduced" at most 2.5 % of the time. tests/test_stats.py simulates it at the
lessons' sizes: two arms (equal and 3x unequal spreads, 2 to 10 runs), one arm against a line,
`same` with one and two arms, `within` at either edge, `paired` with one and two arms and a seed
effect, runs that tie (identical floats included) and a tied arm borrowing the other's spread,
`resolution=` at a ceiling, lognormal runs with log=True, `all_of` of 2, 3 and 4 parts, and the
gate's power (`converged` with and without `within=`); the rate tests and all-or-nothing runs
are summed exactly over the binomial.
Among fifty claims that were all false, about one would still come out "reproduced": a count
of outcomes is not a score.

Numbers come in three kinds:
    a float       a deterministic quantity (a closed-form line such as 4/7, a count): exact;
    a sequence    one value per run (seed): mean ± standard error, n - 1 degrees of freedom.
                  One run has no spread, so nothing is decided on one run. Runs that all came
                  out equal (a tie: every value the same float) have no measured spread either:
                  a tied arm borrows the other arm's spread, and a tie against a fixed line or
                  against another tie is inconclusive. The measurement's `resolution` (1/items
                  for an accuracy, the evaluation interval for a step count) floors the spread
                  of runs that differ, by measurement noise; it never stands in for the spread
                  of a tie (runs at a ceiling: gate them with `off_ceiling`). Runs that together
                  take exactly two values (all-or-nothing) are counts: see `compare`, `versus`.
                  Skewed positive numbers (steps to a threshold, speed ratios): log=True;
    counts        k successes of n runs, for the rate tests.

Degrees of freedom: Welch-Satterthwaite, except that an arm of at most 3 runs makes the test
use the smallest arm's n - 1 (Satterthwaite's df jumps when a small arm's spread comes out
small by chance, and the test then says "reproduced" too often); a tied arm keeps its own
n - 1 under that rule.

`power` gives each claim, before or after its run, its chance of "reproduced" at the paper's
effect and of "contradicted" at the opposite one, at the lesson's runs and measured spread: a
claim below 0.8 is printed as underpowered.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy import special

LEVEL = 0.95  # every interval is a two-sided 95 % interval: 2.5 % on each side
ALPHA = (1 - LEVEL) / 2
REPRODUCED, CONTRADICTED, INCONCLUSIVE = "reproduced", "contradicted", "inconclusive"
NOT_TESTED, PARTLY = "not tested", "partly"
OUTCOMES = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTED, PARTLY)
SMALL_ARM = 3  # an arm of at most this many runs: the conservative degrees of freedom

RULE = (
    "Each claim is decided by the 95 % interval of its measured difference (a one-sided test at "
    "2.5 % either way). Per-run values: Student-t over runs (seeds), Welch's for two arms, with "
    "the smallest arm's n - 1 degrees of freedom when an arm has at most 3 runs. Skewed positive "
    "numbers (steps, speed ratios) are decided on their logarithm and reported as a ratio. "
    "Runs that together take exactly two values (any two: learned or not, at a ceiling or not) "
    "are counts: Fisher's exact test (one-sided p below 2.5 %) for two arms, the exact "
    "Clopper-Pearson interval of the share at the upper value against the share the line "
    "stands for for one arm; a resolution plays no part there, and 'the same' and 'within a "
    "range' have no such path. Paired over test items where both arms (or one arm against a "
    "fixed line) were scored on the same items: runs' and items' variance components counted "
    "once each, with the runs' degrees of freedom, the smallest arm's n - 1. A rate of k in n "
    "runs: its exact Clopper-Pearson interval against the line (no p-value); 'sometimes': "
    "each outcome's rate above a material rate (0.1 unless stated), by the same interval. 'The "
    "same': the whole interval inside the stated tolerance; 'within': inside the range. One "
    "run, or runs that tie (all values equal), measure no spread: a tied arm borrows the other "
    "arm's spread, and otherwise nothing is decided; a measurement's resolution floors the "
    "spread of runs that differ, never a tie's, so runs tied at a ceiling decide nothing. "
    "Reproduced: the interval lies on the paper's side. Contradicted: it lies wholly on the "
    "other side. Inconclusive: it straddles the line. Not tested: a gate failed — runs still "
    "rising (the common slope of the runs' last checks above 0 at 2.5 %, or, where the lesson "
    "states a rise small enough to count as stopped, not shown below it at 2.5 %), or, for a "
    "comparison of arms still improving together, the claim's own quantity (their difference, "
    "run by run) moving toward its line over the last checks at 2.5 %, arms at a ceiling or "
    "floor, fallback data, a smoke run, a gate the lesson names (a busy device's budget, "
    "over-fitting), or a claim the run does not decide at all (paper scale); what the numbers "
    "alone say is shown beside it. A claim of several parts: reproduced when every part is, "
    "contradicted only when every part is (so that 'contradicted' stays at 2.5 % however many "
    "parts), partly when some parts are reproduced and others not, else inconclusive (a "
    "contradicted part is said in its own words), or not tested when every part is. Each claim "
    "shows its power: the chance of 'reproduced' at the paper's effect (or, where the lesson "
    "gives none, the effect measured) and of 'contradicted' at the opposite effect, at the "
    "lesson's runs and measured spread; below 0.8 it is marked underpowered. A claim whose "
    "opposite outcome cannot be reached at the lesson's runs per arm (for several parts: unless "
    "every part can be contradicted) says so. With no real effect about one claim in forty "
    "comes out 'reproduced' by chance: the count of outcomes is not a score.")


# ================================================================ estimates and intervals
@dataclass(frozen=True)
class Estimate:
    """A measured quantity: mean, standard error, runs, degrees of freedom (inf: exact; 0: no
    spread measured) and whether its runs tied (n >= 2 runs, all equal)."""

    mean: float
    se: float
    n: int
    df: float
    tied: bool = False

    @property
    def exact(self) -> bool:
        return math.isinf(self.df)

    def __str__(self) -> str:
        if self.exact:
            return f"{self.mean:.4g}"
        if self.n == 1:
            return f"{self.mean:.4g} (1 run)"
        if self.tied:
            return f"{self.mean:.4g} (all {self.n} runs)"
        return f"{self.mean:.4g} ± {self.se:.2g}"


def _floats(values, name: str) -> np.ndarray:
    if isinstance(values, (str, bytes, bool)) or values is None:
        raise TypeError(f"{name}: expected a number or a sequence of per-run values, got "
                        f"{type(values).__name__}")
    try:
        xs = np.asarray([float(v) for v in values], dtype=float)
    except TypeError:
        raise TypeError(f"{name}: expected a number or a sequence of per-run values, got "
                        f"{type(values).__name__}") from None
    if len(xs) == 0:
        raise ValueError(f"{name}: expected at least one run, got an empty sequence")
    if not np.isfinite(xs).all():
        raise ValueError(f"{name}: expected finite values, got {xs.tolist()}")
    return xs


def estimate(values, resolution: float | None = None, name: str = "values") -> Estimate:
    """An Estimate from a float (exact) or from per-run values (mean ± standard error).
    `resolution` floors each run's spread (see the module's docstring)."""
    if isinstance(values, Estimate):
        return values
    if getattr(values, "ndim", None) == 0:  # a 0-d NumPy array or torch tensor
        values = values.item()
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        if not math.isfinite(values):
            raise ValueError(f"{name}: expected a finite number, got {values}")
        return Estimate(float(values), 0.0, 1, math.inf)
    xs = _floats(values, name)
    n = len(xs)
    if n == 1:
        return Estimate(float(xs[0]), math.inf, 1, 0.0)
    if resolution is not None and not resolution > 0:
        raise ValueError(f"resolution: expected a number > 0, got {resolution}")
    if np.ptp(xs) == 0:  # all equal: their float std may still come out ~1e-17
        return Estimate(float(xs[0]), 0.0, n, 0.0, tied=True)
    sd = float(xs.std(ddof=1))
    if resolution is not None:  # floors measurement noise; never stands in for a tie's spread
        sd = max(sd, float(resolution))
    return Estimate(float(xs.mean()), sd / math.sqrt(n), n, float(n - 1))


def t_quantile(df: float) -> float:
    """The Student-t quantile of a two-sided 95 % interval (scipy's `stdtrit`, the same number
    as `stats.t.ppf`, much faster to call in the simulations)."""
    return float(special.stdtrit(df, 1 - ALPHA))


def interval(e: Estimate) -> tuple[float, float]:
    """The 95 % interval of an estimate: a point for an exact one, the whole line when no
    spread was measured."""
    if e.df == 0:
        return -math.inf, math.inf
    if e.exact:
        return e.mean, e.mean
    half = t_quantile(e.df) * e.se
    return e.mean - half, e.mean + half


def difference(a: Estimate, b: Estimate) -> Estimate:
    """a - b: Welch's standard error; Satterthwaite's degrees of freedom, or the smallest
    arm's n - 1 when an arm has at most SMALL_ARM runs. A tied arm borrows the other arm's
    spread (as if both spread alike); two tied arms, or one run, leave the spread unknown."""
    if a.n == 1 and not a.exact or b.n == 1 and not b.exact:
        return Estimate(a.mean - b.mean, math.inf, 1, 0.0)
    if a.tied and b.tied or a.tied and b.exact or a.exact and b.tied:
        return Estimate(a.mean - b.mean, 0.0, min(a.n, b.n), 0.0, tied=True)
    if a.tied:  # borrow b's per-run spread for a's runs
        a = _borrowed(a, b)
    elif b.tied:
        b = _borrowed(b, a)
    arms = [e for e in (a, b) if not e.exact]
    se = math.sqrt(sum(e.se ** 2 for e in arms))
    if not arms:
        return Estimate(a.mean - b.mean, 0.0, 1, math.inf)
    return Estimate(a.mean - b.mean, se, min(e.n for e in arms), _df(arms))


def _borrowed(tied: Estimate, other: Estimate) -> Estimate:
    """A tied arm with the other arm's per-run spread; a tied arm of at most SMALL_ARM runs
    keeps its own n - 1 degrees of freedom (the small-arm rule), a larger one the other's."""
    df = tied.n - 1 if tied.n <= SMALL_ARM else other.df
    return Estimate(tied.mean, other.se * math.sqrt(other.n / tied.n), tied.n, float(df))


def _df(parts: Sequence[Estimate], smallest: bool = False) -> float:
    """Satterthwaite's degrees of freedom of a sum of independent variances, or the smallest
    part's (always with `smallest`, else when a part rests on at most SMALL_ARM runs) — even
    when that part's variance came out 0: with few runs a small variance is as likely an
    accident as a measurement, and Satterthwaite's df then jumps."""
    parts = [p for p in parts if 0 < p.df < math.inf]
    if not parts:
        return math.inf
    if smallest or any(p.df <= SMALL_ARM - 1 for p in parts):
        return min(p.df for p in parts)
    total = sum(p.se ** 2 for p in parts)
    return total ** 2 / sum(p.se ** 4 / p.df for p in parts if p.se > 0) if total else math.inf


def rate_interval(k: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95 % interval of a rate measured as k of n."""
    if not (isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1):
        raise ValueError(f"n: expected a positive integer number of runs, got {n!r}")
    if not (isinstance(k, numbers.Integral) and not isinstance(k, bool) and 0 <= k <= n):
        raise ValueError(f"k: expected an integer in [0, {n}], got {k!r}")
    low = special.betaincinv(k, n - k + 1, ALPHA) if k > 0 else 0.0
    high = special.betaincinv(k + 1, n - k, 1 - ALPHA) if k < n else 1.0
    return float(low), float(high)


def runs_needed(diff: float, sd_a: float, sd_b: float = 0.0, power: float = 0.8,
                most: int = 1000) -> int | None:
    """Runs per arm at which the rule finds a true difference `diff` with probability `power`,
    when one run of each arm spreads by sd_a and sd_b (sd_b = 0: against a fixed line): the
    noncentral t distribution's tail beyond the critical value. None: no effect, or > most."""
    if diff == 0 or not math.isfinite(sd_a + sd_b) or sd_a + sd_b == 0:
        return None
    sd = math.hypot(sd_a, sd_b)
    z = special.ndtri(1 - ALPHA) + special.ndtri(power)
    guess = math.ceil((z * sd / abs(diff)) ** 2)  # the normal approximation, a little low
    for n in range(max(2, guess - 2), most + 1):
        df = (n - 1) if sd_b == 0 or n <= SMALL_ARM else 2 * (n - 1)
        if 1 - special.nctdtr(df, abs(diff) / (sd / math.sqrt(n)), t_quantile(df)) >= power:
            return n
    return None


# ================================================================ gates
@dataclass(frozen=True)
class Gate:
    """A condition the experiment must meet before its numbers can show the claim."""

    passed: bool
    reason: str  # 'budget', 'ceiling', 'floor', 'fallback'
    detail: str


def converged(curves, last: int = 4, what: str = "runs", lower_is_better: bool = False,
              within: float | None = None, per: str = "step") -> Gate:
    """The runs' curves have stopped rising: over each run's last `last` checks, their common
    least-squares slope (one slope shared by the runs, each run its own level) is not above 0
    at the rule's level (one-sided, 2.5 %). `curves`: one sequence of checks per run, each a
    value or a (step, value) pair. Pooling the runs gives the slope's test sum(last - 2) degrees
    of freedom (12 for four runs of four checks) where one run alone has 2 and needs a Bonferroni
    over runs: four runs rising by one noise SD per check are caught 97 % of the time, not 25 %
    (`converged_power` computes it). Runs still rising had not converged, and a comparison of
    where they ended would be one of unfinished runs.

    within: a rise per step small enough to count as stopped. The runs then pass only when
    their common slope is shown below it (its one-sided 97.5 % upper bound < within): runs
    rising by `within` pass at most 2.5 % of the time, however noisy, and flat runs pass when
    their checks are precise enough to show it (`converged_power(..., within=)`).
    per: what one unit of the checks' steps is, for the detail ("250 steps")."""
    sxy = sxx = ss = 0.0
    df = 0
    for curve in curves:
        points = [(i, c) if isinstance(c, numbers.Real) else tuple(c) for i, c in
                  enumerate(curve)][-last:]
        if len(points) < 3:
            raise ValueError(f"converged: expected at least 3 checks per run, got {len(points)}")
        x, y = (np.asarray(v, dtype=float) for v in zip(*points))
        y = -y if lower_is_better else y
        x, y = x - x.mean(), y - y.mean()
        sxy, sxx = sxy + float((x * y).sum()), sxx + float((x * x).sum())
        ss += float((y * y).sum()) - float((x * y).sum()) ** 2 / float((x * x).sum())
        df += len(x) - 2
    if df == 0:
        raise ValueError("converged: expected at least one curve")
    slope = sxy / sxx
    se = math.sqrt(max(ss, 0.0) / df / sxx)
    verb = "fall" if lower_is_better else "rise"
    if within is None:
        rising = slope - t_quantile(df) * se > 0 if se > 0 else slope > 0
        word, stopped, bound = "still falling" if lower_is_better else "still rising", \
            "had stopped", ""
    else:  # stopped only when shown below `within`
        rising = slope + t_quantile(df) * se >= within
        word = f"not shown to {verb} by less than {within:.3g} per {per}"
        stopped = f"{verb} by less than {within:.3g} per {per}"
        bound = f"; {verb}s by at most {slope + t_quantile(df) * se:.3g}"
    return Gate(not rising, "budget",
                f"{what} {word if rising else stopped} over their last {last} checks "
                f"(common slope {slope * (-1 if lower_is_better else 1):+.3g} per {per}, "
                f"± {se:.2g}, df {df}{bound})")


def closing(differences, line: float = 0.0, last: int = 4, what: str = "the difference") -> Gate:
    """The claim's own quantity has stopped moving toward its line: `differences` holds one
    curve per run (or per seed) of the quantity the claim decides — arm A's check minus arm
    B's at the same steps, say — and the gate fails when their common slope over the last
    `last` checks (`converged`'s test) runs significantly toward `line` from the side the last
    checks sit on: a gap still closing could close, or cross, with more training. Arms that
    still improve together, keeping their gap, pass: what the claim compares has settled even
    where each curve has not. Its power is `converged_power`'s at the slope toward the line."""
    curves = [[(i, c) if isinstance(c, numbers.Real) else tuple(c) for i, c in enumerate(cv)]
              for cv in differences]
    ends = [float(cv[-1][1]) for cv in curves if cv]
    above = float(np.mean(ends)) > line  # the side the quantity sits on now
    gate = converged(curves, last=last, what=what, lower_is_better=above)
    toward = "falling toward" if above else "rising toward"
    return Gate(gate.passed, gate.reason, gate.detail.replace(
        "still falling" if above else "still rising", f"still {toward} {line:g}").replace(
        "had stopped", f"not {toward} {line:g}"))


def converged_power(slope: float, noise: float, runs: int, last: int = 4,
                    spacing: float = 1.0, within: float | None = None) -> float:
    """The chance that `converged` sees runs still rising: `runs` curves, each rising by
    `slope` per step over its last `last` checks `spacing` steps apart, each check off its
    curve by independent normal noise of SD `noise`. With `within`, `converged`'s: the chance
    that the runs are not shown to rise by less than `within` (at most 2.5 % at slope = within;
    1 minus it at slope 0 is the chance that flat runs pass). Exact: the common slope's t
    statistic is noncentral t with runs * (last - 2) degrees of freedom."""
    if runs < 1 or last < 3 or not noise > 0:
        raise ValueError("converged_power: expected runs >= 1, last >= 3 and noise > 0")
    x = (np.arange(last) - (last - 1) / 2) * spacing
    sxx = runs * float((x * x).sum())
    df = runs * (last - 2)
    if within is None:  # fires when the slope is shown above 0
        return float(1 - special.nctdtr(df, slope / (noise / math.sqrt(sxx)), t_quantile(df)))
    # with `within`: fires unless the slope is shown below it, (slope^ - within) / se < -t
    return float(1 - special.nctdtr(df, (slope - within) / (noise / math.sqrt(sxx)),
                                    -t_quantile(df)))


def off_ceiling(*arms, top: float, margin: float) -> Gate:
    """Not every arm within `margin` of the ceiling `top`: arms that all sit at the ceiling
    cannot show which is better."""
    means = [estimate(a).mean for a in arms]
    at = all(m >= top - margin for m in means)
    return Gate(not at, "ceiling", f"arms at {', '.join(f'{m:.4g}' for m in means)}; ceiling "
                                   f"{top:g} (margin {margin:g})")


def off_floor(*arms, bottom: float, margin: float) -> Gate:
    """Not every arm within `margin` of the floor `bottom` (chance, say)."""
    means = [estimate(a).mean for a in arms]
    at = all(m <= bottom + margin for m in means)
    return Gate(not at, "floor", f"arms at {', '.join(f'{m:.4g}' for m in means)}; floor "
                                 f"{bottom:g} (margin {margin:g})")


# ================================================================ the result of a test
@dataclass(frozen=True)
class Test:
    """What one call of this module decided: the outcome, our number with its interval
    (`ours`), the numbers behind it, and how to decide it again (`test`, `args`).

    computed: the outcome of the numbers alone (differs from `outcome` when a gate failed,
    whose words are in `gated`);
    reachable: the outcomes these sample sizes can reach at all (a claim whose opposite is out
    of reach can only be confirmed); parts: the named parts of an `all_of`.
    """

    outcome: str
    ours: str
    detail: str
    n: str
    test: str
    args: dict
    reason: str = ""
    computed: str = ""
    reachable: tuple = (REPRODUCED, CONTRADICTED, INCONCLUSIVE)
    parts: dict = field(default_factory=dict)
    gated: str = ""  # what the failed gates said
    measured: Estimate | None = None  # the estimated difference (log scale with log=True)

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome: expected one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def label(self) -> str:
        """'not tested (budget)', 'reproduced', ..."""
        return f"{self.outcome} ({self.reason})" if self.reason else self.outcome

    def record(self) -> dict:
        """The JSON-able record claims.json keeps: enough to decide it again (`redecide`)."""
        args = self.args if self.test == "all_of" else _plain(self.args)
        return dict(test=self.test, args=args, outcome=self.outcome, reason=self.reason,
                    computed=self.computed or self.outcome, ours=self.ours, detail=self.detail,
                    n=self.n, reachable=list(self.reachable),
                    parts={k: p.record() for k, p in self.parts.items()})


def _plain(x):
    """A JSON-able copy of a test's numbers (NumPy and torch values become lists and floats)."""
    if isinstance(x, Gate):
        return dict(passed=bool(x.passed), reason=x.reason, detail=x.detail)
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (str, bool)) or x is None:
        return x
    if hasattr(x, "tolist"):
        return _plain(x.tolist())
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    raise TypeError(f"a test's numbers must be numbers, sequences or dicts, got "
                    f"{type(x).__name__}")


def _gates(gates) -> list[Gate]:
    out = []
    for g in gates:
        if isinstance(g, dict):
            g = Gate(**g)
        if not isinstance(g, Gate):
            raise TypeError(f"gates: expected Gate objects (converged, off_ceiling, ...), got "
                            f"{type(g).__name__}")
        out.append(g)
    return out


def _decide(test: str, args: dict, outcome: str, ours: str, detail: str, n: str,
            reachable=(REPRODUCED, CONTRADICTED, INCONCLUSIVE), measured=None) -> Test:
    """A Test, not tested when a gate in args['gates'] failed (the numbers' outcome kept)."""
    gates = _gates(args.get("gates", ()))
    failed = [g for g in gates if not g.passed]
    plain = {**args, "gates": gates} if gates else {k: v for k, v in args.items() if k != "gates"}
    if failed:
        gated = "; ".join(g.detail for g in failed)
        return Test(NOT_TESTED, ours, f"{gated} ({detail})", n, test, plain,
                    reason=failed[0].reason, computed=outcome, reachable=tuple(reachable),
                    gated=gated, measured=measured)
    return Test(outcome, ours, detail, n, test, plain, computed=outcome,
                reachable=tuple(reachable), measured=measured)


def _sign(expect: str) -> int:
    if expect not in (">", "<"):
        raise ValueError(f"expect: expected '>' or '<', got {expect!r}")
    return 1 if expect == ">" else -1


def _side(sign: int, lo: float, hi: float, exact: bool = False) -> str:
    """Which side of 0 the interval [lo, hi] lies on; an exact 0 is not 'greater' (or less)."""
    if sign * lo > 0 and sign * hi > 0:
        return REPRODUCED
    if sign * lo < 0 and sign * hi < 0 or exact and lo == hi == 0:
        return CONTRADICTED
    return INCONCLUSIVE


def _span(lo: float, hi: float) -> str:
    if lo == hi:
        return f"{lo:+.4g} exactly"
    return f"[{lo:+.4g}, {hi:+.4g}]" if math.isfinite(lo) else "[-inf, +inf]"


def _count(e: Estimate) -> str:
    return "exact" if e.exact else f"{e.n} run{'s' if e.n > 1 else ''}"


def _why_undecided(d: Estimate, a: Estimate, b: Estimate) -> str:
    if d.df == 0 and d.tied:
        return ("; the runs tie (no spread measured; a resolution does not stand in for it): "
                "runs at a ceiling cannot show a difference (gate them with off_ceiling)")
    if d.df == 0:
        return "; one run has no spread: at least two runs per arm are needed"
    sds = [e.se * math.sqrt(e.n) for e in (a, b) if not e.exact and e.se > 0]
    n = runs_needed(d.mean, *sds[:2]) if sds else None
    return (f"; an effect this size would need about {n} runs per arm" if n
            else "; no effect measured that more runs could confirm")


# ================================================================ the tests
def compare(a, b, expect: str = ">", *, resolution: float | None = None, log: bool = False,
            gates=()) -> Test:
    """The paper says a > b (expect='>') or a < b: the 95 % interval of a - b decides. a and b:
    per-run values (or a float for an exact line). Runs that together take exactly two values
    are all-or-nothing: Fisher's exact test on how many runs reached the upper one decides,
    and `resolution` is not used.

    log=True: for positive, skewed per-run numbers (steps to a threshold, speed ratios) the
    t interval holds on their logarithm: log a - log b decides, and the interval is reported
    back as the ratio of geometric means a / b (the line is a ratio of 1)."""
    if log:
        return _on_log_scale(compare, a, b, expect, resolution, gates)
    sign = _sign(expect)
    ea, eb = estimate(a, resolution, "a"), estimate(b, resolution, "b")
    if (two := _two_valued(a, b)) is not None:
        return _compare_two_valued(a, b, expect, two, gates)
    d = difference(ea, eb)
    lo, hi = interval(d)
    outcome = _side(sign, lo, hi, exact=d.exact)
    ours = f"{ea} vs {eb}: {d.mean:+.4g} {_span(lo, hi)}"
    detail = f"{ea} {expect} {eb}? difference {d.mean:+.4g}, 95 % interval {_span(lo, hi)}"
    if outcome == INCONCLUSIVE:
        detail += _why_undecided(d, ea, eb)
    reach = (REPRODUCED, CONTRADICTED, INCONCLUSIVE) if _decidable(ea, eb) else (INCONCLUSIVE,)
    return _decide("compare", dict(a=a, b=b, expect=expect, resolution=resolution, gates=gates),
                   outcome, ours, detail, f"{_count(ea)} vs {_count(eb)}", reach, d)


def _logs(x, name: str):
    """The natural log of a positive float or of every positive per-run value."""
    if isinstance(x, numbers.Real) or getattr(x, "ndim", 1) == 0:
        x = float(x)
        if not x > 0:
            raise ValueError(f"{name}: log=True needs positive numbers, got {x}")
        return math.log(x)
    xs = _floats(x, name)
    if not (xs > 0).all():
        raise ValueError(f"{name}: log=True needs positive numbers, got {xs.tolist()}")
    return np.log(xs).tolist()


def _on_log_scale(test, a, b, expect, resolution, gates) -> Test:
    """`test` (compare) decided on log a and log b; the numbers reported as ratios."""
    if resolution is not None:
        raise ValueError("log=True: a resolution is in the values' units, not the log's")
    t = test(_logs(a, "a"), _logs(b, "b"), expect, gates=gates)
    if t.measured is None:  # two-valued runs: Fisher's counts do not depend on the scale
        ours, detail = t.ours, t.detail
    else:
        d = t.measured
        lo, hi = interval(d)
        ga, gb = (math.exp(estimate(x).mean) for x in (_logs(a, "a"), _logs(b, "b")))
        span = (f"{math.exp(lo):.4g} exactly" if lo == hi else
                f"[{math.exp(lo):.4g}, {math.exp(hi):.4g}]")
        ours = f"{ga:.4g} vs {gb:.4g} (geometric means): ratio {math.exp(d.mean):.4g} {span}"
        rest = t.detail.split("; ", 1)[1:]
        detail = (f"on the log scale: ratio of geometric means {math.exp(d.mean):.4g} "
                  f"{expect} 1? 95 % interval {span}" + "".join("; " + r for r in rest))
    return dataclasses.replace(t, ours=ours, detail=detail, args={
        **t.args, "a": a, "b": b, "log": True})


def _two_valued(*arms) -> tuple[float, float] | None:
    """(low, high) when every arm is a sequence of at least two runs and the runs together
    take exactly two values, one of them more than once: runs that either got there or not
    (all-or-nothing). Two runs of continuous values are not two-valued."""
    if any(isinstance(a, numbers.Real) or getattr(a, "ndim", 1) == 0 for a in arms):
        return None
    values = [_floats(a, "runs") for a in arms]
    if any(len(v) < 2 for v in values):
        return None
    runs = np.concatenate(values)
    distinct = np.unique(runs)
    if len(distinct) != 2 or len(runs) < 3:
        return None
    return float(distinct[0]), float(distinct[1])


def _compare_two_valued(a, b, expect: str, two: tuple[float, float], gates) -> Test:
    """All-or-nothing runs: the mean difference is (high - low) × the difference of the rates
    at which the arms' runs reached `high`, so Fisher's exact test on those counts decides (a
    t interval on two-valued runs says "reproduced" too often)."""
    xa, xb = _floats(a, "a"), _floats(b, "b")
    k_a, k_b = int((xa == two[1]).sum()), int((xb == two[1]).sum())
    t = rates(k_a, len(xa), k_b, len(xb), expect, gates=gates)
    lead = f"runs take two values ({two[0]:.4g} or {two[1]:.4g}): "
    return dataclasses.replace(
        t, test="compare", args=dict(a=a, b=b, expect=expect, resolution=None,
                                     **({"gates": _gates(gates)} if gates else {})),
        ours=f"{xa.mean():.4g} vs {xb.mean():.4g} ({k_a}/{len(xa)} vs {k_b}/{len(xb)} runs at "
             f"{two[1]:.4g}), Fisher p = {t.ours.rsplit('p = ', 1)[1]}",
        detail=lead + t.detail)


def _decidable(*arms: Estimate) -> bool:
    """Can data of these sizes ever decide? Not when a measured arm has a single run."""
    return all(e.exact or e.n >= 2 for e in arms)


def versus(values, line: float, expect: str = ">", *, resolution: float | None = None,
           log: bool = False, gates=()) -> Test:
    """A measured quantity against a fixed line (chance, a closed-form value, a paper's
    threshold): the one-sample 95 % interval decides. Runs that take two values on either
    side of the line (any two values: all-or-nothing) are a rate: the exact interval of the
    share of runs at the upper value decides against the share the line stands for, and
    `resolution` is not used. log=True: decided on the log of the values and of the line
    (skewed positive numbers, see `compare`), reported as the ratio to the line."""
    two = None if log else _two_valued(values)
    if two is not None and two[0] < line < two[1]:
        xs = _floats(values, "values")
        k, share = int((xs == two[1]).sum()), (line - two[0]) / (two[1] - two[0])
        t = rate(k, len(xs), share, expect, gates=gates)
        return dataclasses.replace(
            t, test="versus", args=dict(values=values, line=float(line), expect=expect,
                                        resolution=resolution,
                                        **({"gates": _gates(gates)} if gates else {})),
            ours=f"{xs.mean():.4g} vs {line:.4g} ({k}/{len(xs)} runs at {two[1]:.4g}, "
                 f"{share:.3g} needed) {t.ours.split(' ', 1)[1]}",
            detail=f"runs take two values ({two[0]:.4g} or {two[1]:.4g}): {t.detail}")
    t = compare(values, float(line), expect, resolution=resolution, log=log, gates=gates)
    return dataclasses.replace(t, test="versus", args=dict(
        values=values, line=float(line), expect=expect, resolution=resolution,
        **({"log": True} if log else {}), **({"gates": _gates(gates)} if gates else {})))


def same(a, b, tolerance: float, *, resolution: float | None = None, gates=()) -> Test:
    """The paper says a and b differ by at most `tolerance` (an equivalence test): reproduced
    when the whole 95 % interval of a - b lies inside ±tolerance, contradicted when it lies
    wholly outside. Noisier data widens the interval: noise makes 'the same' harder to show."""
    if not tolerance >= 0:
        raise ValueError(f"tolerance: expected a number >= 0, got {tolerance}")
    ea, eb = estimate(a, resolution, "a"), estimate(b, resolution, "b")
    d = difference(ea, eb)
    lo, hi = interval(d)
    outcome = (REPRODUCED if -tolerance <= lo and hi <= tolerance else
               CONTRADICTED if hi < -tolerance or lo > tolerance else INCONCLUSIVE)
    detail = (f"{ea} vs {eb}: difference {d.mean:+.4g}, 95 % interval {_span(lo, hi)}, "
              f"within ±{tolerance:.3g}?")
    if outcome == INCONCLUSIVE and d.df == 0:
        detail += _why_undecided(d, ea, eb)
    reach = (REPRODUCED, CONTRADICTED, INCONCLUSIVE) if _decidable(ea, eb) else (INCONCLUSIVE,)
    return _decide("same", dict(a=a, b=b, tolerance=tolerance, resolution=resolution,
                                gates=gates), outcome,
                   f"{ea} vs {eb}: {d.mean:+.4g} {_span(lo, hi)} (±{tolerance:.3g} allowed)",
                   detail, f"{_count(ea)} vs {_count(eb)}", reach, d)


def within(values, low: float, high: float, *, resolution: float | None = None,
           gates=()) -> Test:
    """The paper gives a range [low, high]: reproduced when the whole 95 % interval of the
    measured quantity lies inside it, contradicted when it lies wholly outside."""
    if not low <= high:
        raise ValueError(f"within: expected low <= high, got [{low}, {high}]")
    e = estimate(values, resolution)
    lo, hi = interval(e)
    outcome = (REPRODUCED if low <= lo and hi <= high else
               CONTRADICTED if hi < low or lo > high else INCONCLUSIVE)
    detail = f"{e} in [{low:.4g}, {high:.4g}]? 95 % interval {_span(lo, hi)}"
    if outcome == INCONCLUSIVE and e.df == 0:
        detail += ("; the runs tie (no spread measured)" if e.tied else
                   "; one run has no spread: at least two are needed")
    reach = (REPRODUCED, CONTRADICTED, INCONCLUSIVE) if _decidable(e) else (INCONCLUSIVE,)
    return _decide("within", dict(values=values, low=low, high=high, resolution=resolution,
                                  gates=gates), outcome, f"{e} {_span(lo, hi)}", detail,
                   _count(e), reach, e)


def paired(a, b, expect: str = ">", *, gates=()) -> Test:
    """Two arms scored on the same test items: a[run][item], b[run][item] (1 for a correct
    answer, a loss per stream, ...; b may be a float: a fixed line). The difference of the
    arms' mean scores has two independent parts, each counted once (a two-way random-effects
    decomposition): the runs' part, each arm's spread of per-run means less what item noise
    puts in it, and the items' part, the spread over items of the paired difference of the
    arms' run-averaged scores. At least two runs per arm. The degrees of freedom are the runs'
    (the smallest arm's n - 1): the item part has hundreds, but the runs' part rests on a
    handful of seeds, and Satterthwaite's mixture is too bold when that part comes out small
    by chance (tests/test_stats.py simulates it with a seed effect)."""
    sign = _sign(expect)
    A = _table(a, "a")
    B = np.full_like(A, float(b)) if isinstance(b, numbers.Real) else _table(b, "b")
    if A.shape[1] != B.shape[1] or A.shape[1] < 2:
        raise ValueError("paired: expected two (runs, items) tables over the same >= 2 items, "
                         f"got shapes {A.shape} and {B.shape}")
    items = A.shape[1]
    d_items = A.mean(0) - B.mean(0)  # (items,)
    item_part = Estimate(0.0, float(d_items.std(ddof=1)) / math.sqrt(items), items, items - 1)
    line = isinstance(b, numbers.Real)
    runs = [r for X in ((A,) if line else (A, B)) if (r := _run_part(X)) is not None]
    mean = float(A.mean() - B.mean())
    if A.shape[0] < 2 or B.shape[0] < 2:
        d = Estimate(mean, math.inf, 1, 0.0)
    else:
        parts = [item_part, *runs]
        se = math.sqrt(sum(p.se ** 2 for p in parts))
        alike = np.ptp(d_items) == 0 and all(np.ptp(X.mean(1)) == 0
                                              for X in ((A,) if line else (A, B)))
        d = (Estimate(mean, 0.0, A.shape[0], 0.0, tied=True) if alike or se == 0 else
             Estimate(mean, se, A.shape[0], _df(parts, smallest=True)))
    lo, hi = interval(d)
    outcome = _side(sign, lo, hi)
    label_b = f"{float(b):.4g}" if line else f"{B.mean():.4g}"
    ours = f"{A.mean():.4g} vs {label_b}: {mean:+.4g} {_span(lo, hi)}"
    detail = (f"{A.mean():.4g} {expect} {label_b} over {items} shared items? difference "
              f"{mean:+.4g}, 95 % interval {_span(lo, hi)} (items ± {item_part.se:.2g}, runs ± "
              f"{math.sqrt(sum(r.se ** 2 for r in runs)):.2g}, df {d.df:.3g})")
    if outcome == INCONCLUSIVE and d.df == 0:
        detail += ("; every run and item tie (no spread measured)" if d.tied else
                   "; one run per arm has no spread: at least two are needed")
    n = f"{A.shape[0]} vs {'a line' if line else B.shape[0]} runs × {items} items"
    reach = ((REPRODUCED, CONTRADICTED, INCONCLUSIVE) if min(A.shape[0], B.shape[0]) >= 2
             else (INCONCLUSIVE,))
    return _decide("paired", dict(a=A, b=float(b) if line else B, expect=expect, gates=gates),
                   outcome, ours, detail, n, reach, d)


def _table(x, name: str) -> np.ndarray:
    X = np.asarray(x, dtype=float)
    if X.ndim != 2 or X.shape[0] < 1:
        raise ValueError(f"paired: {name} must be a (runs, items) table, got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"paired: {name} must hold finite scores")
    return X


def _run_part(X: np.ndarray) -> Estimate | None:
    """An arm's run-to-run part of the paired difference: the variance of its per-run means,
    less the share the item-level residual puts in it (floored at 0), over its runs."""
    runs, items = X.shape
    if runs < 2:
        return None
    means = X.mean(1)
    resid = X - means[:, None] - X.mean(0)[None, :] + X.mean()
    mse = float((resid ** 2).sum()) / ((runs - 1) * (items - 1))
    var_run = max(0.0, float(means.var(ddof=1)) - mse / items)
    return Estimate(0.0, math.sqrt(var_run / runs), runs, runs - 1)


# ----------------------------------------------------------------------- rates: k of n runs
def rate(k: int, n: int, line: float, expect: str = ">", *, gates=()) -> Test:
    """k of n runs succeeded; the paper says the rate is above (below) `line` ("every time":
    above a high line; "rarely": below a low one). The exact 95 % interval decides."""
    sign = _sign(expect)
    lo, hi = rate_interval(k, n)

    def outcome_of(kk):
        low, high = rate_interval(kk, n)
        return _side(sign, low - line, high - line)

    outcome = outcome_of(k)
    detail = f"{k}/{n} {expect} {line:g}? 95 % interval [{lo:.3g}, {hi:.3g}]"
    if outcome == INCONCLUSIVE:
        more = next((m for m in range(n + 1, 10 * n + 200)
                     if _side(sign, *(x - line for x in rate_interval(round(k * m / n), m)))
                     == REPRODUCED), None)
        detail += (f"; at this rate about {more} runs would decide" if more
                   else "; the measured rate is too close to the line to decide")
    reach = sorted({outcome_of(kk) for kk in range(n + 1)}, key=OUTCOMES.index)
    return _decide("rate", dict(k=k, n=n, line=line, expect=expect, gates=gates), outcome,
                   f"{k}/{n} [{lo:.2f}, {hi:.2f}]", detail, f"{n} runs", reach)


def _fisher_p(k_a: int, n_a: int, k_b: int, n_b: int) -> tuple[float, float]:
    """Fisher's exact one-sided p-values (a's rate greater, a's rate less): the tails of the
    hypergeometric count of a's successes given both margins."""
    total, successes = n_a + n_b, k_a + k_b
    low, high = max(0, n_a - (total - successes)), min(n_a, successes)
    ways = [math.comb(successes, k) * math.comb(total - successes, n_a - k)
            for k in range(low, high + 1)]  # exact integers: the tails sum without rounding
    whole = math.comb(total, n_a)
    return sum(ways[k_a - low:]) / whole, sum(ways[:k_a - low + 1]) / whole


@functools.lru_cache(maxsize=None)
def _fisher(k_a: int, n_a: int, k_b: int, n_b: int, sign: int) -> str:
    more, less = _fisher_p(k_a, n_a, k_b, n_b)
    p_for, p_against = (more, less) if sign > 0 else (less, more)
    return REPRODUCED if p_for < ALPHA else CONTRADICTED if p_against < ALPHA else INCONCLUSIVE


@functools.lru_cache(maxsize=None)
def _fisher_reach(n_a: int, n_b: int, sign: int) -> tuple[str, ...]:
    return tuple(sorted({_fisher(i, n_a, j, n_b, sign) for i in range(n_a + 1)
                         for j in range(n_b + 1)}, key=OUTCOMES.index))


def rates(k_a: int, n_a: int, k_b: int, n_b: int, expect: str = ">", *, gates=()) -> Test:
    """Two rates, k_a of n_a runs against k_b of n_b: Fisher's exact test, one-sided at 2.5 %
    each way."""
    sign = _sign(expect)
    for k, n in ((k_a, n_a), (k_b, n_b)):
        rate_interval(k, n)  # checks k and n
    p_more, p_less = _fisher_p(k_a, n_a, k_b, n_b)
    p_for, p_against = (p_more, p_less) if sign > 0 else (p_less, p_more)
    outcome = _fisher(k_a, n_a, k_b, n_b, sign)
    reach = _fisher_reach(n_a, n_b, sign)
    detail = (f"{k_a}/{n_a} {expect} {k_b}/{n_b}? Fisher's exact p = {p_for:.2g} (the other "
              f"way: {p_against:.2g})")
    return _decide("rates", dict(k_a=k_a, n_a=n_a, k_b=k_b, n_b=n_b, expect=expect,
                                 gates=gates), outcome, f"{k_a}/{n_a} vs {k_b}/{n_b}, p = "
                   f"{p_for:.2g}", detail, f"{n_a} vs {n_b} runs", reach)


def sometimes(k: int, n: int, material: float = 0.1, *, gates=()) -> Test:
    """The paper says an outcome happens in some runs and not in others: two exact one-sided
    tests that each outcome's rate is above `material`. Reproduced when the 95 % interval of
    the rate lies inside (material, 1 - material); contradicted when it lies wholly below
    `material` or wholly above 1 - material (one outcome is rarer than material)."""
    if not 0 < material < 0.5:
        raise ValueError(f"material: expected a rate in (0, 0.5), got {material}")

    def outcome_of(kk):
        low, high = rate_interval(kk, n)
        if material < low and high < 1 - material:
            return REPRODUCED
        if high < material or low > 1 - material:
            return CONTRADICTED
        return INCONCLUSIVE

    lo, hi = rate_interval(k, n)
    outcome = outcome_of(k)
    detail = (f"{k}/{n} runs; 95 % interval [{lo:.2f}, {hi:.2f}]; each outcome at a rate above "
              f"{material:g}?")
    reach = sorted({outcome_of(kk) for kk in range(n + 1)}, key=OUTCOMES.index)
    if CONTRADICTED not in reach:
        smallest = next(m for m in range(n, 100000) if rate_interval(0, m)[1] < material)
        detail += f"; at {n} runs it cannot be contradicted (that needs {smallest})"
    return _decide("sometimes", dict(k=k, n=n, material=material, gates=gates), outcome,
                   f"{k}/{n} [{lo:.2f}, {hi:.2f}]", detail, f"{n} runs", reach)


# ----------------------------------------------------------------------- claims of several parts
WORDS = {REPRODUCED: "shown", CONTRADICTED: "the opposite was shown",
         INCONCLUSIVE: "is not shown by these runs", PARTLY: "partly shown"}


def all_of(parts: dict[str, Test]) -> Test:
    """A claim of several named parts, all of which the paper says hold. One outcome shared by
    every part is the claim's; some parts reproduced and others not: partly; none reproduced:
    inconclusive if a part is contradicted or inconclusive, else not tested. The claim is
    contradicted only when every part is: k parts each contradicted at 2.5 % would make "a
    part is contradicted" a union of k tests (4.9, 7.1, 8.6 % with 2, 3, 4 parts on their
    lines), while all k at once is at most as likely as any one, 2.5 %. The detail says each
    part in its own words ("the opposite was shown" for a contradicted one)."""
    if not parts or not all(isinstance(p, Test) for p in parts.values()):
        raise ValueError("all_of: expected a dict of named Tests")
    outcome = _combined([p.outcome for p in parts.values()])
    computed = _combined([p.computed or p.outcome for p in parts.values()])
    reasons = sorted({p.reason for p in parts.values() if p.reason})
    words = "; ".join(f"{name}: {_words(p)}" for name, p in parts.items())
    reach = [o for o in (REPRODUCED, CONTRADICTED)
             if all(o in p.reachable for p in parts.values())] + [INCONCLUSIVE]
    return Test(outcome, "; ".join(p.ours for p in parts.values()), words,
                "; ".join(dict.fromkeys(p.n for p in parts.values())), "all_of",
                {name: p.record() for name, p in parts.items()},
                reason=", ".join(reasons) if outcome == NOT_TESTED else "", computed=computed,
                reachable=tuple(reach), parts=dict(parts))


def _combined(outcomes: list[str]) -> str:
    kinds = set(outcomes)
    if len(kinds) == 1:
        return kinds.pop()
    if REPRODUCED in kinds or PARTLY in kinds:
        return PARTLY
    return INCONCLUSIVE if kinds & {CONTRADICTED, INCONCLUSIVE} else NOT_TESTED


def _words(t: Test) -> str:
    return f"{in_words(t)} ({t.ours})"


def in_words(t: Test) -> str:
    """The outcome in words, each part of a claim of several in its own: 'shown', 'is not
    shown by these runs', 'not tested (budget)', ..."""
    if t.test == "all_of":
        return "; ".join(f"{name}: {in_words(part)}" for name, part in t.parts.items())
    if t.outcome == NOT_TESTED:
        return f"not tested ({t.reason}: {t.gated}; the numbers alone: {t.computed})"
    return WORDS[t.outcome]


def not_run(why: str = "paper scale") -> Test:
    """A claim the lesson states but its run does not decide (it needs the paper's scale, a
    dataset or a model the course does not train): recorded as not tested (`why`)."""
    if not why:
        raise ValueError("not_run: expected why the claim is not run")
    return Test(NOT_TESTED, "not run", f"not run: {why}", "no runs", "not_run",
                dict(why=why), reason=why, computed=NOT_TESTED, reachable=(NOT_TESTED,),
                gated=f"not run at this scale ({why})")


# ================================================================ deciding a record again
TESTS: dict[str, Callable[..., Test]] = dict(
    compare=compare, versus=versus, same=same, within=within, paired=paired, rate=rate,
    rates=rates, sometimes=sometimes, not_run=not_run)


def redecide(record: dict) -> Test:
    """A test decided again by today's rule from its record (`Test.record()`, as claims.json
    keeps it): the same numbers, the same call."""
    if record["test"] == "all_of":
        return all_of({name: redecide(part) for name, part in record["args"].items()})
    if record["test"] not in TESTS:
        raise KeyError(f"no test {record['test']!r} in minattn.course.stats")
    return TESTS[record["test"]](**record["args"])


# ================================================================ power: how each claim could fail
POWERED = 0.8  # below this chance of "reproduced" at the paper's effect a claim is underpowered
SIMS = 20000  # draws of (difference, standard error) behind a simulated power


@dataclass(frozen=True)
class Power:
    """A claim's chance of each decided outcome at the lesson's runs and measured spread:
    `reproduced` at `effect` (the paper's effect, or what the runs measured: `source`) and
    `contradicted` at `opposite` (the effect the other way); None where it cannot be computed
    (runs that tie, one run: `note` says why). `note` also says what the quantity itself rules
    out (a band narrower than the interval can be, a line at the measure's bound)."""

    reproduced: float | None
    contradicted: float | None
    effect: str
    opposite: str
    source: str  # 'paper', 'measured' or 'claim' (the claim's own: no difference, a range)
    note: str = ""

    @property
    def underpowered(self) -> bool:
        return self.reproduced is None or self.reproduced < POWERED

    @property
    def label(self) -> str:
        """'underpowered (power 0.17)', 'power 0.93' or 'power unknown'."""
        if self.reproduced is None:
            return "underpowered (power unknown)"
        p = f"power {self.reproduced:.2f}"
        return f"underpowered ({p})" if self.underpowered else p

    def __str__(self) -> str:
        if self.reproduced is None:
            return f"{self.label}: {self.note}"
        source = {"paper": "the paper's effect", "measured": "the effect these runs measured",
                  "claim": "the claim's own value"}[self.source]
        text = (f"{self.label} at {self.effect} ({source}); contradicted with chance "
                f"{self.contradicted:.2f} at {self.opposite}")
        return text + (f"; {self.note}" if self.note else "")

    def record(self) -> dict:
        return dataclasses.asdict(self)


def power(test: Test | dict, effect=None) -> Power:
    """The chance that `test`'s claim comes out reproduced at `effect` and contradicted at the
    opposite effect, at the same runs and the spread they measured. `test`: a Test or its
    record (claims.json's "test"). `effect` (None: what the runs measured, or for `same` no
    difference and for `within` the range's centre) is in the claim's units: a difference
    a - b (compare, paired), a value (versus: its distance to the line; within: the value), a
    ratio (log=True), a rate (rate, sometimes), a pair of rates (rates; two-valued runs), a
    dict of part name -> effect (all_of).

    Differences decided by a t interval are simulated from the test's own standard error and
    degrees of freedom (a normal difference, a chi-square spread); rates are summed exactly
    over the binomial distribution; an all_of multiplies its parts' chances (parts taken as
    independent: reproduced when every part is, contradicted when every part is)."""
    if isinstance(test, dict):
        test = redecide(test)
    if test.test == "not_run":
        return Power(None, None, "", "", "claim", f"not run ({test.args['why']})")
    if test.test == "all_of":
        effects = effect if isinstance(effect, dict) else {}
        parts = {k: power(p, effects.get(k)) for k, p in test.parts.items()}
        rep = [p.reproduced for p in parts.values()]
        con = [p.contradicted for p in parts.values()]
        notes = "; ".join(f"{k}: {p.note}" for k, p in parts.items() if p.note)
        sources = {p.source for p in parts.values()}
        return Power(None if None in rep else float(np.prod(rep)),
                     None if None in con else float(np.prod(con)),
                     "; ".join(f"{k}: {p.effect}" for k, p in parts.items()),
                     "; ".join(f"{k}: {p.opposite}" for k, p in parts.items()),
                     sources.pop() if len(sources) == 1 else "measured", notes)
    if test.test in ("rate", "rates", "sometimes") or test.measured is None:
        return _rate_power(test, effect)
    return _interval_power(test, effect)


def _interval_power(test: Test, effect) -> Power:
    d, args = test.measured, test.args
    log = bool(args.get("log"))
    if d.df == 0:
        why = "the runs tie: no spread measured" if d.tied else "one run: no spread measured"
        return Power(None, None, "", "", "measured", why)
    rng = np.random.default_rng(0)
    z = rng.standard_normal(SIMS)
    chi = np.sqrt(rng.chisquare(d.df, SIMS) / d.df) if not d.exact else np.ones(SIMS)
    half = t_quantile(d.df) * d.se * chi if not d.exact else np.zeros(SIMS)

    def chance(true, decides):
        centre = true + d.se * z if not d.exact else np.full(SIMS, float(true))
        return float(np.mean(decides(centre - half, centre + half)))

    fmt = (lambda x: f"ratio {math.exp(x):.4g}") if log else (lambda x: f"{x:+.4g}")
    if test.test == "same":
        tol = float(args["tolerance"])
        true = abs(float(effect)) if effect is not None else 0.0
        opposite = 2 * tol - true
        rep = chance(true, lambda lo, hi: (lo >= -tol) & (hi <= tol))
        con = chance(opposite, lambda lo, hi: (hi < -tol) | (lo > tol))
        note = _too_narrow(d, 2 * tol, "the ±tolerance", args.get("resolution"), tol)
        return Power(rep, con, f"a gap of {true:.4g}", f"a gap of {opposite:.4g}",
                     "paper" if effect is not None else "claim", note)
    if test.test == "within":
        low, high = float(args["low"]), float(args["high"])
        true = float(effect) if effect is not None else (low + high) / 2
        edge = low if abs(true - low) < abs(true - high) else high
        opposite = 2 * edge - true
        rep = chance(true, lambda lo, hi: (lo >= low) & (hi <= high))
        con = chance(opposite, lambda lo, hi: (hi < low) | (lo > high))
        note = _too_narrow(d, high - low, "the range", args.get("resolution"), None)
        return Power(rep, con, f"{true:.4g}", f"{opposite:.4g}",
                     "paper" if effect is not None else "claim", note)
    sign = _sign(args.get("expect", ">"))
    if effect is None:
        true, source = abs(d.mean), "measured"
    else:
        true = abs(math.log(effect)) if log else abs(float(effect))
        source = "paper"
    rep = chance(sign * true, lambda lo, hi: (sign * lo > 0) & (sign * hi > 0))
    con = chance(-sign * true, lambda lo, hi: (sign * lo < 0) & (sign * hi < 0))
    return Power(rep, con, fmt(sign * true), fmt(-sign * true), source,
                 _at_a_bound(test) if test.test == "versus" else "")


def _too_narrow(d: Estimate, width: float, what: str, resolution, tol) -> str:
    """What the band itself rules out: an interval at these runs wider than the band."""
    notes = []
    wide = 2 * t_quantile(d.df) * d.se if not d.exact else 0.0
    if wide > width:
        notes.append(f"the interval at the measured spread ({wide:.3g} wide) is wider than "
                     f"{what} ({width:.3g}): reproduced only when a run's spread comes out "
                     "smaller by chance")
    if resolution is not None and tol is not None and tol < resolution:
        notes.append(f"the tolerance {tol:.3g} is finer than the resolution {resolution:.3g}")
    return "; ".join(notes)


def _at_a_bound(test: Test) -> str:
    """A line at or beyond the bound of a measure that lies in [0, 1] (an accuracy, a rate)."""
    args = test.args
    values = args["values"]
    xs = np.atleast_1d(np.asarray(values, dtype=float))
    line, sign = float(args["line"]), _sign(args.get("expect", ">"))
    if ((xs >= 0) & (xs <= 1)).all() and (sign > 0 and line >= 1 or sign < 0 and line <= 0):
        return f"reproduced is out of reach: the line {line:g} is at the measure's bound"
    return ""


def _binomial(n: int, p: float) -> np.ndarray:
    """The binomial probabilities of 0 .. n successes at rate p."""
    k, p = np.arange(n + 1), min(max(p, 0.0), 1.0)
    return np.exp(special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
                  + special.xlogy(k, p) + special.xlog1py(n - k, -p))


def _rate_power(test: Test, effect) -> Power:
    """Exact chances for rate, rates, sometimes and two-valued compare / versus."""
    args, kind = test.args, test.test
    if kind in ("compare", "versus"):  # two-valued runs: counts of runs at the upper value
        arms = [args["a"], args["b"]] if kind == "compare" else [args["values"]]
        xs = [_floats(a, "runs") for a in arms]
        top = float(np.max(np.concatenate(xs)))
        low = float(np.min(np.concatenate(xs)))
        counts = [(int((x == top).sum()), len(x)) for x in xs]
        if kind == "compare":
            kind, args = "rates", dict(k_a=counts[0][0], n_a=counts[0][1], k_b=counts[1][0],
                                       n_b=counts[1][1], expect=args["expect"])
        else:
            share = (float(args["line"]) - low) / (top - low)
            kind, args = "rate", dict(k=counts[0][0], n=counts[0][1], line=share,
                                      expect=args["expect"])
    if kind == "rates":
        sign = _sign(args["expect"])
        n_a, n_b = args["n_a"], args["n_b"]
        source = "paper" if effect is not None else "measured"
        pa, pb = effect if effect is not None else (args["k_a"] / n_a, args["k_b"] / n_b)
        if sign * (pa - pb) < 0:
            pa, pb = pb, pa

        def chance(qa, qb, outcome):
            wa, wb = _binomial(n_a, qa), _binomial(n_b, qb)
            return float(sum(wa[i] * wb[j] for i in range(n_a + 1) for j in range(n_b + 1)
                             if _fisher(i, n_a, j, n_b, sign) == outcome))

        return Power(chance(pa, pb, REPRODUCED), chance(pb, pa, CONTRADICTED),
                     f"rates {pa:.2f} vs {pb:.2f}", f"rates {pb:.2f} vs {pa:.2f}", source)
    n = args["n"]
    if kind == "rate":
        line, sign = float(args["line"]), _sign(args["expect"])
        p = float(effect) if effect is not None else args["k"] / n
        if sign * (p - line) < 0:
            p = 2 * line - p
        p, opposite = min(max(p, 0.0), 1.0), min(max(2 * line - p, 0.0), 1.0)
        decided = [_side(sign, *(x - line for x in rate_interval(k, n))) for k in range(n + 1)]
    else:  # sometimes: at the measured rate, and at a rate of 0 (the other outcome never)
        material = float(args.get("material", 0.1))
        p = (float(effect) if effect is not None else
             args["k"] / n if 0 < args["k"] < n else 0.5)
        opposite = 0.0
        decided = [sometimes(k, n, material).computed for k in range(n + 1)]
    source = "paper" if effect is not None else "measured"
    rep = float(_binomial(n, p) @ np.array([o == REPRODUCED for o in decided], dtype=float))
    con = float(_binomial(n, opposite) @ np.array([o == CONTRADICTED for o in decided],
                                                  dtype=float))
    return Power(rep, con, f"a rate of {p:.2f}", f"a rate of {opposite:.2f}", source)
