"""Lesson 08's mechanism (minattn/agreement.py): the attention classifier (bidirectional LSTM,
MLP attention, probe) against its NumPy reference and the authors' module layout; the
translator Seq2SeqAttention against lesson 05's NumPy pieces; frozen uniform attention and
padding; the agreement metric, its baseline and ξ; the keyword task and vocabularies; bad
input (minattn/checks.py); lesson 08's tasks (minattn/course/agreement.py). Table 2's recipe:
test_agreement_table2.py."""

import numpy as np
import pytest
import torch
from parity import np_, t  # tests/ is on sys.path (rootdir conftest)
from torch import nn

from minattn import agreement as ag
from minattn import lstm_attention as la
from minattn.course import agreement as agc


# --------------------------------------------------- the translator against lesson 05's pieces
def reference_forward(model, src, tgt_in, mask):
    """The whole Seq2SeqAttention forward from the NumPy reference functions."""
    enc, dec = model.encoder, model.decoder
    emb_x = np_(model.src_embed.weight)[src.numpy()]
    emb_y = np_(model.tgt_embed.weight)[tgt_in.numpy()]
    h, _ = la.lstm_np(emb_x, *[np_(p) for p in (enc.weight_ih_l0, enc.weight_hh_l0,
                                                 enc.bias_ih_l0, enc.bias_hh_l0)])
    s, _ = la.lstm_np(emb_y, *[np_(p) for p in (dec.weight_ih_l0, dec.weight_hh_l0,
                                                 dec.bias_ih_l0, dec.bias_hh_l0)])
    context, alpha = la.luong_attention_np(s, h, np_(model.W_a), mask, model.uniform)
    return la.output_np(context, s, *[np_(p) for p in model.output_params()]), alpha, h, s


@pytest.mark.parametrize("heads,uniform", [(1, False), (3, False), (1, True)])
def test_seq2seq_matches_numpy_reference(heads, uniform):
    torch.manual_seed(0)
    model = ag.Seq2SeqAttention(11, 9, hidden=8, embed=5, heads=heads, uniform=uniform).double()
    src, tgt_in = torch.randint(0, 11, (2, 6)), torch.randint(0, 9, (2, 4))
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[0, 4:] = False
    logits, alpha = model(src, tgt_in, mask)
    ref_logits, ref_alpha, _, _ = reference_forward(model, src, tgt_in, mask.numpy())
    assert np.abs(np_(logits) - ref_logits).max() < 1e-10
    assert np.abs(np_(alpha) - ref_alpha).max() < 1e-12


def test_lexical_probe_numpy_torch_and_model(rng):
    torch.manual_seed(0)
    model = ag.Seq2SeqAttention(11, 9, hidden=8, embed=5).double()
    src, tgt_in, tgt_out = (torch.randint(0, 11, (2, 6)), torch.randint(0, 9, (2, 4)),
                            torch.randint(0, 9, (2, 4)))
    _, _, h, s = reference_forward(model, src, tgt_in, None)
    beta_np = la.lexical_probe_np(h, s, tgt_out.numpy(), *[np_(p) for p in model.output_params()])
    beta_model = model.probe(src, tgt_in, tgt_out)
    assert beta_np.shape == (2, 4, 6)
    assert np.abs(np_(beta_model) - beta_np).max() < 1e-10


def test_probe_equals_model_output_when_attention_is_one_hot():
    torch.manual_seed(0)
    model = ag.Seq2SeqAttention(11, 9, hidden=8, embed=5).double()
    src, tgt_in, tgt_out = (torch.randint(0, 11, (2, 6)), torch.randint(0, 9, (2, 4)),
                            torch.randint(0, 9, (2, 4)))
    beta = model.probe(src, tgt_in, tgt_out)
    for i in range(6):
        only_i = torch.zeros(2, 6, dtype=torch.bool)
        only_i[:, i] = True  # the mask leaves one position: α is one-hot on i
        logits, alpha = model(src, tgt_in, only_i)
        assert torch.all(alpha[..., i] == 1)
        p = logits.softmax(-1).gather(-1, tgt_out[..., None])[..., 0]
        assert torch.allclose(p, beta[..., i], atol=1e-12)


