"""Sparse attention (lesson 02): who may attend to whom, as a mask, and what it costs.

Dense attention scores every query against every key: N² scores for N tokens. Longformer,
BigBird and the Sparse Transformer keep lesson 01's formula and change only *who may look at
whom*: a pattern is a boolean (N, N) mask M, row = query i, column = key j, True = "i may attend
to j" (the course's convention), and

    SparseAttention(Q, K, V) = softmax(Q Kᵀ / √d + log M) V        (log True = 0, log False = −∞)

is lesson 01's `attention_np(q, k, v, mask)`. This file states the patterns as NumPy masks, reads
them as graphs (how many layers until every token has heard from every other), and computes
attention with a pattern the slow, obvious way: the dense N × N mask. `minattn/fast/sparse.py`
computes the same numbers in time and memory that grow linearly with N (tested equal in
float64); `minattn/fast/flex.py` hands them to FlexAttention or fused SDPA on a GPU.

Conventions, stated once for every function below:
    * positions run 0..N-1; d = i - j is how far back query i looks (d < 0: it looks ahead);
    * the window half-width w is one-sided: |i - j| <= w gives 2w + 1 keys per query
      (Longformer and BigBird write w for the full width: theirs is about 2w here);
    * `causal=True` intersects a pattern with j <= i (no looking ahead);
    * blocks are consecutive runs of `block` tokens; the last block may be shorter when `block`
      does not divide N (a block layout always covers ceil(N / block) blocks);
    * anything random takes a `seed`. Shapes: q, k (..., N, d), v (..., N, dv).

The patterns (Beltagy et al. 2020, "Longformer", §3.1; Zaheer et al. 2020, "Big Bird", §2;
Child et al. 2019, "Generating Long Sequences with Sparse Transformers", §4.3):
    sliding window     |i - j| <= w                                   (Longformer)
    dilated window     |i - j| <= w·δ  and  δ divides i - j           (Longformer)
    global tokens      i in G or j in G                               (Longformer)
    random keys        r keys per query, drawn uniformly              (BigBird)
    BigBird            window + global + random, on blocks of b       (BigBird)
    strided (2 heads)  local: 0 <= i - j <= l;  strided: l divides i - j, j <= i
    fixed   (2 heads)  block: i, j in the same length-l block, j <= i;
                       summary: j mod l >= l - c, j <= i, c a constant (Sparse Transformer)
Input checks sit in minattn/checks.py (section "sparse"): each body starts with its math.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from . import checks as c
from .attention import MultiHeadAttention, attention_np, attention_torch
from .contract import as_numpy, checked, fail, hide


# ============================================================================ patterns
@checked(n="int >= 1", w="int")
def sliding_window_mask_np(n: int, w: int, causal: bool = False) -> np.ndarray:
    """(N, N) bool: query i sees key j iff |i - j| <= w (and j <= i when causal).

    Each query sees 2w + 1 keys (w + 1 when causal), fewer near the ends of the sequence.
    """
    i, j = np.ogrid[:n, :n]  # query positions as a column (N, 1), key positions as a row (1, N)
    # BEGIN EXERCISE 2.1 implement: the sliding-window mask |i - j| <= w (and j <= i when causal) (~10 min)
    mask = np.abs(i - j) <= w
    if causal:
        mask &= j <= i
    # END EXERCISE
    return mask


@checked(n="int >= 1", w="int", dilation="int >= 1")
def dilated_window_mask_np(n: int, w: int, dilation: int, causal: bool = False) -> np.ndarray:
    """(N, N) bool: i sees j iff |i - j| <= w·δ and δ divides i - j (δ = dilation).

    Still 2w + 1 keys per query, spread over a span δ times wider: every δ-th token. With
    δ = 1 this is the sliding window. The keys of i all lie in i's residue class i mod δ.
    """
    i, j = np.ogrid[:n, :n]
    # BEGIN EXERCISE 2.1 implement: the sliding-window mask |i - j| <= w (and j <= i when causal) (~10 min)
    mask = (np.abs(i - j) <= w * dilation) & ((i - j) % dilation == 0)
    if causal:
        mask &= j <= i
    # END EXERCISE
    return mask


@checked(n="int >= 1", rules=[c.global_positions_of])
def global_mask_np(n: int, global_idx) -> np.ndarray:
    """(N, N) bool: the rows and columns of the global positions G.

    A global token attends to every token and every token attends to it: any two tokens are
    at most two hops apart through it. Union it with a window to get Longformer's pattern.
    """
    is_global = np.zeros(n, dtype=bool)
    is_global[global_idx] = True
    return is_global[:, None] | is_global[None, :]


@checked(n="int >= 1", w="int", dilation="int >= 1",
         rules=[c.global_positions_of])
def longformer_mask_np(n: int, w: int, dilation: int = 1, global_idx=None,
                       causal: bool = False) -> np.ndarray:
    """(N, N) bool: Longformer's pattern, a (dilated) window ∪ global tokens (∩ j <= i when
    causal) — the pattern of `window_attention_np` and of every window kernel."""
    mask = dilated_window_mask_np(n, w, dilation)
    if global_idx is not None and len(global_idx):
        mask |= global_mask_np(n, global_idx)
    return mask & np.tri(n, dtype=bool) if causal else mask


@checked(n="int >= 1", r="int", seed="int")
def random_mask_np(n: int, r: int, seed: int, causal: bool = False) -> np.ndarray:
    """(N, N) bool: each query i gets r distinct keys drawn uniformly (from j <= i if causal).

    When fewer than r keys are allowed (early queries of a causal mask), it gets all of them.
    """
    rng = np.random.default_rng(seed)
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        allowed = i + 1 if causal else n
        mask[i, rng.choice(allowed, size=min(r, allowed), replace=False)] = True
    return mask


@checked(block="int >= 1", n="int >= 1", rules=[c.layout_fits])
def block_mask_np(layout: np.ndarray, block: int, n: int) -> np.ndarray:
    """Expand a block layout (nb, nb) to the (N, N) token mask it stands for.

    layout[I, J] True means every query of block I may attend to every key of block J. Tokens
    past N (the padding of a short last block) are cut off.
    """
    return np.kron(layout, np.ones((block, block), dtype=bool))[:n, :n].astype(bool)


@checked(mask="bool (N, N)", block="int >= 1")
def block_layout_np(mask: np.ndarray, block: int) -> np.ndarray:
    """(nb, nb) bool: which block × block tiles of an (N, N) mask hold at least one True.

    This is what a block-sparse kernel computes: a tile is worked on whole or skipped whole.
    """
    n = mask.shape[-1]
    nb = -(-n // block)
    padded = np.zeros((nb * block, nb * block), dtype=bool)
    padded[:n, :n] = mask
    return padded.reshape(nb, block, nb, block).any(axis=(1, 3))


@checked(n_blocks="int >= 1", window="int", n_global="int", n_random="int",
         seed="int")
def bigbird_layout_np(n_blocks: int, window: int = 1, n_global: int = 1, n_random: int = 1,
                      seed: int = 0) -> np.ndarray:
    """(nb, nb) bool BigBird layout: block window + global blocks + random blocks.

    Block I sees blocks |I - J| <= window; the first `n_global` blocks see and are seen by all;
    every other block I also sees `n_random` blocks drawn (seeded) from those it does not
    already see. Every query row has about 2·window + 1 + n_global + n_random blocks, so the
    cost per query is constant and the total grows linearly with N.
    """
    rng = np.random.default_rng(seed)
    big_i, big_j = np.arange(n_blocks)[:, None], np.arange(n_blocks)[None, :]
    layout = (np.abs(big_i - big_j) <= window) | (big_i < n_global) | (big_j < n_global)
    for row in range(n_global, n_blocks):
        free = np.flatnonzero(~layout[row])
        layout[row, rng.choice(free, size=min(n_random, free.size), replace=False)] = True
    return layout


@checked(n_blocks="int >= 1", layers="int >= 1", heads="int >= 1", window="int",
         n_global="int", n_random="int", seed="int")
def bigbird_layouts_np(n_blocks: int, layers: int, heads: int, window: int = 1,
                       n_global: int = 1, n_random: int = 1, seed: int = 0) -> np.ndarray:
    """(layers, heads, nb, nb) bool: a `bigbird_layout_np` of its own for every head of every
    layer, all drawn from one `seed`.

    BigBird's code draws the random blocks of every head separately (`bigbird_block_rand_mask`
    is called once per head) and seeds every layer differently, so the heads of a layer, and
    the layers of a stack, reach different far blocks: together they cover far more of the
    sequence than one layout shared by all of them.
    """
    seeds = np.random.SeedSequence(seed).generate_state(layers * heads)
    layouts = [bigbird_layout_np(n_blocks, window, n_global, n_random, seed=int(s))
               for s in seeds]
    return np.stack(layouts).reshape(layers, heads, n_blocks, n_blocks)


@checked(n="int >= 1", block="int >= 1", window="int", n_global="int", n_random="int",
         seed="int")
def bigbird_mask_np(n: int, block: int, window: int = 1, n_global: int = 1, n_random: int = 1,
                    seed: int = 0) -> np.ndarray:
    """(N, N) bool: `bigbird_layout_np` on ceil(N / block) blocks, expanded to tokens."""
    layout = bigbird_layout_np(-(-n // block), window, n_global, n_random, seed)
    return block_mask_np(layout, block, n)


@checked(n="int >= 1", stride="int >= 1")
def strided_masks_np(n: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Sparse Transformer "strided" pattern (causal), one mask per head: (local, strided).

    local: A¹ᵢ = {t, ..., i}, t = max(0, i - l): the token and the l before it, l + 1 keys.
    strided: A²ᵢ = {j <= i : (i - j) mod l = 0}, every l-th token back (Child et al. 2019,
    §4.3). Any j <= i is reached in two hops (local then strided). With l ≈ √N query i sees
    about l + i/l keys: 2√N for the last query, 1.5√N on average over the queries, so O(N√N) in
    all. local is a causal window of w = l; strided a causal dilated window with δ = l and
    w = N (unbounded), so the window kernels compute both heads.
    """
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    causal = j <= i
    return causal & (i - j <= stride), causal & ((i - j) % stride == 0)


