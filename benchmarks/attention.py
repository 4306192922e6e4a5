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

import torch
import torch.nn.functional as F

from minattn.attention import attention_np, attention_torch
from minattn.course.bench import (
    bench_args,
    device_name,
    fmt_bytes,
    fmt_time,
    machine_record,
    markdown_table,
    measured_on,
    peak_memory,
    provenance,
    run_benchmark,
    save_json,
    time_interleaved,
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
    run_benchmark(args, measure_all, render)


def measure_all(args) -> dict:
    """Every measurement of one run, saved with --json: what `render` needs."""
    device, dtype = args.device, args.dtype
    sizes = [512, 1024, 2048] if args.quick else [512, 1024, 2048, 4096, 8192]
    repeats = args.repeats or (3 if args.quick else 5)
    B, H, d = 1, 4, 64
    print(f"dense attention, B={B}, H={H}, d={d}, {str(dtype).removeprefix('torch.')}, "
          f"device={device} ({device_name(device)}), "
          f"torch threads={torch.get_num_threads()}, {repeats} interleaved repeats (medians)")
    raw = []
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
        print(f"N={n} done", flush=True)
    payload = {"benchmark": "attention", "B": B, "H": H, "d": d, "quick": args.quick,
               "repeats": repeats, "results": raw}
    save_json(args.json, payload, device, dtype)
    return dict(payload, machine=machine_record(device, dtype))


def render(payload: dict, source=None) -> tuple[str, str]:
    """(section name, Markdown) of a run, measured now or loaded from its JSON (`source`)."""
    machine, raw = payload["machine"], payload["results"]
    rows = []
    for r in raw:
        fwd, both = r["forward_s"], r["forward_backward_s"]
        mem, mem_both = r["peak_forward_bytes"], r["peak_forward_backward_bytes"]
        row = {"N": r["n"]}
        for name in fwd:
            row[f"{name} fwd"] = fmt_time(fwd[name])
        row["minattn / SDPA fwd"] = f"{fwd['minattn torch'] / fwd['SDPA']:.1f}×"
        for name in both:
            row[f"{name} fwd+bwd"] = fmt_time(both[name])
        row["minattn / SDPA fwd+bwd"] = f"{both['minattn torch'] / both['SDPA']:.1f}×"
        for name in mem:
            row[f"{name} mem"] = fmt_bytes(mem[name])
        row["minattn / SDPA mem"] = (f"{mem['minattn torch'] / mem['SDPA']:.0f}×"
                                     if mem["SDPA"] and mem["minattn torch"] else "—")
        for name in mem_both:
            row[f"{name} mem fwd+bwd"] = fmt_bytes(mem_both[name])
        rows.append(row)
    names, trained = list(raw[0]["forward_s"]), list(raw[0]["forward_backward_s"])
    tables = {
        "Forward time (median)": markdown_table(
            rows, ["N"] + [f"{n} fwd" for n in names] + ["minattn / SDPA fwd"]),
        "Forward + backward time (median)": markdown_table(
            rows, ["N"] + [f"{n} fwd+bwd" for n in trained] + ["minattn / SDPA fwd+bwd"]),
        "Extra peak memory of one forward": markdown_table(
            rows, ["N"] + [f"{n} mem" for n in names] + ["minattn / SDPA mem"]),
        "Extra peak memory of one forward + backward": markdown_table(
            rows, ["N"] + [f"{n} mem fwd+bwd" for n in trained]),
    }
    device = str(machine.get("device", "cpu")).split(":")[0]
    load = machine.get("load_average")
    parts = ["## Dense attention: `benchmarks/attention.py`", "",
             f"NumPy (`attention_np`), the textbook three torch lines, lesson 01's "
             f"`attention_torch` and PyTorch's fused `F.scaled_dot_product_attention`. "
             f"B = {payload['B']}, H = {payload['H']}, d = {payload['d']}, "
             f"{machine.get('dtype') or 'float32'}, no mask, measured on {measured_on(machine)}, "
             f"{provenance(payload, source)}"
             + (f", load average at the end of the run {load:.1f}" if load else "")
             + f", N = {', '.join(str(r['n']) for r in raw)}. The explicit versions store the "
             "N × N weights, SDPA never does: the memory columns grow as N² for them and as N "
             "for it.", ""]
    for title, text in tables.items():
        parts += [f"*{title}*", "", text, ""]
    return ("attention" if device == "cpu" else f"attention-{device}"), "\n".join(parts)


if __name__ == "__main__":
    main()
