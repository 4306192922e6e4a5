"""Task-specific attention heads (minattn/task_heads.py, its fast path minattn/fast/task_heads.py
and the lesson's machinery minattn/course/task_heads.py): NumPy vs torch parity in float64,
gradients, padding invariance, what the U(0.9, 1) initialisation does, the Pearson loss,
the pair and sentence models, the Bible pair builder and its lexical lines, training, bad input."""

import math

import numpy as np
import pytest
import torch
from expect import close, returns_array, returns_tensor  # tests/ is on sys.path

from minattn import task_heads as th
from minattn.course import task_heads as ct
from minattn.fast.task_heads import attention_pool_fast_torch
from minattn.task_heads import PairModel, SentenceClassifier

D, H = 16, 4


def padded(rng, lengths, d=D, fill=0.0):
    """Random states (B, L, d) float64 with padding filled by `fill`, and the mask."""
    B, L = len(lengths), max(lengths)
    x = rng.standard_normal((B, L, d))
    mask = np.arange(L)[None, :] < np.array(lengths)[:, None]
    x[~mask] = fill
    return x, mask


def pool_of(name, **kw):
    """A read-out by name: a pooling function, or a head of width D with H heads."""
    if name in ("cls", "mean"):
        return th.cls_pool_torch if name == "cls" else th.mean_pool_torch
    return (th.AttentionPool if name == "attention" else th.CrossAttentionPool)(D, H, **kw)


def t64(*arrays):
    return [torch.from_numpy(np.asarray(a)) for a in arrays]


def seeded_head(cls, *args, **kw):
    torch.manual_seed(0)
    return cls(*args, **kw).double()


# ============================================================================ pooling
@pytest.mark.exercise("7.1")
def test_mean_pool_by_hand():
    states = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                       [[5.0, 6.0], [-5.0, 0.0], [9.0, 9.0]]])
    mask = np.array([[True, True, False], [True, True, True]])
    expected = np.array([[2.0, 3.0], [3.0, 5.0]])
    by_length = expected * mask.sum(1, keepdims=True) / mask.shape[1]
    mistakes = [("the mean counts the padding: divide by the number of real tokens, not by L",
                 by_length)]
    close(returns_array(th.mean_pool_np(states, mask), "mean_pool_np"), expected, atol=1e-15,
          what="mean_pool_np: ", mistakes=mistakes)
    pooled = returns_tensor(th.mean_pool_torch(*t64(states, mask)), "mean_pool_torch")
    close(pooled, expected, atol=1e-12, what="mean_pool_torch: ", mistakes=mistakes)
    torch.testing.assert_close(pooled, torch.from_numpy(expected))


@pytest.mark.exercise("7.1")
def test_mean_pool_ignores_padding(rng):
    x, mask = padded(rng, [5, 2, 3])
    noisy, nan = x.copy(), x.copy()
    noisy[~mask], nan[~mask] = 1e6, np.nan
    close(th.mean_pool_np(noisy, mask), th.mean_pool_np(x, mask), atol=1e-9,
          what="mean_pool_np: padding of 1e6 changed the mean: ")
    close(th.mean_pool_np(nan, mask), th.mean_pool_np(x, mask), atol=1e-9, what="mean_pool_np: ",
          nonfinite="NaN in the padding reached the mean: select the real tokens (a product "
                    "with the mask keeps 0 × NaN = NaN)")
    xt, mt = t64(x, mask)
    pooled = returns_tensor(th.mean_pool_torch(xt, mt), "mean_pool_torch")
    assert torch.allclose(pooled, torch.from_numpy(th.mean_pool_np(x, mask)), atol=1e-12, rtol=0)


def test_cls_pool_reads_the_first_token(rng):
    x, mask = padded(rng, [3, 1])
    np.testing.assert_array_equal(th.cls_pool_np(x, mask), x[:, 0])
    assert torch.equal(th.cls_pool_torch(*t64(x, mask)), torch.from_numpy(x[:, 0]))


def test_layer_norm_matches_torch(rng):
    x = rng.standard_normal((2, 3, D)) * 3 + 1
    out = th.layer_norm_torch(torch.from_numpy(x))
    np.testing.assert_allclose(th.layer_norm_np(x), out.numpy(), atol=1e-12)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x), (D,), eps=th.LN_EPS)
    assert torch.allclose(out, ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(th.layer_norm_np(x).sum(-1), 0.0, atol=1e-12)  # zero-sum rows


# ============================================================================ heads: parity
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("normalize", [True, False])
def test_attention_pool_matches_numpy(rng, num_layers, normalize):
    x, mask = padded(rng, [6, 2, 4])
    head = seeded_head(th.AttentionPool, D, H, num_layers, normalize=normalize)
    z, w = head(*t64(x, mask), need_weights=True)
    z_np, w_np = th.attention_pool_np(x, mask, head.numpy_params(), H, normalize=normalize)
    np.testing.assert_allclose(z.detach().numpy(), z_np, atol=1e-10, rtol=0)
    np.testing.assert_allclose(w.detach().numpy(), w_np, atol=1e-12, rtol=0)
    z_fast, none = head(*t64(x, mask))  # the fused SDPA path gives the same output
    assert none is None and torch.allclose(z_fast, z, atol=1e-10, rtol=0)
    assert np.all(w_np[~np.broadcast_to(mask[:, None], w_np.shape)] == 0)  # padding unread
    np.testing.assert_allclose(w_np.sum(-1), 1.0, atol=1e-12)


@pytest.mark.exercise("7.2")
@pytest.mark.parametrize("num_layers", [1, 3])
def test_cross_attention_pool_matches_numpy(rng, num_layers):
    a, am = padded(rng, [5, 2, 3])
    b, bm = padded(rng, [2, 6, 4])
    head = seeded_head(th.CrossAttentionPool, D, H, num_layers)
    z, w = head(*t64(a, am, b, bm), need_weights=True)
    z_np, w_np = th.cross_attention_pool_np(a, am, b, bm, head.numpy_params(), H)
    assert z.shape == (3, D) and w.shape == (3, H, 5, 6)
    np.testing.assert_allclose(z.detach().numpy(), z_np, atol=1e-10, rtol=0)
    np.testing.assert_allclose(w.detach().numpy(), w_np, atol=1e-12, rtol=0)
    assert np.all(w_np[~np.broadcast_to(bm[:, None, None, :], w_np.shape)] == 0)


@pytest.mark.exercise("7.2")
def test_cross_attention_with_uniform_weights_is_mean_plus_linear_of_mean(rng):
    # zero q/k projections -> every score 0 -> uniform attention over B's real tokens
    a, am = padded(rng, [4, 2])
    b, bm = padded(rng, [3, 5])
    head = seeded_head(th.CrossAttentionPool, D, H, 1)
    mha = head.layers[0]
    with torch.no_grad():
        for p in (mha.q_proj.weight, mha.q_proj.bias, mha.k_proj.weight, mha.k_proj.bias):
            p.zero_()
    z = head(*t64(a, am, b, bm))[0].detach().numpy()
    P = mha.numpy_params()
    mean_b = th.mean_pool_np(b, bm)
    expected = th.mean_pool_np(a, am) + (mean_b @ P["w_v"].T + P["b_v"]) @ P["w_o"].T + P["b_o"]
    np.testing.assert_allclose(z, expected, atol=1e-12)


def test_gradients_flow_and_match_finite_differences(rng):
    x, mask = padded(rng, [4, 3])
    head = seeded_head(th.AttentionPool, D, H, 2)
    xt = torch.from_numpy(x).requires_grad_()
    assert torch.autograd.gradcheck(lambda s: head(s, torch.from_numpy(mask))[0], (xt,))
    head(xt, torch.from_numpy(mask))[0].sum().backward()
    assert torch.all(xt.grad[~torch.from_numpy(mask)] == 0)  # padding gets no gradient
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())


