"""Answers to the course's predict-then-check and experiment exercises, one file per lesson
(named after the lesson's module: `answers/multiscale.py` for lesson 03, ...).

Each answer is a small function that returns a number or a choice, inside a marked region

    def predicted_hops() -> int:
        # BEGIN EXERCISE 2.3 predict: how many hops ... (~5 min)
        return 4
        # END EXERCISE

A student copy replaces the body with `raise NotImplementedError(...)`; the student writes
their answer there and `make exercises` checks it (predictions against the exact value,
experiments against a range).
"""
