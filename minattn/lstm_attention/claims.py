"""The paper claims lesson 05 tests, each decided from its raw numbers by the course's rule.

From Snell et al., "Approximating How Single Head Attention Learns" (2021): copying permutations
(§3.3, Fig. 3, appendix A.3), the two stages of training (§1, §2.2, §3.2, Fig. 1) and the
multi-head study (§5.2, Fig. 6). Each function takes what the lesson measured and returns a
`Verdict` with its finding in words; tests/test_claims.py feeds every one of them numbers
that contradict it.
"""

from __future__ import annotations

from ..course.claims import claim_rule
from ..course.verdict import (
    NOT_TESTED,
    Verdict,
    compare,
    compare_rates,
    converged,
    rate_versus,
    sometimes,
    versus,
)

# "Every time" cannot be measured; a rate above this line can. Ten of ten runs put the exact
# 95 % lower bound at 0.69, eight of eight at 0.63: the most a handful of runs can say.
EVERY_TIME_LINE = 0.6


@claim_rule(reproduced_by=dict(learned=10, runs=10, line=EVERY_TIME_LINE),
            contradicted_by=dict(learned=2, runs=10, line=EVERY_TIME_LINE))
def control_learns_every_time(*, learned, runs, line):
    """40-of-60 copying learns every time (§3.3): measured as the share of runs that learned
    within the budget, whose exact 95 % interval must lie above `line`."""
    return rate_versus(learned, runs, line, ">").says(
        reproduced=f"The 40-of-60 control learned in {learned} of {runs} runs: its success rate is "
                   f"above {line:g} with 95 % confidence, as close to 'every time' as {runs} runs "
                   "can get.",
        contradicted=f"The 40-of-60 control failed often: its success rate is below {line:g}.",
        inconclusive=f"The 40-of-60 control learned in {learned} of {runs} runs: too few "
                     f"successes to put its rate above {line:g}.",
        not_tested="The 40-of-60 runs were not made.")


@claim_rule(reproduced_by=dict(learned=[True] * 5 + [False] * 7),
            contradicted_by=dict(learned=[True] * 40))
def flat_table_sometimes_fails(*, learned):
    """40-of-40 copying sometimes fails and sometimes learns within the authors' budget (§3.3,
    §5.2): one flag per run, learned within the budget."""
    k, n = sum(not x for x in learned), len(learned)
    return sometimes(k, n).says(
        reproduced=f"Within the authors' budget 40-of-40 copying fails in some runs and learns "
                   f"in others ({k} of {n} runs failed).",
        contradicted="40-of-40 copying behaved the same in (nearly) every run within the "
                     "authors' budget.",
        inconclusive="Every run behaved alike within the authors' budget, but too few runs were "
                     "made to rule out the other outcome.",
        not_tested="The 40-of-40 runs were not made.")


@claim_rule(reproduced_by=dict(learned_long=[True] * 8 + [False] * 4, climbing=[False] * 12),
            contradicted_by=dict(learned_long=[True] * 40, climbing=[False] * 40))
def flat_table_failures_persist(*, learned_long, climbing):
    """The 40-of-40 failures are 'never', not 'late' (§3.3: the learning of attention fails):
    given a longer budget, some runs still have not learned, and they are flat, not climbing.
    One flag per run: learned within the long budget; still climbing when it ended (then 'late'
    and 'never' cannot be told apart: not tested)."""
    k, n = sum(not x for x in learned_long), len(learned_long)
    gate = converged([not c for c in climbing], "runs settled (learned, or flat over the last "
                                                "evaluations)")
    return sometimes(k, n, gates=[gate]).says(
        reproduced=f"The failures persist: {k} of {n} runs were still flat near the no-attention "
                   "ceiling at the end of the longer budget, the rest learned.",
        contradicted="Given a longer budget every run learned: the failures were only late.",
        inconclusive="Every run ended alike under the longer budget, but too few runs were made "
                     "to rule out the other outcome.",
        not_tested="Runs that had not learned were still climbing when the longer budget ended: "
                   "at this budget 'late' cannot be told from 'never'.")


@claim_rule(reproduced_by=dict(steps_flat=[160, 150, 420, 250, 420, 190],
                               steps_control=[100, 110, 100, 90, 110, 100]),
            contradicted_by=dict(steps_flat=[60, 70, 60, 50, 70, 60],
                                 steps_control=[100, 110, 100, 90, 110, 100]))
def flat_table_learns_later(*, steps_flat, steps_control):
    """Without co-occurrence signal learning comes later (§3.3, Fig. 3): the step at which each
    40-of-40 run learned exceeds 40-of-60's. A run that never learned counts as learning at the
    evaluation after its budget, a lower bound, so the comparison can only be harder."""
    return compare(steps_flat, steps_control, ">").says(
        reproduced="40-of-40 learns later than 40-of-60 (or not at all): the flat count table "
                   "costs the model its head start.",
        contradicted="40-of-40 learns earlier than 40-of-60.",
        inconclusive="These seeds cannot tell when 40-of-40 learns from when 40-of-60 does.",
        not_tested="The copy runs were not made.")


