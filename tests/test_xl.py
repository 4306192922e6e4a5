"""Transformer-XL: relative attention (explicit vs relative shift), memory, the LM, the official
layout, and data-parallel training equal to one process."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minattn.attention import causal_mask_np
from minattn.course import REPO_ROOT
from minattn.course.xl import (
    bigram_bpc,
    char_corpus,
    cosine,
    delayed_copy,
    dependency_cone,
    evaluate_bpc,
    evaluate_bpc_sliding,
    generate,
    lm_loss,
    lm_segment,
    lm_streams,
    reach_needed,
    recall_by_class,
    recall_reads,
    recurrent_lm_loss,
    stream_accuracy,
    stream_predictions,
    train_on_streams,
)
from minattn.fast.xl import (
    EQUALS,
    rel_attention_fast_np,
    rel_attention_fast_torch,
    rel_shift_np,
    rel_shift_torch,
)
from minattn.xl import (
    RelMultiHeadAttention,
    TransformerXL,
    VanillaLM,
    XLLayer,
    official_to_ours,
    rel_attention_np,
    rel_attention_torch,
    rel_multi_head_attention_np,
    relative_distances_np,
    sinusoid_np,
    sinusoid_torch,
    update_memory_np,
    update_memory_torch,
)

T = lambda a: torch.tensor(a, requires_grad=True)  # noqa: E731


def random_inputs(rng, B=2, H=3, Lq=5, M=4, dh=4, extra=2):
    Lk = Lq + M
    return (rng.normal(size=(B, H, Lq, dh)), rng.normal(size=(B, H, Lk, dh)),
            rng.normal(size=(B, H, Lk, dh)), rng.normal(size=(H, Lk + extra, dh)),
            rng.normal(size=(H, dh)), rng.normal(size=(H, dh)))


# ============================================================================ relative shift
@pytest.mark.exercise("4.1")
@pytest.mark.parametrize("Lq,M", [(1, 0), (5, 0), (5, 4), (3, 9), (6, 1)])
def test_rel_shift_puts_each_distance_in_its_column(Lq, M):
    Lk = Lq + M
    by_column = np.broadcast_to((Lk - 1 - np.arange(Lk))[None], (2, Lq, Lk)).astype(float)
    delta = relative_distances_np(Lq, Lk)
    causal = causal_mask_np(Lq, Lk)
    for name, shifted in (("rel_shift_np", rel_shift_np(by_column)),
                          ("rel_shift_torch", rel_shift_torch(torch.tensor(by_column)).numpy())):
        assert shifted.shape == by_column.shape, (
            f"{name}: the shapes differ: {shifted.shape} vs {by_column.shape}")
        assert (slip := _shift_slip(shifted[0], delta, causal)) is None, f"{name}: {slip}"
        np.testing.assert_array_equal(shifted[:, causal],
                                      np.broadcast_to(delta[causal], (2, causal.sum())),
                                      err_msg=f"{name}: column j of row i holds distance δ_ij")


def _shift_slip(shifted, delta, causal):
    """What a relative shift of the table whose column c holds distance Lk − 1 − c did wrong,
    read from where the distances landed (None when it is not a slip named here)."""
    valid = causal & (delta >= 0)
    if valid.any() and np.mean(shifted[valid] == delta[valid] - 1) > 0.5:
        return ("most distances come out one short (δ − 1): the zero column goes on the left of "
                "the scores (before column 0), not on the right")
    # read in order, the result holds each distance Lq places late: the rows of the reshaped
    # (Lk + 1, Lq) table it kept are one too early
    n = shifted.shape[-2]
    flat, want, ok = shifted.ravel(), delta.ravel(), valid.ravel()[:-n]
    if ok.any() and np.array_equal(flat[n:][ok], want[:-n][ok]):
        return "drop the first row of the reshaped table, not the last"
    return None


@pytest.mark.exercise("4.1")
@pytest.mark.parametrize("M", [0, 3, 9])
def test_fast_path_equals_explicit_values_and_gradients(M):
    rng = np.random.default_rng(M)
    arrays = random_inputs(rng, M=M)
    ref, _ = rel_attention_np(*arrays)
    explicit = [T(a) for a in arrays]
    fast = [T(a) for a in arrays]
    out_e, _ = rel_attention_torch(*explicit)
    out_f = rel_attention_fast_torch(*fast)
    assert np.abs(out_f.detach().numpy() - ref).max() < 1e-12
    out_np, w_np = rel_attention_fast_np(*arrays)
    _, w_ref = rel_attention_np(*arrays)
    assert np.abs(out_np - ref).max() < 1e-12 and np.abs(w_np - w_ref).max() < 1e-12
    g = torch.tensor(rng.normal(size=ref.shape))
    grads_e = torch.autograd.grad((out_e * g).sum(), explicit)
    grads_f = torch.autograd.grad((out_f * g).sum(), fast)
    for a, b in zip(grads_e, grads_f):
        assert (a - b).abs().max() < 1e-12


def test_each_fast_path_names_the_reference_it_equals():
    assert EQUALS == {"rel_attention_fast_np": rel_attention_np,
                      "rel_attention_fast_torch": rel_attention_torch}


def test_a_model_trained_with_the_fast_kernel_computes_the_reference_numbers():
    torch.manual_seed(12)
    fast = TransformerXL(11, 16, 2, 2, mem_len=4, attend=rel_attention_fast_torch).double()
    explicit = TransformerXL(11, 16, 2, 2, mem_len=4).double()
    explicit.load_state_dict(fast.state_dict())
    x = torch.randint(0, 11, (2, 2, 5))
    (a, ma), (b, mb) = fast(x[0]), explicit(x[0])
    assert (fast(x[1], ma)[0] - explicit(x[1], mb)[0]).abs().max() < 1e-12
    assert (a - b).abs().max() < 1e-12


# ============================================================================ NumPy vs torch
def test_numpy_and_torch_agree_in_float64():
    rng = np.random.default_rng(1)
    arrays = random_inputs(rng)
    out, w = rel_attention_np(*arrays)
    out_t, w_t = rel_attention_torch(*map(torch.tensor, arrays))
    assert np.abs(out - out_t.numpy()).max() < 1e-12 and np.abs(w - w_t.numpy()).max() < 1e-12
    np.testing.assert_allclose(w.sum(-1), 1.0)
    assert (w[..., ~causal_mask_np(5, 9)] == 0).all()  # the future gets no weight
    np.testing.assert_allclose(sinusoid_torch(7, 6, dtype=torch.float64).numpy(), sinusoid_np(7, 6),
                               atol=1e-15)


def test_gradcheck_explicit_torch():
    rng = np.random.default_rng(2)
    arrays = [T(a) for a in random_inputs(rng, B=1, H=2, Lq=3, M=2, dh=2)]
    assert torch.autograd.gradcheck(lambda *xs: rel_attention_torch(*xs)[0], arrays)


def test_four_terms_by_hand():
    # one query, two keys (one in memory); q = k = 0 leaves (d) = vᵀ r_δ only
    q, k, v = np.zeros((1, 1, 1, 2)), np.zeros((1, 1, 2, 2)), np.array([[[[1.0, 0], [0, 1.0]]]])
    r = np.array([[[0.0, 0.0], [1.0, 1.0]]])  # r_0 = 0, r_1 = (1, 1)
    out, w = rel_attention_np(q, k, v, r, np.zeros((1, 2)), np.array([[np.sqrt(2), 0.0]]))
    # key 0 is at distance 1: score (√2·1)/√2 = 1; key 1 at distance 0: score 0
    np.testing.assert_allclose(w[0, 0, 0], [np.e / (np.e + 1), 1 / (np.e + 1)])


def module_against_numpy_layer(seed, L, M, clamp_len=None):
    """A random float64 attention module (u, v nonzero), its fast and explicit outputs checked
    against `rel_multi_head_attention_np`; returns (module, x, memory, reference output)."""
    torch.manual_seed(seed)
    attn = RelMultiHeadAttention(8, 2, attend=rel_attention_fast_torch).double()
    with torch.no_grad():
        attn.u_bias.normal_(), attn.v_bias.normal_()
    x, mem = torch.randn(2, L, 8, dtype=torch.float64), torch.randn(2, M, 8, dtype=torch.float64)
    ref, w_ref = rel_multi_head_attention_np(x.numpy(), mem.numpy(), attn.numpy_params(), 2,
                                             clamp_len=clamp_len)
    out_fast, none = attn(x, mem, clamp_len=clamp_len)
    out_exp, w = attn(x, mem, need_weights=True, clamp_len=clamp_len)
    assert none is None and np.abs(out_fast.detach().numpy() - ref).max() < 1e-12
    assert np.abs(out_exp.detach().numpy() - ref).max() < 1e-12
    attn.attend = None  # the explicit reference, without weights asked for
    out_ref, none = attn(x, mem, clamp_len=clamp_len)
    assert none is None and np.abs(out_ref.detach().numpy() - ref).max() < 1e-12
    assert np.abs(w.detach().numpy() - w_ref).max() < 1e-12
    return attn, x, mem, ref


def test_module_matches_numpy_layer_and_pytorch_sdpa():
    attn, x, mem, _ = module_against_numpy_layer(0, 5, 3)
    # without positions (W_R = 0) and u = 0 it is causal attention: PyTorch's SDPA agrees
    with torch.no_grad():
        attn.r_proj.weight.zero_(), attn.u_bias.zero_()
    ctx = torch.cat([mem, x], 1)
    split = lambda t: t.view(2, -1, 2, 4).transpose(1, 2)  # noqa: E731
    q, k, v = split(attn.q_proj(x)), split(attn.k_proj(ctx)), split(attn.v_proj(ctx))
    mask = torch.from_numpy(causal_mask_np(5, 8))
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(2, 5, 8)
    assert (attn(x, mem)[0] - attn.out_proj(sdpa)).abs().max() < 1e-12


# ============================================================================ memory
@pytest.mark.exercise("4.2")
def test_update_memory():
    h1, h2 = np.arange(2 * 3 * 1.0).reshape(2, 3, 1), np.arange(2 * 2 * 1.0).reshape(2, 2, 1) + 10
    np.testing.assert_array_equal(update_memory_np(None, h1, 2), h1[:, 1:])
    np.testing.assert_array_equal(update_memory_np(h1, h2, 4), np.concatenate([h1[:, 1:], h2], 1))
    np.testing.assert_array_equal(update_memory_np(h1, h2, 9), np.concatenate([h1, h2], 1))
    assert update_memory_np(h1, h2, 0).shape == (2, 0, 1)
    th1, th2 = torch.tensor(h1, requires_grad=True), torch.tensor(h2)
    out = update_memory_torch(th1, th2, 4)
    np.testing.assert_array_equal(out.numpy(), update_memory_np(h1, h2, 4))
    assert not out.requires_grad and update_memory_torch(th1, th2, 0).shape == (2, 0, 1)


@pytest.mark.exercise("4.2")
def test_no_gradient_reaches_the_memory():
    torch.manual_seed(0)
    model = TransformerXL(11, 16, 2, 2, mem_len=4)
    x = torch.randint(0, 11, (2, 2, 4))
    _, memories = model(x[0])
    assert all(not m.requires_grad and m.grad_fn is None for m in memories)
    logits, _ = model(x[1], memories)
    logits.sum().backward()  # reaches the parameters only through segment 2
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x[1], [m.clone() for m in memories])[0].sum().backward()
    assert all(torch.equal(a, b) for a, b in zip(grads, [p.grad for p in model.parameters()]))


@pytest.mark.exercise("4.2")
@pytest.mark.parametrize("pre_norm", [True, False])
def test_one_layer_segment_by_segment_equals_one_pass(pre_norm):
    torch.manual_seed(1)
    layer = XLLayer(8, 2, 16, pre_norm).double()
    x1, x2 = torch.randn(2, 6, 8, dtype=torch.float64), torch.randn(2, 6, 8, dtype=torch.float64)
    for M in (0, 4, 6):
        memory = update_memory_torch(None, x1, M)  # the last M inputs of segment 1
        by_segment, _ = layer(x2, memory)
        one_pass, _ = layer(torch.cat([x1[:, 6 - M:], x2], 1))
        assert (by_segment - one_pass[:, M:]).abs().max() < 1e-12


@pytest.mark.exercise("4.2")
def test_half_segments_with_memory_equal_one_segment_where_the_span_allows():
    torch.manual_seed(2)
    model = TransformerXL(11, 16, 2, 3, mem_len=4).double()
    x = torch.randint(0, 11, (2, 8))
    whole, _ = model(x)
    first, memories = model(x[:, :4])
    second, _ = model(x[:, 4:], memories)  # M = 4 >= 4: every earlier token is in reach
    assert (torch.cat([first, second], 1) - whole).abs().max() < 1e-12
    _, short = model(x[:, :4], mem_len=2)
    second_short, _ = model(x[:, 4:], short, mem_len=2)  # M = 2 < 4: the span does not allow
    assert (second_short - whole[:, 4:]).abs().max() > 1e-6


def test_zero_memory_is_a_plain_relative_transformer():
    torch.manual_seed(3)
    model = TransformerXL(11, 16, 2, 2, mem_len=0).double()
    x = torch.randint(0, 11, (2, 10))
    _, memories = model(x[:, :5])
    assert all(m.shape == (2, 0, 16) for m in memories)
    with_empty, _ = model(x[:, 5:], memories)
    alone, _ = model(x[:, 5:])
    assert (with_empty - alone).abs().max() < 1e-12


def test_causal_no_peeking_and_vanilla_too():
    torch.manual_seed(4)
    for model in (TransformerXL(11, 16, 2, 2), VanillaLM(11, 16, 2, 2)):
        x = torch.randint(0, 11, (1, 8))
        y = x.clone()
        y[0, 5:] = (y[0, 5:] + 1) % 11
        a, b = model(x)[0], model(y)[0]
        assert (a[:, :5] - b[:, :5]).abs().max() < 1e-5 and (a[:, 5:] - b[:, 5:]).abs().max() > 1e-4


# ============================================================================ clamp_len
def test_clamped_table_repeats_the_row_of_clamp_len():
    R = sinusoid_np(9, 6, clamp_len=4)
    np.testing.assert_array_equal(R[:5], sinusoid_np(5, 6))
    np.testing.assert_array_equal(R[5:], np.broadcast_to(R[4], (4, 6)))
    np.testing.assert_array_equal(sinusoid_np(9, 6, clamp_len=8), sinusoid_np(9, 6))
    np.testing.assert_allclose(sinusoid_torch(9, 6, dtype=torch.float64, clamp_len=4).numpy(), R,
                               atol=1e-15)


def test_clamped_attention_module_matches_numpy_layer():
    attn, x, mem, ref = module_against_numpy_layer(6, 4, 6, clamp_len=3)
    unclamped, _ = rel_multi_head_attention_np(x.numpy(), mem.numpy(), attn.numpy_params(), 2)
    assert np.abs(unclamped - ref).max() > 1e-6
    model = TransformerXL(11, 8, 2, 2, mem_len=4, clamp_len=3).double()
    tokens = torch.randint(0, 11, (2, 6))
    _, memories = model(tokens[:, :3])
    by_attribute, _ = model(tokens[:, 3:], memories)
    model.clamp_len = None
    assert (model(tokens[:, 3:], memories, clamp_len=3)[0] - by_attribute).abs().max() == 0


def test_clamp_len_bad_input():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="clamp_len"):
            sinusoid_np(4, 6, clamp_len=bad)
        with pytest.raises(ValueError, match="clamp_len"):
            TransformerXL(11, 8, 2, 1, clamp_len=bad)


# ============================================================================ no stop-gradient
def test_without_stop_gradient_the_loss_reaches_the_previous_segment():
    torch.manual_seed(7)
    model = TransformerXL(11, 16, 2, 2, mem_len=4).double()
    x = torch.randint(0, 11, (2, 2, 4))
    logits, grads = {}, {}
    for sg in (True, False):
        model.zero_grad()
        _, memories = model(x[0], stop_gradient=sg)
        assert all(m.requires_grad != sg for m in memories)
        logits[sg], _ = model(x[1], memories)
        logits[sg].sum().backward()
        grads[sg] = [p.grad.clone() for p in model.parameters()]
    assert (logits[True] - logits[False]).abs().max() == 0  # the same values, another graph
    assert any((a - b).abs().max() > 1e-9 for a, b in zip(grads[True], grads[False]))


def test_recurrent_loss_without_sg_backpropagates_one_segment_back():
    torch.manual_seed(8)
    model = TransformerXL(11, 16, 2, 2, mem_len=4).double()
    x, y = torch.randint(0, 11, (3, 2, 4)), torch.randint(0, 11, (3, 2, 4))  # 3 segments
    loss_fn = recurrent_lm_loss(stop_gradient=False)
    loss_fn(model, x[0], y[0])  # nothing before segment 0
    loss_fn(model, x[1], y[1])
    model.zero_grad()
    loss_fn(model, x[2], y[2]).backward()  # reads segment 1 again, in the graph
    theirs = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    _, m0 = model(x[0])  # the same by hand: segment 0's memory detached, segment 1's not
    _, m1 = model(x[1], m0, stop_gradient=False)
    lm_loss(model(x[2], m1)[0], y[2]).backward()
    assert all((a - p.grad).abs().max() < 1e-12 for a, p in zip(theirs, model.parameters()))


# ============================================================================ evaluation tools
def test_sliding_window_equals_a_loop_over_positions():
    torch.manual_seed(9)
    model = VanillaLM(7, 8, 2, 1).double()
    streams = torch.randint(0, 7, (2, 13))
    W = 5
    total = torch.zeros(2, dtype=torch.float64)
    for j in range(12):  # predict streams[:, j + 1] from at most W characters up to j
        logits, _ = model(streams[:, max(0, j - W + 1):j + 1])
        total += F.cross_entropy(logits[:, -1], streams[:, j + 1], reduction="none").detach()
    expected = total.sum().item() / 24 / np.log(2)
    assert abs(evaluate_bpc_sliding(model, streams, W, batch_windows=3) - expected) < 1e-12
    assert abs(evaluate_bpc_sliding(model, streams, 12) - evaluate_bpc(model, streams, 12)) < 1e-12
    per_stream = evaluate_bpc_sliding(model, streams, W, batch_windows=3, per_stream=True)
    assert np.allclose(per_stream, (total / 12 / np.log(2)).numpy(), atol=1e-12)
    assert np.allclose(evaluate_bpc_sliding(model, streams, 12, per_stream=True),
                       evaluate_bpc(model, streams, 12, per_stream=True), atol=1e-12)
    with pytest.raises(ValueError, match="window"):
        evaluate_bpc_sliding(model, streams, 13)


def test_dependency_cone_grows_one_segment_per_layer():
    torch.manual_seed(10)
    S, p = 4, 1
    xl = dependency_cone(TransformerXL(11, 8, 2, 3, mem_len=S), S, 5, p, 11)
    vanilla = dependency_cone(VanillaLM(11, 8, 2, 3), S, 5, p, 11)
    assert xl.shape == vanilla.shape == (4, 20)
    for cone in (xl, vanilla):
        assert not cone[:, :p].any() and cone[0].tolist() == [t == p for t in range(20)]
    assert [int(np.flatnonzero(row).max()) for row in xl] == [p, 2 * S - 1, 3 * S - 1, 4 * S - 1]
    assert [int(np.flatnonzero(row).max()) for row in vanilla] == [p, S - 1, S - 1, S - 1]
    with pytest.raises(ValueError, match="position"):
        dependency_cone(VanillaLM(11, 8, 2, 1), S, 2, 8, 11)


def test_stream_accuracy_by_position():
    torch.manual_seed(11)
    model = TransformerXL(5, 8, 2, 1, mem_len=4)
    tokens = torch.randint(0, 5, (3, 13))
    predictions = stream_predictions(model, tokens, 4)
    assert predictions.shape == (3, 12)
    targets = predictions.clone()
    targets[:, 1::4] = (targets[:, 1::4] + 1) % 5  # index 1 of every segment: always wrong
    targets[:, 2::4] = -100  # index 2: never counted
    acc = stream_accuracy(model, tokens, torch.cat([targets, targets[:, :1]], 1), 4,
                          by_position=True)
    assert acc[0] == acc[3] == 1 and acc[1] == 0 and np.isnan(acc[2])
    assert stream_accuracy(model, tokens, torch.cat([targets, targets[:, :1]], 1), 4) == 2 / 3


def test_recall_by_class_has_one_write_of_the_class_in_reach():
    n_classes, n_values, spacing = 4, 3, 30
    batch = recall_by_class(3, 400, 5, 20, torch.Generator().manual_seed(0), n_classes=n_classes,
                            n_values=n_values, n_fillers=2, spacing=spacing)
    first_read = n_classes * n_values
    reads = (batch.targets != -100).nonzero().tolist()
    assert len(reads) > 20
    for b, t in reads:
        d = int(batch.distance[b, t])
        c = int(batch.tokens[b, t]) - first_read
        assert 5 <= d <= 20 and 0 <= c < n_classes
        assert batch.tokens[b, t - d] == batch.targets[b, t]
        assert batch.targets[b, t] // n_values == c
        window = batch.tokens[b, max(0, t - spacing):t]
        assert ((window // n_values == c) & (window < first_read)).sum() == 1  # the one write
    assert (batch.distance[batch.targets == -100] == 0).all()
    with pytest.raises(ValueError, match="spacing"):
        recall_by_class(2, 100, 5, 40, torch.Generator(), spacing=30)


def test_reads_by_the_layers_they_need_match_the_measured_reach():
    """reach_needed's one- and two-layer lines are where a change of the write's position
    stops reaching the read's prediction in a 1- and 2-layer model (section 4's cone)."""
    seg, mem = 4, 4
    for n_layers in (1, 2):
        torch.manual_seed(13)
        model = TransformerXL(11, 8, 2, n_layers, mem_len=mem).double()
        for index in range(seg):
            cone = dependency_cone(model, seg, 6, 0, 11, seed=1)[-1]  # the top layer
            # the read at index `index` of segment s sits at position s·seg + index; the write
            # at 0 reaches it exactly when its distance is within the reach
            reached = [bool(cone[p]) for p in range(index, 6 * seg, seg)]
            distances = np.arange(index, 6 * seg, seg)
            assert reached == list(reach_needed(distances, index, mem) <= n_layers)


def test_recall_reads_and_training_on_streams():
    torch.manual_seed(14)
    batch = recall_by_class(2, 16 * 6, 1, 8, torch.Generator().manual_seed(0), n_classes=4,
                            n_values=2, n_fillers=2, spacing=20)
    model = TransformerXL(4 * 3 + 2, 8, 2, 1, mem_len=8)
    history = train_on_streams(model, batch.tokens, batch.targets, 16, 5, lr=1e-3,
                               progress=False, schedule=cosine(5))
    assert len(history["loss"]) == 5
    distance, index, hit = recall_reads(model, batch, 16)
    read = batch.targets != -100
    assert len(distance) == len(index) == len(hit) == int(read.sum())
    assert (distance >= 1).all() and (index < 16).all() and hit.dtype == bool
    predicted = stream_predictions(model, batch.tokens, 16)
    assert hit.tolist() == (predicted == batch.targets)[read].tolist()
    assert cosine(4)(1) == 1.0 and abs(cosine(4)(3) - 0.5) < 1e-12
    with pytest.raises(ValueError, match="too short"):
        train_on_streams(model, batch.tokens, batch.targets, 16, 7, progress=False)


def test_bpc_per_position_averages_to_the_streams():
    torch.manual_seed(15)
    model = TransformerXL(7, 8, 2, 1, mem_len=4).double()
    streams = torch.randint(0, 7, (3, 13))
    table = evaluate_bpc(model, streams, 4, per_position=True)
    assert table.shape == (3, 4)
    np.testing.assert_allclose(table.mean(1), evaluate_bpc(model, streams, 4, per_stream=True))


# ============================================================================ bad input
def test_bad_input():
    rng = np.random.default_rng(3)
    q, k, v, r, u, w = random_inputs(rng)
    with pytest.raises(ValueError, match=r"^r: expected at least Lk = 9"):
        rel_attention_np(q, k, v, r[:, :8], u, w)
    with pytest.raises(ValueError, match="last Lq"):
        rel_attention_np(k, q, q, r, u, w)
    with pytest.raises(ValueError, match="u_bias"):
        rel_attention_torch(*map(torch.tensor, (q, k, v, r, u[:, :2], w)))
    attn = RelMultiHeadAttention(8, 2, max_len=10)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"^memory: .*D = 8"):
        rel_multi_head_attention_np(x.numpy(), np.zeros((2, 3, 6)), attn.numpy_params(), 2)
    with pytest.raises(ValueError, match=r"^memory: .*d_model = 8"):
        attn(x, torch.randn(2, 3, 6))  # wrong width
    with pytest.raises(ValueError, match=r"^memory: .*B = 2"):
        attn(x, torch.randn(3, 3, 8))  # wrong batch
    with pytest.raises(ValueError, match=r"M \+ L <= max_len"):
        attn(x, torch.randn(2, 6, 8))
    with pytest.raises(ValueError, match="one memory per layer"):
        TransformerXL(11, 16, 2, 2)(torch.zeros(1, 4, dtype=torch.long), [None])
    with pytest.raises(ValueError, match="num_heads: expected int >= 1, divides d_model = 10"):
        RelMultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="distance < length"):
        delayed_copy(2, 8, 8, 4, torch.Generator())
    with pytest.raises(ValueError, match="long 1-D text"):
        lm_streams(torch.arange(5), 4)


# ============================================================================ the original layout
def official_forward(sd, tokens, n_heads, mems=None, clamp_len=-1):
    """An independent time-major forward in the original code's layout: tokens (len, batch)."""
    emb = sd["word_emb.emb_layers.0.weight"]
    D, qlen = emb.shape[1], tokens.shape[0]
    dh, mlen = D // n_heads, 0 if mems is None else mems[0].shape[0]
    klen, B = qlen + mlen, tokens.shape[1]
    h = emb[tokens] * D ** 0.5  # (qlen, B, D)
    inv_freq = 1 / 10000 ** (torch.arange(0.0, D, 2.0, dtype=emb.dtype) / D)
    pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=emb.dtype)
    if clamp_len > 0:  # as the original: distances beyond clamp_len share its encoding
        pos_seq = pos_seq.clamp(max=clamp_len)
    angles = torch.outer(pos_seq, inv_freq)
    pos_emb = torch.cat([angles.sin(), angles.cos()], -1)  # rows: distance klen−1 … 0
    blocked = torch.triu(torch.ones(qlen, klen), diagonal=1 + mlen).bool()
    n_layers = len({k.split(".")[1] for k in sd if k.startswith("layers.")})
    for n in range(n_layers):
        p = lambda name: sd[f"layers.{n}.{name}"]  # noqa: E731
        cat = h if mems is None else torch.cat([mems[n], h], 0)
        q, k, v = (cat @ p("dec_attn.qkv_net.weight").T).chunk(3, -1)
        q = q[-qlen:].view(qlen, B, n_heads, dh)
        k, v = k.view(klen, B, n_heads, dh), v.view(klen, B, n_heads, dh)
        rk = (pos_emb @ p("dec_attn.r_net.weight").T).view(klen, n_heads, dh)
        ac = torch.einsum("ibnd,jbnd->ijbn", q + sd["r_w_bias"], k)
        bd = torch.einsum("ibnd,jnd->ijbn", q + sd["r_r_bias"], rk)
        padded = torch.cat([bd.new_zeros(qlen, 1, B, n_heads), bd], 1)
        padded = padded.view(klen + 1, qlen, B, n_heads)
        bd = padded[1:].view_as(bd)
        score = ((ac + bd) / dh ** 0.5).masked_fill(blocked[:, :, None, None], float("-inf"))
        vec = torch.einsum("ijbn,jbnd->ibnd", score.softmax(1), v).reshape(qlen, B, D)
        ln = lambda x, w: F.layer_norm(x, (D,), p(w + ".weight"), p(w + ".bias"))  # noqa: E731
        h = ln(h + vec @ p("dec_attn.o_net.weight").T, "dec_attn.layer_norm")
        core = F.relu(h @ p("pos_ff.CoreNet.0.weight").T + p("pos_ff.CoreNet.0.bias"))
        h = ln(h + core @ p("pos_ff.CoreNet.3.weight").T + p("pos_ff.CoreNet.3.bias"),
               "pos_ff.layer_norm")
    return h @ emb.T + sd["crit.out_layers.0.bias"]


