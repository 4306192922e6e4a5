"""The paper claims lesson 01 tests, each decided from its raw numbers by the course's rule.

From Vaswani et al., "Attention Is All You Need" (2017: §3.2.1 the 1/√d scaling and additive
attention, §3.5 positions, Table 1 path lengths, Table 3 row E learned positions) and Dao et al.,
"FlashAttention" (2022: exact attention in O(N) extra memory; its backward's row sum, which
FlashAttention-2, Dao 2023, Alg. 2, computes once before the loop). Each function takes what the
lesson measured and returns a `Verdict` with its finding in words; tests/test_claims.py feeds
every one of them numbers that contradict it.
"""

from __future__ import annotations

import math

import numpy as np

from ..course.claims import claim_rule
from ..course.verdict import combine, compare, converged, same, versus

NEARLY = 1.25  # "nearly as well": within this factor of the steps, either way


# ---------------------------------------------------------------------------- why √d (§3.2.1)
@claim_rule(reproduced_by=dict(variances=[63.8, 64.3, 64.1, 63.9], d=64),
            contradicted_by=dict(variances=[128.2, 127.5, 128.9, 128.4], d=64))
def dot_product_variance_is_d(*, variances, d):
    """q·k of d independent unit-variance pairs has variance d: the variance measured on
    independent batches of random pairs (one value per batch) equals d within 2 %."""
    return same(variances, float(d), tolerance=0.02 * d).says(
        reproduced=f"The variance of q·k at d = {d} is d to within 2 %: dividing by √d brings "
                   "the scores back to unit variance.",
        contradicted=f"The variance of q·k at d = {d} is not d: it is more than 2 % away.",
        inconclusive=f"These batches cannot pin the variance at d = {d} to within 2 %.",
        not_tested="The variance was not measured.")


@claim_rule(reproduced_by=dict(median_unscaled=[1e-9, 3e-9, 2e-9],
                               median_scaled=[0.30, 0.31, 0.29],
                               share_silent_unscaled=[0.90, 0.92, 0.91], d=2048),
            contradicted_by=dict(median_unscaled=[0.50, 0.52, 0.51],
                                 median_scaled=[0.30, 0.31, 0.29],
                                 share_silent_unscaled=[0.10, 0.12, 0.11], d=2048))
def unscaled_softmax_saturates(*, median_unscaled, median_scaled, share_silent_unscaled, d):
    """Without 1/√d, large d pushes the softmax into regions of extremely small gradients. Per
    seed of random queries and keys at dimension d: the median row's Jacobian norm
    ‖∂softmax/∂scores‖ is smaller unscaled than scaled, and most unscaled rows (more than half)
    have a Jacobian norm below 1e-3."""
    verdict = combine(compare(median_unscaled, median_scaled, "<"),
                      versus(share_silent_unscaled, 0.5, ">"))
    return verdict.says(
        reproduced=f"At d = {d}, unscaled scores saturate the softmax: the typical row passes "
                   "back far less gradient than with 1/√d, and most rows fall below 1e-3.",
        partly=f"At d = {d} only one of the two parts holds: the median unscaled row is not "
               "smaller than the scaled one, or not most rows are below 1e-3.",
        contradicted=f"At d = {d} the unscaled softmax is not saturated: its typical row passes "
                     "back as much gradient as the scaled one.",
        inconclusive=f"These seeds cannot tell whether the unscaled softmax saturates at d = {d}.",
        not_tested="The softmax Jacobians were not measured.")


# ----------------------------------------------------------------------------- positions (§3.5)
@claim_rule(reproduced_by=dict(max_error=3e-16), contradicted_by=dict(max_error=0.3))
def sinusoid_shift_is_linear(*, max_error):
    """PE(p + k) is a linear function of PE(p): one rotation matrix maps every row of the table
    to the row k further on (the largest difference is rounding, below 1e-12)."""
    return same(max_error, 0.0, tolerance=1e-12).says(
        reproduced="One rotation matrix maps every position's sinusoids to those of the "
                   "position k further on: a shift is a linear map.",
        contradicted="No rotation maps PE(p) onto PE(p + k) here: the shift is not linear.",
        inconclusive="(an exact quantity is never inconclusive)",
        not_tested="The table was not built.")


@claim_rule(reproduced_by=dict(acc_sinusoid=[1.0, 0.999, 1.0], acc_none=[0.066, 0.068, 0.067],
                               order_blind=1 / 15),
            contradicted_by=dict(acc_sinusoid=[0.066, 0.068, 0.067], acc_none=[1.0, 0.999, 1.0],
                                 order_blind=1 / 15))
