"""Answers to the course's predict-then-check and experiment exercises, one file per lesson
(named after the lesson's module: `answers/multiscale.py` for lesson 03, ...).

Each answer is a small function that returns a number or a choice, its body between the two
exercise markers (a `BEGIN EXERCISE <id> predict: <question> (~5 min)` comment line and an
`END EXERCISE` one, as in every exercise of the library). A student copy replaces the body
with `raise NotImplementedError(...)`; the student writes
their answer there and `make exercises` checks it (predictions against the exact value,
experiments against a range).
"""