# ----------------------------------------------------------------------------- the classifier
def lstm_params(lstm, suffix=""):
    return [np_(getattr(lstm, f"{name}_l0{suffix}"))
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def test_bilstm_np_matches_torch_packed_bidirectional_lstm(rng):
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True, bidirectional=True).double()
    x, lengths = rng.normal(size=(3, 6, 3)), np.array([6, 4, 1])
    packed = nn.utils.rnn.pack_padded_sequence(t(x), torch.as_tensor(lengths), batch_first=True,
                                               enforce_sorted=False)
    ref, _ = nn.utils.rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=6)
    ours = ag.bilstm_np(x, lengths, lstm_params(lstm), lstm_params(lstm, "_reverse"))
    assert np.abs(ours - np_(ref)).max() < 1e-12  # padded positions: zeros in both


def test_classifier_states_match_bilstm_np_with_padding():
    torch.manual_seed(0)
    model = ag.AttentionClassifier(13, hidden=5, embed=4).double()
    x, lengths = torch.randint(1, 13, (3, 7)), np.array([7, 3, 1])
    mask = torch.arange(7)[None] < torch.as_tensor(lengths)[:, None]
    h_np = ag.bilstm_np(np_(model.embed.weight)[x.numpy()], lengths,
                        lstm_params(model.forward_lstm), lstm_params(model.backward_lstm))
    assert np.abs(np_(model.states(x, mask)) - h_np).max() < 1e-12
    x2 = x.clone()
    x2[~mask] = 4  # other padding tokens change nothing
    assert torch.equal(model.states(x2, mask), model.states(x, mask))


def test_classifier_parity_probe_and_one_hot(rng):
    torch.manual_seed(0)
    model = ag.AttentionClassifier(13, hidden=6, embed=4, attn_hidden=5).double()
    x = torch.randint(0, 13, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[2, 5:] = False
    z, alpha = model(x, mask)
    h = np_(model.states(x, mask))
    params = [np_(p) for p in (model.attn.weight, model.attn.bias, model.v.weight[0],
                               model.readout.weight[0])] + [model.readout.bias.item()]
    z_np, a_np = ag.classifier_np(h, *params, mask=mask.numpy())
    assert np.abs(np_(z) - z_np).max() < 1e-12 and np.abs(np_(alpha) - a_np).max() < 1e-12
    z_t, a_t = ag.classifier_torch(t(h), *[t(p) for p in params[:4]], params[4],
                                   torch.as_tensor(mask.numpy()))
    assert np.abs(np_(z_t) - z_np).max() < 1e-12 and np.abs(np_(a_t) - a_np).max() < 1e-12
    labels = np.array([1, 0, 1])
    beta = model.probe(x, torch.as_tensor(labels), mask)
    assert np.abs(np_(beta) - ag.classifier_probe_np(h, params[3], params[4], labels)).max() < 1e-12
    logits = model.position_logits(x, mask)
    for i in range(5):  # attending to i alone = reading the log-odds wᵀh_i + b₀
        z_i = ag.classifier_np(h, *params, mask=np.eye(7, dtype=bool)[[i, i, i]])[0]
        assert np.allclose(z_i, np_(logits[:, i]), atol=1e-12)
        sign = np.array([1.0, -1.0, 1.0])
        assert np.allclose(1 / (1 + np.exp(-sign * z_i)), np_(beta[:, i]), atol=1e-12)


class AuthorsClassifier(nn.Module):
    """The module layout of the authors' classification/classifier_model.py, re-created for
    this test: a packed bidirectional nn.LSTM, hidden2attn_intermediate -> ReLU ->
    attn_intermediate2logit (with a bias), hidden2beta; pad positions masked with -1e9."""

    def __init__(self, vocab, embed, hidden, inter):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.encoder = nn.LSTM(embed, hidden, batch_first=True, bidirectional=True)
        self.hidden2attn_intermediate = nn.Linear(2 * hidden, inter)
        self.attn_intermediate2logit = nn.Linear(inter, 1)
        self.hidden2beta = nn.Linear(2 * hidden, 1)

    def forward(self, ids, lengths, uniform):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(ids), lengths,
                                                   batch_first=True, enforce_sorted=False)
        states, _ = nn.utils.rnn.pad_packed_sequence(self.encoder(packed)[0], batch_first=True)
        pad = torch.arange(ids.shape[1])[None] >= lengths[:, None]
        logit = self.attn_intermediate2logit(torch.relu(self.hidden2attn_intermediate(states)))
        logit = logit[..., 0] * (0 if uniform else 1) + pad * -1e9
        attn = logit.softmax(-1)
        beta = self.hidden2beta(states)[..., 0] * ~pad
        return (attn * beta).sum(-1), attn, beta


