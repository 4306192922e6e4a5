"""The paper claims lesson 08 tests, each decided from its raw numbers by the course's rule.

From Snell et al., "Approximating How Single Head Attention Learns" (2021): where a classifier
with frozen uniform attention keeps a keyword's evidence (§6.1, eqs. 23-24, Fig. 7), and the
agreement of attention with lexical probes on real data (§3.2, Table 2). Each function takes
what the lesson measured and returns a `Verdict` with its finding in words;
tests/test_claims.py feeds every one of them numbers that contradict it.
"""

from __future__ import annotations

from ..course.claims import claim_rule
from ..course.verdict import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTED,
    REPRODUCED,
    Gate,
    combine,
    compare,
    converged,
    versus,
)


@claim_rule(reproduced_by=dict(z_keyword=[2.1, 2.4, 2.2], z_next=[0.9, 1.1, 1.0]),
            contradicted_by=dict(z_keyword=[-1.5, -1.4, -1.6], z_next=[-0.9, -1.1, -1.0]))
def keyword_evidence_starts_local(*, z_keyword, z_next):
    """Keyword task, frozen uniform attention, early in training (eq. 23): the standardised
    log-odds of attending to the keyword alone beats the next position's, which beats uniform
    attention's (0 after standardising). One value per seed."""
    verdict = combine(compare(z_keyword, z_next, ">"), versus(z_next, 0.0, ">"))
    return verdict.says(
        reproduced="Early in training the evidence sits where the probe assumes it: the keyword's "
                   "own state says most, its right neighbour less, both more than the average "
                   "state.",
        partly="Early in training the evidence is partly local: of 'keyword above its neighbour' "
               "and 'neighbour above the average', only one is shown by these seeds.",
        contradicted="Early in training the keyword's own state does not lead: the evidence is "
                     "not local even at the start.",
        inconclusive="These seeds cannot tell whether the keyword's state leads early on.",
        not_tested="The early phase was not measured.")


@claim_rule(reproduced_by=dict(ends_top=[0.9, 0.8, 0.95], keyword_top=[0.05, 0.1, 0.02],
                               z_last=[3.1, 2.9, 3.3], z_keyword=[0.5, 0.7, 0.6]),
            contradicted_by=dict(ends_top=[0.05, 0.1, 0.02], keyword_top=[0.9, 0.8, 0.95],
                                 z_last=[0.5, 0.7, 0.6], z_keyword=[3.1, 2.9, 3.3]))
def keyword_evidence_moves_to_the_end(*, ends_top, keyword_top, z_last, z_keyword):
    """Keyword task, frozen uniform attention, trained long (eq. 24): the position with the
    largest log-odds is an end of the sequence more often than the keyword, and the last
    position's standardised log-odds beats the keyword's. One value per seed."""
    verdict = combine(compare(ends_top, keyword_top, ">"), compare(z_last, z_keyword, ">"))
    return verdict.says(
        reproduced="Trained long under uniform attention, the evidence leaves the keyword: an end "
                   "of the sequence leads in more sequences than the keyword, and the last "
                   "state's log-odds beats the keyword's.",
        partly="Trained long, the evidence leaves the keyword for an end of the sequence, but "
               "only one of the two parts (an end leads more often; the last state beats the "
               "keyword's) is shown: in a bidirectional LSTM the first state competes with "
               "the last.",
        contradicted="Trained long, the keyword's own state still leads: the evidence stayed "
                     "local.",
        inconclusive="These seeds cannot tell where the evidence sits after long training.",
        not_tested="The long-training phase was not measured.")


def _reproducible_attention(curve_max, a_rand):
    """Gate: for every gold, the re-seeded standard runs' attention agrees with it at least
    twice as often as chance at some checkpoint (the paper's rows, through their ξ, have it at
    three times chance or more). Below that, a gold's attention depends on the seed so much that
    no probe's agreement with it reads."""
    lowest = min(curve_max) if isinstance(curve_max, (list, tuple)) else curve_max
    return Gate(lowest > 2 * a_rand, "floor",
                f"the re-seeded runs' best agreement with the gold is {lowest:.3g} for the least "
                f"reproduced gold, against twice chance {2 * a_rand:.3g}")


def _golds_converged(flags):
    """Gate: the paper's gold is a model trained "till convergence" (§3.1): each gold's
    performance had stopped rising when training ended (see the lesson's test)."""
    return converged(flags, "golds whose performance had stopped rising")


def _xi_can_beat(p_best, p_uniform):
    """Gate: ξ can never exceed the standard runs' best performance P*, so it can beat the
    frozen-uniform model's performance only where P* does."""
    best = sum(p_best) / len(p_best) if isinstance(p_best, (list, tuple)) else p_best
    return Gate(best > p_uniform, "ceiling",
                f"the standard models' best performance {best:.4g} against the frozen-uniform "
                f"model's {p_uniform:.4g}: ξ, at most the former, cannot beat the latter")


