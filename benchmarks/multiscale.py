"""Multi-scale attention: one multi-scale layer vs the same layer with full heads.

    python benchmarks/multiscale.py              # N = 256 ... 8,192 (a few minutes on 2 cores)
    python benchmarks/multiscale.py --quick      # N = 256 ... 2,048 (well under a minute)
    python benchmarks/multiscale.py --markdown   # also write the tables into benchmarks/README.md
    python benchmarks/multiscale.py --device cuda [--dtype bfloat16]   # on a GPU: N = 1k ... 16k
    python benchmarks/multiscale.py --from-json run.json --markdown   # tables of a saved run

B = 1 (4 on CUDA, as in the H100 yardstick), H = 8 heads, d = 64 per head, float32 unless
--dtype. The multi-scale layer's heads have the scales {3, 3, N/16, N/16, N/8, N/8, N/4, N/2}
(|i - j| <= ω). Contenders, all on the same q, k, v:
    full        8 full heads: F.scaled_dot_product_attention, no mask (what the layer replaces)
    zero mask   8 full heads through SDPA with an all-zero float mask: the price of any mask
                in PyTorch's fused CPU kernel (N <= 2,048 only: the mask grows as N²)
    masked      the multi-scale layer as one SDPA call with the (H, N, N) per-head window mask
                (N <= 2,048; on CUDA N <= 8,192): the dense route of the CUDA dispatch
    grouped     (CPU) heads grouped by scale: window kernel (ω < BAND_FROM) / band kernel / SDPA
    multiscale  `multiscale_attention_routed_fast_torch`, what a caller names for any device:
                on the CPU `multiscale_attention_fast_torch` (masked below DENSE_BELOW, else
                grouped); on CUDA one dense masked call below flex.MULTISCALE_FLEX_FROM, one
                FlexAttention call with per-head windows from there on
    flex        (CUDA) that FlexAttention call at every N; *flex, ieee* (float32) the same with
                FlexAttention's default float32 products instead of compiled.CUDA_FLOAT32_PRECISION
    readable    (CUDA) `multiscale_attention_fast_torch`, the grouped kernels written for the
                CPU: what a GPU ran before the dispatch
Times are medians of interleaved repeats; memory is the extra peak resident memory of one call.
A last table times the band kernel's chunk size c for one head (forward + backward, relative to
one full head), the measurement behind its default.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minattn.course.bench import (  # noqa: E402
    bench_args,
    fmt_bytes,
    fmt_time,
    forward_backward,
    forward_only,
    machine_record,
    markdown_table,
    max_differences,
    measured_on,
    peak_memory,
    provenance,
    run_benchmark,
    save_json,
    time_interleaved,
)
from minattn.fast import flex
from minattn.fast import flex as compiled  # the compiled route and the dispatch:
from minattn.fast import flex as dispatch  # both in minattn/fast/flex.py
from minattn.fast.attention import attention_fast_torch
from minattn.fast.multiscale import (
    BAND_FROM,
    DENSE_BELOW,
    band_attention_fast_torch,
    multiscale_attention_fast_torch,
    multiscale_attention_routed_fast_torch,
)
from minattn.multiscale import scale_mask_torch

H, D = 8, 64
MASKED_MAX = 2048  # the (H, N, N) bool mask and its float copy: 160 MiB at N = 2,048
MASKED_MAX_CUDA = 8192  # on a GPU: 512 MiB of bool mask, 2 GiB of float bias at B = 4


def windows(n: int) -> list[int]:
    return [3, 3, n // 16, n // 16, n // 8, n // 8, n // 4, n // 2]


def batch(device) -> int:
    return 4 if device.type == "cuda" else 1


def contenders(n: int, device, dtype) -> dict:
    ws = windows(n)
    cuda = device.type == "cuda"
    fns = {"full": lambda q, k, v: attention_fast_torch(q, k, v),
           "multiscale": lambda q, k, v: multiscale_attention_routed_fast_torch(q, k, v, ws)}
    if not cuda:  # on CUDA no group runs on its own: grouping is the readable path
        fns["grouped"] = lambda q, k, v: multiscale_attention_fast_torch(q, k, v, ws,
                                                                         dense_below=0)
    if cuda:
        fns["readable"] = lambda q, k, v: multiscale_attention_fast_torch(q, k, v, ws)
        fns["flex"] = lambda q, k, v: flex.flex_multiscale_attention(q, k, v, ws)
        if dtype == torch.float32:
            fns["flex, ieee"] = lambda q, k, v: ieee(flex.flex_multiscale_attention, q, k, v, ws)
    if n <= (MASKED_MAX_CUDA if cuda else MASKED_MAX):
        mask = scale_mask_torch(n, ws, device)  # built once, outside the timed call
        fns["masked"] = lambda q, k, v: attention_fast_torch(q, k, v, mask=mask)
    if n <= MASKED_MAX:
        zeros = torch.zeros(1, H, n, n, device=device, dtype=dtype)
        fns["zero mask"] = lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                          attn_mask=zeros)
    return fns


def ieee(fn, *args):
    """fn(*args) with FlexAttention's default float32 products ("ieee") instead of ours."""
    old, compiled.CUDA_FLOAT32_PRECISION = compiled.CUDA_FLOAT32_PRECISION, "ieee"
    try:
        return fn(*args)
    finally:
        compiled.CUDA_FLOAT32_PRECISION = old