def positions_needed_for_order(*, acc_sinusoid, acc_none, order_blind):
    """Attention needs positions injected to use order. On reversal (one value per seed): with
    sinusoids the accuracy is higher than without, and without positions it sits on the
    order-blind line 1/(N-1) (within 0.01)."""
    verdict = combine(compare(acc_sinusoid, acc_none, ">"),
                      same(acc_none, order_blind, tolerance=0.01))
    return verdict.says(
        reproduced="Without positions the model sits on the order-blind line; with the "
                   "sinusoids added it reverses the sequence: order must be injected.",
        partly="Only one part holds: the sinusoids do not beat the model without positions, "
               "or that model is not on the order-blind line.",
        contradicted="The model without positions is off the order-blind line and the "
                     "sinusoids do not help: this run does not show that order must be injected.",
        inconclusive="These seeds cannot separate the models with and without positions.",
        not_tested="The reversal models were not trained.")


@claim_rule(reproduced_by=dict(steps_learned=[80, 85, 75, 80], steps_sinusoid=[80, 80, 75, 85],
                               target=0.99, budget=200),
            contradicted_by=dict(steps_learned=[125, 130, 120, 125],
                                 steps_sinusoid=[80, 80, 75, 85], target=0.99, budget=200))
def learned_positions_match_sinusoids(*, steps_learned, steps_sinusoid, target, budget):
    """Learned positional embeddings do nearly as well as sinusoids (the paper: BLEU 25.7 vs
    25.8). Both end at the ceiling on reversal, so the comparison is the number of training
    steps each run needs to reach `target` held-out accuracy (None: not within `budget`), on a
    log scale: 'nearly as well' is within a factor NEARLY (1.25) either way."""
    runs = list(steps_learned) + list(steps_sinusoid)
    gate = converged([s is not None for s in runs], f"runs reached {target:g} within {budget}")

    def log_steps(steps):  # a run that never got there counts as the budget (it is gated)
        return [math.log2(budget if s is None else s) for s in steps]

    verdict = same(log_steps(steps_learned), log_steps(steps_sinusoid),
                   tolerance=math.log2(NEARLY), gates=[gate])
    ratio = (np.mean([budget if s is None else s for s in steps_learned])
             / np.mean([budget if s is None else s for s in steps_sinusoid]))
    return verdict.says(
        reproduced=f"Learned positions reach {target:g} in about as many steps as sinusoids "
                   f"({ratio:.2f}×, within {NEARLY}×): on reversal they do as well.",
        contradicted=f"Learned positions reach {target:g} too, but need {ratio:.2f}× the "
                     f"sinusoids' steps (beyond {NEARLY}× either way): both end at the ceiling, "
                     "at different speeds.",
        inconclusive=f"These seeds cannot tell whether learned positions reach {target:g} "
                     f"within {NEARLY}× of the sinusoids' steps.",
        not_tested=f"Not every run reached {target:g} within {budget} steps, so their speeds "
                   "cannot be compared.")


# ------------------------------------------------------------------ content lookup (the lesson's)
@claim_rule(reproduced_by=dict(acc_attention=[1.0, 1.0, 0.999], acc_pooling=[0.118, 0.12, 0.121],
                               floor=0.122),
            contradicted_by=dict(acc_attention=[0.30, 0.31, 0.29], acc_pooling=[0.5, 0.52, 0.51],
                                 floor=0.122))
def attention_solves_recall(*, acc_attention, acc_pooling, floor):
    """Associative recall needs content lookup: one attention head answers above 0.99, and a
    model that sees only the mean of the pairs ends at the most-frequent-value floor (within
    0.02): all a model blind to which value sat with which key can reach."""
    verdict = combine(versus(acc_attention, 0.99, ">"), same(acc_pooling, floor, tolerance=0.02))
    return verdict.says(
        reproduced="One attention head finds the pair whose key matches and answers above "
                   "0.99; the mean-pooling model ends at the most-frequent-value floor.",
        partly="Only one part holds: the attention model is not above 0.99, or the pooling "
               "model is not at the most-frequent-value floor.",
        contradicted="The attention model stays below 0.99 and the pooling model is off the "
                     "floor: this run does not show lookup by content.",
        inconclusive="These seeds cannot decide whether attention solves recall.",
        not_tested="The recall models were not trained.")


# -------------------------------------------------------------- the two halves of FlashAttention
@claim_rule(reproduced_by=dict(max_error=4e-16), contradicted_by=dict(max_error=0.02))
def backward_row_sum_needs_only_output(*, max_error):
    """rowsum(dP ⊙ P) = rowsum(dO ⊙ O): the backward's row sum needs only the output and its
    gradient (float64 rounding, below 1e-12)."""
    return same(max_error, 0.0, tolerance=1e-12).says(
        reproduced="The backward's row sum equals rowsum(dO ⊙ O): it needs only the output and "
                   "its gradient, never a row of P.",
        contradicted="rowsum(dP ⊙ P) and rowsum(dO ⊙ O) differ: the identity fails here.",
        inconclusive="(an exact quantity is never inconclusive)",
        not_tested="The row sums were not computed.")


