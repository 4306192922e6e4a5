"""Transformer-XL evaluation speed: cached memory vs recomputing the context for every token.

    python benchmarks/xl.py            # context 128 … 1,024 (about a minute on 2 cores)
    python benchmarks/xl.py --quick    # context 128, 256 (seconds)
    python benchmarks/xl.py --json bench_results/xl.json --markdown
    python benchmarks/xl.py --device cuda   # context 256 … 3,072 on a GPU (its own table)

Two language models of the same size (d = 128, 4 heads, 2 layers, 50 symbols, float32, batch
1, one torch thread on CPU): a vanilla Transformer that predicts each token from a window of
the last C tokens, recomputing the whole window for every prediction (how a fixed-context
model is evaluated without fragmenting the context), and a Transformer-XL that reads 128
tokens per call with a memory of C cached hidden states per layer
(`minattn.course.xl.eval_speed`; XL attends with the relative-shift kernel
`minattn.fast.xl.rel_attention_fast_torch`). Both see at least C tokens of context per
prediction. One token at a time (as when sampling),
XL either calls the model with its memory (which projects the whole memory again) or steps an
`minattn.fast.xl.XLDecoder` (keys and values cached; on CUDA also replayed as a CUDA graph). The
contenders are interleaved and each time is a median of repeats; the ratios compare numbers
measured side by side.
The paper (Dai et al. 2019, table 9) reports up to 1,874× at C = 3,800 on GPUs.
"""

from __future__ import annotations

import torch

from minattn.course.bench import (
    bench_args,
    count_operations,
    machine_record,
    markdown_table,
    measured_on,
    provenance,
    run_benchmark,
    save_json,
)
from minattn.course.xl import eval_speed
from minattn.fast.xl import XLDecoder, rel_attention_fast_torch
from minattn.xl import TransformerXL, VanillaLM

PAPER = {3800: 1874, 2800: 1409, 1800: 773, 800: 363}  # Dai et al. 2019, table 9


GRAPH = "XL, one token, KV cache + CUDA graph"


@torch.no_grad()
def operations_per_token(context: int, device) -> dict[str, int]:
    """Operations (kernel launches on a GPU) per predicted token, one token at a time: the
    vanilla window recomputed, the XL model called with its memory, the XLDecoder."""
    torch.manual_seed(0)
    vanilla = VanillaLM(50, 128, 4, 2).to(device).eval()
    xl = TransformerXL(50, 128, 4, 2, mem_len=context, max_len=context + 128,
                       attend=rel_attention_fast_torch).to(device).eval()
    window = torch.randint(0, 50, (1, context), generator=torch.Generator().manual_seed(0))
    window = window.to(device)
    _, memories = xl(window)
    decoder = XLDecoder(xl, context)
    decoder.prefill(window)
    calls = {"vanilla, recompute": lambda: vanilla(window),
             "XL, one token at a time": lambda: xl(window[:, :1], memories),
             "XL, one token, KV cache": lambda: decoder.step(window[:, :1])}
    return {name: sum(count_operations(call).values()) for name, call in calls.items()}


def main():
    args = bench_args(__doc__.splitlines()[0])
    run_benchmark(args, measure_all, render)


def measure_all(args) -> dict:
    """Every measurement of one run, saved with --json: what `render` needs."""
    device = args.device
    if device.type == "cpu":
        torch.set_num_threads(1)  # measured faster than 2 threads on a busy 2-core machine
        contexts = [128, 256] if args.quick else [128, 256, 512, 1024]
    else:
        contexts = [256, 1024] if args.quick else [256, 1024, 3072]
    repeats = args.repeats or (3 if args.quick else 5)
    print(f"XL evaluation speed, d=128, H=4, 2 layers, batch 1, {device}, torch "
          f"{torch.__version__}, {repeats} interleaved repeats (medians)")
    raw = []
    for c in contexts:
        speed = eval_speed(c, repeats=repeats, device=device, kv_cache=True)
        raw.append(dict(context=c, tokens_per_s=speed,
                        operations_per_token=operations_per_token(c, device)))
        print(f"C={c} done", flush=True)
    payload = {"benchmark": "xl", "device": str(device), "quick": args.quick,
               "repeats": repeats, "results": raw}
    save_json(args.json, payload, device)
    return dict(payload, machine=machine_record(device))


def render(payload: dict, source=None) -> tuple[str, str]:
    """(section name, Markdown) of a run, measured now or loaded from its JSON (`source`)."""
    machine = payload["machine"]
    cuda = str(machine.get("device", "cpu")).startswith("cuda")
    rows = []
    for r in payload["results"]:
        speed, ops, c = r["tokens_per_s"], r["operations_per_token"], r["context"]
        vanilla = speed["vanilla, recompute"]
        row = {"context C": f"{c:,}",
               "vanilla, recompute (tok/s)": f"{vanilla:,.0f}",
               "XL, cached (tok/s)": f"{speed['XL, cached']:,.0f}",
               "XL / vanilla": f"{speed['XL, cached'] / vanilla:,.0f}×",
               "XL one token at a time (tok/s)": f"{speed['XL, one token at a time']:,.0f}",
               "one-at-a-time / vanilla": f"{speed['XL, one token at a time'] / vanilla:,.1f}×",
               "XL one token, KV cache (tok/s)": f"{speed['XL, one token, KV cache']:,.0f}",
               "KV cache / vanilla": f"{speed['XL, one token, KV cache'] / vanilla:,.1f}×"}
        row["operations per token: vanilla / XL / KV cache"] = (
            f"{ops['vanilla, recompute']} / {ops['XL, one token at a time']} / "
            f"{ops['XL, one token, KV cache']}")
        if GRAPH in speed:
            row.update({"KV cache + CUDA graph (tok/s)": f"{speed[GRAPH]:,.0f}",
                        "graph / vanilla": f"{speed[GRAPH] / vanilla:,.1f}×"})
        rows.append(row)
    load = machine.get("load_average")
    flags = (" --quick" if payload.get("quick") else "") + (" --device cuda" if cuda else "")
    text = (f"## Transformer-XL{' on CUDA' if cuda else ''}: cached evaluation vs recomputing\n\n"
            f"`python benchmarks/xl.py{flags}`, measured on {measured_on(machine)}, "
            f"{provenance(payload, source)}. d = 128, 4 heads, 2 layers, batch 1; XL reads 128 "
            "tokens per call with a memory of C states per layer; one token at a time, by the "
            "model with its memory or by `XLDecoder` (KV cache); operations per token = aten "
            "operations dispatched, views excluded (each a kernel launch on a GPU)."
            + (f" Load average at the end of the run: {load:.1f} on {machine.get('cpu_count')} "
               "cores (a busy machine makes every number noisier)." if load else "")
            + "\n\n" + markdown_table(rows, list(rows[0])) + "\n\nPaper (table 9, GPU, much "
            "larger models): 363× at C = 800, 1,874× at C = 3,800.\n")
    return ("xl-cuda" if cuda else "xl"), text


if __name__ == "__main__":
    main()
