"""The GPU tier (`make test-gpu`): the `cuda`-marked tests, then every lesson on the GPU.

    python -m minattn.course.gpu_tier                  # cuda tests + every lesson, smoke mode
    python -m minattn.course.gpu_tier --only 02 03     # only these lessons
    python -m minattn.course.gpu_tier --full 01 04     # also these lessons at full scale (timed)
    python -m minattn.course.gpu_tier --full all       # ... every lesson, after the smoke runs
    python -m minattn.course.gpu_tier --no-tests       # lessons only
    python -m minattn.course.gpu_tier --list           # what it would run (any machine)

No notebooks: each lesson runs as a script, `python lessons/NN_x.py`, so jupytext, nbclient
and nbformat are not needed (nothing on this path imports them). Every lesson runs with
MINATTN_DEVICE=cuda (and MINATTN_SMOKE=1 unless --full), its output goes to
<out>/<mode>_<lesson>.log and its figures to <out>/figures/. It prints one line per lesson,
ok or FAILED and the seconds it took; a lesson is ok only when it exits with 0 *and* its
first line says it ran on cuda. The cuda tests count as ok only when some ran and none
failed. Without a CUDA device the tier says so and exits with 2: nothing passes vacuously.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from . import REPO_ROOT

NOTEBOOK_PACKAGES = ("jupytext", "nbclient", "nbformat", "nbconvert", "ipykernel")
RAN_ON_CUDA = re.compile(r"^\[\S+\] .* on cuda", re.MULTILINE)  # Lesson's first line


def lesson_paths(only=None) -> list[Path]:
    """lessons/NN_*.py in order; `only` keeps those whose number or stem is listed."""
    paths = sorted((REPO_ROOT / "lessons").glob("[0-9][0-9]_*.py"))
    if only:
        paths = [p for p in paths if p.stem[:2] in only or p.stem in only]
    return paths


def lesson_env(out: Path, full: bool) -> dict:
    env = dict(os.environ, MINATTN_DEVICE="cuda", MPLBACKEND="Agg", PYTHONUNBUFFERED="1",
               MINATTN_FIGURES=str(out / "figures"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                         os.environ.get("PYTHONPATH")])))
    env.pop("MINATTN_SCALE", None)
    if full:
        env.pop("MINATTN_SMOKE", None)
    else:
        env["MINATTN_SMOKE"] = "1"
    return env


def run_lesson(path: Path, out: Path, full: bool, timeout: float) -> tuple[bool, float, str]:
    """(ok, seconds, why not) of one lesson run as a script on CUDA."""
    mode = "full" if full else "smoke"
    log = out / f"{mode}_{path.stem}.log"
    start = time.perf_counter()
    with open(log, "w") as f:
        try:
            rc = subprocess.run([sys.executable, str(path)], cwd=REPO_ROOT, stdout=f,
                                stderr=subprocess.STDOUT, env=lesson_env(out, full),
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    seconds = time.perf_counter() - start
    text = log.read_text(errors="replace")
    if rc != 0:
        return False, seconds, f"exit {rc}" if rc != "timeout" else f"over {timeout:.0f} s"
    if not RAN_ON_CUDA.search(text):
        return False, seconds, "did not run on cuda (see its first line)"
    return True, seconds, ""


def cuda_test_files() -> list[Path]:
    """The test files that hold cuda-marked tests. pytest collects only these: collecting the
    others imports the notebook packages, which a GPU machine's own Python may lack."""
    return sorted(p for p in (REPO_ROOT / "tests").glob("test_*.py")
                  if "mark.cuda" in p.read_text(encoding="utf-8"))