@pytest.mark.parametrize("uniform", [False, True])
def test_classifier_matches_the_authors_layout(uniform):
    torch.manual_seed(0)
    ours = ag.AttentionClassifier(11, hidden=5, embed=4, attn_hidden=3, uniform=uniform).double()
    theirs = AuthorsClassifier(11, 4, 5, 3).double()
    with torch.no_grad():
        theirs.embedding.weight.copy_(ours.embed.weight)
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(theirs.encoder, f"{name}_l0").copy_(getattr(ours.forward_lstm, f"{name}_l0"))
            getattr(theirs.encoder, f"{name}_l0_reverse").copy_(
                getattr(ours.backward_lstm, f"{name}_l0"))
        theirs.hidden2attn_intermediate.load_state_dict(ours.attn.state_dict())
        theirs.attn_intermediate2logit.weight.copy_(ours.v.weight)
        theirs.attn_intermediate2logit.bias.fill_(0.7)  # a constant: the softmax ignores it
        theirs.hidden2beta.load_state_dict(ours.readout.state_dict())
    lengths = torch.tensor([6, 2, 4])
    ids = torch.randint(1, 11, (3, 6)) * (torch.arange(6)[None] < lengths[:, None])
    scores, attn, beta = theirs(ids, lengths, uniform)
    mask = torch.arange(6)[None] < lengths[:, None]
    z, alpha = ours(ids, mask)
    assert torch.allclose(z, scores, atol=1e-12) and torch.allclose(alpha, attn, atol=1e-12)
    # their β is the log-odds per position, signed by the label when compared; ours is σ(±z_i)
    assert torch.allclose(ours.position_logits(ids, mask) * mask, beta, atol=1e-12)


# ----------------------------------------------------------------------------- uniform, padding
def test_frozen_uniform_attention_is_uniform_and_gets_no_gradient():
    torch.manual_seed(0)
    model = ag.Seq2SeqAttention(11, 9, hidden=8, embed=5, uniform=True).double()
    src, tgt_in = torch.randint(0, 11, (2, 6)), torch.randint(0, 9, (2, 4))
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 2:] = False
    logits, alpha = model(src, tgt_in, mask)
    assert torch.allclose(alpha[0], torch.full_like(alpha[0], 1 / 6))
    assert torch.allclose(alpha[1, ..., :2], torch.full_like(alpha[1, ..., :2], 1 / 2))
    assert torch.all(alpha[1, ..., 2:] == 0)
    logits.sum().backward()
    assert model.W_a.grad is None or torch.all(model.W_a.grad == 0)
    assert model.encoder.weight_ih_l0.grad.abs().sum() > 0  # the rest does learn
    clf = ag.AttentionClassifier(13, hidden=6, uniform=True).double()
    z, a = clf(torch.randint(0, 13, (2, 5)))
    assert torch.allclose(a, torch.full_like(a, 0.2))
    z.sum().backward()
    assert clf.v.weight.grad is None or torch.all(clf.v.weight.grad == 0)


def test_padding_gets_zero_weight_and_changes_nothing():
    torch.manual_seed(0)
    model = ag.Seq2SeqAttention(11, 9, hidden=8, embed=5, heads=2).double()
    src, tgt_in = torch.randint(1, 11, (2, 5)), torch.randint(0, 9, (2, 4))
    logits, alpha = model(src, tgt_in)
    padded = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1)  # 3 pad tokens (id 0)
    mask = torch.arange(8) < 5
    logits_p, alpha_p = model(padded, tgt_in, mask.expand(2, 8))
    assert torch.all(alpha_p[..., 5:] == 0)
    assert torch.allclose(logits_p, logits, atol=1e-12)
    assert torch.allclose(alpha_p[..., :5], alpha, atol=1e-12)


