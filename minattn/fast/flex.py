"""The sparse patterns on a GPU: FlexAttention block masks, compiled, and who runs what.

The kernels of `minattn.fast.sparse` are written for reading and tuned for a CPU: the window
kernel's hand-written backward is a Python loop over small blocks, each a few tiny kernel
launches, which on a GPU costs more than it saves. PyTorch has the right tools there; this file
hands the patterns to them, in three parts:

  * FlexAttention (`torch.nn.attention.flex_attention`), compiled with `torch.compile`, is one
    fused kernel, forward and backward, that visits only the tiles a `BlockMask` lists. A
    BlockMask is the pattern seen at the scale of tiles of T × T (T = 128 on the GPU): for every
    query tile, the key tiles with at least one allowed pair, in two lists,
        full tiles     every pair allowed: the kernel computes the tile without asking
        partial tiles  some pairs allowed: it asks `mask_mod(b, h, i, j) -> bool` per pair
    and the tiles in neither list are skipped. The lists are computed from each pattern's
    arithmetic (`window_tiles_np`, `layout_tiles_np`, `multiscale_tiles_np`: interval tests on
    tile pairs, never an (N, N) grid); each `mask_mod` is the predicate of its NumPy mask.
  * Compiled without a silent fall to O(N²) (`compiled_flex_attention`): past its recompile
    limit torch.compile runs a function eagerly, and eager FlexAttention builds every score.
    Here every kind of call gets its own compiled copy with dynamic sizes, and a call the
    compiler would still run eagerly raises FlexNotCompiledError instead.
  * The routes, chosen by the caller by name: `window_attention_routed_fast_torch` and
    `block_sparse_attention_routed_fast_torch` run, by `choose_kernel`'s decision,
        "readable"  the kernels of minattn.fast.sparse: on the CPU, in float64;
        "dense"     fused SDPA with the pattern's (N, N) mask, on CUDA for N < FLEX_FROM[dtype];
        "flex"      compiled FlexAttention from there on (where the compiler refuses, dense SDPA
                    up to DENSE_MAX with a warning that says why, above it the error).
    The multi-scale layer (lesson 03) routes the same way with MULTISCALE_FLEX_FROM.
The thresholds are measurements: benchmarks/README.md, "On a GPU (CUDA)", gives them with their
files, and tests/test_gpu_dispatch.py checks the routes against those files. Every route equals
dense masked attention on the NumPy mask of the same pattern (float64 on the CPU; the
`cuda`-marked tests run the compiled kernels, forward and backward, on a GPU).
"""

from __future__ import annotations

import contextlib
import functools
import math
import types
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from .. import checks as c
from ..contract import checked, fail
from ..sparse import (
    block_mask_np,
    global_positions,
    hide_unseen_blocks,
    layout_array,
    longformer_mask_np,
)
from .attention import attention_fast_torch
from .sparse import block_sparse_attention_fast_torch, window_attention_fast_torch

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


@checked(n="int >= 1", w="int", dilation="int >= 1", tile="int >= 1",
         rules=[c.global_positions_of])
