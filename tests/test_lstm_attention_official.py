"""The authors' copy model (minattn/lstm_attention.py) and its training
(minattn/course/lstm_attention.py): NumPy vs torch in float64, the model against the NumPy pieces
and against a re-creation of the authors' module layout, averaged heads, the copy data, the
no-attention ceiling, training and the head sampling, bad input."""

import copy

import numpy as np
import pytest
import torch
from parity import np_, t  # tests/ is on sys.path (rootdir conftest)
from torch import nn

from minattn import lstm_attention as la
from minattn.course import lstm_attention as course
from minattn.course.lstm_attention import copy_ids


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny LSTMs: a second thread only adds contention on a busy CPU (restored after)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ----------------------------------------------------------------------------- the attention step
@pytest.mark.parametrize("uniform", [False, True])
def test_projected_attention_numpy_torch_parity(rng, uniform):
    K, H = 3, 6
    s, h = rng.normal(size=(2, 4, H)), rng.normal(size=(2, 5, H))
    A, P = rng.normal(size=(K, H, H)), rng.normal(size=(K, H, H))
    a, p = rng.normal(size=(K, H)), rng.normal(size=(K, H))
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    c_np, a_np = la.projected_attention_np(s, h, A, a, P, p, mask, uniform)
    c_t, a_t = la.projected_attention_torch(*map(t, (s, h, A, a, P, p)), torch.as_tensor(mask),
                                            uniform)
    assert np.abs(np_(c_t) - c_np).max() < 1e-12 and np.abs(np_(a_t) - a_np).max() < 1e-12
    assert np.all(a_np[1, ..., 3:] == 0)
    if uniform:
        assert np.allclose(a_np[1, ..., :3], 1 / 3)


def test_projected_attention_by_hand():
    # one head, A = I, a = 0: the scores are s·h_i = (1, 0), α = (e, 1) / (e + 1);
    # P = 2I, p = (1, 1): c = 2 Σ α h + (1, 1)
    s, h = np.array([[[1.0, 0.0]]]), np.array([[[1.0, 0.0], [0.0, 1.0]]])
    eye, zero = np.eye(2)[None], np.zeros((1, 2))
    context, alpha = la.projected_attention_np(s, h, eye, zero, 2 * eye, np.ones((1, 2)))
    e = np.e
    assert np.allclose(alpha[0, 0, 0], [e / (e + 1), 1 / (e + 1)], atol=1e-12)
    assert np.allclose(context[0, 0], [2 * e / (e + 1) + 1, 2 / (e + 1) + 1], atol=1e-12)
    # the query bias adds a · h_i to every score of row t: a = (0, 5) favours h_2
    _, alpha_b = la.projected_attention_np(s, h, eye, np.array([[0.0, 5.0]]), eye, zero)
    assert np.allclose(alpha_b[0, 0, 0], [e / (e + e ** 5), e ** 5 / (e + e ** 5)], atol=1e-12)


def test_projected_attention_without_bias_or_projection_is_luong(rng):
    """a = 0, P = I, p = 0 and one head: Luong's general attention with W_a = Aᵀ."""
    s, h, A = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(1, 4, 4))
    ours = la.projected_attention_np(s, h, A, np.zeros((1, 4)), np.eye(4)[None], np.zeros((1, 4)))
    luong = la.luong_attention_np(s, h, A.transpose(0, 2, 1))
    assert all(np.abs(x - y).max() < 1e-12 for x, y in zip(ours, luong))


# ----------------------------------------------------------------------------- the model
def reference_forward(model, src, tgt_in):
    """OfficialSeq2Seq's forward from the NumPy reference functions."""
    E = np_(model.embedding.weight)
    lstm = lambda m: [np_(p) for p in (m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0,  # noqa: E731
                                       m.bias_hh_l0)]
    h, final = la.lstm_np(E[src.numpy()], *lstm(model.encoder))
    # the decoder starts from (h_N, c_N)
    s, _ = la.lstm_np(E[tgt_in.numpy()], *lstm(model.decoder), state=final)
    context, alpha = la.projected_attention_np(s, h, *map(np_, model.head_params()),
                                               uniform=model.uniform)
    return la.output_np(context, s, *map(np_, model.output_params())), alpha, h, s


@pytest.mark.parametrize("heads,uniform", [(1, False), (3, False), (2, True)])
def test_official_model_matches_numpy_reference(heads, uniform):
    torch.manual_seed(0)
    model = la.OfficialSeq2Seq(9, hidden=6, heads=heads, uniform=uniform).double()
    src, tgt_in = torch.randint(0, 9, (2, 5)), torch.randint(0, 9, (2, 4))
    logits, alpha = model(src, tgt_in)
    ref_logits, ref_alpha, _, _ = reference_forward(model, src, tgt_in)
    assert alpha.shape == (2, heads, 4, 5)
    assert np.abs(np_(logits) - ref_logits).max() < 1e-10
    assert np.abs(np_(alpha) - ref_alpha).max() < 1e-12