# ----------------------------------------------------------------------------- agreement
@pytest.mark.exercise("8.1")
def test_agreement_by_hand():
    b = np.arange(20.0)  # n = 20: top ⌈5% · 20⌉ = 1 position (the last)
    a_hit, a_miss = np.eye(20)[19], np.eye(20)[18]
    assert ag.agreement_np(a_hit, b) == 1.0 and ag.agreement_np(a_miss, b) == 0.0
    b21 = np.arange(21.0)  # n = 21: ⌈1.05⌉ = 2 positions
    assert ag.agreement_np(np.eye(21)[19], b21) == 1.0
    assert ag.agreement_np(np.eye(21)[18], b21) == 0.0
    # the mask shrinks n and hides positions: argmax of a is taken over real positions only
    a = np.array([0.1, 0.2, 0.9, 0.0])
    b4 = np.array([0.0, 1.0, 0.5, 9.0])
    assert ag.agreement_np(a, b4) == 0.0  # b's best is position 3
    assert ag.agreement_np(a, b4, mask=np.array([True, True, True, False])) == 0.0
    assert ag.agreement_np(a, b4, mask=np.array([True, False, True, False])) == 1.0
    batch = ag.agreement_np(np.stack([a_hit, a_miss]), np.stack([b, b]))
    assert batch.tolist() == [1.0, 0.0]


@pytest.mark.exercise("8.1")
def test_agreement_numpy_torch_parity(rng):
    a, b = rng.normal(size=(6, 5, 30)), rng.normal(size=(6, 5, 30))
    b[..., :3] += 2 * a[..., :3]
    mask = rng.random((6, 1, 30)) < 0.8
    got = ag.agreement_torch(t(a), t(b), torch.as_tensor(mask)).numpy()
    assert np.array_equal(got, ag.agreement_np(a, b, mask))


def test_agreement_baseline_matches_simulation(rng):
    lengths = rng.integers(3, 45, size=400)
    hits = []
    for n in lengths:
        a, b = rng.random((200, n)), rng.random((200, n))
        hits.append(ag.agreement_np(a, b).mean())
    assert abs(np.mean(hits) - ag.agreement_baseline_np(lengths)) < 0.01
    assert ag.agreement_baseline_np([20]) == 0.05 and ag.agreement_baseline_np([10]) == 0.1


@pytest.mark.exercise("8.2")
def test_contextualized_agreement_needs_a_strictly_larger_agreement():
    # the authors' passing_idx: the first checkpoint whose agreement is *above* the threshold
    assert ag.contextualized_agreement([0.1, 0.3, 0.5], [10, 20, 30], 0.3) == 30.0
    assert ag.contextualized_agreement([0.1, 0.31, 0.5], [10, 20, 30], 0.3) == 20.0
    assert ag.contextualized_agreement([0.1, 0.2], [10, 20], 0.9) is None


# ----------------------------------------------------------------------------- lesson 08's tasks
def test_keyword_task_is_balanced_with_one_keyword_in_positives(rng):
    x, y, where = agc.keyword_task(64, 12, 10, rng)
    assert x.shape == (64, 12) and y.sum() == 32 and x.min() >= 1 and x.max() <= 10
    hits = (x == 1).sum(1)
    assert np.all(hits[y == 1] == 1) and np.all(hits[y == 0] == 0)
    assert np.all(x[y == 1, where[y == 1]] == 1) and np.all(where[y == 0] == -1)
    with pytest.raises(ValueError, match="keyword_task"):
        agc.keyword_task(3, 12, 10, rng)


