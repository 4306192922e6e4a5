"""The plumbing of the course — nothing here is an attention mechanism.

    lesson     smoke mode, figures, `show(fn)`, paper claims for the course report
    train      the training loop (tqdm bar, History)
    utils      seeding, device choice, `fail()` and the input checks every mechanism uses
    bench      benchmark timing and memory; tables (`fmt_*`, `print_table`) are torch-free
    fetch      checksummed, atomic downloads (imports no torch: data scripts stay light)
    data       loaders for the fetched datasets
    course     `make course`: notebooks, executed lessons, the report
    exercises  student copies, the exercise check; grading (the gradebook), remote (a
               submission's functions run in their own process), sandbox (bubblewrap);
               exercise_audit (nothing in a student copy gives an answer away)
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout this package lives in