@claim_rule(reproduced_by=dict(a_uf=[30.0, 28.0, 33.0], a_rand=7.0, xi_uf=[50.0, 48.0, 53.0],
                               p_best=[60.0, 61.0, 59.0], p_uniform=35.0,
                               curve_max=[45.0, 50.0, 48.0], gold_converged=[True] * 3),
            contradicted_by=dict(a_uf=[3.0, 4.0, 2.0], a_rand=7.0, xi_uf=[20.0, 22.0, 18.0],
                                 p_best=[60.0, 61.0, 59.0], p_uniform=35.0,
                                 curve_max=[45.0, 50.0, 48.0], gold_converged=[True] * 3))
def uniform_probe_agrees_with_attention(*, a_uf, a_rand, xi_uf, p_best, p_uniform, curve_max,
                                        gold_converged):
    """Table 2, §3.2: the probe of a model trained with frozen uniform attention agrees with a
    standard model's attention above the random baseline (A(α, β^uf) > Â), and its
    contextualised agreement ξ(α, β^uf) beats what no attention at all achieves: the frozen-
    uniform model's own best performance. Per choice of gold, in %; gated on attention that
    other seeds reproduce, on golds trained until their performance stopped rising (the paper:
    "till convergence"), and (for ξ) on standard models that beat the frozen-uniform one."""
    gates = [_golds_converged(gold_converged), _reproducible_attention(curve_max, a_rand)]
    agree = versus(a_uf, a_rand, ">", gates=gates)
    xi = versus(xi_uf, p_uniform, ">", gates=gates + [_xi_can_beat(p_best, p_uniform)])
    verdict = combine(agree, xi)
    xi_part = {CONTRADICTED: "falls below", INCONCLUSIVE: "cannot be told from",
               NOT_TESTED: "could not be compared with"}
    if agree.verdict == REPRODUCED:
        partly = ("The frozen-uniform model's probe points at the gold attention's word far above "
                  f"chance, but its contextualised agreement {xi_part.get(xi.verdict, 'misses')} "
                  "the frozen-uniform model's own best performance: the agreement is real, the "
                  "performance it would buy is not shown.")
    else:
        partly = ("The frozen-uniform model's contextualised agreement beats its own best "
                  "performance, but its probe's agreement with the attention is not shown above "
                  "chance.")
    return verdict.says(
        reproduced="A model that never learned where to look still knows which input word "
                   "matters: its probe points at the gold attention's word far above chance, as "
                   "well as the attention of a standard model that already beats the "
                   "no-attention model.",
        partly=partly,
        contradicted="The frozen-uniform model's probe does not point at the gold attention's "
                     "word more than chance would, and agrees with it only as much as an "
                     "attention that has not beaten the no-attention model.",
        inconclusive="These golds cannot tell whether the frozen-uniform probe agrees with the "
                     "attention beyond chance (and, where it can be tested, beyond the "
                     "no-attention model).",
        not_tested="This row cannot decide: the golds were still improving when training "
                   "stopped, or standard models of other seeds agree with the gold's attention "
                   "hardly more than chance, so no agreement with it can be read.")


@claim_rule(reproduced_by=dict(a_beta=[45.0, 48.0, 50.0], a_uf=[30.0, 28.0, 33.0], a_rand=7.0,
                               curve_max=[45.0, 50.0, 48.0], gold_converged=[True] * 3),
            contradicted_by=dict(a_beta=[20.0, 18.0, 22.0], a_uf=[30.0, 28.0, 33.0], a_rand=7.0,
                                 curve_max=[45.0, 50.0, 48.0], gold_converged=[True] * 3))
def standard_probe_agrees_more(*, a_beta, a_uf, a_rand, curve_max, gold_converged):
    """Table 2: a standard model's probe (another seed) agrees with the gold attention more than
    the frozen-uniform model's probe, A(α, β) > A(α, β^uf). Per choice of gold, in %; gated on
    attention that other seeds reproduce and on golds trained until they stopped improving."""
    verdict = compare(a_beta, a_uf, ">", gates=[_golds_converged(gold_converged),
                                                _reproducible_attention(curve_max, a_rand)])
    return verdict.says(
        reproduced="A standard model's probe agrees with the attention more than the "
                   "frozen-uniform model's: learning to attend sharpens the word-level knowledge "
                   "that attention follows.",
        contradicted="The frozen-uniform model's probe agrees with the attention more than a "
                     "standard model's probe does.",
        inconclusive="These golds cannot tell the two probes' agreements apart.",
        not_tested="This row cannot decide: the golds were still improving when training "
                   "stopped, or standard models of other seeds agree with the gold's attention "
                   "hardly more than chance, so no probe's agreement with it can be read.")
