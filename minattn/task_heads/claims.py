"""The claims lesson 07 tests, each decided from its raw numbers by the course's rule.

From Jia, "Task-specific attention" (Stanford CS224N poster, 2024): Table 3 (frozen and
fine-tuned read-outs, the U(0.9, 1) initialisation, training time), its Approach (U(0.9, 1)
starts the head close to a mean) and its Discussion (heads add 7-16 % to training time).
Accuracies are judged paired over the shared test items *and* over seeds
(`verdict.paired`: a[run][item] = 1 for a correct answer); Pearson correlations, which are no
mean over items, over seeds only. Every comparison of trained read-outs is gated on the runs
having converged (their validation score stopped improving before the budget ran out). A
claim of several parts says, part by part, what was found.
"""

from __future__ import annotations

from ..course.claims import claim_rule
from ..course.estimates import estimate
from ..course.verdict import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTED,
    REPRODUCED,
    Gate,
    Verdict,
    combine,
    compare,
    paired,
    versus,
    within,
)
from ..course.verdict import converged as all_converged


def _items(hits: int, n: int = 60, runs: int = 2) -> list:
    """Runs of per-item scores with `hits` correct answers of `n`, slightly different runs."""
    return [[1] * (hits - r) + [0] * (n - hits + r) for r in range(runs)]


def paired_same(a, b, tolerance: float, gates=()) -> Verdict:
    """Equivalence over shared items (two one-sided paired tests at 2.5 % each): reproduced
    when a - b is significantly above -tolerance and below +tolerance, contradicted when it is
    significantly outside, inconclusive otherwise."""
    up = paired([[x + tolerance for x in run] for run in a], b, ">", gates=gates)
    down = paired([[x - tolerance for x in run] for run in a], b, "<", gates=gates)
    if up.reason or down.reason:
        return up
    outcome = (REPRODUCED if up.verdict == down.verdict == REPRODUCED else
               CONTRADICTED if CONTRADICTED in (up.verdict, down.verdict) else INCONCLUSIVE)
    return Verdict(outcome, f"within ±{tolerance:g}? {up.detail}; {down.detail}", n=up.n)


def _words(part: Verdict, found: str, against: str, undecided: str) -> str:
    """What one part of a claim found, in words: `found` (as the paper says), `against`, or
    `undecided`; a part that could not be tested says why."""
    return {REPRODUCED: found, CONTRADICTED: against, INCONCLUSIVE: undecided}.get(
        part.verdict, f"not tested ({part.reason or 'budget'})")


def _says(verdict: Verdict, parts: str, reproduced: str) -> Verdict:
    """The finding of a claim of several parts: `reproduced` when every part is, else the
    parts in words."""
    return verdict.says(reproduced=reproduced, partly=f"Partly: {parts}.",
                        contradicted=f"Against the poster: {parts}.",
                        inconclusive=f"Undecided: {parts}.", not_tested=f"Not tested: {parts}.")


_CONVERGED = dict(sentiment=[True] * 4, paraphrase=[True] * 4, similarity=[True] * 4)


@claim_rule(reproduced_by=dict(sentiment=dict(heads=_items(40), mean=_items(50)),
                               paraphrase=dict(heads=_items(50), mean=_items(40)),
                               similarity=dict(heads=[0.50, 0.52], mean=[0.70, 0.71]),
                               converged=_CONVERGED),
            contradicted_by=dict(sentiment=dict(heads=_items(50), mean=_items(40)),
                                 paraphrase=dict(heads=_items(40), mean=_items(50)),
                                 similarity=dict(heads=[0.70, 0.71], mean=[0.50, 0.52]),
                                 converged=_CONVERGED))
def frozen_heads_vs_mean_pooling(*, sentiment, paraphrase, similarity, converged):
    """Table 3, frozen ("pretrain") rows: the heads lose to mean pooling on sentiment and STS
    and gain on paraphrase. sentiment, paraphrase: dict(heads=, mean=) of per-run per-item
    scores; similarity: dict(heads=, mean=) of per-run Pearson r; converged: per task, one flag
    per run of the two arms. A task whose runs did not all converge is not tested."""
    words = []
    parts = []
    for task, arms, expect in (("sentiment", sentiment, "<"), ("paraphrase", paraphrase, ">"),
                               ("similarity", similarity, "<")):
        gate = [all_converged(converged[task], f"{task} runs")]
        test = compare if task == "similarity" else paired  # a correlation per run: seeds only
        part = test(arms["heads"], arms["mean"], expect, gates=gate)
        side = ("below", "above") if expect == "<" else ("above", "below")
        parts.append(part)
        said = _words(part, f"{side[0]} mean pooling, as in the poster",
                      f"{side[1]} mean pooling", "the same as mean pooling within the noise")
        words.append(f"on {task} the heads score {said}")
    return _says(combine(*parts), "; ".join(words),
                 "Over the frozen encoder the poster's pattern holds: the heads lose to mean "
                 "pooling on sentiment and similarity and beat it on paraphrase.")