# ============================================================================ padding invariance
@pytest.mark.parametrize("kind", ["attention",
                                  pytest.param("cross", marks=pytest.mark.exercise("7.2"))])
def test_extra_padding_changes_nothing(rng, kind):  # only the cross head uses exercise 7.2
    x, mask = padded(rng, [5, 3])
    more = np.concatenate([x, rng.standard_normal((2, 4, D)) * 50], axis=1)  # junk padding
    more_mask = np.concatenate([mask, np.zeros((2, 4), bool)], axis=1)
    if kind == "attention":
        head = seeded_head(th.AttentionPool, D, H, 2)
        z1, z2 = head(*t64(x, mask))[0], head(*t64(more, more_mask))[0]
    else:
        head = seeded_head(th.CrossAttentionPool, D, H, 2)
        b, bm = padded(rng, [2, 4])
        z1 = head(*t64(x, mask, b, bm))[0]
        z2 = head(*t64(more, more_mask, b, bm))[0]
        b_more = np.concatenate([b, np.full((2, 3, D), 7.0)], axis=1)
        bm_more = np.concatenate([bm, np.zeros((2, 3), bool)], axis=1)
        assert torch.allclose(head(*t64(x, mask, b_more, bm_more))[0], z1, atol=1e-10, rtol=0)
    assert torch.allclose(z1, z2, atol=1e-10, rtol=0)


# ============================================================================ U(0.9, 1) init
def test_u09_init_draws_weights_in_range_and_keeps_biases():
    torch.manual_seed(0)
    head = th.AttentionPool(32, 4, 2, init="u09")
    for mha in head.layers:
        for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            w = proj.weight
            assert 0.9 <= w.min() and w.max() <= 1.0 and abs(w.mean().item() - 0.95) < 0.01
            assert proj.bias.abs().max() <= 1 / math.sqrt(32)  # nn.Linear's default bias


def offset_states(seed=0, B=16, L=12, d=64):
    """Token states whose feature sums differ from token to token (like a real encoder's):
    a shared offset vector times a per-token factor, plus noise."""
    gen = torch.Generator().manual_seed(seed)
    offset = torch.rand(d, generator=gen)
    x = torch.randn(B, L, d, generator=gen) + torch.randn(B, L, 1, generator=gen) * offset
    lengths = torch.randint(4, L + 1, (B,), generator=gen)
    return x, torch.arange(L)[None] < lengths[:, None]


@pytest.mark.exercise("7.1")  # needs exercise 7.1
def test_u09_output_is_nearly_linear_in_mean_pooling():
    x, mask = offset_states(d=64)
    torch.manual_seed(0)
    head = th.AttentionPool(64, 4, 1, init="u09").double()
    x = x.double()
    z = head(x, mask)[0]
    mha = head.layers[0]
    linear_of_mean = mha.out_proj(mha.v_proj(th.mean_pool_torch(x, mask)))
    rel = ((z - linear_of_mean).norm() / (z - z.mean(0)).norm()).item()
    assert rel < 0.2


def test_entropy_ratio_extremes():
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    uniform = torch.tensor([[1 / 3, 1 / 3, 1 / 3, 0], [1, 0, 0, 0]]).view(2, 1, 4)
    onehot = torch.tensor([[0, 1.0, 0, 0], [1, 0, 0, 0]]).view(2, 1, 4)
    assert torch.allclose(ct.attention_entropy_ratio(uniform, mask), torch.ones(2, 1))
    assert torch.allclose(ct.attention_entropy_ratio(onehot, mask), torch.tensor([[0.0], [1.0]]))


@pytest.mark.exercise("7.1")  # needs exercise 7.1 (mean pooling)
def test_u09_output_starts_along_ones_and_grows_with_layers():
    """What the poster's init does to the head's output: its length and direction, which
    compound over layers."""
    x, mask = offset_states(d=64)
    x = x.double()
    base = th.mean_pool_torch(x, mask).norm(dim=-1).mean()
    lengths = {}
    for init, layers in (("default", 1), ("u09", 1), ("u09", 2)):
        torch.manual_seed(0)
        z = th.AttentionPool(64, 4, layers, init=init).double()(x, mask)[0]
        lengths[init, layers] = (z.norm(dim=-1).mean() / base).item()
        if init == "u09":
            cos = torch.nn.functional.cosine_similarity(z, torch.ones_like(z), dim=-1).abs()
            assert cos.min() > 0.99
    assert lengths["u09", 1] > 30 * lengths["default", 1]
    assert lengths["u09", 2] > 10 * lengths["u09", 1]


# ============================================================================ Pearson loss
def test_pearson_loss_matches_numpy_corrcoef_and_torch(rng):
    p, t = rng.standard_normal(20), rng.standard_normal(20)
    expected = -np.corrcoef(p, t)[0, 1]
    assert abs(th.pearson_loss_np(p, t) - expected) < 1e-12
    assert abs(th.pearson_loss_torch(*t64(p, t)).item() - expected) < 1e-12
    assert abs(th.pearson_loss_np(3 * t + 2, t) + 1) < 1e-12  # scale and offset do not matter
    assert abs(th.pearson_loss_np(np.ones(5), rng.standard_normal(5))) < 1e-12  # constant -> 0
    pt = torch.from_numpy(p).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: th.pearson_loss_torch(x, torch.from_numpy(t)), (pt,))


