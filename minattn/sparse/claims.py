"""The paper claims lesson 02 tests, each decided from its raw numbers by the course's rule.

From Child et al. 2019 ("Generating Long Sequences with Sparse Transformers"), Beltagy et al.
2020 ("Longformer"), Zaheer et al. 2020 ("Big Bird") and Jiang et al. 2023 ("Mistral 7B").
Each function takes what the lesson measured (one value per seed or per timing repeat, or an
exact count) and returns a `Verdict` with its finding in words; tests/test_claims.py feeds
every one of them numbers that reproduce it and numbers that contradict it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats

from ..course.claims import claim_rule
from ..course.estimates import estimate
from ..course.verdict import (
    CONTRADICTED,
    INCONCLUSIVE,
    PARTLY,
    REPRODUCED,
    Gate,
    Verdict,
    combine,
    compare,
    same,
    versus,
    within,
)


@claim_rule(reproduced_by=dict(exponent=0.49, sizes=[256, 512, 1024, 2048]),
            contradicted_by=dict(exponent=1.0, sizes=[256, 512, 1024, 2048]))
def strided_costs_n_sqrt_n(*, exponent, sizes):
    """Child et al. 2019, §4.3: with the stride l ≈ √N the strided heads give each query O(√N)
    keys, so the whole layer costs O(N√N). `exponent`: the slope a of log(keys per query)
    against log N, counted exactly on the masks at `sizes` (an exact number: no interval).
    Reproduced when a lies in [0.45, 0.55] (l is rounded to an integer)."""
    return within(float(exponent), 0.45, 0.55).says(
        reproduced=f"The strided pair's keys per query grow like √N (N = {sizes[0]} to "
                   f"{sizes[-1]}), so a layer costs about N√N: between a window's N and dense "
                   "attention's N².",
        contradicted="The strided pair's keys per query do not grow like √N on these masks.",
        inconclusive="(an exact count is never inconclusive)",
        not_tested="The keys per query were not counted.")


def _fit_rss(x, y) -> float:
    """Residual sum of squares of the least-squares line y = a + b·x."""
    return float(((y - np.polyval(np.polyfit(x, y, 1), x)) ** 2).sum())


@claim_rule(reproduced_by=dict(sizes=[16, 32, 64, 128, 256, 512, 1024],
                               diameters=[[3, 4, 5, 6, 6, 7, 7], [3, 4, 5, 6, 7, 7, 8],
                                          [3, 4, 5, 5, 6, 7, 7], [3, 4, 5, 6, 6, 7, 7]]),
            contradicted_by=dict(sizes=[16, 32, 64, 128, 256, 512, 1024],
                                 diameters=[[8, 16, 32, 64, 128, 256, 512]] * 2
                                 + [[8, 16, 32, 64, 128, 255, 511]] * 2))
def small_world_diameter_grows_like_log_n(*, sizes, diameters):
    """Zaheer et al. 2020, §2 (the small-world argument after Watts & Strogatz): random edges
    make the longest shortest path grow like log N. `diameters[seed][size]`: a window plus
    random edges, one random draw per seed, at >= 4 `sizes`. Each seed's diameters are fitted
    by a line against log N, against √N and against N (least squares, intercept and slope);
    reproduced when the log N line leaves smaller residuals than the √N line *and* than the N
    line, significantly over the seeds (paired, seed by seed)."""
    n = np.asarray(sizes, dtype=float)
    rss = {name: [_fit_rss(x, np.asarray(d, dtype=float)) for d in diameters]
           for name, x in (("log", np.log(n)), ("sqrt", np.sqrt(n)), ("lin", n))}
    enough = Gate(len(sizes) >= 4, "budget", f"{len(sizes)} sizes (at least 4 are needed to "
                                             "tell the growth laws apart)")
    parts = [versus([a - b for a, b in zip(rss[other], rss["log"])], 0.0, ">", gates=[enough])
             for other in ("sqrt", "lin")]
    return combine(*parts).says(
        reproduced=f"Over N = {sizes[0]} to {sizes[-1]} the diameter with random edges follows "
                   "a line in log N, and a line in √N or in N fits it significantly worse: it "
                   "grows like log N.",
        partly="The diameter with random edges follows log N better than one of √N and N, but "
               "not significantly better than both.",
        contradicted="The diameter with random edges grows faster than log N: a line in √N or "
                     "N fits it better.",
        inconclusive="These seeds and sizes cannot tell log N growth from √N or N growth.",
        not_tested="Too few sizes were measured to tell the growth laws apart.")


@claim_rule(reproduced_by=dict(window_exponent=[1.02, 0.97, 1.05, 0.99, 1.01],
                               dense_exponent=[1.9, 2.0, 1.95, 1.97, 2.02]),
            contradicted_by=dict(window_exponent=[1.9, 2.0, 1.95, 1.97, 2.02],
                                 dense_exponent=[1.9, 2.0, 1.95, 1.97, 2.02]))
def window_time_grows_linearly(*, window_exponent, dense_exponent):
    """Beltagy et al. 2020, §3 and Fig. 1: sliding-window attention's time grows linearly in N.
    `*_exponent`: per timing repeat, the slope of log(time) against log N. Reproduced when the
    window kernel's exponent lies in [0.75, 1.25] (linear); contradicted when it lies wholly
    outside. Gate: dense attention's exponent must be >= 1.5 on average, i.e. the sizes are
    large enough for the device to show the quadratic cost at all (a GPU that is not yet busy
    runs every size in about the same time)."""
    dense = estimate(dense_exponent).mean
    busy = Gate(dense >= 1.5, "budget", f"dense attention's time grew as N^{dense:.2f}: the sizes "
                                        "are too small for this device to show a quadratic cost")
    return within(window_exponent, 0.75, 1.25, gates=[busy]).says(
        reproduced="The window kernel's time grows in proportion to N while dense attention's "
                   "grows like N²: each doubling of N doubles the one and about quadruples the "
                   "other.",
        contradicted="The window kernel's time does not grow in proportion to N at these sizes.",
        inconclusive="The timings are too noisy to tell whether the window kernel's time grows "
                     "in proportion to N.",
        not_tested="At these sizes the device is not busy enough for even dense attention to "
                   "show its N² cost, so the growth of the window kernel's time says nothing.")


@claim_rule(reproduced_by=dict(window_acc=[0.531, 0.469, 0.531, 0.531], majority=0.531,
                               control_acc=[1.0, 0.996, 1.0, 1.0]),
            contradicted_by=dict(window_acc=[0.9, 0.92, 0.88, 0.91], majority=0.531,
                                 control_acc=[1.0, 0.996, 1.0, 1.0]))
def window_alone_stays_at_majority(*, window_acc, majority, control_acc, margin=0.05):
    """Beltagy et al. 2020, §3.1: L layers of a window of half-width w see L·w tokens, no
    further. On lesson 02's two-halves task position 0 then hears nothing of the second half,
    and no model can beat a constant prediction: the majority class of the held-out set.
    Reproduced when the window's accuracy lies inside [1 - majority - margin, majority +
    margin] (the band of the constant predictions); contradicted when it lies above. Gate: the
    control (the same model with a global token, same steps) must learn (mean >= 0.9), or the
    budget, not the pattern, could be what held the window back."""
    learned = estimate(control_acc).mean
    control = Gate(learned >= 0.9, "budget", f"the control reached {learned:.3f}")
    stuck = within(window_acc, 1 - majority - margin, majority + margin, gates=[control])
    return stuck.says(
        reproduced="A window too narrow to connect the two halves in two layers stays at the "
                   "majority-class line, while the same model with one global token learns the "
                   "task in the same steps: it is the pattern, not the training, that fails.",
        contradicted="The window model's accuracy lies outside what a constant prediction "
                     "gives, which its pattern should not allow: something reaches position 0 "
                     "that the graph argument misses.",
        inconclusive="The window model's seeds spread too widely to place it at the "
                     "majority-class line.",
        not_tested="The control with a global token did not learn in these steps, so the "
                   "window's failure cannot be pinned on its pattern.")


@claim_rule(reproduced_by=dict(global_acc=[1.0, 0.996, 1.0, 1.0],
                               window_acc=[0.531, 0.469, 0.531, 0.531]),
            contradicted_by=dict(global_acc=[0.531, 0.469, 0.531, 0.531],
                                 window_acc=[1.0, 0.996, 1.0, 1.0]))
def global_attention_matters(*, global_acc, window_acc):
    """Beltagy et al. 2020, Table 11: WikiHop dev accuracy 72.2 with global attention, 65.5
    without (both without its extra projections). Ours: the two-halves task, one global token
    against the window alone; reproduced when the global arm is better by at least half the
    paper's 6.7 points, significantly over seeds."""
    return compare(global_acc, window_acc, ">", paper_gap=(72.2 - 65.5) / 100).says(
        reproduced="One global token, at one key less per query, turns a model that cannot do "
                   "the task into one that does: global attention matters for long inputs.",
        partly="The global token helps, but by less than half the paper's gap.",
        contradicted="The window alone does better than the window with a global token.",
        inconclusive="These seeds cannot tell the global token's model from the window's.",
        not_tested="The two models were not trained.")


