"""The paper's Table-2 quantities (minattn/agreement.py): the mean agreement over
a validation set, its random baseline, and one Table-2 row, by hand and against a re-creation
of the authors' dictionary-based computation (classification/utils.py, fetch_stats)."""

import math

import numpy as np
import pytest

from minattn import agreement as ag
from minattn.course import agreement as agc


def test_mean_agreement_by_hand():
    # two examples, two output words each; n = 3 and 2 real positions (top ⌈5%·n⌉ = 1)
    a = np.array([[[0.9, 0.1, 0.0], [0.1, 0.9, 0.0]],
                  [[0.2, 0.8, 5.0], [0.7, 0.3, 5.0]]])  # position 2 of example 1 is padding
    b = np.array([[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]],
                  [[0.0, 1.0, 9.0], [0.0, 1.0, 9.0]]])
    keys = np.array([[True, True, True], [True, True, False]])
    # per word: hit, miss | hit, miss (padding never wins: a's 5.0 and b's 9.0 are masked)
    assert ag.mean_agreement_np(a, b, keys) == 0.5
    rows = np.array([[True, False], [True, True]])  # the second word of example 0 not counted
    assert ag.mean_agreement_np(a, b, keys, rows) == pytest.approx(2 / 3)
    stacked = ag.mean_agreement_np(np.stack([a, b]), np.stack([b, b]), keys, rows)
    assert stacked.shape == (2,) and stacked[1] == 1.0  # leading axes (checkpoints) are kept
    assert ag.random_baseline_np(keys, rows) == pytest.approx((1 / 3 + 1 / 2 + 1 / 2) / 3)


def run(rng, C, M, T, N):
    return {"alpha": rng.random((C, M, T, N)), "beta": rng.random((C, M, T, N)),
            "perf": rng.random(C)}


def test_agreement_row_by_hand():
    # one example, one output word, 20 positions (top 1): checkpoints 0, 1, 2
    def onehot(*positions):
        return np.eye(20)[list(positions)][:, None, None, :]

    gold = {"alpha": onehot(3, 7, 5), "beta": onehot(0, 0, 0), "perf": np.array([0.5, 0.9, 0.9])}
    other = {"alpha": onehot(1, 7, 7), "beta": onehot(2, 7, 1), "perf": np.array([0.5, 0.6, 0.8])}
    uniform = {"alpha": onehot(0, 0, 0), "beta": onehot(9, 9, 7), "perf": np.zeros(3)}
    row = ag.agreement_row_np(gold, [other], uniform)
    assert row["best"] == 1 and row["P*"] == 0.9  # α* = α at the first best checkpoint: 7
    assert row["curve"].tolist() == [0.0, 1.0, 1.0]
    assert row["A(α, β^uf)"] == 1.0 and row["A(α, β)"] == 1.0  # the max over checkpoints
    assert row["ξ(α, β^uf)"] is None  # the curve never *exceeds* 1.0
    assert row["A_rand"] == 0.05
    other["beta"] = onehot(2, 3, 1)  # β never ranks 7 first: A(α, β) = 0
    row = ag.agreement_row_np(gold, [other], uniform)
    assert row["A(α, β)"] == 0.0 and row["ξ(α, β)"] == 0.6  # first checkpoint above 0


def authors_table2(dicts, metas, iterations, gold, others, uniform):
    """The authors' recipe on their data layout, re-created from classification/utils.py:
    `dicts` is a list of examples, each with (run, iteration, 'alpha'|'beta') -> a list over
    output words of score lists over the example's own positions; `metas` (run, iteration)
    -> performance."""
    def top_match(alpha, beta):
        k = math.ceil(0.05 * len(beta))
        return 1 if np.sum(np.array(beta) > beta[int(np.argmax(alpha))]) < k else 0

    def agreement(key1, key2):
        hits = [top_match(a, b) for d in dicts for a, b in zip(d[key1], d[key2])]
        return sum(hits) / len(hits)

    best = iterations[int(np.argmax([metas[gold, i] for i in iterations]))]
    star = (gold, best, "alpha")
    curve = np.mean([[agreement(star, (r, i, "alpha")) for i in iterations] for r in others], 0)
    perfs = np.mean([[metas[r, i] for i in iterations] for r in others], 0)
    a_uf = max(agreement(star, (uniform, i, "beta")) for i in iterations)
    a_beta = max(agreement(star, (others[0], i, "beta")) for i in iterations)

    def passing(threshold):
        return next((perfs[i] for i in range(len(curve)) if curve[i] > threshold), None)

    return {"A(α, β^uf)": a_uf, "A(α, β)": a_beta, "ξ(α, β^uf)": passing(a_uf),
            "ξ(α, β)": passing(a_beta), "P*": metas[gold, best]}


