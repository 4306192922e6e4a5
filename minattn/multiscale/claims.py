"""The claims lesson 03 tests, each decided from its raw numbers by the course's rule.

From Guo, Qiu, Liu, Xue and Zhang, "Multi-Scale Self-Attention for Text Classification"
(AAAI 2020, and its slides): the observation about BERT's heads, the effective-scale task,
the MR row of the MTL-16 table and the SNLI ablations; beside them the lesson's own checks
(the partner task, linear baselines, what the trained heads learned). Each function takes
what the lesson measured and returns a `Verdict` with its finding in words;
tests/test_claims.py feeds every one of them numbers that contradict it.

Samples: sentences for the pretrained encoder (one scale per sentence), seeds for trained
models, and for models scored on the same test sentences, the sentences *and* the seeds
(`paired`, a[run][item] = 1 where run `run` got sentence `item` right).
"""

from __future__ import annotations

import math

from scipy import stats

from ..course.claims import claim_rule
from ..course.estimates import LEVEL
from ..course.verdict import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTED,
    REPRODUCED,
    Verdict,
    combine,
    compare,
    converged,
    off_ceiling,
    off_floor,
    paired,
    same,
    versus,
)

_RIGHT = [[1, 1, 1, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 1, 1, 1]]  # two runs × eight sentences
_WRONG = [[0, 0, 1, 0, 0, 0, 1, 0], [0, 0, 0, 1, 0, 0, 1, 0]]


# --- section 1: a pretrained encoder's heads -----------------------------------------------

@claim_rule(reproduced_by=dict(lower=[2.1, 2.4, 1.9, 2.2], upper=[5.0, 5.3, 4.8, 5.1]),
            contradicted_by=dict(lower=[5.0, 5.3, 4.8, 5.1], upper=[2.1, 2.4, 1.9, 2.2]))
def lower_layers_attend_more_locally(*, lower, upper):
    """The lower half of the layers attends at smaller scales than the upper half: per
    sentence, the mean measured scale of layers 1..L/2 minus that of the rest (sentences are
    the samples, paired)."""
    diff = [a - b for a, b in zip(lower, upper)]
    return versus(diff, 0.0, "<").says(
        reproduced="The pretrained encoder's lower layers look less far than its upper ones, "
                   "as the paper saw in BERT.",
        contradicted="The pretrained encoder's lower layers look farther than its upper ones: "
                     "the opposite of the paper's BERT.",
        inconclusive="These sentences cannot tell whether the lower layers look less far.",
        not_tested="The pretrained encoder was not measured.")


@claim_rule(reproduced_by=dict(small=[1.1, 1.3, 0.9, 1.2], large=[6.0, 6.3, 5.8, 6.1]),
            contradicted_by=dict(small=[6.0, 6.3, 5.8, 6.1], large=[1.1, 1.3, 0.9, 1.2]))
def heads_of_a_layer_work_at_different_scales(*, small, large):
    """Within one layer, the head picked as the most local and the head picked as the broadest
    on one half of the sentences, measured on the other half (per sentence, paired): the
    picked-small head looks less far."""
    diff = [a - b for a, b in zip(small, large)]
    return versus(diff, 0.0, "<").says(
        reproduced="Heads of one layer work at different scales: on sentences they were not "
                   "picked on, the most local head stays near its word while the broadest "
                   "spreads over the sentence.",
        contradicted="On sentences they were not picked on, the head picked as local looks "
                     "farther than the one picked as broad: the difference does not hold up.",
        inconclusive="On sentences they were not picked on, these sentences cannot tell the two "
                     "heads' scales apart.",
        not_tested="The pretrained encoder was not measured.")


# --- section 5: the partner task ------------------------------------------------------------

@claim_rule(reproduced_by=dict(multiscale=[0.99, 0.97, 0.93, 0.98],
                               single={"3": [0.66, 0.64, 0.7, 0.65], "N": [0.5, 0.51, 0.49, 0.5]}),
            contradicted_by=dict(multiscale=[0.52, 0.5, 0.49, 0.51],
                                 single={"3": [0.66, 0.64, 0.7, 0.65],
                                         "N": [0.9, 0.93, 0.92, 0.9]}))
