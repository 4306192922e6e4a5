"""Answers for lesson 03 (multi-scale attention): predict-then-check."""


def uniform_window_scale() -> float:
    """A head with window ω = 3 that attends *uniformly* to every key it may see. For a query
    far from both ends of a long sequence, what is its measured scale Σ_j a_ij |i − j|?
    (Lesson 03, exercise 3.3; check it with `measured_scale_np`.)"""
    # BEGIN EXERCISE 3.3 predict: the measured scale of a uniform head with window 3, away from the ends (~5 min)
    # 7 keys at distances 3, 2, 1, 0, 1, 2, 3, each with weight 1/7: 2·(1 + 2 + 3)/7 = ω(ω+1)/(2ω+1)
    return 12 / 7
    # END EXERCISE