def _reached(arms: dict, lines: dict) -> Gate:
    """Every arm's mean test score (per-run per-item scores) reached every reference line."""
    low = [f"{arm} {sum(map(sum, s)) / sum(map(len, s)):.3f} < {name} {value:.3f}"
           for arm, s in arms.items() for name, value in lines.items()
           if sum(map(sum, s)) / sum(map(len, s)) < value]
    return Gate(not low, "budget", "every arm reached the frozen lines" if not low else
                "below a frozen line: " + ", ".join(low))


_LINES = {"zero-shot": 0.5}


def _improved(best_steps: dict) -> Gate:
    """Fine-tuning moved every arm: in at least one run per arm stage 2 found weights better
    than stage 1's on validation. An arm none of whose runs got past step 0 was never
    fine-tuned (a rate too small or too large, a bug): comparing it would repeat the frozen
    comparison. A run that keeps its stage-1 weights while others of its arm improve is the
    recipe's own answer (validation preferred them) and counts as it is.
    best_steps: arm -> each run's best validation step (0 = the start of stage 2)."""
    moved = {arm: sum(step > 0 for step in steps) for arm, steps in best_steps.items()}
    said = ", ".join(f"{arm} {n} of {len(best_steps[arm])}" for arm, n in moved.items())
    stuck = [arm for arm, n in moved.items() if n == 0]
    return Gate(not stuck, "budget", f"runs that stage 2 improved on stage 1: {said}" if not stuck
                else "stage 2 found nothing better than stage 1 on validation in any "
                     + " or ".join(f"{arm} run" for arm in stuck))


_STEPS = {"heads": [30, 60], "mean pooling": [30, 90]}


@claim_rule(reproduced_by=dict(heads=_items(55), mean=_items(45), converged=[True] * 4,
                               lines=_LINES, best_steps=_STEPS),
            contradicted_by=dict(heads=_items(45), mean=_items(55), converged=[True] * 4,
                                 lines=_LINES, best_steps=_STEPS))
def finetuned_heads_beat_mean_pooling(*, heads, mean, converged, lines, best_steps):
    """Table 3 and the abstract: fine-tuned, one cross-attention layer read at [CLS] lifts
    paraphrase accuracy over mean pooling (0.551 -> 0.842, test). heads, mean: per-run per-item
    test scores; converged: one flag per run of both arms; lines: the frozen reference lines
    (name -> accuracy) each arm must reach before the comparison says anything; best_steps:
    arm -> each run's best stage-2 validation step (0: fine-tuning found nothing better)."""
    gates = [all_converged(converged, "fine-tuning runs"), _improved(best_steps),
             _reached({"heads": heads, "mean pooling": mean}, lines)]
    verdict = paired(heads, mean, ">", gates=gates)
    return verdict.says(
        reproduced="Fine-tuned, the poster's head beats mean pooling on paraphrase, paired over "
                   "the test pairs and the seeds.",
        contradicted="Fine-tuned, mean pooling beats the poster's head on paraphrase: the "
                     "encoder trained for mean pooling keeps its designed read-out ahead.",
        inconclusive="Fine-tuned, the poster's head and mean pooling are too close for these "
                     "seeds and test pairs to tell apart.",
        not_tested=f"Not tested at this budget: {verdict.detail.split(' (')[0]}.")


@claim_rule(reproduced_by=dict(cross=_items(55), heads=_items(45), converged=[True] * 4,
                               lines=_LINES, best_steps={"cross-encoder": [20, 40],
                                                         "heads": [30, 60]}),
            contradicted_by=dict(cross=_items(45), heads=_items(55), converged=[True] * 4,
                                 lines=_LINES, best_steps={"cross-encoder": [20, 40],
                                                           "heads": [30, 60]}))