def window_tiles_np(n: int, w: int, dilation: int = 1, causal: bool = False, global_idx=None,
                    tile: int = TILE) -> tuple[np.ndarray, np.ndarray]:
    """The tile lists of the window pattern (`longformer_mask_np`): (partial, full), (nt, nt)
    bool each.

    In tile pair (I, J) the differences i − j run over the whole interval [lo, hi] (lo = first
    query − last key, hi = last query − first key). The window allows i − j in [−wδ, wδ]
    ([0, wδ] when causal) that δ divides. So the tile holds an allowed pair iff that interval
    meets [lo, hi] at a multiple of δ, and every pair is allowed iff [lo, hi] lies inside it
    (and δ = 1, or the tile is one pair). Global rows and columns add partial tiles.
    """
    starts, ends = _tile_bounds(n, tile)
    lo = starts[:, None] - ends[None, :]  # (nt, nt): the smallest i - j in each tile pair
    hi = ends[:, None] - starts[None, :]  # the largest
    allowed_lo, allowed_hi = (0 if causal else -w * dilation), w * dilation
    a, b = np.maximum(lo, allowed_lo), np.minimum(hi, allowed_hi)
    touched = (a <= b) & (b // dilation * dilation >= a)  # a multiple of δ in [a, b]
    full = (lo >= allowed_lo) & (hi <= allowed_hi) & ((dilation == 1) | ((lo == hi)
                                                                        & (lo % dilation == 0)))
    g = global_positions(global_idx)  # sorted int64, from a list too
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


@checked(block="int >= 1", n="int >= 1", tile="int >= 1", rules=[c.layout_fits])
def layout_tiles_np(layout, block: int, n: int, causal: bool = False,
                    tile: int = TILE) -> tuple[np.ndarray, np.ndarray]:
    """The tile lists of a block layout (blocks of `block`, `block_mask_np`), ∩ j <= i when
    causal: (partial, full), (nt, nt) bool each.

    Layout blocks and tiles both cut the positions into cells of g = gcd(block, T): the
    layout is read cell by cell (a cell pair is wholly allowed or wholly not, except on the
    diagonal under causal), and a tile is the union of its (T/g)² cells.
    """
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


@checked(n="int >= 1", tile="int >= 1", rules=[c.windows_given])
def multiscale_tiles_np(n: int, windows, tile: int = TILE) -> tuple[np.ndarray, np.ndarray]:
    """Per-head window tile lists of a multi-scale layer: (partial, full), (H, nt, nt) bool."""
    parts = [window_tiles_np(n, w, tile=tile) for w in windows]
    return np.stack([p for p, _ in parts]), np.stack([f for _, f in parts])


# ============================================================================ mask_mods
# The predicates of the NumPy masks, in torch ops on index tensors (FlexAttention calls them
# with the tensors b, h, q_idx, kv_idx of a tile, or vmaps them over every pair on the CPU).
def window_mask_mod(w, dilation: int = 1, causal: bool = False, is_global=None):
    """mask_mod of `longformer_mask_np(N, w, δ, G, causal)`: |i − j| <= w·δ and δ divides
    i − j, or i or j global (is_global: (N,) bool tensor), ∩ j <= i if causal. w may be a 0-dim
    tensor: the compiled kernel then reads it as an input instead of compiling itself again
    for every new w."""
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
    g = c.check_global_idx(list(global_idx), n)
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
    layout = c.check_layout(layout, block, n)
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
    windows = tuple(c.check_windows(windows))
    if key_mask is None:
        return _multiscale_block_mask(n, windows, device, tile)
    _, full, windows_t = _multiscale_tiles(n, windows, device, tile)
    key_mask = key_mask.to(device=device, dtype=torch.bool)
    partial, full = padded_tiles(full, windows_t, key_mask, n, tile)
    return block_mask_from_tiles(partial, full, n, multiscale_mask_mod(windows_t, key_mask),
                                 device, tile)


# ============================================================================ compiled
class FlexNotCompiledError(RuntimeError):
    """A FlexAttention call the compiler did not compile (eagerly it would build all N² scores)."""


# float32 on CUDA: each product as three TF32 tensor-core products ("tf32x3", close to float32's
# accuracy), as the memory-efficient SDPA kernel that float32 runs on does from sm80 on;
# FlexAttention's default there ("ieee") uses the plain CUDA cores.
CUDA_FLOAT32_PRECISION = "tf32x3"


def _flex_call(q, k, v, block_mask, scale, kernel_options):
    """What torch.compile compiles. Compiled, this body is traced once and never runs as Python;
    where the compiler gives up on a call it runs the body as plain Python, and there
    is_compiling() is False."""
    if not torch.compiler.is_compiling():
        raise FlexNotCompiledError("the compiler ran a FlexAttention call eagerly")
    from torch.nn.attention.flex_attention import flex_attention
    return flex_attention(q, k, v, block_mask=block_mask, scale=scale,
                          kernel_options=kernel_options)


def specialization(q, k, v, block_mask, kernel_options=None) -> tuple:
    """What a compiled version is specialized on, besides sizes: the mask_mod (its name, its
    code, the plain values it closes over; the tensors it reads are inputs), the device type,
    dtype, head sizes, kernel options, and whether gradients are wanted."""
    mask_mod = block_mask.mask_mod
    cells = [c.cell_contents for c in mask_mod.__closure__ or ()]
    consts = tuple(x if isinstance(x, (bool, int, float, str, type(None))) else type(x).__name__
                   for x in cells)
    grads = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    return (mask_mod.__qualname__.split(".")[0], mask_mod.__code__, consts, q.device.type,
            q.dtype, q.shape[-1], v.shape[-1], tuple(sorted((kernel_options or {}).items())),
            grads)


def named_copy(key: tuple):
    """A copy of `_flex_call` with its own code object, named after the specialization (the
    name TORCH_LOGS=recompiles prints): the compiler keeps its versions per code object, at
    most `torch._dynamo.config.recompile_limit` of them."""
    mask_name, _, consts, device, dtype, d, _, _, grads = key
    plain = "".join(f"_{c}" for c in consts if c != "Tensor")  # e.g. a window's δ and causal
    name = (f"flex_{mask_name}{plain}_{device}_{str(dtype).removeprefix('torch.')}_d{d}"
            f"{'_grad' if grads else ''}")
    return types.FunctionType(_flex_call.__code__.replace(co_name=name), globals(), name)


@functools.lru_cache(maxsize=None)
def compiled_copy(key: tuple):
    """The compiled copy of `_flex_call` for one specialization: the whole call one graph
    (fullgraph), its sizes dynamic (one version serves every N, B and H)."""
    return torch.compile(named_copy(key), fullgraph=True, dynamic=True)


def kernel_options(q) -> dict | None:
    """The kernel options a compiled call on q passes: float32 on CUDA multiplies as
    CUDA_FLOAT32_PRECISION says; everything else takes FlexAttention's defaults (None)."""
    if q.device.type == "cuda" and q.dtype == torch.float32:
        return {"FLOAT32_PRECISION": repr(CUDA_FLOAT32_PRECISION)}
    return None


def compiled_flex_attention(q, k, v, block_mask, scale=None):
    """Compiled flex_attention(q, k, v, block_mask=..., scale=...) on (B, H, N, d); a call the
    compiler would run eagerly raises FlexNotCompiledError, saying why."""
    from torch._dynamo import exc
    from torch.fx.experimental import _config as shapes

    options = kernel_options(q)
    fn = compiled_copy(specialization(q, k, v, block_mask, options))
    limit_hit = getattr(exc, "FailOnRecompileLimitHit", FlexNotCompiledError)
    try:
        # Sizes equal by chance in the first call (say B·H = 2 and 2 tiles) stay separate sizes:
        # with "duck sizing" the compiler would assume them equal, and recompile when they part.
        with (shapes.patch(use_duck_shape=False) if hasattr(shapes, "use_duck_shape")
              else contextlib.nullcontext()):
            return fn(q, k, v, block_mask, scale, options)
    except (FlexNotCompiledError, limit_hit) as err:
        raise FlexNotCompiledError(
            f"compiled FlexAttention ({fn.__name__}, N = {q.shape[-2]}): the compiler would have "
            f"run this call eagerly ({err}), building all N² scores; refused. "
            "TORCH_LOGS=recompiles shows why it recompiled, torch._dynamo.config.recompile_limit "
            "how often it may.") from err


def run_flex(q, k, v, block_mask, scale=None, compiled: bool | None = None):
    """flex_attention(q, k, v, block_mask=...) on (B, H, N, d): compiled on a GPU (one fused
    kernel; a call the compiler would run eagerly raises FlexNotCompiledError), eager elsewhere
    (an unfused reference that builds every score: for tests, forward only — FlexAttention has
    no backward on the CPU)."""
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


# ============================================================================ the flex kernels
def _as_4d(x: torch.Tensor) -> torch.Tensor:
    """(..., N, d) -> (B', 1, N, d): every leading axis becomes FlexAttention's batch."""
    return x.reshape(-1, 1, *x.shape[-2:])


@checked(q="float (..., N, d)", k="float (..., N, d)", v="float (..., N, dv)",
         w="int", dilation="int >= 1", scale="number?", tile="int >= 1",
         rules=[c.global_positions_of])
def flex_window_attention(q, k, v, w: int, *, dilation: int = 1, causal: bool = False,
                          global_idx=None, scale: float | None = None, tile: int = TILE,
                          compiled: bool | None = None) -> torch.Tensor:
    """`window_attention_torch`'s pattern through FlexAttention: q, k (..., N, d), v (..., N, dv)
    -> (..., N, dv), equal to dense masked attention on longformer_mask_np(N, w, δ, G, causal)."""
    g = () if global_idx is None else tuple(int(x) for x in global_idx)
    block_mask = window_block_mask(q.shape[-2], w, dilation, bool(causal), g, q.device, tile)
    out = run_flex(_as_4d(q), _as_4d(k), _as_4d(v), block_mask, scale, compiled)
    return out.reshape(*q.shape[:-1], v.shape[-1])


@checked(q="float* (..., N, d)", k="float* (..., N, d)", v="float* (..., N, dv)",
         block="int >= 1", scale="number?", tile="int >= 1",
         rules=[c.layout_seen_finite])
def flex_block_sparse_attention(q, k, v, layout, block: int, causal: bool = False,
                                scale: float | None = None, tile: int = TILE,
                                compiled: bool | None = None) -> torch.Tensor:
    """`block_sparse_attention_torch` through FlexAttention (same arguments and result; a
    query with no allowed key gets zeros)."""
    layout = layout_array(layout)
    q, k, v = hide_unseen_blocks(q, k, v, layout, block, causal)  # hidden: may hold garbage
    block_mask = layout_block_mask(layout, block, q.shape[-2], causal, q.device, tile)
    out = run_flex(_as_4d(q), _as_4d(k), _as_4d(v), block_mask, scale, compiled)
    return out.reshape(*q.shape[:-1], v.shape[-1])


@checked(q="float (B, H, N, d)", k="float (B, H, N, d)", v="float (B, H, N, dv)",
         key_mask="bool? ~(B, N)", library=torch.Tensor)
def flex_multiscale_attention(q, k, v, windows, key_mask: torch.Tensor | None = None,
                              tile: int = TILE, compiled: bool | None = None) -> torch.Tensor:
    """`multiscale_attention_fast_torch` through FlexAttention, one call for all heads:
    q, k, v (B, H, N, d), windows (H,), key_mask (B, N) bool or None -> (B, H, N, d). A query
    whose window holds no real key gets zeros, as in the reference."""
    ws = c.check_windows(windows, q.shape[1])
    n = q.shape[-2]
    if key_mask is not None:
        key_mask = key_mask.expand(q.shape[0], n).contiguous()
    block_mask = multiscale_block_mask(n, ws, key_mask, q.device, tile)
    return run_flex(q, k, v, block_mask, None, compiled)


# ============================================================================ who runs what
# From this N on, CUDA runs FlexAttention; below it, dense SDPA with the (N, N) mask (measured on
# one H100 with head size 64: benchmarks/README.md, "On a GPU (CUDA)", "The routes").
FLEX_FROM = {torch.float32: 4096, torch.bfloat16: 8192, torch.float16: 8192}
MULTISCALE_FLEX_FROM = {torch.float32: 4096, torch.bfloat16: 4096, torch.float16: 4096}
DENSE_MAX = 16384  # the largest N whose (N, N) mask the dense route builds (256 MiB as bool)
KERNELS = ("auto", "readable")
PATTERNS = {"window": FLEX_FROM, "multiscale": MULTISCALE_FLEX_FROM}  # block layouts: "window"
_policy = "auto"


@contextlib.contextmanager
def kernel_policy(policy: str):
    """`with kernel_policy("readable"):` makes `choose_kernel` pick the readable kernels on
    every device, for code inside the block that routes through it (benchmarks/multiscale.py
    times lesson 03's layer that way); "auto" is the default. Code the caller writes, never the
    environment."""
    global _policy
    if policy not in KERNELS:
        fail("kernel policy", " or ".join(map(repr, KERNELS)), repr(policy))
    old, _policy = _policy, policy
    try:
        yield
    finally:
        _policy = old


@checked(n="int", d="int >= 1", dv="int? >= 1", policy="one of? auto, readable",
         pattern="one of window, multiscale")
def choose_kernel(device, n: int, dtype=torch.float32, d: int = 64, dv: int | None = None,
                  policy: str | None = None, pattern: str = "window") -> str:
    """Which kernel computes a sparse pattern over N positions: "readable", "dense" or "flex".

    "readable": the kernels of minattn.fast.sparse (multiscale: its own fast path) — on the CPU
    (where they were measured fastest, and where FlexAttention has no backward), for float64
    (exact comparisons), and under the policy "readable". "dense": fused SDPA with the (N, N)
    mask, on CUDA for N < FLEX_FROM[dtype] (MULTISCALE_FLEX_FROM for pattern="multiscale"; and
    for head sizes flex does not take, up to DENSE_MAX). "flex": compiled FlexAttention.
    """
    device = torch.device(device)  # "cuda" or "cpu" too
    policy = _policy if policy is None else policy
    if policy == "readable" or device.type != "cuda" or dtype not in FLEX_DTYPES:
        return "readable"
    if n < PATTERNS[pattern][dtype]:
        return "dense"
    if flex_available() and d == (dv or d) and d in FLEX_HEAD_DIMS:
        return "flex"
    return "dense" if n <= DENSE_MAX else "readable"


def _flex_or_dense(flex_route, dense_route, n: int):
    """flex_route(); where the compiler refused it (FlexNotCompiledError) and N <= DENSE_MAX,
    dense_route() with a warning that says why (None when dense_route is None: the caller runs
    its dense call); above DENSE_MAX the error itself."""
    try:
        return flex_route()
    except FlexNotCompiledError as err:
        if n > DENSE_MAX:
            raise
        warnings.warn(f"{err} Dense SDPA with the (N, N) mask runs instead (N = {n:,} <= "
                      f"DENSE_MAX = {DENSE_MAX:,}).", RuntimeWarning, stacklevel=3)
        return dense_route() if dense_route is not None else None


@checked(q="float (..., N, d)", k="float (..., N, d)", v="float (..., N, dv)",
         w="int", dilation="int >= 1", scale="number?", rules=[c.global_positions_of])
def window_attention_routed_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                       w: int, *, dilation: int = 1, causal: bool = False,
                                       global_idx=None, scale: float | None = None
                                       ) -> torch.Tensor:
    """`minattn.sparse.window_attention_torch` on the kernel `choose_kernel` picks for the
    inputs' device, dtype and N: `window_attention_fast_torch` (CPU, float64), fused SDPA with
    the (N, N) mask, or compiled FlexAttention — the same numbers."""
    kw = dict(dilation=dilation, causal=causal, global_idx=global_idx, scale=scale)
    route = choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1])
    if route == "readable":
        return window_attention_fast_torch(q, k, v, w, **kw)
    if route == "dense":
        return dense_window_attention(q, k, v, w, **kw)
    return _flex_or_dense(lambda: flex_window_attention(q, k, v, w, **kw),
                          lambda: dense_window_attention(q, k, v, w, **kw), q.shape[-2])


