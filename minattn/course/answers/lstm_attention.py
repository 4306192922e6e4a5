"""Answers to lesson 05's predict-then-check exercise (see minattn/course/answers/__init__.py)."""


def least_often_learned_corpus() -> str:
    """Exercise 5.3: which corpus will a copy model learn least often within 200 steps, "A",
    "B" or "C"?

    (A) 30 words sampled from 45, permuted; (B) a permutation of words 0-14 or of words 15-29;
    (C) 15 words sampled from 30, permuted.
    """
    # BEGIN EXERCISE 5.3 predict: which copy corpus is learned least often in 200 steps? (~15 min)
    # B: inside each of its two blocks the count table is flat, as for 40-of-40; A and C sample
    # their words, so a word co-occurs with itself more often than with any other.
    return "B"
    # END EXERCISE
