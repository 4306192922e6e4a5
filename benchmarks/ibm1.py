"""IBM Model 1: the fast path minattn/fast/ibm1.py (NumPy, torch) against nltk.translate.IBMModel1.

    .venv/bin/python benchmarks/ibm1.py              # 10,000 pairs, then the full Bible corpus
    .venv/bin/python benchmarks/ibm1.py --quick      # 1,000 pairs, seconds
    .venv/bin/python benchmarks/ibm1.py --markdown   # also write the tables to benchmarks/README.md
    .venv/bin/python benchmarks/ibm1.py --json bench_results/ibm1.json

(minattn/ibm1.py, the readable reference, loops over sentence pairs on dense tables: it
is what the lesson teaches and the tests check the fast path against, not what is timed here.)

Source x = English (input), target y = German (output); NLTK gets AlignedSent(words=y, mots=x).
Both sides get the same token lists (tokenising is outside the clock). Measured side by side
in one run, interleaved, medians:
  * one EM iteration (NLTK: `model.train(bitext)`; ours: e_step_fast_np + m_step_fast_np in
    NLTK mode, and e_step_torch + m_step_torch on each device),
  * end to end, token lists in, translation table and Viterbi alignments out, 5 iterations
    (NLTK: IBMModel1(bitext, 5); ours: index_bitext + em_np + viterbi_np),
  * extra peak memory of one end-to-end run (in a fresh process), max |t_ours - t_nltk| over
    the table, and the number of target tokens whose Viterbi alignment differs (and whether
    only at ties: two source words whose t agree to 1e-12, broken differently by rounding).
Corpus: the Bible (en-de) from minattn.course.data when it has been fetched, otherwise a synthetic
corpus with similar sizes (dictionary_corpus); the table says which.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minattn.course.bench import (  # noqa: E402
    bench_args,
    fmt_bytes,
    fmt_time,
    machine_record,
    markdown_table,
    measured_on,
    provenance,
    run_benchmark,
    save_json,
    time_interleaved,
)
from minattn.course.lstm_attention import dictionary_corpus  # noqa: E402
from minattn.fast.ibm1 import (  # noqa: E402
    e_step_fast_np,
    e_step_fast_torch,
    em_fast_np,
    index_bitext,
    m_step_fast_np,
    m_step_fast_torch,
    nltk_table_fast_np,
    uniform_table_fast_np,
    viterbi_fast_np,
)
from minattn.ibm1 import MIN_PROB, nltk_bitext  # noqa: E402

ITERATIONS = 5


def load_corpus(n_pairs: int | None):
    """(name, sources, targets): Bible verses when available, else a synthetic stand-in."""
    try:
        from minattn.course.data import DatasetMissing, load_parallel, tokenize
        try:
            pairs = load_parallel(pair="en-de")
            pairs = pairs if n_pairs is None else pairs[:n_pairs]
            return (f"Bible en-de ({len(pairs):,} verses)",
                    [tokenize(en) for en, _ in pairs], [tokenize(de) for _, de in pairs])
        except DatasetMissing as exc:
            print(f"Bible not fetched ({exc}); using a synthetic corpus")
    except ImportError:
        print("minattn.course.data not available; using a synthetic corpus")
    n = n_pairs or 31_102
    src, tgt, _ = dictionary_corpus(n, 8000, np.random.default_rng(0), length=(10, 40),
                                         n_function=20)
    return f"synthetic ({n:,} pairs, 8,000 words, 10-40 tokens)", src, tgt


def ours_end_to_end(src, tgt):
    indexed = index_bitext(src, tgt)
    t, _ = em_fast_np(indexed, ITERATIONS, mode="nltk")
    return indexed, t, viterbi_fast_np(t, indexed)


def nltk_end_to_end(src, tgt):
    from nltk.translate import IBMModel1

    bitext = nltk_bitext(src, tgt)
    return IBMModel1(bitext, ITERATIONS), bitext


CONTENDERS = {"ours NumPy": ours_end_to_end, "NLTK": nltk_end_to_end}


def fresh_peak_memory(name: str, n_pairs: int | None) -> float | None:
    """Extra peak memory (bytes) of one end-to-end run, measured in a fresh Python process:
    peak resident set (VmHWM, reset once the corpus is loaded) minus the resident set then.
    (A forked child would inherit the parent's heap, which hides what pure Python allocates.)"""
    cmd = [sys.executable, __file__, "--memory-child", name, str(n_pairs or 0)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return float(json.loads(proc.stdout.strip().splitlines()[-1])["extra_bytes"])
    except (ValueError, IndexError, KeyError):
        print(f"memory measurement of {name} failed: {proc.stderr[-500:]}")
        return None


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def memory_child(name: str, n_pairs: int) -> None:
    _, src, tgt = load_corpus(n_pairs or None)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:    # reset the peak (VmHWM) to the current RSS
        f.write("5")
    before = _status_kib("VmRSS")
    CONTENDERS[name](src, tgt)
    print(json.dumps({"extra_bytes": max(_status_kib("VmHWM") - before, 0) * 1024}))


def compare(src, tgt, repeats: int, nltk: str, tag: str, n_pairs: int | None):
    """Time per EM iteration and end to end; returns table rows and the raw numbers.

    nltk="interleaved": NLTK takes part in every measurement; nltk="once": NLTK runs end to
    end a single time after ours (the full corpus, where one NLTK run takes minutes).
    """
    raw, last = {}, {}
    indexed = index_bitext(src, tgt)
    print(f"{tag}: {indexed.n_pairs:,} pairs, {len(indexed.src_vocab) - 1:,} source / "
          f"{len(indexed.tgt_vocab):,} target words, {len(indexed.tgt_ids):,} target tokens, "
          f"{len(indexed.point_entry):,} alignment points, "
          f"{len(indexed.entry_src):,} table entries")
    raw["sizes"] = dict(pairs=indexed.n_pairs, src_words=len(indexed.src_vocab) - 1,
                        tgt_words=len(indexed.tgt_vocab), tgt_tokens=len(indexed.tgt_ids),
                        points=len(indexed.point_entry), entries=len(indexed.entry_src))

    # --- one EM iteration -------------------------------------------------------------
    state = {"t": uniform_table_fast_np(indexed)}

    def ours_step():
        counts, _ = e_step_fast_np(state["t"], indexed, "nltk")
        state["t"] = m_step_fast_np(counts, indexed, MIN_PROB)

    step_fns = {"ours NumPy": ours_step}
    for device in ["cpu"] + ([str(DEVICE)] if DEVICE.type == "cuda" else []):
        tstate = {"t": torch.as_tensor(uniform_table_fast_np(indexed), device=device)}

        def torch_step(tstate=tstate):
            counts, _ = e_step_fast_torch(tstate["t"], indexed, "nltk")
            tstate["t"] = m_step_fast_torch(counts, indexed, MIN_PROB)

        step_fns[f"ours torch {device}"] = torch_step
    if nltk == "interleaved":
        from nltk.translate import IBMModel1

        bitext = nltk_bitext(src, tgt)
        model = IBMModel1(bitext, 0)
        step_fns["NLTK"] = lambda: model.train(bitext)
    step = time_interleaved(step_fns, repeats=repeats, warmup=1, device=DEVICE)
    raw["iteration_s"] = step

    # --- end to end -------------------------------------------------------------------
    def ours():
        last["ours"] = ours_end_to_end(src, tgt)

    def theirs():
        last["nltk"] = nltk_end_to_end(src, tgt)

    e2e_fns = {"ours NumPy": ours}
    if nltk == "interleaved":
        e2e_fns["NLTK"] = theirs
    e2e = time_interleaved(e2e_fns, repeats=repeats, warmup=0)
    if nltk == "once":
        start = time.perf_counter()
        theirs()
        e2e["NLTK"] = time.perf_counter() - start
    mem = {name: fresh_peak_memory(name, n_pairs) for name in e2e}
    raw["end_to_end_s"], raw["peak_bytes"] = e2e, mem

    ours_indexed, t, a = last["ours"]
    model, bitext = last["nltk"]
    raw["max_abs_diff"] = float(np.abs(t - nltk_table_fast_np(model, ours_indexed)).max())
    # NLTK's Viterbi choice per target token (-1 = NULL), then: where the two differ, is it a
    # tie (two source words whose t agree to 1e-12, broken differently by rounding)?
    theirs_a = np.concatenate([[-1 if i is None else i for _, i in sorted(s.alignment)]
                               for s in bitext])
    differ = np.flatnonzero(a != theirs_a)
    diff_rows = ours_indexed.tgt_tok_row[differ]
    first_src = ours_indexed.src_start[ours_indexed.row_pair[diff_rows]]

    def t_at(choice):  # t(y_j | x_choice) for the differing tokens; choice -1 = NULL
        i = choice[differ]
        item = np.where(i < 0, -1, ours_indexed.src_tok_bag[first_src + np.maximum(i, 0)])
        return t[ours_indexed.seg_entry[ours_indexed.seg_start[diff_rows] + 1 + item]]

    raw["alignment_differs"] = int(len(differ))
    raw["alignment_differs_not_tie"] = int((np.abs(t_at(a) - t_at(theirs_a)) > 1e-12).sum())
    raw["target_tokens"] = int(len(a))
    raw["corpus"] = tag
    return table_rows(raw), raw


def table_rows(raw: dict) -> list[dict]:
    """The table's rows of one corpus's measurements."""
    step, e2e, mem, rows = raw["iteration_s"], raw["end_to_end_s"], raw["peak_bytes"], []
    for name in list(step) + [n for n in e2e if n not in step]:
        row = {"corpus": raw["corpus"], "implementation": name}
        if name in step:
            row["EM iteration"] = fmt_time(step[name])
            if "NLTK" in step:
                row["iteration speed-up"] = f"{step['NLTK'] / step[name]:.0f}×"
        if name in e2e:
            row["end to end (5 it.)"] = fmt_time(e2e[name])
            row["end-to-end speed-up"] = f"{e2e['NLTK'] / e2e[name]:.1f}×"
            row["peak memory"] = fmt_bytes(mem[name])
        rows.append(row)
    return rows


DEVICE = torch.device("cpu")  # --device cuda adds the torch EM on that GPU


def main() -> None:
    args = bench_args(__doc__.splitlines()[0])
    run_benchmark(args, measure_all, render)


def measure_all(args) -> dict:
    """Every measurement of one run, saved with --json: what `render` needs."""
    global DEVICE
    DEVICE = args.device
    quick = args.quick
    repeats = args.repeats or (2 if quick else 3)
    t0, load_start = time.perf_counter(), os.getloadavg()[0]
    n_first = 1_000 if quick else 10_000
    name, src, tgt = load_corpus(n_first)
    results = {"main": compare(src, tgt, repeats, nltk="interleaved", tag=name,
                               n_pairs=n_first)[1]}
    if not quick:  # the whole corpus: ours with repeats, NLTK once (one run takes minutes)
        name_full, src, tgt = load_corpus(None)
        results["full"] = compare(src, tgt, repeats, nltk="once", tag=name_full,
                                  n_pairs=None)[1]
    payload = {"benchmark": "ibm1", "quick": quick, "repeats": repeats, "results": results,
               "seconds": time.perf_counter() - t0, "load_average_start": load_start}
    save_json(args.json, payload, args.device)
    return dict(payload, machine=machine_record(args.device))


def render(payload: dict, source=None) -> tuple[str, str]:
    """(section name, Markdown) of a run, measured now or loaded from its JSON (`source`)."""
    columns = ["corpus", "implementation", "EM iteration", "iteration speed-up",
               "end to end (5 it.)", "end-to-end speed-up", "peak memory"]
    results = payload["results"]
    table = markdown_table([row for res in results.values() for row in table_rows(res)], columns)
    notes = []
    for key, res in results.items():
        if "max_abs_diff" in res:
            notes.append(f"{key}: max |t_ours - t_nltk| = {res['max_abs_diff']:.2e}; Viterbi "
                         f"alignments differ for {res['alignment_differs']:,} of "
                         f"{res['target_tokens']:,} target tokens, "
                         f"{res['alignment_differs_not_tie']} of them not at a tie "
                         f"(|t difference| > 1e-12)")
    machine = payload["machine"]
    load = (f"; load average {payload['load_average_start']:.1f} at the start, "
            f"{machine['load_average']:.1f} at the end, on {machine.get('cpu_count')} cores"
            if payload.get("load_average_start") is not None and machine.get("load_average")
            else "")
    seconds = f"; {payload['seconds']:.0f} s in all" if payload.get("seconds") else ""
    notes.append(f"(measured on {measured_on(machine)}, {provenance(payload, source)}; NLTK on "
                 f"the full corpus: one run{seconds}{load})")
    quick = " --quick" if payload.get("quick") else ""
    return "ibm1", "\n".join([
        "## IBM Model 1: minattn.ibm1 (fast path) vs NLTK",
        "",
        f"`python benchmarks/ibm1.py{quick} --markdown`: NLTK-compatible mode, {ITERATIONS} EM "
        "iterations end to end (token lists in, table and Viterbi alignments out); one EM "
        "iteration alone; goals: >= 100x per iteration and >= 30x end to end on 10,000 verse "
        "pairs.",
        "", table, "", *[f"- {n}" for n in notes]])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--memory-child":
        memory_child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
