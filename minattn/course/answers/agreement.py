"""Answers to lesson 08's predict-then-check exercise (see minattn/course/answers/__init__.py)."""

CHOICES = ("before", "at", "after")


def one_way_keyword_leader() -> str:
    """Exercise 8.3: the keyword task under frozen uniform attention, trained 1000 steps, with
    a ONE-WAY (left-to-right) LSTM instead of lesson 08's bidirectional one. In most positive
    sequences, where does the largest log-odds z_i = wᵀh_i + b₀ sit: "before" the keyword,
    "at" the keyword, or "after" it?"""
    # BEGIN EXERCISE 8.3 predict: where does a one-way LSTM's evidence end up? (~10 min)
    # "after" (measured: in 92-96 % of positive sequences, 3 seeds, from step 100 on; at step
    # 50 it is still "at"). Under uniform attention the loss sees only the mean of the z_i, so
    # evidence is worth as much at any position; the states after the keyword have read it and
    # the words around it, the states before it cannot know it at all.
    return "after"
    # END EXERCISE