# ============================================================================ task models
@pytest.mark.parametrize("pool", ["cls", pytest.param("mean", marks=pytest.mark.exercise("7.1")),
                                  "attention"])  # only mean pooling uses exercise 7.1
def test_sentence_classifier_shapes(rng, pool):
    x, mask = padded(rng, [5, 2, 3])
    torch.manual_seed(0)
    model = SentenceClassifier(pool_of(pool), D, n_classes=3)
    xt, mt = torch.from_numpy(x).float(), torch.from_numpy(mask)
    assert model(xt, mt).shape == (3, 3)
    logits, w = model(xt, mt, need_weights=True)
    assert (w is None) == (pool != "attention")


@pytest.mark.parametrize("pool", ["cls", "mean",
                                  pytest.param("cross", marks=pytest.mark.exercise("7.2"))])
@pytest.mark.parametrize("out", ["classify", "similarity"])
def test_pair_model_is_symmetric_in_its_features(rng, pool, out):  # cross: exercise 7.2
    a, am = padded(rng, [5, 2, 3])
    b, bm = padded(rng, [2, 6, 4])
    torch.manual_seed(0)
    model = (PairModel if out == "classify" else th.PairSimilarity)(pool_of(pool), D).double()
    ab = model(*t64(a, am, b, bm))
    assert ab.shape == (3,)
    if out == "similarity":  # cos(Pu, Pv) with the same head both ways: symmetric
        assert torch.allclose(ab, model(*t64(b, bm, a, am)), atol=1e-12)
        assert torch.all(ab.abs() <= 1 + 1e-12)


@pytest.mark.exercise("7.1")  # mean pooling
def test_a_narrowing_map_reads_the_pooled_vector_or_every_token(rng):
    """`project` maps a pooling function's vector after pooling (the cheap order: for mean and
    first-token pooling it is the same as mapping every token first) and a head's tokens."""
    x, mask = padded(rng, [5, 2, 3])
    xt, mt = t64(x, mask)
    for pool in (th.mean_pool_torch, th.cls_pool_torch):
        torch.manual_seed(0)
        model = SentenceClassifier(pool, 3, project=torch.nn.Linear(D, 3)).double()
        tokens_first = model.classifier(pool(model.project(xt), mt))
        assert torch.allclose(model(xt, mt), tokens_first, atol=1e-12)
    head = th.AttentionPool(3, 1).double()
    model = SentenceClassifier(head, 3, project=torch.nn.Linear(D, 3)).double()
    torch.testing.assert_close(model(xt, mt), model.classifier(head(model.project(xt), mt)[0]))


@pytest.mark.exercise("7.1")  # needs exercise 7.1
def test_similarity_baseline_starts_at_the_cosine_of_mean_pools(rng):
    a, am = padded(rng, [5, 2])
    b, bm = padded(rng, [2, 6])
    model = th.PairSimilarity(th.mean_pool_torch, D).double()
    u, v = th.mean_pool_np(a, am), th.mean_pool_np(b, bm)
    cos = (u * v).sum(-1) / np.linalg.norm(u, axis=-1) / np.linalg.norm(v, axis=-1)
    np.testing.assert_allclose(model(*t64(a, am, b, bm)).detach().numpy(), cos, atol=1e-12)


# ============================================================================ data
def _verses_with_parallels(n=1600, seed=0):
    """Template verses where every anchor position 4k has a parallel at 4k + 402 (a candidate
    negative, far away): the same words plus "and", so its overlap with A equals the
    paraphrase's while the text differs; and 50 anchors repeated exactly, 1200 verses on."""
    verses = ct.template_verses(n, np.random.default_rng(seed))
    for i in range(0, n - 402, 4):
        verses[i + 402] = (verses[i][0] + " and", verses[i][1] + " and")
    for i in range(0, 200, 4):  # and some anchors repeated word for word (each may be used once)
        verses[i + 1200] = verses[i]
    return verses