@claim_rule(reproduced_by=dict(correct=[250, 128, 252, 136], items=256, majority=0.531),
            contradicted_by=dict(correct=[136, 120, 136, 136], items=256, majority=0.531))
def random_blocks_carry_the_far_half(*, correct, items, majority, margin=0.05):
    """Zaheer et al. 2020, §2: random blocks shorten paths, so window + random blocks, without
    a global token, let position 0 hear both halves in two layers. `correct[seed]`: how many of
    the `items` held-out sequences a run got right. A run that beats the majority-class line
    must use the far half (a model that hears one half can do no better than a constant).
    Each run is tested against the line with an exact binomial test over the items (one-sided,
    2.5 % split over the runs); the outcomes of such training are often all-or-nothing, so the
    claim counts runs. Reproduced when at least one run beats the line; contradicted when every
    run stays inside the band of the constant predictions, [1 - majority - margin,
    majority + margin], by the t interval over runs."""
    n = len(correct)
    beats = [stats.binomtest(int(k), int(items), majority, alternative="greater").pvalue
             < 0.025 / n for k in correct]
    accuracy = [k / items for k in correct]
    detail = (f"{sum(beats)}/{n} runs above the majority line {majority:.3f} (exact binomial "
              f"over {items} items, one-sided, 2.5 % / {n}); accuracies "
              + ", ".join(f"{a:.3f}" for a in accuracy))
    stuck = within(accuracy, 1 - majority - margin, majority + margin)
    outcome = (REPRODUCED if any(beats) else
               CONTRADICTED if stuck.verdict == REPRODUCED else INCONCLUSIVE)
    verdict = Verdict(outcome, detail + f"; {stuck.outcome}: {stuck.detail}", n=str(n))
    return verdict.says(
        reproduced=f"Window and random blocks, with no global token, carry the far half to "
                   f"position 0 in two layers: {sum(beats)} of {n} BigBird runs beat the "
                   "majority-class line, which only a model hearing both halves can do.",
        contradicted="No BigBird run beats the majority-class line: its random blocks did not "
                     "carry the far half to position 0 in a way the model learned to use.",
        inconclusive="No BigBird run beats the majority-class line significantly, yet their "
                     "spread is too wide to place them all on it.",
        not_tested="The BigBird model was not trained.")