@checked(n="int >= 1", block="int >= 1", summary="int in 1 .. block")
def fixed_masks_np(n: int, block: int, summary: int) -> tuple[np.ndarray, np.ndarray]:
    """Sparse Transformer "fixed" pattern (causal), one mask per head: (block, summary).

    block: i and j in the same length-l block, j <= i.  summary: the last c positions of every
    block, j mod l >= l - c, j <= i: those "summary" columns carry each block to the future
    (Child et al. 2019, §4.3; c is a constant, 8 to 32 for their l of 128 or 256). Query i sees
    at most l keys of its block and c of every earlier block: with l ≈ √N and a constant c,
    about (1 + c)·√N / 2 on average, O(N√N) in all.
    """
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    causal = j <= i
    return causal & (i // block == j // block), causal & (j % block >= block - summary)


@checked(rules=[c.square_masks])
def union_np(*masks: np.ndarray) -> np.ndarray:
    """The union of patterns: i sees j if any pattern lets it (e.g. window ∪ global)."""
    return np.logical_or.reduce(masks)


# ============================================================================ graph view
@checked(mask="bool (N, N)", max_hops="int?")
def hops_np(mask: np.ndarray, max_hops: int | None = None) -> np.ndarray:
    """(N, N) int: how many stacked attention layers it takes for token j to reach token i.

    One layer moves information along the edges j -> i with mask[i, j] True; the residual
    connection keeps what a token already had. So "j reaches i within L layers" is the
    boolean matrix power (mask | I)^L. Entries are -1 where j never reaches i (within
    `max_hops`, default N). The diagonal is 0.
    """
    n = mask.shape[0]
    max_hops = n if max_hops is None else max_hops
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


@checked(rules=[c.square_masks])
def reach_np(*masks: np.ndarray) -> np.ndarray:
    """(N, N) bool: has token j's news reached token i after one layer per mask, in order?

    A layer with several heads is the union of its heads' masks. As in `hops_np` the residual
    connection keeps what a token already had, so the stack reaches
    (M_L ∨ I)(M_{L-1} ∨ I) ⋯ (M_1 ∨ I) as a boolean product; `hops_np` is the same with one mask
    repeated.
    """
    eye = np.eye(masks[0].shape[0], dtype=bool)
    reach = eye.astype(np.float32)
    for mask in masks:
        reach = (((mask | eye).astype(np.float32) @ reach) > 0).astype(np.float32)
    return reach > 0


@checked(mask="bool (N, N)")
def diameter_np(mask: np.ndarray) -> float:
    """The number of layers after which every token has heard from every token it could.

    "Could" means every j for a non-causal mask, every j <= i for a causal one (a mask with
    no True above the diagonal). Returns inf when some such pair is never connected.
    `minattn.fast.sparse.diameter_fast_np` counts the same by breadth-first search.
    """
    hops = hops_np(mask)
    n = mask.shape[0]
    causal = not np.triu(mask, k=1).any()
    targets = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    if (hops[targets] < 0).any():
        return float("inf")
    return float(hops[targets].max())


# =================================================================== attention with a pattern
def global_positions(global_idx) -> np.ndarray:
    """Global positions (a list, an array or a tensor) as a sorted int64 NumPy array."""
    return np.sort(as_numpy(global_idx if global_idx is not None else [], np.int64).reshape(-1))


def layout_array(layout) -> np.ndarray:
    """A block layout (a list, an array or a tensor) as a contiguous bool NumPy array."""
    return np.ascontiguousarray(as_numpy(layout))


def hide_unseen_blocks(q, k, v, layout: np.ndarray, block: int, causal: bool = False):
    """q, k, v (..., N, ·) with what a block layout hides set to 0: the queries of block rows
    that see no block, the keys of block columns no query sees (under causal, row I sees
    block J only when J <= I). What a pattern hides may hold garbage (NaN in padding): it is
    selected away (`hide`), never multiplied by 0. NumPy or torch alike."""
    n = q.shape[-2]
    seen = np.tril(layout) if causal else layout
    rows = np.repeat(seen.any(1), block)[:n, None]  # (N, 1): the query sees some key
    keys = np.repeat(seen.any(0), block)[:n, None]  # (N, 1): some query sees the key
    if isinstance(q, torch.Tensor):
        rows, keys = (torch.as_tensor(x, device=q.device) for x in (rows, keys))
    return hide(q, rows), hide(k, keys), hide(v, keys)


@checked(q="float (..., N, d)", k="float (..., N, d)", v="float (..., N, dv)",
         w="int", dilation="int >= 1", scale="number?", rules=[c.global_positions_of])
def window_attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, w: int, *,
                        dilation: int = 1, causal: bool = False, global_idx=None,
                        scale: float | None = None) -> np.ndarray:
    """Sliding-window attention, the reference: lesson 01's attention on Longformer's mask.

    q, k: (..., N, d); v: (..., N, dv) -> (..., N, dv). Query i attends to the keys j with
    |i - j| <= w·δ and δ dividing i - j (δ = dilation), and every query to the global positions
    and they to every key (∩ j <= i when causal). O(N²) time and memory, whatever w:
    `minattn.fast.sparse.window_attention_fast_torch` computes the same in O(N·w).
    """
    mask = longformer_mask_np(q.shape[-2], w, dilation, global_idx, causal)  # (N, N)
    return attention_np(q, k, v, mask, scale)[0]