def test_bible_pairs_matched_on_the_lexical_scorer_no_parallels_no_leaks():
    verses = _verses_with_parallels(3200)  # anchors whose best match unbalances are skipped
    pairs = ct.bible_pairs(verses, 100, np.random.default_rng(0), min_distance=10)
    assert len(pairs.texts) == 4 * 100 and len(pairs.a) == 3 * 100
    np.testing.assert_array_equal(np.bincount(pairs.level), [100, 100, 100])
    np.testing.assert_array_equal(np.bincount(pairs.split) // 3, [60, 10, 10, 20])
    # the scorer rates each negative as its paraphrase, ± 3 logits, above it about as often as
    # below: the signed gaps are centred on 0
    gap = pairs.gap[pairs.level == 0]
    assert (np.abs(gap) <= 3.0).all() and (gap > 0).any() and (gap < 0).any()
    assert abs(gap.mean()) < 0.1 * np.abs(gap).mean() + 1e-9, (gap.mean(), np.abs(gap).mean())
    words = [ct.content_words(t) for t in pairs.texts]
    for a in np.unique(pairs.a):
        rows = np.flatnonzero(pairs.a == a)
        own = dict(zip(pairs.level[rows].tolist(), rows))
        # the negative is no parallel: neither A's wording nor its paraphrase's is repeated
        negative = pairs.texts[pairs.b[own[0]]]
        web = next(w for w, b in verses if b == negative)
        assert ct.jaccard(words[a], ct.content_words(web)) <= 0.25
        assert ct.jaccard(words[pairs.b[own[2]]], words[pairs.b[own[0]]]) <= 0.25
    for split in ct.SPLIT_NAMES:  # balanced: one positive, one negative per anchor
        rows = ct.pair_rows(pairs, split)
        assert (pairs.level[rows] == 2).sum() == (pairs.level[rows] == 0).sum() > 0
        assert set(ct.pair_rows(pairs, split, "similarity")) > set(rows)
    # no text, and so no pair, in two splits
    splits_of = {}
    for a, b, split in zip(pairs.a, pairs.b, pairs.split):
        for text in (pairs.texts[a], pairs.texts[b]):
            splits_of.setdefault(text, set()).add(int(split))
    assert all(len(s) == 1 for s in splits_of.values())
    assert len({(pairs.texts[a], pairs.texts[b]) for a, b in zip(pairs.a, pairs.b)}) == len(pairs.a)
    # the scorer the negatives were matched on tells paraphrases from random far verses, but
    # far less well from the mined negatives: its score thresholded where best on the training
    # pairs, on the test pairs
    views = ct.LexicalViews(pairs.texts + [b for _, b in verses])
    rows = np.flatnonzero(pairs.level != 1)
    score = views.pairs(pairs.a[rows], pairs.b[rows]) @ pairs.scorer[0] + pairs.scorer[1]
    far = np.random.default_rng(1).integers(len(pairs.texts), len(views.length), len(rows))
    random_score = views.pairs(pairs.a[rows], far) @ pairs.scorer[0] + pairs.scorer[1]
    is_paraphrase = pairs.level[rows] == 2
    train, test = pairs.split[rows] == 0, pairs.split[rows] == 3

    def accuracy(s):
        line = ct.best_threshold(s[train], is_paraphrase[train])
        return np.mean((s[test] > line) == is_paraphrase[test])

    mined = accuracy(score)
    against_random = accuracy(np.where(is_paraphrase, score, random_score))
    assert mined < 0.75 and against_random > mined + 0.15, (mined, against_random)


def test_lexical_views_pairs_are_the_grid_diagonal_and_count_by_hand():
    texts = ["The Lord spoke to Moses, saying,", "Then the Lord said to Moses:", "A dog ran."]
    views = ct.LexicalViews(texts)
    grid = views.features([0, 1, 2], [1, 2, 0])
    pairs = views.pairs([0, 1, 2, 0], [1, 2, 0, 1])
    np.testing.assert_allclose(pairs[:3], grid[[0, 1, 2], [0, 1, 2]], atol=1e-12)
    np.testing.assert_allclose(pairs[3], pairs[0])
    names = dict(zip(ct.LEXICAL_FEATURES, pairs[0]))
    # words {the, lord, spoke, to, moses, saying} and {then, the, lord, said, to, moses}
    assert names["all-word Jaccard"] == 4 / 8 and names["shared words"] == 4
    assert names["capitalised-name Jaccard"] == 1.0  # {lord, moses} both (not the first word)
    assert names["length of B"] == 7 and 0 < names["char 3-5-gram TF-IDF cosine"] < 1
    assert views.pairs([0], [0])[0, 2] == pytest.approx(1.0)  # a text against itself
    line = (np.arange(10.0), 0.5)
    np.testing.assert_allclose(views.score([0, 1], [1, 2], line),
                               views.features([0, 1], [1, 2]) @ line[0] + 0.5)


def test_bible_pairs_would_take_parallels_without_the_filter():
    """The parallel filter is what keeps each anchor's copy out: switched off, the copy (whose
    overlap matches exactly) is chosen as the anchor's negative."""
    verses = _verses_with_parallels(3200)

    def own_copies(pairs):
        return sum(pairs.texts[b0] == pairs.texts[b2] + " and" for b0, b2 in
                   zip(pairs.b[pairs.level == 0], pairs.b[pairs.level == 2]))

    unfiltered = ct.bible_pairs(verses, 100, np.random.default_rng(0), min_distance=10,
                                parallel=1.0)
    # a copy scores as its paraphrase (a signed gap near 0): taken whenever the sum of the
    # gaps chosen so far is near 0
    assert own_copies(unfiltered) >= 5
    assert own_copies(ct.bible_pairs(verses, 100, np.random.default_rng(0), min_distance=10)) == 0


def test_bible_pairs_refuses_what_it_cannot_build():
    verses = ct.template_verses(400, np.random.default_rng(0))
    with pytest.raises(ValueError, match="too few anchors"):
        ct.bible_pairs(verses, 50, np.random.default_rng(0), min_distance=10, tolerance=0.0)
    with pytest.raises(ValueError, match="fractions"):
        ct.bible_pairs(verses, 20, np.random.default_rng(0), fractions=(0.5, 0.5, 0.5, 0.5))


def test_length_batches_visit_every_example_once_per_epoch():
    from minattn.course.train import length_batches

    lengths = torch.from_numpy(np.random.default_rng(0).integers(1, 40, 103))
    gen = torch.Generator().manual_seed(0)
    epochs = [length_batches(lengths, 8, gen) for _ in range(3)]
    for batches in epochs:
        seen = torch.cat(batches)
        assert sorted(seen.tolist()) == list(range(103))  # each example exactly once
        assert sorted(len(b) for b in batches) == [7] + [8] * 12
        spans = sorted((int(lengths[b].min()), int(lengths[b].max())) for b in batches)
        assert all(hi <= lo_next for (_, hi), (lo_next, _) in zip(spans, spans[1:]))  # sorted cuts
    assert [b.tolist() for b in epochs[0]] != [b.tolist() for b in epochs[1]]  # reshuffled


def test_random_token_states_fallback():
    states = ct.random_token_states(["a cat", "a dog sat"], dim=8)
    assert list(states.lengths()) == [4, 5]
    x, mask = states.batch([0, 1])
    assert x.shape == (2, 5, 8) and torch.equal(x[0, 1], x[1, 1])  # same word, same vector


# ============================================================================ bad input
def test_bad_input_raises_value_error(rng):
    x, mask = padded(rng, [3, 2])
    head = th.AttentionPool(D, H)
    xt, mt = torch.from_numpy(x).float(), torch.from_numpy(mask)
    with pytest.raises(ValueError, match="mask"):
        head(xt, mt[:, :2])  # mask of the wrong shape
    with pytest.raises(ValueError, match="^mask: expected bool"):
        head(xt, mt.float())
    with pytest.raises(ValueError, match="first token"):
        head(xt, torch.zeros_like(mt))
    with pytest.raises(ValueError, match=r"\(B, L, D\)"):
        th.mean_pool_np(x[0], mask[0])
    cross = th.CrossAttentionPool(D, H)
    b, bm = padded(rng, [2, 2, 4])
    with pytest.raises(ValueError, match="^b: .*B = 2"):  # pair batches of different sizes
        cross(xt, mt, torch.from_numpy(b).float(), torch.from_numpy(bm))
    with pytest.raises(ValueError, match="^b: .*B = 2"):
        th.cross_attention_pool_np(x, mask, b, bm, cross.numpy_params(), H)
    with pytest.raises(ValueError, match="^target: .*N = 3"):
        th.pearson_loss_np(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match=r"^pred: expected float \(N>=2,\), got .* \(1\)"):
        th.pearson_loss_torch(torch.ones(1), torch.ones(1))
    with pytest.raises(ValueError, match=r"^pred: expected float \(N>=2,\)"):
        th.pearson_loss_np(np.ones(1), np.ones(1))
    with pytest.raises(ValueError, match="init"):
        th.AttentionPool(D, H, init="uniform")
    with pytest.raises(ValueError, match="^num_layers: .*>= 1"):
        th.CrossAttentionPool(D, H, num_layers=0)


# ============================================================================ fast path
@pytest.mark.parametrize("normalize", [True, False])
def test_fast_single_layer_pool_equals_reference(rng, normalize):
    x, mask = padded(rng, [6, 2, 4, 1])
    head = seeded_head(th.AttentionPool, D, H, 1, normalize=normalize)
    xt, mt = t64(x, mask)
    xt.requires_grad_()
    z, w = head(xt, mt, need_weights=True)
    z_fast, w_fast = attention_pool_fast_torch(xt, mt, head.layers[0], normalize)
    assert torch.allclose(z_fast, z, atol=1e-12, rtol=0)
    assert torch.allclose(w_fast, w, atol=1e-12, rtol=0)
    grads = torch.autograd.grad(z.square().sum(), [xt, *head.parameters()])
    grads_fast = torch.autograd.grad(z_fast.square().sum(), [xt, *head.parameters()],
                                     allow_unused=True)
    for name, g, gf in zip(["states"] + [n for n, _ in head.named_parameters()], grads, grads_fast):
        if name.endswith("k_proj.bias"):  # the key bias shifts every score equally: no gradient
            assert gf is None and torch.allclose(g, torch.zeros_like(g), atol=1e-12)
        else:
            assert torch.allclose(gf, g, atol=1e-10, rtol=0), name


@pytest.mark.cuda
@pytest.mark.exercise("7.2")  # needs exercise 7.2
def test_heads_run_on_the_device_of_their_inputs(rng):
    a, am = padded(rng, [5, 2, 3])
    b, bm = padded(rng, [2, 6, 4])
    for head, args in ((seeded_head(th.AttentionPool, D, H, 2), (a, am)),
                       (seeded_head(th.CrossAttentionPool, D, H, 2), (a, am, b, bm))):
        cpu = head(*t64(*args))[0]
        gpu = head.cuda()(*[t.cuda() for t in t64(*args)])[0]
        assert gpu.device.type == "cuda" and torch.allclose(gpu.cpu(), cpu, atol=1e-10)
    head = seeded_head(th.AttentionPool, D, H, 1).cuda()
    xt, mt = [t.cuda() for t in t64(a, am)]
    assert torch.allclose(attention_pool_fast_torch(xt, mt, head.layers[0])[0], head(xt, mt)[0],
                          atol=1e-10)


def test_offline_text_fallbacks():
    texts, labels = ct.template_sentiment(20, np.random.default_rng(0))
    assert len(texts) == 20 and set(labels) <= {0, 1}
    for text, label in zip(texts, labels):
        words = set(text.split())
        assert len(words & set(ct.POSITIVE_WORDS if label else ct.NEGATIVE_WORDS)) >= 1
    verses = ct.template_verses(128 * 20, np.random.default_rng(0))  # as many as the lesson's
    pairs = ct.bible_pairs(verses, 20, np.random.default_rng(0), min_distance=10)
    nearby = [ct.jaccard(ct.content_words(pairs.texts[a]), ct.content_words(pairs.texts[b]))
              for a, b in zip(pairs.a[pairs.level == 1], pairs.b[pairs.level == 1])]
    assert np.mean(nearby) > 0  # neighbours share their topic's words


# ============================================================================ read-outs
def test_learned_query_pool_matches_numpy(rng):
    x, mask = padded(rng, [6, 2, 4])
    head = seeded_head(th.AttentionPool, D, H, 1, query="learned")
    z, w = head(*t64(x, mask), need_weights=True)
    z_np, w_np = th.attention_pool_np(x, mask, head.numpy_params(), H, query=head.numpy_query())
    np.testing.assert_allclose(z.detach().numpy(), z_np, atol=1e-10, rtol=0)
    np.testing.assert_allclose(w.detach().numpy(), w_np, atol=1e-12, rtol=0)
    # the query is the same for every sentence: the first token no longer decides what is read
    x2 = x.copy()
    x2[:, 0] = rng.standard_normal((3, D))
    w2 = head(*t64(x2, mask), need_weights=True)[1]
    first = seeded_head(th.AttentionPool, D, H, 1)
    assert not torch.allclose(first(*t64(x2, mask), need_weights=True)[1],
                              first(*t64(x, mask), need_weights=True)[1])
    assert head.query.requires_grad and not torch.allclose(w2[:, :, 1:], w[:, :, 1:])  # keys moved
    assert th.AttentionPool(D, H).numpy_query() is None


@pytest.mark.exercise("7.2")
@pytest.mark.parametrize("num_layers", [1, 3])
def test_cross_head_read_at_the_first_token(rng, num_layers):
    a, am = padded(rng, [5, 2, 3])
    b, bm = padded(rng, [2, 6, 4])
    head = seeded_head(th.CrossAttentionPool, D, H, num_layers, read="first")
    z, w = head(*t64(a, am, b, bm), need_weights=True)
    z_np, w_np = th.cross_attention_pool_np(a, am, b, bm, head.numpy_params(), H, read="first")
    assert z.shape == (3, D) and w.shape == (3, H, 1, 6)
    np.testing.assert_allclose(z.detach().numpy(), z_np, atol=1e-10, rtol=0)
    np.testing.assert_allclose(w.detach().numpy(), w_np, atol=1e-12, rtol=0)
    # only A's first token is read, and A's tokens never see each other: the rest of A is inert
    a2 = a.copy()
    a2[:, 1:] = rng.standard_normal(a2[:, 1:].shape) * 10
    assert torch.allclose(head(*t64(a2, am, b, bm))[0], z, atol=1e-12, rtol=0)
    # with the same weights, reading the mean of A differs
    mean_head = seeded_head(th.CrossAttentionPool, D, H, num_layers, read="mean")
    assert not torch.allclose(mean_head(*t64(a, am, b, bm))[0], z)


def test_pair_features_and_the_pair_model_read_outs(rng):
    u, v = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 4.0]])
    assert th.pair_features_torch(u, v).tolist() == [[1.0, -2.0, 3.0, 4.0, 2.0, 6.0, 3.0, -8.0]]
    a, am = padded(rng, [5, 2, 3])
    b, bm = padded(rng, [2, 6, 4])
    torch.manual_seed(0)
    model = PairModel(pool_of("cross", read="first"), D).double()
    assert model.readout.read == "first" and model(*t64(a, am, b, bm)).shape == (3,)
    with pytest.raises(ValueError, match="^v: "):
        th.pair_features_torch(u, v[:, :1])
    with pytest.raises(ValueError, match="^read: "):
        th.CrossAttentionPool(D, H, read="max")
    with pytest.raises(ValueError, match="query"):
        th.AttentionPool(D, H, query="last")