def test_official_probe_is_the_model_with_every_head_on_one_position():
    torch.manual_seed(0)
    model = la.OfficialSeq2Seq(9, hidden=6, heads=2).double()
    src, tgt_in, tgt_out = (torch.randint(0, 9, (2, 5)) for _ in range(3))
    tgt_in, tgt_out = tgt_in[:, :4], tgt_out[:, :4]
    beta = model.probe(src, tgt_in, tgt_out)
    h, s = model.states(src, tgt_in)
    A, a, P, p = model.head_params()
    for i in range(5):
        one_hot = torch.zeros(2, 2, 4, 5, dtype=torch.float64)
        one_hot[..., i] = 1  # α^k = one-hot on i for every head: c_t = mean_k (P_k h_i + p_k)
        read = torch.einsum("bktn,bne->bkte", one_hot, h)
        c = (torch.einsum("kfe,bkte->bktf", P, read) + p[None, :, None, :]).mean(1)
        probs = la.output_torch(c, s, *model.output_params()).softmax(-1)
        assert torch.allclose(probs.gather(-1, tgt_out[..., None])[..., 0], beta[..., i],
                              atol=1e-12)


def test_frozen_uniform_heads_get_no_attention_gradient():
    torch.manual_seed(0)
    model = la.OfficialSeq2Seq(9, hidden=6, heads=2, uniform=True).double()
    logits, alpha = model(torch.randint(0, 9, (2, 5)), torch.randint(0, 9, (2, 4)))
    assert torch.allclose(alpha, torch.full_like(alpha, 0.2))
    logits.sum().backward()
    for head in model.heads:
        assert head.query.weight.grad is None or torch.all(head.query.weight.grad == 0)
        assert head.context.weight.grad.abs().sum() > 0  # the context map still learns


