"""Multi-scale attention: one multi-scale layer vs the same layer with full heads.

    python benchmarks/multiscale.py              # N = 256 ... 8,192 (a few minutes on 2 cores)
    python benchmarks/multiscale.py --quick      # N = 256 ... 2,048 (well under a minute)
    python benchmarks/multiscale.py --markdown   # also write the tables into benchmarks/README.md
    python benchmarks/multiscale.py --device cuda [--dtype bfloat16]   # on a GPU: N = 1k ... 16k

B = 1 (4 on CUDA, as in the H100 yardstick), H = 8 heads, d = 64 per head, float32 unless
--dtype. The multi-scale layer's heads have the scales {3, 3, N/16, N/16, N/8, N/8, N/4, N/2}
(|i - j| <= ω). Contenders, all on the same q, k, v:
    full        8 full heads: F.scaled_dot_product_attention, no mask (what the layer replaces)
    zero mask   8 full heads through SDPA with an all-zero float mask: the price of any mask
                in PyTorch's fused CPU kernel (N <= 2,048 only: the mask grows as N²)
    masked      the multi-scale layer as one SDPA call with the (H, N, N) per-head window mask
                (N <= 2,048 only)
    grouped     heads grouped by scale: window kernel (ω < BAND_FROM) / band kernel / SDPA
    multiscale  `multiscale_attention_fast_torch` as shipped: masked below DENSE_BELOW, else
                grouped; on CUDA from dispatch.FLEX_FROM on one FlexAttention call with
                per-head windows
    readable    (CUDA only) the same with the readable kernels forced (dispatch.kernel_policy): what
                a GPU ran before the dispatch
Times are medians of interleaved repeats; memory is the extra peak resident memory of one call.
A last table times the band kernel's chunk size c for one head (forward + backward, relative to
one full head), the measurement behind its default.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minattn.attention import attention_fast_torch
from minattn.multiscale import (
    BAND_FROM,
    DENSE_BELOW,
    band_attention_cpu,
    multiscale_attention_fast_torch,
    scale_mask_torch,
)
from minattn.sparse import dispatch
from minattn.tools.bench import (  # noqa: E402
    bench_args,
    device_name,
    fmt_bytes,
    fmt_time,
    forward_backward,
    forward_only,
    peak_memory,
    print_table,
    save_json,
    time_interleaved,
    write_markdown,
)

H, D = 8, 64
MASKED_MAX = 2048  # the (H, N, N) bool mask and its float copy: 160 MiB at N = 2,048


def windows(n: int) -> list[int]:
    return [3, 3, n // 16, n // 16, n // 8, n // 8, n // 4, n // 2]


def batch(device) -> int:
    return 4 if device.type == "cuda" else 1


def contenders(n: int, device, dtype) -> dict:
    ws = windows(n)
    fns = {"full": lambda q, k, v: attention_fast_torch(q, k, v),
           "grouped": lambda q, k, v: multiscale_attention_fast_torch(q, k, v, ws, dense_below=0),
           "multiscale": lambda q, k, v: multiscale_attention_fast_torch(q, k, v, ws)}
    if device.type == "cuda":
        def readable(q, k, v):
            with dispatch.kernel_policy("readable"):
                return multiscale_attention_fast_torch(q, k, v, ws)
        fns["readable"] = readable
    if n <= MASKED_MAX:
        mask = scale_mask_torch(n, ws, device)  # built once, outside the timed call
        zeros = torch.zeros(1, H, n, n, device=device, dtype=dtype)
        fns["masked"] = lambda q, k, v: attention_fast_torch(q, k, v, mask=mask)
        fns["zero mask"] = lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                          attn_mask=zeros)
    return fns


def measure(n: int, repeats: int, device, dtype) -> dict:
    gen = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(batch(device), H, n, D, generator=gen).to(device, dtype)
               .requires_grad_() for _ in range(3))
    fns = contenders(n, device, dtype)
    return {"n": n, "windows": windows(n),
            "route": dispatch.choose_kernel(device, n, dtype, D),
            "fwd_s": time_interleaved({m: forward_only(f, q, k, v) for m, f in fns.items()},
                                      repeats, device=device),
            "fwd_bwd_s": time_interleaved({m: forward_backward(f, q, k, v)
                                           for m, f in fns.items()}, repeats, device=device),
            "fwd_bwd_mem": {m: peak_memory(forward_backward(f, q, k, v), device)
                            for m, f in fns.items()}}


def measure_chunks(n: int, repeats: int) -> list[dict]:
    """One head, ω in {N/16, N/8, N/4, N/2}: band kernel fwd+bwd time per chunk size c, as a
    multiple of one full head's."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 1, n, D, generator=gen).requires_grad_() for _ in range(3))
    chunks = [32, 64, 128, 256]
    fns = {"full": forward_backward(attention_fast_torch, q, k, v)}
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
    args = bench_args(__doc__.splitlines()[0], dtypes=("float32", "bfloat16", "float16"))
    device, dtype = args.device, args.dtype
    cuda = device.type == "cuda"
    if cuda:
        sizes = [1024, 4096] if args.quick else [1024, 2048, 4096, 8192, 16384]
    else:
        sizes = [256, 384, 512, 1024, 2048] if args.quick else [256, 384, 512, 1024, 2048,
                                                                 4096, 8192]
    repeats = args.repeats or (10 if cuda else 3)
    dtype_name = str(dtype).removeprefix("torch.")
    where = (f"{device_name(device)}, torch {torch.__version__}" if cuda
             else f"cpu, torch threads={torch.get_num_threads()}")
    head = (f"B={batch(device)}, H={H}, d={D}, {dtype_name}, {where}, "
            f"{repeats} interleaved repeats (medians); DENSE_BELOW = {DENSE_BELOW}, "
            f"BAND_FROM = {BAND_FROM}" + (f", FLEX_FROM = {dispatch.FLEX_FROM}" if cuda else ""))
    print(head + "\n")
    results = []
    for n in sizes:
        results.append(measure(n, repeats, device, dtype))
        print(f"N={n} done", flush=True)
    names = ["full", "zero mask", "masked", "grouped", "multiscale"] + (["readable"] if cuda
                                                                        else [])
    rows = []
    for r in results:
        row = {"N": r["n"], "route": r["route"]}
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
    first = ["N", "route"] if cuda else ["N"]
    print("Forward time")
    t1 = print_table(rows, first + [f"{m} fwd" for m in names] + ["full / multiscale fwd"])
    print("\nForward + backward time")
    t2 = print_table(rows, first + [f"{m} fwd+bwd" for m in names]
                     + ["full / multiscale fwd+bwd"])
    print("\nExtra peak memory, forward + backward")
    t3 = print_table(rows, first + [f"{m} mem" for m in names])
    chunk_rows, t4 = [], ""
    if not cuda:  # the band kernel is the CPU's
        print("\nBand kernel, one head, forward + backward: time per chunk size c as a multiple "
              "of one full head's (window share = the ideal)")
        chunk_rows = measure_chunks(sizes[-2], repeats)
        t4 = print_table(chunk_rows,
                         ["N", "ω", "window share", "c=32", "c=64", "c=128", "c=256"])
    if args.markdown and cuda:
        shares = [(r["n"], r["fwd_bwd_s"]["multiscale"] / r["fwd_bwd_s"]["full"])
                  for r in results if r["n"] >= 4096]
        goals = [f"| N = {n:,}: multi-scale fwd+bwd ≤ 1.1× full-head SDPA | multiscale / full "
                 f"= {x:.2f} | {'yes' if x <= 1.1 else 'no'} |" for n, x in shares]
        write_markdown(f"multiscale-cuda-{dtype_name}",
                       f"## Multi-scale attention on CUDA ({dtype_name}): `benchmarks/"
                       f"multiscale.py --device cuda`{' --quick' if args.quick else ''}\n\n"
                       f"{head}. Scales per layer: {{3, 3, N/16, N/16, N/8, N/8, N/4, N/2}}. "
                       "*readable* forces the readable kernels; *multiscale* is the layer as "
                       "shipped. A ratio > 1 means the multi-scale layer is faster than 8 full "
                       f"heads.\n\nForward time\n\n{t1}\n\nForward + backward time\n\n{t2}\n\n"
                       f"Extra peak memory, forward + backward\n\n{t3}\n\n### Goal on CUDA\n\n"
                       "| goal | this run | met? |\n|---|---|---|\n" + "\n".join(goals) + "\n")
    elif args.markdown:
        write_markdown("multiscale", f"## Multi-scale attention (`benchmarks/multiscale.py`"
                       f"{' --quick' if args.quick else ''})\n\n{head}. Scales per layer: "
                       "{3, 3, N/16, N/16, N/8, N/8, N/4, N/2}. A ratio > 1 means the "
                       "multi-scale layer is faster than 8 full heads.\n\nForward time\n\n"
                       f"{t1}\n\nForward + backward time\n\n{t2}\n\nExtra peak memory, "
                       f"forward + backward\n\n{t3}\n\nBand kernel, one head, forward + "
                       "backward: time per chunk size c as a multiple of one full head's "
                       f"(window share = the ideal)\n\n{t4}\n")
    save_json(args.json, {"benchmark": "multiscale", "B": batch(device), "H": H, "d": D,
                          "results": results, "band_kernel_chunks": chunk_rows}, device, dtype)


if __name__ == "__main__":
    main()