@pytest.mark.exercise("7.2")
def test_the_pair_model_returns_what_its_head_read(rng):
    """need_weights=True gives the same output and the head's own attention, both ways: the
    rows sum to 1 over the real tokens of the other sentence and are 0 on its padding."""
    a, am = padded(rng, [5, 2, 3])
    b, bm = padded(rng, [2, 6, 4])
    torch.manual_seed(0)
    model = PairModel(pool_of("cross", read="first"), D).double()
    x = t64(a, am, b, bm)
    out, (a_reads_b, b_reads_a) = model(*x, need_weights=True)
    torch.testing.assert_close(out, model(*x), rtol=0, atol=1e-12)  # another kernel: 1 ulp
    assert a_reads_b.shape == (3, H, 1, b.shape[1]) and b_reads_a.shape == (3, H, 1, a.shape[1])
    torch.testing.assert_close(a_reads_b, model.readout(*x, need_weights=True)[1])
    for w, m in ((a_reads_b, x[3]), (b_reads_a, x[1])):
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
        assert bool((w.masked_select(~m[:, None, None, :]) == 0).all())
    assert PairModel(th.mean_pool_torch, D).double()(*x, need_weights=True)[1] == (None, None)


def test_models_run_a_trainable_encoder_first(rng):
    """SentenceClassifier / PairModel with `encoder=`: the module runs on the states first and
    trains with the head (fine-tuning); a pair read at [CLS] is a cross-encoder."""
    x, mask = padded(rng, [5, 2, 3])

    class Shift(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.full((D,), 0.5, dtype=torch.float64))

        def forward(self, states, mask):
            return states + self.bias

    torch.manual_seed(0)
    plain = SentenceClassifier(th.mean_pool_torch, D, n_classes=1).double()
    torch.manual_seed(0)
    tuned = SentenceClassifier(th.mean_pool_torch, D, n_classes=1, encoder=Shift()).double()
    xt, mt = t64(x, mask)
    shifted = torch.from_numpy(x + 0.5)
    assert torch.allclose(tuned(xt, mt), plain(shifted, mt), atol=1e-12)
    tuned(xt, mt).sum().backward()
    assert tuned.encoder.bias.grad is not None and tuned.encoder.bias.grad.abs().sum() > 0
    b, bm = padded(rng, [2, 6, 4])
    torch.manual_seed(0)
    pair = PairModel(th.mean_pool_torch, D, encoder=Shift()).double()
    torch.manual_seed(0)
    ref = PairModel(th.mean_pool_torch, D).double()
    assert torch.allclose(pair(xt, mt, *t64(b, bm)), ref(shifted, mt, *t64(b + 0.5, bm)),
                          atol=1e-12)  # the encoder runs on A and on B
    query = SentenceClassifier(pool_of("attention", query="learned"), D).double()
    assert query.readout.query is not None and query(xt, mt).shape == (3, 2)