def multiscale_beats_every_single_scale(*, multiscale, single):
    """Both small and large scales matter: the multi-scale model's accuracy (one per seed)
    beats every model whose heads all share one scale ({scale: accuracies})."""
    gates = [off_ceiling(multiscale, *single.values(), top=1.0, margin=0.01),
             off_floor(multiscale, *single.values(), bottom=0.5, margin=0.02)]
    return combine(*(compare(multiscale, acc, ">", gates=gates) for acc in single.values())).says(
        reproduced="The multi-scale model beats every single-scale model: finding the pairs "
                   "needs a small scale and counting them a large one.",
        partly="The multi-scale model beats some single scales but not all of them.",
        contradicted="A single-scale model does better than the multi-scale one.",
        inconclusive="These seeds cannot separate the multi-scale model from the single scales.",
        not_tested="Every model sat at chance or at the ceiling: the task could not show it.")


# --- section 6: the reach test --------------------------------------------------------------

def _some_run_beats_zero(excess, what: str) -> Verdict:
    """Does at least one run's mean per-item `excess` (excess[run][item]) lie below 0? Each run
    is tested over its items (one-sided t-test) at the Bonferroni level 2.5 % / runs, so that
    with no real effect the answer is yes at most 2.5 % of the time. Reproduced: some run is
    below; contradicted: every run is above at that level; inconclusive otherwise."""
    runs = len(excess)
    level = (1 - LEVEL) / 2 / runs
    below = [stats.ttest_1samp(e, 0.0, alternative="less").pvalue < level for e in excess]
    above = [stats.ttest_1samp(e, 0.0, alternative="greater").pvalue < level for e in excess]
    means = ", ".join(f"{sum(e) / len(e):+.4g}" for e in excess)
    detail = (f"{what} per run {means} over {len(excess[0])} items; {sum(below)} of {runs} runs "
              f"below 0 and {sum(above)} above at p < {level:.3g} (2.5 % / {runs} runs)")
    outcome = REPRODUCED if any(below) else CONTRADICTED if all(above) else INCONCLUSIVE
    return Verdict(outcome, detail, n=f"{runs} runs × {len(excess[0])} items")


@claim_rule(reproduced_by=dict(excess=[[-0.1, -0.2, -0.15, -0.12], [0.01, -0.02, 0.0, 0.02]],
                               flex=[0.31, 0.28, 0.35, 0.3], line=4 / 7,
                               flex_best=[0.31, 0.28, 0.35, 0.3]),
            contradicted_by=dict(excess=[[0.03, 0.05, 0.04, 0.03], [0.02, 0.04, 0.03, 0.05]],
                                 flex=[0.6, 0.61, 0.6, 0.62], line=4 / 7,
                                 flex_best=[0.59, 0.6, 0.6, 0.6]))
def large_scale_low_reaches_farther(*, excess, flex, line, flex_best):
    """Effective scale at K = 1, in two parts. Reach: on the same test sequences, some Flex run
    beats the best predictor blind to a_N (a_1 ⊙ E[a_N] = a_1/2), which no model with Hier-S's
    or deepHier-S's reach can do in expectation: excess[run][item] = that run's squared error
    minus the blind predictor's, over Var(target). Every seed: the runs' final error / Var
    (one per seed) lies below `line` = 4/7, the blind predictor's. Gate: every Flex run learned
    at least what a_1 tells (its best evaluation within 0.05 of the line)."""
    learned = converged([b <= line + 0.05 for b in flex_best], "Flex runs that learned "
                                                                "what a_1 tells")
    verdict = _gated_all([learned], _some_run_beats_zero(excess, "error above the blind "
                                                                "predictor's"),
                         versus(flex, line, "<"))
    return verdict.says(
        reproduced="Flex carries a_N to the node, seed after seed: its error ends below what "
                   "any model blind to a_N can reach, a line Hier-S and deepHier-S cannot "
                   "cross.",
        partly="Flex can carry a_N to the node: a run of it beats, on the same test "
               "sequences, the best predictor blind to a_N, which Hier-S and deepHier-S "
               "cannot. But at this budget not every seed has found the way: the seeds' "
               "error is not below that predictor's on average.",
        contradicted="No Flex run beats the best predictor blind to a_N: at this budget its "
                     "large scale did not carry a_N to the node.",
        inconclusive="These Flex runs cannot be told from the best predictor blind to a_N: "
                     "they may not have found the way to a_N yet.",
        not_tested="Some Flex runs had not even learned what a_1 tells by the end of training.")


