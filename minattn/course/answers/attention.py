"""Answers to lesson 01's predict-then-check and experiment exercises (see the lesson's end)."""


def duplicate_token_weight() -> float:
    """Exercise 1.4. In section 1's three-token example, query "the" puts 0.401 on itself.
    Append a fourth token identical to "the" (q = k = (1, 0), v = (1, 0, 0)). What total weight
    does query "the" now put on the two "the" tokens together? Predict it on paper (two
    decimals), then check with `attention_np`."""
    # BEGIN EXERCISE 1.4 predict: the weight of a duplicated token (~10 min)
    # scores (1, 0, 1, 1)/√2 -> e^0.707 three times and e^0 once: 2e^0.707 / (3e^0.707 + 1)
    return 0.57
    # END EXERCISE


def jacobian_norm_with_4096_keys() -> float:
    """Exercise 1.5. Section 5 of lesson 01 measures the softmax over 64 keys. Run
    `rows = softmax_rows_np(64, rng, n_queries=200, n_keys=4096)` (`minattn.course.attention`;
    d = 64, 4096 keys) and report the mean Jacobian norm ‖∂softmax/∂scores‖ of the scaled
    scores, `rows[True]["jacobian"].mean()` (three decimals). Compare it with 64 keys: what does a
    longer context do to the learning signal of each score?"""
    # BEGIN EXERCISE 1.5 experiment: the softmax Jacobian over 4096 keys (~10 min)
    # measured: 0.026 (0.18 with 64 keys): the weights spread over more keys and shrink
    return 0.026
    # END EXERCISE