def test_standardize_uses_the_measured_statistics_and_runs_after_the_encoder(rng):
    """Standardize: (h - mean) / std of the tokens it was given (std floored, buffers not
    parameters); the models apply it after the encoder and before pooling, on A and on B."""
    tokens = torch.from_numpy(rng.standard_normal((50, D)) * 3 + 2)
    tokens[:, 0] = 1.0  # a feature that never varies: floored std, not a division by 0
    std = th.Standardize(tokens)
    out = std(tokens.float())
    assert torch.allclose(out[:, 1:].mean(0), torch.zeros(D - 1), atol=1e-5)
    assert torch.allclose(out[:, 1:].std(0), torch.ones(D - 1), atol=1e-5)
    assert torch.isfinite(out).all() and not list(std.parameters())
    assert set(std.state_dict()) == {"mean", "std"}
    x, mask = padded(rng, [5, 2, 3])
    b, bm = padded(rng, [2, 6, 4])
    xt, mt, bt, bmt = t64(x, mask, b, bm)
    std = std.double()
    garbage, b_garbage = (t.masked_fill(~m[..., None], float("nan"))  # what padding may hold
                          for t, m in ((xt, mt), (bt, bmt)))
    for pool in ("mean", "cross"):
        torch.manual_seed(0)
        model = PairModel(pool_of(pool), D, standardize=std).double()
        torch.manual_seed(0)
        plain = PairModel(pool_of(pool), D).double()
        assert torch.allclose(model(xt, mt, bt, bmt), plain(std(xt), mt, std(bt), bmt),
                              atol=1e-12)
        assert torch.equal(model(garbage, mt, b_garbage, bmt), model(xt, mt, bt, bmt))
    torch.manual_seed(0)
    sent = SentenceClassifier(pool_of("attention"), D, standardize=std).double()
    torch.manual_seed(0)
    plain = SentenceClassifier(pool_of("attention"), D).double()
    assert torch.allclose(sent(xt, mt), plain(std(xt), mt), atol=1e-12)
    assert torch.equal(sent(garbage, mt), sent(xt, mt))  # the models' contracts, standardised
    with pytest.raises(ValueError, match=r"states: expected finite values wherever the mask"):
        std(garbage.masked_fill(~mt[..., None], 0.0).index_fill(1, torch.tensor([0]),
                                                                   float("nan")), mt)
    with pytest.raises(ValueError, match=r"^tokens: expected float \(T>=2, D\), got float64 "
                                         r"tensor \(1, "):
        th.Standardize(tokens[:1])
    with pytest.raises(ValueError, match=r"states: expected float \(\.\.\., self.d_model\) where "
                       f"mask with self.d_model = {D}"):
        std(torch.zeros(2, 3, D + 1, dtype=torch.float64))


# ============================================================================ reference lines
def test_best_threshold_by_hand():
    scores = [0.1, 0.4, 0.35, 0.8, 0.9]
    labels = [0, 0, 1, 1, 1]
    t = ct.best_threshold(scores, labels)
    assert 0.1 < t < 0.35  # 0.35, 0.8, 0.9 above, 0.1 below: 4 of 5 right, the best possible
    assert ((np.array(scores) > t) == np.array(labels, bool)).mean() == 0.8
    assert ct.best_threshold([0.0, 1.0], [0, 1]) == 0.5