def measure(n: int, repeats: int, device, dtype) -> dict:
    gen = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(batch(device), H, n, D, generator=gen).to(device, dtype)
               .requires_grad_() for _ in range(3))
    fns = contenders(n, device, dtype)
    # the multi-scale contenders against the masked definition where it fits (full attention
    # and its zero mask compute something else)
    same = {m: f for m, f in fns.items() if m not in ("full", "zero mask")}
    reference = next(m for m in ("masked", "grouped", "readable") if m in same)
    return {"n": n, "windows": windows(n),
            "route": dispatch.choose_kernel(device, n, dtype, D, pattern="multiscale"),
            "max_diff_vs": reference,
            "max_diff": max_differences(same, reference, q, k, v),
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
                lambda q, k, v, w=w, c=c: band_attention_fast_torch(q, k, v, w, c), q, k, v)
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
    run_benchmark(args, measure_all, render)


def measure_all(args) -> dict:
    """Every measurement of one run, saved with --json: what `render` needs."""
    device, dtype = args.device, args.dtype
    cuda = device.type == "cuda"
    if cuda:
        sizes = [1024, 4096, 8192] if args.quick else [1024, 2048, 4096, 8192, 16384]
    else:
        sizes = [256, 384, 512, 1024, 2048] if args.quick else [256, 384, 512, 1024, 2048,
                                                                 4096, 8192]
    repeats = args.repeats or (10 if cuda else 3)
    print(f"multi-scale attention, B={batch(device)}, H={H}, d={D}, {dtype}, {device}, "
          f"{repeats} interleaved repeats (medians)")
    results = []
    for n in sizes:
        results.append(measure(n, repeats, device, dtype))
        print(f"N={n} done", flush=True)
    chunk_rows = [] if cuda else measure_chunks(sizes[-2], repeats)  # the CPU's band kernel
    constants = {"DENSE_BELOW": DENSE_BELOW, "BAND_FROM": BAND_FROM}
    if cuda:
        constants["MULTISCALE_FLEX_FROM"] = dispatch.MULTISCALE_FLEX_FROM[dtype]
        constants["CUDA_FLOAT32_PRECISION"] = compiled.CUDA_FLOAT32_PRECISION
    payload = {"benchmark": "multiscale", "B": batch(device), "H": H, "d": D,
               "quick": args.quick, "repeats": repeats, "constants": constants,
               "results": results, "band_kernel_chunks": chunk_rows}
    save_json(args.json, payload, device, dtype)
    return dict(payload, machine=machine_record(device, dtype))


GOAL = {"float32": 1.1, "bfloat16": 1.0, "float16": 1.0}  # multiscale / full, fwd+bwd, N >= 4k


