"""Benchmark plumbing shared by `benchmarks/*.py` and the small live timings of lessons 01, 03, 07.

The machine these run on is noisy, so every benchmark
  * interleaves its contenders (A B C A B C ... rather than A A A B B B),
  * reports medians of repeats,
  * compares contenders measured side by side in the same run (ratios, not absolute times).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import time
from pathlib import Path
from typing import Callable

import torch

from .tables import fmt_bytes, fmt_time, markdown_table, print_table

# What the benchmarks import from here; the table helpers live in the torch-free tables.py.
__all__ = ["DTYPES", "bench_args", "count_operations", "device_name", "fmt_bytes", "fmt_time",
           "forward_backward", "forward_only", "load_json", "machine_record", "markdown_table",
           "measured_on", "peak_memory", "print_table", "provenance", "run_benchmark",
           "save_json", "sync", "time_interleaved", "time_repeats",
           "write_markdown"]

DTYPES = ("float32", "float16", "bfloat16", "float64")


def bench_args(description: str, dtypes=("float32",), devices=("cpu", "cuda"),
               argv=None) -> argparse.Namespace:
    """The flags every benchmark takes: --quick, --json PATH, --repeats R, --markdown,
    --device (one of the device types in `devices`; default: MINATTN_DEVICE, else cuda when
    available and measured, else cpu) and --dtype (one of `dtypes`, the first by default).
    args.device is a torch.device, args.dtype a torch dtype."""
    from .utils import pick_device

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats (seconds)")
    parser.add_argument("--json", type=Path, default=None, help="save the measurements here")
    parser.add_argument("--repeats", type=int, default=None, help="repeats per measurement")
    parser.add_argument("--markdown", action="store_true",
                        help="also write the tables into benchmarks/README.md (its own section)")
    parser.add_argument("--device", default=None,
                        help="cpu or cuda (default: MINATTN_DEVICE, else cuda when available)")
    parser.add_argument("--dtype", default=dtypes[0], choices=list(dtypes),
                        help=f"floating-point type of the inputs (default {dtypes[0]})")
    parser.add_argument("--from-json", type=Path, default=None, metavar="PATH",
                        help="measure nothing: render the tables from a JSON this benchmark "
                             "saved with --json (on any machine; --markdown writes them)")
    args = parser.parse_args(argv)
    if args.from_json is not None:  # what was measured where is in the file
        args.device, args.dtype = torch.device("cpu"), getattr(torch, args.dtype)
        return args
    args.device = pick_device(args.device)
    if args.device.type not in devices:
        parser.error(f"--device {args.device}: this benchmark measures {' and '.join(devices)} "
                     "only")
    if args.device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: this torch ({torch.__version__}) sees no CUDA "
                     "device")
    args.dtype = getattr(torch, args.dtype)
    return args


def device_name(device) -> str:
    """The GPU's name, or the CPU's model name (Linux), for the record of a measurement."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "cpu"


def write_markdown(name: str, text: str, path: Path | None = None) -> Path:
    """Replace this benchmark's section of benchmarks/README.md with `text`.

    The section sits between `<!-- BEGIN name -->` and `<!-- END name -->` (appended when
    missing), so every benchmark rewrites only its own tables and nobody copies them by hand.
    """
    from . import REPO_ROOT

    path = path or REPO_ROOT / "benchmarks" / "README.md"
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    block = f"{begin}\n{text.strip()}\n{end}"
    if begin in old and end in old:
        new = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(new)
    tmp.replace(path)
    print(f"wrote the {name} section of {path}")
    return path


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_repeats(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
                 device="cpu", timer: Callable[[], float] = time.perf_counter
                 ) -> dict[str, list[float]]:
    """{name: [seconds, one per repeat]}: each callable run `warmup` times outside the clock
    (a GPU compiles, caches warm), then all run round-robin `repeats` times, each timed
    between two synchronisations of the device.

    timer: time.process_time measures one-thread CPU work robustly on a busy machine (the
    wall clock also counts the time spent waiting for a core); on a GPU keep the wall clock.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            sync(device)
            t0 = timer()
            fn()
            sync(device)
            times[name].append(timer() - t0)
    return times


def time_interleaved(fns: dict[str, Callable[[], object]], repeats: int,
                     warmup: int = 1, device="cpu",
                     timer: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median time (seconds) of each callable over `time_repeats`' round-robin repeats."""
    return {name: statistics.median(ts)
            for name, ts in time_repeats(fns, repeats, warmup, device, timer).items()}


