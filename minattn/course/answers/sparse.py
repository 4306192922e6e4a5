"""Lesson 02 (sparse patterns): answers to the predict-then-check and experiment exercises.

Write each answer between its markers; `make exercises EX=2` says whether each is given and
well formed (the teacher's tests check the values).
"""


def layers_window_255_to_0() -> int:
    """Exercise 2.3 (predict). A non-causal sliding window of half-width w = 8 over N = 256
    tokens, stacked in layers (each layer's residual connection keeps what a token knew). After
    how many layers has token 0 first heard from token 255?"""
    # BEGIN EXERCISE 2.3 predict: layers a window of w = 8 needs to carry token 255 to token 0 at N = 256 (~5 min)
    return 32  # information moves w = 8 positions per layer: ⌈255 / 8⌉
    # END EXERCISE


def layers_window_plus_global() -> int:
    """Exercise 2.3 (predict). The same window (w = 8, N = 256) plus one global token at
    position 100. After how many layers has every token heard from every other (the
    diameter)?"""
    # BEGIN EXERCISE 2.3 predict: diameter of the w = 8 window plus one global token at N = 256 (~5 min)
    return 2  # j -> 100 in one layer (the global token reads everyone), 100 -> i in the next
    # END EXERCISE


def fraction_of_deaf_bigbird_layouts() -> float:
    """Exercise 2.4 (experiment). Lesson 02, section 3's BigBird pattern with one layout shared
    by every head and layer: N = 512, blocks of 8, a window of one block on each side, one
    random block per row, no global block
    (`bigbird_mask_np(512, 8, window=1, n_global=0, n_random=1, seed=s)`). For the layout
    seeds s = 0 … 99, what fraction leaves position 0 hearing *no* token of the second half
    (positions 256 … 511) within 2 layers (`hops_np(mask, max_hops=2)`)?"""
    # BEGIN EXERCISE 2.4 experiment: fraction of BigBird layout seeds 0..99 whose position 0 hears nothing of the second half in 2 layers (~10 min)
    import numpy as np

    from minattn.sparse import bigbird_mask_np, hops_np
    n, deaf = 512, 0
    for seed in range(100):
        mask = bigbird_mask_np(n, 8, window=1, n_global=0, n_random=1, seed=seed)
        heard = hops_np(mask, max_hops=2)[0] >= 0  # (N,): who reaches position 0
        deaf += not heard[n // 2:].any()
    return float(np.float64(deaf) / 100)
    # END EXERCISE