def random_official_state(V=13, D=8, H=2, n_layers=2, d_ff=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64) * 0.5  # noqa: E731
    sd = {"word_emb.emb_layers.0.weight": rnd(V, D), "crit.out_layers.0.bias": rnd(V),
          "r_w_bias": rnd(H, D // H), "r_r_bias": rnd(H, D // H)}
    sd["crit.out_layers.0.weight"] = sd["word_emb.emb_layers.0.weight"]  # tied
    sd["pos_emb.inv_freq"] = 1 / 10000 ** (torch.arange(0.0, D, 2.0) / D)  # a buffer: not needed
    for n in range(n_layers):
        shapes = {"dec_attn.qkv_net.weight": (3 * D, D), "dec_attn.r_net.weight": (D, D),
                  "dec_attn.o_net.weight": (D, D), "dec_attn.layer_norm.weight": (D,),
                  "dec_attn.layer_norm.bias": (D,), "pos_ff.CoreNet.0.weight": (d_ff, D),
                  "pos_ff.CoreNet.0.bias": (d_ff,), "pos_ff.CoreNet.3.weight": (D, d_ff),
                  "pos_ff.CoreNet.3.bias": (D,), "pos_ff.layer_norm.weight": (D,),
                  "pos_ff.layer_norm.bias": (D,)}
        sd.update({f"layers.{n}.{k}": rnd(*s) for k, s in shapes.items()})
    return sd


def test_official_layout_converts_one_to_one():
    sd = random_official_state()
    model = TransformerXL(13, 8, 2, 2, d_ff=12, mem_len=3, pre_norm=False).double()
    model.load_state_dict(official_to_ours(sd, num_heads=2))  # strict: every name maps
    tokens = torch.randint(0, 13, (2, 9))  # ours: (B, len)
    logits, memories = model(tokens[:, :5])
    logits2, _ = model(tokens[:, 5:], memories)
    theirs = official_forward(sd, tokens[:, :5].T, 2)  # theirs: time-major (len, B)
    mems_tm = [m.transpose(0, 1) for m in memories]
    theirs2 = official_forward(sd, tokens[:, 5:].T, 2, mems_tm)
    assert (logits - theirs.transpose(0, 1)).abs().max() < 1e-12
    assert (logits2 - theirs2.transpose(0, 1)).abs().max() < 1e-12
    # distances 0..6 -> 0..2
    clamped = official_forward(sd, tokens[:, 5:].T, 2, mems_tm, clamp_len=2)
    ours_clamped, _ = model(tokens[:, 5:], memories, clamp_len=2)
    assert (ours_clamped - clamped.transpose(0, 1)).abs().max() < 1e-12
    assert (ours_clamped - logits2).abs().max() > 1e-6  # clamping changed something
    untied = {k: v for k, v in sd.items() if k not in ("r_w_bias", "r_r_bias")}
    for n in range(2):
        untied[f"layers.{n}.dec_attn.r_w_bias"] = sd["r_w_bias"]
        untied[f"layers.{n}.dec_attn.r_r_bias"] = sd["r_r_bias"]
    model.load_state_dict(official_to_ours(untied, num_heads=2))
    with pytest.raises(ValueError, match="r_w_bias"):
        official_to_ours(sd, num_heads=4)
    with pytest.raises(ValueError, match="^state: expected an original"):
        official_to_ours({"foo": 1}, num_heads=2)


# ============================================================================ data, evaluation
def test_streams_segments_copy_task_and_bpc():
    chars, (ids,) = char_corpus(["hello world, hello xl\n" * 20])
    streams = lm_streams(ids, 4)
    x, y = lm_segment(streams, 1, 8)
    assert x.shape == y.shape == (4, 8) and torch.equal(x[:, 1:], y[:, :-1])
    tokens, targets = delayed_copy(3, 20, 5, 7, torch.Generator().manual_seed(0))
    assert (targets[:, :5] == -100).all() and torch.equal(targets[:, 5:], tokens[:, :-5])
    torch.manual_seed(0)
    model = TransformerXL(len(chars), 16, 2, 2, mem_len=8)
    assert 0 < evaluate_bpc(model, streams, 8) < 10  # untrained: about log2(V) bits
    out = generate(model, x[:1], 5, torch.Generator().manual_seed(0), context=8)
    assert out.shape == (1, 13) and torch.equal(out[:, :8], x[:1])



def test_bigram_baseline_counts_pairs_with_add_one():
    train_ids = torch.tensor([0, 1, 0, 1, 0, 1, 2])
    # pairs 0->1 three times, 1->0 twice, 1->2 once; add one to each of the 3 x 3 counts
    expected = -(np.log2(4 / 6) + np.log2(3 / 6)) / 2  # scoring 0->1 and 1->0
    assert bigram_bpc(train_ids, torch.tensor([[0, 1, 0]]), 3) == pytest.approx(expected)
    with pytest.raises(ValueError, match="streams"):
        bigram_bpc(train_ids, torch.tensor([0, 1]), 3)


# ================================================================== data-parallel training
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TINY = ["--data", "synthetic", "--max-chars", "20000", "--batch", "4", "--seg", "8", "--mem",
        "8", "--d-model", "16", "--heads", "2", "--double", "--eval-segments", "0",
        "--log-every", "100", "--device", "cpu"]


@pytest.mark.slow
def test_two_gloo_processes_equal_one_process_and_resume(tmp_path):
    from minattn.course.xl_ddp import main

    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO_ROOT))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           "-m", "minattn.course.xl_ddp", *TINY, "--steps", "4", "--out", str(tmp_path / "ddp")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    main([*TINY, "--steps", "4", "--out", str(tmp_path / "one")])  # one process, same batch
    main([*TINY, "--steps", "2", "--out", str(tmp_path / "resumed")])  # 2 steps, then resume
    main([*TINY, "--steps", "4", "--out", str(tmp_path / "resumed"), "--resume"])
    load = lambda name: torch.load(tmp_path / name / "checkpoint.pt", weights_only=False)  # noqa: E731
    one, ddp, resumed = load("one"), load("ddp"), load("resumed")
    assert ddp["step"] == one["step"] == resumed["step"] == 4
    for other in (ddp, resumed):
        for name, p in one["model"].items():
            assert (p - other["model"][name]).abs().max() < 1e-10, name
        for a, b in zip(one["memories"], other["memories"]):
            assert (a - b).abs().max() < 1e-10
    assert not list((tmp_path / "ddp").glob("*.tmp"))  # written atomically: no leftovers


@pytest.mark.cuda
def test_fast_path_on_cuda_matches_cpu():
    rng = np.random.default_rng(7)
    arrays = [torch.tensor(a) for a in random_inputs(rng, M=6)]
    cpu = rel_attention_fast_torch(*arrays)
    gpu = rel_attention_fast_torch(*[a.cuda() for a in arrays])
    assert (gpu.cpu() - cpu).abs().max() < 1e-10
    model = TransformerXL(11, 16, 2, 2, mem_len=4).cuda()
    logits, memories = model(torch.randint(0, 11, (2, 5), device="cuda"))
    assert logits.is_cuda and all(m.is_cuda for m in memories)
