"""Pilot for lesson 08's budget: do the Table-2 golds converge in fewer steps with the learning
rate annealed to 0 (cosine), and how good are they then? Golds only (standard models), on seeds
the lesson never uses (300, 301), at the lesson's full-mode sizes; the validation performance
every 50 steps. Run from the repository root:

    PILOT=benchmarks/results/cpu-pilot-2026-11-29-lesson08/pilot.py
    OMP_NUM_THREADS=1 .venv/bin/python $PILOT OUT.json
    OMP_NUM_THREADS=1 .venv/bin/python $PILOT OUT2.json larger
"""

import json
import math
import sys
import time

import torch
import torch.nn.functional as F

from minattn.agreement import AttentionClassifier, Seq2SeqAttention
from minattn.course.agreement import sentiment_task, translation_task
from minattn.course.train import train

torch.set_num_threads(1)
SENT = dict(hidden=32, embed=32, batch=32, n_train=None, n_valid=None, at=[0])
MT = dict(hidden=64, batch=32, n_valid=200, max_len=20, tgt_words=500, n_read=None, at=[0])
CONFIGS = {"sentiment": [(1e-3, 1500, False), (1e-3, 1000, True), (2e-3, 1000, True)],
           "translation": [(3e-3, 2500, False), (3e-3, 1500, True), (3e-3, 1000, True)]}
LARGER_LR = {"sentiment": [(2e-3, 1000, False), (3e-3, 1000, False)],  # `pilot.py OUT larger`
             "translation": [(5e-3, 1500, False), (1e-2, 1500, True)]}
SEEDS = (300, 301)


def cosine(steps):
    return lambda step: 0.5 * (1 + math.cos(math.pi * (step - 1) / steps))


def run(name, task, seed, lr, steps, anneal):
    torch.manual_seed(seed)
    if name == "sentiment":
        model = AttentionClassifier(*task.vocab, hidden=SENT["hidden"], embed=SENT["embed"])

        def loss_fn(model, x, mask, y):
            return F.binary_cross_entropy_with_logits(model(x, mask)[0], y)

        def perf():
            x, mask, labels = task.valid
            z, _ = model(x, mask)
            return ((z > 0).long() == labels).float().mean().item()
    else:
        model = Seq2SeqAttention(*task.vocab, hidden=MT["hidden"], embed=MT["hidden"])

        def loss_fn(model, src, mask, tgt_in, tgt_out):
            logits, _ = model(src, tgt_in, mask)
            return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=-100)

        def perf():
            src, mask, tgt_in, tgt, counted = task.valid
            logits, _ = model(src, tgt_in, mask)
            return (((logits.argmax(-1) == tgt) & counted).sum() / counted.sum()).item()
    batches = task.batches(seed)
    cpu = time.process_time()
    history = train(model, lambda step: next(batches), loss_fn, steps, lr=lr, clip=None,
                    evaluate=lambda: {"perf": perf()}, eval_at=range(0, steps + 1, 50),
                    schedule=cosine(steps) if anneal else None, progress=False)
    return dict(task=name, seed=seed, lr=lr, steps=steps, anneal=anneal,
                cpu_s=time.process_time() - cpu,
                curve=list(zip(history["perf_step"], history["perf"])))


if __name__ == "__main__":
    tasks = {"sentiment": sentiment_task(SENT, 0, "cpu"),
             "translation": translation_task(MT, 0, "cpu")}
    out = []
    for name, configs in (LARGER_LR if sys.argv[2:] == ["larger"] else CONFIGS).items():
        for lr, steps, anneal in configs:
            for seed in SEEDS:
                r = run(name, tasks[name], seed, lr, steps, anneal)
                c = r["curve"]
                schedule = "cosine" if anneal else "constant"
                print(f"{name} lr {lr:g} {steps} steps {schedule} seed {seed}: "
                      f"final {c[-1][1]:.4f}, best {max(v for _, v in c):.4f} at "
                      f"{max(c, key=lambda t: t[1])[0]}, {r['cpu_s']:.0f} CPU-s", flush=True)
                out.append(r)
                json.dump(out, open(sys.argv[1], "w"))