@pytest.mark.parametrize("seed", [0, 1])
def test_agreement_row_matches_the_authors_recipe_on_ragged_data(seed):
    rng = np.random.default_rng(seed)
    C, M, T, N = 4, 6, 5, 30
    src_len, tgt_len = rng.integers(3, N + 1, M), rng.integers(1, T + 1, M)
    keys = np.arange(N)[None] < src_len[:, None]
    rows = np.arange(T)[None] < tgt_len[:, None]
    names = ["A", "B", "C", "uniform"]
    runs = {name: run(rng, C, M, T, N) for name in names}
    for name in names:  # agreement correlates a little with the gold, so that ξ varies
        runs[name]["alpha"] += 0.8 * runs["A"]["alpha"][-1] * rng.random((C, 1, 1, 1))
        runs[name]["beta"] += 0.6 * runs["A"]["alpha"][-1] * rng.random((C, 1, 1, 1))
    dicts = [{(name, i, kind): [runs[name][kind][i, m, t, :src_len[m]]
                                for t in range(tgt_len[m])]
              for name in names for i in range(C) for kind in ("alpha", "beta")}
             for m in range(M)]
    metas = {(name, i): runs[name]["perf"][i] for name in names for i in range(C)}
    theirs = authors_table2(dicts, metas, list(range(C)), "A", ["B", "C"], "uniform")
    ours = ag.agreement_row_np(runs["A"], [runs["B"], runs["C"]], runs["uniform"], keys, rows)
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value) if value is not None else ours[key] is None


def test_bad_input_raises_value_error():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="^b: "):
        ag.mean_agreement_np(np.zeros((2, 1, 4)), np.zeros((2, 1, 5)))
    with pytest.raises(ValueError, match="key_mask, row_mask"):
        ag.mean_agreement_np(np.zeros((2, 1, 4)), np.zeros((2, 1, 4)), np.ones((3, 4), bool))
    with pytest.raises(ValueError, match="key_mask, row_mask"):  # no counted row
        ag.mean_agreement_np(np.zeros((2, 1, 4)), np.zeros((2, 1, 4)), None,
                             np.zeros((2, 1), bool))
    good = run(rng, 3, 2, 1, 4)
    with pytest.raises(ValueError, match="others"):
        ag.agreement_row_np(good, [], good)
    with pytest.raises(ValueError, match="^others: .*runs"):
        ag.agreement_row_np(good, [run(rng, 2, 2, 1, 4)], good)


def test_train_evaluates_at_step_zero_and_the_listed_steps():
    """The checkpoints the Table-2 runs record (tools.train's eval_at)."""
    import torch

    from minattn.course.train import train

    model = torch.nn.Linear(2, 1)
    initial, seen = model.weight.detach().clone(), []

    def evaluate():
        seen.append(model.weight.detach().clone())
        return {"w": model.weight[0, 0].item()}

    history = train(model, lambda step: (torch.ones(4, 2),), lambda m, x: m(x).pow(2).mean(), 5,
                    evaluate=evaluate, eval_at=[0, 2, 5], progress=False)
    assert history["w_step"] == [0, 2, 5]
    assert torch.equal(seen[0], initial) and not torch.equal(seen[1], initial)  # 0: untrained


def test_checkpoints_follow_the_authors_schedule():
    early = (0, 10, 50, 100, 150, 200, 250)
    assert agc.checkpoints(1000, early, 250) == [0, 10, 50, 100, 150, 200, 250, 500, 750, 1000]
    assert agc.checkpoints(600, early, 250) == [0, 10, 50, 100, 150, 200, 250, 500, 600]
    assert agc.checkpoints(20, early, 10) == [0, 10, 20]


def test_check_noise_is_the_scatter_about_each_runs_own_line():
    # a wiggle orthogonal to a constant and a line stays whole in the residuals: SS 4e² per run
    steps, e = [100, 200, 300, 400], 0.03
    curves = [[(s, level + slope * s + e * w) for s, w in zip(steps, (1, -1, -1, 1))]
              for level, slope in [(0.5, 1e-4), (0.7, -2e-4), (0.2, 0.0)]]
    assert agc.check_noise(curves, 4) == pytest.approx(e * math.sqrt(2), rel=1e-9)
    # only the last checks count: an earlier jump changes nothing
    assert agc.check_noise([[(0, 9.0), *c] for c in curves], 4) == pytest.approx(e * math.sqrt(2))
    assert agc.check_noise([[(s, 0.3 + 1e-3 * s) for s in steps]], 4) == pytest.approx(0, abs=1e-9)
    with pytest.raises(ValueError):
        agc.check_noise([[(0, 1.0), (1, 2.0)]], 4)