@claim_rule(reproduced_by=dict(global_acc=[1.0, 1.0, 1.0, 0.996],
                               bigbird_equal=[0.8, 0.85, 0.78, 0.82],
                               bigbird_long=[0.9, 0.88, 0.92, 0.9], longer=4),
            contradicted_by=dict(global_acc=[1.0, 1.0, 1.0, 0.996],
                                 bigbird_equal=[1.0, 1.0, 0.996, 1.0],
                                 bigbird_long=[1.0, 1.0, 1.0, 1.0], longer=4))
def random_blocks_fall_short_of_global(*, global_acc, bigbird_equal, bigbird_long, longer,
                                       tolerance=0.02):
    """Zaheer et al. 2020, §2: window and random blocks alone fell short of full attention in
    the authors' first experiment, which is why BigBird adds global tokens. Ours, two parts: the
    BigBird model (no global token) against the global token's model at the same steps
    (`bigbird_equal`) and with `longer` times the steps (`bigbird_long`). Reproduced when it is
    still significantly short with the longer budget; partly when it is short at equal steps but
    not shown short with the longer budget; contradicted when it is not short at equal steps
    and within `tolerance` of the global model with the longer budget."""
    slower = compare(global_acc, bigbird_equal, ">")
    short = compare(global_acc, bigbird_long, ">")
    caught_up = same(bigbird_long, global_acc, tolerance)
    if short.verdict == REPRODUCED:
        outcome = REPRODUCED
    elif slower.verdict == REPRODUCED:
        outcome = PARTLY
    elif caught_up.verdict == REPRODUCED:
        outcome = CONTRADICTED
    else:
        outcome = INCONCLUSIVE
    verdict = dataclasses.replace(
        combine(slower, short, caught_up), verdict=outcome)
    return verdict.says(
        reproduced=f"Without a global token the model stays short of the global token's model "
                   f"even with {longer}× the steps: random blocks make paths short, but not "
                   "as easy to learn as one hop through a global token.",
        partly=f"Without a global token the model learns more slowly — behind the global "
               f"token's model at the same steps — but with {longer}× the steps no shortfall is "
               "left that these seeds can show.",
        contradicted=f"Without a global token the model keeps up with the global token's model "
                     f"on this task: level at the same steps and within {tolerance:g} of it "
                     f"with {longer}× the steps.",
        inconclusive="These seeds cannot tell whether the model without a global token falls "
                     "short of the one with it.",
        not_tested="The models were not trained.")


@claim_rule(reproduced_by=dict(max_error=2e-16), contradicted_by=dict(max_error=0.3))
def rolling_cache_equals_window(*, max_error):
    """Jiang et al. 2023, Mistral 7B, §2: a causal window of W keys needs a key-value cache of W
    slots only, the keys of step i overwriting slot i mod W. `max_error`: the largest difference
    between generating through that cache and the causal window kernel (float64, exact)."""
    return same(float(max_error), 0.0, tolerance=1e-12).says(
        reproduced="Generating through a rolling cache of W slots gives exactly what the causal "
                   "window computes: the cache never needs to hold more than the window.",
        contradicted="Generation through the rolling cache differs from the causal window.",
        inconclusive="(an exact difference is never inconclusive)",
        not_tested="The rolling cache was not run.")
