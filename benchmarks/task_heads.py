"""Task-specific attention heads: training step time of each head against mean pooling, over
cached MiniLM token states, and the one-off cost of encoding the sentences.

    .venv/bin/python benchmarks/task_heads.py            # 512 sentences, 20 repeats
    .venv/bin/python benchmarks/task_heads.py --quick    # 128 sentences, 5 repeats (seconds)
    .venv/bin/python benchmarks/task_heads.py --json bench_results/task_heads.json --markdown

A training step = assemble a batch of 32 from the cache (`TokenStates.batch`), forward,
backward, AdamW. Every contender runs on the same batches, interleaved (A B C A B C ...),
medians. Columns: the step time; its ratio to mean pooling's; the same ratio without the batch
assembly (compute only); and the ratio if MiniLM's forward pass for the batch were part of
every step (as in the poster, which ran BERT in every step), using MiniLM's measured time.
Heads are full width (D = 384, 12 heads, as on BERT in the poster) unless the row says d = 64
(lesson 07's narrowed heads); cross-attention rows read the mean of A's tokens unless they are
read at [CLS] (the poster's read-out, which needs A's first token only). Goal: a single-layer
head <= 1.2x mean pooling's step.
The encoding row times our MiniLM on Rotten Tomatoes sentences (length-sorted batches of 64);
the `transformers` row runs only when transformers is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minattn.course import data  # noqa: E402
from minattn.course.bench import (  # noqa: E402
    bench_args,
    fmt_time,
    machine_record,
    markdown_table,
    measured_on,
    provenance,
    run_benchmark,
    save_json,
    time_interleaved,
)
from minattn.course.encoder import load_minilm, token_states  # noqa: E402
from minattn.course.task_heads import random_token_states  # noqa: E402
from minattn.encoder import encode_batch, length_sorted_batches  # noqa: E402
from minattn.fast.task_heads import attention_pool_fast_torch  # noqa: E402
from minattn.task_heads import (  # noqa: E402
    AttentionPool,
    CrossAttentionPool,
    PairModel,
    SentenceClassifier,
    cls_pool_torch,
    mean_pool_torch,
)

B = 32
HEADERS = ["training step", "time", "vs mean pooling", "compute only", "with MiniLM forward"]
ENC_HEADERS = ["encoding", "per sentence", "all 10,568 RT sentences (projected)"]


class FastPool(torch.nn.Module):
    """SentenceClassifier-shaped model on the single-layer fast path."""

    def __init__(self, reference: SentenceClassifier):
        super().__init__()
        self.ref = reference

    def forward(self, states, mask):
        z, _ = attention_pool_fast_torch(states, mask, self.ref.readout.layers[0])
        return self.ref.classifier(z)


def sentences_and_states(n: int):
    """(texts, TokenStates, encoder, tokenizer, note): MiniLM states when the files are there."""
    try:
        texts = data.load_sentiment("train").texts
        texts = [texts[i] for i in np.sort(np.random.default_rng(0).choice(len(texts), n,
                                                                         replace=False))]
    except data.DatasetMissing as err:
        print(f"{err}: using template sentences")
        texts = [f"the film number {i} was " + "rather " * (i % 20) + "good" for i in range(n)]
    try:
        encoder, tok = load_minilm(max_len=128)
        return texts, token_states(encoder, tok, texts, "bench-sentiment"), encoder, tok, \
            "MiniLM token states of Rotten Tomatoes sentences"
    except data.DatasetMissing as err:
        print(f"{err}: using random word vectors")
        return texts, random_token_states(texts, 384), None, None, "random word vectors"


def step_fn(model, get_batch, loss_fn):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    it = iter(range(10 ** 9))

    def step():
        batch = get_batch(next(it))
        loss = loss_fn(model, *batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def measure_heads(states, repeats, n):
    """{row: (seconds with assembly, seconds compute only)}, batch kind per row."""
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(n, B, replace=False)) for _ in range(repeats + 2)]
    partner = np.random.default_rng(1).permutation(n)
    y = torch.from_numpy(rng.integers(0, 2, n))
    ce = torch.nn.functional.cross_entropy
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    pre_single = [(*states.batch(b), y[b]) for b in batches]
    pre_pair = [(*states.batch(b), *states.batch(partner[b]), y[b].float()) for b in batches]
    single = {"mean pooling": SentenceClassifier(mean_pool_torch, 384),
              "first token": SentenceClassifier(cls_pool_torch, 384),
              "attention, 1 layer": SentenceClassifier(AttentionPool(384, 12), 384),
              "attention, 2 layers": SentenceClassifier(AttentionPool(384, 12, 2), 384),
              "attention, 1 layer, d = 64": SentenceClassifier(AttentionPool(64, 4), 64,
                                                               project=torch.nn.Linear(384, 64))}
    torch.manual_seed(0)
    fast = FastPool(SentenceClassifier(AttentionPool(384, 12), 384))
    pair = {"mean pooling (pairs)": PairModel(mean_pool_torch, 384),
            "cross-attention, 1 layer": PairModel(CrossAttentionPool(384, 12), 384),
            "cross-attention, 1 layer, read at [CLS] (the poster's)": PairModel(
                CrossAttentionPool(384, 12, read="first"), 384),
            "cross-attention, 2 layers": PairModel(CrossAttentionPool(384, 12, 2), 384),
            "cross-attention, 1 layer, d = 64": PairModel(CrossAttentionPool(64, 4), 64,
                                                          project=torch.nn.Linear(384, 64))}
    fns_full, fns_compute = {}, {}
    for name, model in list(single.items()) + [("attention, 1 layer, fast path", fast)]:
        loss = lambda m, x, mk, t: ce(m(x, mk), t)
        fns_full[name] = step_fn(model, lambda i: (*states.batch(batches[i % len(batches)]),
                                                   y[batches[i % len(batches)]]), loss)
        fns_compute[name] = step_fn(model, lambda i: pre_single[i % len(batches)], loss)
    for name, model in pair.items():
        loss = lambda m, a, am, b, bm, t: bce(m(a, am, b, bm), t)
        fns_full[name] = step_fn(
            model, lambda i: (*states.batch(batches[i % len(batches)]),
                              *states.batch(partner[batches[i % len(batches)]]),
                              y[batches[i % len(batches)]].float()), loss)
        fns_compute[name] = step_fn(model, lambda i: pre_pair[i % len(batches)], loss)
    full = time_interleaved(fns_full, repeats, warmup=2)
    compute = time_interleaved(fns_compute, repeats, warmup=2)
    return {k: (full[k], compute[k]) for k in full}


@torch.no_grad()
def encoder_batch_time(encoder, tok, texts, repeats):
    ids, mask = encode_batch(tok, texts[:B])
    return time_interleaved({"enc": lambda: encoder(ids, mask)}, repeats, warmup=1)["enc"]


@torch.no_grad()
def encoding_rows(encoder, tok, texts):
    """[(what, seconds per sentence)]: our MiniLM, and transformers' BertModel when installed."""
    def ours():
        for batch in length_sorted_batches(tok, texts, 64):
            ids, mask = encode_batch(tok, [texts[i] for i in batch])
            encoder(ids, mask)
    contenders = {"minattn MiniLM (pure torch)": ours}
    try:
        import transformers  # noqa: F401
        from transformers import BertModel
        hf = BertModel.from_pretrained(str(data.dataset_dir("minilm"))).eval()

        def theirs():
            for batch in length_sorted_batches(tok, texts, 64):
                ids, mask = encode_batch(tok, [texts[i] for i in batch])
                hf(input_ids=ids, attention_mask=mask.long())
        contenders["transformers BertModel"] = theirs
    except ImportError:
        print("transformers is not installed: its encoding row is skipped")
    times = time_interleaved(contenders, 3, warmup=1)
    return [(name, t / len(texts)) for name, t in times.items()]


