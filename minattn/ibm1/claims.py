"""The paper claims lesson 06 tests, each decided from its raw numbers by the course's rule.

From Snell et al., "Approximating How Single Head Attention Learns" (2021): the bag-of-words
proxy (§4.1, eq. 15) and the count tables of the copying tasks (Fig. 4, §3.3). Each function
takes what the lesson measured and returns a `Verdict` with its finding in words;
tests/test_claims.py feeds every one of them numbers that contradict it.
"""

from __future__ import annotations

from ..course.claims import claim_rule
from ..course.verdict import combine, compare, same


@claim_rule(reproduced_by=dict(r_small_d=[0.5, 0.55, 0.52], r_large_d=[0.999, 0.998, 0.999],
                               small_d=4, large_d=4096),
            contradicted_by=dict(r_small_d=[0.5, 0.55, 0.52], r_large_d=[0.2, 0.25, 0.22],
                                 small_d=4, large_d=4096))
def proxy_rate_tends_to_counts(*, r_small_d, r_large_d, small_d, large_d):
    """Eq. 15: as d grows, the proxy's logit rate at initialisation tends to
    2(C(x, y) - mean_y C(x, y)). Measured as the correlation r between the two over all (x, y),
    one value per initialisation, at the smallest and the largest d: r grows with d, and at the
    largest d it is within 0.01 of 1."""
    verdict = combine(compare(r_large_d, r_small_d, ">"), same(r_large_d, 1.0, tolerance=0.01))
    return verdict.says(
        reproduced=f"The proxy's first step follows the count table: the correlation grows from "
                   f"d = {small_d} to d = {large_d} and ends within 0.01 of 1.",
        partly="The correlation moves towards the count table's prediction, but one of the two "
               "parts (growth with d, or reaching 1 within 0.01) is not shown by these seeds.",
        contradicted=f"At d = {large_d} the proxy's first step does not follow the count "
                     "table: the correlation is significantly below what eq. 15 predicts.",
        inconclusive="These initialisations cannot tell whether the correlation tends to 1.",
        not_tested="The correlation was not measured in a setting that can show the limit.")


@claim_rule(reproduced_by=dict(table_ratio=1.0, rate_diagonal=0.0, rate_off=0.0),
            contradicted_by=dict(table_ratio=1.4, rate_diagonal=3.0, rate_off=-1.0))
def flat_table_gives_no_signal(*, table_ratio, rate_diagonal, rate_off):
    """40-of-40 copying: the count table is flat (diagonal/off-diagonal ratio exactly 1), so
    the predicted proxy rate is the same on and off the diagonal. Exact quantities."""
    verdict = combine(same(table_ratio, 1.0, tolerance=1e-9),
                      same(rate_diagonal, rate_off, tolerance=1e-9))
    return verdict.says(
        reproduced="On 40-of-40 the count table is flat and the predicted rate is the same for "
                   "every (x, y): the proxy has nothing to learn which word copies which.",
        partly="The table or the predicted rate is not flat on 40-of-40.",
        contradicted="The 40-of-40 table is not flat: the proxy would get a signal after all.",
        inconclusive="(exact quantities are never inconclusive)",
        not_tested="The 40-of-40 table was not built.")


@claim_rule(reproduced_by=dict(rate_diagonal=[5.1, 5.3, 4.9], rate_off=[-0.1, 0.05, 0.0]),
            contradicted_by=dict(rate_diagonal=[-0.1, 0.05, 0.0], rate_off=[5.1, 5.3, 4.9]))
def structured_table_favours_copying(*, rate_diagonal, rate_off):
    """40-of-60 control: the count table favours x -> x, so the proxy's measured logit rate at
    initialisation is larger on the diagonal than off it (one value per initialisation)."""
    return compare(rate_diagonal, rate_off, ">").says(
        reproduced="On 40-of-60 the proxy's copy logits x -> x start moving faster than the "
                   "rest: the count table gives the diagonal a head start.",
        contradicted="On 40-of-60 the diagonal moves slower than the rest: the count table's "
                     "head start is not there.",
        inconclusive="These initialisations cannot tell the diagonal's rate from the rest.",
        not_tested="The 40-of-60 rates were not measured.")
