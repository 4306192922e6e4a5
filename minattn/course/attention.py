"""What lesson 01 needs besides the mechanism (minattn/attention.py): its two tasks, training
its demo models on them and what it reads off a run, and the √d row-sensitivity analysis.

    reversal, associative_recall    the tasks (each takes a torch.Generator: same batch every run)
    train_reversal, train_recall    one run per call: a model and its `History`, evaluated on
                                    a fixed held-out set the caller gives
    steps_to                        the first evaluated step at which a metric reached a target
    most_frequent_value_accuracy    the best a model blind to key-value binding does on recall
    softmax_rows_np                 why √d: how sensitive each softmax row is, scaled or not
    plot_row_sensitivity            its figure
    heads_by_contrast               which pretrained head does a job more than its neighbours
    attention_contenders, extra_memory   what section 7 times and measures
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import PositionReader, attention_torch, softmax_np
from ..contract import check_size, fail
from ..fast.attention import attention_fast_torch
from .bench import peak_memory
from .train import History, train
from .utils import set_seed


# ============================================================================ the tasks
def associative_recall(batch_size: int, n_pairs: int, n_keys: int, n_values: int,
                       generator: torch.Generator, device="cpu") -> dict[str, torch.Tensor]:
    """Associative recall: a set of (key, value) pairs, then every key again as a query.

    The model must answer each query with the value stored next to that key. Keys in one
    example are distinct (so every query has one answer); values may repeat. Queries list the
    example's keys in a fresh random order, so position cannot give the answer away.

    Returns a dict of int64 tensors:
        keys    (B, P)  key symbol of each pair, in [0, n_keys)
        values  (B, P)  value symbol of each pair, in [0, n_values)
        queries (B, P)  the same keys, shuffled
        targets (B, P)  the value paired with each query
        source  (B, P)  index of the pair holding each query's answer (what attention should find)
    """
    batch_size, n_keys = check_size("batch_size", batch_size, 1), check_size("n_keys", n_keys, 1)
    n_pairs, n_values = check_size("n_pairs", n_pairs, 1), check_size("n_values", n_values, 1)
    if n_pairs > n_keys:
        fail("associative_recall needs distinct keys", f"n_pairs <= n_keys ({n_keys})",
             f"n_pairs={n_pairs}")
    # Distinct keys per example: the first n_pairs entries of a random permutation.
    keys = torch.rand(batch_size, n_keys, generator=generator).argsort(dim=1)[:, :n_pairs]
    values = torch.randint(0, n_values, (batch_size, n_pairs), generator=generator)
    source = torch.rand(batch_size, n_pairs, generator=generator).argsort(dim=1)
    queries = keys.gather(1, source)
    targets = values.gather(1, source)
    batch = dict(keys=keys, values=values, queries=queries, targets=targets, source=source)
    return {name: t.to(device) for name, t in batch.items()}


def reversal(batch_size: int, n: int, n_symbols: int, generator: torch.Generator,
             device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Reverse a sequence: the answer at position i is the symbol at position n − 1 − i.

    Each example is n distinct symbols of [0, n_symbols) in a random order. A model blind to
    order knows only its own symbol and the set of all n, so position i can do no better than
    guess one of the n − 1 others: accuracy 1/(n − 1), exactly (the symbols are distinct).

    Returns tokens (B, N) and targets (B, N) = tokens reversed, int64.
    """
    if batch_size <= 0 or n < 2 or n > n_symbols:
        fail("reversal sizes", "batch_size >= 1 and 2 <= n <= n_symbols",
             f"batch_size={batch_size}, n={n}, n_symbols={n_symbols}")
    tokens = torch.rand(batch_size, n_symbols, generator=generator).argsort(dim=1)[:, :n]
    return tokens.to(device), tokens.flip(1).to(device)


# ==================================================================== training and read-outs
def reversal_loss(model, tokens, targets):
    """Cross-entropy of every position's symbol logits: tokens, targets (B, N)."""
    return F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())


def recall_loss(model, batch):
    """Cross-entropy of every question's value logits; batch from `associative_recall`."""
    logits = model(batch["queries"], batch["keys"], batch["values"])  # (B, Q, n_values)
    return F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten())


def recall_accuracy(model, batch) -> float:
    """Share of the questions answered with the right value."""
    logits = model(batch["queries"], batch["keys"], batch["values"])
    return (logits.argmax(-1) == batch["targets"]).float().mean().item()


def most_frequent_value_accuracy(batch, n_values: int) -> float:
    """Accuracy of answering every question with the value that occurs most often among the
    example's pairs: the best a model blind to which value sat with which key can do (tied
    values count equally, so ties do not matter)."""
    counts = F.one_hot(batch["values"], n_values).sum(1)  # (B, n_values)
    guess = counts.argmax(-1, keepdim=True)  # (B, 1)
    return (batch["targets"] == guess).float().mean().item()