def main():
    args = bench_args(__doc__.splitlines()[0],
                      devices=("cpu",))  # CPU steps over cached states; not ported to CUDA
    run_benchmark(args, measure_all, render)


def measure_all(args) -> dict:
    """Every measurement of one run, saved with --json: what `render` needs."""
    torch.set_num_threads(1)  # a shared 2-core machine: one thread was measured fastest
    n = 128 if args.quick else 512
    repeats = args.repeats or (5 if args.quick else 20)
    texts, states, encoder, tok, note = sentences_and_states(n)
    print(f"{note}: {n} sentences, mean {states.lengths().mean():.1f} tokens; batches of {B}")
    times = measure_heads(states, repeats, n)
    enc = encoder_batch_time(encoder, tok, texts, repeats) if encoder is not None else None
    payload = {"note": note, "n": n, "mean_tokens": float(states.lengths().mean()),
               "repeats": repeats, "encoder_batch_s": enc,
               "steps": {name: dict(step_s=full, compute_s=compute)
                         for name, (full, compute) in times.items()}}
    if encoder is not None:
        payload["encoding"] = dict(encoding_rows(encoder, tok, texts))
    save_json(args.json, payload, args.device)
    return dict(payload, machine=machine_record(args.device))


def render(payload: dict, source=None) -> tuple[str, str]:
    """(section name, Markdown) of a run, measured now or loaded from its JSON (`source`)."""
    times = {name: (t["step_s"], t["compute_s"]) for name, t in payload["steps"].items()}
    enc, rows = payload.get("encoder_batch_s"), []
    for name, (full, compute) in times.items():
        pairs = "cross" in name or "pairs" in name
        base_name = "mean pooling (pairs)" if pairs else "mean pooling"
        base_full, base_compute = times[base_name]
        enc_step = (enc * (2 if base_name.endswith("(pairs)") else 1)) if enc else None
        with_enc = f"{(full + enc_step) / (base_full + enc_step):.2f}x" if enc_step else "n/a"
        rows.append(dict(zip(HEADERS, [name, fmt_time(full), f"{full / base_full:.2f}x",
                                       f"{compute / base_compute:.2f}x", with_enc])))
    single = [k for k in times if k.startswith("attention, 1 layer")]
    best = min(single, key=lambda k: times[k][0])
    ratio = times[best][0] / times["mean pooling"][0]
    verdict = (f"Best single-layer head over cached states: {best} at {ratio:.2f}x mean "
               f"pooling's step: the 1.2x goal is {'met' if ratio <= 1.2 else 'not met'}.")
    if enc:
        with_enc = (times[best][0] + enc) / (times["mean pooling"][0] + enc)
        verdict += (f" With MiniLM's forward for the batch in every step (the poster's setting, "
                    f"{fmt_time(enc)} per batch) it is {with_enc:.2f}x.")
    mean = f" (mean {payload['mean_tokens']:.1f} tokens)" if payload.get("mean_tokens") else ""
    text = (f"## Task-specific attention heads (`benchmarks/task_heads.py`)\n\n"
            f"{payload['note']}, {payload['n']} sentences{mean}, batches of {B}, one CPU thread, "
            f"measured on {measured_on(payload['machine'])}, {provenance(payload, source)}. A "
            "step = batch assembly from the cache + forward + backward + AdamW. Goal: a "
            "single-layer head <= 1.2x mean pooling's step.\n\n"
            + markdown_table(rows, HEADERS) + "\n\n" + verdict + " Over cached states mean "
            "pooling's step does almost nothing, while a head multiplies through and updates four "
            "D x D projections (the fast path skips the per-token keys and values, not the "
            "weights).")
    encoding = payload.get("encoding") or {}
    if encoding:
        enc_rows = [dict(zip(ENC_HEADERS, [name, fmt_time(per), f"{per * 10568:.0f} s"]))
                    for name, per in encoding.items()]
        text += "\n\n" + markdown_table(enc_rows, ENC_HEADERS)
        if len(enc_rows) == 1:
            text += "\n\n(`transformers` is not installed here: its row is skipped.)"
    return "task_heads", text


if __name__ == "__main__":
    main()
