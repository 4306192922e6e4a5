"""What serves lesson 04 (Transformer-XL) and is not the mechanism: the character streams and
the synthetic tasks (the delayed copy, recall by class), evaluation in bits per character
(segment by segment, or with the paper's sliding window), sampling, how far back a model sees
and which states one token reaches, training with or without the stop-gradient, and the
evaluation-speed measurement. The training command, alone or under `torchrun`, is
`minattn.course.xl_ddp`.

Every model here trains with the relative-shift kernel (`minattn.fast.xl.rel_attention_fast_torch`,
passed as `attend=`), the same numbers as the explicit reference, faster.
"""

from __future__ import annotations

import copy
import math
import time
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ..contract import check_array, check_size, describe, fail
from ..fast.xl import XLDecoder, rel_attention_fast_torch
from ..xl import TransformerXL, VanillaLM
from .bench import time_interleaved
from .train import train


# ============================================================================ data
def char_corpus(texts: list[str]) -> tuple[list[str], list[torch.Tensor]]:
    """Character vocabulary of texts[0] (the training text) and every text as int64 ids.

    Characters of later texts (validation, test) missing from the training text map to the
    first symbol of the vocabulary; with PTB or Shakespeare there are none.
    """
    if isinstance(texts, str) or not texts or not all(isinstance(t, str) for t in texts) \
            or not texts[0]:
        fail("texts", "a non-empty list of strings, the first (training) text non-empty",
             describe(texts))
    chars = sorted(set(texts[0]))
    index = {c: i for i, c in enumerate(chars)}
    table = np.zeros(max(map(ord, "".join(set("".join(texts))))) + 1, dtype=np.int64)
    for c, i in index.items():
        table[ord(c)] = i
    return chars, [torch.from_numpy(table[np.frombuffer(t.encode("utf-32-le"), np.uint32)])
                   for t in texts]


def lm_streams(ids: torch.Tensor, n_streams: int) -> torch.Tensor:
    """Cut a long (N,) text into n_streams contiguous rows (n_streams, N // n_streams).

    Row b is one continuous stretch of the text: segment s of row b follows segment s − 1 of
    the same row, which is what a Transformer-XL memory needs (batch row b carries row b's
    memory). Data-parallel training gives each process its own rows.
    """
    check_array("ids", ids, "int", ndim=1, hint="(N,) character ids", like=torch.Tensor)
    n_streams = check_size("n_streams", n_streams, 1)
    if ids.ndim != 1 or n_streams <= 0 or len(ids) < 2 * n_streams:
        fail("lm_streams needs a long 1-D text", f"(N,) with N >= {2 * max(n_streams, 1)}",
             f"{tuple(ids.shape)} cut into {n_streams} streams")
    length = len(ids) // n_streams
    return ids[: n_streams * length].view(n_streams, length)


