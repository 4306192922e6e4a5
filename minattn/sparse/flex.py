"""FlexAttention's block masks for the sparse patterns: the fast path of the CUDA dispatch.

Read `kernels.py` and `../multiscale/fast.py` first, then `dispatch.py` (who runs what).
FlexAttention (`torch.nn.attention.flex_attention`), compiled with `torch.compile`, is one fused
kernel, forward and backward, that visits only the tiles a `BlockMask` lists. A BlockMask is
the pattern seen at the scale of tiles of T × T (query tile I, key tile J; T = 128 on the
GPU): for every query tile, the key tiles with at least one allowed pair, in two lists,

    full tiles     every pair allowed: the kernel computes the tile without asking
    partial tiles  some pairs allowed: the kernel asks `mask_mod(b, h, i, j) -> bool` per pair

and the tiles in neither list are skipped, so the work grows with the number of listed tiles.
This file computes the lists from each pattern's arithmetic (`window_tiles_np`,
`layout_tiles_np`, `multiscale_tiles_np`: interval tests on tile pairs, never an (N, N) grid),
writes each pattern's `mask_mod` (the predicate of its NumPy mask in `patterns.py` /
`multiscale/reference.py`), caches the BlockMask per (N, pattern, device), and runs flex:

    flex_window_attention, flex_block_sparse_attention, flex_multiscale_attention

The multi-scale layer is one call for all heads: its BlockMask has one tile list per head (a
head with a small window visits few tiles), and with key padding one per sequence and head,
without the tiles that hold only padded keys. Compiling, and refusing the eager fallback, is
`compiled.py`'s job.

Each equals dense masked attention on the NumPy mask of the same pattern. On the CPU the tests
run FlexAttention's eager (unfused) forward in float64 against it and compare the tile lists
with `patterns.block_layout_np` of the mask; the `cuda`-marked tests run the compiled kernel,
forward and backward, in float32 on a GPU.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import torch

from ..attention import check_attention_inputs, visible_inputs
from ..checks import as_numpy, fail, shape_str
from .compiled import compiled_flex_attention
from .patterns import check_global_idx, check_int, check_windows

TILE = 128  # FlexAttention's tile T on the GPU (its default block size)
FLEX_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
FLEX_HEAD_DIMS = (16, 32, 64, 128, 256)  # head sizes flex's GPU kernel is known to take


@functools.lru_cache(maxsize=1)
def flex_available() -> bool:
    """Does this torch have FlexAttention (torch >= 2.5)?"""
    try:
        from torch.nn.attention.flex_attention import BlockMask, flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


# ============================================================================ tiles
def _tile_bounds(n: int, tile: int) -> tuple[np.ndarray, np.ndarray]:
    """First and last position of each tile (the last tile may be shorter): (nt,), (nt,)."""
    starts = np.arange(-(-n // tile)) * tile
    return starts, np.minimum(starts + tile, n) - 1


def window_tiles_np(n: int, w: int, dilation: int = 1, causal: bool = False, global_idx=None,
                    tile: int = TILE) -> tuple[np.ndarray, np.ndarray]:
    """The tile lists of `window_attention_torch`'s pattern: (partial, full), (nt, nt) bool each.

    In tile pair (I, J) the differences i − j run over the whole interval [lo, hi] (lo = first
    query − last key, hi = last query − first key). The window allows i − j in [−wδ, wδ]
    ([0, wδ] when causal) that δ divides. So the tile holds an allowed pair iff that interval
    meets [lo, hi] at a multiple of δ, and every pair is allowed iff [lo, hi] lies inside it
    (and δ = 1, or the tile is one pair). Global rows and columns add partial tiles.
    """
    n, tile = check_int("n", n, 1), check_int("tile", tile, 1)
    w, dilation = check_int("window w", w, 0), check_int("dilation", dilation, 1)
    starts, ends = _tile_bounds(n, tile)
    lo = starts[:, None] - ends[None, :]  # (nt, nt): the smallest i - j in each tile pair
    hi = ends[:, None] - starts[None, :]  # the largest
    allowed_lo, allowed_hi = (0 if causal else -w * dilation), w * dilation
    a, b = np.maximum(lo, allowed_lo), np.minimum(hi, allowed_hi)
    touched = (a <= b) & (b // dilation * dilation >= a)  # a multiple of δ in [a, b]
    full = (lo >= allowed_lo) & (hi <= allowed_hi) & ((dilation == 1) | ((lo == hi)
                                                                        & (lo % dilation == 0)))
    g = check_global_idx(global_idx, n)
    if g.size:  # global query rows see every key (j <= i if causal); global keys are seen by all
        g_tile = g // tile
        if causal:
            last_g, first_g = np.full(len(starts), -1), np.full(len(starts), n)
            np.maximum.at(last_g, g_tile, g)  # the last global query of each tile
            np.minimum.at(first_g, g_tile, g)  # the first global key of each tile
            touched |= starts[None, :] <= last_g[:, None]  # some key j <= a global query i
            touched |= ends[:, None] >= first_g[None, :]  # some query i >= a global key j
        else:
            has_g = np.zeros(len(starts), dtype=bool)
            has_g[g_tile] = True
            touched |= has_g[:, None] | has_g[None, :]
    return touched & ~full, full


def check_layout(layout, block: int, n: int) -> np.ndarray:
    """A block layout as a contiguous (nb, nb) bool NumPy array, nb = ceil(N / block)."""
    block = check_int("block", block, 1)
    layout = as_numpy(layout)
    nb = -(-n // block)
    if layout.dtype != np.bool_ or layout.shape != (nb, nb):
        fail("block layout does not fit", f"bool of shape ({nb}, {nb}) for N={n}, "
             f"block={block}", f"{layout.dtype} of shape {shape_str(layout.shape)}")
    return np.ascontiguousarray(layout)


def layout_tiles_np(layout, block: int, n: int, causal: bool = False,
                    tile: int = TILE) -> tuple[np.ndarray, np.ndarray]:
    """The tile lists of a block layout (blocks of `block`, `sparse.block_mask_np`), ∩ j <= i
    when causal: (partial, full), (nt, nt) bool each.

    Layout blocks and tiles both cut the positions into cells of g = gcd(block, T): the
    layout is read cell by cell (a cell pair is wholly allowed or wholly not, except on the
    diagonal under causal), and a tile is the union of its (T/g)² cells.
    """
    layout = check_layout(layout, block, n)
    tile = check_int("tile", tile, 1)
    g = math.gcd(block, tile)
    nc = -(-n // g)  # cells
    cells = np.repeat(np.repeat(layout, block // g, 0), block // g, 1)[:nc, :nc]
    some, every = cells.copy(), cells.copy()
    if causal:
        first, last = _tile_bounds(n, g)
        some &= first[None, :] <= last[:, None]  # some key of the cell is not after some query
        every &= last[None, :] <= first[:, None]  # no key of the cell after any query
    r, nt = tile // g, -(-n // tile)
    pad = nt * r - nc  # cells past N: no pair, so "every pair allowed" holds for them
    some = np.pad(some, ((0, pad), (0, pad))).reshape(nt, r, nt, r).any(axis=(1, 3))
    every = np.pad(every, ((0, pad), (0, pad)), constant_values=True)
    full = every.reshape(nt, r, nt, r).all(axis=(1, 3)) & some
    return some & ~full, full


def multiscale_tiles_np(n: int, windows, tile: int = TILE) -> tuple[np.ndarray, np.ndarray]:
    """Per-head window tile lists of a multi-scale layer: (partial, full), (H, nt, nt) bool."""
    parts = [window_tiles_np(n, w, tile=tile) for w in check_windows(windows)]
    return np.stack([p for p, _ in parts]), np.stack([f for _, f in parts])


# ============================================================================ mask_mods
# The predicates of patterns.py's masks, in torch ops on index tensors (FlexAttention calls them
# with the tensors b, h, q_idx, kv_idx of a tile, or vmaps them over every pair on the CPU).
def window_mask_mod(w, dilation: int = 1, causal: bool = False, is_global=None):
    """mask_mod of `dilated_window_mask_np(N, w, δ) | global_mask_np(N, G)`, ∩ j <= i if causal:
    |i − j| <= w·δ and δ divides i − j, or i or j global (is_global: (N,) bool tensor). w may
    be a 0-dim tensor: the compiled kernel then reads it as an input instead of compiling
    itself again for every new w."""
    def mask_mod(b, h, q_idx, kv_idx):
        diff = q_idx - kv_idx
        ok = diff.abs() <= w * dilation
        if dilation > 1:
            ok = ok & (diff.abs() % dilation == 0)
        if is_global is not None:
            ok = ok | is_global[q_idx] | is_global[kv_idx]
        return ok & (diff >= 0) if causal else ok
    return mask_mod


def layout_mask_mod(layout: torch.Tensor, block: int, causal: bool = False):
    """mask_mod of `block_mask_np(layout, block, N)` (∩ j <= i if causal):
    layout[i // b, j // b]."""
    def mask_mod(b, h, q_idx, kv_idx):
        ok = layout[q_idx // block, kv_idx // block]
        return ok & (kv_idx <= q_idx) if causal else ok
    return mask_mod


def multiscale_mask_mod(windows: torch.Tensor, key_mask: torch.Tensor | None = None):
    """mask_mod of `scale_mask_np(N, ω)` (head h: |i − j| <= ω_h) ∩ the key padding mask:
    windows (H,) int tensor, key_mask (B, N) bool or None."""
    def mask_mod(b, h, q_idx, kv_idx):
        ok = (q_idx - kv_idx).abs() <= windows[h]
        return ok if key_mask is None else ok & key_mask[b, kv_idx]
    return mask_mod


# ============================================================================ block masks (cached)
def block_mask_from_tiles(partial, full, n: int, mask_mod, device, tile: int = TILE):
    """A FlexAttention BlockMask from tile lists (..., nt, nt) bool, NumPy or torch (leading
    axes: none, (H,) or (B, H)): for each query tile, the count and the indices of its partial
    and of its full key tiles (listed first, then the rest)."""
    from torch.nn.attention.flex_attention import BlockMask

    def lists(tiles):
        tiles = torch.as_tensor(tiles, device=device)
        tiles = tiles.reshape((1,) * (4 - tiles.ndim) + tuple(tiles.shape))  # (B, H, nt, nt)
        order = (~tiles).to(torch.int8).argsort(dim=-1, stable=True)  # listed tiles first
        return tiles.sum(-1, dtype=torch.int32), order.to(torch.int32)

    kv_num, kv_idx = lists(partial)
    full_num, full_idx = lists(full)
    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=tile,
                                    mask_mod=mask_mod, seq_lengths=(n, n))


@functools.lru_cache(maxsize=32)
def window_block_mask(n: int, w: int, dilation: int = 1, causal: bool = False,
                      global_idx: tuple = (), device="cpu", tile: int = TILE):
    """The BlockMask of the window pattern (cached per N, pattern, device, tile)."""
    device = torch.device(device)
    g = check_global_idx(list(global_idx), n)
    is_global = None
    if g.size:
        is_global = torch.zeros(n, dtype=torch.bool, device=device)
        is_global[torch.as_tensor(g, device=device)] = True
    partial, full = window_tiles_np(n, w, dilation, causal, g, tile)
    mask_mod = window_mask_mod(torch.tensor(w, device=device), dilation, causal, is_global)
    return block_mask_from_tiles(partial, full, n, mask_mod, device, tile)


@functools.lru_cache(maxsize=16)
def _layout_block_mask(layout_bytes: bytes, nb: int, block: int, n: int, causal: bool, device,
                       tile: int):
    layout = np.frombuffer(layout_bytes, dtype=np.bool_).reshape(nb, nb)
    partial, full = layout_tiles_np(layout, block, n, causal, tile)
    mask_mod = layout_mask_mod(torch.as_tensor(layout.copy(), device=device), block, causal)
    return block_mask_from_tiles(partial, full, n, mask_mod, device, tile)


def layout_block_mask(layout, block: int, n: int, causal: bool = False, device="cpu",
                      tile: int = TILE):
    """The BlockMask of a block layout (cached per layout, N, device, tile)."""
    layout = check_layout(layout, block, n)
    return _layout_block_mask(layout.tobytes(), len(layout), block, n, bool(causal),
                              torch.device(device), tile)


@functools.lru_cache(maxsize=16)
def _multiscale_tiles(n: int, windows: tuple, device, tile: int):
    """Per-head tile lists (H, nt, nt) as tensors on the device, and the windows (H,)."""
    partial, full = multiscale_tiles_np(n, list(windows), tile)
    return (torch.from_numpy(partial).to(device), torch.from_numpy(full).to(device),
            torch.tensor(windows, device=device))


@functools.lru_cache(maxsize=16)
def _multiscale_block_mask(n: int, windows: tuple, device, tile: int):
    partial, full, windows_t = _multiscale_tiles(n, windows, device, tile)
    return block_mask_from_tiles(partial, full, n, multiscale_mask_mod(windows_t), device, tile)


def padded_tiles(full: torch.Tensor, windows: torch.Tensor, key_mask: torch.Tensor, n: int,
                 tile: int = TILE) -> tuple[torch.Tensor, torch.Tensor]:
    """The tile lists of per-head windows (H,) within each sequence's real keys, key_mask (B, N)
    bool: (partial, full), (B, H, nt, nt) each; `full` (H, nt, nt) are the windows' own full
    tiles. The queries of tile I see the keys [first(I) − ω, last(I) + ω]: the tile pair holds
    an allowed pair iff a real key of tile J lies in that interval (counted from prefix sums of
    the key mask), so no listed tile is wholly masked. A full tile stays full where every key
    of J is real. Computed on the device, no copy to the host."""
    nt, device = full.shape[-1], full.device
    starts = torch.arange(nt, device=device) * tile
    ends = (starts + tile).clamp(max=n) - 1
    w = windows.to(device)[:, None, None]  # (H, 1, 1)
    lo = torch.maximum(starts[None, None, :], starts[None, :, None] - w)  # (H, nt, nt)
    hi = torch.minimum(ends[None, None, :], ends[None, :, None] + w)
    seen = torch.cat([key_mask.new_zeros(key_mask.shape[0], 1, dtype=torch.long),
                      key_mask.long().cumsum(-1)], dim=-1)  # (B, N + 1): real keys before j
    some = (hi >= lo) & (seen[:, hi + 1] - seen[:, lo] > 0)  # (B, H, nt, nt)
    tail = key_mask.new_ones(key_mask.shape[0], nt * tile - n)  # past N: no key to hide
    all_real = torch.cat([key_mask, tail], dim=-1).view(-1, nt, tile).all(-1)  # (B, nt)
    full_b = full & all_real[:, None, None, :]
    return some & ~full_b, full_b


def multiscale_block_mask(n: int, windows, key_mask=None, device="cpu", tile: int = TILE):
    """The BlockMask of per-head windows (H tile lists; cached per N, windows, device, tile).
    With a key padding mask (B, N) the tile lists are narrowed per sequence (`padded_tiles`)
    and the mask_mod also hides the padded keys; that mask is built per call."""
    device = torch.device(device)
    windows = tuple(check_windows(windows))
    if key_mask is None:
        return _multiscale_block_mask(n, windows, device, tile)
    _, full, windows_t = _multiscale_tiles(n, windows, device, tile)
    key_mask = key_mask.to(device=device, dtype=torch.bool)
    partial, full = padded_tiles(full, windows_t, key_mask, n, tile)
    return block_mask_from_tiles(partial, full, n, multiscale_mask_mod(windows_t, key_mask),
                                 device, tile)


def run_flex(q, k, v, block_mask, scale=None, compiled: bool | None = None):
    """flex_attention(q, k, v, block_mask=...) on (B, H, N, d): compiled on a GPU (one fused
    kernel; `compiled.py`: a call the compiler would run eagerly raises FlexNotCompiledError),
    eager elsewhere (an unfused reference that builds every score: for tests, forward only —
    FlexAttention has no backward on the CPU)."""
    from torch.nn.attention.flex_attention import flex_attention

    compiled = q.device.type == "cuda" if compiled is None else compiled
    if q.device.type == "cpu" and torch.is_grad_enabled() and any(
            x.requires_grad for x in (q, k, v)):
        fail("FlexAttention on the CPU", "inputs without gradients (it has no CPU backward: "
             "use the readable kernels there)", "inputs that require grad")
    if compiled:
        return compiled_flex_attention(q, k, v, block_mask, scale)
    with warnings.catch_warnings():  # "called without torch.compile": we know, it is the reference
        warnings.simplefilter("ignore", UserWarning)
        return flex_attention(q, k, v, block_mask=block_mask, scale=scale)


# ============================================================================ the kernels
def _as_4d(x: torch.Tensor) -> torch.Tensor:
    """(..., N, d) -> (B', 1, N, d): every leading axis becomes FlexAttention's batch."""
    return x.reshape(-1, 1, *x.shape[-2:])


def check_self_attention(q, k, v):
    """q, k, v of attention (`check_attention_inputs`) with one length N for queries and keys,
    finite (every position sees itself: nothing is hidden)."""
    check_attention_inputs(q, k, v)
    visible_inputs(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        fail("sparse patterns are self-attention: queries and keys must have one length N",
             f"k of length {q.shape[-2]}", f"q {shape_str(q.shape)}, k {shape_str(k.shape)}")


def flex_window_attention(q, k, v, w: int, *, dilation: int = 1, causal: bool = False,
                          global_idx=None, scale: float | None = None, tile: int = TILE,
                          compiled: bool | None = None) -> torch.Tensor:
    """`window_attention_torch`'s pattern through FlexAttention: q, k (..., N, d), v (..., N, dv)
    -> (..., N, dv), equal to dense masked attention on
    dilated_window_mask_np(N, w, δ) | global_mask_np(N, G)  (∩ j <= i when causal)."""
    check_self_attention(q, k, v)
    n = q.shape[-2]
    g = tuple(int(x) for x in check_global_idx(global_idx, n))
    block_mask = window_block_mask(n, check_int("window w", w, 0),
                                   check_int("dilation", dilation, 1), bool(causal), g,
                                   q.device, tile)
    out = run_flex(_as_4d(q), _as_4d(k), _as_4d(v), block_mask, scale, compiled)
    return out.reshape(*q.shape[:-1], v.shape[-1])


def flex_block_sparse_attention(q, k, v, layout, block: int, causal: bool = False,
                                scale: float | None = None, tile: int = TILE,
                                compiled: bool | None = None) -> torch.Tensor:
    """`block_sparse_attention_torch` through FlexAttention (same arguments and result; a
    query with no allowed key gets zeros)."""
    check_self_attention(q, k, v)
    n = q.shape[-2]
    block_mask = layout_block_mask(layout, block, n, causal, q.device, tile)
    out = run_flex(_as_4d(q), _as_4d(k), _as_4d(v), block_mask, scale, compiled)
    return out.reshape(*q.shape[:-1], v.shape[-1])


def flex_multiscale_attention(q, k, v, windows, key_mask: torch.Tensor | None = None,
                              tile: int = TILE, compiled: bool | None = None) -> torch.Tensor:
    """`multiscale_attention_fast_torch` through FlexAttention, one call for all heads:
    q, k, v (B, H, N, d), windows (H,), key_mask (B, N) bool or None -> (B, H, N, d). A query
    whose window holds no real key gets zeros, as in the reference."""
    check_self_attention(q, k, v)
    if q.ndim != 4:
        fail("q, k, v of multi-scale attention", "(B, H, N, d)", shape_str(q.shape))
    ws = check_windows(windows, q.shape[1])
    n = q.shape[-2]
    if key_mask is not None:
        key_mask = key_mask.expand(q.shape[0], n).contiguous()
    block_mask = multiscale_block_mask(n, ws, key_mask, q.device, tile)
    return run_flex(q, k, v, block_mask, None, compiled)
