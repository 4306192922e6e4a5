"""Compiled FlexAttention without a silent fall to O(N²) (minattn/fast/flex.py).

On one H100, after float32 calls at two lengths, the bfloat16 calls that followed ran
FlexAttention eagerly (the compiler's recompile limit was spent): 10-80x slower and O(N²)
memory, without an error. These tests run calls through the compiled route in one process —
ten lengths in two dtypes, then the sequence that spent the limit (a user's own compiled
flex_attention next to ours, then the other mask kinds in bfloat16) — and check that every call
ran compiled (a call the compiler would run eagerly raises FlexNotCompiledError), gave the dense
result, and that each compiled copy kept one version for all its lengths.

They compile: on the CPU behind MINATTN_COMPILE_TESTS=1 (about a minute of CPU per compiled
copy), on a GPU in the `cuda` tier, where they also check that peak memory grows as N·w.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minattn.attention import padding_mask_torch
from minattn.fast import flex
from minattn.fast.flex import window_attention_routed_fast_torch
from minattn.fast.multiscale import multiscale_attention_routed_fast_torch
from minattn.multiscale import multiscale_attention_torch
from minattn.sparse import bigbird_layout_np, block_mask_np, dilated_window_mask_np

COMPILE_TESTS = pytest.mark.skipif(
    not os.environ.get("MINATTN_COMPILE_TESTS"),
    reason="compiles FlexAttention on the CPU (minutes of CPU time): MINATTN_COMPILE_TESTS=1 "
           "runs it")
CPU_LENGTHS = [200, 256, 300, 384, 500, 512, 640, 700, 768, 1000]  # 2 to 8 tiles, short last ones
CUDA_LENGTHS = [1000, 2048, 3000, 4096, 5000, 6144, 7000, 8192, 12000, 16384]
TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}  # against a float64 reference of the same inputs


def _qkv(shape, dtype, device="cpu", seed=0, grad=False):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=gen).to(device, dtype).requires_grad_(grad)
                 for _ in range(3))


def _dense(q, k, v, mask):
    """Masked attention in float64 on the (N, N) NumPy mask: the reference."""
    mask = torch.as_tensor(mask, device=q.device)
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)


def _versions(q, k, v, block_mask) -> int:
    """How many compiled versions the copy this call runs on holds (1: one for every length)."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    fn = flex.compiled_copy(flex.specialization(q, k, v, block_mask, flex.kernel_options(q)))
    return len(_debug_get_cache_entry_list(fn._torchdynamo_orig_callable.__code__))


def _ten_lengths_two_dtypes(device, lengths, w, d, grad):
    """Window attention through the compiled route at every length, float32 then bfloat16:
    each call equals the dense reference (checked at the shorter lengths); each dtype's copy
    ends with one compiled version. Returns the peak extra memory of each call (CUDA)."""
    peaks = []
    for dtype in (torch.float32, torch.bfloat16):
        for n in lengths:
            q, k, v = _qkv((1, 2, n, d), dtype, device, seed=n, grad=grad)
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
            out = flex.flex_window_attention(q, k, v, w, compiled=True)
            if grad:
                out.backward(torch.ones_like(out))
            if device.type == "cuda":
                torch.cuda.synchronize()
                peaks.append((dtype, n, torch.cuda.max_memory_allocated() - base))
            if n <= 4096:
                ref = _dense(q.detach(), k.detach(), v.detach(), dilated_window_mask_np(n, w, 1))
                torch.testing.assert_close(out.detach().double(), ref, rtol=TOL[dtype],
                                           atol=TOL[dtype])
        bm = flex.window_block_mask(n, w, device=device)
        versions = _versions(q, k, v, bm)
        assert versions == 1, (f"{dtype}: {versions} compiled versions (0: no call ran on this "
                               "copy; 2 or more: it recompiled for a new length)")
    return peaks