def _gated_all(gates, *parts) -> Verdict:
    """`combine(*parts)`, unless a gate failed: then not tested, for the gate's reason."""
    for gate in gates:
        if not gate.passed:
            return Verdict(NOT_TESTED, gate.detail, reason=gate.reason,
                           n="; ".join(p.n for p in parts))
    return combine(*parts)


# --- section 7: movie reviews at MR's size --------------------------------------------------

def _mr_gate(valid, n_valid):
    """The runs converged: none of them improved its development accuracy at the last epoch by
    more than the standard error of one accuracy over the `n_valid` development sentences
    (valid[run] = its accuracy after each epoch)."""
    def still_learning(curve):
        p = max(curve)
        return curve[-1] - max(curve[:-1]) > math.sqrt(p * (1 - p) / n_valid)
    return converged([not still_learning(c) for c in valid], "runs whose last epoch did not "
                                                             "beat the earlier ones beyond noise")


_CURVES = dict(valid=[[0.6, 0.7, 0.72, 0.71], [0.62, 0.7, 0.71, 0.71]], n_valid=200)


@claim_rule(reproduced_by=dict(a=_RIGHT, b=_WRONG, baseline="Transformer", **_CURVES),
            contradicted_by=dict(a=_WRONG, b=_RIGHT, baseline="Transformer", **_CURVES))
def multiscale_beats_baseline_on_mr(*, a, b, baseline, valid, n_valid):
    """MR (MTL-16 table): the Multi-Scale Transformer (a[run][sentence] = 1 if right) beats the
    `baseline` (b: the Transformer or the BiLSTM), paired over the shared test sentences and
    the seeds. Gate: no run was still learning at its last epoch (`_mr_gate` on the development
    accuracy curves `valid` of every run, over `n_valid` sentences)."""
    return paired(a, b, ">", gates=[_mr_gate(valid, n_valid)]).says(
        reproduced=f"On MR-sized data the Multi-Scale Transformer beats the {baseline}, as in "
                   "the paper's MR row.",
        contradicted=f"On MR-sized data the {baseline} beats the Multi-Scale Transformer: the "
                     "paper's MR gap turns the other way.",
        inconclusive=f"On MR-sized data these seeds and sentences cannot tell the Multi-Scale "
                     f"Transformer from the {baseline}.",
        not_tested="Some runs were still learning at their last epoch: the budget was too "
                   "short to compare them.")


@claim_rule(reproduced_by=dict(models={"A": _RIGHT, "B": _RIGHT}, linear=_WRONG[0], **_CURVES),
            contradicted_by=dict(models={"A": _WRONG, "B": _WRONG}, linear=_RIGHT[0], **_CURVES))
def attention_beats_linear_on_mr(*, models, linear, valid, n_valid):
    """Not a paper claim, a baseline: every attention model ({name: a[run][sentence]}) beats
    logistic regression (linear[sentence], deterministic: the same at every seed), paired over
    the shared test sentences."""
    gate = _mr_gate(valid, n_valid)
    parts = [paired(a, [linear] * 2, ">", gates=[gate]) for a in models.values()]
    return combine(*parts).says(
        reproduced="Every attention model beats the better linear model on the same sentences: "
                   "they learned something a bag of words or a mean vector does not hold.",
        partly="Some attention models beat the better linear model and some do not.",
        contradicted="The linear model beats the attention models: at this size they learn "
                     "less than a bag of words or a mean vector holds.",
        inconclusive="These seeds and sentences cannot tell the attention models from the "
                     "linear one.",
        not_tested="Some runs were still learning at their last epoch: the budget was too "
                   "short to compare them.")


# --- section 8: the SNLI ablations, in ordering only (paper scale) --------------------------

def _not_run(*arms) -> Verdict | None:
    if all(len(a) for a in arms):
        return None
    return Verdict(NOT_TESTED, "not run at this scale: MINATTN_SCALE=paper runs it",
                   reason="budget", n=" vs ".join(str(len(a)) for a in arms))


_NOT_RUN = "Not run at this scale (MINATTN_SCALE=paper runs the ablations)."