def test_build_vocab_and_encode():
    vocab = agc.build_vocab([["a", "b", "a"], ["c", "a"]], min_count=1)
    assert list(vocab)[:4] == [agc.PAD, agc.UNK, agc.BOS, "a"]
    with_bos = agc.build_vocab([[agc.BOS, "a", "a"], [agc.BOS, "b"]])
    assert with_bos == {agc.PAD: 0, agc.UNK: 1, agc.BOS: 2, "a": 3, "b": 4}  # ids 0..4
    ids, lengths = agc.encode_sentences([["a", "zzz"], ["b"]], vocab)
    assert ids.tolist() == [[vocab["a"], vocab[agc.UNK]], [vocab["b"], 0]]
    assert lengths.tolist() == [2, 1]
    with pytest.raises(ValueError, match="encode_sentences"):
        agc.encode_sentences([["a"], []], vocab)


def test_the_real_data_loaders_fall_back_offline_and_say_so(monkeypatch):
    from minattn.course.data import DatasetMissing

    def missing(*args, **kwargs):
        raise DatasetMissing("not fetched")

    monkeypatch.setattr(agc, "load_sentiment", missing)
    monkeypatch.setattr(agc, "load_parallel", missing)
    (train, labels), (valid, _), fallback = agc.sentiment_data(40, 10)
    assert "keyword task" in fallback and len(train) == 40 and len(valid) == 10
    assert all(s[0] == agc.BOS and s[-1] == "<eos>" for s in train) and set(labels) <= {0, 1}
    pairs, held_out, fallback = agc.parallel_data(12)
    assert "dictionary" in fallback and pairs and held_out
    assert all(3 <= len(a) <= 12 and 3 <= len(b) <= 12 for a, b in pairs + held_out)


def test_table2_batches_are_cut_to_their_longest_row_and_read_behind_bos(monkeypatch):
    """Offline data: a batch holds `batch` rows cut to its longest one, its mask is what is
    not padding; the decoder reads the targets shifted right behind <bos>, and only <unk> and
    padding leave the loss (-100); a run's seed fixes its batches."""
    from minattn.course.data import DatasetMissing

    def missing(*args, **kwargs):
        raise DatasetMissing("not fetched")

    monkeypatch.setattr(agc, "load_sentiment", missing)
    monkeypatch.setattr(agc, "load_parallel", missing)
    task = agc.sentiment_task(dict(batch=8, at=[0], n_train=40, n_valid=10), 0, "cpu")
    x, mask, y = next(task.batches(0))
    assert x.shape[0] == 8 and mask[:, -1].any() and torch.equal(mask, x != 0)
    assert y.dtype == torch.float32 and set(y.tolist()) <= {0.0, 1.0}
    vx, v_mask, vy = task.valid
    assert np.array_equal(task.key_mask, v_mask.numpy()) and task.vocab[0] > vx.max()
    assert torch.equal(next(task.batches(3))[0], next(task.batches(3))[0])
    sizes = dict(batch=8, at=[0], n_valid=10, max_len=12, tgt_words=50, n_read=None)
    task = agc.translation_task(sizes, 0, "cpu")
    src, mask, tgt_in, tgt_out = next(task.batches(0))
    assert src.shape[0] == 8 and mask[:, -1].any() and torch.equal(mask, src != 0)
    bos = 2  # build_vocab: <pad>, <unk>, <bos> first
    assert (tgt_in[:, 0] == bos).all() and tgt_in.shape == tgt_out.shape
    kept = tgt_out[:, :-1] != -100
    assert torch.equal(tgt_in[:, 1:][kept], tgt_out[:, :-1][kept])
    v_src, v_mask, v_in, v_tgt, counted = task.valid
    assert torch.equal(counted, (v_tgt > 1)) and np.array_equal(task.row_mask, counted.numpy())
    assert (v_in[:, 0] == bos).all() and torch.equal(v_in[:, 1:], v_tgt[:, :-1])


