"""Dense attention: NumPy vs naive torch vs minattn vs PyTorch's fused SDPA.

    python benchmarks/attention.py            # N = 512 ... 8192 (a few minutes on 2 cores)
    python benchmarks/attention.py --quick    # N = 512 ... 2048 (seconds)
    python benchmarks/attention.py --json bench_results/attention.json
    python benchmarks/attention.py --markdown # also write the tables into benchmarks/README.md

B = 1, H = 4, d = 64, float32, no mask. Forward time for all four; forward+backward for the
three torch versions; extra peak memory of one forward (and one forward+backward). Contenders
are interleaved and each time is a median of repeats; read the ratio columns, which compare
numbers measured side by side in this run.
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F

from minattn.attention import attention_np, attention_torch
from minattn.tools.bench import (
    bench_args,
    device_name,
    fmt_bytes,
    fmt_time,
    peak_memory,
    print_table,
    save_json,
    time_interleaved,
    write_markdown,
)


def naive_torch(q, k, v):
    """The textbook three lines: no masking, no stability care beyond torch.softmax's own."""
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ v


def contenders(q, k, v, with_numpy: bool):
    """name -> (forward fn, forward+backward fn or None)."""
    qn, kn, vn = (t.detach().cpu().numpy() for t in (q, k, v)) if with_numpy else (None,) * 3

    def fwd_bwd(fn):
        def run():
            out = fn(q, k, v)
            out.sum().backward()
            q.grad = k.grad = v.grad = None
        return run

    def no_grad(fn):
        def run():
            with torch.no_grad():
                fn(q, k, v)
        return run

    torch_fns = {
        "naive torch": naive_torch,
        "minattn torch": lambda q, k, v: attention_torch(q, k, v)[0],
        "SDPA": F.scaled_dot_product_attention,
    }
    table = {}
    if with_numpy:
        table["NumPy"] = (lambda: attention_np(qn, kn, vn), None)
    for name, fn in torch_fns.items():
        table[name] = (no_grad(fn), fwd_bwd(fn))
    return table


def main():
    args = bench_args(__doc__.splitlines()[0], dtypes=("float32", "bfloat16", "float16",
                                                       "float64"))
    device, dtype = args.device, args.dtype
    sizes = [512, 1024, 2048] if args.quick else [512, 1024, 2048, 4096, 8192]
    repeats = args.repeats or (3 if args.quick else 5)
    B, H, d = 1, 4, 64
    print(f"dense attention, B={B}, H={H}, d={d}, {str(dtype).removeprefix('torch.')}, "
          f"device={device} ({device_name(device)}), "
          f"torch threads={torch.get_num_threads()}, {repeats} interleaved repeats (medians)\n")

    rows, raw = [], []
    for n in sizes:
        gen = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(B, H, n, d, generator=gen).to(device, dtype).requires_grad_()
                   for _ in range(3))
        table = contenders(q, k, v, with_numpy=device.type == "cpu"
                           and dtype in (torch.float32, torch.float64))
        fwd = time_interleaved({name: f for name, (f, _) in table.items()}, repeats, device=device)
        both = time_interleaved({name: fb for name, (_, fb) in table.items() if fb}, repeats,
                                device=device)
        mem = {name: peak_memory(f, device) for name, (f, _) in table.items()}
        mem_both = {name: peak_memory(fb, device) for name, (_, fb) in table.items() if fb}
        raw.append(dict(n=n, forward_s=fwd, forward_backward_s=both, peak_forward_bytes=mem,
                        peak_forward_backward_bytes=mem_both))
        row = {"N": n}
        for name in table:
            row[f"{name} fwd"] = fmt_time(fwd[name])
        row["minattn / SDPA fwd"] = f"{fwd['minattn torch'] / fwd['SDPA']:.1f}×"
        for name in both:
            row[f"{name} fwd+bwd"] = fmt_time(both[name])
        row["minattn / SDPA fwd+bwd"] = f"{both['minattn torch'] / both['SDPA']:.1f}×"
        for name in table:
            row[f"{name} mem"] = fmt_bytes(mem[name])
        row["minattn / SDPA mem"] = (f"{mem['minattn torch'] / mem['SDPA']:.0f}×"
                                     if mem["SDPA"] and mem["minattn torch"] else "—")
        for name in mem_both:
            row[f"{name} mem fwd+bwd"] = fmt_bytes(mem_both[name])
        rows.append(row)
        print(f"N={n} done", flush=True)

    names = list(table)
    tables = {}
    print(f"\nForward time (median of {repeats})")
    tables[f"Forward time (median of {repeats})"] = print_table(
        rows, ["N"] + [f"{n} fwd" for n in names] + ["minattn / SDPA fwd"])
    print(f"\nForward + backward time (median of {repeats})")
    tables[f"Forward + backward time (median of {repeats})"] = print_table(
        rows, ["N"] + [f"{n} fwd+bwd" for n in names if n != "NumPy"] + ["minattn / SDPA fwd+bwd"])
    print("\nExtra peak memory of one forward")
    tables["Extra peak memory of one forward"] = print_table(
        rows, ["N"] + [f"{n} mem" for n in names] + ["minattn / SDPA mem"])
    print("\nExtra peak memory of one forward + backward")
    tables["Extra peak memory of one forward + backward"] = print_table(
        rows, ["N"] + [f"{n} mem fwd+bwd" for n in names if n != "NumPy"])
    if args.markdown:
        parts = ["## Dense attention: `benchmarks/attention.py`", "",
                 f"NumPy (`attention_np`), the textbook three torch lines, lesson 01's "
                 f"`attention_torch` and PyTorch's fused `F.scaled_dot_product_attention`. "
                 f"B = {B}, H = {H}, d = {d}, {str(dtype).removeprefix('torch.')}, no mask, "
                 f"device = {device} ({device_name(device)}), torch threads = "
                 f"{torch.get_num_threads()}, {repeats} interleaved repeats (medians), "
                 f"load average at the end of the run {os.getloadavg()[0]:.1f}, "
                 f"N = {', '.join(map(str, sizes))}. The explicit versions store the N × N "
                 "weights, SDPA never does: the memory columns grow as N² for them and as N for "
                 "it.",
                 ""]
        for title, text in tables.items():
            parts += [f"*{title}*", "", text, ""]
        write_markdown("attention" if device.type == "cpu" else f"attention-{device.type}",
                       "\n".join(parts))
    save_json(args.json, {"benchmark": "attention", "B": B, "H": H, "d": d, "results": raw},
              device, dtype)


if __name__ == "__main__":
    main()
