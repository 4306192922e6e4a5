"""Sparse attention patterns — NumPy references: who may attend to whom, and how far news travels.

A pattern is a boolean (N, N) mask, row = query i, column = key j, True = "i may attend to j"
(the convention of the whole course). Feed it to `minattn.attention.attention_np` and you get
sparse attention computed the slow, obvious way; `minattn.sparse.kernels` computes the same
numbers at a cost that grows linearly with N.

Conventions, stated once for every function below:
    * positions run 0..N-1; d = i - j is how far back query i looks (d < 0: it looks ahead);
    * window half-width w is one-sided: |i - j| <= w gives 2w + 1 keys per query;
    * `causal=True` intersects a pattern with j <= i (no looking ahead);
    * blocks are consecutive runs of `block` tokens; the last block may be shorter when `block`
      does not divide N (a block layout always covers ceil(N / block) blocks);
    * anything random takes a `seed`.

The patterns (Beltagy et al. 2020, "Longformer", §3.1; Zaheer et al. 2020, "Big Bird", §2;
Child et al. 2019, "Generating Long Sequences with Sparse Transformers", §4.3):
    sliding window     |i - j| <= w                                 (Longformer)
    dilated window     |i - j| <= w·δ  and  (i - j) mod δ = 0       (Longformer)
    global tokens      i in G or j in G                             (Longformer)
    random keys        r keys per query, drawn uniformly            (BigBird)
    BigBird            window + global + random, on blocks of b     (BigBird)
    strided (2 heads)  local: 0 <= i - j <= l;  strided: (i - j) mod l = 0, j <= i
    fixed   (2 heads)  block: i, j in the same length-l block, j <= i;
                       summary: j mod l >= l - c, j <= i             (Sparse Transformer)
"""

from __future__ import annotations

import numpy as np

from ..checks import as_numpy, check_array, check_size, describe, fail, shape_str


# ============================================================================ input checks
def check_int(name: str, value, low: int) -> int:
    """`value` must be an integer >= low (a window < 0 or a block of 0 is a typo, not a pattern)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        fail(f"{name} must be an integer >= {low}", f"{name} >= {low}", repr(value))
    return int(value)


def check_windows(windows, num_heads: int | None = None) -> list[int]:
    """One integer ω >= 0 per head; with num_heads, exactly that many."""
    ws = list(as_numpy(windows).reshape(-1)) if not isinstance(windows, (list, tuple)) \
        else list(windows)
    if not ws:
        fail("windows: no scales given", "one window ω >= 0 per head", repr(windows))
    for w in ws:
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 0:
            fail("windows: a window ω must be an integer >= 0", "ω in {0, 1, 2, ...}",
                 repr(windows))
    if num_heads is not None and len(ws) != num_heads:
        fail("windows: one window per head", f"{num_heads} windows",
             f"{len(ws)}: {list(map(int, ws))}")
    return [int(w) for w in ws]


def _positions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Query positions as a column (N, 1) and key positions as a row (1, N): broadcasting any
    expression in i and j gives the (N, N) mask."""
    n = check_int("n (sequence length)", n, 1)
    return np.arange(n)[:, None], np.arange(n)[None, :]