@claim_rule(reproduced_by=dict(first=_RIGHT, second=_WRONG, first_name="α = 1",
                               second_name="α = −1"),
            contradicted_by=dict(first=_WRONG, second=_RIGHT, first_name="α = 1",
                                 second_name="α = −1"))
def ablation_ordering_on_text(*, first, second, first_name, second_name):
    """An SNLI ablation's ordering, checked on our sentences: the setting the paper ranks
    higher (first[run][sentence] = 1 if right) beats the one it ranks lower, paired over the
    shared test sentences and the seeds; e.g. α = 1 (small scales in the lower layers) over
    α = −1, or all heads on the smallest scale over all heads on the fourth smallest."""
    verdict = _not_run(first, second) or paired(first, second, ">")
    return verdict.says(
        reproduced=f"{first_name} beats {second_name}, the paper's ordering.",
        contradicted=f"{second_name} beats {first_name}: the paper's ordering turns round on "
                     "this data.",
        inconclusive=f"These seeds cannot order {first_name} and {second_name}.",
        not_tested=_NOT_RUN)


@claim_rule(reproduced_by=dict(multiscale=_RIGHT, single={"3": _WRONG, "N/4": _WRONG}),
            contradicted_by=dict(multiscale=_WRONG, single={"3": _RIGHT, "N/4": _RIGHT}))
def multiscale_beats_single_scales_on_text(*, multiscale, single):
    """SNLI ablation, in ordering only: α = 0.5 beats every single-scale model run
    ({scale: a[run][sentence]}), which includes the best of them."""
    verdict = _not_run(multiscale, *single.values()) or combine(
        *(paired(multiscale, a, ">") for a in single.values()))
    return verdict.says(
        reproduced="The multi-scale model beats every single scale on the same sentences.",
        partly="The multi-scale model beats some single scales, not all of them.",
        contradicted="A single scale beats the multi-scale model on this data.",
        inconclusive="These seeds cannot tell the multi-scale model from the single scales.",
        not_tested=_NOT_RUN)


# --- section 9: what the trained heads learned ----------------------------------------------

@claim_rule(reproduced_by=dict(trained={"A": [0.31, 0.29, 0.33]}, untrained={"A": [0.05, 0.06,
                                                                                     0.05]}),
            contradicted_by=dict(trained={"A": [0.01, 0.012, 0.011]},
                                 untrained={"A": [0.05, 0.06, 0.05]}))
def trained_heads_pick_words(*, trained, untrained):
    """Each model's heads depart further from uniform attention after training than before:
    the mean departure (total-variation distance) over its heads, one value per seed, trained
    ({model: per seed}) against the same seeds untrained."""
    return combine(*(compare(trained[m], untrained[m], ">") for m in trained)).says(
        reproduced="Training moves every model's heads away from uniform weights: they learned "
                   "which words to pick.",
        partly="One model's heads moved away from uniform weights, the other's did not.",
        contradicted="The trained heads are closer to uniform than the untrained ones.",
        inconclusive="These seeds cannot tell trained heads from untrained ones.",
        not_tested="The heads were not measured.")


@claim_rule(reproduced_by=dict(ratio={"A": [1.01, 0.99, 1.0], "B": [0.98, 1.02, 1.0]}),
            contradicted_by=dict(ratio={"A": [0.5, 0.45, 0.55], "B": [0.4, 0.42, 0.38]}))
def trained_heads_keep_uniform_distances(*, ratio):
    """Each model's heads look as far as uniform attention in their windows would: the mean over
    the heads of measured scale / uniform attention's scale, one value per seed ({model: per
    seed}), within ±0.1 of 1 (an equivalence test). A model whose heads learned
    locality, as BERT's did, would sit well below 1."""
    return combine(*(same(r, 1.0, 0.1) for r in ratio.values())).says(
        reproduced="The trained heads keep uniform attention's distances (within 10 %): the "
                   "Transformer, free to look anywhere, learned no locality, unlike BERT's heads.",
        partly="One model's heads keep uniform attention's distances, the other's do not.",
        contradicted="The trained heads' distances differ from uniform attention's by more than "
                     "10 %: training taught them where to look.",
        inconclusive="These seeds cannot say whether the heads' distances stay within 10 % of "
                     "uniform attention's.",
        not_tested="The heads were not measured.")