def sentences_that_meet_beat_the_head(*, cross, heads, converged, lines, best_steps):
    """The lesson's control, not the poster's claim: a cross-encoder (A and B through the
    encoder together) against the poster's head (A's [CLS] reads B once, on top). Per-run
    per-item test scores (none: not run at this scale); the same gates as the fine-tuned
    comparison."""
    if not cross or not heads:  # a scale that does not run the control
        verdict = Verdict(NOT_TESTED, f"{len(cross)} cross-encoder and {len(heads)} head runs "
                          "at this scale", reason="budget", n=f"{len(cross)} vs {len(heads)}")
    else:
        verdict = paired(cross, heads, ">", gates=[
            all_converged(converged, "fine-tuning runs"), _improved(best_steps),
            _reached({"cross-encoder": cross, "heads": heads}, lines)])
    return verdict.says(
        reproduced="Letting the two sentences meet in every fine-tuned layer (the "
                   "cross-encoder) beats the poster's head, which lets them meet once, on top.",
        contradicted="The poster's head beats the cross-encoder: meeting once on top does more "
                     "here than meeting in every fine-tuned layer.",
        inconclusive="The cross-encoder and the poster's head are too close for these seeds and "
                     "test pairs to tell apart.",
        not_tested=f"Not tested at this budget: {verdict.detail.split(' (')[0]}.")


@claim_rule(reproduced_by=dict(paraphrase_u09=[[1] * 50 + [0] * 10] * 3,
                               paraphrase_default=[[1] * 50 + [0] * 10] * 3,
                               similarity_u09=[0.30, 0.32], similarity_default=[0.70, 0.71],
                               converged=[True] * 8),
            contradicted_by=dict(paraphrase_u09=_items(20), paraphrase_default=_items(55),
                                 similarity_u09=[0.70, 0.71], similarity_default=[0.30, 0.32],
                                 converged=[True] * 8))
def u09_as_good_on_paraphrase_worse_on_similarity(*, paraphrase_u09, paraphrase_default,
                                                  similarity_u09, similarity_default,
                                                  converged):
    """Table 3, frozen rows: U(0.9, 1) is about as good as the default init on paraphrase
    (0.429 vs 0.469: within the poster's own gap, 0.04) and much worse on STS (0.148 vs 0.251).
    Paraphrase: per-run per-item scores (equivalence within 0.04, paired); similarity: per-run
    Pearson r; converged: one flag per run of the four arms."""
    gate = [all_converged(converged, "frozen head runs")]
    para = paired_same(paraphrase_u09, paraphrase_default, 0.04, gates=gate)
    sim = compare(similarity_u09, similarity_default, "<", gates=gate)
    lower = estimate([sum(r) / len(r) for r in paraphrase_u09]).mean < \
        estimate([sum(r) / len(r) for r in paraphrase_default]).mean
    on_para = _words(para, "within 0.04 of the default init, as in the poster",
                     f"more than 0.04 {'below' if lower else 'above'} the default init",
                     "neither within 0.04 of the default init nor clearly outside it, at "
                     "this many runs")
    on_sim = _words(sim, "below the default init, as in the poster", "above the default init",
                    "the same as the default init within the noise")
    words = f"on paraphrase U(0.9, 1) scores {on_para}; on similarity it scores {on_sim}"

    return _says(combine(para, sim), words,
                 "U(0.9, 1) does as the poster found: as good as the default init on "
                 "paraphrase (within 0.04), worse on similarity.")


@claim_rule(reproduced_by=dict(entropy_u09=[0.99, 0.99, 0.98], entropy_default=[0.7, 0.72, 0.69],
                               log10_length_u09=[0.1, 0.2, -0.1]),
            contradicted_by=dict(entropy_u09=[0.99, 0.99, 0.99],
                                 entropy_default=[0.99, 0.99, 0.99],
                                 log10_length_u09=[3.1, 4.0, 5.2]))
def u09_starts_close_to_a_mean(*, entropy_u09, entropy_default, log10_length_u09):
    """Approach: U(0.9, 1) "makes the starting point of optimization close to taking a mean".
    Two parts, one value per (head configuration, seed) at initialisation: the attention is
    brought materially nearer uniform than the default init leaves it (entropy ratio higher by
    more than 0.05), and the head's output is within a factor of 10 of the mean-pooled vector's
    length (|log10 ratio| < 1)."""
    gain = [u - d for u, d in zip(entropy_u09, entropy_default)]
    weights, output = versus(gain, 0.05, ">"), within(log10_length_u09, -1.0, 1.0)
    size = estimate(log10_length_u09).mean
    attention = _words(weights, "nearer uniform than the default init",
                       "no nearer uniform than the default init leaves it",
                       "not clearly nearer uniform than the default init")
    length = _words(output, "of the size of the mean it reads",
                    f"about 10^{size:.0f} times the length of the mean it reads",
                    "not clearly of the mean's size")
    words = f"its first attention is {attention}; its output is {length}"

    return _says(combine(weights, output), f"at the start of training the U(0.9, 1) head: {words}",
                 "U(0.9, 1) starts the head close to a mean: nearer uniform attention than the "
                 "default init, and an output of the mean's size.")