def lm_segment(streams: torch.Tensor, index: int,
               seg_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-character targets of segment `index` (wrapping around the streams).

    Returns x (B, seg_len) and y (B, seg_len) with y[:, t] = the character after x[:, t].
    """
    check_array("streams", streams, "int", ndim=2, hint="(B, L) ids", like=torch.Tensor)
    index, seg_len = check_size("index", index), check_size("seg_len", seg_len, 1)
    n_segments = (streams.shape[1] - 1) // seg_len
    if n_segments <= 0:
        fail("streams too short for one segment", f"length > {seg_len}", f"{streams.shape[1]}")
    start = (index % n_segments) * seg_len
    return streams[:, start:start + seg_len], streams[:, start + 1:start + seg_len + 1]


def bigram_bpc(train_ids: torch.Tensor, streams: torch.Tensor, vocab_size: int) -> float:
    """The trivial baseline of a character LM: bits per character of the bigram model of
    `train_ids` (N,) (add-one smoothing) on the next-character targets of `streams` (B, T) —
    the characters `evaluate_bpc` scores. A model that beats it learned more than which
    character follows which."""
    check_array("train_ids", train_ids, "int", ndim=1, hint="(N,) character ids", like=torch.Tensor)
    check_array("streams", streams, "int", ndim=2, hint="(B, T) character ids", like=torch.Tensor)
    vocab_size = check_size("vocab_size", vocab_size, 1)
    counts = np.ones((vocab_size, vocab_size))  # add-one: no character pair has probability 0
    ids = train_ids.cpu().numpy()
    counts += np.bincount(ids[:-1] * vocab_size + ids[1:], minlength=vocab_size ** 2).reshape(
        vocab_size, vocab_size)  # each (previous, next) pair counted once per occurrence
    log_p = np.log2(counts / counts.sum(1, keepdims=True))
    s = streams.cpu().numpy()
    return float(-log_p[s[:, :-1], s[:, 1:]].mean())


def synthetic_text(n_chars: int, rng: np.random.Generator) -> str:
    """Offline fallback text: Zipf-distributed made-up words, and every sentence ends by
    repeating its first word (a dependency a few dozen characters long)."""
    n_chars = check_size("n_chars", n_chars)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa"]
    words = ["".join(rng.choice(syllables, size=rng.integers(1, 4))) for _ in range(300)]
    p = 1.0 / np.arange(1, len(words) + 1)
    out, size = [], 0
    while size < n_chars:
        sentence = list(rng.choice(words, size=rng.integers(4, 12), p=p / p.sum()))
        line = " ".join(sentence + [sentence[0]]) + " .\n"
        out.append(line)
        size += len(line)
    return "".join(out)[:n_chars]


def delayed_copy(batch_size: int, length: int, distance: int, n_symbols: int,
                 generator: torch.Generator, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """A stream of random symbols; the target at position t is the symbol at t − distance.

    Returns tokens (B, length) and targets (B, length) int64, targets = -100 (ignored by
    cross-entropy) where t < distance. A model that cannot see `distance` tokens back is at
    chance, 1 / n_symbols.
    """
    batch_size, length = check_size("batch_size", batch_size, 1), check_size("length", length, 1)
    distance, n_symbols = check_size("distance", distance, 1), check_size("n_symbols", n_symbols, 1)
    if min(batch_size, length, distance, n_symbols) <= 0 or distance >= length:
        fail("delayed_copy sizes", "positive sizes and distance < length",
             f"batch_size={batch_size}, length={length}, distance={distance}, "
             f"n_symbols={n_symbols}")
    tokens = torch.randint(0, n_symbols, (batch_size, length), generator=generator)
    targets = torch.full_like(tokens, -100)
    targets[:, distance:] = tokens[:, :-distance]
    return tokens.to(device), targets.to(device)



class ClassRecall(NamedTuple):
    """A batch of `recall_by_class`: int64 (B, T) each."""
    tokens: torch.Tensor
    targets: torch.Tensor   # the symbol to answer at a read, -100 elsewhere
    distance: torch.Tensor  # how far back that symbol was written, at a read; 0 elsewhere


def recall_by_class(batch_size: int, length: int, min_distance: int, max_distance: int,
                    generator: torch.Generator, n_classes: int = 16, n_values: int = 8,
                    n_fillers: int = 8, spacing: int = 200, device="cpu") -> ClassRecall:
    """Copy the last symbol of a class: recall by content, at a distance we choose (lesson 04).

    Vocabulary, `n_classes · (n_values + 1) + n_fillers` ids: symbol v of class c is
    c · n_values + v; "read c" is n_classes · n_values + c; the rest are fillers. A stream is
    fillers with events in it: a *write* (a random symbol of a class c) and, `distance`
    positions later (uniform in [min_distance, max_distance]), a *read* of c, whose target is
    the symbol written. Writes of one class are at least `spacing` (> max_distance) apart, so
    a read has exactly one write of its class within `spacing` positions back: the answer is
    found by its content (the class), wherever it sits. A model that cannot reach the write
    can still name the class: 1 / n_values right.
    """
    if min(batch_size, length, min_distance, n_classes, n_values, n_fillers) <= 0 or \
            not min_distance <= max_distance < min(spacing, length):
        fail("recall_by_class sizes", "positive sizes and 0 < min_distance <= max_distance "
             "< min(spacing, length)", f"batch_size={batch_size}, length={length}, distance "
             f"{min_distance}..{max_distance}, spacing={spacing}")
    rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
    first_read, first_filler = n_classes * n_values, n_classes * (n_values + 1)
    tokens = rng.integers(first_filler, first_filler + n_fillers, (batch_size, length))
    targets = np.full((batch_size, length), -100)
    distance = np.zeros((batch_size, length), dtype=np.int64)
    mean_gap = max(spacing // n_classes, 1)  # about one write per class per `spacing`
    for b in range(batch_size):
        busy = np.zeros(length, dtype=bool)
        last_write = np.full(n_classes, -spacing)
        w = 0
        while True:
            w += int(rng.integers(1, 2 * mean_gap))
            if w >= length:
                break
            free = np.flatnonzero(w - last_write >= spacing)
            d = int(rng.integers(min_distance, max_distance + 1))
            r = w + d
            if len(free) == 0 or r >= length or busy[w] or busy[r]:
                continue
            c, v = int(rng.choice(free)), int(rng.integers(n_values))
            tokens[b, w], tokens[b, r] = c * n_values + v, first_read + c
            targets[b, r], distance[b, r] = c * n_values + v, d
            busy[w] = busy[r] = True
            last_write[c] = w
    return ClassRecall(*(torch.from_numpy(a).to(device) for a in (tokens, targets, distance)))


def reach_needed(distance, index, mem_len: int) -> np.ndarray:
    """How many layers a read needs, given how far back its write is (`distance`) and its index
    in its segment: 1 when the write is within one layer's reach (distance <= mem_len + index),
    2 when only two layers reach it (<= 2·mem_len + index), 3 beyond (section 4's cone)."""
    distance, index = np.asarray(distance), np.asarray(index)
    return 1 + (distance > mem_len + index) + (distance > 2 * mem_len + index)


@torch.no_grad()
def recall_reads(model, batch: ClassRecall, seg_len: int, **forward_kwargs):
    """Every read of a `recall_by_class` batch, answered by `model` reading its streams segment
    by segment (`stream_predictions`; forward_kwargs such as mem_len go to it): (distance,
    index in its segment, hit) as NumPy arrays, one entry per read in stream order."""
    predicted = stream_predictions(model, batch.tokens, seg_len, **forward_kwargs)
    n = predicted.shape[1]
    read = batch.targets[:, :n] != -100
    index = (torch.arange(n, device=read.device) % seg_len).expand_as(read)
    hit = predicted == batch.targets[:, :n]
    return tuple(t[read].cpu().numpy() for t in (batch.distance[:, :n], index, hit))


# ============================================================================ evaluating the LMs
def lm_loss(logits, targets):
    """Mean next-token cross-entropy in nats; targets of -100 are ignored."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


@torch.no_grad()
def evaluate_bpc(model, streams, seg_len: int, mem_len: int | None = None,
                 max_segments: int | None = None, per_stream: bool = False,
                 per_position: bool = False, **forward_kwargs):
    """Bits per character over `streams` (B, T), read segment after segment in order: a float,
    or with per_stream=True a (B,) array, one value per stream (the test items of a paired
    comparison between models read on the same streams), or with per_position=True a
    (B, seg_len) array: stream b's bits at index i of its segments (its mean over i is the
    stream's value).

    A `TransformerXL` carries its memory (of `mem_len`, default its training length) from
    one segment to the next (`forward_kwargs`, e.g. clamp_len, go to it); a `VanillaLM`
    reads each segment on its own.
    """
    model.eval()
    n_segments = (streams.shape[1] - 1) // seg_len
    if max_segments is not None:
        n_segments = min(n_segments, max_segments)
    total, memories = torch.zeros(streams.shape[0], seg_len, dtype=torch.float64), None
    for s in range(n_segments):
        x = streams[:, s * seg_len:(s + 1) * seg_len]
        y = streams[:, s * seg_len + 1:(s + 1) * seg_len + 1]
        logits, memories = model(x, memories, mem_len, **forward_kwargs)
        total += F.cross_entropy(logits.transpose(1, 2), y, reduction="none").double().cpu()
    bits = (total / n_segments / math.log(2)).numpy()  # (B, seg_len)
    if per_position:
        return bits
    return bits.mean(1) if per_stream else float(bits.mean())


@torch.no_grad()
def evaluate_bpc_sliding(model, streams, window: int, batch_windows: int = 128,
                         per_stream: bool = False):
    """Bits per character over `streams` (B, T) when every character is predicted from a
    window of the `window` characters up to it, read afresh (fewer at the start of a stream):
    the evaluation of the paper's vanilla baseline (Al-Rfou et al.), whose window slides by
    one character per prediction. Same characters as `evaluate_bpc` when T − 1 is a multiple
    of its segment length (and per_stream=True: the same (B,) array per stream). Costs
    `window` positions per character; the windows are read `batch_windows` at a time (larger
    batches allocate more than they save on a CPU)."""
    model.eval()
    B, T = streams.shape
    if not 0 < window < T:
        fail("the window must fit in the streams", f"0 < window < T = {T}", f"window={window}")
    x, y = streams[:, :-1], streams[:, 1:]
    logits, _ = model(x[:, :window])  # the first window: every position (less context)
    losses = [F.cross_entropy(logits.transpose(1, 2), y[:, :window], reduction="none")]
    windows = x.unfold(1, window, 1)[:, 1:].reshape(-1, window)  # ending at each j >= window
    targets = y[:, window:].reshape(-1)
    last = [F.cross_entropy(model(windows[i:i + batch_windows])[0][:, -1],
                            targets[i:i + batch_windows], reduction="none")
            for i in range(0, len(windows), batch_windows)]
    if last:  # stream-major, as unfolded
        losses.append(torch.cat(last).view(B, -1))
    bpc = (torch.cat(losses, 1).sum(1).double().cpu() / y.shape[1] / math.log(2)).numpy()
    return bpc if per_stream else float(bpc.mean())


@torch.no_grad()
def generate(model, prompt, n_new: int, generator: torch.Generator, context: int,
             temperature: float = 1.0):
    """Sample n_new tokens after prompt (1, P) -> (1, P + n_new).

    A `TransformerXL` reads the prompt once and then one token per step, its memory (length
    `context`) holding the past: the cached evaluation, through `minattn.fast.xl.XLDecoder`, which
    keeps the memory's keys and values instead of projecting the memory again every step.
    A `VanillaLM` recomputes its whole window of the last `context` tokens for every new token.
    """
    model.eval()
    P = prompt.shape[1]
    tokens = torch.cat([prompt, prompt.new_zeros(prompt.shape[0], n_new)], dim=1)  # filled below
    if isinstance(model, TransformerXL):
        decoder = XLDecoder(model, context, batch=prompt.shape[0])
        logits = decoder.prefill(prompt[:, -context:])
    for i in range(P, P + n_new):
        if not isinstance(model, TransformerXL):
            logits, _ = model(tokens[:, max(i - context, 0):i])
        probs = torch.softmax(logits[:, -1] / temperature, dim=-1)
        nxt = torch.multinomial(probs.cpu(), 1, generator=generator).to(tokens.device)
        tokens[:, i:i + 1] = nxt
        if isinstance(model, TransformerXL):
            logits = decoder.step(nxt)
    return tokens


@torch.no_grad()
def farthest_visible(model, seg_len: int, mem_len: int, n_segments: int, vocab_size: int,
                     seed: int = 0) -> int:
    """How far back can the last token of a segment see? Measured, not derived.

    Reads a random text of n_segments segments (memory `mem_len`) once as it is and once with
    each earlier token changed (all at once, one batch row per changed position), and returns
    the largest distance d whose change moves the logits of the very last token. Runs a
    float64 copy of `model`, so "moved" is a clear signal (> 1e-9), not rounding.
    """
    model = copy.deepcopy(model).double().eval()
    T = seg_len * n_segments
    tokens = torch.randint(0, vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
    batch = tokens.repeat(T, 1)  # row d: the token d places before the last one is changed
    d = torch.arange(T)
    batch[d, T - 1 - d] = (batch[d, T - 1 - d] + 1) % vocab_size
    batch = torch.cat([tokens, batch[1:]]).to(next(model.parameters()).device)  # row 0: as is
    memories = None
    for s in range(n_segments):
        logits, memories = model(batch[:, s * seg_len:(s + 1) * seg_len], memories, mem_len)
    moved = (logits[1:, -1] - logits[:1, -1]).abs().amax(dim=-1) > 1e-9  # (T − 1,) d = 1, 2, …
    return int(torch.nonzero(moved).max()) + 1 if moved.any() else 0


@torch.no_grad()
def dependency_cone(model, seg_len: int, n_segments: int, position: int, vocab_size: int,
                    mem_len: int | None = None, seed: int = 0) -> np.ndarray:
    """Which hidden states does one token reach? The paper's Fig. 2, measured.

    Reads a random text of n_segments segments (memory `mem_len` for a `TransformerXL`; a
    `VanillaLM` reads each segment alone) twice, the second time with the token at `position`
    changed, and returns a bool array (n_layers + 1, n_segments · seg_len): row 0 the inputs
    (the embedded tokens), row n the output of layer n; True where the state changed
    (> 1e-9, in a float64 copy of the model).
    """
    model = copy.deepcopy(model).double().eval()
    T = seg_len * n_segments
    if not 0 <= position < T:
        fail("position must be in the text", f"0 <= position < {T}", str(position))
    tokens = torch.randint(0, vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
    changed = tokens.clone()
    changed[0, position] = (changed[0, position] + 1) % vocab_size
    batch = torch.cat([tokens, changed]).to(next(model.parameters()).device)
    states = [[] for _ in range(len(model.layers) + 1)]  # per row: one (2, seg_len, D) per segment

    def record(n):  # a forward hook that keeps row n's states
        def hook(module, inputs, out):
            states[n].append(out[0] if isinstance(out, tuple) else out)
        return hook
    hooks = [model.embedding.register_forward_hook(record(0))]
    hooks += [layer.register_forward_hook(record(n + 1)) for n, layer in enumerate(model.layers)]
    try:
        memories = None
        for s in range(n_segments):
            _, memories = model(batch[:, s * seg_len:(s + 1) * seg_len], memories, mem_len)
    finally:
        for hook in hooks:
            hook.remove()
    rows = [torch.cat(parts, dim=1) for parts in states]  # (2, T, D) per row
    return np.stack([((h[1] - h[0]).abs().amax(-1) > 1e-9).cpu().numpy() for h in rows])


def train_on_streams(model, tokens, targets, seg_len: int, steps: int, **train_kwargs):
    """Train on (B, T) streams of tokens and targets, segment s at step s (`recurrent_lm_loss`:
    a `TransformerXL` carries its memory from step to step); `train_kwargs` go to
    `course.train.train`. Returns its History."""
    if tokens.shape[1] < steps * seg_len:
        fail("the streams are too short for the steps", f"T >= steps · seg_len = "
             f"{steps * seg_len}", f"T = {tokens.shape[1]}")

    def segment(step):  # step s reads segment s − 1 of every stream
        part = slice((step - 1) * seg_len, step * seg_len)
        return tokens[:, part], targets[:, part]
    return train(model, segment, recurrent_lm_loss(), steps, **train_kwargs)


def cosine(steps: int):
    """The learning-rate factor of the authors' schedule (their train.py's default `--scheduler
    cosine`, no warm-up, annealed to 0): step -> ½ (1 + cos(π (step − 1) / steps)), for
    `course.train.train(schedule=...)`."""
    steps = check_size("steps", steps, 1)
    return lambda step: 0.5 * (1 + math.cos(math.pi * (step - 1) / steps))


def recurrent_lm_loss(stop_gradient: bool = True):
    """A `loss_fn` for `course.train.train` that carries the memory from one batch to the next:
    batch s must be segment s of the same streams. (A `VanillaLM` returns no memory.)

    stop_gradient=False (a `TransformerXL` only) is the experiment without the paper's SG for
    one segment: every step reads the previous segment again, from the memory before it and
    with the current weights, keeps those states in the graph, and reads this segment on top
    of them, so this segment's loss back-propagates one segment further back (twice the
    compute; the loss is still this segment's alone).
    """
    state = {"memories": None, "previous": None, "before": None}

    def loss_fn(model, x, y):
        memories = state["memories"]
        if not stop_gradient and state["previous"] is not None:
            _, memories = model(state["previous"], state["before"], stop_gradient=False)
        logits, state["memories"] = model(x, memories)
        if not stop_gradient:  # what the next step reads again: this segment and its memory
            state["previous"] = x
            state["before"] = None if memories is None else [m.detach() for m in memories]
        return lm_loss(logits, y)
    return loss_fn


@torch.no_grad()
def stream_predictions(model, tokens, seg_len: int, mem_len: int | None = None,
                       **forward_kwargs) -> torch.Tensor:
    """The most likely next token at every position of (B, T) streams read segment by segment
    (memory carried for a `TransformerXL`; `forward_kwargs`, e.g. clamp_len, go to it):
    (B, T') with T' = T rounded down to whole segments."""
    model.eval()
    predictions, memories = [], None
    for s in range(tokens.shape[1] // seg_len):
        logits, memories = model(tokens[:, s * seg_len:(s + 1) * seg_len], memories, mem_len,
                                 **forward_kwargs)
        predictions.append(logits.argmax(-1))
    return torch.cat(predictions, dim=1)


def stream_accuracy(model, tokens, targets, seg_len: int, mem_len: int | None = None,
                    by_position: bool = False, **forward_kwargs):
    """Next-token accuracy over (B, T) streams read segment by segment (`stream_predictions`);
    positions with target -100 are skipped.

    by_position=True returns a (seg_len,) array instead: the accuracy at each index of a
    segment (NaN where no target was counted).
    """
    predictions = stream_predictions(model, tokens, seg_len, mem_len, **forward_kwargs)
    targets = targets[:, :predictions.shape[1]]
    keep = targets != -100
    hits = ((predictions == targets) & keep).cpu()
    if by_position:  # counts at each index of a segment; 0/0 -> NaN
        hits_at, kept_at = (a.view(a.shape[0], -1, seg_len).sum((0, 1)).double()
                            for a in (hits, keep.cpu()))
        return (hits_at / kept_at).numpy()
    return hits.sum().item() / max(keep.sum().item(), 1)


# ============================================================================ evaluation speed
@torch.no_grad()
def eval_speed(context: int, d_model: int = 128, num_heads: int = 4, num_layers: int = 2,
               vocab_size: int = 50, seg_len: int = 128, repeats: int = 3, device="cpu",
               seed: int = 0, kv_cache: bool = False, per_repeat: bool = False,
               timer=time.perf_counter) -> dict[str, float] | dict[str, list[float]]:
    """Tokens per second when every prediction sees (at least) `context` earlier tokens.

    * 'vanilla, recompute': a `VanillaLM` predicts one token from a window of the last
      `context` tokens, and the window slides by one for the next token — all of it recomputed.
    * 'XL, cached': a `TransformerXL` of the same size reads `seg_len` tokens per call with a
      memory of `context` hidden states per layer (the paper's evaluation): token i of the
      segment sees context + i earlier tokens, and nothing is computed twice.
    * 'XL, one token at a time': the same memory, one new token per call of the model.
    * with kv_cache: 'XL, one token, KV cache', one new token per call of an `XLDecoder` (as
      in sampling), and on CUDA also 'XL, one token, KV cache + CUDA graph' (its step
      replayed as a graph).
    Untrained weights (speed does not depend on them); batch 1; medians of interleaved repeats,
    or with per_repeat=True every repeat's speed (a list per contender: repeat r of each was
    timed in the same round, so their ratios pair up). timer: `time.process_time` counts one
    CPU thread's work on a busy machine (see `course.bench.time_interleaved`).
    """
    for name, value, low in (("context", context, 1), ("seg_len", seg_len, 1),
                             ("repeats", repeats, 1), ("vocab_size", vocab_size, 1)):
        check_size(name, value, low)

    torch.manual_seed(seed)
    vanilla = VanillaLM(vocab_size, d_model, num_heads, num_layers).to(device).eval()
    xl = TransformerXL(vocab_size, d_model, num_heads, num_layers, mem_len=context,
                       max_len=context + seg_len, attend=rel_attention_fast_torch).to(device).eval()
    g = torch.Generator().manual_seed(seed)
    window = torch.randint(0, vocab_size, (1, context), generator=g).to(device)
    segment = torch.randint(0, vocab_size, (1, seg_len), generator=g).to(device)
    _, memories = xl(window)  # a full memory of `context` states per layer
    contenders = {
        "vanilla, recompute": lambda: vanilla(window),  # 1 token predicted
        "XL, cached": lambda: xl(segment, memories),  # seg_len tokens predicted
        "XL, one token at a time": lambda: xl(segment[:, :1], memories),  # 1 token predicted
    }
    decoders = {"XL, one token, KV cache": XLDecoder(xl, context)} if kv_cache else {}
    if kv_cache and torch.device(device).type == "cuda":
        decoders["XL, one token, KV cache + CUDA graph"] = XLDecoder(xl, context)
    for name, decoder in decoders.items():
        decoder.prefill(window)  # a full cache: every step attends to context + 1 positions
        if name.endswith("CUDA graph"):
            decoder.capture()
        contenders[name] = lambda decoder=decoder: decoder.step(segment[:, :1])
    tokens = {name: seg_len if name == "XL, cached" else 1 for name in contenders}
    if not per_repeat:
        times = time_interleaved(contenders, repeats, device=device, timer=timer)
        return {name: tokens[name] / t for name, t in times.items()}
    rounds = [time_interleaved(contenders, 1, warmup=int(r == 0), device=device, timer=timer)
              for r in range(repeats)]
    return {name: [tokens[name] / times[name] for times in rounds] for name in contenders}