def forward_only(fn: Callable, q, k, v) -> Callable[[], None]:
    """A timed call of an attention function `fn(q, k, v)`, without autograd."""
    def run():
        with torch.no_grad():
            fn(q, k, v)
    return run


def forward_backward(fn: Callable, q, k, v) -> Callable[[], None]:
    """A timed call of `fn(q, k, v)` and its backward, grads reset after. The output gradient
    (ones, (..., Lq, dv)) is made once, outside the timed and measured call."""
    grad = torch.ones(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)

    def run():
        fn(q, k, v).backward(grad)
        q.grad = k.grad = v.grad = None
    return run


def max_differences(fns: dict[str, Callable], reference: str, q, k, v) -> dict[str, float]:
    """Each contender's largest absolute difference from `reference`'s forward output on
    (q, k, v), in float32: contenders that are timed against each other compute the same
    numbers, up to rounding. An output of another shape is refused (a difference would
    broadcast (H, 1) against (1, H) without a word)."""
    with torch.no_grad():
        ref = fns[reference](q, k, v).float()
        outs = {name: f(q, k, v).float() for name, f in fns.items() if name != reference}
    wrong = {name: tuple(out.shape) for name, out in outs.items() if out.shape != ref.shape}
    if wrong:
        raise RuntimeError(f"contenders returned shapes {wrong}, not {tuple(ref.shape)}")
    return {name: float((out - ref).abs().max()) for name, out in outs.items()}


# Operations that only re-read memory (no kernel runs for them on a GPU).
VIEW_OPS = {"view", "_unsafe_view", "t", "transpose", "expand", "slice", "select", "unsqueeze",
            "squeeze", "alias", "detach", "permute", "as_strided", "unbind", "split",
            "split_with_sizes", "_reshape_alias", "reshape", "flatten", "unflatten"}


def count_operations(fn: Callable[[], object]) -> dict[str, int]:
    """The aten operations one call of `fn` dispatches, by name, views excluded: each one is
    (at least) one kernel launch on a GPU, where a small model is launch-bound. Counted on any
    device, the CPU included."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name not in VIEW_OPS:
                self.ops[name] += 1
            return func(*args, **(kwargs or {}))

    with Count() as mode:
        fn()
    return dict(mode.ops)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _return_freed_memory_to_the_os(measuring: bool = True) -> None:
    """Make glibc give every large block back to the OS when it is freed (and now), so the
    resident set measures what is live. Without this, freed blocks stay resident and a later
    measurement reuses them without the peak moving.

    measuring=False eases it after a measurement: with a 64 KiB threshold every later
    allocation above it is a fresh mmap that page-faults, and a model trained afterwards in
    the same process spent several times more system time (measured 8x in lesson 01). A 1 MiB
    threshold keeps a training step's tensors on the heap; larger blocks still come and go by
    mmap, so that the heap does not grow chunks a later measurement would quietly reuse (with
    32 MiB, explicit attention at N = 256 then read 62 bytes per N² instead of 46)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        mmap, trim = (64 * 1024, 64 * 1024) if measuring else (1 << 20, 2 << 20)
        libc.mallopt(M_MMAP_THRESHOLD, mmap)
        libc.mallopt(M_TRIM_THRESHOLD, trim)
        if measuring:
            libc.malloc_trim(0)
    except OSError:  # not glibc: measurements are upper bounds of the truth
        pass