def _the_sequence_that_spent_the_limit(device, n1, n2, grad):
    """The H100 yardstick's order, with a user's own torch.compile(flex_attention) at two
    lengths next to our route, then bfloat16, then the other mask kinds in bfloat16: the causal
    and the dilated window, per-head windows with and without padding, a causal block layout.
    Each of ours runs compiled (else FlexNotCompiledError) and equals the dense reference."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    users_flex = torch.compile(flex_attention)
    w, d = 16, 16
    for dtype in (torch.float32, torch.bfloat16):
        for n in (n1, n2):
            q, k, v = _qkv((1, 2, n, d), dtype, device, seed=n, grad=grad)
            ours = flex.flex_window_attention(q, k, v, w, compiled=True)
            bm = create_block_mask(lambda b, h, i, j: (i - j).abs() <= w, None, None, n, n,
                                   device=device)
            theirs = users_flex(q, k, v, block_mask=bm)
            torch.testing.assert_close(ours, theirs, rtol=TOL[dtype], atol=TOL[dtype])
    n, dtype = (n1 + n2) // 2, torch.bfloat16
    q, k, v = _qkv((2, 4, n, d), dtype, device, seed=1, grad=grad)
    x = (q.detach(), k.detach(), v.detach())
    for causal, dilation in ((True, 1), (False, 2)):
        out = flex.flex_window_attention(q, k, v, w, dilation=dilation, causal=causal,
                                         compiled=True)
        mask = dilated_window_mask_np(n, w, dilation)
        ref = _dense(*x, np.tril(mask) if causal else mask)
        torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=2e-2)
    ws = [3, 16, n // 4, n - 1]
    pad = padding_mask_torch(torch.tensor([n, n // 3], device=device), n)
    for key_mask in (None, pad[:, 0, 0, :]):
        out = flex.flex_multiscale_attention(q, k, v, ws, key_mask, compiled=True)
        ref, _ = multiscale_attention_torch(*(t.double() for t in x), ws,
                                            None if key_mask is None else pad)
        torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=2e-2)
    layout = bigbird_layout_np(-(-n // 64), 1, 1, 1, seed=0)
    out = flex.flex_block_sparse_attention(q, k, v, layout, 64, causal=True, compiled=True)
    ref = _dense(*x, np.tril(block_mask_np(layout, 64, n)))
    torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=2e-2)


# ============================================================================ the copies (cheap)
def test_one_compiled_copy_per_specialization_and_none_per_length():
    """Calls that differ only in sizes or in the window w (a tensor the kernel reads) share a
    compiled copy, whose sizes are dynamic; a new dtype, head size, mask constant (causal, δ)
    or the wish for gradients gets a copy of its own, with its own code object and name."""
    pytest.importorskip("torch.nn.attention.flex_attention")

    def key(n=64, w=3, dtype=torch.float32, d=8, grad=False, **window):
        q, k, v = _qkv((2, 1, n, d), dtype, grad=grad)
        return flex.specialization(q, k, v, flex.window_block_mask(n, w, **window))

    base = key()
    assert key(n=300) == base and key(w=20) == base
    others = [key(dtype=torch.bfloat16), key(d=16), key(grad=True), key(causal=True),
              key(dilation=2)]
    assert len({base, *others}) == 6
    names = {flex.named_copy(k).__name__ for k in [base, *others]}
    assert len(names) == 6 and "flex_window_mask_mod_False_1_None_cpu_float32_d8" in names
    assert flex.named_copy(base).__code__ is not flex.named_copy(others[3]).__code__


# ============================================================================ on the CPU (opt-in)
@pytest.mark.slow
@COMPILE_TESTS
def test_ten_lengths_in_two_dtypes_run_compiled_on_the_cpu():
    pytest.importorskip("torch.nn.attention.flex_attention")
    _ten_lengths_two_dtypes(torch.device("cpu"), CPU_LENGTHS, w=16, d=16, grad=False)


@pytest.mark.slow
@COMPILE_TESTS
def test_the_sequence_that_spent_the_recompile_limit_runs_compiled_on_the_cpu():
    pytest.importorskip("torch.nn.attention.flex_attention")
    _the_sequence_that_spent_the_limit(torch.device("cpu"), 256, 512, grad=False)


# ============================================================================ on a GPU
@pytest.mark.cuda
def test_ten_lengths_in_two_dtypes_run_compiled_on_cuda_in_linear_memory():
    """Forward and backward at ten lengths, float32 then bfloat16, w = 128, d = 64: no call
    falls back, and each call's peak extra memory stays within 24 copies of q — O(N·d), where
    the eager fallback builds B·H·N² float scores (2 GiB at N = 16,384 here)."""
    cuda = torch.device("cuda")
    for dtype, n, peak in _ten_lengths_two_dtypes(cuda, CUDA_LENGTHS, w=128, d=64, grad=True):
        if n == CUDA_LENGTHS[0]:
            continue  # the call that compiled: the compiler's own buffers count there
        budget = 24 * 2 * n * 64 * dtype.itemsize + (8 << 20)
        assert peak <= budget, f"{dtype}, N = {n}: {peak / 2**20:.0f} MiB > {budget / 2**20:.0f}"


@pytest.mark.cuda
def test_the_sequence_that_spent_the_recompile_limit_runs_compiled_on_cuda():
    """The yardstick's order at its lengths, on inputs that require grad (the versions that
    train); then the multi-scale layer at N = 16,384 in bfloat16, forward and backward (B = 4,
    H = 8: it asked for 32 GiB when it ran eagerly), within linear memory."""
    cuda = torch.device("cuda")
    _the_sequence_that_spent_the_limit(cuda, 4096, 16384, grad=True)
    for n in (4096, 16384):  # the first compiles; the second, measured, reuses its version
        q, k, v = _qkv((4, 8, n, 64), torch.bfloat16, cuda, grad=True)
        ws = [3, 3, n // 16, n // 16, n // 8, n // 4, n // 2, n // 2]
        if n == 4096:
            multiscale_attention_routed_fast_torch(q, k, v, ws).sum().backward()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = multiscale_attention_routed_fast_torch(q, k, v, ws)
    out.backward(torch.ones_like(out))
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    assert peak <= 24 * q.numel() * 2, f"{peak / 2**20:.0f} MiB"


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_window_dispatch_in_both_dtypes_never_refuses(dtype, recwarn):
    """window_attention_torch on either side of FLEX_FROM[dtype]: no refusal warning (a refused
    flex call would run dense with a RuntimeWarning)."""
    cuda = torch.device("cuda")
    for n in (flex.FLEX_FROM[dtype] - 1, flex.FLEX_FROM[dtype] + 37):
        q, k, v = _qkv((1, 2, n, 64), dtype, cuda, grad=True)
        out = window_attention_routed_fast_torch(q, k, v, 128)
        out.backward(torch.ones_like(out))
    assert not [w for w in recwarn if "Dense SDPA" in str(w.message)]
