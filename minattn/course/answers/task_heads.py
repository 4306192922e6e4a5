"""Answers for lesson 07 (task-specific attention heads).

Exercise 7.3 — predict, then check. A one-layer `AttentionPool` is initialised with every
attention weight drawn from U(0.9, 1) and run once (no training) on MiniLM's token states.
How does its read-out attention (the first token's query over the sentence) look?

    "uniform"    close to 1/n on every token        (entropy ratio > 0.9)
    "one token"  nearly all weight on one token      (entropy ratio < 0.2)
    "between"    neither

(a) when the queries and keys read the raw states (`normalize=False`);
(b) when they read the states after a LayerNorm without affine (`normalize=True`, the default).
Hint: write a U(0.9, 1) matrix as 0.95·11ᵀ plus small noise and apply it to a token h.
Then check it: run section 4 of lesson 07.
"""

CHOICES = ("uniform", "one token", "between")


def u09_attention_on_raw_states() -> str:
    """(a) One of CHOICES."""
    # BEGIN EXERCISE 7.3 predict: first-step attention of a U(0.9, 1) head on raw states (~10 min)
    return "one token"
    # END EXERCISE


def u09_attention_after_layer_norm() -> str:
    """(b) One of CHOICES."""
    # BEGIN EXERCISE 7.3 predict: first-step attention of a U(0.9, 1) head after LayerNorm (~10 min)
    return "uniform"
    # END EXERCISE