@claim_rule(reproduced_by=dict(max_error=4e-16), contradicted_by=dict(max_error=0.02))
def online_softmax_is_exact(*, max_error):
    """Attention computed block by block with a running max and sum (the online softmax) equals
    attention computed whole: float64 rounding, below 1e-12 — exact, not an approximation."""
    return same(max_error, 0.0, tolerance=1e-12).says(
        reproduced="Block by block, with a running max and sum, attention comes out exactly "
                   "as computed whole: the fused kernel's forward is exact.",
        contradicted="The blocked computation differs from attention computed whole.",
        inconclusive="(an exact quantity is never inconclusive)",
        not_tested="The blocked computation was not run.")


# ----------------------------------------------------------------------------------- cost
@claim_rule(reproduced_by=dict(time_ratios=[30.0, 28.0, 33.0], memory_ratios=[40.0, 41.0, 40.0]),
            contradicted_by=dict(time_ratios=[0.5, 0.6, 0.55], memory_ratios=[0.5, 0.5, 0.6]))
def dot_product_cheaper_than_additive(*, time_ratios, memory_ratios):
    """Dot-product attention is much faster and more space-efficient than additive attention:
    the scores with their projections W_q, W_k on both sides, additive / dot per repeat, in time
    and in extra memory, each above 2 ('much' read as at least twice)."""
    verdict = combine(versus(time_ratios, 2.0, ">"), versus(memory_ratios, 2.0, ">"))
    return verdict.says(
        reproduced="With the projections on both sides, dot-product scores take less than "
                   "half the time and half the extra memory of additive ones.",
        partly="Dot-product scores are at least twice as cheap in only one of time and memory.",
        contradicted="Dot-product scores are not twice as cheap as additive ones here, in "
                     "time or in memory.",
        inconclusive="These repeats cannot tell whether dot-product scores are twice as cheap.",
        not_tested="The scores were not timed.")


@claim_rule(reproduced_by=dict(fused_bytes=[2.6e6, 2.7e6, 2.6e6],
                               explicit_bytes=[2.0e8, 2.0e8, 2.01e8],
                               one_array_bytes=16.8e6, heads=4),
            contradicted_by=dict(fused_bytes=[6.7e7, 6.8e7, 6.7e7],
                                 explicit_bytes=[1.0e6, 1.1e6, 1.0e6],
                                 one_array_bytes=16.8e6, heads=4))
def fused_attention_stores_no_weights(*, fused_bytes, explicit_bytes, one_array_bytes, heads):
    """Exact attention in extra memory linear in N, never storing the N×N weights. Measured in
    bytes at the largest N (one value per repeat): the fused kernel's extra memory is below
    one N×N float32 array (`one_array_bytes`), and, the control, the explicit path's is above
    `heads` such arrays (it stores the weights of every head)."""
    verdict = combine(versus(fused_bytes, one_array_bytes, "<"),
                      versus(explicit_bytes, heads * one_array_bytes, ">"))
    return verdict.says(
        reproduced="The fused kernel needs less extra memory than one N×N array, while the "
                   f"explicit path needs more than the {heads} heads' weights: the fused "
                   "kernel never stores them.",
        partly="Only one part holds: the fused kernel's extra memory is not below one N×N "
               "array, or the explicit path (the control) does not show the stored weights.",
        contradicted="The fused kernel needs at least one N×N array of extra memory, and the "
                     "explicit path does not show its weights: the measurement cannot see "
                     "what the claim is about.",
        inconclusive="These repeats cannot place the fused kernel's memory against one N×N "
                     "array.",
        not_tested="The memory was not measured.")


# ------------------------------------------------------------------------- path length (Table 1)
@claim_rule(reproduced_by=dict(slope_dense=0.0, slope_window=1.0, slope_recurrent=1.0),
            contradicted_by=dict(slope_dense=1.0, slope_window=0.0, slope_recurrent=0.0))
def path_length_by_layer(*, slope_dense, slope_window, slope_recurrent):
    """Maximum path length O(1) for self-attention, O(n/r) restricted to r neighbours, O(n)
    recurrent: the exponent a of the measured graph diameter ∝ n^a is 0, 1 and 1 (± 0.1)."""
    verdict = combine(same(slope_dense, 0.0, tolerance=0.1), same(slope_window, 1.0, tolerance=0.1),
                      same(slope_recurrent, 1.0, tolerance=0.1))
    return verdict.says(
        reproduced="Dense self-attention links every pair in one step at every n; a window and "
                   "a recurrence need paths that grow in proportion to n.",
        partly="Some of the three layers' path lengths grow as Table 1 says and some do not.",
        contradicted="None of the three layers' path lengths grows as Table 1 says.",
        inconclusive="(exact quantities are never inconclusive)",
        not_tested="The diameters were not measured.")