@checked(q="float* (..., N, d)", k="float* (..., N, d)", v="float* (..., N, dv)",
         block="int >= 1", scale="number?", rules=[c.layout_seen_finite])
def block_sparse_attention_routed_fast_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                             layout, block: int, causal: bool = False,
                                             scale: float | None = None) -> torch.Tensor:
    """`minattn.sparse.block_sparse_attention_torch` on the kernel `choose_kernel` picks:
    `block_sparse_attention_fast_torch`, fused SDPA with the (N, N) mask, or FlexAttention."""
    args = (q, k, v, layout, block, causal, scale)
    route = choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1])
    if route == "readable":
        return block_sparse_attention_fast_torch(*args)
    if route == "dense":
        return dense_block_sparse_attention(*args)
    return _flex_or_dense(lambda: flex_block_sparse_attention(*args),
                          lambda: dense_block_sparse_attention(*args), q.shape[-2])


def routed_multiscale_attention(q, k, v, windows, key_mask=None):
    """The dispatch of `multiscale_attention_fast_torch` (lesson 03): one FlexAttention call
    for all heads, per-head windows, when `choose_kernel(..., pattern="multiscale")` says
    "flex"; else None — and the caller makes one dense SDPA call with the (H, N, N) mask where
    it says "dense" (or where the compiler refused flex), its readable kernels elsewhere."""
    route = choose_kernel(q.device, q.shape[-2], q.dtype, q.shape[-1], v.shape[-1],
                          pattern="multiscale")
    if route != "flex":
        return None
    return _flex_or_dense(lambda: flex_multiscale_attention(q, k, v, windows, key_mask), None,
                          q.shape[-2])