def test_logistic_probe_reaches_the_optimum(rng):
    """At a minimum of the penalised log-loss its gradient vanishes: the probe is converged,
    not stopped early (the point of a reference line)."""
    x = torch.from_numpy(rng.standard_normal((200, 6)) * [1, 2, 3, 4, 5, 6] + 3)
    y = (x[:, 0] - 0.5 * x[:, 1] + torch.from_numpy(rng.standard_normal(200)) > 3).double()
    probe = ct.LinearProbe("logistic", l2=1e-2).fit(x, y)
    w, b = probe.w.clone().requires_grad_(), probe.b.clone().requires_grad_()
    xs = (x - probe.mu) / probe.sd
    loss = torch.nn.functional.binary_cross_entropy_with_logits(xs @ w + b, y) \
        + 0.5 * 1e-2 * (w * w).sum()
    grads = torch.autograd.grad(loss, [w, b])
    assert max(g.abs().max().item() for g in grads) < 1e-6
    assert ((probe.score(x) > 0).double() == y).double().mean() > 0.85


def test_least_squares_probe_is_ridge_regression(rng):
    x = rng.standard_normal((50, 4)) * [1, 10, 0.1, 3]
    y = x @ [1.0, -0.2, 5.0, 0.3] + 2 + 0.1 * rng.standard_normal(50)
    l2 = 0.05
    probe = ct.LinearProbe("least_squares", l2=l2).fit(*t64(x, y))
    xs = (x - x.mean(0)) / x.std(0, ddof=1)  # NumPy: minimise |Xw + b - y|² + n l2 |w|²
    rows = np.vstack([np.hstack([xs, np.ones((50, 1))]),
                      np.hstack([np.sqrt(50 * l2) * np.eye(4), np.zeros((4, 1))])])
    wb = np.linalg.lstsq(rows, np.concatenate([y, np.zeros(4)]), rcond=None)[0]
    np.testing.assert_allclose(probe.w.numpy(), wb[:4], atol=1e-10)
    np.testing.assert_allclose(probe.score(torch.from_numpy(x)).numpy(),
                               np.hstack([xs, np.ones((50, 1))]) @ wb, atol=1e-9)
    with pytest.raises(ValueError, match="kind"):
        ct.LinearProbe("svm")


def test_diagnostics_come_back_as_host_floats():
    """What a lesson feeds to NumPy must be a Python float, whatever device the tensors are on
    (np.mean over CUDA tensors fails)."""
    mask = torch.tensor([[True, True, False]])
    w = torch.tensor([[[0.5, 0.5, 0.0]]])
    ratio = ct.mean_entropy_ratio(w, mask)
    assert type(ratio) is float and abs(ratio - 1.0) < 1e-6


# ============================================================================ training plumbing
def test_warmup_then_linear_decay():
    from minattn.course.train import warmup_linear

    f = warmup_linear(warmup=4, steps=12)
    assert [f(s) for s in (1, 2, 4, 8, 12)] == [0.25, 0.5, 1.0, 0.5, 0.0]


def test_train_stops_when_told_and_scales_every_groups_lr():
    """train(stop=...) ends at the evaluation its callback says stop (after two misses of the
    best, here); schedule= scales every group's lr before each step."""
    from minattn.course.train import train

    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    scores = iter([0.1, 0.5, 0.4, 0.3, 0.9])  # best at the 2nd evaluation, then two misses

    def two_misses(history):
        values = history["val"]
        return len(values) - 1 - values.index(max(values)) >= 2

    seen_lr = []
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    history = train(model, lambda step: (torch.ones(1, 1),), lambda m, x: -m(x).sum(), steps=10,
                    optimizer=opt, schedule=lambda step: seen_lr.append(step) or 0.5,
                    evaluate=lambda: {"val": next(scores)}, eval_every=1, stop=two_misses,
                    clip=None, progress=False)
    assert history["step"] == [1, 2, 3, 4] and seen_lr == [1, 2, 3, 4]
    assert model.weight.item() == 2.0  # four steps of lr 1.0 * 0.5 on a gradient of -1


def test_drop_token_removes_one_token_per_sentence(rng):
    x, mask = padded(rng, [4, 3])
    xt, mt = t64(x, mask)
    out, out_mask = ct.drop_token(xt, mt, [2, 1])
    assert out.shape == (2, 3, D) and out_mask.sum(1).tolist() == [3, 2]
    assert torch.equal(out[0], xt[0, [0, 1, 3]]) and torch.equal(out[1, :2], xt[1, [0, 2]])
    head = seeded_head(th.AttentionPool, D, H, 1)  # the same as a sentence without that token
    alone = head(*t64(x[1:, [0, 2]], mask[1:, [0, 2]]))[0]
    assert torch.allclose(head(out, out_mask)[0][1:], alone, atol=1e-12)
    with pytest.raises(ValueError, match="not the first"):
        ct.drop_token(xt, mt, [0, 1])
    with pytest.raises(ValueError, match="not the first"):
        ct.drop_token(xt, mt, [1, 3])  # sentence 1 has 3 tokens: index 3 is padding


