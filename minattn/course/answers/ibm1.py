"""Answers to lesson 06's predict-then-check and experiment exercises (IBM Model 1)."""

from __future__ import annotations


def zero_gradient_tables() -> set[str]:
    """Exercise 6.3: of the count tables of lesson 06, section 2 — "a" 40-of-40, "b" 40-of-60,
    "c" two disjoint sets of 40 — which make the predicted dθ/dt = 2 (C − row mean) zero for
    every (x, y)? Return the set of letters, e.g. {"a", "b"}."""
    # BEGIN EXERCISE 6.3 predict: which count tables give a zero predicted dθ/dt? (~5 min)
    # (c): inside a block the row is flat, but the row mean also averages the 40 zeros of the
    # other block, so C − mean is +M_A/80 on the block and −M_A/80 off it: not zero.
    return {"a"}
    # END EXERCISE


def em_race_40_of_50() -> int:
    """Exercise 6.4: after how many EM steps does the mean t(x | x) first pass 0.5 on 40-of-50
    copying (lesson 06's `diagonal_race`, textbook mode, no NULL)?"""
    # BEGIN EXERCISE 6.4 experiment: EM race on 40-of-50, steps until mean t(x|x) > 0.5 (~10 min)
    # measured: 18 (40-of-60 takes 10): the diagonal's head start per step is (V-1)/39, 49/39
    # instead of 59/39, and it compounds more slowly
    return 18
    # END EXERCISE