# ============================================================================ the dense route
@functools.lru_cache(maxsize=16)
def _window_mask(n, w, dilation, causal, global_idx, device):
    return torch.as_tensor(longformer_mask_np(n, w, dilation, list(global_idx), causal),
                           device=device)


@checked(q="float (..., N, d)", k="float (..., N, d)", v="float (..., N, dv)",
         w="int", dilation="int >= 1", scale="number?", rules=[c.global_positions_of])
def dense_window_attention(q, k, v, w: int, *, dilation: int = 1, causal: bool = False,
                           global_idx=None, scale: float | None = None) -> torch.Tensor:
    """The window pattern as one fused SDPA call with the (N, N) mask (cached per N, pattern,
    device); the plain fused kernel when the window covers every key. Every query sees itself,
    so no row is empty."""
    n = q.shape[-2]
    g = () if global_idx is None else tuple(int(x) for x in global_idx)
    if dilation == 1 and w >= n - 1:  # the window is everything
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=scale)
    mask = _window_mask(n, w, dilation, bool(causal), g, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


@functools.lru_cache(maxsize=16)
def _layout_mask(layout_bytes, nb, block, n, causal, device):
    layout = np.frombuffer(layout_bytes, dtype=np.bool_).reshape(nb, nb)
    mask = block_mask_np(layout, block, n)
    return torch.as_tensor(np.tril(mask) if causal else mask, device=device)


@checked(q="float* (..., N, d)", k="float* (..., N, d)", v="float* (..., N, dv)",
         block="int >= 1", scale="number?", rules=[c.layout_seen_finite])
def dense_block_sparse_attention(q, k, v, layout, block: int, causal: bool = False,
                                 scale: float | None = None) -> torch.Tensor:
    """The block layout as one fused SDPA call with the (N, N) mask (a query with no allowed
    key gets zeros)."""
    layout = layout_array(layout)
    n = q.shape[-2]
    mask = _layout_mask(layout.tobytes(), len(layout), block, n, bool(causal), q.device)
    return attention_fast_torch(q, k, v, mask=mask, scale=scale)