def render(payload: dict, source=None) -> tuple[str, str]:
    """(section name, Markdown) of a run, measured now or loaded from its JSON (`source`)."""
    machine, results = payload["machine"], payload["results"]
    cuda = str(machine.get("device", "cpu")).startswith("cuda")
    dtype_name = machine.get("dtype") or "float32"
    names = ["full", "zero mask", "masked", "grouped", "multiscale", "flex", "flex, ieee",
             "readable"]
    names = [m for m in names if any(m in r["fwd_bwd_s"] for r in results)]
    rows = []
    for r in results:
        row = {"N": r["n"], "route": r["route"]}
        for key, label in (("fwd_s", "fwd"), ("fwd_bwd_s", "fwd+bwd")):
            t = r[key]
            for m in names:
                row[f"{m} {label}"] = fmt_time(t.get(m))
            row[f"full / multiscale {label}"] = f"{t['full'] / t['multiscale']:.2f}×"
        for m in names:
            row[f"{m} mem"] = fmt_bytes(r["fwd_bwd_mem"].get(m))
        rows.append(row)
    first = ["N", "route"] if cuda else ["N"]
    t1 = markdown_table(rows, first + [f"{m} fwd" for m in names] + ["full / multiscale fwd"])
    t2 = markdown_table(rows, first + [f"{m} fwd+bwd" for m in names]
                        + ["full / multiscale fwd+bwd"])
    t3 = markdown_table(rows, first + [f"{m} mem" for m in names])
    constants = ", ".join(f"{k} = {v}" for k, v in payload.get("constants", {}).items())
    head = (f"Measured on {measured_on(machine)}: B = {payload['B']}, H = {payload['H']}, "
            f"d = {payload['d']}, {dtype_name}, {provenance(payload, source)}"
            + (f"; {constants}" if constants else "")
            + ". Scales per layer: {3, 3, N/16, N/16, N/8, N/8, N/4, N/2}. A ratio > 1 means "
            "the multi-scale layer is faster than 8 full heads.")
    tables = (f"Forward time\n\n{t1}\n\nForward + backward time\n\n{t2}\n\nExtra peak memory, "
              f"forward + backward\n\n{t3}\n")
    if all("max_diff" in r for r in results):  # (runs saved before they were compared lack it)
        diffs = [{"N": r["n"], "reference": r["max_diff_vs"], "max abs diff": ", ".join(
            f"{m} {x:.1e}" for m, x in r["max_diff"].items())} for r in results]
        tables += ("\nLargest difference of each multi-scale forward from the reference's (the "
                   "masked definition where it fits)\n\n"
                   f"{markdown_table(diffs, ['N', 'reference', 'max abs diff'])}\n")
    quick = " --quick" if payload.get("quick") else ""
    if cuda:
        goal = GOAL.get(dtype_name, 1.0)
        lines = [f"| N = {r['n']:,}: multi-scale fwd+bwd ≤ {goal}× full-head SDPA | multiscale "
                 f"/ full = {x:.2f} ({r['route']}) | {'yes' if x <= goal else 'no'} |"
                 for r in results if r["n"] >= 4096
                 for x in [r["fwd_bwd_s"]["multiscale"] / r["fwd_bwd_s"]["full"]]]
        flag = "" if dtype_name == "float32" else f" --dtype {dtype_name}"
        if "MULTISCALE_FLEX_FROM" not in payload.get("constants", {}):
            head += (" (This run predates the one-call dense route: where its route says dense, "
                     "*multiscale* made one call per group of heads; the *masked* column is the "
                     "one call the dense route makes now.)")
        return (f"multiscale-cuda-{dtype_name}",
                f"## Multi-scale attention on CUDA ({dtype_name}): `benchmarks/multiscale.py "
                f"--device cuda{flag}{quick}`\n\n{head} *readable* forces the readable kernels; "
                "*multiscale* is the layer as shipped then (its route per N in the route column)."
                f"\n\n{tables}\n### Goal on CUDA\n\n| goal | this run | met? |\n|---|---|---|\n"
                + "\n".join(lines) + "\n")
    chunks = payload.get("band_kernel_chunks") or []
    t4 = markdown_table(chunks, ["N", "ω", "window share", "c=32", "c=64", "c=128", "c=256"])
    return ("multiscale",
            f"## Multi-scale attention (`benchmarks/multiscale.py`{quick})\n\n{head}\n\n"
            f"{tables}\nBand kernel, one head, forward + backward: time per chunk size c as a "
            f"multiple of one full head's (window share = the ideal)\n\n{t4}\n")


if __name__ == "__main__":
    main()