@claim_rule(reproduced_by=dict(frozen=[1.10, 1.12, 1.11], finetuned=[1.10, 1.11, 1.10]),
            contradicted_by=dict(frozen=[1.01, 1.00, 1.02], finetuned=[1.00, 1.01, 1.00]))
def heads_add_7_to_16_percent(*, frozen, finetuned):
    """Discussion: "both experiments #1 and #2's training times increase between 7% and 16%".
    Measured as the ratio of training-step times, heads over mean pooling, one value per
    timing round, frozen and fine-tuned: each must lie in [1.07, 1.16]."""
    parts, words = [], []
    for setting, ratios in (("frozen", frozen), ("fine-tuned", finetuned)):
        part = within(ratios, 1.07, 1.16)
        mean = estimate(ratios).mean
        outside = f"{'below 7' if mean < 1.07 else 'above 16'} % ({100 * (mean - 1):+.0f} %)"
        parts.append(part)
        said = _words(part, "between 7 and 16 %", outside,
                      f"{100 * (mean - 1):+.0f} %, too noisy to place")
        words.append(f"{setting}, the head adds {said}")
    return _says(combine(*parts), "; ".join(words),
                 "The poster's head adds 7-16 % to a training step, frozen and fine-tuned.")


@claim_rule(reproduced_by=dict(frozen=[1.10, 1.12, 1.11], finetuned=[1.03, 1.02, 1.03]),
            contradicted_by=dict(frozen=[1.02, 1.03, 1.02], finetuned=[1.10, 1.12, 1.11]))
def overhead_larger_over_frozen_encoder(*, frozen, finetuned):
    """Table 3: the heads' time ratio is larger frozen (1.159, 1.131) than fine-tuned (1.096,
    1.075). Ratios of training-step times, one per timing round."""
    return compare(frozen, finetuned, ">").says(
        reproduced="A head's time overhead is larger over a frozen encoder than over a "
                   "fine-tuned one, as counting predicts: the frozen step has no backward pass "
                   "through the encoder.",
        contradicted="A head's time overhead is smaller over a frozen encoder than over a "
                     "fine-tuned one, against the count.",
        inconclusive="The timing rounds cannot tell the frozen overhead from the fine-tuned one.",
        not_tested="The training steps were not timed.")


@claim_rule(reproduced_by=dict(top=[[0.3, 0.2, 0.4, 0.1] * 5] * 2,
                               random=[[0.05, 0.1, 0.0, 0.02] * 5, [0.04, 0.1, 0.01, 0.03] * 5]),
            contradicted_by=dict(top=[[0.05, 0.1, 0.0, 0.02] * 5, [0.04, 0.1, 0.01, 0.03] * 5],
                                 random=[[0.3, 0.2, 0.4, 0.1] * 5] * 2))
def head_weights_tokens_that_matter(*, top, random):
    """The lesson's check of an attention map (not a poster claim): removing the token the head
    weighs most moves a model that never saw the head's weights (mean pooling, fine-tuned on
    the same task, given the same deletions) more than removing a random other token.
    top, random: per-run per-item |change in the probability|."""
    return paired(top, random, ">").says(
        reproduced="The token the head weighs most matters beyond the head: removing it moves "
                   "a mean-pooling model, which never saw the head's weights, more than "
                   "removing a random token.",
        contradicted="The token the head weighs most matters less than a random one to a model "
                     "that ignores the head: its map points away from what the task needs.",
        inconclusive="For a model that ignores the head, the head's favourite token and a "
                     "random one cannot be told apart: the map's effect on the head may be the "
                     "arithmetic of weighting alone.",
        not_tested="The intervention was not run.")


__all__ = ["paired_same", "frozen_heads_vs_mean_pooling", "finetuned_heads_beat_mean_pooling",
           "sentences_that_meet_beat_the_head", "u09_as_good_on_paraphrase_worse_on_similarity",
           "u09_starts_close_to_a_mean", "heads_add_7_to_16_percent",
           "overhead_larger_over_frozen_encoder", "head_weights_tokens_that_matter"]