def check_global_idx(global_idx, n: int) -> np.ndarray:
    """Global positions as a sorted int array of distinct values in [0, n)."""
    given = as_numpy(global_idx if global_idx is not None else [])
    if given.size and given.dtype.kind not in "iu":
        fail("global_idx", f"integer positions in [0, {n})", describe(given))
    idx = given.astype(np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        fail("global_idx out of range", f"positions in [0, {n})", str(idx.tolist()))
    if np.unique(idx).size != idx.size:
        fail("global_idx has repeated positions", "distinct positions", str(idx.tolist()))
    return np.sort(idx)


# ============================================================================ patterns
def sliding_window_mask_np(n: int, w: int, causal: bool = False) -> np.ndarray:
    """(N, N) bool: query i sees key j iff |i - j| <= w (and j <= i when causal).

    Each query sees 2w + 1 keys (w + 1 when causal), fewer near the ends of the sequence.
    """
    w = check_int("window w", w, 0)
    i, j = _positions(n)
    # BEGIN EXERCISE 2.1 sliding-window mask: True where |i - j| <= w (and j <= i when causal)
    mask = np.abs(i - j) <= w
    if causal:
        mask &= j <= i
    # END EXERCISE
    return mask


def dilated_window_mask_np(n: int, w: int, dilation: int, causal: bool = False) -> np.ndarray:
    """(N, N) bool: i sees j iff |i - j| <= w·δ and δ divides i - j (δ = dilation).

    Still 2w + 1 keys per query, spread over a span δ times wider: every δ-th token. With
    δ = 1 this is the sliding window. The keys of i all lie in i's residue class i mod δ.
    """
    w = check_int("window w", w, 0)
    dilation = check_int("dilation", dilation, 1)
    i, j = _positions(n)
    # BEGIN EXERCISE 2.1 sliding-window mask: True where |i - j| <= w (and j <= i when causal)
    mask = (np.abs(i - j) <= w * dilation) & ((i - j) % dilation == 0)
    if causal:
        mask &= j <= i
    # END EXERCISE
    return mask


def global_mask_np(n: int, global_idx) -> np.ndarray:
    """(N, N) bool: the rows and columns of the global positions G.

    A global token attends to every token and every token attends to it: any two tokens are
    at most two hops apart through it. Union it with a window to get Longformer's pattern.
    """
    i, j = _positions(n)
    is_global = np.zeros(n, dtype=bool)
    is_global[check_global_idx(global_idx, n)] = True
    return is_global[i] | is_global[j]


def random_mask_np(n: int, r: int, seed: int, causal: bool = False) -> np.ndarray:
    """(N, N) bool: each query i gets r distinct keys drawn uniformly (from j <= i if causal).

    When fewer than r keys are allowed (early queries of a causal mask), it gets all of them.
    """
    r = check_int("random keys r", r, 0)
    seed = check_size("seed", seed)
    _positions(n)  # checks n
    rng = np.random.default_rng(seed)
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        allowed = i + 1 if causal else n
        mask[i, rng.choice(allowed, size=min(r, allowed), replace=False)] = True
    return mask


def block_mask_np(layout: np.ndarray, block: int, n: int) -> np.ndarray:
    """Expand a block layout (nb, nb) to the (N, N) token mask it stands for.

    layout[I, J] True means every query of block I may attend to every key of block J. Tokens
    past N (the padding of a short last block) are cut off.
    """
    block = check_int("block", block, 1)
    n = check_int("n", n, 1)
    layout = np.asarray(layout)
    nb = -(-n // block)
    if layout.dtype != np.bool_ or layout.shape != (nb, nb):
        fail("block layout does not fit", f"bool of shape ({nb}, {nb}) for n={n}, block={block}",
             f"{layout.dtype} of shape {shape_str(layout.shape)}")
    return np.kron(layout, np.ones((block, block), dtype=bool))[:n, :n].astype(bool)


def block_layout_np(mask: np.ndarray, block: int) -> np.ndarray:
    """(nb, nb) bool: which block × block tiles of an (N, N) mask hold at least one True.

    This is what a block-sparse kernel computes: a tile is worked on whole or skipped whole.
    """
    check_square_mask(mask)
    block = check_int("block", block, 1)
    n = mask.shape[-1]
    nb = -(-n // block)
    padded = np.zeros((nb * block, nb * block), dtype=bool)
    padded[:n, :n] = mask
    return padded.reshape(nb, block, nb, block).any(axis=(1, 3))


def bigbird_layout_np(n_blocks: int, window: int = 1, n_global: int = 1, n_random: int = 1,
                      seed: int = 0) -> np.ndarray:
    """(nb, nb) bool BigBird layout: block window + global blocks + random blocks.

    Block I sees blocks |I - J| <= window; the first `n_global` blocks see and are seen by all;
    every other block I also sees `n_random` blocks drawn (seeded) from those it does not
    already see. Every query row has about 2·window + 1 + n_global + n_random blocks, so the
    cost per query is constant and the total grows linearly with N.
    """
    nb = check_int("n_blocks", n_blocks, 1)
    window = check_int("window (blocks)", window, 0)
    n_global = check_int("n_global (blocks)", n_global, 0)
    n_random = check_int("n_random (blocks)", n_random, 0)
    rng = np.random.default_rng(seed)
    big_i, big_j = np.arange(nb)[:, None], np.arange(nb)[None, :]
    layout = (np.abs(big_i - big_j) <= window) | (big_i < n_global) | (big_j < n_global)
    for row in range(n_global, nb):
        free = np.flatnonzero(~layout[row])
        layout[row, rng.choice(free, size=min(n_random, free.size), replace=False)] = True
    return layout


def bigbird_layouts_np(n_blocks: int, layers: int, heads: int, window: int = 1,
                       n_global: int = 1, n_random: int = 1, seed: int = 0) -> np.ndarray:
    """(layers, heads, nb, nb) bool: a `bigbird_layout_np` of its own for every head of every
    layer, all drawn from one `seed`.

    BigBird's code draws the random blocks of every head separately (`bigbird_block_rand_mask`
    is called once per head) and seeds every layer differently, so the heads of a layer, and
    the layers of a stack, reach different far blocks: together they cover far more of the
    sequence than one layout shared by all of them.
    """
    layers, heads = check_int("layers", layers, 1), check_int("heads", heads, 1)
    seeds = np.random.SeedSequence(check_size("seed", seed)).generate_state(layers * heads)
    layouts = [bigbird_layout_np(n_blocks, window, n_global, n_random, seed=int(s))
               for s in seeds]
    return np.stack(layouts).reshape(layers, heads, *layouts[0].shape)


def bigbird_mask_np(n: int, block: int, window: int = 1, n_global: int = 1, n_random: int = 1,
                    seed: int = 0) -> np.ndarray:
    """(N, N) bool: `bigbird_layout_np` on ceil(N / block) blocks, expanded to tokens."""
    block = check_int("block", block, 1)
    _positions(n)
    layout = bigbird_layout_np(-(-n // block), window, n_global, n_random, seed)
    return block_mask_np(layout, block, n)


def strided_masks_np(n: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Sparse Transformer "strided" pattern (causal), one mask per head: (local, strided).

    local: A¹ᵢ = {t, ..., i}, t = max(0, i - l): the token and the l before it, l + 1 keys.
    strided: A²ᵢ = {j <= i : (i - j) mod l = 0}, every l-th token back (Child et al. 2019,
    §4.3). Any j <= i is reached in two hops (local then strided). With l ≈ √N query i sees
    about l + i/l keys: 2√N for the last query, 1.5√N on average over the queries, so O(N√N) in
    all. local is a causal window of w = l; strided a causal dilated window with δ = l and
    w = N (unbounded), so the window kernels compute both heads.
    """
    stride = check_int("stride l", stride, 1)
    i, j = _positions(n)
    causal = j <= i
    return causal & (i - j <= stride), causal & ((i - j) % stride == 0)


def fixed_masks_np(n: int, block: int, summary: int) -> tuple[np.ndarray, np.ndarray]:
    """Sparse Transformer "fixed" pattern (causal), one mask per head: (block, summary).

    block: i and j in the same length-l block, j <= i.  summary: the last c positions of every
    block, j mod l >= l - c, j <= i: those "summary" columns carry each block to the future.
    """
    block = check_int("block l", block, 1)
    summary = check_int("summary c", summary, 1)
    if summary > block:
        fail("summary columns must fit in a block", f"c <= l = {block}", f"c = {summary}")
    i, j = _positions(n)
    causal = j <= i
    return causal & (i // block == j // block), causal & (j % block >= block - summary)


def union_np(*masks: np.ndarray) -> np.ndarray:
    """The union of patterns: i sees j if any pattern lets it (e.g. window ∪ global)."""
    if not masks:
        fail("union of no masks", "at least one mask", "none")
    for m in masks:
        check_array("masks", m, "bool", like=np.ndarray, hint="(N, N)")
    shapes = {m.shape for m in masks}
    if len(shapes) > 1:
        fail("masks of different shapes", "one (N, N) shape", str(sorted(shapes)))
    return np.logical_or.reduce(masks)


def check_square_mask(mask) -> None:
    """mask: a NumPy bool (N, N) array."""
    check_array("mask", mask, "bool", ndim=2, like=np.ndarray, hint="(N, N)")
    if mask.shape[0] != mask.shape[1]:
        fail("mask", "a square bool (N, N) mask", describe(mask))


# ============================================================================ graph view
def hops_np(mask: np.ndarray, max_hops: int | None = None) -> np.ndarray:
    """(N, N) int: how many stacked attention layers it takes for token j to reach token i.

    One layer moves information along the edges j -> i with mask[i, j] True; the residual
    connection keeps what a token already had. So "j reaches i within L layers" is the
    boolean matrix power (mask | I)^L. Entries are -1 where j never reaches i (within
    `max_hops`, default N). The diagonal is 0.
    """
    check_square_mask(mask)
    n = mask.shape[0]
    max_hops = n if max_hops is None else check_size("max_hops", max_hops)
    step = (mask | np.eye(n, dtype=bool)).astype(np.float32)
    hops = np.where(np.eye(n, dtype=bool), 0, -1)
    reach = np.eye(n, dtype=np.float32)
    for layer in range(1, max_hops + 1):
        reach = ((step @ reach) > 0).astype(np.float32)  # reach[i, j]: j's news has reached i
        new = (reach > 0) & (hops < 0)
        if not new.any():
            break
        hops[new] = layer
    return hops


def reach_np(*masks: np.ndarray) -> np.ndarray:
    """(N, N) bool: has token j's news reached token i after one layer per mask, in order?

    A layer with several heads is the union of its heads' masks. As in `hops_np` the residual
    connection keeps what a token already had, so the stack reaches
    (M_L ∨ I)(M_{L-1} ∨ I) ⋯ (M_1 ∨ I) as a boolean product; `hops_np` is the same with one mask
    repeated.
    """
    if not masks:
        fail("reach of no layers", "one (N, N) mask per layer", "none")
    for mask in masks:
        check_square_mask(mask)
    eye = np.eye(masks[0].shape[0], dtype=bool)
    reach = eye.astype(np.float32)
    for mask in masks:
        if mask.shape != eye.shape:
            fail("masks of different shapes", f"{eye.shape} for every layer", str(mask.shape))
        reach = (((mask | eye).astype(np.float32) @ reach) > 0).astype(np.float32)
    return reach > 0


def diameter_np(mask: np.ndarray) -> float:
    """The number of layers after which every token has heard from every token it could.

    "Could" means every j for a non-causal mask, every j <= i for a causal one (a mask with
    no True above the diagonal). Returns inf when some such pair is never connected.
    """
    hops = hops_np(mask)  # checks mask
    n = mask.shape[0]
    causal = not np.triu(mask, k=1).any()
    targets = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    if (hops[targets] < 0).any():
        return float("inf")
    return float(hops[targets].max())
