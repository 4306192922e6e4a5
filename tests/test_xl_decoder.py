"""Transformer-XL one token at a time (minattn.fast.xl.XLDecoder): the model's own numbers,
with a key/value cache instead of projecting the memory again for every token.

The decoder is checked against `TransformerXL(token, memories, context)` step by step in
float64 (both layer layouts, a batch of two, far past the point where its ring of slots wraps
around), `generate` against the plain sampling loop, and the work per token by counting the
operations PyTorch dispatches (each one a kernel launch on a GPU, where one token is
launch-bound). On a GPU: the same, eager and replayed as a CUDA graph.
"""

from __future__ import annotations

import pytest
import torch

from minattn.course.bench import count_operations
from minattn.course.xl import eval_speed, generate
from minattn.fast.xl import XLDecoder, rel_attention_fast_torch
from minattn.xl import TransformerXL, VanillaLM


def _model(pre_norm=True, ctx=6, dtype=torch.float64, device="cpu"):
    torch.manual_seed(0)
    return TransformerXL(11, 16, 2, 2, mem_len=ctx, pre_norm=pre_norm).to(device, dtype).eval()


def _assert_steps_match(model, decoder, prompt, tokens, ctx, atol):
    """Prefill, then every token: the decoder's logits are the model's with its memories."""
    with torch.no_grad():
        ref, memories = model(prompt, None, ctx)
        torch.testing.assert_close(decoder.prefill(prompt), ref, rtol=0, atol=atol)
        for i in range(tokens.shape[1]):
            ref, memories = model(tokens[:, i:i + 1], memories, ctx)
            torch.testing.assert_close(decoder.step(tokens[:, i:i + 1]), ref, rtol=0, atol=atol,
                                       msg=f"step {i}")


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("prompt_len", [1, 4, 9])  # shorter than, and longer than, the context
def test_decoder_equals_the_model_step_by_step(pre_norm, prompt_len):
    ctx = 6
    model = _model(pre_norm, ctx)
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 11, (2, prompt_len), generator=gen)
    tokens = torch.randint(0, 11, (2, 3 * (ctx + 1)), generator=gen)  # the ring wraps 3 times
    _assert_steps_match(model, XLDecoder(model, ctx, batch=2), prompt, tokens, ctx, 1e-12)


def test_generate_samples_what_the_plain_loop_samples():
    model, ctx = _model(ctx=8), 8
    prompt = torch.randint(0, 11, (1, 5), generator=torch.Generator().manual_seed(2))
    out = generate(model, prompt, 30, torch.Generator().manual_seed(0), context=ctx)
    gen, tokens = torch.Generator().manual_seed(0), prompt
    with torch.no_grad():
        logits, memories = model(prompt, None, ctx)
        for _ in range(30):
            nxt = torch.multinomial(torch.softmax(logits[:, -1], -1), 1, generator=gen)
            tokens = torch.cat([tokens, nxt], dim=1)
            logits, memories = model(nxt, memories, ctx)
    assert torch.equal(out, tokens)


def test_one_token_dispatches_fewer_operations_than_the_model_and_the_vanilla_window():
    """Per new token at context 64 (2 layers): the decoder dispatches fewer non-view operations
    (kernel launches on a GPU) than a call of the model with its memory, and fewer than
    recomputing the vanilla model's window — and none grows with the context."""
    ctx = 64
    torch.manual_seed(0)
    xl = TransformerXL(50, 32, 4, 2, mem_len=ctx, attend=rel_attention_fast_torch).eval()
    vanilla = VanillaLM(50, 32, 4, 2).eval()
    window = torch.randint(0, 50, (1, ctx), generator=torch.Generator().manual_seed(0))
    decoder = XLDecoder(xl, ctx)
    with torch.no_grad():
        _, memories = xl(window)
        decoder.prefill(window)
        ops = {name: count_operations(call) for name, call in (
            ("model", lambda: xl(window[:, :1], memories)), ("vanilla", lambda: vanilla(window)),
            ("decoder", lambda: decoder.step(window[:, :1])))}
    counts = {name: sum(found.values()) for name, found in ops.items()}
    assert counts["decoder"] < counts["vanilla"] < counts["model"], counts
    assert "cat" not in ops["decoder"] and ops["decoder"]["index_copy_"] == 4  # in place


def test_decoder_bad_input():
    model = _model()
    with pytest.raises(ValueError, match="expected a minattn.xl.TransformerXL, got VanillaLM"):
        XLDecoder(VanillaLM(11, 16, 2, 2), 4)
    with pytest.raises(ValueError, match="context: expected an integer >= 1"):
        XLDecoder(model, 0)
    with pytest.raises(ValueError, match="max_len"):
        XLDecoder(TransformerXL(11, 16, 2, 1, max_len=8), 8)
    decoder = XLDecoder(model, 4)
    with pytest.raises(ValueError, match=r"^token: expected int \(self.batch, 1\) .* = 1"):
        decoder.step(torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^tokens: expected int \(self.batch, P\) .* = 1"):
        decoder.prefill(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="capture: expected a model on a CUDA device"):
        decoder.capture()


@pytest.mark.cuda
@pytest.mark.parametrize("graph", [False, True])
def test_decoder_on_cuda_eager_and_as_a_cuda_graph(graph):
    ctx = 6
    model = _model(ctx=ctx, dtype=torch.float32, device="cuda")
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 11, (2, 4), generator=gen).cuda()
    tokens = torch.randint(0, 11, (2, 3 * (ctx + 1)), generator=gen).cuda()
    decoder = XLDecoder(model, ctx, batch=2)
    if graph:
        decoder.prefill(prompt)
        decoder.capture()  # recorded after a prefill; the checks below prefill again
    _assert_steps_match(model, decoder, prompt, tokens, ctx, 1e-4)


def test_eval_speed_times_the_decoder_when_asked():
    plain = eval_speed(16, d_model=16, num_heads=2, num_layers=1, seg_len=8, repeats=1)
    both = eval_speed(16, d_model=16, num_heads=2, num_layers=1, seg_len=8, repeats=1,
                      kv_cache=True)
    assert set(both) - set(plain) == {"XL, one token, KV cache"}  # (+ a CUDA graph on CUDA)
    assert all(v > 0 for v in both.values())


def test_eval_speed_per_repeat_gives_one_speed_per_round():
    import time

    speeds = eval_speed(16, d_model=16, num_heads=2, num_layers=1, seg_len=8, repeats=3,
                        per_repeat=True, timer=time.process_time)
    assert set(speeds) == {"vanilla, recompute", "XL, cached", "XL, one token at a time"}
    assert all(len(v) == 3 and min(v) > 0 for v in speeds.values())
