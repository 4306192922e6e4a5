"""Multi-scale attention: one multi-scale layer vs the same layer with full heads.

    python benchmarks/multiscale.py              # N = 256 ... 8,192 (a few minutes on 2 cores)
    python benchmarks/multiscale.py --quick      # N = 256 ... 2,048 (well under a minute)
    python benchmarks/multiscale.py --markdown   # also write the tables into benchmarks/README.md

B = 1, H = 8 heads, d = 64 per head, float32. The multi-scale layer's heads have the scales
{3, 3, N/16, N/16, N/8, N/8, N/4, N/2} (|i - j| <= ω). Contenders, all on the same q, k, v:
    full        8 full heads: F.scaled_dot_product_attention, no mask (what the layer replaces)
    zero mask   8 full heads through SDPA with an all-zero float mask: the price of any mask
                in PyTorch's fused CPU kernel (N <= 2,048 only: the mask grows as N²)
    masked      the multi-scale layer as one SDPA call with the (H, N, N) per-head window mask
                (N <= 2,048 only)
    grouped     heads grouped by scale: window kernel (ω < BAND_FROM) / band kernel / SDPA
    multiscale  `multiscale_attention_fast_torch` as shipped: masked below DENSE_BELOW, else grouped
Times are medians of interleaved repeats; memory is the extra peak resident memory of one call.
A last table times the band kernel's chunk size c for one head (forward + backward, relative to
one full head), the measurement behind its default.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minattn.attention import fast_attention_torch
from minattn.multiscale import scale_mask_torch
from minattn.multiscale_fast import (BAND_FROM, DENSE_BELOW, band_attention_cpu,
                                     multiscale_attention_fast_torch)
from minattn.tools.bench import (bench_args, fmt_bytes, fmt_time, forward_backward,  # noqa: E402
                                 forward_only, peak_memory, print_table, save_json,
                                 time_interleaved, write_markdown)

B, H, D = 1, 8, 64
MASKED_MAX = 2048  # the (H, N, N) bool mask and its float copy: 160 MiB at N = 2,048


def windows(n: int) -> list[int]:
    return [3, 3, n // 16, n // 16, n // 8, n // 8, n // 4, n // 2]


def contenders(n: int) -> dict:
    ws = windows(n)
    fns = {"full": lambda q, k, v: fast_attention_torch(q, k, v),
           "grouped": lambda q, k, v: multiscale_attention_fast_torch(q, k, v, ws, dense_below=0),
           "multiscale": lambda q, k, v: multiscale_attention_fast_torch(q, k, v, ws)}
    if n <= MASKED_MAX:
        mask = scale_mask_torch(n, ws)  # built once, outside the timed call
        zeros = torch.zeros(1, H, n, n)
        fns["masked"] = lambda q, k, v: fast_attention_torch(q, k, v, mask=mask)
        fns["zero mask"] = lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                          attn_mask=zeros)
    return fns


def measure(n: int, repeats: int) -> dict:
    gen = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(B, H, n, D, generator=gen).requires_grad_() for _ in range(3))
    fns = contenders(n)
    return {"n": n, "windows": windows(n),
            "fwd_s": time_interleaved({m: forward_only(f, q, k, v) for m, f in fns.items()},
                                      repeats),
            "fwd_bwd_s": time_interleaved({m: forward_backward(f, q, k, v)
                                           for m, f in fns.items()}, repeats),
            "fwd_bwd_mem": {m: peak_memory(forward_backward(f, q, k, v)) for m, f in fns.items()}}


def measure_chunks(n: int, repeats: int) -> list[dict]:
    """One head, ω in {N/16, N/8, N/4, N/2}: band kernel fwd+bwd time per chunk size c, as a
    multiple of one full head's."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 1, n, D, generator=gen).requires_grad_() for _ in range(3))
    chunks = [32, 64, 128, 256]
    fns = {"full": forward_backward(fast_attention_torch, q, k, v)}
    for w in (n // 16, n // 8, n // 4, n // 2):
        for c in (c for c in chunks if c <= 2 * w):  # the kernel needs c <= 2ω
            fns[w, c] = forward_backward(
                lambda q, k, v, w=w, c=c: band_attention_cpu(q, k, v, w, c), q, k, v)
    t = time_interleaved(fns, repeats)
    return [{"N": n, "ω": w, "window share": f"{_share(n, w):.2f}",
             **{f"c={c}": f"{t[w, c] / t['full']:.2f}" if (w, c) in t else "—"
                for c in chunks}}
            for w in (n // 16, n // 8, n // 4, n // 2)]


def _share(n: int, w: int) -> float:
    """The fraction of the N² query-key pairs inside |i − j| <= w: the ideal cost."""
    return float(scale_mask_torch(n, [w]).float().mean())


def main():
    args = bench_args(__doc__.splitlines()[0])
    sizes = [256, 384, 512, 1024, 2048] if args.quick else [256, 384, 512, 1024, 2048, 4096,
                                                                 8192]
    repeats = args.repeats or 3
    head = (f"B={B}, H={H}, d={D}, float32, cpu, torch threads={torch.get_num_threads()}, "
            f"{repeats} interleaved repeats (medians); DENSE_BELOW = {DENSE_BELOW}, "
            f"BAND_FROM = {BAND_FROM}")
    print(head + "\n")
    results = []
    for n in sizes:
        results.append(measure(n, repeats))
        print(f"N={n} done", flush=True)
    names = ["full", "zero mask", "masked", "grouped", "multiscale"]
    rows = []
    for r in results:
        row = {"N": r["n"]}
        for key, label in (("fwd_s", "fwd"), ("fwd_bwd_s", "fwd+bwd")):
            t = r[key]
            for m in t:
                row[f"{m} {label}"] = fmt_time(t.get(m))
            row[f"full / multiscale {label}"] = f"{t['full'] / t['multiscale']:.2f}×"
        for m, b in r["fwd_bwd_mem"].items():
            row[f"{m} mem"] = fmt_bytes(b)
        row.update({f"{m} {x}": "—" for m in names for x in ("fwd", "fwd+bwd", "mem")
                    if f"{m} {x}" not in row})
        rows.append(row)
    print("Forward time")
    t1 = print_table(rows, ["N"] + [f"{m} fwd" for m in names] + ["full / multiscale fwd"])
    print("\nForward + backward time")
    t2 = print_table(rows, ["N"] + [f"{m} fwd+bwd" for m in names]
                     + ["full / multiscale fwd+bwd"])
    print("\nExtra peak memory, forward + backward")
    t3 = print_table(rows, ["N"] + [f"{m} mem" for m in names])
    print("\nBand kernel, one head, forward + backward: time per chunk size c as a multiple of "
          "one full head's (window share = the ideal)")
    chunk_rows = measure_chunks(sizes[-2], repeats)
    t4 = print_table(chunk_rows,
                     ["N", "ω", "window share", "c=32", "c=64", "c=128", "c=256"])
    if args.markdown:
        write_markdown("multiscale", f"## Multi-scale attention (`benchmarks/multiscale.py`"
                       f"{' --quick' if args.quick else ''})\n\n{head}. Scales per layer: "
                       "{3, 3, N/16, N/16, N/8, N/8, N/4, N/2}. A ratio > 1 means the "
                       "multi-scale layer is faster than 8 full heads.\n\nForward time\n\n"
                       f"{t1}\n\nForward + backward time\n\n{t2}\n\nExtra peak memory, "
                       f"forward + backward\n\n{t3}\n\nBand kernel, one head, forward + "
                       "backward: time per chunk size c as a multiple of one full head's "
                       f"(window share = the ideal)\n\n{t4}\n")
    save_json(args.json, {"benchmark": "multiscale", "B": B, "H": H, "d": D, "results": results,
                          "band_kernel_chunks": chunk_rows})


if __name__ == "__main__":
    main()