@checked(q="float* (..., N, d)", k="float* (..., N, d)", v="float* (..., N, dv)",
         block="int >= 1", scale="number?", rules=[c.layout_seen_finite])
def block_sparse_attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, layout: np.ndarray,
                              block: int, causal: bool = False,
                              scale: float | None = None) -> np.ndarray:
    """Attention on the tiles of a block layout (BigBird, the fixed pattern), the reference.

    q, k: (..., N, d); v: (..., N, dv); layout: (nb, nb) bool, nb = ceil(N / block), e.g.
    `bigbird_layout_np` -> (..., N, dv); a query whose row has no allowed key gets zeros.
    `minattn.fast.sparse.block_sparse_attention_fast_torch` computes only the non-zero tiles.
    """
    mask = block_mask_np(layout, block, q.shape[-2])  # (N, N)
    if causal:
        mask &= np.tri(q.shape[-2], dtype=bool)
    return attention_np(q, k, v, mask, scale)[0]


@checked(q="float (..., N, d)", k="float (..., N, d)", v="float (..., N, dv)",
         w="int", dilation="int >= 1", scale="number?", rules=[c.global_positions_of])
def window_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: int, *,
                           dilation: int = 1, causal: bool = False, global_idx=None,
                           scale: float | None = None) -> torch.Tensor:
    """Torch twin of `window_attention_np` (the dense (N, N) mask on the inputs' device)."""
    mask = longformer_mask_np(q.shape[-2], w, dilation, global_idx, causal)  # (N, N)
    return attention_torch(q, k, v, torch.as_tensor(mask, device=q.device), scale)[0]