def run_cuda_tests(out: Path, timeout: float) -> tuple[bool, float, str, list[str]]:
    """pytest -m cuda over `cuda_test_files()`: (ok, seconds, counts, skipped tests with
    reasons)."""
    report = out / "cuda_tests.xml"
    start = time.perf_counter()
    with open(out / "cuda_tests.log", "w") as f:
        try:
            rc = subprocess.run([sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-rs",
                                 "-p", "no:cacheprovider", f"--junitxml={report}",
                                 *map(str, cuda_test_files())],
                                cwd=REPO_ROOT, stdout=f, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    seconds = time.perf_counter() - start
    if not report.exists():
        return False, seconds, f"pytest exit {rc}, no report", []
    cases = list(ET.parse(report).getroot().iter("testcase"))
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    skipped = [f"{c.get('classname')}::{c.get('name')}: {c.find('skipped').get('message')}"
               for c in cases if c.find("skipped") is not None]
    passed = len(cases) - len(failed) - len(skipped)
    counts = f"{passed} passed, {len(failed)} failed, {len(skipped)} skipped"
    return rc == 0 and passed > 0 and not failed, seconds, counts, skipped


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=None, metavar="NN", help="only these lessons")
    p.add_argument("--full", nargs="*", default=[], metavar="NN",
                   help="also run these lessons at full scale ('all': every lesson)")
    p.add_argument("--no-tests", action="store_true", help="skip the cuda-marked tests")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "gpu_logs", help="logs and figures")
    p.add_argument("--timeout", type=float, default=600, help="seconds per smoke lesson")
    p.add_argument("--full-timeout", type=float, default=1800, help="seconds per full lesson")
    p.add_argument("--list", action="store_true", help="print what would run, run nothing")
    args = p.parse_args(argv)
    smoke = lesson_paths(args.only)
    full = lesson_paths(None if "all" in args.full else args.full) if args.full else []
    tests = f"tests  pytest -m cuda ({len(cuda_test_files())} files of tests/ with cuda tests)"
    plan = ([] if args.no_tests else [tests]) + \
        [f"smoke  {p.relative_to(REPO_ROOT)}" for p in smoke] + \
        [f"full   {p.relative_to(REPO_ROOT)}" for p in full]
    if args.list:
        print("\n".join(plan))
        return 0

    import torch

    if not torch.cuda.is_available():
        print(f"GPU tier: no CUDA device (torch {torch.__version__}, built with CUDA "
              f"{torch.version.cuda or 'none'}): nothing was run. It needs a machine with a GPU.")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"GPU tier on {torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA "
          f"{torch.version.cuda}); logs in {args.out}", flush=True)
    failures, start = 0, time.perf_counter()
    if not args.no_tests:
        ok, seconds, counts, skipped = run_cuda_tests(args.out, 3600)
        failures += not ok
        print(f"tests  {'cuda-marked':24} {'ok' if ok else 'FAILED':6} {seconds:8.1f} s  "
              f"({counts})", flush=True)
        for line in skipped:
            print(f"         skipped {line}")
        if not ok:
            print(_tail(args.out / "cuda_tests.log", 15))
    for paths, is_full, timeout in ((smoke, False, args.timeout), (full, True, args.full_timeout)):
        for path in paths:
            ok, seconds, why = run_lesson(path, args.out, is_full, timeout)
            failures += not ok
            mode = "full" if is_full else "smoke"
            print(f"{mode:6} {path.stem:24} {'ok' if ok else 'FAILED':6} {seconds:8.1f} s"
                  + (f"  ({why})" if why else ""), flush=True)
            if not ok:
                print(_tail(args.out / f"{mode}_{path.stem}.log", 8))
    total = time.perf_counter() - start
    print(f"GPU tier: {'all ok' if not failures else f'{failures} FAILED'} "
          f"({len(plan)} runs, {total:.0f} s)")
    return 0 if not failures else 1


def _tail(path: Path, n: int) -> str:
    lines = path.read_text(errors="replace").splitlines()[-n:] if path.exists() else []
    return "\n".join("         | " + line for line in lines)


if __name__ == "__main__":
    sys.exit(main())
