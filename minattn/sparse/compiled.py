"""Compiled FlexAttention without a silent fall to O(N²): `compiled_flex_attention`.

Read `flex.py` first. torch.compile keeps its compiled versions of a function per code object,
at most `torch._dynamo.config.recompile_limit` (8) of them: a new dtype, a new mask_mod, a new
constant in one, gradients on or off, and at first every new length, each adds one. Past the
limit it runs the function eagerly, and eager FlexAttention builds every score: O(N²) memory
and 10-80x the time. On one H100 that happened without an error, after float32 calls at two
lengths and then bfloat16 (20 ms and 3.3 GB instead of 2 ms and 16 MiB at N = 4,096). So here

  * every `specialization` (mask_mod, the constants it closes over, device, dtype, head size,
    kernel options, gradients or not) gets its own compiled copy of `_flex_call`, a function
    with its own code object, so its own versions and its own limit;
  * sizes are compiled dynamic, each its own (no "duck sizing"): one version serves every N, B
    and H;
  * a call the compiler would still run eagerly raises FlexNotCompiledError (the dispatch then
    runs dense SDPA up to DENSE_MAX, or passes the error on) instead of building the scores.

The tests (tests/test_flex_compiled.py) run ten lengths in two dtypes through it in one process
and check that nothing falls back: on the CPU behind MINATTN_COMPILE_TESTS=1, on CUDA in the
`cuda` tier, there with peak memory O(N·w).
"""

from __future__ import annotations

import contextlib
import functools
import types

import torch


class FlexNotCompiledError(RuntimeError):
    """A FlexAttention call the compiler did not compile (eagerly it would build all N² scores)."""


# float32 on CUDA: each product as three TF32 tensor-core products ("tf32x3", close to float32's
# accuracy), as the memory-efficient SDPA kernel that float32 runs on does from sm80 on
# (CUTLASS's OpMultiplyAddFastF32); FlexAttention's default there ("ieee") uses the plain CUDA
# cores. Not yet measured: `benchmarks/multiscale.py --device cuda` times both ("flex, ieee").
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
    name TORCH_LOGS=recompiles prints): the compiler keeps its versions per code object."""
    mask_name, _, consts, device, dtype, d, _, _, grads = key
    plain = "".join(f"_{c}" for c in consts if c != "Tensor")  # e.g. a window's δ and causal
    name = (f"flex_{mask_name}{plain}_{device}_{str(dtype).removeprefix('torch.')}_d{d}"
            f"{'_grad' if grads else ''}")
    return types.FunctionType(_flex_call.__code__.replace(co_name=name), globals(), name)


@functools.lru_cache(maxsize=None)
def compiled_copy(key: tuple):
    """The compiled copy of `_flex_call` for one specialization: the whole call one graph
    (fullgraph), its sizes dynamic."""
    return torch.compile(named_copy(key), fullgraph=True, dynamic=True)


def compiled_flex_attention(q, k, v, block_mask, scale=None):
    """Compiled flex_attention(q, k, v, block_mask=..., scale=...) on (B, H, N, d); a call the
    compiler would run eagerly raises FlexNotCompiledError, saying why."""
    from torch._dynamo import exc
    from torch.fx.experimental import _config as shapes

    options = None
    if q.device.type == "cuda" and q.dtype == torch.float32:
        options = {"FLOAT32_PRECISION": repr(CUDA_FLOAT32_PRECISION)}
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
