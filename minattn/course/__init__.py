"""The plumbing the lessons and benchmarks use — nothing here is an attention mechanism.

    lesson     smoke mode, figures, `show(fn)` / `show(fn_np, fn_torch)`, paper claims
    checkout   a lesson runs with its own checkout's minattn; an unimplemented exercise
               stops it in one line
    train      the training loop (tqdm bar, History)
    utils      seeding, device choice, `fail()` and the input checks every mechanism uses
    bench      benchmark timing and memory; tables (`fmt_*`, `print_table`) are torch-free
    fetch      checksummed, atomic downloads (imports no torch: data scripts stay light)
    data       loaders for the fetched datasets
    course     `make course`: notebooks, executed lessons, the report; prose and verdict
               check its numbers and the claims' verdicts
    pages      the executed notebooks tidied, their HTML (formulas typeset offline), the
               index, and a check of the pages in headless Chromium
    gpu_tier   `make test-gpu`
    encoder    the course's MiniLM (`load_minilm`) and the cache of its token states
    task_heads lesson 07: Bible verse pairs mined against words, lexical lines, baselines,
               training until the validation curve stops rising, the deletion analysis

The classroom (student copies, the check, grading, the audit) is minattn/course/classroom/: no
lesson imports it.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout this package lives in