@claim_rule(reproduced_by=dict(steps_mixture=[420, 420, 380, 420], steps_control=[100, 110, 90],
                               learned_the_words=[True] * 4),
            contradicted_by=dict(steps_mixture=[60, 70, 50, 60], steps_control=[100, 110, 90],
                                 learned_the_words=[True] * 4))
def two_sets_learns_later(*, steps_mixture, steps_control, learned_the_words):
    """A mixture of permutations of two disjoint sets of 40 words is learned later than 40-of-60,
    like 40-of-40 (§3.3, Fig. 3 right; appendix A.3). Gated: every mixture run must first
    learn which words to write (reach the no-attention ceiling); a run that never did failed at
    something other than attention."""
    gate = converged(learned_the_words, "mixture runs that reached the no-attention ceiling")
    return compare(steps_mixture, steps_control, ">", gates=[gate]).says(
        reproduced="The two-set mixture is learned later than 40-of-60, as 40-of-40 is: inside "
                   "each set its count table is flat.",
        contradicted="The two-set mixture is learned earlier than 40-of-60.",
        inconclusive="These seeds cannot tell when the mixture learns from when 40-of-60 does.",
        not_tested="Within the budget the mixture runs did not even learn which words remain to "
                   "be written: their stall says nothing yet about attention.")


@claim_rule(reproduced_by=dict(attention_after_probe=[30, 20, 40, 10, 30]),
            contradicted_by=dict(attention_after_probe=[-30, -20, -40, -10, -30]))
def probe_rises_before_attention(*, attention_after_probe):
    """KTIW is learned before attention (§1, §2.2, Fig. 1): in each run, the step at which the
    attention's top position first holds the right word for half the outputs, minus the step at
    which the probe's does (runs where either crosses)."""
    return versus(attention_after_probe, 0.0, ">").says(
        reproduced="In run after run the probe finds the right word before the attention does: "
                   "word-level knowledge comes first, attention follows it.",
        contradicted="The attention finds the right word before the probe does: attention leads, "
                     "word-level knowledge follows.",
        inconclusive="These runs cannot tell whether the probe or the attention comes first.",
        not_tested="No run's probe or attention reached the right word.")


@claim_rule(reproduced_by=dict(probe_control=[0.95, 0.9, 0.97], probe_flat=[0.1, 0.08, 0.12]),
            contradicted_by=dict(probe_control=[0.1, 0.08, 0.12], probe_flat=[0.95, 0.9, 0.97]))
def uniform_probe_needs_cooccurrence(*, probe_control, probe_flat):
    """Under frozen uniform attention KTIW is learned from co-occurrence (§3.2), which 40-of-40
    does not offer (§3.3): the probe's share of right words at the end of training is higher on
    40-of-60 than on 40-of-40. One value per seed."""
    return compare(probe_control, probe_flat, ">").says(
        reproduced="With attention frozen uniform, the probe learns which input word to copy on "
                   "40-of-60 and far less on 40-of-40: co-occurrence is what teaches it.",
        contradicted="With attention frozen uniform, the probe learns as much or more on 40-of-40 "
                     "as on 40-of-60: co-occurrence is not what teaches it.",
        inconclusive="These seeds cannot tell the two probes apart.",
        not_tested="The frozen-uniform runs were not made.")


@claim_rule(reproduced_by=dict(bad=[0, 4], one_good=[4, 4], heads_found=True),
            contradicted_by=dict(bad=[4, 4], one_good=[0, 4], heads_found=True))
def one_good_head_rescues(*, bad, one_good, heads_found):
    """Multi-head attention on one base network (§5.2, Fig. 6): all-bad combinations fail, one
    good head among bad ones converges. Each arm is [converged, combinations]; Fisher's exact
    test (with four combinations per arm it can call a difference only at 4 of 4 against 0 of
    4). heads_found: the rejection sampling found the heads both scenarios need (if not, the
    arms are empty and the claim is not tested)."""
    if heads_found:
        verdict = compare_rates(*one_good, *bad, ">")
    else:
        verdict = Verdict(NOT_TESTED, "the rejection sampling did not find enough good and bad "
                          "heads within its budget of candidates", reason="budget", n="0")
    return verdict.says(
        reproduced="One good head among bad ones converges more often than all-bad heads on the "
                   "same base network: the good head's starting attention carries the model.",
        contradicted="All-bad heads converged more often than combinations with a good head.",
        inconclusive="Too few combinations, or too small a difference, to tell one good head "
                     "among bad ones from all-bad heads.",
        not_tested="Too few good or bad heads were found to build the scenarios.")


@claim_rule(reproduced_by=dict(bad=[0, 8], random=[7, 8]),
            contradicted_by=dict(bad=[8, 8], random=[0, 8]))
def random_heads_converge(*, bad, random):
    """Multi-head attention on one base network (§5.2, Fig. 6): heads drawn at random converge
    with high probability, more often than all-bad heads. Each arm is [converged, combinations];
    Fisher's exact test."""
    return compare_rates(*random, *bad, ">").says(
        reproduced="Heads drawn at random converge more often than all-bad heads: with several "
                   "independent draws, one good starting attention is likely among them.",
        contradicted="All-bad heads converged more often than heads drawn at random.",
        inconclusive="Too few combinations, or too small a difference, to tell random heads "
                     "from all-bad heads.",
        not_tested="Too few bad heads were found to build the all-bad scenario.")