def peak_memory(fn: Callable[[], object], device="cpu") -> float | None:
    """Extra peak memory (bytes) that running `fn` needs, measured in this process.

    CUDA: torch's own allocator statistics. CPU (Linux): the kernel's high-water mark of the
    resident set (VmHWM), reset just before the call by writing 5 to /proc/self/clear_refs,
    minus the resident set before the call. Returns None where that is not available.
    (An earlier version forked a child per measurement: fork after torch's OpenMP threads have
    started can deadlock, so we do not fork.)
    """
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        sync(device)
        return float(torch.cuda.max_memory_allocated() - base)
    try:
        _return_freed_memory_to_the_os()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak resident set to the current one
        before = _status_kib("VmRSS")
    except OSError:
        return None
    try:
        fn()
        return float(max(_status_kib("VmHWM") - before, 0) * 1024)
    finally:
        _return_freed_memory_to_the_os(measuring=False)


def machine_record(device="cpu", dtype=None) -> dict:
    """Where, when and with what a run measured: the `machine` entry of its JSON."""
    return {
        "date": time.strftime("%Y-%m-%d"),
        "load_average": os.getloadavg()[0],
        "device": str(device),
        "device_name": device_name(device),
        "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "cuda_version": torch.version.cuda,
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def save_json(path: Path | None, payload: dict, device="cpu", dtype=None) -> None:
    """Write the measurements (with the machine and device they came from) when --json was
    given."""
    if path is None:
        return
    payload = dict(payload, machine=machine_record(device, dtype))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(path)
    print(f"saved {path}")


def load_json(path: Path) -> dict:
    """A payload `save_json` wrote, for --from-json. A file saved before the date was recorded
    takes it from its path (the YYYY-MM-DD of a folder's name, as in benchmarks/results/)."""
    import re

    payload = json.loads(Path(path).read_text())
    machine = payload.setdefault("machine", {})
    if not machine.get("date"):
        found = re.search(r"\d{4}-\d{2}-\d{2}", str(Path(path).resolve()))
        machine["date"] = found.group(0) if found else None
    return payload


def measured_on(machine: dict) -> str:
    """Where and when a payload was measured: 'NVIDIA H100 80GB HBM3, torch 2.11.0+cu130
    (CUDA 13.0), 2026-11-26', or 'cpu (model), 1 torch thread(s), torch 2.13.0, <date>'."""
    if str(machine.get("device", "cpu")).startswith("cuda"):
        where = machine.get("device_name") or "cuda"
        version = f"torch {machine.get('torch', '?')}" + (
            f" (CUDA {machine['cuda_version']})" if machine.get("cuda_version") else "")
    else:
        where = (f"cpu ({machine.get('device_name', '?')}), {machine.get('threads', '?')} torch "
                 "thread(s)")
        version = f"torch {machine.get('torch', '?')}"
    return f"{where}, {version}, {machine.get('date') or 'date not recorded'}"


def provenance(payload: dict, source=None) -> str:
    """'10 interleaved repeats (medians); rendered from `benchmarks/results/...json`': how a
    section's numbers were taken, and the file it was rendered from (--from-json)."""
    from . import REPO_ROOT

    repeats = payload.get("repeats")
    text = (f"{repeats} interleaved repeats (medians)" if repeats
            else "medians of interleaved repeats (their number is not in the file)")
    if source is not None:
        path = Path(source).resolve()
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        text += f"; rendered from `{shown}`"
    return text


def run_benchmark(args, measure_all, render) -> None:
    """A benchmark's main: `measure_all(args)` -> payload (saved with --json), or with
    --from-json the payload of a saved run; `render(payload, source)` -> (section, Markdown),
    printed, and with --markdown written into its section of benchmarks/README.md."""
    payload = load_json(args.from_json) if args.from_json else measure_all(args)
    section, text = render(payload, args.from_json)
    print("\n" + text)
    if args.markdown:
        write_markdown(section, text)