def steps_to(history: History, target: float, key: str = "accuracy") -> int | None:
    """The first evaluated step at which `history[key]` reached `target` (None: never)."""
    if key not in history:
        fail("history", f"a History with evaluations of {key!r}", f"keys {sorted(history)}")
    return next((s for s, a in zip(history[f"{key}_step"], history[key]) if a >= target), None)


def train_reversal(positions: str, seed: int, held_out, *, n_symbols: int, steps: int,
                   eval_every: int, init_std: float = 0.02, stop_at: float | None = None,
                   d_model: int = 64, batch_size: int = 128, lr: float = 3e-3, device="cpu"):
    """One `PositionReader` of width d_model trained on fresh reversal batches of the held-out
    set's length N.

    held_out: (tokens, targets) (B, N) from `reversal`, on `device`. The seed fixes the
    initialisation and the training batches; init_std is the learned table's. stop_at: end the
    run at the first evaluation whose held-out accuracy reaches it (None: run every step).
    Returns (model, History with 'accuracy')."""
    tokens, targets = held_out
    steps, eval_every = check_size("steps", steps, 1), check_size("eval_every", eval_every, 1)
    n = tokens.shape[1]
    set_seed(seed)
    model = PositionReader(n_symbols, n, positions, d_model=d_model, init_std=init_std).to(device)
    gen = torch.Generator().manual_seed(seed)

    def evaluate():
        return {"accuracy": (model(tokens).argmax(-1) == targets).float().mean().item()}

    label = f"{positions}{f' (std {init_std:g})' if positions == 'learned' else ''}, seed {seed}"
    history = train(model, lambda step: reversal(batch_size, n, n_symbols, gen, device),
                    reversal_loss, steps=steps, lr=lr, evaluate=evaluate, eval_every=eval_every,
                    desc=label, stop=None if stop_at is None else
                    (lambda h: h["accuracy"][-1] >= stop_at))
    return model, history


def train_recall(model_class, seed: int, held_out: dict, *, n_keys: int, n_values: int,
                 steps: int, eval_every: int, batch_size: int = 128, lr: float = 3e-3,
                 device="cpu"):
    """One recall model (`RecallAttention` or `RecallMeanPool`) trained on fresh batches with
    the held-out set's number of pairs. Returns (model, History with 'accuracy')."""
    steps, eval_every = check_size("steps", steps, 1), check_size("eval_every", eval_every, 1)
    n_pairs = held_out["keys"].shape[1]
    set_seed(seed)
    model = model_class(n_keys, n_values).to(device)
    gen = torch.Generator().manual_seed(seed)
    history = train(model, lambda step: (associative_recall(batch_size, n_pairs, n_keys, n_values,
                                                            gen, device),),
                    recall_loss, steps=steps, lr=lr, eval_every=eval_every,
                    evaluate=lambda: {"accuracy": recall_accuracy(model, held_out)},
                    desc=f"{model_class.__name__}, seed {seed}")
    return model, history


# ============================================================================ why √d (§3.2.1)
def softmax_rows_np(d: int, rng: np.random.Generator, n_queries: int = 100,
                    n_keys: int = 64) -> dict[bool, dict[str, np.ndarray]]:
    """How sensitive each softmax row is to its scores, with and without the 1/√d (Vaswani et
    al. 2017, §3.2.1), measured row by row on random queries and keys (lesson 01, section 5).

    Random unit-variance queries q (n_queries, d), each with its own keys (n_keys, d). For the
    scaled (key True: q·k/√d) and raw (key False: q·k) scores, per query row (n_queries,):
    'max_weight' the largest weight, 'jacobian' ‖∂P/∂S‖ and 'to_q' ‖∂P/∂q‖ (Frobenius norms),
    where with P = softmax(c q·k), c = 1/√d or 1:

        J = ∂P/∂S = diag(P) − P Pᵀ                      how much the scores move the weights
        ∂P/∂q = J K c,   row j: c P_j (k_j − k̄),  k̄ = Σ_j P_j k_j     the gradient reaching q

    Both norms in closed form, without an (n, n) or (n, n_keys, d) array.
    """
    d, n_queries, n_keys = (check_size(name, value, 1) for name, value in
                            (("d", d), ("n_queries", n_queries), ("n_keys", n_keys)))
    if not isinstance(rng, np.random.Generator):
        fail("rng", "a numpy.random.Generator (np.random.default_rng(seed))", repr(rng)[:60])
    q = rng.standard_normal((n_queries, d))
    k = rng.standard_normal((n_queries, n_keys, d))
    rows = {}
    for scaled in (True, False):
        c = 1 / np.sqrt(d) if scaled else 1.0
        p = softmax_np(np.einsum("nd,nkd->nk", q, k) * c)  # (n, n_keys)
        # ‖diag(p) − p pᵀ‖_F² = Σ p² − 2 Σ p³ + (Σ p²)²   (rounding: ~1e-8, far below what we read)
        s2, s3 = (p ** 2).sum(-1), (p ** 3).sum(-1)
        jacobian = np.sqrt(np.clip(s2 - 2 * s3 + s2 ** 2, 0, None))
        k_bar = np.einsum("nk,nkd->nd", p, k)  # Σ_j p_j k_j
        # ‖k_j − k̄‖² = ‖k_j‖² − 2 k_j·k̄ + ‖k̄‖², without an (n, n_keys, d) temporary
        spread = (np.einsum("nkd,nkd->nk", k, k) - 2 * np.einsum("nkd,nd->nk", k, k_bar)
                  + (k_bar ** 2).sum(-1, keepdims=True))
        to_q = c * np.sqrt(np.clip(np.einsum("nk,nk->n", p ** 2, spread), 0, None))
        rows[scaled] = dict(max_weight=p.max(-1), jacobian=jacobian, to_q=to_q)
    return rows