@checked(q="float* (..., N, d)", k="float* (..., N, d)", v="float* (..., N, dv)",
         block="int >= 1", scale="number?", rules=[c.layout_seen_finite])
def block_sparse_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout,
                                 block: int, causal: bool = False,
                                 scale: float | None = None) -> torch.Tensor:
    """Torch twin of `block_sparse_attention_np`."""
    mask = block_mask_np(layout, block, q.shape[-2])  # (N, N)
    if causal:
        mask &= np.tri(q.shape[-2], dtype=bool)
    return attention_torch(q, k, v, torch.as_tensor(mask, device=q.device), scale)[0]


# ============================================================================ layers and model
@checked(w="int", dilation="int >= 1", kernel="callable?", rules=[c.global_positions_of])
def window_attend(w: int, dilation: int = 1, causal: bool = False, global_idx=None, kernel=None,
                  **options):
    """A kernel for `MultiHeadAttention(..., attend=)`: (q, k, v, mask) -> the window pattern's
    attention, (B, H, N, dh). The pattern is the mask, so the layer's `mask` must be None.

    kernel: `window_attention_torch` (the default: the dense reference) or a faster one of the
    same signature, chosen by the caller — `minattn.fast.sparse.window_attention_fast_torch`
    (O(N·w)), `minattn.fast.flex.window_attention_routed_fast_torch` (FlexAttention or fused
    SDPA on a GPU). `options` go to the kernel (e.g. block=8 for the fast one).
    """
    kernel = window_attention_torch if kernel is None else kernel

    def attend(q, k, v, mask=None):
        if mask is not None:
            fail("window_attend: the sparse pattern is the mask", "mask=None",
                 f"a mask of type {type(mask).__name__}")
        return kernel(q, k, v, w, dilation=dilation, causal=causal, global_idx=global_idx,
                      **options)
    attend.__name__ = f"window(w={w}, dilation={dilation}, global={global_idx}, {kernel.__name__})"
    return attend


