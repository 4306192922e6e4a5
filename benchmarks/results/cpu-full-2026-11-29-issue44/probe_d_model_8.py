"""Lesson 01's reversal at d_model = 8: do learned positions and sinusoids separate off the
ceiling? Three seeds per table, 3,000 steps, evaluated every 50 steps on lesson 01's held-out
set (1,024 sequences of N = 16, generator seed 10,000); prints each run's last ten checks.
Run from the repository root with OMP_NUM_THREADS=1 .venv/bin/python <this file>.
"""
import time

import torch

from minattn.course.attention import reversal, train_reversal

torch.set_num_threads(1)
held_out = reversal(1024, 16, 32, torch.Generator().manual_seed(10_000))
for positions in ("sinusoid", "learned"):
    for seed in (0, 1, 2):
        start = time.time()
        _, h = train_reversal(positions, seed, held_out, n_symbols=32, steps=3000, eval_every=50,
                              d_model=8)
        print(positions, seed, f"{time.time() - start:.1f}s",
              [f"{a:.4f}" for a in h["accuracy"][-10:]], flush=True)