# ============================================================================ training (train.py)
def _toy_task(n=100, seed=0):
    """Sentences of 3-8 random tokens; label 1 when the first feature's mean over the real
    tokens is positive: mean pooling learns it."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 9, n)
    x, mask = padded(rng, lengths.tolist())
    labels = (th.mean_pool_np(x, mask)[:, 0] > 0).astype(np.int64)
    order = rng.permutation(n)
    splits = dict(train=order[:60], val=order[60:80], test=order[80:])
    task = ct.Task(splits, lengths, torch.from_numpy(labels), "classify",
                   torch.nn.functional.cross_entropy)
    xt, mt = t64(x, mask)
    return task, (lambda rows: (xt[rows].float(), mt[rows]))


def test_fit_trains_until_the_validation_score_stops_rising():
    task, inputs = _toy_task()
    torch.manual_seed(0)
    model = SentenceClassifier(th.mean_pool_torch, D)
    out = ct.fit(model, task, inputs, lambda m, *x: m(*x), seed=0, batch_size=16, epochs=40,
                 checks=1, patience=3, optimizer=torch.optim.Adam(model.parameters(), 0.05))
    assert out["stopped"] and out["steps"] < 40 * out["per_epoch"]  # stopped on the plateau
    assert [s for s, _ in out["curve"]] == list(range(out["per_epoch"], out["steps"] + 1,
                                                       out["per_epoch"]))  # once per epoch
    assert out["test"] > 0.8 and out["val"] == max(v for _, v in out["curve"])
    assert out["curve"][-1][0] - out["best_step"] == 3 * out["per_epoch"]  # patience 3
    assert len(out["items"]) == 20 and np.mean(out["items"]) == out["test"]
    capped = ct.fit(SentenceClassifier(th.mean_pool_torch, D), task, inputs, lambda m, *x: m(*x),
                    seed=0, batch_size=16, epochs=1, checks=1, patience=3)
    assert not capped["stopped"] and capped["steps"] == capped["per_epoch"]  # hit the cap


def test_predict_returns_the_rows_in_the_order_asked():
    lengths = np.array([5, 1, 4, 2, 3])
    rows = np.array([4, 0, 2, 1])
    chunks = ct.by_length(rows, lengths, chunk=2)
    assert [lengths[rows[c]].tolist() for c in chunks] == [[1, 3], [4, 5]]
    out = ct.predict(lambda r: r * 10, lambda r: (torch.as_tensor(r),), rows, lengths, chunk=2)
    assert out.tolist() == [40, 0, 20, 10]


def test_drop_effects_removes_the_token_each_rule_picks():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 2, dtype=torch.float64)
    x[0, 3] = 40.0  # far from sentence 0's mean
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    weights = torch.tensor([[0.9, 0.05, 0.6, 0.2, 0.15], [0.5, 0.1, 0.4, 0, 0],
                            [0.1, 0.2, 0.3, 0.4, 0]], dtype=torch.float64)
    rarity = torch.tensor([[9.0, 1, 2, 3, 8], [9, 5, 1, 0, 0], [9, 1, 1, 1, 1]])
    picks = ct.token_picks(x, mask, weights, rarity, torch.Generator().manual_seed(0))
    assert picks["top"].tolist() == [2, 2, 3]  # never the first token
    assert picks["rarest"].tolist() == [4, 1, 1] and picks["farthest"][0] == 3
    assert (picks["random"] != picks["top"]).all() and (picks["random"] >= 1).all()
    assert (picks["random"] < mask.sum(1)).all()
    count = lambda x, m: m.sum(1).double()  # a "model" that counts the real tokens
    second = lambda x, m: x[:, 1, 0]  # one that reads the second token only
    out = ct.drop_effects([(x, mask, weights, picks, {"count": count, "second": second})])
    assert out["count", "top"].tolist() == [1, 1, 1] == out["count", "rarest"].tolist()
    np.testing.assert_allclose(out["weight", "top"], [0.6 / 0.4, 0.4 / 0.6, 0.4 / 0.6])
    assert not (out["second", "top"] > 0).any()  # token 1 stays when 2 or 3 goes
    assert (out["second", "rarest"] > 0).tolist() == [False, True, True]  # token 1 removed
    with pytest.raises(ValueError, match="3 tokens"):
        ct.token_picks(x[:, :2], mask[:, :2], weights[:, :2], rarity[:, :2],
                       torch.Generator().manual_seed(0))


def test_finetune_keeps_stage_one_when_it_finds_nothing_better():
    """Rates of 0 change nothing: the step-0 check is the best, and the run reports it."""
    task, inputs = _toy_task()
    torch.manual_seed(0)
    readout = SentenceClassifier(th.mean_pool_torch, D)
    stage1 = ct.fit(readout, task, inputs, lambda m, *x: m(*x), seed=0, batch_size=16,
                    epochs=40, checks=1, patience=3)
    model = SentenceClassifier(th.mean_pool_torch, D, encoder=_Shift())
    out = ct.finetune(model, readout, task, inputs, lambda m, *x: m(*x), seed=0, batch_size=16,
                      epochs=10, encoder_lr=0.0, head_lr=0.0, checks=1, patience=2)
    assert [s for s, _ in out["curve"][:3]] == [0, out["per_epoch"], 2 * out["per_epoch"]]
    assert out["curve"][0][1] == stage1["val"] == out["val"]  # step 0 is stage 1's weights
    assert out["best_step"] == 0 and out["stopped"] and out["test"] == stage1["test"]
    moved = ct.finetune(SentenceClassifier(th.mean_pool_torch, D, encoder=_Shift()), readout, task,
                        inputs, lambda m, *x: m(*x), seed=0, batch_size=16, epochs=10,
                        encoder_lr=0.0, head_lr=0.5, checks=1, patience=2)
    assert moved["curve"][0][1] == stage1["val"] and len(moved["curve"]) >= 3


class _Shift(torch.nn.Module):
    """A stand-in for trainable encoder layers: adds a learned vector to every state."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(D))

    def forward(self, states, mask):
        return states + self.bias


def test_finetune_starts_from_stage_one_and_trains_the_encoder_at_its_rate():
    task, inputs = _toy_task()
    torch.manual_seed(0)
    readout = SentenceClassifier(th.mean_pool_torch, D)
    stage1 = ct.fit(readout, task, inputs, lambda m, *x: m(*x), seed=0, batch_size=16,
                    epochs=40, checks=1, patience=3)
    model = SentenceClassifier(th.mean_pool_torch, D, encoder=_Shift())
    with torch.no_grad():  # before training, the same predictions as stage 1
        model.load_state_dict(readout.state_dict(), strict=False)
        x, m = inputs(task.splits["test"])
        assert torch.equal(model(x, m), readout(x, m))
    out = ct.finetune(model, readout, task, inputs, lambda m, *x: m(*x), seed=0, batch_size=16,
                      epochs=3, encoder_lr=0.0, head_lr=1e-3, checks=1)
    assert not model.encoder.bias.abs().any()  # the encoder's own rate (0 here) applies
    assert out["test"] >= stage1["test"] - 0.1 and out["steps"] <= 3 * out["per_epoch"]
    with pytest.raises(ValueError, match="read-out"):
        ct.finetune(SentenceClassifier(th.mean_pool_torch, D, encoder=_Shift()),
                    PairModel(th.mean_pool_torch, D), task, inputs, lambda m, *x: m(*x), 0, 16, 1,
                    1e-4, 1e-3)
    results = {("t", "a", 0): stage1, ("t", "a", 1): out, ("t", "b", 0): out}
    assert ct.per_run(results, "t", "a") == [stage1["test"], out["test"]]
    assert ct.mean_std([0.5, 0.7]) == "0.600 ± 0.100" and ct.mean_std([]) == "-"
    rows = ct.results_rows(results, "t", ["a", "b"], {"line": 0.5})
    flags = sum(r["stopped"] for r in (stage1, out))
    assert rows[0]["stopped early"] == f"{flags} of 2" and len(rows) == 2
    assert rows[1]["vs line"] == f"{out['test'] - 0.5:+.3f}"


def test_lesson_texts_fall_back_and_say_so(monkeypatch):
    from minattn.course.data import DatasetMissing
    def missing(*args, **kwargs):
        raise DatasetMissing("not here")

    monkeypatch.setattr(ct, "load_sentiment", missing)
    monkeypatch.setattr(ct, "load_parallel", missing)
    sentences, labels, verses, fallback = ct.lesson_texts(6, 4, 50)
    assert len(sentences) == len(labels) == 10 and len(verses) == 50
    assert fallback == ["template sentences", "synthetic verses"]