@checked(block="int >= 1", kernel="callable?", rules=[c.layout_one_or_per_head])
def block_sparse_attend(layout, block: int, causal: bool = False, kernel=None):
    """A kernel for `MultiHeadAttention(..., attend=)`: (q, k, v, mask) -> block-sparse
    attention; mask must be None. kernel: `block_sparse_attention_torch` (default) or
    `minattn.fast.sparse.block_sparse_attention_fast_torch` (only the non-zero tiles).

    layout: (nb, nb) bool, one layout for every head, or (H, nb, nb), one per head (BigBird
    draws its random blocks per head: `bigbird_layouts_np`); q, k, v are then (B, H, N, dh).
    """
    layout = as_numpy(layout)  # a tensor or a list too
    kernel = block_sparse_attention_torch if kernel is None else kernel

    def attend(q, k, v, mask=None):
        if mask is not None:
            fail("block_sparse_attend: the sparse pattern is the mask", "mask=None",
                 f"a mask of type {type(mask).__name__}")
        if layout.ndim == 2:
            return kernel(q, k, v, layout, block, causal)
        if q.ndim != 4 or q.shape[1] != layout.shape[0]:
            fail("block_sparse_attend: one layout per head", f"q of shape (B, "
                 f"{layout.shape[0]}, N, dh)", f"q of shape {tuple(q.shape)}")
        return torch.stack([kernel(q[:, h], k[:, h], v[:, h], layout[h], block, causal)
                            for h in range(layout.shape[0])], dim=1)
    heads = "" if layout.ndim == 2 else f", per head of {layout.shape[0]}"
    attend.__name__ = f"block_sparse({int(layout.sum())} blocks of {block}{heads})"
    return attend


class SparseClassifier(nn.Module):
    """A small Transformer encoder on sparse attention that classifies a sequence from token 0.

    tokens (B, N) -> token + learned position embeddings -> `layers` pre-norm blocks
    [x + attn(LN x); x + MLP(LN x)] -> LN -> linear on position 0 -> logits (B, n_classes).
    attn = `MultiHeadAttention(d_model, num_heads, attend=attend)`, e.g.
    attend = `window_attend(w=8, global_idx=[0])`, the same kernel in every layer, or a list of
    `layers` kernels, one per layer (BigBird's random blocks differ from layer to layer).
    Reading position 0 is the point: what token 0 can know after L layers is exactly what the
    pattern lets flow to it in L hops.
    """

    @checked(layers="int >= 1", rules=[c.kernels_per_layer])
    def __init__(self, vocab: int, max_len: int, d_model: int, num_heads: int, layers: int,
                 attend, n_classes: int = 2):
        super().__init__()
        attends = list(attend) if isinstance(attend, (list, tuple)) else [attend] * layers
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.attn = nn.ModuleList(MultiHeadAttention(d_model, num_heads, attend=fn)
                                  for fn in attends)
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(),
                                               nn.Linear(2 * d_model, d_model))
                                 for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * layers + 1))
        self.head = nn.Linear(d_model, n_classes)

    @checked(tokens="int (B, N<=self.position.shape.0) < self.embed")
    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[: tokens.shape[1]]  # (B, N, D)
        for layer, (attn, mlp) in enumerate(zip(self.attn, self.mlp)):
            x = x + attn(self.norms[2 * layer](x))[0]
            x = x + mlp(self.norms[2 * layer + 1](x))
        return self.head(self.norms[-1](x[:, 0]))  # (B, n_classes)
