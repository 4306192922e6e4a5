"""Transformer-XL evaluation speed: cached memory vs recomputing the context for every token.

    python benchmarks/xl.py            # context 128 … 1,024 (about a minute on 2 cores)
    python benchmarks/xl.py --quick    # context 128, 256 (seconds)
    python benchmarks/xl.py --json bench_results/xl.json --markdown

Two language models of the same size (d = 128, 4 heads, 2 layers, 50 symbols, float32, batch
1, one torch thread on CPU): a vanilla Transformer that predicts each token from a window of
the last C tokens, recomputing the whole window for every prediction (how a fixed-context
model is evaluated without fragmenting the context), and a Transformer-XL that reads 128
tokens per call with a memory of C cached hidden states per layer (`xl_fast.eval_speed`).
Both see at least C tokens of context per prediction. The three contenders are interleaved
and each time is a median of repeats; the ratio compares numbers measured side by side.
The paper (Dai et al. 2019, table 9) reports up to 1,874× at C = 3,800 on GPUs.
"""

from __future__ import annotations

import os

import torch

from minattn.tools.bench import bench_args, print_table, save_json, write_markdown
from minattn.tools.utils import pick_device
from minattn.xl_fast import eval_speed

PAPER = {3800: 1874, 2800: 1409, 1800: 773, 800: 363}  # Dai et al. 2019, table 9


def main():
    args = bench_args(__doc__.splitlines()[0])
    device = pick_device()
    if device.type == "cpu":
        torch.set_num_threads(1)  # measured faster than 2 threads on a busy 2-core machine
    contexts = [128, 256] if args.quick else [128, 256, 512, 1024]
    repeats = args.repeats or (3 if args.quick else 5)
    print(f"XL evaluation speed, d=128, H=4, 2 layers, batch 1, device={device}, "
          f"torch threads={torch.get_num_threads()}, {repeats} interleaved repeats (medians)\n")
    rows, raw = [], []
    for c in contexts:
        speed = eval_speed(c, repeats=repeats, device=device)
        raw.append(dict(context=c, tokens_per_s=speed))
        rows.append({"context C": f"{c:,}",
                     "vanilla, recompute (tok/s)": f"{speed['vanilla, recompute']:,.0f}",
                     "XL, cached (tok/s)": f"{speed['XL, cached']:,.0f}",
                     "XL / vanilla": f"{speed['XL, cached'] / speed['vanilla, recompute']:,.0f}×",
                     "XL one token at a time (tok/s)": f"{speed['XL, one token at a time']:,.0f}",
                     "one-at-a-time / vanilla":
                         f"{speed['XL, one token at a time'] / speed['vanilla, recompute']:,.1f}×"})
        print(f"C={c} done", flush=True)
    cols = list(rows[0])
    print()
    print_table(rows, cols)
    print("paper (GPU, 12–24 layers, d = 512–1024): " +
          ", ".join(f"{v:,}× at C = {k:,}" for k, v in sorted(PAPER.items())))
    save_json(args.json, {"benchmark": "xl", "device": str(device), "results": raw})
    if args.markdown:
        head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
        body = "".join("| " + " | ".join(r[c] for c in cols) + " |\n" for r in rows)
        write_markdown("xl", f"## Transformer-XL: cached evaluation vs recomputing\n\n"
                       f"`python benchmarks/xl.py{' --quick' if args.quick else ''}` on {device} "
                       f"({'1 torch thread' if device.type == 'cpu' else torch.cuda.get_device_name()}),"
                       f" {repeats} interleaved repeats, medians. d = 128, 4 heads, 2 layers, batch 1; "
                       f"XL reads 128 tokens per call with a memory of C states per layer. "
                       f"Load average at the end of the run: {os.getloadavg()[0]:.1f} on "
                       f"{os.cpu_count()} cores (a busy machine makes every number noisier).\n\n"
                       + head + body + "\nPaper (table 9, GPU, much larger models): 363× at "
                       "C = 800, 1,874× at C = 3,800.\n")


if __name__ == "__main__":
    main()