# ============================================================================ pretrained heads
def heads_by_contrast(weights: np.ndarray, query: int, key: int) -> dict[str, np.ndarray]:
    """For attention weights (layers, heads, L, L) of one sentence and one (query, key) pair:
    per head, 'pair' the weight `query` puts on `key`, 'others' the mean weight the other L − 1
    queries put on `key`, and 'contrast' = pair − others. A head whose every query looks at
    `key` (a column, as a sink makes) has a large pair weight and no contrast; a head that
    links this query to this key more than the others has both."""
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        fail("weights", "(layers, heads, L, L)", f"shape {weights.shape}")
    pair = weights[:, :, query, key]
    others = np.delete(weights[:, :, :, key], query, axis=2).mean(-1)
    return dict(pair=pair, others=others, contrast=pair - others)


# ============================================================================ what it costs
def attention_contenders(qkv) -> dict:
    """The four ways lesson 01, section 7 runs one attention call on qkv = [q, k, v]: our
    explicit `attention_torch` ("ours"), SDPA as it dispatches by default ("SDPA",
    `attention_fast_torch`), and SDPA restricted to its fused kernels ("SDPA fused": flash and,
    on CUDA, memory-efficient) or to its math backend ("SDPA math"). A restricted call raises
    RuntimeError where no kernel of that kind takes the inputs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def restricted(backends):
        def call():
            with sdpa_kernel(backends):
                return attention_fast_torch(*qkv)
        return call

    return {"ours": lambda: attention_torch(*qkv), "SDPA": lambda: attention_fast_torch(*qkv),
            "SDPA fused": restricted([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]),
            "SDPA math": restricted([SDPBackend.MATH])}


def extra_memory(fn, device) -> float | None:
    """`peak_memory(fn, device)` in bytes (0.0 where it cannot be read); None where `fn` raises
    RuntimeError (a restricted SDPA with no kernel for its inputs)."""
    try:
        return peak_memory(fn, device) or 0.0
    except RuntimeError:
        return None


def plot_row_sensitivity(summary: dict, dims: list[int]):
    """Lesson 01, section 5's figure: the median and mean of ‖∂softmax/∂scores‖ and of
    ‖∂softmax/∂q‖ per row against d, scaled (blue) and unscaled (red); returns the figure.
    summary[scaled][measure] holds one value per d (the lesson's table)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.9), layout="constrained")
    panels = [("‖∂softmax/∂scores‖ per row", ["median ‖J‖", "mean ‖J‖"]),
              ("‖∂softmax/∂q‖ per row (the gradient reaching q)",
               ["median ‖∂P/∂q‖", "mean ‖∂P/∂q‖"])]
    for ax, (title, names) in zip(axes, panels):
        for name in names:
            for scaled, color in ((True, "C0"), (False, "C3")):
                ax.plot(dims, summary[scaled][name], "o-" if name.startswith("median") else "s:",
                        color=color,
                        label=f"{name.split()[0]}, " + ("q·k/√d" if scaled else "q·k"))
        low = min(min(summary[s][name]) for s in (True, False) for name in names)
        ax.set(xscale="log", yscale="log", xlabel="d", title=title)
        ax.set_xticks(dims, [str(d) for d in dims])
        ax.set_yticks(10.0 ** np.arange(np.floor(np.log10(low)), 1))  # one tick per decade
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_locator(plt.NullLocator())  # placing minor ticks is slow
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Unscaled scores saturate the softmax as d grows: most rows go silent, "
                 "a few stay loud")
    return fig