# ----------------------------------------------------------------------------- bad input
def test_bad_input_raises_value_error():
    with pytest.raises(ValueError, match="^b: .*a's shape"):
        ag.agreement_np(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError, match="^b: .*N = 4"):
        ag.agreement_torch(torch.zeros(4), torch.zeros(5))
    with pytest.raises(ValueError, match="lengths"):
        ag.agreement_baseline_np([])
    with pytest.raises(ValueError, match="performances"):
        ag.contextualized_agreement([0.1], [1, 2], 0.5)
    with pytest.raises(ValueError, match="heads"):
        ag.Seq2SeqAttention(10, 10, heads=0)
    model = ag.Seq2SeqAttention(10, 10, hidden=4)
    with pytest.raises(ValueError, match="tgt_in"):
        model(torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="^x: "):
        ag.AttentionClassifier(10, hidden=4)(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="hidden"):
        ag.AttentionClassifier(10, hidden=0)
    holes = torch.tensor([[True, False, True], [True, True, True]])  # padding not at the end
    with pytest.raises(ValueError, match="mask"):
        ag.AttentionClassifier(10, hidden=4)(torch.ones(2, 3, dtype=torch.long), holes)
    with pytest.raises(ValueError, match="mask"):
        ag.AttentionClassifier(10, hidden=4)(torch.ones(2, 3, dtype=torch.long), holes[0])
    with pytest.raises(ValueError, match="mask"):
        ag.AttentionClassifier(10, hidden=4)(torch.ones(2, 3, dtype=torch.long), holes.int())
    with pytest.raises(ValueError, match="every"):
        agc.checkpoints(100, (0, 10), 0)


# ----------------------------------------------------------------------------- checks at the edge
def test_public_functions_check_at_the_edge_and_start_with_the_math():
    """Each array function's checks run before its body (`@checked`), so the body, as
    `show()` prints it, starts with the math; what a mask hides never reaches a result."""
    import inspect

    for fn in (ag.classifier_np, ag.classifier_torch, ag.classifier_probe_np,
               ag.classifier_probe_torch, ag.agreement_np, ag.agreement_torch,
               ag.agreement_baseline_np, ag.contextualized_agreement, ag.mean_agreement_np,
               ag.random_baseline_np, ag.agreement_row_np):
        assert callable(getattr(fn, "check", None)), fn.__name__
        body = inspect.getsource(inspect.unwrap(fn)).split('"""')[2]
        assert "check_" not in body and "fail(" not in body, fn.__name__
    rng = np.random.default_rng(0)
    h, mask = rng.normal(size=(2, 5, 4)), np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    params = rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=3), rng.normal(size=4)
    clean = ag.classifier_np(h, *params, 0.1, mask)
    h[0, 3:] = np.nan  # padding may hold anything
    dirty = ag.classifier_np(h, *params, 0.1, mask)
    assert all(np.array_equal(x, y) for x, y in zip(clean, dirty))
    a = np.where(mask, rng.normal(size=(2, 5)), np.nan)
    assert np.isfinite(ag.agreement_np(a, rng.normal(size=(2, 5)), mask)).all()


# ----------------------------------------------------------------------------- Table 2's replicates
def test_table2_replicates_are_independent_and_rows_follow_the_recipe(rng):
    """Each replicate trains its own gold, re-seeded and frozen-uniform model (no run shared
    between replicates), and its row is agreement_row_np on those three runs."""
    C, M, N, calls = 3, 4, 6, []

    def run(seed, uniform):
        calls.append((seed, uniform))
        r = np.random.default_rng(seed)
        return {"alpha": r.random((C, M, 1, N)), "beta": r.random((C, M, 1, N)),
                "perf": r.random(C)}

    task = agc.Table2Task("toy", (N,), None, (), [0, 1, 2], np.ones((M, N), bool), None, "", "")
    seeds = [(0, 1, 2), (3, 4, 5)]
    reps = agc.table2_replicates(run, task, seeds)
    assert calls == [(0, False), (1, False), (2, True), (3, False), (4, False), (5, True)]
    for rep, (g, o, u) in zip(reps, seeds):
        expected = ag.agreement_row_np(run(g, False), [run(o, False)], run(u, True))
        assert rep["row"]["A(α, β^uf)"] == expected["A(α, β^uf)"]
        assert rep["row"]["A(α, β)"] == expected["A(α, β)"]
        assert np.array_equal(rep["row"]["curve"], expected["curve"])