# ----------------------------------------------------------------------------- the authors' layout
class AuthorsSeq2seq(nn.Module):
    """A re-creation, for this test, of the parameter names, shapes and forward computation of
    the authors' `SequenceCopying/seq2seq_model.Seq2seq` (num_layers=1, bidirectional=False,
    dropout=0; time-major; no padding, so no packing)."""

    def __init__(self, vocab, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.encoder_lstm = nn.LSTM(hidden, hidden, num_layers=1)
        self.decoder_lstm = nn.LSTM(hidden, hidden, num_layers=1)
        self.after_decoder_hidden = nn.Linear(2 * hidden, hidden)
        self.hidden2vocab = nn.Linear(hidden, vocab)
        self.attn_lin = nn.Linear(hidden, hidden)
        self.project_enc = nn.Linear(hidden, hidden)

    def forward(self, source, target):
        """source (N, B), target (T + 1, B) = <sos> y -> log-probabilities (T, B, V),
        α (T, B, N)."""
        encoder_output, encoder_hidden = self.encoder_lstm(self.embedding(source))
        decoder_output, _ = self.decoder_lstm(self.embedding(target[:-1]), encoder_hidden)
        scores = torch.einsum("tbf,sbf->tbs", self.attn_lin(decoder_output), encoder_output)
        attn = scores.softmax(-1)
        c = self.project_enc(torch.einsum("tbs,sbf->tbf", attn, encoder_output))
        hidden = torch.tanh(self.after_decoder_hidden(torch.cat((decoder_output, c), dim=-1)))
        return self.hidden2vocab(hidden).log_softmax(-1), attn

    def state_probs(self, source, target):
        """Their probe (`get_state_scores2_one_off`): probs (T, N, B, V) with
        c := project_enc(h_i)."""
        encoder_output, encoder_hidden = self.encoder_lstm(self.embedding(source))
        decoder_output, _ = self.decoder_lstm(self.embedding(target[:-1]), encoder_hidden)
        c = self.project_enc(encoder_output)
        T, N = decoder_output.shape[0], encoder_output.shape[0]
        tile_c = c.unsqueeze(0).repeat(T, 1, 1, 1)
        tile_d = decoder_output.unsqueeze(1).repeat(1, N, 1, 1)
        out = torch.tanh(self.after_decoder_hidden(torch.cat((tile_d, tile_c), dim=-1)))
        return self.hidden2vocab(out).softmax(-1)


def test_authors_layout_loads_into_ours_and_gives_the_same_outputs():
    torch.manual_seed(3)
    V, H = 8, 5
    theirs = AuthorsSeq2seq(V, H).double()
    ours = la.OfficialSeq2Seq(V, hidden=H).double()
    # strict: every name maps
    ours.load_state_dict(la.seq2seq_official_to_ours(theirs.state_dict()))
    x = torch.randint(0, V - 2, (3, 6))
    src = torch.cat([x, torch.full((3, 1), V - 2)], 1)  # x <eos>
    tgt = torch.cat([torch.full((3, 1), V - 1), src], 1)  # <sos> x <eos>
    logp_theirs, attn_theirs = theirs(src.T, tgt.T)
    logits, alpha = ours(src, tgt[:, :-1])
    assert torch.allclose(logits.log_softmax(-1), logp_theirs.transpose(0, 1), atol=1e-12)
    assert torch.allclose(alpha[:, 0], attn_theirs.transpose(0, 1), atol=1e-12)
    probs = theirs.state_probs(src.T, tgt.T)  # (T, N, B, V)
    y = tgt[:, 1:]
    index = y[:, :, None, None].expand(-1, -1, 7, 1)
    expected = probs.permute(2, 0, 1, 3).gather(-1, index)[..., 0]
    assert torch.allclose(ours.probe(src, tgt[:, :-1], y), expected, atol=1e-12)


def test_heads_are_averaged_as_in_the_authors_multihead_code(rng):
    """multihead.py: per head attn_proj -> softmax -> context -> enc_proj, then torch.mean."""
    torch.manual_seed(0)
    K, H = 4, 5
    heads = [la.AttentionHead(H).double() for _ in range(K)]
    # time-major: (T, B), (N, B)
    dec, enc = t(rng.normal(size=(3, 2, H))), t(rng.normal(size=(6, 2, H)))
    feats = [head.query(dec) for head in heads]
    distrs = [torch.einsum("tbf,sbf->bts", f, enc).softmax(-1) for f in feats]
    contexts = [torch.einsum("bts,sbf->tbf", d, enc) for d in distrs]
    theirs = torch.cat([hd.context(c).unsqueeze(0) for c, hd in zip(contexts, heads)]).mean(0)
    model = la.OfficialSeq2Seq(7, hidden=H).double()
    model.set_heads(heads)
    ours, alpha = la.projected_attention_torch(dec.transpose(0, 1), enc.transpose(0, 1),
                                               *model.head_params())
    assert torch.allclose(ours, theirs.transpose(0, 1), atol=1e-12)
    assert torch.allclose(alpha, torch.stack(distrs, 1), atol=1e-12)


# ----------------------------------------------------------------------------- the copy data
def test_copy_ids_frames_and_vocabulary(rng):
    src, tgt, vocab = copy_ids(300, 4, 6, rng)
    assert src.shape == (300, 5) and tgt.shape == (300, 6) and vocab == 8
    assert np.all(src[:, -1] == 6) and np.all(tgt[:, 0] == 7) and np.all(tgt[:, -1] == 6)
    assert np.array_equal(tgt[:, 1:], src)  # copy: y = x <eos>
    assert all(len(set(row)) == 4 for row in src[:, :4])  # distinct words
    assert set(np.unique(tgt[:, 1:])) == set(range(7))  # every output class occurs (<sos> is input)
    assert set(np.unique(src[:, :4])) == set(range(6))
    two, tgt2, vocab2 = copy_ids(300, 4, 4, rng, n_sets=2)
    assert vocab2 == 10 and set(np.unique(two[:, :4])) == set(range(8))
    assert all(set(row) in ({0, 1, 2, 3}, {4, 5, 6, 7}) for row in two[:, :4].tolist())
    perm, tgt3, _ = copy_ids(5, 4, 6, rng, order=[2, 0, 3, 1])
    assert np.array_equal(tgt3[:, 1:5], perm[:, [2, 0, 3, 1]])


def test_copy_task_sample_and_right_positions(rng):
    task = course.CopyTask("π", 4, 6, order=[2, 0, 3, 1])
    src, tgt_in, tgt_out = task.sample(3, rng)
    assert src.shape == tgt_in.shape == tgt_out.shape == (3, 5)
    rows = torch.arange(3)[:, None]
    # the right position holds y_t
    assert torch.equal(src[rows, torch.as_tensor(task.right)], tgt_out)


def test_no_attention_ceiling_matches_a_simulated_decoder(rng):
    n, trials = 6, 20000
    x = np.argsort(rng.random((trials, n)), axis=1)  # permutations of n words
    emitted = np.zeros((trials, n), bool)
    hits = 0
    for t_ in range(n):  # guess uniformly among the words not emitted yet (teacher forcing)
        guess = np.where(emitted, np.inf, rng.random((trials, n))).argmin(1)
        hits += (guess == x[:, t_]).sum()
        emitted[np.arange(trials), x[:, t_]] = True
    assert abs(hits / (trials * n) - course.no_attention_ceiling(n, eos=False)) < 0.01
    assert abs(course.no_attention_ceiling(40, eos=False) - 0.10696) < 1e-5
    assert course.no_attention_ceiling(40) == pytest.approx((40 * 0.106960 + 1) / 41, abs=1e-5)


# ----------------------------------------------------------------------------- training
def test_train_copy_is_seeded_stops_when_learned_and_tracks():
    task = course.CopyTask("3-of-4", 3, 4)

    def run(**kw):
        torch.manual_seed(0)
        return course.train_copy(la.OfficialSeq2Seq(task.vocab, hidden=8), task, seed=1, steps=4,
                             batch=8, eval_every=2, eval_pairs=6, **kw)

    a, b = run(track=3), run(track=3)
    assert a == b and a["step"] == [0, 2, 4] and set(a) == {"step", "accuracy", "attention",
                                                            "probe"}
    assert run(stop_above=-1.0)["step"] == [0]  # above -1 at once: stops before training
    assert run(stop_above=-1.0, stop_by=0)["step"] == [0]  # learned by step 0: stops there
    assert run(stop_above=-1.0, stop_by=-1)["step"] == [0, 2, 4]  # after stop_by: trains on
    assert course.learned_at({"step": [0, 10, 20], "accuracy": [0.1, 0.96, 0.97]}) == 10
    assert not course.learned({"step": [0], "accuracy": [0.95]})  # strictly above 0.95


def test_head_sampling_keeps_the_base_and_the_heads_intact():
    task = course.CopyTask("3-of-4", 3, 4)
    torch.manual_seed(0)
    base = la.OfficialSeq2Seq(task.vocab, hidden=8)
    before = copy.deepcopy(base.state_dict())
    good, bad, statuses = course.sample_heads(base, task, n_good=0, n_bad=2, max_candidates=3,
                                          seeds=(0, 1), steps=1, batch=4, eval_pairs=4)
    assert statuses == ["bad", "bad"] and len(bad) == 2 and good == []  # 1 step: nothing learns
    assert all(torch.equal(v, base.state_dict()[k]) for k, v in before.items())
    head0 = copy.deepcopy(bad[0].state_dict())
    course.train_copy(course.with_heads(base, bad), task, 0, steps=2, batch=4, eval_pairs=4)
    assert all(torch.equal(v, bad[0].state_dict()[k]) for k, v in head0.items())
    assert not torch.equal(bad[0].query.weight, bad[1].query.weight)  # two different draws


def test_distinct_combinations_count_each_set_of_heads_once():
    heads = course.draw_heads(4, 3, torch.Generator().manual_seed(0))
    rng = np.random.default_rng(0)

    def draw():
        return [heads[i] for i in rng.choice(4, 3, replace=False)]

    combos = course.distinct_combinations(draw, 10)
    assert len(combos) == 4  # C(4, 3): no more exist
    assert len({frozenset(map(id, c)) for c in combos}) == 4
    assert course.distinct_combinations(lambda: [heads[0], heads[0]], 2) == []  # a head twice: no


# ----------------------------------------------------------------------------- bad input
def test_bad_input_raises_value_error(rng):
    with pytest.raises(ValueError, match="^vocab: expected an integer >= 1"):
        la.OfficialSeq2Seq(0, hidden=4)
    model = la.OfficialSeq2Seq(5, hidden=4)
    with pytest.raises(ValueError, match=r"^tgt_in: expected int \(B, T\) .* with B = 2"):
        model(torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^src: expected ids in \[0, 5\)"):
        model(torch.full((2, 3), 5), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="set_heads"):
        model.set_heads([])
    with pytest.raises(ValueError, match=r"^h: .*H = 3"):
        la.projected_attention_np(np.zeros((1, 2, 3)), np.zeros((1, 4, 2)), *[np.zeros(1)] * 4)
    with pytest.raises(ValueError, match="Seq2seq"):
        la.seq2seq_official_to_ours({"embedding.weight": torch.zeros(3, 2)})
    bi = AuthorsSeq2seq(5, 4).state_dict()
    bi["encoder_lstm.weight_ih_l0_reverse"] = bi["encoder_lstm.weight_ih_l0"]
    with pytest.raises(ValueError, match="unidirectional"):
        la.seq2seq_official_to_ours(bi)
    with pytest.raises(ValueError, match="copy_ids"):
        copy_ids(4, 7, 6, rng)
    with pytest.raises(ValueError, match="order"):
        copy_ids(4, 3, 6, rng, order=[0, 0, 1])
    with pytest.raises(ValueError, match="train_copy"):
        course.train_copy(model, course.CopyTask("x", 2, 3), 0, steps=0)
    with pytest.raises(ValueError, match="ceiling"):
        course.no_attention_ceiling(0)
