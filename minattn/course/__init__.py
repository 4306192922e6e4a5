"""The course around the mechanisms: nothing here is an attention mechanism.

The machinery every lesson shares:
    lesson     smoke/full/paper scale, seeds (MINATTN_SEED), figures, `show(fn)`, and
               `lesson.claim(...)`: one printed row per paper claim, decided where it is measured
    settings   every MINATTN_* variable, checked in one place (a bad value: one line)
    stats      the outcome rule: estimates, the tests a claim calls, gates on training curves
    train      the training loop (tqdm bar, History)
    utils      seeding, device choice;  plots, tables: figure and table helpers
    checkout   a lesson runs with its own checkout's minattn; an unimplemented exercise
               stops it in one line
    bench      benchmark timing and memory
    fetch, data  checksummed downloads and the loaders of the fetched datasets
    course, pages, prose, report  `make course`: executed notebooks, their HTML, the index,
               the check that the prose states only numbers the run printed, REPORT.md
    gpu_tier   `make test-gpu`

One module per lesson with what its experiments need beyond the mechanism (tasks, data,
training runs, read-outs, figures): attention (01), sparse (02), multiscale (03), xl (04),
lstm_attention (05, 06), task_heads and encoder (07), agreement (08).

The classroom (student copies, the check, grading, the audit) is minattn/course/classroom/: no
lesson imports it.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout this package lives in
